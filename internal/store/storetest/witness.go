package storetest

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/store"
)

// page builds n event witnesses at positions first, first+1, ...
func page(first int64, n int) []reconcile.EventWitness {
	evs := make([]reconcile.EventWitness, n)
	for i := range evs {
		evs[i] = reconcile.EventWitness{IDHash: uint64(i)*0x9e3779b97f4a7c15 + 1, Position: coord.IntPosition(first + int64(i)), Digest: ^uint64(i)}
	}
	return evs
}

func newWitness(k store.Key, gen uint64, attempt string, events []reconcile.EventWitness, successor string) reconcile.Witness {
	return reconcile.Witness{
		Scope:       k.Scope,
		Partition:   k.Partition,
		Generation:  gen,
		InputCursor: []byte("C41"),
		AttemptID:   attempt,
		Events:      events,
		Successor:   []byte(successor),
		Disposition: reconcile.Pending,
	}
}

func witnesses(t *testing.T, s store.Store, k store.Key, gen uint64) []reconcile.Witness {
	t.Helper()
	ws, err := s.Witnesses(ctx(t), k, gen)
	require.NoError(t, err)
	return ws
}

// Every field of a response witness (docs/design.md#vocabulary) survives a
// round trip.
func testWitnessRoundTrip(t *testing.T, s store.Store) {
	events := []reconcile.EventWitness{
		{IDHash: 0, Position: coord.IntPosition(math.MinInt64), Digest: 0},
		{IDHash: math.MaxUint64, Position: coord.IntPosition(math.MaxInt64), Digest: math.MaxUint64},
		{IDHash: 7, Position: coord.IntPosition(-5), Digest: 8},
		{IDHash: 7, Position: coord.IntPosition(-5), Digest: 8},
		{IDHash: 9, Position: coord.IntPosition(501), Digest: 10},
	}
	full := reconcile.Witness{
		Scope:           key.Scope,
		Partition:       key.Partition,
		Generation:      9,
		InputCursor:     []byte{'C', 0, 0xff, '4', '1'},
		AttemptID:       "attempt-0001",
		Events:          events,
		Successor:       []byte{'N', 0, 0xfe, '8'},
		Marker:          []byte{0, 1, 2, 0xff},
		CompleteThrough: coord.Integer(502),
		Sealed:          true,
		Disposition:     reconcile.Pending,
		AckedThrough:    2,
	}
	empty := reconcile.Witness{Scope: key.Scope, Partition: key.Partition, Generation: 9, AttemptID: "attempt-0002", Disposition: reconcile.Abandoned}
	str := newWitness(key, 9, "attempt-0003", page(1, 3), "N9")
	str.CompleteThrough = coord.String("2026-12-03T06:00:00Z\xff")
	str.Disposition = reconcile.Promoted
	for _, w := range []reconcile.Witness{full, empty, str} {
		require.NoError(t, s.PutWitness(ctx(t), w))
	}
	require.Equal(t, []reconcile.Witness{full, empty, str}, witnesses(t, s, key, 9))
}

// The same attempt twice is one witness; different attempts are two, in
// attempt order; reusing an attempt id for another response is fenced.
func testWitnessIdempotent(t *testing.T, s store.Store) {
	w2 := newWitness(key, 1, "a2", page(501, 3), "N8")
	w1 := newWitness(key, 1, "a1", page(501, 2), "N7")
	require.NoError(t, s.PutWitness(ctx(t), w2))
	require.NoError(t, s.PutWitness(ctx(t), w2))
	require.Equal(t, []reconcile.Witness{w2}, witnesses(t, s, key, 1))

	require.NoError(t, s.PutWitness(ctx(t), w1))
	require.Equal(t, []reconcile.Witness{w1, w2}, witnesses(t, s, key, 1))

	// A repeat after the witness moved on (receipt, disposition) is still
	// the same response.
	require.NoError(t, s.RecordReceipt(ctx(t), key, 1, "a2", 2))
	require.NoError(t, s.PutWitness(ctx(t), w2))
	got := witnesses(t, s, key, 1)
	require.Equal(t, 2, got[1].AckedThrough, "a repeated put must not reset receipts")

	for _, change := range []func(w *reconcile.Witness){
		func(w *reconcile.Witness) { w.Successor = []byte("N9") },
		func(w *reconcile.Witness) { w.Events = page(501, 2) },
		func(w *reconcile.Witness) { w.Events[1].Digest++ },
		func(w *reconcile.Witness) { w.InputCursor = []byte("C40") },
		func(w *reconcile.Witness) { w.Marker = []byte("m") },
		func(w *reconcile.Witness) { w.CompleteThrough = coord.Integer(1) },
		func(w *reconcile.Witness) { w.Sealed = true },
	} {
		other := newWitness(key, 1, "a2", page(501, 3), "N8")
		change(&other)
		requireFence(t, s.PutWitness(ctx(t), other))
	}
	require.Equal(t, got, witnesses(t, s, key, 1))
}

