package storetest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/store"
)

// grouper is the store's group commit (every store of the suite has one).
func grouper(t *testing.T, s store.Store) store.WitnessGrouper {
	t.Helper()
	g, ok := s.(store.WitnessGrouper)
	require.True(t, ok, "%T does not group witnesses (store.WitnessGrouper)", s)
	return g
}

// group is three witnesses of generations 5, 6 and 7, each the page whose
// successor the next one was fetched from.
func group() []reconcile.Witness {
	a := newWitness(key, 5, "a5", page(1, 3), "N6")
	b := newWitness(key, 6, "a6", page(4, 3), "N7")
	b.InputCursor = []byte("N6")
	b.Marker = []byte("snap")
	b.CompleteThrough = coord.Integer(6)
	c := newWitness(key, 7, "a7", nil, "N8")
	c.InputCursor = []byte("N7")
	c.Sealed = true
	return []reconcile.Witness{a, b, c}
}

// A group of witnesses written in one PutWitnesses reads back, generation
// by generation, exactly as if each had been written alone, next to
// witnesses written alone (the layout of one item a witness, which every
// earlier release wrote); writing the group again is a no-op, and a group
// one of whose witnesses is stored with other content is fenced with
// nothing of it written.
func testWitnessGroups(t *testing.T, s store.Store) {
	g := grouper(t, s)
	ws := group()
	alone := newWitness(key, 6, "a6-alone", page(4, 2), "N7b")
	alone.InputCursor = []byte("N6")
	require.NoError(t, s.PutWitness(ctx(t), alone))
	before := newWitness(key, 4, "a4", page(1, 1), "N5")
	require.NoError(t, s.PutWitness(ctx(t), before))
	require.NoError(t, g.PutWitnesses(ctx(t), ws))

	require.Equal(t, []reconcile.Witness{before}, witnesses(t, s, key, 4))
	require.Equal(t, []reconcile.Witness{ws[0]}, witnesses(t, s, key, 5))
	require.Equal(t, []reconcile.Witness{ws[1], alone}, witnesses(t, s, key, 6), "a group's witness and one written alone, in attempt order")
	require.Equal(t, []reconcile.Witness{ws[2]}, witnesses(t, s, key, 7))
	require.Empty(t, witnesses(t, s, key, 8))
	from, err := s.WitnessesFrom(ctx(t), key, 6)
	require.NoError(t, err)
	require.Equal(t, []reconcile.Witness{ws[1], alone, ws[2]}, from)

	require.NoError(t, g.PutWitnesses(ctx(t), group()), "the same group again is a no-op")

	other := group()
	other[0].Successor = []byte("N6-other")
	other[1].AttemptID, other[2].AttemptID = "b6", "b7"
	requireFence(t, g.PutWitnesses(ctx(t), other))
	require.Equal(t, []reconcile.Witness{ws[0]}, witnesses(t, s, key, 5), "a fenced group writes nothing")
	require.Equal(t, []reconcile.Witness{ws[1], alone}, witnesses(t, s, key, 6))
	require.Equal(t, []reconcile.Witness{ws[2]}, witnesses(t, s, key, 7))

	// Whatever a group's later witnesses carry is kept: an input cursor
	// that is not the previous witness's successor, receipts, a final
	// disposition, an attempt id sharing nothing with the first's, compact
	// event witnesses.
	odd := []reconcile.Witness{newWitness(key, 20, "x20", page(1, 2), "N21"), newWitness(key, 22, "y22", nil, "")}
	odd[1].InputCursor, odd[1].Successor = []byte("elsewhere"), nil
	odd[1].Events = []reconcile.EventWitness{reconcile.EventOfCompact(reconcile.Event{ID: "e9", Position: coord.IntPosition(9), Payload: []byte("p")}), reconcile.EventOfCompact(reconcile.Event{ID: "e10", Position: coord.IntPosition(10)})}
	odd[1].AckedThrough, odd[1].Disposition = 1, reconcile.Promoted
	require.NoError(t, g.PutWitnesses(ctx(t), odd))
	require.Equal(t, odd[1:], witnesses(t, s, key, 22))

	bad := group()
	bad[2].Generation = 5 + store.MaxWitnessGroup
	require.ErrorIs(t, g.PutWitnesses(ctx(t), bad), store.ErrInvalid, "a group spans fewer than MaxWitnessGroup generations")
	bad = group()
	bad[1].Generation = 5
	require.ErrorIs(t, g.PutWitnesses(ctx(t), bad), store.ErrInvalid, "generations strictly increase")
	bad = group()
	bad[1].Partition = "p1"
	require.ErrorIs(t, g.PutWitnesses(ctx(t), bad), store.ErrInvalid, "one partition")
}

