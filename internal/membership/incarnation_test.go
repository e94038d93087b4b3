package membership

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/store/memstore"
)

// A recreated source is a membership change: a new, unproven epoch that
// names the partition, why, and what the scalar waits for; it settles only
// when the checkpoint reset by that very change certifies a watermark.
func TestIncarnationChangeIsUnprovenUntilTheNewIncarnationIsRead(t *testing.T) {
	cur := store.Membership{Scope: "s", Epoch: 2, Partitions: []string{"a", "db"}, Proven: true}
	in := PlanInput{Scope: "s", Current: cur, HasCurrent: true, FreshFromStart: true,
		Published:   store.Frontier{Scope: "s", Epoch: 2, Scalar: coord.Integer(300)},
		Checkpoints: []store.Checkpoint{cp("a", 5, 500, false), cp("db", 9, 300, false)}}
	plan := DecideIncarnation(in, IncarnationChange{Partition: "db", From: "sha256:aaaa", To: "sha256:bbbb", Why: "the incarnation request answered another value at 2026-12-04T15:00:00Z"})
	require.True(t, plan.Changed)
	next := plan.Next
	assert.Equal(t, uint64(3), next.Epoch)
	assert.False(t, next.Proven)
	assert.Equal(t, []string{"a", "db"}, next.Partitions)
	assert.Equal(t, []string{"db"}, next.Unproven)
	assert.Equal(t, map[string]uint64{"db": 3}, next.Incarnations)
	assert.Equal(t, coord.Integer(300), next.Cutover)
	assert.Contains(t, next.Reason, "db: incarnation changed from sha256:aaaa to sha256:bbbb")
	assert.Contains(t, next.Reason, "withheld until the new incarnation certifies a complete-through watermark")
	assert.Contains(t, plan.String(), "source incarnation changed for [db]")

	// A stale concurrent reader finds the checkpoint already reset into
	// the new incarnation: nothing more to record.
	done := in
	done.Checkpoints = []store.Checkpoint{cp("a", 5, 500, false), {Key: store.Key{Scope: "s", Partition: "db"}, Generation: 10, Incarnation: "sha256:bbbb", IncarnationEpoch: 3}}
	assert.False(t, DecideIncarnation(done, IncarnationChange{Partition: "db", From: "sha256:aaaa", To: "sha256:bbbb"}).Changed)

	// Not a member (its worker has not stopped yet): a new epoch that
	// changes nothing else, so its checkpoint can be reset.
	other := DecideIncarnation(in, IncarnationChange{Partition: "zz"})
	require.True(t, other.Changed)
	assert.Equal(t, uint64(3), other.Next.Epoch)
	assert.True(t, other.Next.Proven)
	assert.Empty(t, other.Next.Incarnations)
	assert.Equal(t, cur.Partitions, other.Next.Partitions)

	reset := func(wm int64, incEpoch uint64) store.Checkpoint {
		c := cp("db", 10, wm, false)
		c.IncarnationEpoch, c.Incarnation = incEpoch, "sha256:bbbb"
		c.PromotedWitness = "incarnation:sha256:bbbb"
		return c
	}
	paged := reset(0, 3)
	paged.PromotedWitness = "a0001"
	complete := reset(0, 3)
	complete.Complete = true
	later := PlanInput{Scope: "s", Current: next, HasCurrent: true, FreshFromStart: true, Want: Names([]string{"a", "db"})}
	for _, tc := range []struct {
		name    string
		db      store.Checkpoint
		fresh   bool
		settled bool
	}{
		{"reset, no watermark yet", reset(0, 3), true, false},
		{"an older checkpoint of the old incarnation", cp("db", 9, 300, false), true, false},
		{"reset by an earlier change", reset(20, 2), true, false},
		{"reset to a start_cursor: no replay", reset(20, 3), false, false},
		{"reset and certified", reset(20, 3), true, true},
		{"reset, a page promoted (a source without watermarks)", paged, true, true},
		{"reset and complete", complete, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := later
			l.FreshFromStart = tc.fresh
			l.Checkpoints = []store.Checkpoint{cp("a", 5, 500, false), tc.db}
			p := Decide(l)
			if !tc.settled {
				assert.False(t, p.Changed, "no change until the proof arrives")
				return
			}
			require.True(t, p.Changed)
			assert.Equal(t, []string{"db"}, p.Settled)
			assert.True(t, p.Next.Proven, p.Next.Reason)
			assert.Empty(t, p.Next.Incarnations)
		})
	}

	// Another change carried over keeps the incarnation's own reason.
	withAdd := later
	withAdd.Want = Names([]string{"a", "db", "new"})
	withAdd.Checkpoints = []store.Checkpoint{cp("a", 5, 500, false), reset(0, 3)}
	p := Decide(withAdd)
	require.True(t, p.Changed)
	assert.Equal(t, map[string]uint64{"db": 3}, p.Next.Incarnations)
	assert.Contains(t, p.Next.Reason, "db: incarnation changed at epoch 3")
	assert.NotContains(t, p.Next.Reason, "db: added by an earlier epoch")
}

