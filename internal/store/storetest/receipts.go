package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/store"
)

func receiptsAt(positions ...int64) []store.Receipt {
	out := make([]store.Receipt, len(positions))
	for i, p := range positions {
		out[i] = store.Receipt{IDHash: uint64(1000 + p), Position: coord.IntPosition(p), Digest: uint64(7 * p)}
	}
	return out
}

func chunk(gen uint64, attempt string, rs []store.Receipt) store.ReceiptChunk {
	return store.ReceiptChunk{Key: key, Generation: gen, Attempt: attempt, Receipts: rs}
}

// A pass re-reading the range above a position gets every receipt above
// it, whole (id hash, position, digest), from every chunk whose greatest
// position lies above it, and none at or below it; other partitions'
// receipts are not mixed in.
func testReceiptsRoundTripAboveAPosition(t *testing.T, s store.Store) {
	require.NoError(t, s.PutReceipts(ctx(t), chunk(1, "a", receiptsAt(1, 2, 5))))
	require.NoError(t, s.PutReceipts(ctx(t), chunk(2, "a", receiptsAt(9, 4, 12)))) // out of order within a page
	require.NoError(t, s.PutReceipts(ctx(t), chunk(3, "a", receiptsAt(-3))))
	other := store.Key{Scope: key.Scope, Partition: "p1"}
	require.NoError(t, s.PutReceipts(ctx(t), store.ReceiptChunk{Key: other, Generation: 1, Attempt: "a", Receipts: receiptsAt(6)}))

	all, err := s.Receipts(ctx(t), key, coord.Position{}, false)
	require.NoError(t, err)
	require.Equal(t, receiptsAt(-3, 1, 2, 4, 5, 9, 12), all)

	above, err := s.Receipts(ctx(t), key, coord.IntPosition(4), true)
	require.NoError(t, err)
	require.Equal(t, receiptsAt(5, 9, 12), above)

	none, err := s.Receipts(ctx(t), key, coord.IntPosition(12), true)
	require.NoError(t, err)
	require.Empty(t, none)

	neg, err := s.Receipts(ctx(t), key, coord.IntPosition(-10), true)
	require.NoError(t, err)
	require.Equal(t, receiptsAt(-3, 1, 2, 4, 5, 9, 12), neg, "negative positions sort below positive ones")
}

// A chunk is named by its page's witness: writing it again stores one.
func testReceiptChunkIdempotent(t *testing.T, s store.Store) {
	c := chunk(4, "x", receiptsAt(3, 4))
	require.NoError(t, s.PutReceipts(ctx(t), c))
	require.NoError(t, s.PutReceipts(ctx(t), c))
	got, err := s.Receipts(ctx(t), key, coord.Position{}, false)
	require.NoError(t, err)
	require.Equal(t, receiptsAt(3, 4), got)

	require.ErrorIs(t, s.PutReceipts(ctx(t), chunk(5, "x", nil)), store.ErrInvalid)
	require.ErrorIs(t, s.PutReceipts(ctx(t), chunk(5, "x", []store.Receipt{{Position: coord.StringPosition("k")}})), store.ErrInvalid)
}

// Pruning deletes exactly the chunks whose greatest position is at or
// below the window's new start; a chunk reaching above it stays whole.
func testPruneReceiptsThroughAPosition(t *testing.T, s store.Store) {
	require.NoError(t, s.PutReceipts(ctx(t), chunk(1, "a", receiptsAt(1, 2, 3))))
	require.NoError(t, s.PutReceipts(ctx(t), chunk(2, "a", receiptsAt(4, 5, 6))))
	require.NoError(t, s.PutReceipts(ctx(t), chunk(3, "a", receiptsAt(7, 8))))
	n, err := s.PruneReceipts(ctx(t), key, coord.IntPosition(5))
	require.NoError(t, err)
	require.Equal(t, 1, n)
	got, err := s.Receipts(ctx(t), key, coord.Position{}, false)
	require.NoError(t, err)
	require.Equal(t, receiptsAt(4, 5, 6, 7, 8), got)

	n, err = s.PruneReceipts(ctx(t), key, coord.IntPosition(8))
	require.NoError(t, err)
	require.Equal(t, 2, n)
	got, err = s.Receipts(ctx(t), key, coord.Position{}, false)
	require.NoError(t, err)
	require.Empty(t, got)

	// The witnesses and the checkpoint of the partition are untouched.
	cp := create(t, s, key, "c")
	n, err = s.PruneReceipts(ctx(t), key, coord.IntPosition(1<<62))
	require.NoError(t, err)
	require.Zero(t, n)
	again, err := s.LoadCheckpoint(ctx(t), key)
	require.NoError(t, err)
	require.Equal(t, cp, again)
}

func testReceiptsOfTimestampPositions(t *testing.T, s store.Store) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	rs := []store.Receipt{
		{IDHash: 1, Position: coord.TimestampPosition(t0), Digest: 9},
		{IDHash: 2, Position: coord.TimestampPosition(t0.Add(time.Minute)), Digest: 8},
	}
	require.NoError(t, s.PutReceipts(ctx(t), chunk(1, "a", rs)))
	got, err := s.Receipts(ctx(t), key, coord.TimestampPosition(t0), true)
	require.NoError(t, err)
	require.Equal(t, rs[1:], got)
	got, err = s.Receipts(ctx(t), key, coord.Position{}, false)
	require.NoError(t, err)
	require.Equal(t, rs, got)
}

// The re-read state is written by the promotion that carries it, kept by
// every other promotion, and cleared by a reset into a new incarnation.
func testRereadStateTravelsWithItsPromotion(t *testing.T, s store.Store) {
	cp := create(t, s, key, "c0")
	require.False(t, cp.Reread.Started())
	first := store.RereadState{Mark: coord.IntPosition(40)} // the first pass: from the start
	p := promotion(cp, "c1", "restart:reread")
	p.Reread = &first
	cp = promote(t, s, p)
	require.Equal(t, first, cp.Reread)

	cp = promote(t, s, promotion(cp, "c2", "w2"))
	require.Equal(t, first, cp.Reread, "a promotion without re-read state keeps it")

	second := store.RereadState{From: coord.IntPosition(30), HasFrom: true, Mark: coord.IntPosition(55)}
	p = promotion(cp, "c3", "restart:reread")
	p.Reread = &second
	cp = promote(t, s, p)
	require.Equal(t, second, cp.Reread)
	loaded, err := s.LoadCheckpoint(ctx(t), key)
	require.NoError(t, err)
	require.Equal(t, second, loaded.Reread)

	ts := store.RereadState{From: coord.TimestampPosition(time.Unix(100, 5)), HasFrom: true, Mark: coord.TimestampPosition(time.Unix(200, 7))}
	p = promotion(cp, "c4", "restart:reread")
	p.Reread = &ts
	cp = promote(t, s, p)
	loaded, err = s.LoadCheckpoint(ctx(t), key)
	require.NoError(t, err)
	require.Equal(t, ts, loaded.Reread)

	reset := promotion(cp, "c5", "reset")
	reset.Reset, reset.Incarnation, reset.Epoch = true, "sha256:new", cp.Epoch+1
	cp = promote(t, s, reset)
	require.Equal(t, store.RereadState{}, cp.Reread, "a reset starts the coordinates, and the window, again")
	loaded, err = s.LoadCheckpoint(ctx(t), key)
	require.NoError(t, err)
	require.Equal(t, store.RereadState{}, loaded.Reread)
}
