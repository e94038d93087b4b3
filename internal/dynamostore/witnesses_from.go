package dynamostore

import (
	"context"
	"fmt"

	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/witness"
)

// WitnessesFrom implements store.Store with one consistent Query over the
// sort-key range witness#<from>… (generations are zero-padded, so the range
// is exactly the generations at or above from).
func (s *DynamoStore) WitnessesFrom(ctx context.Context, k store.Key, fromGeneration uint64) ([]witness.Witness, error) {
	if err := k.Validate(); err != nil {
		return nil, err
	}
	e := newExpr()
	cond := fmt.Sprintf("%s = %s AND %s BETWEEN %s AND %s", e.n(attrPK), e.v("pk", avS(checkpointPK(k))), e.n(attrSK),
		e.v("lo", avS(witnessPrefix(fromGeneration))), e.v("hi", avS(skWitnessPrefix+"~")))
	out, err := s.queryWitnesses(ctx, k, e, cond)
	if err != nil {
		return nil, err
	}
	store.SortByGenerationAttempt(out)
	return out, nil
}
