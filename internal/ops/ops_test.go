package ops

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/membership"
	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/store/memstore"
	"github.com/tidemark/tidemark/provider"
)

const scope = "ops"

func key(p string) store.Key { return store.Key{Scope: scope, Partition: p} }

// promote moves part one generation on (cursor "<part>-<gen>") with the
// watermark wm (0: keep).
func promote(t *testing.T, st store.Store, part string, wm int64) store.Checkpoint {
	t.Helper()
	ctx := context.Background()
	cp, err := st.LoadCheckpoint(ctx, key(part))
	require.NoError(t, err)
	p := store.Promotion{
		Key: cp.Key, FromCursor: cp.Cursor, FromGeneration: cp.Generation,
		To:        []byte(fmt.Sprintf("%s-%d", part, cp.Generation+1)),
		WitnessID: fmt.Sprintf("w-%s-%d", part, cp.Generation), Epoch: cp.Epoch,
		Applied: coord.IntPosition(wm), HasApplied: wm != 0,
	}
	if wm != 0 {
		p.AppliedID = fmt.Sprintf("%s-ev%d", part, wm)
	}
	if wm != 0 {
		// p0's watermark rests on an append-only writer assertion, the
		// others' on their source.
		p.Watermark, p.Finality = coord.Integer(wm), reconcile.Basis{Finality: provider.FinalitySource}
		if part == "p0" {
			p.Finality = reconcile.Basis{Finality: provider.FinalityAppendOnlyWriter}
		}
	}
	next, err := st.Promote(ctx, p)
	require.NoError(t, err)
	return next
}

func create(t *testing.T, st store.Store, part string, lease store.Lease) {
	t.Helper()
	_, err := st.CreateCheckpoint(context.Background(), store.Checkpoint{Key: key(part), Cursor: []byte(part + "-1"), Generation: 1, Epoch: 1, Lease: lease})
	require.NoError(t, err)
}

func pendingWitness(part string, gen uint64, cursor []byte, attempt string, d reconcile.Disposition) reconcile.Witness {
	return reconcile.Witness{Scope: scope, Partition: part, Generation: gen, InputCursor: cursor, AttemptID: attempt, Successor: []byte("next"), Disposition: d}
}

const parkReason = "malformed page after 6 attempts: partition p1, generation 2, cursor sha256:0123abcd01234567: injected garbage body"

// fixture: p0 advancing (leased), p1 parked, p2 with one pending witness at
// its checkpoint, p9 a checkpoint outside the membership; published
// frontier 90.
func fixture(t *testing.T) *memstore.Store {
	t.Helper()
	ctx := context.Background()
	st := memstore.New()
	_, err := st.SwapMembership(ctx, 0, store.Membership{Scope: scope, Epoch: 1, Partitions: []string{"p0", "p1", "p2"}, Proven: true})
	require.NoError(t, err)

	create(t, st, "p0", store.Lease{Owner: "worker-a", Counter: 3})
	promote(t, st, "p0", 100)
	promote(t, st, "p0", 150)

	create(t, st, "p1", store.Lease{})
	p1 := promote(t, st, "p1", 90)
	_, err = st.SetParked(ctx, key("p1"), p1.Cursor, p1.Generation, p1.Lease, parkReason)
	require.NoError(t, err)

	create(t, st, "p2", store.Lease{})
	p2 := promote(t, st, "p2", 120)
	// Counted: pending, at p2's generation and cursor.
	require.NoError(t, st.PutWitness(ctx, pendingWitness("p2", p2.Generation, p2.Cursor, "0002-a", reconcile.Pending)))
	// Not counted: another cursor, abandoned, or an older generation.
	require.NoError(t, st.PutWitness(ctx, pendingWitness("p2", p2.Generation, []byte("other"), "0002-b", reconcile.Pending)))
	require.NoError(t, st.PutWitness(ctx, pendingWitness("p2", p2.Generation, p2.Cursor, "0002-c", reconcile.Abandoned)))
	require.NoError(t, st.PutWitness(ctx, pendingWitness("p2", 1, []byte("p2-1"), "0001-a", reconcile.Pending)))

	create(t, st, "p9", store.Lease{})
	promote(t, st, "p9", 10)

	_, err = st.PublishFrontier(ctx, store.Frontier{}, store.Frontier{
		Scope: scope, Epoch: 1, Scalar: coord.Integer(90),
		Vector: map[string]coord.Watermark{"p0": coord.Integer(150), "p1": coord.Integer(90), "p2": coord.Integer(120)},
		HeldBy: []string{"p1"},
	})
	require.NoError(t, err)
	return st
}

