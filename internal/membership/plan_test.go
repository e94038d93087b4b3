package membership

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/store/memstore"
)

func cp(p string, gen uint64, wm int64, complete bool) store.Checkpoint {
	c := store.Checkpoint{Key: store.Key{Scope: "s", Partition: p}, Generation: gen, Complete: complete}
	if gen > 1 {
		c.Cursor = []byte("c")
		c.HasApplied = true
	}
	if wm > 0 {
		c.Watermark = coord.Integer(wm)
	}
	return c
}

func TestDecide(t *testing.T) {
	epoch2 := func(parts ...string) store.Membership {
		return store.Membership{Scope: "s", Epoch: 2, Partitions: parts, Proven: true}
	}
	published := store.Frontier{Scope: "s", Epoch: 2, Scalar: coord.Integer(50)}
	for _, tc := range []struct {
		name    string
		in      PlanInput
		changed bool
		parts   []string
		proven  bool
		reason  string
		parents map[string][]string
		added   []string
		removed []string
		sealed  []string
		settled []string
	}{
		{
			name:    "first epoch holds the wanted set",
			in:      PlanInput{Want: Names([]string{"b", "a"}), FreshFromStart: true},
			changed: true, parts: []string{"a", "b"}, proven: true, added: []string{"a", "b"},
		},
		{
			name:    "nothing to change",
			in:      PlanInput{HasCurrent: true, Current: epoch2("a", "b"), Want: Names([]string{"a", "b"}), Checkpoints: []store.Checkpoint{cp("a", 4, 60, false), cp("b", 3, 55, false)}},
			changed: false,
		},
		{
			name:    "a new partition read from the start joins with proof",
			in:      PlanInput{HasCurrent: true, Current: epoch2("a"), Want: Names([]string{"a", "n"}), Checkpoints: []store.Checkpoint{cp("a", 4, 60, false)}, Published: published, FreshFromStart: true},
			changed: true, parts: []string{"a", "n"}, proven: true, added: []string{"n"},
		},
		{
			name:    "a checkpoint created but never promoted is still fresh",
			in:      PlanInput{HasCurrent: true, Current: epoch2("a"), Want: Names([]string{"a", "n"}), Checkpoints: []store.Checkpoint{cp("a", 4, 60, false), cp("n", 1, 0, false)}, Published: published, FreshFromStart: true},
			changed: true, parts: []string{"a", "n"}, proven: true, added: []string{"n"},
		},
		{
			name:    "a new partition under a start cursor has no proof",
			in:      PlanInput{HasCurrent: true, Current: epoch2("a"), Want: Names([]string{"a", "n"}), Published: published, FreshFromStart: false},
			changed: true, parts: []string{"a", "n"}, proven: false, reason: "add n: no proof of coverage", added: []string{"n"},
		},
		{
			name:    "a partition that comes back with progress has no proof",
			in:      PlanInput{HasCurrent: true, Current: epoch2("a"), Want: Names([]string{"a", "n"}), Checkpoints: []store.Checkpoint{cp("n", 7, 70, false)}, Published: published, FreshFromStart: true},
			changed: true, parts: []string{"a", "n"}, proven: false, reason: "add n", added: []string{"n"},
		},
		{
			name:    "a vanished complete partition leaves sealed",
			in:      PlanInput{HasCurrent: true, Current: epoch2("a", "b"), Want: Names([]string{"a"}), Checkpoints: []store.Checkpoint{cp("a", 4, 60, false), cp("b", 9, 80, true)}, Published: published},
			changed: true, parts: []string{"a"}, proven: true, removed: []string{"b"}, sealed: []string{"b"},
		},
		{
			name:    "a vanished incomplete partition leaves without proof",
			in:      PlanInput{HasCurrent: true, Current: epoch2("a", "b"), Want: Names([]string{"a"}), Checkpoints: []store.Checkpoint{cp("a", 4, 60, false), cp("b", 9, 80, false)}, Published: published},
			changed: true, parts: []string{"a"}, proven: false, reason: "remove b: not sealed", removed: []string{"b"},
		},
		{
			name: "a split adds the children with their lineage while the parent drains",
			in: PlanInput{HasCurrent: true, Current: epoch2("p"), Want: []Member{{Name: "p"}, {Name: "c1", Parents: []string{"p"}}, {Name: "c2", Parents: []string{"p"}}},
				Checkpoints: []store.Checkpoint{cp("p", 4, 60, false)}, Published: published, FreshFromStart: true},
			changed: true, parts: []string{"c1", "c2", "p"}, proven: true, added: []string{"c1", "c2"},
			parents: map[string][]string{"c1": {"p"}, "c2": {"p"}},
		},
		{
			name: "a complete parent leaves sealed although still listed",
			in: PlanInput{HasCurrent: true, Current: store.Membership{Scope: "s", Epoch: 2, Partitions: []string{"c1", "c2", "p"}, Proven: true, Parents: map[string][]string{"c1": {"p"}, "c2": {"p"}}},
				Want:        []Member{{Name: "p"}, {Name: "c1", Parents: []string{"p"}}, {Name: "c2", Parents: []string{"p"}}},
				Checkpoints: []store.Checkpoint{cp("p", 9, 90, true), cp("c1", 1, 0, false), cp("c2", 1, 0, false)}, Published: published, FreshFromStart: true},
			changed: true, parts: []string{"c1", "c2"}, proven: true, removed: []string{"p"}, sealed: []string{"p"},
			parents: map[string][]string{"c1": {"p"}, "c2": {"p"}},
		},
		{
			name: "a complete parent that joined below the cutover leaves sealed while its children hold the scalar back",
			in: PlanInput{HasCurrent: true, Current: store.Membership{Scope: "s", Epoch: 2, Partitions: []string{"a", "c1", "c2", "p"}, Cutover: coord.Integer(60), Proven: true, Parents: map[string][]string{"c1": {"p"}, "c2": {"p"}}},
				Want:        []Member{{Name: "a"}, {Name: "p"}, {Name: "c1", Parents: []string{"p"}}, {Name: "c2", Parents: []string{"p"}}},
				Checkpoints: []store.Checkpoint{cp("a", 5, 70, false), cp("p", 3, 3, true), cp("c1", 1, 0, false), cp("c2", 1, 0, false)},
				Published:   store.Frontier{Scope: "s", Epoch: 2}, FreshFromStart: true},
			changed: true, parts: []string{"a", "c1", "c2"}, proven: true, removed: []string{"p"}, sealed: []string{"p"},
			parents: map[string][]string{"c1": {"p"}, "c2": {"p"}},
		},
		{
			name: "a complete partition of another coordinate kind than the cutover leaves sealed",
			in: PlanInput{HasCurrent: true, Current: store.Membership{Scope: "s", Epoch: 2, Partitions: []string{"a", "k"}, Cutover: coord.Integer(60), Proven: true},
				Want: Names([]string{"a"}), Checkpoints: []store.Checkpoint{cp("a", 5, 70, false), {Key: store.Key{Scope: "s", Partition: "k"}, Generation: 4, Cursor: []byte("c"), Complete: true, Watermark: coord.String("objects/9")}},
				Published: store.Frontier{Scope: "s", Epoch: 2}},
			changed: true, parts: []string{"a"}, proven: true, removed: []string{"k"}, sealed: []string{"k"},
		},
		{
			name: "an incomplete partition below the cutover still leaves without proof",
			in: PlanInput{HasCurrent: true, Current: store.Membership{Scope: "s", Epoch: 2, Partitions: []string{"a", "b"}, Cutover: coord.Integer(60), Proven: true},
				Want: Names([]string{"a"}), Checkpoints: []store.Checkpoint{cp("a", 5, 70, false), cp("b", 3, 3, false)}, Published: store.Frontier{Scope: "s", Epoch: 2}},
			changed: true, parts: []string{"a"}, proven: false, reason: "remove b: not sealed", removed: []string{"b"},
		},
		{
			name: "a sealed parent is not added back",
			in: PlanInput{HasCurrent: true, Current: store.Membership{Scope: "s", Epoch: 2, Partitions: []string{"c1", "c2"}, Proven: true, Parents: map[string][]string{"c1": {"p"}, "c2": {"p"}}},
				Want:        []Member{{Name: "p"}, {Name: "c1", Parents: []string{"p"}}, {Name: "c2", Parents: []string{"p"}}},
				Checkpoints: []store.Checkpoint{cp("p", 9, 90, true), cp("c1", 3, 95, false), cp("c2", 2, 92, false)}, Published: published},
			changed: false,
		},
		{
			name: "an earlier unproven removal settles when the partition completes",
			in: PlanInput{HasCurrent: true, Current: store.Membership{Scope: "s", Epoch: 2, Partitions: []string{"a"}, Unproven: []string{"b"}, Reason: "remove b: not sealed"},
				Want: Names([]string{"a"}), Checkpoints: []store.Checkpoint{cp("a", 4, 60, false), cp("b", 9, 80, true)}},
			changed: true, parts: []string{"a"}, proven: true, settled: []string{"b"},
		},
		{
			name: "an earlier unproven removal stays unproven without completion",
			in: PlanInput{HasCurrent: true, Current: store.Membership{Scope: "s", Epoch: 2, Partitions: []string{"a"}, Unproven: []string{"b"}, Reason: "remove b: not sealed"},
				Want: Names([]string{"a"}), Checkpoints: []store.Checkpoint{cp("a", 4, 60, false), cp("b", 9, 80, false)}},
			changed: false,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.Scope = "s"
			plan := Decide(tc.in)
			require.Equal(t, tc.changed, plan.Changed, "changed: %s", plan)
			if !tc.changed {
				return
			}
			require.NoError(t, plan.Next.Validate())
			assert.Equal(t, tc.in.Current.Epoch+1, plan.Next.Epoch)
			assert.Equal(t, tc.parts, plan.Next.Partitions)
			assert.Equal(t, tc.proven, plan.Next.Proven, plan.Next.Reason)
			if tc.reason != "" {
				assert.Contains(t, plan.Next.Reason, tc.reason)
			}
			assert.Equal(t, tc.parents, plan.Next.Parents)
			assert.Equal(t, tc.added, plan.Added)
			assert.Equal(t, tc.removed, plan.Removed)
			assert.Equal(t, tc.sealed, plan.Sealed)
			assert.Equal(t, tc.settled, plan.Settled)
		})
	}
}

