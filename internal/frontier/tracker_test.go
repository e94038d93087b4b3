package frontier

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/coord"
)

// update is one Tracker.Apply in a scenario.
type update struct {
	partition string
	w         coord.Watermark
	want      Outcome
}

// applyAll feeds updates to tr and checks each outcome.
func applyAll(t *testing.T, tr *Tracker, ups []update) {
	t.Helper()
	for i, u := range ups {
		got, err := tr.Apply(u.partition, u.w)
		require.NoError(t, err, "update %d (%s=%s)", i, u.partition, u.w)
		require.Equal(t, u.want, got, "update %d (%s=%s)", i, u.partition, u.w)
	}
}

func newTracker(t *testing.T, epoch uint64, partitions ...string) *Tracker {
	t.Helper()
	tr, err := NewTracker(epoch, partitions)
	require.NoError(t, err)
	return tr
}

func TestTracker_Frontier(t *testing.T) {
	i := coord.Integer
	ts := func(sec int64) coord.Watermark { return coord.Timestamp(time.Unix(sec, 0)) }
	none := coord.Watermark{}
	tests := []struct {
		name       string
		partitions []string
		updates    []update
		wantScalar coord.Watermark
		wantHeldBy []string
		wantReason string // substring; "" means Reason must be empty
	}{
		{
			name:       "quiet partition without evidence holds the frontier back",
			partitions: []string{"a", "b", "quiet"},
			updates:    []update{{"a", i(50), Advanced}, {"b", i(60), Advanced}},
			wantScalar: none,
			wantHeldBy: []string{"quiet"},
			wantReason: "1 of 3 partitions have no complete-through watermark: quiet",
		},
		{
			name:       "an empty page without finality (zero watermark) is no evidence",
			partitions: []string{"a", "quiet"},
			updates:    []update{{"a", i(50), Advanced}, {"quiet", none, Unchanged}, {"quiet", none, Unchanged}},
			wantScalar: none,
			wantHeldBy: []string{"quiet"},
			wantReason: "quiet",
		},
		{
			name:       "quiet partition with evidence at last holds at its watermark",
			partitions: []string{"a", "b", "quiet"},
			updates:    []update{{"a", i(50), Advanced}, {"b", i(60), Advanced}, {"quiet", i(40), Advanced}},
			wantScalar: i(40),
			wantHeldBy: []string{"quiet"},
		},
		{
			name:       "zero never erases evidence",
			partitions: []string{"a", "b"},
			updates:    []update{{"a", i(50), Advanced}, {"b", i(60), Advanced}, {"a", none, Unchanged}},
			wantScalar: i(50),
			wantHeldBy: []string{"a"},
		},
		{
			name:       "no partition has evidence",
			partitions: []string{"b", "a"},
			wantScalar: none,
			wantHeldBy: []string{"a", "b"},
			wantReason: "2 of 2 partitions have no complete-through watermark: a, b",
		},
		{
			name:       "mixed kinds: vector only, no minimum",
			partitions: []string{"a", "b"},
			updates:    []update{{"a", i(5), Advanced}, {"b", ts(1), Advanced}},
			wantScalar: none,
			wantHeldBy: nil,
			wantReason: "no comparable coordinate: partitions report watermarks of different kinds (integer: 1, timestamp: 1)",
		},
		{
			name:       "mixed kinds and a missing partition",
			partitions: []string{"a", "b", "c"},
			updates:    []update{{"a", i(5), Advanced}, {"b", coord.String("x"), Advanced}},
			wantScalar: none,
			wantHeldBy: []string{"c"},
			wantReason: "different kinds (integer: 1, string: 1)",
		},
		{
			name:       "ties: every partition at the minimum holds it",
			partitions: []string{"d", "c", "b", "a", "e"},
			updates: []update{
				{"a", i(7), Advanced}, {"b", i(9), Advanced}, {"c", i(7), Advanced},
				{"d", i(8), Advanced}, {"e", i(7), Advanced}, {"e", i(7), Unchanged},
			},
			wantScalar: i(7),
			wantHeldBy: []string{"a", "c", "e"},
		},
		{
			name:       "timestamps",
			partitions: []string{"a", "b"},
			updates:    []update{{"a", ts(100), Advanced}, {"b", ts(90), Advanced}, {"a", ts(80), Stale}},
			wantScalar: ts(90),
			wantHeldBy: []string{"b"},
		},
		{
			name:       "strings order byte-wise",
			partitions: []string{"a", "b"},
			updates: []update{
				{"a", coord.String("2026-01-02"), Advanced}, {"b", coord.String("2026-01-01"), Advanced},
				{"b", coord.String("2025-12-31"), Stale}, {"b", coord.String("2026-01-03"), Advanced},
			},
			wantScalar: coord.String("2026-01-02"),
			wantHeldBy: []string{"a"},
		},
		{
			name:       "a fast partition cannot carry the frontier past a slow one",
			partitions: []string{"fast", "slow"},
			updates: []update{
				{"slow", i(1), Advanced}, {"fast", i(1000), Advanced}, {"fast", i(5000), Advanced}, {"fast", i(9000), Advanced},
			},
			wantScalar: i(1),
			wantHeldBy: []string{"slow"},
		},
		{
			name:       "single partition",
			partitions: []string{"only"},
			updates:    []update{{"only", i(3), Advanced}},
			wantScalar: i(3),
			wantHeldBy: []string{"only"},
		},
		{
			name:       "empty membership never yields a scalar",
			partitions: nil,
			wantScalar: none,
			wantReason: "membership epoch 4 has no partitions",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTracker(t, 4, tc.partitions...)
			applyAll(t, tr, tc.updates)
			snap := tr.Frontier()
			assert.Equal(t, uint64(4), snap.Epoch)
			assert.Equal(t, tc.wantScalar, snap.Scalar)
			assert.Equal(t, !tc.wantScalar.IsZero(), snap.Proven)
			assert.Equal(t, tc.wantHeldBy, snap.HeldBy)
			assert.Len(t, snap.Vector, len(tc.partitions))
			if tc.wantReason == "" {
				assert.Empty(t, snap.Reason)
			} else {
				assert.Contains(t, snap.Reason, tc.wantReason)
			}
			w, proven := tr.Scalar()
			assert.Equal(t, snap.Scalar, w)
			assert.Equal(t, snap.Proven, proven)
			assert.Equal(t, tc.partitions == nil, tr.Len() == 0)
		})
	}
}