func i64(n int64) *int64   { return &n }
func str(s string) *string { return &s }

func TestReadStatus(t *testing.T) {
	st := fixture(t)
	s, err := ReadStatus(context.Background(), st, scope)
	require.NoError(t, err)

	assert.Equal(t, scope, s.Scope)
	assert.Equal(t, uint64(1), s.Epoch)
	assert.True(t, s.Proven)
	assert.Equal(t, []string{"p0", "p1", "p2"}, s.Membership)
	assert.Equal(t, str("90"), s.Frontier)
	assert.Equal(t, []string{"p1"}, s.HeldBy)
	assert.Empty(t, s.Reason)
	assert.Equal(t, "append_only_writer assertion (p0)", s.FrontierFinality, "the frontier names the assertion it rests on")
	assert.Equal(t, map[string]string{"p0": "150", "p1": "90", "p2": "120"}, s.Vector)
	assert.Equal(t, str("90 (epoch 1)"), s.Published)

	want := []PartitionStatus{
		{Partition: "p0", AppliedID: "p0-ev150", Generation: 3, Watermark: "150", Finality: "append_only_writer assertion", Applied: "150", CursorHash: reconcile.CursorHash([]byte("p0-3")),
			PromotedWitness: "w-p0-2", LeaseOwner: "worker-a", LeaseCounter: 3, Lag: i64(0), Member: true},
		{Partition: "p1", AppliedID: "p1-ev90", Generation: 2, Watermark: "90", Finality: "source", Applied: "90", CursorHash: reconcile.CursorHash([]byte("p1-2")),
			PromotedWitness: "w-p1-1", Parked: parkReason, Lag: i64(60), Member: true},
		{Partition: "p2", AppliedID: "p2-ev120", Generation: 2, Watermark: "120", Finality: "source", Applied: "120", CursorHash: reconcile.CursorHash([]byte("p2-2")),
			PromotedWitness: "w-p2-1", PendingWitness: 1, Lag: i64(30), Member: true},
		{Partition: "p9", AppliedID: "p9-ev10", Generation: 2, Watermark: "10", Finality: "source", Applied: "10", CursorHash: reconcile.CursorHash([]byte("p9-2")),
			PromotedWitness: "w-p9-1", Lag: i64(140), Member: false},
	}
	assert.Equal(t, want, s.Partitions)
}

func TestStatusJSON(t *testing.T) {
	st := fixture(t)
	s, err := ReadStatus(context.Background(), st, scope)
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, WriteJSON(&buf, s))
	assert.NotContains(t, buf.String(), "p0-3", "raw cursors never appear, only their hash")

	var got map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &got))
	assert.Equal(t, "ops", got["scope"])
	assert.Equal(t, float64(1), got["epoch"])
	assert.Equal(t, true, got["membership_proven"])
	assert.Equal(t, "90", got["frontier"])
	assert.Equal(t, []any{"p1"}, got["held_by"])
	assert.Equal(t, "90 (epoch 1)", got["published_frontier"])
	assert.Equal(t, "append_only_writer assertion (p0)", got["frontier_finality"])
	assert.Equal(t, map[string]any{"p0": "150", "p1": "90", "p2": "120"}, got["vector"])
	parts := got["partitions"].([]any)
	require.Len(t, parts, 4)
	p1 := parts[1].(map[string]any)
	assert.Equal(t, map[string]any{
		"partition": "p1", "generation": float64(2), "watermark": "90", "finality": "source", "applied": "90", "applied_id": "p1-ev90",
		"cursor_hash": reconcile.CursorHash([]byte("p1-2")), "promoted_witness": "w-p1-1",
		"pending_witnesses": float64(0), "parked": parkReason, "lag": float64(60), "member": true, "complete": false,
	}, p1)
	p2 := parts[2].(map[string]any)
	assert.Equal(t, float64(1), p2["pending_witnesses"])
	_, parked := p2["parked"]
	assert.False(t, parked, "an advancing partition has no parked field")
	p0 := parts[0].(map[string]any)
	assert.Equal(t, "worker-a", p0["lease_owner"])
	assert.Equal(t, float64(3), p0["lease_counter"])

	// The JSON round-trips into Status.
	var back Status
	require.NoError(t, json.Unmarshal(buf.Bytes(), &back))
	assert.Equal(t, s, back)
}

