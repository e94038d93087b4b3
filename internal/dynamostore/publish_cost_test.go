package dynamostore

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/publish"
	"github.com/tidemark/tidemark/internal/store"
)

// An idle frontier publisher on DynamoDB sends the same two GetItems per
// round at 10 and at 1,200 partitions (the membership epoch and the
// frontier root), and no other request.
func TestIdlePublisherRequestsAreIndependentOfPartitions(t *testing.T) {
	perRound := map[int]map[string]int64{}
	for _, n := range []int{10, 1200} {
		rc := NewRequestCounter()
		s := newTestStore(t, func(c *DynamoConfig) { c.ClientOptions = append(c.ClientOptions, rc.Option()) })
		ctx := t.Context()
		scope := fmt.Sprintf("idle-%d", n)
		names := make([]string, n)
		for i := range names {
			names[i] = fmt.Sprintf("p%05d", i)
			cp, err := s.CreateCheckpoint(ctx, store.Checkpoint{Key: store.Key{Scope: scope, Partition: names[i]}, Cursor: []byte("c"), Generation: 1, Epoch: 1})
			require.NoError(t, err)
			_, err = s.Promote(ctx, store.Promotion{Key: cp.Key, FromCursor: cp.Cursor, FromGeneration: 1, To: []byte("d"), WitnessID: "w", Watermark: coord.Integer(int64(100 + i)), Epoch: 1})
			require.NoError(t, err)
		}
		_, err := s.SwapMembership(ctx, 0, store.Membership{Scope: scope, Epoch: 1, Partitions: names, Proven: true})
		require.NoError(t, err)
		pub := publish.NewPublisher(s, scope)
		_, f, _, err := pub.Round(ctx)
		require.NoError(t, err)
		require.Equal(t, coord.Integer(100), f.Scalar)
		_, err = pub.Prepare(ctx) // reads back the shards it wrote
		require.NoError(t, err)
		const rounds = 5
		rc.Reset()
		for range rounds {
			r, _, _, err := pub.Round(ctx)
			require.NoError(t, err)
			require.Nil(t, r.Next)
		}
		got := rc.Snapshot()
		for op := range got {
			got[op] /= rounds
		}
		perRound[n] = got
	}
	require.Equal(t, map[string]int64{"GetItem": 2}, perRound[10], "requests per idle round at 10 partitions")
	require.Equal(t, perRound[10], perRound[1200], "requests per idle round at 10 and 1,200 partitions")
}