// The receipts and dispositions of witnesses written in a group behave as
// those of witnesses written alone: receipts only rise and are bounded by
// the events, dispositions move once from pending.
func testWitnessGroupReceiptsAndDispositions(t *testing.T, s store.Store) {
	ws := group()
	require.NoError(t, grouper(t, s).PutWitnesses(ctx(t), ws))
	acked := func(gen uint64) int { return witnesses(t, s, key, gen)[0].AckedThrough }
	for _, w := range ws[:2] {
		require.NoError(t, s.RecordReceipt(ctx(t), key, w.Generation, w.AttemptID, 2))
		require.Equal(t, 2, acked(w.Generation))
		require.NoError(t, s.RecordReceipt(ctx(t), key, w.Generation, w.AttemptID, 1), "an out-of-order ack is not an error")
		require.Equal(t, 2, acked(w.Generation), "a receipt never lowers")
		require.NoError(t, s.RecordReceipt(ctx(t), key, w.Generation, w.AttemptID, 3))
		require.Equal(t, 3, acked(w.Generation))
		require.ErrorIs(t, s.RecordReceipt(ctx(t), key, w.Generation, w.AttemptID, 4), store.ErrInvalid)
	}
	require.ErrorIs(t, s.RecordReceipt(ctx(t), key, 6, "missing", 1), store.ErrNotFound)
	require.ErrorIs(t, s.RecordReceipt(ctx(t), key, 8, "a7", 1), store.ErrNotFound)
	require.ErrorIs(t, s.SetDisposition(ctx(t), key, 7, "missing", reconcile.Abandoned), store.ErrNotFound)

	require.NoError(t, s.SetDisposition(ctx(t), key, 6, "a6", reconcile.Promoted))
	require.NoError(t, s.SetDisposition(ctx(t), key, 6, "a6", reconcile.Promoted), "repeating a final state is idempotent")
	fe := requireFence(t, s.SetDisposition(ctx(t), key, 6, "a6", reconcile.Abandoned))
	require.Contains(t, fe.Reason, "promoted")
	require.NoError(t, s.SetDisposition(ctx(t), key, 7, "a7", reconcile.Abandoned))
	requireFence(t, s.SetDisposition(ctx(t), key, 7, "a7", reconcile.Promoted))

	got, err := s.WitnessesFrom(ctx(t), key, 5)
	require.NoError(t, err)
	want := group()
	want[0].AckedThrough = 3
	want[1].AckedThrough, want[1].Disposition = 3, reconcile.Promoted
	want[2].Disposition = reconcile.Abandoned
	require.Equal(t, want, got)
	require.NoError(t, s.RecordReceipt(ctx(t), key, 6, "a6", 3), "a receipt it already has, after its disposition changed")
	require.Equal(t, want[1:2], witnesses(t, s, key, 6))
}

// Pruning below a generation deletes the witnesses below it, alone or in
// groups, but keeps every witness at or above it, also one written in a
// group that began below it (with its receipts).
func testPruneKeepsTheWitnessesOfAGroupAboveTheGeneration(t *testing.T, s store.Store) {
	g := grouper(t, s)
	old := newWitness(key, 1, "a1", page(1, 1), "N2")
	require.NoError(t, s.PutWitness(ctx(t), old))
	first := []reconcile.Witness{newWitness(key, 2, "a2", page(1, 1), "N3"), newWitness(key, 3, "a3", page(2, 1), "N4")}
	require.NoError(t, g.PutWitnesses(ctx(t), first))
	ws := group() // 5, 6, 7
	require.NoError(t, g.PutWitnesses(ctx(t), ws))
	require.NoError(t, s.RecordReceipt(ctx(t), key, 6, "a6", 1))

	_, err := s.PruneWitnesses(ctx(t), key, 6)
	require.NoError(t, err)
	for _, gen := range []uint64{1, 2, 3} {
		require.Empty(t, witnesses(t, s, key, gen), "generation %d is below 6", gen)
	}
	from, err := s.WitnessesFrom(ctx(t), key, 6)
	require.NoError(t, err)
	ws[1].AckedThrough = 1
	require.Equal(t, ws[1:], from)

	_, err = s.PruneWitnesses(ctx(t), key, 8)
	require.NoError(t, err)
	from, err = s.WitnessesFrom(ctx(t), key, 0)
	require.NoError(t, err)
	require.Empty(t, from)
}