func TestStatusTable(t *testing.T) {
	st := fixture(t)
	s, err := ReadStatus(context.Background(), st, scope)
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, WriteTable(&buf, s))
	lines := strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")
	require.Len(t, lines, 6, buf.String())
	assert.Equal(t, "scope ops  epoch 1 (proven true)  frontier 90  held by p1  resting on append_only_writer assertion (p0)  published 90 (epoch 1)", lines[0])
	assert.Equal(t, []string{"PARTITION", "GENERATION", "WATERMARK", "FINALITY", "APPLIED", "APPLIED_ID", "LAG", "CURSOR", "PENDING", "LEASE", "PARKED"}, strings.Fields(lines[1]))
	assert.Equal(t, []string{"p0", "3", "150", "append_only_writer_assertion", "150", "p0-ev150", "0", reconcile.CursorHash([]byte("p0-3")), "0", "worker-a#3", "-"}, strings.Fields(lines[2]))
	assert.Equal(t, append([]string{"p1", "2", "90", "source", "90", "p1-ev90", "60", reconcile.CursorHash([]byte("p1-2")), "0", "-"}, strings.Fields(parkReason)...), strings.Fields(lines[3]))
	assert.Equal(t, []string{"p2", "2", "120", "source", "120", "p2-ev120", "30", reconcile.CursorHash([]byte("p2-2")), "1", "-", "-"}, strings.Fields(lines[4]))
	assert.Equal(t, []string{"p9", "(not", "a", "member)", "2", "10", "source", "10", "p9-ev10", "140", reconcile.CursorHash([]byte("p9-2")), "0", "-", "-"}, strings.Fields(lines[5]))
	// Columns line up: every row's generation starts where the header's does.
	col := strings.Index(lines[1], "GENERATION")
	for _, l := range lines[2:] {
		assert.NotEqual(t, ' ', rune(l[col]), "row %q", l)
		assert.Equal(t, byte(' '), l[col-1], "row %q", l)
	}
}

func TestStatusWithheldAndEmpty(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	// No checkpoints, no membership: an empty, valid status.
	s, err := ReadStatus(ctx, st, scope)
	require.NoError(t, err)
	assert.Nil(t, s.Frontier)
	assert.Empty(t, s.Partitions)
	var buf bytes.Buffer
	require.NoError(t, WriteTable(&buf, s))
	assert.Contains(t, buf.String(), "frontier withheld")

	// No membership record: the checkpoints are epoch 1. One partition has
	// no watermark: it holds the frontier back.
	create(t, st, "a", store.Lease{})
	create(t, st, "b", store.Lease{})
	promote(t, st, "a", 5)
	s, err = ReadStatus(ctx, st, scope)
	require.NoError(t, err)
	assert.Nil(t, s.Frontier)
	assert.Equal(t, []string{"b"}, s.HeldBy)
	assert.Equal(t, map[string]string{"a": "5", "b": "none"}, s.Vector)
	assert.Contains(t, s.Reason, "no complete-through watermark")
	assert.Nil(t, s.Partitions[1].Lag, "no lag without a watermark")

	// An unproven epoch withholds the scalar and says why.
	promote(t, st, "b", 7)
	_, err = st.SwapMembership(ctx, 0, store.Membership{Scope: scope, Epoch: 2, Partitions: []string{"a", "b"}, Reason: "remove c: not sealed", Unproven: []string{"c"}})
	require.NoError(t, err)
	s, err = ReadStatus(ctx, st, scope)
	require.NoError(t, err)
	assert.Nil(t, s.Frontier)
	assert.False(t, s.Proven)
	assert.Contains(t, s.Reason, "remove c: not sealed")
	buf.Reset()
	require.NoError(t, WriteTable(&buf, s))
	assert.Contains(t, buf.String(), "epoch 2 (proven false)  frontier withheld")
	assert.Contains(t, buf.String(), "remove c: not sealed")
}

