package dynamostore

import (
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/dynalitetest"
	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/store"
)

// Witnesses stored one item a page, as every release before group commit
// wrote them (a raw PutItem of that item, no group attributes), are read
// next to the groups the current store writes: a load after an upgrade
// sees both, their receipts and dispositions still update in place, and
// pruning deletes both kinds below the generation while keeping a group
// that holds a witness above it. Two 100-event pages (16 bytes an event)
// in one group are one write of four units where alone they were two
// writes of two units: group commit saves writes, not units.
func TestWitnessesOfTheOneItemAPageLayoutAreReadNextToGroups(t *testing.T) {
	dynalitetest.Endpoint(t)
	s := newTestStore(t)
	ctx := t.Context()
	k := store.Key{Scope: "orders", Partition: "p0"}
	page := func(gen uint64, attempt string, first int) reconcile.Witness {
		events := make([]reconcile.EventWitness, 100)
		for i := range events {
			events[i] = reconcile.EventWitness{IDHash: reconcile.HashID(fmt.Sprintf("evt-%d", first+i)), Position: coord.IntPosition(int64(first + i)), Digest: reconcile.HashPayload([]byte(fmt.Sprint(first + i)))}
		}
		return reconcile.Witness{Scope: k.Scope, Partition: k.Partition, Generation: gen, InputCursor: fmt.Appendf(nil, "C%d", gen), AttemptID: attempt, Events: events, Successor: fmt.Appendf(nil, "C%d", gen+1), Disposition: reconcile.Pending}
	}
	old := []reconcile.Witness{page(3, "a3", 201), page(4, "a4", 301), page(6, "b6", 501)}
	for _, w := range old {
		it := witnessItem(w)
		_, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: it})
		require.NoError(t, err)
		require.Greater(t, ItemSize(it), 1024, "one item a page: two write units")
	}
	grp := []reconcile.Witness{page(5, "a5", 401), page(6, "a6", 501)}
	require.NoError(t, s.PutWitnesses(ctx, grp))
	size := ItemSize(groupItem(grp))
	require.Greater(t, size, 3*1024)
	require.LessOrEqual(t, size, 4*1024, "two pages in one group: four write units, one write")

	require.NoError(t, s.RecordReceipt(ctx, k, 4, "a4", 10))
	require.NoError(t, s.SetDisposition(ctx, k, 6, "b6", reconcile.Abandoned))
	require.NoError(t, s.RecordReceipt(ctx, k, 6, "a6", 20))
	old[1].AckedThrough = 10
	old[2].Disposition = reconcile.Abandoned
	grp[1].AckedThrough = 20

	got, err := s.WitnessesFrom(ctx, k, 3)
	require.NoError(t, err)
	require.Equal(t, []reconcile.Witness{old[0], old[1], grp[0], grp[1], old[2]}, got)
	got, err = s.Witnesses(ctx, k, 6)
	require.NoError(t, err)
	require.Equal(t, []reconcile.Witness{grp[1], old[2]}, got)

	_, err = s.PruneWitnesses(ctx, k, 6)
	require.NoError(t, err)
	for _, gen := range []uint64{3, 4} {
		got, err = s.Witnesses(ctx, k, gen)
		require.NoError(t, err)
		require.Empty(t, got, "generation %d", gen)
	}
	got, err = s.WitnessesFrom(ctx, k, 6)
	require.NoError(t, err)
	require.Equal(t, []reconcile.Witness{grp[1], old[2]}, got, "the group of 5 and 6 stays while 6 is read")
}
