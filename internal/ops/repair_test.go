package ops

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/store/memstore"
)

func firstErr[T any](_ T, err error) error { return err }

var operator = Operator{Time: time.Date(2026, 12, 4, 16, 40, 0, 0, time.UTC), User: "alice", Host: "bastion-1"}

// completeFixture adds to fixture(t) partition "done": complete at
// generation 2, watermark 200, cursor "done-2".
func completeFixture(t *testing.T) *memstore.Store {
	t.Helper()
	st := fixture(t)
	create(t, st, "done", store.Lease{})
	cp := load(t, st, "done")
	_, err := st.Promote(context.Background(), store.Promotion{Key: cp.Key, FromCursor: cp.Cursor, FromGeneration: 1, To: []byte("done-2"), WitnessID: "w-done-1",
		Watermark: coord.Integer(200), Applied: coord.IntPosition(200), HasApplied: true, Complete: true, Epoch: 1})
	require.NoError(t, err)
	// Another pipeline's scope in the same table.
	_, err = st.CreateCheckpoint(context.Background(), store.Checkpoint{Key: store.Key{Scope: "other", Partition: "x"}, Cursor: []byte("other-7"), Generation: 1, Epoch: 1})
	require.NoError(t, err)
	return st
}

// Each refused restart names what the store holds against it and the flag
// that overrides it; with --force the same restart is made, keeping the
// watermark and applied position, and its audit entry records the
// override. The raw cursor appears nowhere.
func TestRestartRefusalsAndForce(t *testing.T) {
	tests := []struct {
		name      string
		partition string
		cursor    string
		refusal   []string // substrings of the refusal; none: allowed without --force
	}{
		{name: "unknown boundary is not checked", partition: "p2", cursor: "boundary-121"},
		{name: "the current cursor", partition: "p2", cursor: "p2-2"},
		{name: "a successor of the current generation moves forward", partition: "p2", cursor: "next"},
		{name: "an older cursor of the partition moves it backwards", partition: "p2", cursor: "p2-1",
			refusal: []string{"refusing to restart ops/p2", "the input cursor of its witness 0001-a at generation 1", "an older position", "backwards from generation 2 with watermark 120 and applied 120"}},
		{name: "the provider's start moves a partition with progress backwards", partition: "p2", cursor: "",
			refusal: []string{"the empty cursor is the provider's start", "backwards from generation 2 with watermark 120 and applied 120"}},
		{name: "another partition's current cursor", partition: "p2", cursor: "p0-3",
			refusal: []string{"the cursor belongs to partition p0 of scope ops (its current cursor), not to p2"}},
		{name: "another partition's witness successor", partition: "p0", cursor: "next",
			refusal: []string{"the cursor belongs to partition p2 of scope ops (the successor of its witness"}},
		{name: "another scope's cursor", partition: "p2", cursor: "other-7",
			refusal: []string{"the cursor belongs to partition x of scope other, not to scope ops"}},
		{name: "a complete partition", partition: "done", cursor: "boundary-201",
			refusal: []string{"ops/done is complete (watermark 200): the restart would clear its complete flag and read it again"}},
		{name: "a complete partition moved backwards", partition: "done", cursor: "",
			refusal: []string{"ops/done is complete", "the empty cursor is the provider's start"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			st := completeFixture(t)
			before := load(t, st, tc.partition)
			opts := Options{Operator: operator}
			r, err := PlanRestart(ctx, st, key(tc.partition), []byte(tc.cursor), opts)
			if len(tc.refusal) > 0 {
				require.Error(t, err)
				assert.True(t, IsRefused(err), "%v", err)
				for _, want := range tc.refusal {
					assert.Contains(t, err.Error(), want)
				}
				assert.Contains(t, err.Error(), "pass --force")
				if tc.cursor != "" {
					assert.NotContains(t, err.Error(), tc.cursor, "the raw cursor never appears")
				}
				assert.Equal(t, before, load(t, st, tc.partition), "a refused repair writes nothing")
				opts.Force = true
				r, err = PlanRestart(ctx, st, key(tc.partition), []byte(tc.cursor), opts)
			}
			require.NoError(t, err)
			after, err := r.Apply(ctx)
			require.NoError(t, err)

			cp := load(t, st, tc.partition)
			assert.Equal(t, tc.cursor, string(cp.Cursor))
			assert.Equal(t, before.Generation+1, cp.Generation)
			assert.Equal(t, before.Watermark, cp.Watermark, "the watermark is kept")
			assert.Equal(t, before.Applied, cp.Applied, "the applied position is kept")
			assert.False(t, cp.Complete, "a restart reopens the partition")
			assert.Equal(t, CheckpointState(before), r.Before)
			assert.Equal(t, CheckpointState(cp), after)

			require.Len(t, cp.Repairs, 1)
			e := cp.Repairs[0]
			assert.Equal(t, operator.Time, e.Time)
			assert.Equal(t, "alice", e.User)
			assert.Equal(t, "bastion-1", e.Host)
			wantCommand := "restart --scope ops --partition " + tc.partition + " --cursor " + reconcile.CursorHash([]byte(tc.cursor))
			wantPrev := map[string]string{
				"generation": strconv.FormatUint(before.Generation, 10), "cursor": reconcile.CursorHash(before.Cursor),
				"watermark": before.Watermark.String(), "applied": before.Applied.String(), "complete": strconv.FormatBool(before.Complete),
			}
			if len(tc.refusal) > 0 {
				wantCommand += " --force"
				assert.Contains(t, e.Previous["forced"], tc.refusal[len(tc.refusal)-1], "the entry records what --force overrode")
				delete(e.Previous, "forced")
			}
			assert.Equal(t, wantCommand, e.Command)
			assert.Equal(t, wantPrev, e.Previous)
			if tc.cursor != "" {
				raw, err := json.Marshal(cp.Repairs)
				require.NoError(t, err)
				assert.NotContains(t, string(raw), tc.cursor)
				assert.NotContains(t, r.Describe, tc.cursor)
			}
		})
	}
}