// A second partition recreated while the first one's change is pending:
// the new epoch names each by its own incarnation change. The first keeps
// the reason of its reset (its new incarnation is read from its start),
// never the generic "added by an earlier epoch without proof of coverage"
// of a partition that joined without proof, and settles on its own proof.
func TestPendingIncarnationKeepsItsReasonAcrossAnotherChange(t *testing.T) {
	cur := store.Membership{Scope: "s", Epoch: 2, Partitions: []string{"a", "db"}, Proven: true}
	in := PlanInput{Scope: "s", Current: cur, HasCurrent: true, FreshFromStart: true,
		Published:   store.Frontier{Scope: "s", Epoch: 2, Scalar: coord.Integer(300)},
		Checkpoints: []store.Checkpoint{cp("a", 5, 500, false), cp("db", 9, 300, false)}}
	first := DecideIncarnation(in, IncarnationChange{Partition: "db", From: "sha256:aaaa", To: "sha256:bbbb", Why: "found at 15:00"})
	require.True(t, first.Changed)
	in.Current = first.Next
	second := DecideIncarnation(in, IncarnationChange{Partition: "a", From: "sha256:1111", To: "sha256:2222", Why: "found at 15:01"})
	require.True(t, second.Changed)
	next := second.Next
	assert.Equal(t, uint64(4), next.Epoch)
	assert.Equal(t, []string{"a", "db"}, next.Unproven)
	assert.Equal(t, map[string]uint64{"a": 4, "db": 3}, next.Incarnations)
	assert.NotContains(t, next.Reason, "added by an earlier epoch", next.Reason)
	assert.Contains(t, next.Reason, "db: incarnation changed at epoch 3; its old incarnation left unsealed and its new one is read from its start (epoch 3)")
	assert.Contains(t, next.Reason, "a: incarnation changed from sha256:1111 to sha256:2222 (found at 15:01)")

	// db recreated again while its change is pending: the epoch names
	// db's latest change alone, and nothing of the one it replaces.
	again := DecideIncarnation(in, IncarnationChange{Partition: "db", From: "sha256:bbbb", To: "sha256:cccc", Why: "found at 15:02"})
	require.True(t, again.Changed)
	assert.Equal(t, map[string]uint64{"db": 4}, again.Next.Incarnations)
	assert.Equal(t, incarnationReason("db", 4, "incarnation changed from sha256:bbbb to sha256:cccc (found at 15:02)"), again.Next.Reason)

	// db's new incarnation certifies a watermark: it settles, a stays
	// pending under its own reason.
	db := cp("db", 12, 40, false)
	db.Incarnation, db.IncarnationEpoch, db.PromotedWitness = "sha256:bbbb", 3, "a0009"
	aReset := cp("a", 6, 0, false)
	aReset.Incarnation, aReset.IncarnationEpoch, aReset.PromotedWitness = "sha256:2222", 4, "incarnation:sha256:2222"
	p := Decide(PlanInput{Scope: "s", Current: next, HasCurrent: true, FreshFromStart: true, Want: Names([]string{"a", "db"}),
		Checkpoints: []store.Checkpoint{aReset, db}})
	require.True(t, p.Changed)
	assert.Equal(t, []string{"db"}, p.Settled)
	assert.Equal(t, []string{"a"}, p.Next.Unproven)
	assert.NotContains(t, p.Next.Reason, "added by an earlier epoch", p.Next.Reason)
	assert.NotContains(t, p.Next.Reason, "db:", p.Next.Reason)
	assert.Contains(t, p.Next.Reason, "a: incarnation changed at epoch 4")
}

// A source recreated twice: one worker found the latest incarnation,
// recorded it and reset the checkpoint into it; another, holding the
// change to the incarnation in between (read before that reset), is stale
// and records nothing. Recording it would name an epoch whose reset is
// refused (the checkpoint has moved on), so no checkpoint would ever prove
// it and the partition would stay unproven for good.
func TestStaleIncarnationChangeRecordsNothing(t *testing.T) {
	cur := store.Membership{Scope: "s", Epoch: 4, Partitions: []string{"a", "db"}, Incarnations: map[string]uint64{"db": 4}, Unproven: []string{"db"}}
	latest := cp("db", 10, 0, false)
	latest.Epoch, latest.Incarnation, latest.IncarnationEpoch = 4, "sha256:cccc", 4
	in := PlanInput{Scope: "s", Current: cur, HasCurrent: true, FreshFromStart: true,
		Checkpoints: []store.Checkpoint{cp("a", 5, 500, false), latest}}
	p := DecideIncarnation(in, IncarnationChange{Partition: "db", From: "sha256:aaaa", To: "sha256:bbbb"})
	assert.False(t, p.Changed, "a stale change records no epoch")

	// The same change seen from the incarnation the checkpoint is in is
	// recorded.
	p = DecideIncarnation(in, IncarnationChange{Partition: "db", From: "sha256:cccc", To: "sha256:dddd"})
	require.True(t, p.Changed)
	assert.Equal(t, uint64(5), p.Next.Epoch)

	st := memstore.New()
	ctx := t.Context()
	_, err := st.SwapMembership(ctx, 0, cur)
	require.NoError(t, err)
	_, err = st.CreateCheckpoint(ctx, store.Checkpoint{Key: latest.Key, Generation: 1, Epoch: 4, Incarnation: "sha256:cccc", IncarnationEpoch: 4})
	require.NoError(t, err)
	_, err = RecordIncarnation(ctx, st, "s", IncarnationChange{Partition: "db", From: "sha256:aaaa", To: "sha256:bbbb"})
	require.ErrorIs(t, err, ErrIncarnationRecorded)
	m, err := st.LoadMembership(ctx, "s")
	require.NoError(t, err)
	assert.Equal(t, uint64(4), m.Epoch, "nothing written")
}
