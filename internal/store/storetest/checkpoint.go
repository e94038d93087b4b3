package storetest

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/provider"
)

func testLoadMissing(t *testing.T, s store.Store) {
	// One sentinel for every absent record; the error names the record.
	_, err := s.LoadCheckpoint(ctx(t), key)
	require.ErrorIs(t, err, store.ErrNotFound)
	require.ErrorContains(t, err, "no checkpoint for "+key.String())
	_, err = s.LoadMembership(ctx(t), key.Scope)
	require.ErrorIs(t, err, store.ErrNotFound)
	require.ErrorContains(t, err, "no membership record for scope "+key.Scope)
	_, err = s.LoadFrontier(ctx(t), key.Scope)
	require.ErrorIs(t, err, store.ErrNotFound)
	require.ErrorContains(t, err, "no published frontier for scope "+key.Scope)
	ws, err := s.Witnesses(ctx(t), key, 1)
	require.NoError(t, err)
	require.Empty(t, ws)
	cps, err := s.ListCheckpoints(ctx(t), key.Scope)
	require.NoError(t, err)
	require.Empty(t, cps)
}

func testCreateAndLoad(t *testing.T, s store.Store) {
	want := store.Checkpoint{
		Key:             key,
		Cursor:          []byte("start"),
		Generation:      1,
		Watermark:       coord.Integer(-42),
		Applied:         coord.IntPosition(700),
		HasApplied:      true,
		Epoch:           3,
		PromotedWitness: "w-start",
		Lease:           store.Lease{Owner: "worker-a", Counter: 9},
	}
	got, err := s.CreateCheckpoint(ctx(t), want)
	require.NoError(t, err)
	require.Equal(t, want, got)
	requireStored(t, s, want)

	// Applied without HasApplied is not stored.
	k2 := store.Key{Scope: key.Scope, Partition: "p1"}
	got, err = s.CreateCheckpoint(ctx(t), store.Checkpoint{Key: k2, Generation: 1, Applied: coord.IntPosition(5)})
	require.NoError(t, err)
	require.Equal(t, store.Checkpoint{Key: k2, Generation: 1}, got)
	requireStored(t, s, got)
}

func testCreateRequiresGenerationOne(t *testing.T, s store.Store) {
	for _, g := range []uint64{0, 2} {
		_, err := s.CreateCheckpoint(ctx(t), store.Checkpoint{Key: key, Cursor: []byte("c"), Generation: g})
		require.ErrorIs(t, err, store.ErrInvalid, "generation %d", g)
	}
	_, err := s.LoadCheckpoint(ctx(t), key)
	require.ErrorIs(t, err, store.ErrNotFound)
}

// Two writers race to create the first checkpoint: exactly one wins and the
// loser is fenced with the winner (invariant 2).
func testCreateRace(t *testing.T, s store.Store) {
	for round := range 8 {
		k := store.Key{Scope: key.Scope, Partition: fmt.Sprintf("race-%d", round)}
		var (
			start = make(chan struct{})
			wg    sync.WaitGroup
			res   [2]store.Checkpoint
			errs  [2]error
		)
		for i := range 2 {
			wg.Go(func() {
				<-start
				res[i], errs[i] = s.CreateCheckpoint(ctx(t), store.Checkpoint{Key: k, Cursor: fmt.Appendf(nil, "writer-%d", i), Generation: 1})
			})
		}
		close(start)
		wg.Wait()
		won := 0
		for i := range 2 {
			if errs[i] == nil {
				won = i
			}
		}
		lost := 1 - won
		require.NoError(t, errs[won], "round %d: one writer must win", round)
		requireWinner(t, errs[lost], res[won])
		requireStored(t, s, res[won])
	}
}

// Compare-and-swap on cursor and generation: success, then failure on a
// wrong cursor and on a wrong generation, with the winner returned.
func testPromoteCAS(t *testing.T, s store.Store) {
	cp := create(t, s, key, "C41")
	p := promotion(cp, "N8", "w2")
	p.Watermark = integer(120)
	p.Applied, p.HasApplied = coord.IntPosition(503), true
	p.Epoch = 4
	next := promote(t, s, p)
	want := store.Checkpoint{Key: key, Cursor: []byte("N8"), Generation: 2, Watermark: integer(120), Applied: coord.IntPosition(503), HasApplied: true, Epoch: 4, PromotedWitness: "w2"}
	require.Equal(t, want, next)
	requireStored(t, s, want)

	wrongCursor := promotion(next, "X", "w3")
	wrongCursor.FromCursor = []byte("N7")
	_, err := s.Promote(ctx(t), wrongCursor)
	fe := requireWinner(t, err, want)
	assert.Equal(t, "promote", fe.Op)
	assert.Equal(t, uint64(2), fe.WantGeneration)

	wrongGen := promotion(next, "X", "w3")
	wrongGen.FromGeneration = 3
	_, err = s.Promote(ctx(t), wrongGen)
	requireWinner(t, err, want)

	missing := promotion(store.Checkpoint{Key: store.Key{Scope: key.Scope, Partition: "none"}, Cursor: []byte("c"), Generation: 1}, "d", "w")
	_, err = s.Promote(ctx(t), missing)
	fe = requireFence(t, err)
	assert.Nil(t, fe.Winner)
	requireStored(t, s, want)
}

// The frontier example of docs/design.md#frontier-example: A is complete
// through 120; a retry of an older A page finishes late and loses its
// compare-and-swap; it cannot lower the watermark, not even after
// re-reading the winner.
func testStaleRetryLoses(t *testing.T, s store.Store) {
	g1 := create(t, s, key, "C0")
	fresh := promotion(g1, "C1", "fresh")
	fresh.Watermark = integer(120)
	g2 := promote(t, s, fresh)

	stale := promotion(g1, "C1-stale", "stale")
	stale.Watermark = integer(90)
	_, err := s.Promote(ctx(t), stale)
	requireWinner(t, err, g2)

	// The loser re-reads the winner but must not carry its stale watermark.
	stale2 := promotion(g2, "C1-stale", "stale-2")
	stale2.Watermark = integer(90)
	_, err = s.Promote(ctx(t), stale2)
	fe := requireWinner(t, err, g2)
	assert.Contains(t, fe.Reason, "lower")
	requireStored(t, s, g2)
}

