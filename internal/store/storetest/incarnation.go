package storetest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/store"
)

// A promotion records the source incarnation on the checkpoint; a later
// promotion of another incarnation is fenced (it would continue the old
// progress in the new source); one without an incarnation keeps it
// (docs/design.md#source-incarnations).
func testIncarnationRecordedAndFenced(t *testing.T, s store.Store) {
	cp := create(t, s, key, "C0")
	require.Empty(t, cp.Incarnation)
	p := promotion(cp, "C1", "w1")
	p.Incarnation = "sha256:aaaaaaaaaaaaaaaa"
	p.Watermark = integer(300)
	cp = promote(t, s, p)
	require.Equal(t, "sha256:aaaaaaaaaaaaaaaa", cp.Incarnation)
	requireStored(t, s, cp)

	other := promotion(cp, "C2", "w2")
	other.Incarnation = "sha256:bbbbbbbbbbbbbbbb"
	_, err := s.Promote(ctx(t), other)
	fe := requireWinner(t, err, cp)
	assert.Contains(t, fe.Reason, "incarnation")

	same := promotion(cp, "C2", "w2")
	same.Incarnation = cp.Incarnation
	cp = promote(t, s, same)
	none := promotion(cp, "C3", "w3")
	cp = promote(t, s, none)
	require.Equal(t, "sha256:aaaaaaaaaaaaaaaa", cp.Incarnation, "a promotion without an incarnation keeps the stored one")
	requireStored(t, s, cp)
}

// A reset into a new incarnation is one conditional write: fenced by the
// stored cursor, generation and lease like a promotion, it clears the
// watermark, the applied boundary and the complete mark (the coordinates
// restart), records the incarnation and the epoch of the change, and it
// is refused unless its epoch is newer than the stored checkpoint's: the
// old incarnation's watermark is never lowered within one epoch.
func testIncarnationReset(t *testing.T, s store.Store) {
	cp := create(t, s, key, "C0")
	p := promotion(cp, "since=300", "w1")
	p.Incarnation = "sha256:aaaaaaaaaaaaaaaa"
	p.Watermark = integer(300)
	p.Applied, p.HasApplied, p.AppliedID = coord.IntPosition(300), true, "doc-300"
	p.Epoch = 2
	cp = promote(t, s, p)

	reset := func(from store.Checkpoint, epoch uint64) store.Promotion {
		r := promotion(from, "", "incarnation:sha256:bbbbbbbbbbbbbbbb")
		r.Reset, r.Incarnation, r.Epoch = true, "sha256:bbbbbbbbbbbbbbbb", epoch
		return r
	}
	_, err := s.Promote(ctx(t), reset(cp, 2))
	fe := requireWinner(t, err, cp)
	assert.Contains(t, fe.Reason, "newer membership epoch")

	stale := reset(cp, 3)
	stale.FromGeneration = 1
	_, err = s.Promote(ctx(t), stale)
	requireWinner(t, err, cp)

	r := reset(cp, 3)
	got := promote(t, s, r)
	want := store.Checkpoint{Key: key, Cursor: nil, Generation: 3, Epoch: 3, PromotedWitness: r.WitnessID,
		Incarnation: "sha256:bbbbbbbbbbbbbbbb", IncarnationEpoch: 3}
	if len(got.Cursor) == 0 {
		got.Cursor = nil
	}
	require.Equal(t, want, got)
	requireStored(t, s, got)

	// The repeat of the applied reset (its response lost) is recognised.
	again, err := s.Promote(ctx(t), r)
	require.NoError(t, err)
	require.Equal(t, uint64(3), again.Generation)

	// The new incarnation's progress starts over, from any watermark.
	next := promotion(got, "since=20", "w3")
	next.Incarnation = got.Incarnation
	next.Watermark = integer(20)
	next.Applied, next.HasApplied = coord.IntPosition(20), true
	got = promote(t, s, next)
	require.Equal(t, integer(20), got.Watermark)
	require.Equal(t, uint64(3), got.IncarnationEpoch, "later promotions keep the epoch of the change")
	requireStored(t, s, got)
}

// The members whose incarnation change awaits its proof travel with the
// membership record, with the epoch that recorded the change; a change of
// a non-member is refused.
func testMembershipIncarnationsRoundTrip(t *testing.T, s store.Store) {
	const scope = "couch"
	e1 := store.Membership{Scope: scope, Epoch: 1, Partitions: []string{"db1", "db2"}, Proven: true}
	_, err := s.SwapMembership(ctx(t), 0, e1)
	require.NoError(t, err)
	e2 := store.Membership{Scope: scope, Epoch: 2, Partitions: []string{"db1", "db2"}, Unproven: []string{"db1"},
		Reason: "db1: incarnation changed", Incarnations: map[string]uint64{"db1": 2}}
	_, err = s.SwapMembership(ctx(t), 1, e2)
	require.NoError(t, err)
	loaded, err := s.LoadMembership(ctx(t), scope)
	require.NoError(t, err)
	require.Equal(t, map[string]uint64{"db1": 2}, loaded.Incarnations)

	e3 := store.Membership{Scope: scope, Epoch: 3, Partitions: []string{"db1", "db2"}, Proven: true}
	_, err = s.SwapMembership(ctx(t), 2, e3)
	require.NoError(t, err)
	loaded, err = s.LoadMembership(ctx(t), scope)
	require.NoError(t, err)
	require.Empty(t, loaded.Incarnations)

	_, err = s.SwapMembership(ctx(t), 3, store.Membership{Scope: scope, Epoch: 4, Partitions: []string{"db1"}, Incarnations: map[string]uint64{"db9": 4}})
	require.ErrorIs(t, err, store.ErrInvalid, "incarnation change of a non-member")
}