func TestWaiting(t *testing.T) {
	m := store.Membership{Scope: "s", Epoch: 3, Partitions: []string{"c1", "c2", "m", "p", "q"},
		Parents: map[string][]string{"c1": {"p"}, "c2": {"p"}, "m": {"gone", "p", "q"}}}
	for _, tc := range []struct {
		name   string
		member string
		cps    []store.Checkpoint
		want   []string
	}{
		{"no parents", "p", nil, nil},
		{"a parent without a checkpoint holds its child", "c1", nil, []string{"p"}},
		{"an incomplete parent holds its child", "c1", []store.Checkpoint{cp("p", 5, 50, false)}, []string{"p"}},
		{"a complete parent releases its child", "c1", []store.Checkpoint{cp("p", 6, 60, true)}, nil},
		{"a merge waits for every parent still a member", "m", []store.Checkpoint{cp("p", 6, 60, true), cp("q", 2, 20, false)}, []string{"q"}},
		{"a parent that left no longer holds", "m", []store.Checkpoint{cp("p", 6, 60, true), cp("q", 6, 60, true)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Waiting(m, tc.member, tc.cps))
		})
	}
}

// Reconcile writes one epoch per change and loses no race: two planners
// that decide the same change from the same epoch produce one new epoch.
func TestReconcileRacesToOneEpoch(t *testing.T) {
	st := memstore.New()
	ctx := t.Context()
	m, plan, err := Reconcile(ctx, st, "s", Names([]string{"a"}), true)
	require.NoError(t, err)
	require.True(t, plan.Changed)
	require.Equal(t, uint64(1), m.Epoch)

	// A stale planner decided from epoch 1; another instance wrote epoch 2.
	stale, err := Read(ctx, st, "s", Names([]string{"a", "b"}), true)
	require.NoError(t, err)
	m2, _, err := Reconcile(ctx, st, "s", Names([]string{"a", "b"}), true)
	require.NoError(t, err)
	require.Equal(t, uint64(2), m2.Epoch)
	_, err = st.SwapMembership(ctx, stale.Current.Epoch, Decide(stale).Next)
	require.ErrorIs(t, err, store.ErrFenced)

	// The same change again changes nothing.
	m3, plan, err := Reconcile(ctx, st, "s", Names([]string{"b", "a"}), true)
	require.NoError(t, err)
	require.False(t, plan.Changed)
	require.Equal(t, m2, m3)
}
