package e2eops

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/store"
)

// repairScope writes, through the DynamoDB store the binary uses, a scope
// of two members: "a" complete at generation 3 (watermark 50), "b" at
// generation 3 (watermark 60), each with the witness of its first page
// (input <p>-1, successor <p>-2), and the published frontier 50.
func repairScope(t *testing.T, st store.Store, scope string) {
	t.Helper()
	ctx := context.Background()
	_, err := st.SwapMembership(ctx, 0, store.Membership{Scope: scope, Epoch: 1, Partitions: []string{"a", "b"}, Proven: true})
	require.NoError(t, err)
	for _, p := range []struct {
		name     string
		wm       int64
		complete bool
	}{{"a", 50, true}, {"b", 60, false}} {
		k := store.Key{Scope: scope, Partition: p.name}
		cp, err := st.CreateCheckpoint(ctx, store.Checkpoint{Key: k, Cursor: []byte(p.name + "-1"), Generation: 1, Epoch: 1})
		require.NoError(t, err)
		require.NoError(t, st.PutWitness(ctx, reconcile.Witness{Scope: scope, Partition: p.name, Generation: 1, InputCursor: cp.Cursor,
			AttemptID: "0001", Successor: []byte(p.name + "-2"), Disposition: reconcile.Promoted}))
		cp, err = st.Promote(ctx, store.Promotion{Key: k, FromCursor: cp.Cursor, FromGeneration: 1, To: []byte(p.name + "-2"), WitnessID: "0001", Epoch: 1,
			Watermark: coord.Integer(p.wm - 10), Applied: coord.IntPosition(p.wm - 10), HasApplied: true})
		require.NoError(t, err)
		_, err = st.Promote(ctx, store.Promotion{Key: k, FromCursor: cp.Cursor, FromGeneration: 2, To: []byte(p.name + "-3"), WitnessID: "0002", Epoch: 1,
			Watermark: coord.Integer(p.wm), Applied: coord.IntPosition(p.wm), HasApplied: true, Complete: p.complete})
		require.NoError(t, err)
	}
	_, err = st.PublishFrontier(ctx, store.Frontier{}, store.Frontier{Scope: scope, Epoch: 1, Scalar: coord.Integer(50),
		Vector: map[string]coord.Watermark{"a": coord.Integer(50), "b": coord.Integer(60)}, HeldBy: []string{"a"}})
	require.NoError(t, err)
}