// Witnesses(key, generation) returns exactly that generation of that
// partition: generation 1 is not a prefix of 10 or 11.
func testWitnessGenerationIsolation(t *testing.T, s store.Store) {
	other := store.Key{Scope: key.Scope, Partition: key.Partition + "0"}
	for _, gen := range []uint64{1, 2, 10, 11, 100, math.MaxUint64} {
		require.NoError(t, s.PutWitness(ctx(t), newWitness(key, gen, fmt.Sprintf("g%d", gen), page(1, 1), "N")))
		require.NoError(t, s.PutWitness(ctx(t), newWitness(other, gen, fmt.Sprintf("o%d", gen), nil, "")))
	}
	for _, gen := range []uint64{1, 2, 10, 11, 100, math.MaxUint64} {
		ws := witnesses(t, s, key, gen)
		require.Len(t, ws, 1, "generation %d", gen)
		require.Equal(t, gen, ws[0].Generation)
		require.Equal(t, fmt.Sprintf("g%d", gen), ws[0].AttemptID)
	}
	require.Empty(t, witnesses(t, s, key, 3))
	require.Empty(t, witnesses(t, s, key, 0))
}

// Receipts only ever raise AckedThrough, one write per acknowledged batch.
func testReceiptMonotone(t *testing.T, s store.Store) {
	require.NoError(t, s.PutWitness(ctx(t), newWitness(key, 1, "a", page(1, 5), "N")))
	acked := func() int { return witnesses(t, s, key, 1)[0].AckedThrough }

	require.NoError(t, s.RecordReceipt(ctx(t), key, 1, "a", 3))
	require.Equal(t, 3, acked())
	require.NoError(t, s.RecordReceipt(ctx(t), key, 1, "a", 2), "an out-of-order ack is not an error")
	require.Equal(t, 3, acked(), "a receipt never lowers")
	require.NoError(t, s.RecordReceipt(ctx(t), key, 1, "a", 3))
	require.NoError(t, s.RecordReceipt(ctx(t), key, 1, "a", 5))
	require.Equal(t, 5, acked())

	require.ErrorIs(t, s.RecordReceipt(ctx(t), key, 1, "a", 6), store.ErrInvalid)
	require.ErrorIs(t, s.RecordReceipt(ctx(t), key, 1, "a", -1), store.ErrInvalid)
	require.ErrorIs(t, s.RecordReceipt(ctx(t), key, 1, "missing", 1), store.ErrNotFound)
	require.ErrorIs(t, s.RecordReceipt(ctx(t), key, 2, "a", 1), store.ErrNotFound)
	require.Equal(t, 5, acked())
}

// Pending moves to promoted or abandoned; both are final.
func testDisposition(t *testing.T, s store.Store) {
	for _, a := range []string{"a1", "a2", "a3"} {
		require.NoError(t, s.PutWitness(ctx(t), newWitness(key, 1, a, page(1, 1), "N-"+a)))
	}
	require.NoError(t, s.SetDisposition(ctx(t), key, 1, "a1", reconcile.Promoted))
	require.NoError(t, s.SetDisposition(ctx(t), key, 1, "a2", reconcile.Abandoned))
	require.NoError(t, s.SetDisposition(ctx(t), key, 1, "a1", reconcile.Promoted), "repeating a final state is idempotent")

	fe := requireFence(t, s.SetDisposition(ctx(t), key, 1, "a1", reconcile.Abandoned))
	require.Contains(t, fe.Reason, "promoted")
	requireFence(t, s.SetDisposition(ctx(t), key, 1, "a2", reconcile.Promoted))
	require.ErrorIs(t, s.SetDisposition(ctx(t), key, 1, "a3", reconcile.Pending), store.ErrInvalid)
	require.ErrorIs(t, s.SetDisposition(ctx(t), key, 1, "a3", 0), store.ErrInvalid)
	require.ErrorIs(t, s.SetDisposition(ctx(t), key, 1, "missing", reconcile.Abandoned), store.ErrNotFound)

	ws := witnesses(t, s, key, 1)
	require.Equal(t, []reconcile.Disposition{reconcile.Promoted, reconcile.Abandoned, reconcile.Pending}, []reconcile.Disposition{ws[0].Disposition, ws[1].Disposition, ws[2].Disposition})
}