func testLowerWatermarkRefused(t *testing.T, s store.Store) {
	cp := create(t, s, key, "C0")
	p := promotion(cp, "C1", "w1")
	p.Watermark = integer(100)
	cp = promote(t, s, p)

	lower := promotion(cp, "C2", "w2")
	lower.Watermark = integer(99)
	_, err := s.Promote(ctx(t), lower)
	requireWinner(t, err, cp)

	other := promotion(cp, "C2", "w2")
	other.Watermark = coord.String("100")
	_, err = s.Promote(ctx(t), other)
	fe := requireWinner(t, err, cp)
	assert.Contains(t, fe.Reason, "comparable")

	equal := promotion(cp, "C2", "w2")
	equal.Watermark = integer(100)
	cp = promote(t, s, equal)
	require.Equal(t, integer(100), cp.Watermark)

	higher := promotion(cp, "C3", "w3")
	higher.Watermark = integer(101)
	cp = promote(t, s, higher)
	require.Equal(t, integer(101), cp.Watermark)
	requireStored(t, s, cp)
}

func testWatermarkKeptWithoutNew(t *testing.T, s store.Store) {
	cp := create(t, s, key, "C0")
	p := promotion(cp, "C1", "w1")
	p.Watermark = coord.Watermark{Kind: coord.KindTimestamp, Int: 1_700_000_000_123_456_789}
	p.Applied, p.HasApplied = coord.IntPosition(10), true
	cp = promote(t, s, p)

	cp2 := promote(t, s, promotion(cp, "C2", "w2"))
	require.Equal(t, p.Watermark, cp2.Watermark, "a promotion without a watermark keeps the stored one")
	require.True(t, cp2.HasApplied)
	require.Equal(t, coord.IntPosition(10), cp2.Applied, "a promotion without HasApplied keeps the applied boundary")
	requireStored(t, s, cp2)
}

// String watermarks compare byte-wise, as strings.Compare does, whatever
// the bytes (invalid UTF-8 included).
func testStringWatermarkByteOrder(t *testing.T, s store.Store) {
	cp := create(t, s, key, "C0")
	p := promotion(cp, "C1", "w1")
	p.Watermark = coord.String("b\x7f")
	cp = promote(t, s, p)

	lower := promotion(cp, "C2", "w2")
	lower.Watermark = coord.String("b\x00\xff")
	_, err := s.Promote(ctx(t), lower)
	requireWinner(t, err, cp)

	higher := promotion(cp, "C2", "w2")
	higher.Watermark = coord.String("b\xff")
	cp = promote(t, s, higher)
	require.Equal(t, coord.String("b\xff"), cp.Watermark)

	// U+FFFD (EF BF BD) sorts below 0xFF byte-wise: refused.
	p3 := promotion(cp, "C3", "w3")
	p3.Watermark = coord.String("b\uFFFD")
	_, err = s.Promote(ctx(t), p3)
	requireWinner(t, err, cp)
	requireStored(t, s, cp)
}

// Decimal watermarks compare numerically at any length (a shorter decimal
// is lower however its digits sort as bytes), and a decimal applied
// position of 56 digits survives the round trip exactly.
func testDecimalWatermarkAndAppliedPosition(t *testing.T, s store.Store) {
	dec := func(d string) coord.Watermark {
		w, err := coord.Decimal(d)
		require.NoError(t, err)
		return w
	}
	seq := "49590338271490256608559692538361571095921575989136588898"
	cp := create(t, s, key, "C0")
	p := promotion(cp, "C1", "w1")
	p.Watermark = dec("900")
	p.Applied, p.HasApplied = coord.Position(dec(seq)), true
	cp = promote(t, s, p)
	require.Equal(t, dec("900"), cp.Watermark)
	require.Equal(t, coord.Position(dec(seq)), cp.Applied)
	requireStored(t, s, cp)

	// "1000" sorts below "900" as bytes, above it as a number: accepted.
	higher := promotion(cp, "C2", "w2")
	higher.Watermark = dec("1000")
	cp = promote(t, s, higher)
	require.Equal(t, dec("1000"), cp.Watermark)

	// "999" sorts above "1000" as bytes, below it as a number: refused.
	lower := promotion(cp, "C3", "w3")
	lower.Watermark = dec("999")
	_, err := s.Promote(ctx(t), lower)
	requireWinner(t, err, cp)
	requireStored(t, s, cp)

	// Positions of other kinds keep their kind.
	keyed := promotion(cp, "C3", "w3")
	keyed.Applied, keyed.HasApplied = coord.StringPosition("photos/2026/12/03/0001.jpg"), true
	cp = promote(t, s, keyed)
	require.Equal(t, coord.StringPosition("photos/2026/12/03/0001.jpg"), cp.Applied)
	requireStored(t, s, cp)
}

// The id of the event at the applied position is written with the
// position, kept by a promotion that carries no applied position (a
// restart), replaced (or removed, when the new one is unknown) by the next
// applied position, and stored exactly: any bytes up to MaxAppliedIDBytes.
func testAppliedIDTravelsWithTheAppliedPosition(t *testing.T, s store.Store) {
	cp := create(t, s, key, "C0")
	p := promotion(cp, "C1", "w1")
	p.Applied, p.HasApplied, p.AppliedID = coord.IntPosition(5), true, "order-5"
	cp = promote(t, s, p)
	require.Equal(t, "order-5", cp.AppliedID)
	requireStored(t, s, cp)

	restart := promotion(cp, "", "restart:restart_from_boundary")
	cp = promote(t, s, restart)
	require.Equal(t, coord.IntPosition(5), cp.Applied)
	require.Equal(t, "order-5", cp.AppliedID, "a promotion without an applied position keeps the id")
	requireStored(t, s, cp)

	odd := "id with \x00 and \xff " + strings.Repeat("x", store.MaxAppliedIDBytes-20)
	p = promotion(cp, "C2", "w2")
	p.Applied, p.HasApplied, p.AppliedID = coord.IntPosition(9), true, odd
	cp = promote(t, s, p)
	require.Equal(t, odd, cp.AppliedID)
	requireStored(t, s, cp)

	p = promotion(cp, "C3", "w3")
	p.Applied, p.HasApplied = coord.IntPosition(12), true
	cp = promote(t, s, p)
	require.Empty(t, cp.AppliedID, "a new applied position without an id removes the old id")
	requireStored(t, s, cp)

	for _, bad := range []store.Promotion{
		{Key: key, FromCursor: cp.Cursor, FromGeneration: cp.Generation, To: []byte("C4"), WitnessID: "w4", AppliedID: "orphan"},
		{Key: key, FromCursor: cp.Cursor, FromGeneration: cp.Generation, To: []byte("C4"), WitnessID: "w4",
			Applied: coord.IntPosition(13), HasApplied: true, AppliedID: strings.Repeat("x", store.MaxAppliedIDBytes+1)},
	} {
		_, err := s.Promote(ctx(t), bad)
		require.ErrorIs(t, err, store.ErrInvalid)
	}
	requireStored(t, s, cp)
}