// --- repairs ------------------------------------------------------------------

func load(t *testing.T, st store.Store, part string) store.Checkpoint {
	t.Helper()
	cp, err := st.LoadCheckpoint(context.Background(), key(part))
	require.NoError(t, err)
	return cp
}

func TestPlanUnpark(t *testing.T) {
	ctx := context.Background()
	st := fixture(t)
	before := load(t, st, "p1")
	r, err := PlanUnpark(ctx, st, key("p1"), Options{})
	require.NoError(t, err)
	assert.Equal(t, `clear the park reason of ops/p1 ("`+parkReason+`") if it still holds generation 2`, r.Describe)
	assert.Equal(t, before, load(t, st, "p1"), "planning writes nothing")

	require.NoError(t, firstErr(r.Apply(ctx)))
	after := load(t, st, "p1")
	assert.Empty(t, after.Parked)
	require.Len(t, after.Repairs, 1, "the unpark writes its audit entry")
	before.Parked, before.Repairs = "", after.Repairs
	assert.Equal(t, before, after, "unparking changes nothing but the reason and the repair log")

	_, err = PlanUnpark(ctx, st, key("p1"), Options{})
	assert.ErrorContains(t, err, "ops/p1 is not parked")
	_, err = PlanUnpark(ctx, st, key("nope"), Options{})
	assert.ErrorIs(t, err, store.ErrNotFound)
}

func TestPlanUnparkLosesWhenStateChanged(t *testing.T) {
	ctx := context.Background()
	st := fixture(t)
	r, err := PlanUnpark(ctx, st, key("p1"), Options{})
	require.NoError(t, err)

	// Meanwhile another operator unparks p1 and its worker promotes it.
	cp := load(t, st, "p1")
	_, err = st.SetParked(ctx, cp.Key, cp.Cursor, cp.Generation, cp.Lease, "")
	require.NoError(t, err)
	won := promote(t, st, "p1", 95)

	_, err = r.Apply(ctx)
	require.Error(t, err)
	assert.True(t, IsFenced(err), "a stale repair loses with a fence error: %v", err)
	var fe *store.FenceError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, won, load(t, st, "p1"), "the worker's progress is untouched")
}

func TestPlanRestart(t *testing.T) {
	ctx := context.Background()
	st := fixture(t)
	before := load(t, st, "p2")
	r, err := PlanRestart(ctx, st, key("p2"), []byte("boundary-121"), Options{})
	require.NoError(t, err)
	assert.Equal(t, "move ops/p2 from generation 2 to generation 3 at the given boundary cursor "+reconcile.CursorHash([]byte("boundary-121"))+
		", a cursor this partition's checkpoint and witnesses do not hold: its position is not checked (watermark 120 and applied 120 kept)", r.Describe)
	assert.Equal(t, before, load(t, st, "p2"), "planning writes nothing")
	require.NoError(t, firstErr(r.Apply(ctx)))
	after := load(t, st, "p2")
	assert.Equal(t, uint64(3), after.Generation)
	assert.Equal(t, []byte("boundary-121"), after.Cursor)
	assert.Equal(t, coord.Integer(120), after.Watermark, "the watermark is kept, never lowered")
	assert.Equal(t, before.Applied, after.Applied)
	assert.Equal(t, "repair:restart", after.PromotedWitness)
	assert.Empty(t, after.Parked)

	// A parked partition is unparked first.
	r, err = PlanRestart(ctx, st, key("p1"), []byte("boundary-91"), Options{})
	require.NoError(t, err)
	assert.Contains(t, r.Describe, "move ops/p1 from generation 2 to generation 3 at the given boundary cursor")
	assert.True(t, strings.HasSuffix(r.Describe, "(watermark 90 and applied 90 kept), unparking it first"), r.Describe)
	require.NoError(t, firstErr(r.Apply(ctx)))
	after = load(t, st, "p1")
	assert.Equal(t, uint64(3), after.Generation)
	assert.Equal(t, []byte("boundary-91"), after.Cursor)
	assert.Empty(t, after.Parked)
	assert.Equal(t, coord.Integer(90), after.Watermark)

	_, err = PlanRestart(ctx, st, key("p2"), make([]byte, store.MaxCursorBytes+1), Options{})
	assert.ErrorIs(t, err, store.ErrInvalid)
	_, err = PlanRestart(ctx, st, key("nope"), nil, Options{})
	assert.ErrorIs(t, err, store.ErrNotFound)
}