// Each refused cutover names what the store holds against it; --force
// writes it, with the audit entry on the membership record. The fixture's
// members hold watermarks 150, 90 and 120 (p0, p1, p2) and the published
// frontier is 90: only 90 is proven and not below the frontier.
func TestAdvanceEpochRefusalsAndForce(t *testing.T) {
	ts := coord.Timestamp(time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC))
	tests := []struct {
		name    string
		cutover coord.Watermark
		members []string
		refusal []string
	}{
		{name: "the minimum complete-through of the members", cutover: coord.Integer(90)},
		{name: "above what the checkpoints prove", cutover: coord.Integer(999999999),
			refusal: []string{"the cutover 999999999 is above what the checkpoints prove: the minimum complete-through watermark of the members is 90 (p1)"}},
		{name: "below the published frontier", cutover: coord.Integer(-5),
			refusal: []string{"the cutover -5 is below the published frontier 90 (epoch 1)"}},
		{name: "another coordinate kind", cutover: ts,
			refusal: []string{"the cutover is a timestamp coordinate but the scope's watermarks of p0, p1, p2, the published frontier are integer"}},
		{name: "a member without a checkpoint proves nothing", cutover: coord.Integer(90), members: []string{"p0", "p1", "p2", "p3"},
			refusal: []string{"the checkpoints prove no cutover: member p3 (no checkpoint)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			st := fixture(t)
			if tc.members != nil {
				_, err := st.SwapMembership(ctx, 1, store.Membership{Scope: scope, Epoch: 2, Partitions: tc.members, Reason: "add p3", Unproven: []string{"p3"}})
				require.NoError(t, err)
			}
			before, err := st.LoadMembership(ctx, scope)
			require.NoError(t, err)
			opts := Options{Operator: operator}
			r, err := PlanAdvanceEpoch(ctx, st, scope, tc.cutover, opts)
			if len(tc.refusal) > 0 {
				require.Error(t, err)
				assert.True(t, IsRefused(err), "%v", err)
				for _, want := range tc.refusal {
					assert.Contains(t, err.Error(), want)
				}
				assert.Contains(t, err.Error(), "pass --force")
				opts.Force = true
				r, err = PlanAdvanceEpoch(ctx, st, scope, tc.cutover, opts)
			}
			require.NoError(t, err)
			after, err := r.Apply(ctx)
			require.NoError(t, err)
			m, err := st.LoadMembership(ctx, scope)
			require.NoError(t, err)
			assert.Equal(t, before.Epoch+1, m.Epoch)
			assert.Equal(t, tc.cutover, m.Cutover)
			assert.True(t, m.Proven)
			assert.Equal(t, MembershipState(before), r.Before)
			assert.Equal(t, MembershipState(m), after)
			require.Len(t, m.Repairs, 1)
			e := m.Repairs[0]
			assert.Equal(t, "alice", e.User)
			assert.Equal(t, before.Cutover.String(), e.Previous["cutover"])
			assert.Equal(t, strconv.FormatBool(before.Proven), e.Previous["proven"])
			if len(tc.refusal) > 0 {
				assert.True(t, strings.HasSuffix(e.Command, " --force"), e.Command)
				assert.NotEmpty(t, e.Previous["forced"])
			} else {
				assert.Equal(t, "advance-epoch --scope ops --cutover 90 --coordinate integer", e.Command)
				assert.Empty(t, e.Previous["forced"])
			}
		})
	}
}