// The finality basis of the watermark is written with the watermark, kept
// by a promotion without one, replaced (or removed, when unknown) by the
// next watermark; a basis without a watermark, or one no contract gives,
// is refused.
func testFinalityTravelsWithTheWatermark(t *testing.T, s store.Store) {
	cp := create(t, s, key, "C0")
	require.Zero(t, cp.Finality)
	assertion := reconcile.Basis{Finality: provider.FinalityAppendOnlyWriter}
	p := promotion(cp, "C1", "w1")
	p.Watermark, p.Finality = coord.Integer(10), assertion
	cp = promote(t, s, p)
	require.Equal(t, assertion, cp.Finality)
	requireStored(t, s, cp)

	cp = promote(t, s, promotion(cp, "C2", "w2"))
	require.Equal(t, coord.Integer(10), cp.Watermark)
	require.Equal(t, assertion, cp.Finality, "a promotion without a watermark keeps its finality")
	requireStored(t, s, cp)

	p = promotion(cp, "C3", "w3")
	p.Watermark, p.Finality = coord.Integer(20), reconcile.Basis{Finality: provider.FinalityLag, Lag: 5}
	cp = promote(t, s, p)
	require.Equal(t, "lag 5", cp.Finality.String())
	requireStored(t, s, cp)

	// A timestamp lag and a re-read window read back as they were written.
	reread := reconcile.Basis{Finality: provider.FinalityLag, Lag: int64(5 * time.Minute), Timestamp: true, Reread: true}
	p = promotion(cp, "C3b", "w3b")
	p.Watermark, p.Finality = coord.Integer(25), reread
	cp = promote(t, s, p)
	require.Equal(t, reread, cp.Finality)
	requireStored(t, s, cp)

	p = promotion(cp, "C4", "w4")
	p.Watermark = coord.Integer(30)
	cp = promote(t, s, p)
	require.Zero(t, cp.Finality, "a new watermark without a basis removes the old basis")
	requireStored(t, s, cp)

	for _, bad := range []store.Promotion{
		{Key: key, FromCursor: cp.Cursor, FromGeneration: cp.Generation, To: []byte("C5"), WitnessID: "w5", Finality: reconcile.Basis{Finality: provider.FinalitySource}},
		{Key: key, FromCursor: cp.Cursor, FromGeneration: cp.Generation, To: []byte("C5"), WitnessID: "w5",
			Watermark: coord.Integer(40), Finality: reconcile.Basis{Finality: provider.FinalityLag}},
		{Key: key, FromCursor: cp.Cursor, FromGeneration: cp.Generation, To: []byte("C5"), WitnessID: "w5",
			Watermark: coord.Integer(40), Finality: reconcile.Basis{Finality: provider.FinalityNone}},
	} {
		_, err := s.Promote(ctx(t), bad)
		require.ErrorIs(t, err, store.ErrInvalid)
	}
	requireStored(t, s, cp)
}

// The contract violation counts are written with a promotion (the writer's
// totals) and kept by a promotion without them; parking keeps them too.
func testViolationCountsTravelWithPromotions(t *testing.T, s store.Store) {
	cp := create(t, s, key, "C0")
	require.Nil(t, cp.Violations)
	p := promotion(cp, "C1", "w1")
	p.Violations = map[string]uint64{"late_position": 1, "self_certified_watermark": 2}
	cp = promote(t, s, p)
	require.Equal(t, map[string]uint64{"late_position": 1, "self_certified_watermark": 2}, cp.Violations)
	requireStored(t, s, cp)

	cp = promote(t, s, promotion(cp, "C2", "w2"))
	require.Equal(t, map[string]uint64{"late_position": 1, "self_certified_watermark": 2}, cp.Violations, "a promotion without counts keeps them")
	requireStored(t, s, cp)

	p = promotion(cp, "C3", "w3")
	p.Violations = map[string]uint64{"late_position": 3, "self_certified_watermark": 2}
	cp = promote(t, s, p)
	parked, err := s.SetParked(ctx(t), key, cp.Cursor, cp.Generation, store.Lease{}, "contract violation")
	require.NoError(t, err)
	require.Equal(t, map[string]uint64{"late_position": 3, "self_certified_watermark": 2}, parked.Violations)
	requireStored(t, s, parked)
}

// A promotion repeated with the same witness (the SDK's retry after a lost
// response) finds its own write and succeeds without a second generation.
// Without a witness id it cannot be recognised and is fenced.
func testReplayedPromotion(t *testing.T, s store.Store) {
	cp := create(t, s, key, "C0")
	p := promotion(cp, "C1", "w1")
	p.Watermark = integer(5)
	first := promote(t, s, p)
	again, err := s.Promote(ctx(t), p)
	require.NoError(t, err)
	require.Equal(t, first, again)
	requireStored(t, s, first)

	anon := promotion(first, "C2", "")
	second := promote(t, s, anon)
	_, err = s.Promote(ctx(t), anon)
	requireWinner(t, err, second)
}