// A witness that cannot be held whole is refused with ErrInvalid, never
// cut; a 100-event page with maximal cursors fits.
func testWitnessTooLarge(t *testing.T, s store.Store) {
	fits := newWitness(key, 1, "fits", page(1, 100), "")
	fits.InputCursor = randomBytes(5, store.MaxCursorBytes)
	fits.Successor = randomBytes(6, store.MaxCursorBytes)
	require.NoError(t, s.PutWitness(ctx(t), fits))
	require.Equal(t, []reconcile.Witness{fits}, witnesses(t, s, key, 1))

	many := newWitness(key, 1, "many", page(1, 30_000), "N")
	err := s.PutWitness(ctx(t), many)
	require.ErrorIs(t, err, store.ErrInvalid)
	require.Contains(t, err.Error(), "never cut")

	marker := newWitness(key, 1, "marker", page(1, 1), "N")
	marker.Marker = make([]byte, store.MaxRecordBytes)
	require.ErrorIs(t, s.PutWitness(ctx(t), marker), store.ErrInvalid)

	require.Len(t, witnesses(t, s, key, 1), 1)
}

// PruneWitnesses deletes exactly the witnesses of one partition below a
// generation (every attempt of them, generation 10 not taken for 1), and
// nothing of another partition; pruning again deletes nothing.
func testPruneWitnessesBelowAGeneration(t *testing.T, s store.Store) {
	other := store.Key{Scope: key.Scope, Partition: key.Partition + "0"}
	for _, gen := range []uint64{1, 2, 3, 10, 30} {
		for _, a := range []string{"a", "b"} {
			require.NoError(t, s.PutWitness(ctx(t), newWitness(key, gen, fmt.Sprintf("%s%d", a, gen), page(1, 1), "N")))
		}
		require.NoError(t, s.PutWitness(ctx(t), newWitness(other, gen, fmt.Sprintf("o%d", gen), nil, "")))
	}
	n, err := s.PruneWitnesses(ctx(t), key, 10)
	require.NoError(t, err)
	require.Equal(t, 6, n, "generations 1, 2 and 3, two attempts each")
	ws, err := s.WitnessesFrom(ctx(t), key, 0)
	require.NoError(t, err)
	var left []string
	for _, w := range ws {
		left = append(left, w.AttemptID)
	}
	require.Equal(t, []string{"a10", "b10", "a30", "b30"}, left)
	kept, err := s.WitnessesFrom(ctx(t), other, 0)
	require.NoError(t, err)
	require.Len(t, kept, 5, "another partition's witnesses stay")
	n, err = s.PruneWitnesses(ctx(t), key, 10)
	require.NoError(t, err)
	require.Zero(t, n)
}

// PreviousFormat is implemented by a store under test whose stored form of
// a witness had an earlier version: PutWitnessPreviousFormat writes w the
// way that version did (for DynamoDB: a digest per event even when every
// event shares one). testWitnessEventFormats then also checks such stored
// items.
type PreviousFormat interface {
	PutWitnessPreviousFormat(ctx context.Context, w reconcile.Witness) error
}

// sharedDigestPage is page with one digest for every event: what a constant
// semantic projection gives (the DynamoDB store then writes it once).
func sharedDigestPage(first int64, n int) []reconcile.EventWitness {
	evs := page(first, n)
	for i := range evs {
		evs[i].Digest = 0x5eed
	}
	return evs
}

// Witnesses whose events share one digest and witnesses with a digest per
// event, stored now or by the previous release (old items), are read back
// exactly, side by side under one (cursor, generation); writing any of them
// again is the same response (a no-op, also for an old item written again
// in the current form), and each takes receipts and a disposition.
func testWitnessEventFormats(t *testing.T, s store.Store) {
	perEvent := newWitness(key, 4, "a1", page(1, 100), "N1")
	shared := newWitness(key, 4, "a2", sharedDigestPage(1, 100), "N2")
	want := []reconcile.Witness{perEvent, shared}
	for _, w := range want {
		require.NoError(t, s.PutWitness(ctx(t), w))
	}
	if old, ok := s.(PreviousFormat); ok {
		stored := []reconcile.Witness{newWitness(key, 4, "a3", sharedDigestPage(1, 100), "N3"), newWitness(key, 4, "a4", page(1, 100), "N4")}
		for _, w := range stored {
			require.NoError(t, old.PutWitnessPreviousFormat(ctx(t), w))
		}
		want = append(want, stored...)
	}
	require.Equal(t, want, witnesses(t, s, key, 4))
	for _, w := range want {
		require.NoError(t, s.PutWitness(ctx(t), w), "attempt %s written again", w.AttemptID)
		other := w
		other.Successor = []byte("elsewhere")
		requireFence(t, s.PutWitness(ctx(t), other))
	}
	require.Equal(t, want, witnesses(t, s, key, 4))
	for i, w := range want {
		require.NoError(t, s.RecordReceipt(ctx(t), key, 4, w.AttemptID, 10+i))
		want[i].AckedThrough = 10 + i
	}
	require.NoError(t, s.SetDisposition(ctx(t), key, 4, want[len(want)-1].AttemptID, reconcile.Abandoned))
	want[len(want)-1].Disposition = reconcile.Abandoned
	require.Equal(t, want, witnesses(t, s, key, 4))
}