func TestPlanRestartLosesWhenStateChanged(t *testing.T) {
	ctx := context.Background()
	st := fixture(t)
	r, err := PlanRestart(ctx, st, key("p0"), []byte("boundary"), Options{})
	require.NoError(t, err)
	won := promote(t, st, "p0", 160) // the live worker promotes first
	_, err = r.Apply(ctx)
	require.Error(t, err)
	assert.True(t, IsFenced(err), "%v", err)
	assert.Equal(t, won, load(t, st, "p0"), "the worker's progress is untouched")

	// A parked partition unparked and advanced by someone else meanwhile.
	r, err = PlanRestart(ctx, st, key("p1"), []byte("boundary"), Options{})
	require.NoError(t, err)
	cp := load(t, st, "p1")
	_, err = st.SetParked(ctx, cp.Key, cp.Cursor, cp.Generation, cp.Lease, "")
	require.NoError(t, err)
	won = promote(t, st, "p1", 95)
	_, err = r.Apply(ctx)
	assert.True(t, IsFenced(err), "%v", err)
	assert.Equal(t, won, load(t, st, "p1"))
}

// resumingWorker is a store in which the partition's worker, waiting while
// it is parked, resumes and promotes as soon as it sees the park cleared:
// exactly what input.partition.waitUnparked does.
type resumingWorker struct {
	*memstore.Store
	t *testing.T
}

func (s resumingWorker) SetParked(ctx context.Context, k store.Key, cursor []byte, gen uint64, l store.Lease, reason string) (store.Checkpoint, error) {
	cp, err := s.Store.SetParked(ctx, k, cursor, gen, l, reason)
	if err == nil && reason == "" {
		promote(s.t, s.Store, k.Partition, 0)
	}
	return cp, err
}

// Restarting a parked partition is two conditional writes (unpark, then
// promote). When the resumed worker promotes in between, the restart's
// promotion loses, but the unpark was written: the error must say so
// rather than let the caller believe nothing was written.
func TestPlanRestartOfParkedPartitionReportsThePartialWrite(t *testing.T) {
	ctx := context.Background()
	st := resumingWorker{Store: fixture(t), t: t}
	r, err := PlanRestart(ctx, st, key("p1"), []byte("boundary"), Options{})
	require.NoError(t, err)
	_, err = r.Apply(ctx)
	require.Error(t, err)
	assert.True(t, IsFenced(err), "%v", err)
	cp := load(t, st, "p1")
	assert.Empty(t, cp.Parked, "the unpark was written")
	assert.Equal(t, uint64(3), cp.Generation, "the worker's promotion won")
	assert.Contains(t, err.Error(), "unparked", "the error reports that the unpark was written: %v", err)
}