// TestRepairRefusalsForceAndAudit drives the real binary against dynalite:
// each unsafe restart (a complete partition, another partition's cursor, a
// cursor older than the partition's) and each unsafe cutover (above what
// the checkpoints prove, below the published frontier, another coordinate
// kind) is refused with a non-zero exit, a message naming --force, and no
// write; with --force the repair is made, prints before/after, and its
// audit entry is shown by status (text: the last repair per partition;
// JSON: the entries). No raw cursor is printed.
func TestRepairRefusalsForceAndAudit(t *testing.T) {
	e := newEnv(t)
	const scope = "repair-cli"
	repairScope(t, e.st, scope)
	a0, b0 := load(t, e.st, scope, "a"), load(t, e.st, scope, "b")

	refused := []struct {
		name string
		args []string
		want string
	}{
		{"a complete partition", []string{"restart", "--partition", "a", "--cursor", "a-boundary"},
			"refusing to restart " + scope + "/a at cursor " + reconcile.CursorHash([]byte("a-boundary")) + ": " + scope + "/a is complete (watermark 50): the restart would clear its complete flag and read it again"},
		{"another partition's cursor", []string{"restart", "--partition", "b", "--cursor", "a-2"},
			"the cursor belongs to partition a of scope " + scope + " (the successor of its witness 0001 at generation 1), not to b"},
		{"a cursor older than the partition's", []string{"restart", "--partition", "b", "--cursor", "b-2"},
			"the cursor is the successor of its witness 0001 at generation 1 (its cursor at generation 2), an older position: it moves " + scope + "/b backwards from generation 3 with watermark 60 and applied 60"},
		{"a cutover above what the checkpoints prove", []string{"advance-epoch", "--cutover", "999999999"},
			"the cutover 999999999 is above what the checkpoints prove: the minimum complete-through watermark of the members is 50 (a)"},
		{"a cutover below the published frontier", []string{"advance-epoch", "--cutover=-5"},
			"the cutover -5 is below the published frontier 50 (epoch 1)"},
		{"a cutover of another kind", []string{"advance-epoch", "--coordinate", "timestamp", "--cutover", "2026-12-04T00:00:00Z"},
			"the cutover is a timestamp coordinate but the scope's watermarks of a, b, the published frontier are integer"},
	}
	for _, tc := range refused {
		args := append(append([]string{}, tc.args...), "--scope", scope, "--yes")
		out, code := e.cli("", args...)
		assert.NotEqual(t, 0, code, "%s: refused: %s", tc.name, out)
		assert.Contains(t, out, tc.want, tc.name)
		assert.Contains(t, out, "pass --force to do it anyway", tc.name)
		assert.NotContains(t, out, "done:", tc.name)
		for _, raw := range []string{"a-boundary", "a-2", "b-2"} {
			assert.NotContains(t, out, raw, "%s: no raw cursor", tc.name)
		}
	}
	assert.Equal(t, a0, load(t, e.st, scope, "a"), "refused repairs write nothing")
	assert.Equal(t, b0, load(t, e.st, scope, "b"), "refused repairs write nothing")
	m, err := e.st.LoadMembership(context.Background(), scope)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), m.Epoch, "refused cutovers write nothing")

	// The proven cutover is accepted without --force.
	out, code := e.cli("", "advance-epoch", "--scope", scope, "--cutover", "50", "--yes")
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "before: epoch 1, proven true, cutover none, partitions [a b]")
	assert.Contains(t, out, "after:  epoch 2, proven true, cutover 50, partitions [a b]")

	// --force makes each restart, prints before/after and the audit entry.
	out, code = e.cli("", "restart", "--scope", scope, "--partition", "b", "--cursor", "b-2", "--force", "--yes")
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "before: generation 3, cursor "+reconcile.CursorHash([]byte("b-3"))+", watermark 60, applied 60, complete false")
	assert.Contains(t, out, "after:  generation 4, cursor "+reconcile.CursorHash([]byte("b-2"))+", watermark 60, applied 60, complete false")
	assert.Contains(t, out, "audit: ")
	assert.Contains(t, out, ": restart --scope "+scope+" --partition b --cursor "+reconcile.CursorHash([]byte("b-2"))+" --force (before: applied=60, complete=false")
	out, code = e.cli("", "restart", "--scope", scope, "--partition", "a", "--cursor", "a-boundary", "--force", "--yes")
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "before: generation 3, cursor "+reconcile.CursorHash([]byte("a-3"))+", watermark 50, applied 50, complete true")
	assert.Contains(t, out, "after:  generation 4, cursor "+reconcile.CursorHash([]byte("a-boundary"))+", watermark 50, applied 50, complete false")
	a, b := load(t, e.st, scope, "a"), load(t, e.st, scope, "b")
	assert.Equal(t, []byte("b-2"), b.Cursor)
	assert.Equal(t, coord.Integer(60), b.Watermark, "a forced restart keeps the watermark")
	assert.False(t, a.Complete, "a forced restart reopens the complete partition")
	out, code = e.cli("", "advance-epoch", "--scope", scope, "--cutover", "999999999", "--force", "--yes")
	require.Equal(t, 0, code, out)

	// status: the last repair per partition and of the membership (text),
	// the entries (JSON).
	out, code = e.cli("", "status", "--scope", scope)
	require.Equal(t, 0, code, out)
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "last repair of ") {
			lines = append(lines, l)
		}
	}
	require.Len(t, lines, 3, out)
	assert.Contains(t, lines[0], "last repair of a: ")
	assert.Contains(t, lines[0], "restart --scope "+scope+" --partition a --cursor "+reconcile.CursorHash([]byte("a-boundary"))+" --force (before: applied=50, complete=true, cursor="+reconcile.CursorHash([]byte("a-3")))
	assert.Contains(t, lines[0], `forced="`+scope+`/a is complete`)
	assert.Contains(t, lines[1], "last repair of b: ")
	assert.Contains(t, lines[2], "last repair of the membership: ")
	assert.Contains(t, lines[2], "advance-epoch --scope "+scope+" --cutover 999999999 --coordinate integer --force (before: cutover=50, epoch=2")
	for _, raw := range []string{"a-boundary", "b-2", "a-3"} {
		assert.NotContains(t, out, raw, "no raw cursor in status")
	}

	s := e.status(scope)
	pa := partitionOf(t, s, "a")
	require.Len(t, pa.Repairs, 1)
	assert.NotEmpty(t, pa.Repairs[0].User, "the OS user")
	assert.NotEmpty(t, pa.Repairs[0].Host, "the host")
	assert.False(t, pa.Repairs[0].Time.IsZero())
	assert.Equal(t, map[string]string{"generation": "3", "cursor": reconcile.CursorHash([]byte("a-3")), "watermark": "50", "applied": "50", "complete": "true",
		"forced": scope + "/a is complete (watermark 50): the restart would clear its complete flag and read it again"}, pa.Repairs[0].Previous)
	require.Len(t, partitionOf(t, s, "b").Repairs, 1)
	require.Len(t, s.MembershipRepairs, 2, "each advance-epoch adds its entry to the log it read")
	assert.Equal(t, "1", s.MembershipRepairs[0].Previous["epoch"])
	assert.Equal(t, "2", s.MembershipRepairs[1].Previous["epoch"])
	assert.True(t, strings.HasSuffix(s.MembershipRepairs[1].Command, " --force"))
}