func testSetParkedConditional(t *testing.T, s store.Store) {
	cp := create(t, s, key, "C0")
	p := promotion(cp, "C1", "w1")
	p.Watermark = integer(7)
	cp = promote(t, s, p)

	_, err := s.SetParked(ctx(t), key, []byte("C0"), 1, store.Lease{}, "stale")
	requireWinner(t, err, cp)
	_, err = s.SetParked(ctx(t), key, []byte("C0"), 2, store.Lease{}, "wrong cursor")
	requireWinner(t, err, cp)
	_, err = s.SetParked(ctx(t), store.Key{Scope: key.Scope, Partition: "none"}, nil, 1, store.Lease{}, "x")
	requireFence(t, err)

	reason := "unprovable divergence: retry of C1 omits position 502"
	parked, err := s.SetParked(ctx(t), key, []byte("C1"), 2, store.Lease{}, reason)
	require.NoError(t, err)
	want := cp
	want.Parked = reason
	require.Equal(t, want, parked, "parking changes neither cursor, generation nor watermark")
	requireStored(t, s, want)

	// A parked partition never advances (invariant 5).
	_, err = s.Promote(ctx(t), promotion(cp, "C2", "w2"))
	fe := requireWinner(t, err, want)
	assert.Contains(t, fe.Reason, "parked")

	// Parking again is idempotent; invalid UTF-8 in a reason is replaced.
	parked, err = s.SetParked(ctx(t), key, []byte("C1"), 2, store.Lease{}, "bad \xff byte")
	require.NoError(t, err)
	require.Equal(t, "bad \uFFFD byte", parked.Parked)

	cleared, err := s.SetParked(ctx(t), key, []byte("C1"), 2, store.Lease{}, "")
	require.NoError(t, err)
	require.Equal(t, cp, cleared)
	promote(t, s, promotion(cp, "C2", "w2"))
}

// A failure note is written on the state its writer read (cursor,
// generation, lease), changes nothing else, survives a park and its
// clearing, and the next promotion clears it.
func testFailureNoteIsNotProgress(t *testing.T, s store.Store) {
	lease := store.Lease{Owner: "worker-a", Counter: 3}
	cp, err := s.CreateCheckpoint(ctx(t), store.Checkpoint{Key: key, Cursor: []byte("C0"), Generation: 1, Lease: lease})
	require.NoError(t, err)
	p := promotion(cp, "C1", "w1")
	p.Watermark, p.Lease = integer(7), lease
	cp = promote(t, s, p)

	// A stale cursor or generation, another lease, a missing partition:
	// fenced, nothing written.
	_, err = s.NoteFailure(ctx(t), key, []byte("C0"), 1, lease, "stale")
	requireWinner(t, err, cp)
	_, err = s.NoteFailure(ctx(t), key, []byte("C0"), 2, lease, "wrong cursor")
	requireWinner(t, err, cp)
	_, err = s.NoteFailure(ctx(t), key, []byte("C1"), 2, store.Lease{Owner: "worker-b", Counter: 3}, "another lease")
	requireWinner(t, err, cp)
	_, err = s.NoteFailure(ctx(t), store.Key{Scope: key.Scope, Partition: "none"}, []byte("C1"), 1, store.Lease{}, "x")
	requireFence(t, err)

	note := "3 fetches failed in a row: HTTP 503"
	noted, err := s.NoteFailure(ctx(t), key, []byte("C1"), 2, lease, note)
	require.NoError(t, err)
	want := cp
	want.Failing = note
	require.Equal(t, want, noted, "a note changes neither cursor, generation, watermark nor lease")
	requireStored(t, s, want)
	// Rewritten in place; invalid UTF-8 replaced.
	noted, err = s.NoteFailure(ctx(t), key, []byte("C1"), 2, lease, "bad \xff byte")
	require.NoError(t, err)
	require.Equal(t, "bad \uFFFD byte", noted.Failing)
	noted, err = s.NoteFailure(ctx(t), key, []byte("C1"), 2, store.Lease{}, note)
	require.NoError(t, err, "without a lease the note is conditional on cursor and generation only")
	require.Equal(t, want, noted)

	// Parking and unparking keep it; clearing removes it.
	parked, err := s.SetParked(ctx(t), key, []byte("C1"), 2, lease, "parked")
	require.NoError(t, err)
	require.Equal(t, note, parked.Failing)
	unparked, err := s.SetParked(ctx(t), key, []byte("C1"), 2, lease, "")
	require.NoError(t, err)
	require.Equal(t, want, unparked)
	cleared, err := s.NoteFailure(ctx(t), key, []byte("C1"), 2, lease, "")
	require.NoError(t, err)
	require.Equal(t, cp, cleared)
	requireStored(t, s, cp)

	// The next promotion clears it.
	_, err = s.NoteFailure(ctx(t), key, []byte("C1"), 2, lease, note)
	require.NoError(t, err)
	p = promotion(want, "C2", "w2")
	p.Lease = lease
	next := promote(t, s, p)
	require.Empty(t, next.Failing, "progress clears the note")
	requireStored(t, s, next)
}

// With leases, a promotion or park by anyone but the current owner (and
// counter) is fenced.
func testLeaseFencing(t *testing.T, s store.Store) {
	lease := store.Lease{Owner: "worker-a", Counter: 3}
	cp, err := s.CreateCheckpoint(ctx(t), store.Checkpoint{Key: key, Cursor: []byte("C0"), Generation: 1, Lease: lease})
	require.NoError(t, err)

	for _, wrong := range []store.Lease{{Owner: "worker-b", Counter: 3}, {Owner: "worker-a", Counter: 2}, {Owner: "worker-a", Counter: 4}} {
		p := promotion(cp, "C1", "w1")
		p.Lease = wrong
		_, err := s.Promote(ctx(t), p)
		fe := requireWinner(t, err, cp)
		assert.Contains(t, fe.Reason, "lease")
		_, err = s.SetParked(ctx(t), key, cp.Cursor, cp.Generation, wrong, "x")
		requireWinner(t, err, cp)
	}
	p := promotion(cp, "C1", "w1")
	p.Lease = lease
	next := promote(t, s, p)
	require.Equal(t, lease, next.Lease, "a promotion keeps the lease")
}

