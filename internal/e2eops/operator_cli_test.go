package e2eops

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/ops"
	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/store"
)

const parkedReason = "operator test: malformed page at generation 1"

// parkBeforeStart writes part's first checkpoint (the provider's start) and
// parks it, through the DynamoDB store the binary will use.
func parkBeforeStart(t *testing.T, st store.Store, scope, part string) store.Checkpoint {
	t.Helper()
	ctx := context.Background()
	k := store.Key{Scope: scope, Partition: part}
	cp, err := st.CreateCheckpoint(ctx, store.Checkpoint{Key: k, Generation: 1, Epoch: 1})
	require.NoError(t, err)
	cp, err = st.SetParked(ctx, k, cp.Cursor, cp.Generation, cp.Lease, parkedReason)
	require.NoError(t, err)
	require.Equal(t, parkedReason, cp.Parked)
	return cp
}

func load(t *testing.T, st store.Store, scope, part string) store.Checkpoint {
	t.Helper()
	cp, err := st.LoadCheckpoint(context.Background(), store.Key{Scope: scope, Partition: part})
	require.NoError(t, err)
	return cp
}

// TestStatusShowsParkedPartitionAndUnparkResumesIt drives the
// operator commands of the real binary against dynalite while the pipeline
// runs: status (JSON and table) shows the parked partition with its reason
// holding the frontier back and the others advancing; every repair's
// --dry-run and a refused confirmation change nothing; `unpark --yes`
// clears the reason with a conditional write, after which the partition
// advances (generation grows, parked empty) and the frontier is proven.
func TestStatusShowsParkedPartitionAndUnparkResumesIt(t *testing.T) {
	e := newEnv(t)
	const scope = "operator-cli"
	const events = 200
	parked := parkBeforeStart(t, e.st, scope, "p1")

	p := e.run("operator-cli", fmt.Sprintf(`
http: { enabled: false }
logger: { level: info }
input:
  paginated_partitions:
    scope: %s
    partitions: [ p0, p1, p2 ]
    poll_interval: 50ms
    park_check_interval: 200ms
    frontier_publish_interval: 100ms
    exit_when_complete: false
    checkpoint: %s
    simulated:
      events_per_partition: %d
      page_size: 20
output:
  drop: {}
`, scope, e.checkpointYAML(), events))

	// The other partitions read everything; p1 stays parked.
	var s ops.Status
	waitFor(t, p, "p0 and p2 complete through their last event", func() (bool, string) {
		s = e.status(scope)
		if len(s.Partitions) < 3 {
			return false, fmt.Sprintf("%+v", s)
		}
		p0, p2 := partitionOf(t, s, "p0"), partitionOf(t, s, "p2")
		return p0.Watermark == fmt.Sprint(events) && p2.Watermark == fmt.Sprint(events), fmt.Sprintf("%+v", s.Partitions)
	})

	// Status JSON: p1 parked with its reason, holding the frontier back.
	assert.Equal(t, scope, s.Scope)
	assert.Equal(t, uint64(1), s.Epoch)
	assert.True(t, s.Proven)
	assert.Equal(t, []string{"p0", "p1", "p2"}, s.Membership)
	assert.Nil(t, s.Frontier, "no scalar while p1 has no complete-through watermark")
	assert.Equal(t, []string{"p1"}, s.HeldBy)
	assert.Contains(t, s.Reason, "p1")
	assert.Equal(t, map[string]string{"p0": "200", "p1": "none", "p2": "200"}, s.Vector)
	p1 := partitionOf(t, s, "p1")
	assert.Equal(t, parkedReason, p1.Parked)
	assert.Equal(t, uint64(1), p1.Generation)
	assert.Equal(t, "none", p1.Watermark)
	assert.True(t, p1.Member)
	for _, name := range []string{"p0", "p2"} {
		ps := partitionOf(t, s, name)
		assert.Empty(t, ps.Parked, name)
		assert.Greater(t, ps.Generation, uint64(1), "%s advances", name)
		require.NotNil(t, ps.Lag, name)
		assert.Equal(t, int64(0), *ps.Lag, name)
	}

	// The table says the same.
	out, code := e.cli("", "status", "--scope", scope)
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "scope "+scope+"  epoch 1 (proven true)  frontier withheld  held by p1")
	var p1Row string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "p1 ") {
			p1Row = l
		}
	}
	require.NotEmpty(t, p1Row, out)
	assert.Contains(t, p1Row, parkedReason)

	// Dry runs and a refused confirmation write nothing.
	before := load(t, e.st, scope, "p1")
	require.Equal(t, parked.Generation, before.Generation)
	out, code = e.cli("", "unpark", "--scope", scope, "--partition", "p1", "--dry-run")
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, fmt.Sprintf(`dry run: would clear the park reason of %s/p1 (%q) if it still holds generation 1`, scope, parkedReason))
	out, code = e.cli("", "restart", "--scope", scope, "--partition", "p1", "--cursor", "sim1:1:0", "--dry-run")
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "dry run: would move "+scope+"/p1 from generation 1 to generation 2 at the given boundary cursor "+reconcile.CursorHash([]byte("sim1:1:0"))+
		", a cursor this partition's checkpoint and witnesses do not hold: its position is not checked (watermark none and applied none kept), unparking it first")
	assert.Contains(t, out, "before: generation 1, cursor none, watermark none, applied none, complete false")
	out, code = e.cli("", "advance-epoch", "--scope", scope, "--cutover", "200", "--dry-run")
	require.NotEqual(t, 0, code, out)
	assert.Contains(t, out, "refusing to advance the membership of "+scope+" to cutover 200: the checkpoints prove no cutover: member p1 (no watermark); pass --force")
	out, code = e.cli("", "advance-epoch", "--scope", scope, "--cutover", "200", "--dry-run", "--force")
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "dry run: would advance membership of "+scope+" from epoch 1 (proven true) to epoch 2, proven through cutover 200, partitions [p0 p1 p2]")
	out, code = e.cli("n\n", "unpark", "--scope", scope, "--partition", "p1")
	assert.NotEqual(t, 0, code, "a refused confirmation fails: %s", out)
	assert.Contains(t, out, "Proceed? [y/N]")
	assert.Contains(t, out, "aborted")

	// The commands have exited: whatever they wrote is in the store. (That
	// the running worker leaves the parked p1 alone was observed above: it
	// stayed parked at generation 1 while p0 and p2 completed.)
	assert.Equal(t, before, load(t, e.st, scope, "p1"), "dry runs and a refused confirmation change nothing")
	m, err := e.st.LoadMembership(context.Background(), scope)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), m.Epoch, "the advance-epoch dry run changed nothing")
	s = e.status(scope)
	assert.Equal(t, parkedReason, partitionOf(t, s, "p1").Parked)

	// Unpark for real: one conditional write.
	out, code = e.cli("", "unpark", "--scope", scope, "--partition", "p1", "--yes")
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "done: clear the park reason of "+scope+"/p1")

	// The partition advances: generation grows, parked empty, the frontier
	// is proven.
	waitFor(t, p, "p1 advancing after the unpark", func() (bool, string) {
		s = e.status(scope)
		p1 := partitionOf(t, s, "p1")
		return p1.Parked == "" && p1.Generation > 1 && p1.Watermark == fmt.Sprint(events) && s.Frontier != nil,
			fmt.Sprintf("p1 %+v frontier %v", p1, s.Frontier)
	})
	p1 = partitionOf(t, s, "p1")
	assert.Empty(t, p1.Parked)
	assert.Greater(t, p1.Generation, uint64(1))
	require.NotNil(t, s.Frontier)
	assert.Equal(t, "200", *s.Frontier)
	assert.Empty(t, s.Reason)
	waitFor(t, p, "the published frontier", func() (bool, string) {
		s = e.status(scope)
		return s.Published != nil && *s.Published == "200 (epoch 1)", fmt.Sprintf("published %v", s.Published)
	})

	// Unparking again is refused: nothing is parked.
	out, code = e.cli("", "unpark", "--scope", scope, "--partition", "p1", "--yes")
	assert.NotEqual(t, 0, code, out)
	assert.Contains(t, out, scope+"/p1 is not parked")

	// A repair planned on a state that changed before it is applied loses:
	// park p2, plan its unpark (the ops API the CLI uses, on the same
	// table), let another operator restart it with the CLI (unpark, then
	// one conditional promotion to a boundary cursor), then apply.
	cur := load(t, e.st, scope, "p2")
	_, err = e.st.SetParked(context.Background(), cur.Key, cur.Cursor, cur.Generation, cur.Lease, "second park")
	require.NoError(t, err)
	r, err := ops.PlanUnpark(context.Background(), e.st, cur.Key, ops.Options{})
	require.NoError(t, err)
	boundary := fmt.Sprintf("sim1:%d:0", events+1)
	out, code = e.cli("", "restart", "--scope", scope, "--partition", "p2", "--cursor", boundary, "--yes")
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, fmt.Sprintf("done: move %s/p2 from generation %d to generation %d at the given boundary cursor %s", scope, cur.Generation, cur.Generation+1, reconcile.CursorHash([]byte(boundary))))
	assert.Contains(t, out, "(watermark 200 and applied 200 kept), unparking it first")
	restarted := load(t, e.st, scope, "p2")
	assert.Equal(t, cur.Generation+1, restarted.Generation)
	assert.Equal(t, []byte(boundary), restarted.Cursor)
	assert.Empty(t, restarted.Parked)
	assert.Equal(t, cur.Watermark, restarted.Watermark, "a restart keeps the watermark")

	_, err = r.Apply(context.Background())
	require.Error(t, err, "a stale unpark must lose")
	assert.True(t, ops.IsFenced(err), "%v", err)
	after := load(t, e.st, scope, "p2")
	assert.GreaterOrEqual(t, after.Generation, restarted.Generation)
	assert.Empty(t, after.Parked)

	// The restarted partition keeps working: the frontier stays proven.
	waitFor(t, p, "the frontier after the restart", func() (bool, string) {
		s = e.status(scope)
		return s.Frontier != nil && *s.Frontier == "200" && partitionOf(t, s, "p2").Parked == "", fmt.Sprintf("%+v", s)
	})
}