func TestTracker_Errors(t *testing.T) {
	tr := newTracker(t, 1, "a", "b")
	_, err := tr.Update("a", coord.Integer(10))
	require.NoError(t, err)

	tests := []struct {
		name      string
		partition string
		w         coord.Watermark
		wantErr   error
	}{
		{"unknown partition", "zz", coord.Integer(1), ErrUnknownPartition},
		{"unknown kind", "a", coord.Watermark{Kind: coord.LastKind + 1, Int: 99}, ErrInvalid},
		{"kind change of a partition cannot be shown not to lower it", "a", coord.String("zzz"), coord.ErrIncomparable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := tr.Frontier()
			changed, err := tr.Update(tc.partition, tc.w)
			require.ErrorIs(t, err, tc.wantErr)
			assert.False(t, changed)
			assert.Equal(t, before, tr.Frontier(), "a refused update leaves the tracker unchanged")
		})
	}
	assert.Zero(t, tr.Ignored(), "errors are not counted as stale updates")
}

func TestNewTracker_Invalid(t *testing.T) {
	tests := []struct {
		name       string
		epoch      uint64
		partitions []string
	}{
		{"epoch 0", 0, []string{"a"}},
		{"empty name", 1, []string{"a", ""}},
		{"duplicate", 1, []string{"a", "b", "a"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewTracker(tc.epoch, tc.partitions)
			require.ErrorIs(t, err, ErrInvalid)
		})
	}
	_, err := NewTrackerFor(Membership{Epoch: 0, Proven: true})
	require.ErrorIs(t, err, ErrInvalid)
}

func TestTracker_UpdateReportsChange(t *testing.T) {
	tr := newTracker(t, 1, "a")
	for _, tc := range []struct {
		w    coord.Watermark
		want bool
	}{
		{coord.Integer(5), true},
		{coord.Integer(5), false},
		{coord.Integer(4), false},
		{coord.Watermark{}, false},
		{coord.Integer(6), true},
	} {
		changed, err := tr.Update("a", tc.w)
		require.NoError(t, err)
		assert.Equal(t, tc.want, changed, "update to %s", tc.w)
	}
	assert.Equal(t, uint64(1), tr.Ignored())
	_, ok := tr.Watermark("nope")
	assert.False(t, ok)
}