func TestPlanAdvanceEpoch(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	_, err := PlanAdvanceEpoch(ctx, st, scope, coord.Integer(90), Options{})
	assert.ErrorIs(t, err, store.ErrNotFound, "no membership record to advance")

	unproven := store.Membership{Scope: scope, Epoch: 2, Partitions: []string{"p0", "p1", "p2"}, Cutover: coord.Integer(80),
		Reason: "add p2: no proof of coverage", Unproven: []string{"p2"}}
	_, err = st.SwapMembership(ctx, 0, unproven)
	require.NoError(t, err)
	// No checkpoints prove anything: the operator's proof is forced.
	_, err = PlanAdvanceEpoch(ctx, st, scope, coord.Integer(90), Options{})
	require.True(t, IsRefused(err), "%v", err)
	r, err := PlanAdvanceEpoch(ctx, st, scope, coord.Integer(90), Options{Force: true})
	require.NoError(t, err)
	assert.Equal(t, "advance membership of ops from epoch 2 (proven false) to epoch 3, proven through cutover 90, partitions [p0 p1 p2]", r.Describe)
	m, err := st.LoadMembership(ctx, scope)
	require.NoError(t, err)
	assert.Equal(t, uint64(2), m.Epoch, "planning writes nothing")

	require.NoError(t, firstErr(r.Apply(ctx)))
	m, err = st.LoadMembership(ctx, scope)
	require.NoError(t, err)
	require.Len(t, m.Repairs, 1, "the membership record carries the audit entry")
	assert.Equal(t, store.Membership{Scope: scope, Epoch: 3, Partitions: []string{"p0", "p1", "p2"}, Cutover: coord.Integer(90), Proven: true, Repairs: m.Repairs}, m)

	// The status now has a scalar again.
	s, err := ReadStatus(ctx, st, scope)
	require.NoError(t, err)
	assert.Equal(t, uint64(3), s.Epoch)
	assert.True(t, s.Proven)
}

// An operator's epoch keeps the lineage of the members: a split's children
// still wait for their parent.
func TestPlanAdvanceEpochKeepsLineage(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	split := store.Membership{Scope: scope, Epoch: 4, Partitions: []string{"p0", "p0.1", "p0.2"}, Proven: true,
		Parents: map[string][]string{"p0.1": {"p0"}, "p0.2": {"p0"}}}
	_, err := st.SwapMembership(ctx, 0, split)
	require.NoError(t, err)
	r, err := PlanAdvanceEpoch(ctx, st, scope, coord.Integer(120), Options{Force: true})
	require.NoError(t, err)
	require.NoError(t, firstErr(r.Apply(ctx)))
	m, err := st.LoadMembership(ctx, scope)
	require.NoError(t, err)
	assert.Equal(t, uint64(5), m.Epoch)
	assert.Equal(t, split.Parents, m.Parents)
}

func TestPlanAdvanceEpochLosesWhenMembershipChanged(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	_, err := st.SwapMembership(ctx, 0, store.Membership{Scope: scope, Epoch: 2, Partitions: []string{"p0"}, Reason: "x", Unproven: []string{"p1"}})
	require.NoError(t, err)
	r, err := PlanAdvanceEpoch(ctx, st, scope, coord.Integer(90), Options{Force: true})
	require.NoError(t, err)
	// Meanwhile the input changes the membership (another epoch).
	theirs := store.Membership{Scope: scope, Epoch: 3, Partitions: []string{"p0", "p5"}, Reason: "add p5", Unproven: []string{"p1", "p5"}}
	_, err = st.SwapMembership(ctx, 2, theirs)
	require.NoError(t, err)

	_, err = r.Apply(ctx)
	require.Error(t, err)
	assert.True(t, IsFenced(err), "%v", err)
	m, err := st.LoadMembership(ctx, scope)
	require.NoError(t, err)
	assert.Equal(t, theirs, m, "the concurrent epoch is untouched")
}

func TestIsFenced(t *testing.T) {
	assert.True(t, IsFenced(&store.FenceError{Op: "x"}))
	assert.True(t, IsFenced(fmt.Errorf("wrapped: %w", store.ErrFenced)))
	assert.False(t, IsFenced(errors.New("transport")))
	assert.False(t, IsFenced(nil))
}

// A durably complete partition shows as complete in the status, in JSON and
// in the table.
func TestStatusShowsDurableCompletion(t *testing.T) {
	st := memstore.New()
	k := store.Key{Scope: "done-scope", Partition: "p0"}
	cp, err := st.CreateCheckpoint(context.Background(), store.Checkpoint{Key: k, Cursor: []byte("c1"), Generation: 1, Epoch: 1})
	require.NoError(t, err)
	_, err = st.Promote(context.Background(), store.Promotion{Key: k, FromCursor: cp.Cursor, FromGeneration: 1, To: cp.Cursor, WitnessID: "w-last", Applied: coord.IntPosition(7), HasApplied: true, Complete: true, Epoch: 1})
	require.NoError(t, err)
	s, err := ReadStatus(context.Background(), st, "done-scope")
	require.NoError(t, err)
	require.Len(t, s.Partitions, 1)
	assert.True(t, s.Partitions[0].Complete)
	var b strings.Builder
	require.NoError(t, WriteTable(&b, s))
	assert.Contains(t, b.String(), "p0 (complete)")
}

