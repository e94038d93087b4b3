package membership

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/store/memstore"
)

func TestPlanWithdraw(t *testing.T) {
	cur := store.Membership{Scope: "s", Epoch: 2, Partitions: []string{"a", "b"}, Proven: true, Parents: map[string][]string{"b": {"p"}}}
	published := store.Frontier{Scope: "s", Epoch: 2, Scalar: coord.Integer(50)}

	next, changed := PlanWithdraw(cur, published, "a", "contract violation late_position: position 40 at or below 50")
	require.True(t, changed)
	assert.Equal(t, uint64(3), next.Epoch)
	assert.Equal(t, []string{"a", "b"}, next.Partitions)
	assert.False(t, next.Proven)
	assert.Equal(t, []string{"a"}, next.Unproven)
	assert.Equal(t, coord.Integer(50), next.Cutover)
	assert.Equal(t, "withdrawn: partition a: contract violation late_position: position 40 at or below 50", next.Reason)
	assert.Equal(t, map[string][]string{"b": {"p"}}, next.Parents)

	// Already withheld on a's account: nothing more to write.
	_, changed = PlanWithdraw(next, store.Frontier{Scope: "s", Epoch: 3}, "a", "again")
	assert.False(t, changed)
	// Another partition joins the unproven list; the earlier reason stays.
	again, changed := PlanWithdraw(next, store.Frontier{Scope: "s", Epoch: 3}, "b", "contract violation watermark_regressed")
	require.True(t, changed)
	assert.Equal(t, []string{"a", "b"}, again.Unproven)
	assert.Equal(t, coord.Integer(50), again.Cutover, "no scalar published in the unproven epoch: its own cutover")
	assert.Contains(t, again.Reason, "withdrawn: partition b: contract violation watermark_regressed; withdrawn: partition a:")
	// Not a member: nothing to withdraw.
	_, changed = PlanWithdraw(cur, published, "z", "x")
	assert.False(t, changed)

	// Decide never settles it on its own: the partition has progress.
	plan := Decide(PlanInput{Scope: "s", HasCurrent: true, Current: next, Want: Names([]string{"a", "b"}), FreshFromStart: true,
		Checkpoints: []store.Checkpoint{cp("a", 9, 60, false), cp("b", 4, 55, false)}})
	assert.False(t, plan.Changed)
}

func TestWithdrawWritesOneEpoch(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	_, wrote, err := Withdraw(ctx, st, "s", "a", "why")
	require.NoError(t, err)
	assert.False(t, wrote, "no membership record: nothing to withdraw")

	_, err = st.SwapMembership(ctx, 0, store.Membership{Scope: "s", Epoch: 1, Partitions: []string{"a", "b"}, Proven: true})
	require.NoError(t, err)
	m, wrote, err := Withdraw(ctx, st, "s", "a", "contract violation late_position")
	require.NoError(t, err)
	require.True(t, wrote)
	assert.Equal(t, uint64(2), m.Epoch)
	assert.False(t, m.Proven)
	m, wrote, err = Withdraw(ctx, st, "s", "a", "contract violation late_position")
	require.NoError(t, err)
	assert.False(t, wrote)
	assert.Equal(t, uint64(2), m.Epoch)
}