func TestTracker_MinHolder(t *testing.T) {
	empty := newTracker(t, 1)
	_, _, ok := empty.MinHolder()
	assert.False(t, ok)
	assert.Nil(t, empty.HeldBy())

	tr := newTracker(t, 1, "a", "b", "c")
	p, w, ok := tr.MinHolder()
	require.True(t, ok)
	assert.Contains(t, []string{"a", "b", "c"}, p)
	assert.True(t, w.IsZero(), "without evidence the holder has none")

	applyAll(t, tr, []update{{"a", coord.Integer(30), Advanced}, {"b", coord.Integer(20), Advanced}})
	p, w, _ = tr.MinHolder()
	assert.Equal(t, "c", p, "the partition without evidence holds it")
	assert.True(t, w.IsZero())

	applyAll(t, tr, []update{{"c", coord.Integer(25), Advanced}})
	p, w, _ = tr.MinHolder()
	assert.Equal(t, "b", p)
	assert.Equal(t, coord.Integer(20), w)

	applyAll(t, tr, []update{{"b", coord.Integer(40), Advanced}})
	p, w, _ = tr.MinHolder()
	assert.Equal(t, "c", p)
	assert.Equal(t, coord.Integer(25), w)
}

func TestTracker_Withhold(t *testing.T) {
	t.Run("explicit reasons accumulate", func(t *testing.T) {
		tr := newTracker(t, 2, "a")
		applyAll(t, tr, []update{{"a", coord.Integer(1), Advanced}})
		_, proven := tr.Scalar()
		require.True(t, proven)
		tr.Withhold("add c: no proof of coverage")
		tr.Withhold("")
		snap := tr.Frontier()
		assert.False(t, snap.Proven)
		assert.True(t, snap.Scalar.IsZero())
		assert.Equal(t, "membership unproven: add c: no proof of coverage; withheld by the caller", snap.Reason)
		assert.Equal(t, map[string]coord.Watermark{"a": coord.Integer(1)}, snap.Vector, "the vector is still published")
		assert.Equal(t, []string{"a"}, snap.HeldBy)
	})
	t.Run("NewTrackerFor an unproven membership", func(t *testing.T) {
		for _, m := range []Membership{
			{Epoch: 3, Partitions: []string{"a"}, Reason: "add a: not replayed", Unproven: []string{"a"}},
			{Epoch: 3, Partitions: []string{"a"}},
		} {
			tr, err := NewTrackerFor(m)
			require.NoError(t, err)
			applyAll(t, tr, []update{{"a", coord.Integer(1), Advanced}})
			snap := tr.Frontier()
			assert.False(t, snap.Proven)
			assert.Contains(t, snap.Reason, "membership unproven: ")
			assert.Equal(t, uint64(3), tr.Epoch())
		}
	})
	t.Run("NewTrackerFor a proven membership", func(t *testing.T) {
		tr, err := NewTrackerFor(Membership{Epoch: 3, Partitions: []string{"a"}, Proven: true, Reason: "ignored an add with an empty partition name"})
		require.NoError(t, err)
		applyAll(t, tr, []update{{"a", coord.Integer(1), Advanced}})
		assert.True(t, tr.Frontier().Proven)
	})
}

func TestTracker_ReasonListsAtMostEightNames(t *testing.T) {
	var names []string
	for i := range 11 {
		names = append(names, fmt.Sprintf("p%02d", i))
	}
	tr := newTracker(t, 1, names...)
	snap := tr.Frontier()
	assert.Len(t, snap.HeldBy, 11, "HeldBy names them all")
	assert.Equal(t, "11 of 11 partitions have no complete-through watermark: p00, p01, p02, p03, p04, p05, p06, p07 and 3 more", snap.Reason)
}

func TestOutcome_String(t *testing.T) {
	for o, want := range map[Outcome]string{Advanced: "advanced", Unchanged: "unchanged", Stale: "stale", 0: "outcome(0)", 9: "outcome(9)"} {
		assert.Equal(t, want, o.String())
	}
}

func TestTracker_UpdateDoesNotAllocate(t *testing.T) {
	names := make([]string, 64)
	for i := range names {
		names[i] = fmt.Sprintf("p%d", i)
	}
	tr := newTracker(t, 1, names...)
	for _, n := range names {
		_, err := tr.Update(n, coord.Integer(1))
		require.NoError(t, err)
	}
	v := int64(1)
	allocs := testing.AllocsPerRun(1000, func() {
		v++
		_, _ = tr.Update(names[v%64], coord.Integer(v))
		_, _ = tr.Update(names[v%64], coord.Integer(v-1)) // stale
		_, _ = tr.Scalar()
		_, _, _ = tr.MinHolder()
	})
	assert.Zero(t, allocs)
}
