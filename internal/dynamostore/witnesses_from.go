package dynamostore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/store"
)

// WitnessesFrom implements store.Store with one consistent Query over the
// sort-key range witness#<from-(store.MaxWitnessGroup-1)>… (generations are
// zero-padded, so the range is exactly the generations at or above it:
// the witnesses at or above from, alone or in a group that began before
// from, witness_group.go).
func (s *DynamoStore) WitnessesFrom(ctx context.Context, k store.Key, fromGeneration uint64) ([]reconcile.Witness, error) {
	if err := k.Validate(); err != nil {
		return nil, err
	}
	e := newExpr()
	cond := fmt.Sprintf("%s = %s AND %s BETWEEN %s AND %s", e.n(attrPK), e.v("pk", avS(checkpointPK(k))), e.n(attrSK),
		e.v("lo", avS(witnessPrefix(groupFloor(fromGeneration)))), e.v("hi", avS(skWitnessPrefix+"~")))
	out, err := s.queryWitnesses(ctx, k, e, cond, func(g uint64) bool { return g >= fromGeneration })
	if err != nil {
		return nil, err
	}
	store.SortByGenerationAttempt(out)
	return out, nil
}

// PruneWitnesses implements store.Store: one consistent Query of the keys
// of the witnesses of k below generation below (sk BETWEEN "witness#0…" and
// the prefix of below, with each group's last generation), then
// BatchWriteItem deletes of 25 keys at a time. A group whose last
// generation is at or above below is kept (it holds a witness still
// read). Each deleted item costs a write unit; with witness_ttl
// DynamoDB's TTL deletes them for free instead.
func (s *DynamoStore) PruneWitnesses(ctx context.Context, k store.Key, below uint64) (int, error) {
	if err := k.Validate(); err != nil {
		return 0, err
	}
	if below <= 1 {
		return 0, nil
	}
	e := newExpr()
	cond := fmt.Sprintf("%s = %s AND %s BETWEEN %s AND %s", e.n(attrPK), e.v("pk", avS(checkpointPK(k))), e.n(attrSK),
		e.v("lo", avS(witnessPrefix(0))), e.v("hi", avS(witnessPrefix(below-1)+"~")))
	items, err := s.queryItems(ctx, e, cond, e.n(attrPK)+", "+e.n(attrSK)+", "+e.n(attrGroupLast))
	if err != nil {
		return 0, s.wrap("list witnesses to prune of", k, err)
	}
	keys := items[:0]
	for _, it := range items {
		if last, grouped, err := getU(it, attrGroupLast); err != nil {
			return 0, err
		} else if grouped && last >= below {
			continue
		}
		keys = append(keys, item{attrPK: it[attrPK], attrSK: it[attrSK]})
	}
	return s.batchDelete(ctx, keys, "witnesses", k)
}

// batchDelete deletes the items keys names, 25 to a BatchWriteItem, each
// batch's unprocessed items sent again (at most 8 times, backing off from
// 10 ms); it returns how many were deleted. noun names what they are in
// errors ("witnesses", "receipts").
func (s *DynamoStore) batchDelete(ctx context.Context, keys []item, noun string, k store.Key) (int, error) {
	n := 0
	for chunk := range slices.Chunk(keys, 25) {
		reqs := make([]types.WriteRequest, len(chunk))
		for i, key := range chunk {
			reqs[i] = types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: key}}
		}
		pending := map[string][]types.WriteRequest{s.table: reqs}
		for try := 0; len(pending[s.table]) > 0; try++ {
			if try > 8 {
				return n, fmt.Errorf("dynamostore: pruning %s of %s: %d deletes left unprocessed", noun, k, len(pending[s.table]))
			}
			out, err := s.client.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: pending})
			if err != nil {
				return n, s.wrap("prune "+noun+" of", k, err)
			}
			n += len(pending[s.table]) - len(out.UnprocessedItems[s.table])
			pending = out.UnprocessedItems
			if len(pending[s.table]) > 0 {
				time.Sleep(time.Duration(10<<try) * time.Millisecond)
			}
		}
	}
	return n, nil
}