// A partition's contract violation counts (written with its promotions)
// and a withdrawal of the scalar frontier on its account are shown by
// status: the counts per partition and kind in the table and the JSON, the
// withdrawal as the unproven epoch's reason.
func TestStatusShowsContractViolationsAndTheWithdrawal(t *testing.T) {
	ctx := context.Background()
	st := fixture(t)
	cp := load(t, st, "p2")
	_, err := st.Promote(ctx, store.Promotion{Key: cp.Key, FromCursor: cp.Cursor, FromGeneration: cp.Generation, To: []byte("p2-3"), WitnessID: "w-p2-2", Epoch: 1,
		Violations: map[string]uint64{"late_position": 1, "self_certified_watermark": 2}})
	require.NoError(t, err)
	_, wrote, err := membership.Withdraw(ctx, st, scope, "p2", "contract violation late_position: partition p2: an event at position 110, at or below 120")
	require.NoError(t, err)
	require.True(t, wrote)

	s, err := ReadStatus(ctx, st, scope)
	require.NoError(t, err)
	assert.Nil(t, s.Frontier, "the scalar is withdrawn")
	assert.False(t, s.Proven)
	assert.Contains(t, s.Reason, "withdrawn: partition p2: contract violation late_position")
	assert.Equal(t, map[string]uint64{"late_position": 1, "self_certified_watermark": 2}, s.Partitions[2].Violations)
	assert.Nil(t, s.Partitions[0].Violations)

	var buf bytes.Buffer
	require.NoError(t, WriteTable(&buf, s))
	assert.Contains(t, buf.String(), "frontier withheld")
	assert.Contains(t, buf.String(), "withdrawn: partition p2: contract violation late_position")
	assert.Contains(t, buf.String(), "\ncontract violations of p2: late_position=1, self_certified_watermark=2\n")
	assert.Equal(t, 1, strings.Count(buf.String(), "contract violations of"))

	buf.Reset()
	require.NoError(t, WriteJSON(&buf, s))
	var got map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &got))
	parts := got["partitions"].([]any)
	assert.Equal(t, map[string]any{"late_position": float64(1), "self_certified_watermark": float64(2)}, parts[2].(map[string]any)["contract_violations"])
	_, has := parts[0].(map[string]any)["contract_violations"]
	assert.False(t, has, "no violations, no field")
}

// A partition whose fetches keep failing transiently (never parked, so its
// PARKED column says "-") shows its worker's failure note, in the table
// and in JSON; the promotion that follows clears it.
func TestStatusShowsWhyAPartitionFailingTransientlyDoesNotAdvance(t *testing.T) {
	ctx := context.Background()
	st := fixture(t)
	cp := load(t, st, "p2")
	note := "7 fetch(es) of cursor sha256:0123abcd01234567 at generation 2 failed in a row (retried for ever, not parked) since 2026-12-06T03:00:00.000Z; the last at 2026-12-06T03:10:00.000Z: HTTP 503"
	_, err := st.NoteFailure(ctx, cp.Key, cp.Cursor, cp.Generation, cp.Lease, note)
	require.NoError(t, err)

	s, err := ReadStatus(ctx, st, scope)
	require.NoError(t, err)
	assert.Equal(t, note, partition(t, s, "p2").Failing)
	assert.Empty(t, partition(t, s, "p0").Failing)
	var buf bytes.Buffer
	require.NoError(t, WriteTable(&buf, s))
	assert.Contains(t, buf.String(), "\nfailing fetches of p2: "+note+"\n")
	assert.Equal(t, 1, strings.Count(buf.String(), "failing fetches of"))
	buf.Reset()
	require.NoError(t, WriteJSON(&buf, s))
	var got Status
	require.NoError(t, json.Unmarshal(buf.Bytes(), &got))
	assert.Equal(t, note, partition(t, got, "p2").Failing)

	promote(t, st, "p2", 130)
	s, err = ReadStatus(ctx, st, scope)
	require.NoError(t, err)
	assert.Empty(t, partition(t, s, "p2").Failing, "the promotion cleared the note")
	buf.Reset()
	require.NoError(t, WriteTable(&buf, s))
	assert.NotContains(t, buf.String(), "failing fetches of")
}

