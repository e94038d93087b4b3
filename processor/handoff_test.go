package processor

import (
	"context"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/store/memstore"
)

// processAs runs one message of partition, emitted by the lease holder
// owner under epoch 1, through p.
func processAs(t *testing.T, p *frontierProcessor, partition, owner string) meta {
	t.Helper()
	msg := service.NewMessage([]byte(`{}`))
	msg.MetaSetMut(metaPartition, partition)
	msg.MetaSetMut(metaLeaseOwner, owner)
	msg.MetaSetMut(metaEpoch, "1")
	batch, err := p.Process(context.Background(), msg)
	require.NoError(t, err)
	return readMeta(batch[0])
}

// When a partition changes hands, the new holder's processor attaches a
// frontier no lower than the one the old holder's processor attached to
// the partition's earlier messages: each attaches only what was durably
// published, and a new holder reads the published record before its
// first message. Instance a's process runs the input (its feed and its
// publisher) and a processor; instance b's processor is in another
// process (source: store) and last read the store long ago.
func TestPartitionFrontierNeverGoesBackWhenAPartitionChangesHands(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	scope := newScope(t)
	w := writer{t: t, st: st, scope: scope}
	_, err := st.SwapMembership(ctx, 0, store.Membership{Scope: scope, Epoch: 1, Partitions: []string{"p1", "p2"}, Proven: true})
	require.NoError(t, err)
	w.create("p1")
	w.create("p2")
	w.promote("p1", 190)
	w.promote("p2", 500)

	viewA, err := NewView(ViewConfig{Scope: scope, Feed: hubFor(scope), FromFeed: true, Refresh: time.Hour}, st, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = viewA.Close(ctx) })
	viewB, err := NewView(ViewConfig{Scope: scope, Feed: hubFor(scope), Refresh: time.Hour}, st, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = viewB.Close(ctx) })

	// b holds p2 and has read the store once.
	require.Equal(t, "190", processAs(t, viewB, "p2", "b").Frontier)
	require.Equal(t, "190", processAs(t, viewA, "p1", "a").Frontier)

	// a promotes p1 to 230; the feed has it at once, the record once a's
	// publisher has run.
	cp, err := st.LoadCheckpoint(ctx, w.key("p1"))
	require.NoError(t, err)
	next, err := st.Promote(ctx, w.promotion(cp, 230))
	require.NoError(t, err)
	hubFor(next.Scope).Publish(next.Scope, next.Partition, next.Watermark)
	before := processAs(t, viewA, "p1", "a")
	require.Equal(t, "190", before.Frontier, "a watermark not yet published is not attached")
	w.publish()
	attachedByA := processAs(t, viewA, "p1", "a")
	require.Equal(t, "230", attachedByA.Frontier)
	require.JSONEq(t, `{"p1":230,"p2":500}`, attachedByA.Vector)

	// p1 moves to b: its first message there carries at least what a
	// attached to p1's earlier messages.
	m := processAs(t, viewB, "p1", "b")
	require.Equal(t, "230", m.Frontier, "the new holder attached a lower frontier than the old one")
	require.JSONEq(t, `{"p1":230,"p2":500}`, m.Vector)
}

// A message the input emitted under a lease its process no longer holds
// (paused longer than the lease, or taken over) gets no frontier: the new
// holder may have attached a lower one already.
func TestPartitionFrontierSkipsMessagesOfALeaseNoLongerHeld(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	scope := newScope(t)
	w := writer{t: t, st: st, scope: scope}
	_, err := st.SwapMembership(ctx, 0, store.Membership{Scope: scope, Epoch: 1, Partitions: []string{"p1"}, Proven: true})
	require.NoError(t, err)
	w.create("p1")
	w.promote("p1", 190)

	held := true
	hubFor(scope).SetLeaseHolder(scope, func(partition, owner string, counter uint64, _ time.Time) bool {
		return held && partition == "p1" && owner == "a#1" && counter == 3
	})
	view, err := NewView(ViewConfig{Scope: scope, Feed: hubFor(scope), FromFeed: true, Refresh: time.Hour}, st, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = view.Close(ctx) })
	process := func(counter string) meta {
		msg := service.NewMessage([]byte(`{}`))
		msg.MetaSetMut(metaPartition, "p1")
		msg.MetaSetMut(metaLeaseOwner, "a#1")
		msg.MetaSetMut(metaLeaseCounter, counter)
		msg.MetaSetMut(metaEpoch, "1")
		batch, err := view.Process(ctx, msg)
		require.NoError(t, err)
		return readMeta(batch[0])
	}
	require.Equal(t, "190", process("3").Frontier, "under the held lease")
	require.False(t, process("2").HasFrontier, "under an older lease of the partition")
	held = false
	require.False(t, process("3").HasFrontier, "after the lease was lost")
}
