package frontier

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/coord"
)

// TestFrontierExample_AThrough120_BThrough90_LateRetryLoses_ThenB110
// executes the frontier example (docs/design.md#frontier-example):
// partition A is complete through 120 while B is complete through 90. A
// retry of an older A page finishes late but loses its partition checkpoint
// comparison, so the combined safe frontier remains 90. When B later proves
// complete through 110 the frontier becomes 110. Taking the maximum, 120,
// would claim completion of B's unproven interval, so 120 must never appear
// as the scalar.
//
// The late retry here certifies A only through 60, so that accepting it
// would visibly lower the frontier (to 60), not only A's entry.
func TestFrontierExample_AThrough120_BThrough90_LateRetryLoses_ThenB110(t *testing.T) {
	tr, err := NewTracker(1, []string{"A", "B"})
	require.NoError(t, err)

	none := coord.Watermark{}
	steps := []struct {
		name          string
		partition     string
		w             coord.Watermark
		wantOutcome   Outcome
		wantScalar    coord.Watermark // zero: withheld
		wantHeldBy    []string
		wantVector    map[string]coord.Watermark
		wantPublished coord.Watermark
	}{
		{
			name: "A complete through 120, B has no evidence yet", partition: "A", w: coord.Integer(120),
			wantOutcome: Advanced, wantScalar: none, wantHeldBy: []string{"B"},
			wantVector:    map[string]coord.Watermark{"A": coord.Integer(120), "B": none},
			wantPublished: none,
		},
		{
			name: "B complete through 90: the frontier is the minimum", partition: "B", w: coord.Integer(90),
			wantOutcome: Advanced, wantScalar: coord.Integer(90), wantHeldBy: []string{"B"},
			wantVector:    map[string]coord.Watermark{"A": coord.Integer(120), "B": coord.Integer(90)},
			wantPublished: coord.Integer(90),
		},
		{
			name: "late retry of an older A page loses", partition: "A", w: coord.Integer(60),
			wantOutcome: Stale, wantScalar: coord.Integer(90), wantHeldBy: []string{"B"},
			wantVector:    map[string]coord.Watermark{"A": coord.Integer(120), "B": coord.Integer(90)},
			wantPublished: coord.Integer(90),
		},
		{
			name: "the same retry delivered twice still loses", partition: "A", w: coord.Integer(60),
			wantOutcome: Stale, wantScalar: coord.Integer(90), wantHeldBy: []string{"B"},
			wantVector:    map[string]coord.Watermark{"A": coord.Integer(120), "B": coord.Integer(90)},
			wantPublished: coord.Integer(90),
		},
		{
			name: "B proves complete through 110", partition: "B", w: coord.Integer(110),
			wantOutcome: Advanced, wantScalar: coord.Integer(110), wantHeldBy: []string{"B"},
			wantVector:    map[string]coord.Watermark{"A": coord.Integer(120), "B": coord.Integer(110)},
			wantPublished: coord.Integer(110),
		},
	}

	var published Snapshot
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			got, err := tr.Apply(st.partition, st.w)
			require.NoError(t, err)
			assert.Equal(t, st.wantOutcome, got)

			snap := tr.Frontier()
			assert.Equal(t, uint64(1), snap.Epoch)
			assert.Equal(t, st.wantScalar, snap.Scalar)
			assert.Equal(t, !st.wantScalar.IsZero(), snap.Proven)
			assert.Equal(t, st.wantHeldBy, snap.HeldBy)
			assert.Equal(t, st.wantVector, snap.Vector)

			published, _ = NextPublication(published, snap)
			assert.Equal(t, st.wantPublished, published.Scalar)

			// The maximum is never the frontier, computed or published.
			assert.NotEqual(t, coord.Integer(120), snap.Scalar, "the maximum must never be the frontier")
			assert.NotEqual(t, coord.Integer(120), published.Scalar, "the maximum must never be published")
		})
	}
	assert.Equal(t, uint64(2), tr.Ignored(), "both late retries are reported")
	w, ok := tr.Watermark("A")
	require.True(t, ok)
	assert.Equal(t, coord.Integer(120), w, "a late retry never lowers A's watermark")
}
