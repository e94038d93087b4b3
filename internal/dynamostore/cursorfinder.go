package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tidemark/tidemark/internal/store"
)

// MaxCursorScanPages bounds KeysHoldingCursor: a table larger than this
// many Scan pages (1 MB each) is not searched to its end, and the search
// says so.
const MaxCursorScanPages = 1000

// ErrScanIncomplete is returned (with what was found) when KeysHoldingCursor
// stopped at MaxCursorScanPages.
var ErrScanIncomplete = errors.New("dynamostore: the cursor search stopped before the end of the table")

// KeysHoldingCursor implements store.CursorFinder with a Scan of the table
// (keys only, filtered on the checkpoints' cur and the witnesses' in and
// succ), each page under the store's call deadline. It is an operator's
// tool: it reads the whole table, at most MaxCursorScanPages pages.
func (s *DynamoStore) KeysHoldingCursor(ctx context.Context, cursor []byte, except string, limit int) ([]store.Key, error) {
	if len(cursor) == 0 {
		return nil, nil
	}
	e := newExpr()
	c := e.v("c", avB(cursor))
	filter := fmt.Sprintf("%s = %s OR %s = %s OR %s = %s", e.n(attrCursor), c, e.n(attrInput), c, e.n(attrSuccessor), c)
	pages := dynamodb.NewScanPaginator(s.client, &dynamodb.ScanInput{
		TableName:                 aws.String(s.table),
		FilterExpression:          aws.String(filter),
		ProjectionExpression:      aws.String(e.n(attrPK)),
		ExpressionAttributeNames:  e.names,
		ExpressionAttributeValues: e.vals(),
	})
	found := map[store.Key]bool{}
	for n := 0; pages.HasMorePages(); n++ {
		if n == MaxCursorScanPages {
			return store.SortedKeys(found, limit), fmt.Errorf("%w (%d pages read)", ErrScanIncomplete, n)
		}
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, s.wrap("scan for a cursor in", tableName(s.table), err)
		}
		for _, it := range page.Items {
			pk, err := getS(it, attrPK)
			if err != nil || strings.Count(pk, "#") != 1 {
				continue // a scope record or a cache entry, not a partition's item
			}
			k, err := parseCheckpointPK(pk)
			if err != nil || k.Scope == except {
				continue
			}
			found[k] = true
		}
	}
	return store.SortedKeys(found, limit), nil
}

type tableName string

func (t tableName) String() string { return "table " + string(t) }