// Mixed-kind members have no scalar to cut over at.
func TestAdvanceEpochRefusesMixedKinds(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	_, err := st.SwapMembership(ctx, 0, store.Membership{Scope: scope, Epoch: 1, Partitions: []string{"a", "b"}, Proven: true})
	require.NoError(t, err)
	create(t, st, "a", store.Lease{})
	promote(t, st, "a", 10)
	create(t, st, "b", store.Lease{})
	cp := load(t, st, "b")
	_, err = st.Promote(ctx, store.Promotion{Key: cp.Key, FromCursor: cp.Cursor, FromGeneration: 1, To: []byte("b-2"), WitnessID: "w",
		Watermark: coord.Timestamp(time.Unix(100, 0)), Epoch: 1})
	require.NoError(t, err)
	_, err = PlanAdvanceEpoch(ctx, st, scope, coord.Integer(10), Options{})
	require.True(t, IsRefused(err), "%v", err)
	assert.Contains(t, err.Error(), "the scope's watermarks of b are timestamp")
}

// The audit log stays bounded: the sixth repair drops the first.
func TestRepairLogKeepsTheLastEntries(t *testing.T) {
	ctx := context.Background()
	st := fixture(t)
	for i := range store.MaxRepairs + 1 {
		o := Options{Operator: Operator{Time: operator.Time.Add(time.Duration(i) * time.Minute), User: "alice", Host: "h"}}
		r, err := PlanRestart(ctx, st, key("p2"), []byte{'b', byte('0' + i)}, o)
		require.NoError(t, err)
		require.NoError(t, firstErr(r.Apply(ctx)))
	}
	cp := load(t, st, "p2")
	require.Len(t, cp.Repairs, store.MaxRepairs)
	assert.Equal(t, operator.Time.Add(time.Minute), cp.Repairs[0].Time)
	assert.Equal(t, operator.Time.Add(store.MaxRepairs*time.Minute), cp.Repairs[store.MaxRepairs-1].Time)
}