// Read without keys, status names the key ids a scope's cursors are stored
// encrypted under and says that an input without them refuses to start;
// read with the keys, it shows the cursors' hashes and names none.
func TestStatusNamesTheKeyIDsOfAnEncryptedScope(t *testing.T) {
	ctx := context.Background()
	raw := memstore.New()
	key := func(id string) store.CursorKey { return store.CursorKey{ID: id, Key: bytes.Repeat([]byte(id[:1]), 32)} }
	old, err := store.Encrypted(raw, []store.CursorKey{key("k1")}, "k1")
	require.NoError(t, err)
	create(t, old, "p0", store.Lease{})
	rotated, err := store.Encrypted(raw, []store.CursorKey{key("k1"), key("k2")}, "k2")
	require.NoError(t, err)
	create(t, rotated, "p1", store.Lease{})
	create(t, raw, "p2", store.Lease{}) // stored in clear before encryption

	s, err := ReadStatus(ctx, raw, scope)
	require.NoError(t, err)
	assert.Equal(t, []string{"k1", "k2"}, s.CursorKeyIDs)
	assert.Equal(t, "encrypted", partition(t, s, "p0").CursorHash)
	var buf bytes.Buffer
	require.NoError(t, WriteTable(&buf, s))
	assert.Contains(t, buf.String(), "cursors of scope ops are stored encrypted under key id(s) k1, k2: an input of the scope needs checkpoint.cursor_encryption with these ids (without, it refuses to start)")
	buf.Reset()
	require.NoError(t, WriteJSON(&buf, s))
	assert.Contains(t, buf.String(), `"cursor_key_ids": [`)

	s, err = ReadStatus(ctx, rotated, scope)
	require.NoError(t, err)
	assert.Empty(t, s.CursorKeyIDs)
	assert.Equal(t, reconcile.CursorHash([]byte("p0-1")), partition(t, s, "p0").CursorHash)
	buf.Reset()
	require.NoError(t, WriteTable(&buf, s))
	assert.NotContains(t, buf.String(), "stored encrypted under")
}

func partition(t *testing.T, s Status, name string) PartitionStatus {
	t.Helper()
	for _, p := range s.Partitions {
		if p.Partition == name {
			return p
		}
	}
	t.Fatalf("no partition %s in the status", name)
	return PartitionStatus{}
}

// A partition read with a re-read window shows its current pass's range
// and the re-read lag its watermark rests on.
func TestStatusShowsTheRereadPass(t *testing.T) {
	st := memstore.New()
	k := store.Key{Scope: "reread-scope", Partition: "p0"}
	cp, err := st.CreateCheckpoint(context.Background(), store.Checkpoint{Key: k, Cursor: []byte("c1"), Generation: 1, Epoch: 1})
	require.NoError(t, err)
	_, err = st.Promote(context.Background(), store.Promotion{Key: k, FromCursor: cp.Cursor, FromGeneration: 1, To: []byte("R"), WitnessID: "restart:reread", Epoch: 1,
		Watermark: coord.Integer(900), Finality: reconcile.Basis{Finality: provider.FinalityLag, Lag: 100, Reread: true},
		Reread: &store.RereadState{From: coord.IntPosition(900), HasFrom: true, Mark: coord.IntPosition(1000)}})
	require.NoError(t, err)
	s, err := ReadStatus(context.Background(), st, "reread-scope")
	require.NoError(t, err)
	require.Len(t, s.Partitions, 1)
	assert.Equal(t, "(900, 1000]", s.Partitions[0].Reread)
	assert.Equal(t, "reread lag 100", s.Partitions[0].Finality)
	var b strings.Builder
	require.NoError(t, WriteTable(&b, s))
	assert.Contains(t, b.String(), "reread_lag_100")
}
