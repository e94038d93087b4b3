package cache

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

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
	pages := dynamodb.NewQueryPaginator(s.client, &dynamodb.QueryInput{
		TableName:                 aws.String(s.table),
		KeyConditionExpression:    aws.String(cond),
		ExpressionAttributeNames:  e.names,
		ExpressionAttributeValues: e.vals(),
		ConsistentRead:            aws.Bool(true),
	})
	var out []witness.Witness
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, s.wrap("read witnesses of", k, err)
		}
		for _, it := range page.Items {
			w, err := decodeWitness(it)
			if err != nil {
				return nil, err
			}
			out = append(out, w)
		}
	}
	store.SortByGenerationAttempt(out)
	return out, nil
}