// status shows each repaired partition's last repair on one line (text)
// and the entries (JSON), and the membership's.
func TestStatusShowsTheLastRepair(t *testing.T) {
	ctx := context.Background()
	st := completeFixture(t)
	r, err := PlanUnpark(ctx, st, key("p1"), Options{Operator: operator})
	require.NoError(t, err)
	require.NoError(t, firstErr(r.Apply(ctx)))
	r, err = PlanRestart(ctx, st, key("done"), []byte("done-2"), Options{Operator: operator, Force: true})
	require.NoError(t, err)
	require.NoError(t, firstErr(r.Apply(ctx)))
	r, err = PlanAdvanceEpoch(ctx, st, scope, coord.Integer(90), Options{Operator: operator})
	require.NoError(t, err)
	require.NoError(t, firstErr(r.Apply(ctx)))

	s, err := ReadStatus(ctx, st, scope)
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, WriteTable(&buf, s))
	out := buf.String()
	assert.Contains(t, out, "\nlast repair of p1: 2026-12-04T16:40:00.000Z by alice@bastion-1: unpark --scope ops --partition p1 (before: applied=90, complete=false, cursor="+
		reconcile.CursorHash([]byte("p1-2"))+", generation=2, parked="+`"`+parkReason+`"`+", watermark=90)\n")
	assert.Contains(t, out, "\nlast repair of done: 2026-12-04T16:40:00.000Z by alice@bastion-1: restart --scope ops --partition done --cursor "+
		reconcile.CursorHash([]byte("done-2"))+" --force (before: applied=200, complete=true, cursor="+reconcile.CursorHash([]byte("done-2"))+
		`, forced="ops/done is complete (watermark 200): the restart would clear its complete flag and read it again", generation=2, watermark=200)`+"\n")
	assert.Contains(t, out, "\nlast repair of the membership: 2026-12-04T16:40:00.000Z by alice@bastion-1: advance-epoch --scope ops --cutover 90 --coordinate integer (before: cutover=none, epoch=1, proven=true)\n")
	assert.Equal(t, 3, strings.Count(out, "last repair of"))
	assert.NotContains(t, out, "done-2", "no raw cursor")

	buf.Reset()
	require.NoError(t, WriteJSON(&buf, s))
	var got struct {
		Partitions []struct {
			Partition string              `json:"partition"`
			Repairs   []store.RepairEntry `json:"repairs"`
		} `json:"partitions"`
		MembershipRepairs []store.RepairEntry `json:"membership_repairs"`
	}
	require.NoError(t, json.Unmarshal(buf.Bytes(), &got))
	repaired := map[string]store.RepairEntry{}
	for _, p := range got.Partitions {
		if len(p.Repairs) > 0 {
			repaired[p.Partition] = p.Repairs[len(p.Repairs)-1]
		}
	}
	require.Len(t, repaired, 2)
	assert.Equal(t, "unpark --scope ops --partition p1", repaired["p1"].Command)
	assert.Equal(t, parkReason, repaired["p1"].Previous["parked"])
	assert.Equal(t, "true", repaired["done"].Previous["complete"])
	require.Len(t, got.MembershipRepairs, 1)
	assert.Equal(t, "1", got.MembershipRepairs[0].Previous["epoch"])
	assert.NotContains(t, buf.String(), "done-2")
}

// A table whose cursors are encrypted (checkpoint.cursor_encryption) is
// restarted only through the keys: without them the restart would write
// its cursor in clear and could not check it against the encrypted
// witnesses, and --force does not change that. With them the cursor is
// checked and stored encrypted, and status shows the hashes the logs show.
func TestRestartAndStatusOfAnEncryptedTable(t *testing.T) {
	ctx := context.Background()
	raw := memstore.New()
	enc, err := store.Encrypted(raw, []store.CursorKey{{ID: "k1", Key: []byte("0123456789abcdef0123456789abcdef")}}, "k1")
	require.NoError(t, err)
	_, err = enc.SwapMembership(ctx, 0, store.Membership{Scope: scope, Epoch: 1, Partitions: []string{"p0"}, Proven: true})
	require.NoError(t, err)
	create(t, enc, "p0", store.Lease{})
	promote(t, enc, "p0", 100)

	for _, force := range []bool{false, true} {
		_, err = PlanRestart(ctx, raw, key("p0"), []byte("boundary-7"), Options{Operator: operator, Force: force})
		require.Error(t, err, "force=%v", force)
		assert.False(t, IsRefused(err), "not a refusal --force overrides: %v", err)
		assert.Contains(t, err.Error(), "are encrypted")
		assert.Contains(t, err.Error(), "--cursor-key")
	}

	plain := load(t, enc, "p0").Cursor
	for _, tc := range []struct {
		name string
		st   store.Store
		want string
	}{
		{name: "without the keys", st: raw, want: "encrypted"},
		{name: "with the keys", st: enc, want: reconcile.CursorHash(plain)},
	} {
		s, err := ReadStatus(ctx, tc.st, scope)
		require.NoError(t, err, tc.name)
		require.Len(t, s.Partitions, 1)
		assert.Equal(t, tc.want, s.Partitions[0].CursorHash, tc.name)
		var text bytes.Buffer
		require.NoError(t, WriteTable(&text, s))
		assert.NotContains(t, text.String(), reconcile.CursorHash(load(t, raw, "p0").Cursor), "%s: never the hash of the ciphertext", tc.name)
	}

	r, err := PlanRestart(ctx, enc, key("p0"), []byte("boundary-7"), Options{Operator: operator})
	require.NoError(t, err)
	_, err = r.Apply(ctx)
	require.NoError(t, err)
	stored := load(t, raw, "p0").Cursor
	assert.True(t, store.IsSealedCursor(stored), "the restart's cursor is stored encrypted")
	assert.NotContains(t, string(stored), "boundary-7")
	assert.Equal(t, "boundary-7", string(load(t, enc, "p0").Cursor))
}