// The lost-response case: the write happened, the client saw an error. The
// caller resolves it by reading (store.ResolvePromotion), never by writing
// again.
func testLostResponse(t *testing.T, s store.Store) {
	ro := func(t *testing.T) readOnly { return readOnly{Store: s, t: t} }

	t.Run("applied", func(t *testing.T) {
		k := store.Key{Scope: key.Scope, Partition: "applied"}
		cp := create(t, s, k, "C41")
		p := promotion(cp, "N8", "attempt-2")
		p.Watermark = integer(503)
		_, err := lossy{Store: s, apply: true}.Promote(ctx(t), p)
		require.ErrorIs(t, err, errLostResponse)
		got, applied, err := store.ResolvePromotion(ctx(t), ro(t), p)
		require.NoError(t, err)
		require.True(t, applied)
		require.Equal(t, uint64(2), got.Generation)
		require.Equal(t, "attempt-2", got.PromotedWitness)
		require.Equal(t, []byte("N8"), got.Cursor)
		require.Equal(t, integer(503), got.Watermark)
	})

	t.Run("not applied", func(t *testing.T) {
		k := store.Key{Scope: key.Scope, Partition: "not-applied"}
		cp := create(t, s, k, "C41")
		p := promotion(cp, "N8", "attempt-2")
		_, err := lossy{Store: s}.Promote(ctx(t), p)
		require.ErrorIs(t, err, errLostResponse)
		got, applied, err := store.ResolvePromotion(ctx(t), ro(t), p)
		require.NoError(t, err)
		require.False(t, applied)
		require.Equal(t, cp, got)
		require.True(t, p.StillAt(got))
		// Nothing happened: promoting again is safe (it is conditional).
		promote(t, s, p)
	})

	t.Run("another writer won", func(t *testing.T) {
		k := store.Key{Scope: key.Scope, Partition: "lost"}
		cp := create(t, s, k, "C41")
		winner := promote(t, s, promotion(cp, "N7", "attempt-1"))
		p := promotion(cp, "N8", "attempt-2")
		_, err := lossy{Store: s, apply: true}.Promote(ctx(t), p)
		require.Error(t, err)
		got, applied, err := store.ResolvePromotion(ctx(t), ro(t), p)
		require.NoError(t, err)
		require.False(t, applied)
		require.Equal(t, winner, got)
		require.False(t, p.StillAt(got), "the checkpoint moved on: p lost")
	})

	t.Run("unreadable", func(t *testing.T) {
		p := promotion(store.Checkpoint{Key: store.Key{Scope: key.Scope, Partition: "never-created"}, Cursor: []byte("C0"), Generation: 1}, "C1", "w")
		_, applied, err := store.ResolvePromotion(ctx(t), ro(t), p)
		require.ErrorIs(t, err, store.ErrNotFound)
		require.False(t, applied)
	})

	t.Run("moved on", func(t *testing.T) {
		k := store.Key{Scope: key.Scope, Partition: "moved"}
		cp := create(t, s, k, "C41")
		p := promotion(cp, "N8", "attempt-2")
		require.NoError(t, s.PutWitness(ctx(t), reconcile.Witness{Scope: k.Scope, Partition: k.Partition, Generation: 1, InputCursor: cp.Cursor, AttemptID: "attempt-2", Successor: []byte("N8"), Disposition: reconcile.Pending}))
		_, err := lossy{Store: s, apply: true}.Promote(ctx(t), p)
		require.Error(t, err)
		g2, err := s.LoadCheckpoint(ctx(t), k)
		require.NoError(t, err)
		g3 := promote(t, s, promotion(g2, "N9", "attempt-3"))

		// The checkpoint moved past generation 2: the read cannot tell
		// whether p won. It reports not applied and p can never be written
		// again (StillAt is false); the caller leaves the witness pending.
		got, applied, err := store.ResolvePromotion(ctx(t), ro(t), p)
		require.NoError(t, err)
		require.False(t, applied)
		require.Equal(t, g3, got)
		require.False(t, p.StillAt(got))
	})
}

// readOnly fails the test on any write: ResolvePromotion must only read.
type readOnly struct {
	store.Store
	t *testing.T
}

func (r readOnly) fail(op string) error {
	r.t.Errorf("ResolvePromotion called %s: resolving a lost response must never write", op)
	return fmt.Errorf("storetest: %s on a read-only store", op)
}

func (r readOnly) CreateCheckpoint(context.Context, store.Checkpoint) (store.Checkpoint, error) {
	return store.Checkpoint{}, r.fail("CreateCheckpoint")
}

func (r readOnly) Promote(context.Context, store.Promotion) (store.Checkpoint, error) {
	return store.Checkpoint{}, r.fail("Promote")
}

func (r readOnly) SetParked(context.Context, store.Key, []byte, uint64, store.Lease, string) (store.Checkpoint, error) {
	return store.Checkpoint{}, r.fail("SetParked")
}

func (r readOnly) PutWitness(context.Context, reconcile.Witness) error { return r.fail("PutWitness") }

func (r readOnly) RecordReceipt(context.Context, store.Key, uint64, string, int) error {
	return r.fail("RecordReceipt")
}

func (r readOnly) SetDisposition(context.Context, store.Key, uint64, string, reconcile.Disposition) error {
	return r.fail("SetDisposition")
}

func (r readOnly) SwapMembership(context.Context, uint64, store.Membership) (store.Membership, error) {
	return store.Membership{}, r.fail("SwapMembership")
}

func (r readOnly) PublishFrontier(context.Context, store.Frontier, store.Frontier) (store.Frontier, error) {
	return store.Frontier{}, r.fail("PublishFrontier")
}

// 16 goroutines race promotions on one item: no lost update, every
// generation is won exactly once, and the final generation is 1 plus the
// number of successes (invariant 2).
func testRacingPromotions16(t *testing.T, s store.Store) {
	const workers, rounds = 16, 8
	create(t, s, key, "start")
	var (
		mu      sync.Mutex
		winners = map[uint64]string{} // generation -> witness id
		wg      sync.WaitGroup
		start   = make(chan struct{})
	)
	for w := range workers {
		wg.Go(func() {
			<-start
			for r := range rounds {
				cp, err := s.LoadCheckpoint(ctx(t), key)
				if !assert.NoError(t, err) {
					return
				}
				id := fmt.Sprintf("w%02d-r%02d", w, r)
				p := promotion(cp, "cursor-"+id, id)
				p.Watermark = integer(int64(cp.Generation + 1))
				next, err := s.Promote(ctx(t), p)
				if err != nil {
					assert.ErrorIs(t, err, store.ErrFenced, "a lost race must be a fence, not %v", err)
					continue
				}
				mu.Lock()
				if prev, dup := winners[next.Generation]; dup {
					t.Errorf("generation %d won twice: %s and %s", next.Generation, prev, id)
				}
				winners[next.Generation] = id
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()

	final, err := s.LoadCheckpoint(ctx(t), key)
	require.NoError(t, err)
	require.NotEmpty(t, winners)
	require.Equal(t, uint64(1+len(winners)), final.Generation, "final generation must be 1 + successes")
	for g := uint64(2); g <= final.Generation; g++ {
		require.Contains(t, winners, g, "generation %d has no winner: lost update", g)
	}
	require.Equal(t, winners[final.Generation], final.PromotedWitness)
	require.Equal(t, "cursor-"+final.PromotedWitness, string(final.Cursor))
	require.Equal(t, integer(int64(final.Generation)), final.Watermark)
}

func testInvalid(t *testing.T, s store.Store) {
	big := make([]byte, store.MaxCursorBytes+1)
	noScope := store.Key{Partition: "p"}
	noPart := store.Key{Scope: "s"}
	badUTF8 := store.Key{Scope: "s\xff", Partition: "p"}
	long := store.Key{Scope: "s", Partition: strings.Repeat("p", store.MaxNameBytes+1)}

	for _, k := range []store.Key{noScope, noPart, badUTF8, long} {
		_, err := s.LoadCheckpoint(ctx(t), k)
		require.ErrorIs(t, err, store.ErrInvalid, "load %q", k)
		_, err = s.CreateCheckpoint(ctx(t), store.Checkpoint{Key: k, Generation: 1})
		require.ErrorIs(t, err, store.ErrInvalid, "create %q", k)
		_, err = s.Promote(ctx(t), store.Promotion{Key: k, FromGeneration: 1})
		require.ErrorIs(t, err, store.ErrInvalid, "promote %q", k)
		_, err = s.SetParked(ctx(t), k, nil, 1, store.Lease{}, "x")
		require.ErrorIs(t, err, store.ErrInvalid, "park %q", k)
		err = s.PutWitness(ctx(t), reconcile.Witness{Scope: k.Scope, Partition: k.Partition, Generation: 1, AttemptID: "a", Disposition: reconcile.Pending})
		require.ErrorIs(t, err, store.ErrInvalid, "put witness %q", k)
		_, err = s.Witnesses(ctx(t), k, 1)
		require.ErrorIs(t, err, store.ErrInvalid, "witnesses %q", k)
	}
	for _, scope := range []string{"", "s\xff"} {
		_, err := s.ListCheckpoints(ctx(t), scope)
		require.ErrorIs(t, err, store.ErrInvalid)
		_, err = s.LoadMembership(ctx(t), scope)
		require.ErrorIs(t, err, store.ErrInvalid)
		_, err = s.LoadFrontier(ctx(t), scope)
		require.ErrorIs(t, err, store.ErrInvalid)
		_, err = s.SwapMembership(ctx(t), 0, store.Membership{Scope: scope, Epoch: 1})
		require.ErrorIs(t, err, store.ErrInvalid)
		_, err = s.PublishFrontier(ctx(t), store.Frontier{}, store.Frontier{Scope: scope, Epoch: 1})
		require.ErrorIs(t, err, store.ErrInvalid)
	}

	_, err := s.CreateCheckpoint(ctx(t), store.Checkpoint{Key: key, Cursor: big, Generation: 1})
	require.ErrorIs(t, err, store.ErrInvalid)
	require.Contains(t, err.Error(), "cursor")
	cp := create(t, s, key, "C0")
	p := promotion(cp, "", "w")
	p.To = big
	_, err = s.Promote(ctx(t), p)
	require.ErrorIs(t, err, store.ErrInvalid)
	p = promotion(cp, "C1", "w")
	p.FromCursor = big
	_, err = s.Promote(ctx(t), p)
	require.ErrorIs(t, err, store.ErrInvalid)
	p = promotion(cp, "C1", "w")
	p.FromGeneration = 0
	_, err = s.Promote(ctx(t), p)
	require.ErrorIs(t, err, store.ErrInvalid)
	_, err = s.SetParked(ctx(t), key, big, 1, store.Lease{}, "x")
	require.ErrorIs(t, err, store.ErrInvalid)
	for _, bad := range []struct {
		name string
		edit func(w *reconcile.Witness)
	}{
		{"oversized input cursor", func(w *reconcile.Witness) { w.InputCursor = big }},
		{"oversized successor", func(w *reconcile.Witness) { w.Successor = big }},
		{"empty attempt id", func(w *reconcile.Witness) { w.AttemptID = "" }},
		{"zero disposition", func(w *reconcile.Witness) { w.Disposition = 0 }},
		{"unknown disposition", func(w *reconcile.Witness) { w.Disposition = 9 }},
		{"acked beyond events", func(w *reconcile.Witness) { w.AckedThrough = 1 }},
	} {
		w := reconcile.Witness{Scope: key.Scope, Partition: key.Partition, Generation: 1, AttemptID: "a", Disposition: reconcile.Pending}
		bad.edit(&w)
		require.ErrorIs(t, s.PutWitness(ctx(t), w), store.ErrInvalid, bad.name)
	}
	require.ErrorIs(t, s.RecordReceipt(ctx(t), key, 1, "", 1), store.ErrInvalid)
	require.ErrorIs(t, s.SetDisposition(ctx(t), key, 1, "", reconcile.Promoted), store.ErrInvalid)

	// Nothing invalid reached the store.
	requireStored(t, s, cp)
	ws, err := s.Witnesses(ctx(t), key, 1)
	require.NoError(t, err)
	require.Empty(t, ws)
}

// Cursors are opaque bytes stored exactly: zero bytes, invalid UTF-8, the
// empty start cursor, 60 KB and exactly MaxCursorBytes.
func testCursorBytesExact(t *testing.T, s store.Store) {
	cp, err := s.CreateCheckpoint(ctx(t), store.Checkpoint{Key: key, Generation: 1})
	require.NoError(t, err)
	require.Empty(t, cp.Cursor)

	cursors := [][]byte{
		{0, 0, 0xff, 0xfe, 'a', 0, 0xc3, 0x28},
		randomBytes(1, 60<<10),
		randomBytes(2, store.MaxCursorBytes),
		[]byte("ordinary"),
		nil,
	}
	for i, c := range cursors {
		// Promote from the empty start cursor too: the condition must match
		// an empty stored cursor.
		p := promotion(cp, "", fmt.Sprintf("w%d", i))
		p.To = c
		cp = promote(t, s, p)
		require.True(t, bytes.Equal(c, cp.Cursor), "cursor %d returned changed", i)
		got, err := s.LoadCheckpoint(ctx(t), key)
		require.NoError(t, err)
		require.True(t, bytes.Equal(c, got.Cursor), "cursor %d stored changed (len %d, got %d)", i, len(c), len(got.Cursor))
		require.Equal(t, cp, got)
	}

	big := randomBytes(3, 60<<10)
	k := store.Key{Scope: key.Scope, Partition: "big"}
	made, err := s.CreateCheckpoint(ctx(t), store.Checkpoint{Key: k, Cursor: big, Generation: 1})
	require.NoError(t, err)
	require.Equal(t, big, made.Cursor)
	w := reconcile.Witness{Scope: k.Scope, Partition: k.Partition, Generation: 1, InputCursor: big, AttemptID: "a", Successor: randomBytes(4, 60<<10), Marker: []byte{0, 0xff, 0}, Disposition: reconcile.Pending}
	require.NoError(t, s.PutWitness(ctx(t), w))
	ws, err := s.Witnesses(ctx(t), k, 1)
	require.NoError(t, err)
	require.Len(t, ws, 1)
	require.Equal(t, w, ws[0])
	// The exact successor can be promoted.
	p := promotion(made, "", "a")
	p.To = ws[0].Successor
	got := promote(t, s, p)
	require.Equal(t, w.Successor, got.Cursor)
}

func testListCheckpoints(t *testing.T, s store.Store) {
	for _, p := range []string{"b", "a", "c"} {
		create(t, s, store.Key{Scope: "s", Partition: p}, "cur-"+p)
	}
	other := create(t, s, store.Key{Scope: "t", Partition: "a"}, "other")
	a, err := s.LoadCheckpoint(ctx(t), store.Key{Scope: "s", Partition: "a"})
	require.NoError(t, err)
	a = promote(t, s, promotion(a, "cur-a2", "w"))

	list, err := s.ListCheckpoints(ctx(t), "s")
	require.NoError(t, err)
	require.Len(t, list, 3)
	var parts []string
	for _, c := range list {
		parts = append(parts, c.Partition)
		require.Equal(t, "s", c.Scope)
	}
	require.Equal(t, []string{"a", "b", "c"}, parts, "partition order")
	require.Equal(t, a, list[0], "listing reads the current checkpoint")
	require.Equal(t, []byte("cur-b"), list[1].Cursor)

	list, err = s.ListCheckpoints(ctx(t), "t")
	require.NoError(t, err)
	require.Equal(t, []store.Checkpoint{other}, list)
	list, err = s.ListCheckpoints(ctx(t), "u")
	require.NoError(t, err)
	require.Empty(t, list)
}

// A scope with more checkpoints than store.ListReadsInFlight batches of
// 100 hold (a store reading batches concurrently) lists every one,
// once, in partition order, each with its own cursor.
func testListCheckpointsAcrossBatches(t *testing.T, s store.Store) {
	n := 100*(store.ListReadsInFlight+2) + 37
	want := make([]string, n)
	for i := range n {
		want[i] = fmt.Sprintf("p%05d", i)
	}
	for _, i := range rand.New(rand.NewPCG(1, 2)).Perm(n) {
		create(t, s, store.Key{Scope: "many", Partition: want[i]}, "cur-"+want[i])
	}
	list, err := s.ListCheckpoints(ctx(t), "many")
	require.NoError(t, err)
	got := make([]string, len(list))
	for i, c := range list {
		got[i] = c.Partition
		require.Equal(t, []byte("cur-"+c.Partition), c.Cursor, "%s", c.Partition)
	}
	require.Equal(t, want, got)
}

// Names are escaped: ("a#b", "c") and ("a", "b#c") are different
// checkpoints, and partitions named like the scope's own records do not
// collide with them.
func testKeysDoNotCollide(t *testing.T, s store.Store) {
	keys := []store.Key{
		{Scope: "a#b", Partition: "c"},
		{Scope: "a", Partition: "b#c"},
		{Scope: "a", Partition: "membership"},
		{Scope: "a", Partition: "#membership"},
		{Scope: "a", Partition: "frontier"},
		{Scope: "a", Partition: "#frontier"},
		{Scope: "a", Partition: "partitions"},
		{Scope: "a", Partition: "#partitions"},
		{Scope: "a%23b", Partition: "c"},
		{Scope: "a", Partition: "b%23c"},
		{Scope: "a", Partition: "b%c"},
	}
	m, err := s.SwapMembership(ctx(t), 0, store.Membership{Scope: "a", Epoch: 1, Partitions: []string{"membership"}, Proven: true})
	require.NoError(t, err)
	f, err := s.PublishFrontier(ctx(t), store.Frontier{}, store.Frontier{Scope: "a", Epoch: 1, Scalar: integer(5)})
	require.NoError(t, err)
	for i, k := range keys {
		_, err := s.CreateCheckpoint(ctx(t), store.Checkpoint{Key: k, Cursor: fmt.Appendf(nil, "c%d", i), Generation: 1})
		require.NoError(t, err, "%q", k)
		require.NoError(t, s.PutWitness(ctx(t), reconcile.Witness{Scope: k.Scope, Partition: k.Partition, Generation: 1, AttemptID: "x", Successor: fmt.Appendf(nil, "s%d", i), Disposition: reconcile.Pending}))
	}
	for i, k := range keys {
		cp, err := s.LoadCheckpoint(ctx(t), k)
		require.NoError(t, err)
		require.Equal(t, fmt.Appendf(nil, "c%d", i), cp.Cursor, "%q", k)
		require.Equal(t, k, cp.Key)
		ws, err := s.Witnesses(ctx(t), k, 1)
		require.NoError(t, err)
		require.Len(t, ws, 1, "%q", k)
		require.Equal(t, fmt.Appendf(nil, "s%d", i), ws[0].Successor, "%q", k)
	}
	gotM, err := s.LoadMembership(ctx(t), "a")
	require.NoError(t, err)
	require.Equal(t, m, gotM)
	gotF, err := s.LoadFrontier(ctx(t), "a")
	require.NoError(t, err)
	require.Equal(t, f, gotF)
	_, err = s.LoadMembership(ctx(t), "a#b")
	require.ErrorIs(t, err, store.ErrNotFound)
	list, err := s.ListCheckpoints(ctx(t), "a")
	require.NoError(t, err)
	require.Len(t, list, 9)
}

// The store keeps its own copies: changing a slice after a call changes
// nothing stored.
func testDeepCopies(t *testing.T, s store.Store) {
	cursor := []byte("C0")
	made, err := s.CreateCheckpoint(ctx(t), store.Checkpoint{Key: key, Cursor: cursor, Generation: 1})
	require.NoError(t, err)
	cursor[0] = 'X'
	made.Cursor[1] = 'Y'
	got, err := s.LoadCheckpoint(ctx(t), key)
	require.NoError(t, err)
	require.Equal(t, []byte("C0"), got.Cursor)
	got.Cursor[0] = 'Z'

	events := []reconcile.EventWitness{{IDHash: 1, Position: coord.IntPosition(1), Digest: 1}}
	succ := []byte("N1")
	require.NoError(t, s.PutWitness(ctx(t), reconcile.Witness{Scope: key.Scope, Partition: key.Partition, Generation: 1, AttemptID: "a", Events: events, Successor: succ, Disposition: reconcile.Pending}))
	events[0].Position = coord.IntPosition(99)
	succ[0] = 'X'
	ws, err := s.Witnesses(ctx(t), key, 1)
	require.NoError(t, err)
	require.Equal(t, coord.IntPosition(1), ws[0].Events[0].Position)
	require.Equal(t, []byte("N1"), ws[0].Successor)
	ws[0].Events[0].Position = coord.IntPosition(7)
	ws, err = s.Witnesses(ctx(t), key, 1)
	require.NoError(t, err)
	require.Equal(t, coord.IntPosition(1), ws[0].Events[0].Position)

	parts := []string{"p0", "p1"}
	m, err := s.SwapMembership(ctx(t), 0, store.Membership{Scope: key.Scope, Epoch: 1, Partitions: parts})
	require.NoError(t, err)
	parts[0] = "zz"
	m.Partitions[1] = "yy"
	gotM, err := s.LoadMembership(ctx(t), key.Scope)
	require.NoError(t, err)
	require.Equal(t, []string{"p0", "p1"}, gotM.Partitions)

	vec := map[string]coord.Watermark{"p0": integer(1)}
	_, err = s.PublishFrontier(ctx(t), store.Frontier{}, store.Frontier{Scope: key.Scope, Epoch: 1, Scalar: integer(1), Vector: vec})
	require.NoError(t, err)
	vec["p0"] = integer(100)
	gotF, err := s.LoadFrontier(ctx(t), key.Scope)
	require.NoError(t, err)
	require.Equal(t, integer(1), gotF.Vector["p0"])
}

// A promotion that completes the partition stores the mark with the
// checkpoint, in the same conditional write: a reload (a restart) sees it,
// ListCheckpoints sees it, a replay of the same promotion is recognised as
// applied, and a later promotion (an operator's restart) clears it.
func testCompletionIsDurable(t *testing.T, s store.Store) {
	cp := create(t, s, key, "C1")
	require.False(t, cp.Complete)
	p := promotion(cp, "C1", "w-last")
	p.Complete, p.Applied, p.HasApplied = true, coord.IntPosition(42), true
	done := promote(t, s, p)
	require.True(t, done.Complete)
	require.Equal(t, []byte("C1"), done.Cursor, "a traversal that ended keeps its last cursor")

	loaded, err := s.LoadCheckpoint(ctx(t), key)
	require.NoError(t, err)
	require.True(t, loaded.Complete, "completion survives a reload")
	require.Equal(t, coord.IntPosition(42), loaded.Applied)
	all, err := s.ListCheckpoints(ctx(t), key.Scope)
	require.NoError(t, err)
	require.Len(t, all, 1)
	require.True(t, all[0].Complete)

	again, err := s.Promote(ctx(t), p)
	require.NoError(t, err, "a replayed completing promotion is recognised as applied")
	require.Equal(t, done.Generation, again.Generation)

	reopen := promotion(loaded, "", "restart:operator")
	reopened := promote(t, s, reopen)
	require.False(t, reopened.Complete, "a later promotion clears completion")
	loaded, err = s.LoadCheckpoint(ctx(t), key)
	require.NoError(t, err)
	require.False(t, loaded.Complete)
}

// One conditional write promotes three consecutive pages: the generation
// moves by three, the checkpoint names the last page's witness and holds
// its successor and watermark; its repeat is recognised as applied; the
// promotion of the first page alone, by a slower writer, is fenced with
// the coalesced winner, which the loser then reads.
func testCoalescedPromotion(t *testing.T, s store.Store) {
	cp := create(t, s, key, "c1")
	p := promotion(cp, "c4", "w3")
	p.Pages = 3
	p.Watermark = integer(30)
	got := promote(t, s, p)
	require.Equal(t, uint64(4), got.Generation)
	require.Equal(t, []byte("c4"), got.Cursor)
	require.Equal(t, "w3", got.PromotedWitness)
	require.True(t, store.SameWatermark(got.Watermark, integer(30)))

	again, err := s.Promote(ctx(t), p)
	require.NoError(t, err, "the repeat of an applied coalesced promotion")
	require.Equal(t, got, again)

	single := promotion(cp, "c2", "w1")
	fe := requireFence(t, firstErr(s.Promote(ctx(t), single)))
	require.NotNil(t, fe.Winner)
	require.Equal(t, uint64(4), fe.Winner.Generation, "the loser learns the winner")
	loaded, err := s.LoadCheckpoint(ctx(t), key)
	require.NoError(t, err)
	require.Equal(t, got, loaded)

	tooMany := promotion(loaded, "c9", "w9")
	tooMany.Pages = store.MaxPromotionPages + 1
	_, err = s.Promote(ctx(t), tooMany)
	require.ErrorIs(t, err, store.ErrInvalid)
}
