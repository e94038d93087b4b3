package frontier

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/coord"
)

func TestPlanChange(t *testing.T) {
	i := coord.Integer
	none := coord.Watermark{}
	ab := Membership{Epoch: 4, Partitions: []string{"a", "b"}, Cutover: i(50), Proven: true}
	tests := []struct {
		name         string
		current      Membership
		published    coord.Watermark
		add          []AddProof
		remove       []RemoveProof
		wantParts    []string
		wantProven   bool
		wantUnproven []string
		wantCutover  coord.Watermark
		wantReason   []string // substrings
	}{
		{
			name: "no change is still a new epoch", current: ab, published: i(90),
			wantParts: []string{"a", "b"}, wantProven: true, wantCutover: i(90),
		},
		{
			name: "add covered from before the published frontier", current: ab, published: i(90),
			add:       []AddProof{{Partition: "c", CoveredFrom: i(80)}},
			wantParts: []string{"a", "b", "c"}, wantProven: true, wantCutover: i(90),
		},
		{
			name: "add covered exactly from the published frontier", current: ab, published: i(90),
			add:       []AddProof{{Partition: "c", CoveredFrom: i(90)}},
			wantParts: []string{"a", "b", "c"}, wantProven: true, wantCutover: i(90),
		},
		{
			name: "add whose earlier range was replayed", current: ab, published: i(90),
			add:       []AddProof{{Partition: "c", CoveredFrom: i(500), Replayed: true}},
			wantParts: []string{"a", "b", "c"}, wantProven: true, wantCutover: i(90),
		},
		{
			name: "add covered only from after the published frontier", current: ab, published: i(90),
			add:       []AddProof{{Partition: "c", CoveredFrom: i(100)}},
			wantParts: []string{"a", "b", "c"}, wantUnproven: []string{"c"}, wantCutover: i(90),
			wantReason: []string{"add c: covered only from 100, after the published frontier 90, and its earlier range was not replayed"},
		},
		{
			name: "add with no coverage evidence", current: ab, published: i(90),
			add:       []AddProof{{Partition: "c"}},
			wantParts: []string{"a", "b", "c"}, wantUnproven: []string{"c"}, wantCutover: i(90),
			wantReason: []string{"add c: no proof of coverage"},
		},
		{
			name: "add covered in another kind", current: ab, published: i(90),
			add:       []AddProof{{Partition: "c", CoveredFrom: coord.Timestamp(time.Unix(1, 0))}},
			wantParts: []string{"a", "b", "c"}, wantUnproven: []string{"c"}, wantCutover: i(90),
			wantReason: []string{"add c: covered from 1970-01-01T00:00:01Z (timestamp), not comparable with the published frontier 90 (integer)"},
		},
		{
			name:    "nothing ever published: only a replay proves coverage",
			current: Membership{}, published: none,
			add:       []AddProof{{Partition: "a", Replayed: true}, {Partition: "b", CoveredFrom: i(1)}},
			wantParts: []string{"a", "b"}, wantUnproven: []string{"b"}, wantCutover: none,
			wantReason: []string{"add b: covered from 1, but no frontier was published"},
		},
		{
			name:      "first epoch from the zero membership",
			current:   Membership{},
			add:       []AddProof{{Partition: "b", Replayed: true}, {Partition: "a", Replayed: true}},
			wantParts: []string{"a", "b"}, wantProven: true, wantCutover: none,
		},
		{
			name: "remove sealed through the cutover", current: ab, published: i(90),
			remove:    []RemoveProof{{Partition: "b", Sealed: true, SealedThrough: i(90)}},
			wantParts: []string{"a"}, wantProven: true, wantCutover: i(90),
		},
		{
			name: "remove not sealed", current: ab, published: i(90),
			remove:    []RemoveProof{{Partition: "b", SealedThrough: i(95)}},
			wantParts: []string{"a"}, wantUnproven: []string{"b"}, wantCutover: i(90),
			wantReason: []string{"remove b: not sealed (complete through 95) through the cutover 90"},
		},
		{
			name: "remove sealed only before the cutover", current: ab, published: i(90),
			remove:    []RemoveProof{{Partition: "b", Sealed: true, SealedThrough: i(80)}},
			wantParts: []string{"a"}, wantUnproven: []string{"b"}, wantCutover: i(90),
			wantReason: []string{"remove b: sealed only through 80, before the cutover 90"},
		},
		{
			name: "remove sealed through no coordinate", current: ab, published: i(90),
			remove:    []RemoveProof{{Partition: "b", Sealed: true}},
			wantParts: []string{"a"}, wantUnproven: []string{"b"}, wantCutover: i(90),
			wantReason: []string{"remove b: sealed, but through no coordinate"},
		},
		{
			name: "remove sealed in another kind", current: ab, published: i(90),
			remove:    []RemoveProof{{Partition: "b", Sealed: true, SealedThrough: coord.String("x")}},
			wantParts: []string{"a"}, wantUnproven: []string{"b"}, wantCutover: i(90),
			wantReason: []string{"remove b: sealed through x (string), not comparable with the cutover 90 (integer)"},
		},
		{
			name:      "remove sealed when nothing was ever published",
			current:   Membership{Epoch: 1, Partitions: []string{"a", "b"}, Proven: true},
			remove:    []RemoveProof{{Partition: "b", Sealed: true, SealedThrough: i(3)}},
			wantParts: []string{"a"}, wantProven: true, wantCutover: none,
		},
		{
			name: "zero published falls back to the current cutover", current: ab, published: none,
			add:       []AddProof{{Partition: "c", CoveredFrom: i(50)}, {Partition: "d", CoveredFrom: i(51)}},
			wantParts: []string{"a", "b", "c", "d"}, wantUnproven: []string{"d"}, wantCutover: i(50),
			wantReason: []string{"add d: covered only from 51, after the published frontier 50"},
		},
		{
			name: "both proofs missing: both named, in partition order", current: ab, published: i(90),
			add:       []AddProof{{Partition: "c"}},
			remove:    []RemoveProof{{Partition: "a"}},
			wantParts: []string{"b", "c"}, wantUnproven: []string{"a", "c"}, wantCutover: i(90),
			wantReason: []string{"remove a: not sealed", "; add c: no proof of coverage"},
		},
		{
			name: "removing a non-member and adding a proven member change nothing", current: ab, published: i(90),
			add:       []AddProof{{Partition: "a"}},
			remove:    []RemoveProof{{Partition: "zz"}},
			wantParts: []string{"a", "b"}, wantProven: true, wantCutover: i(90),
		},
		{
			name: "empty names are ignored and noted", current: ab, published: i(90),
			add:       []AddProof{{Partition: "", Replayed: true}},
			remove:    []RemoveProof{{Partition: ""}},
			wantParts: []string{"a", "b"}, wantProven: true, wantCutover: i(90),
			wantReason: []string{"ignored a remove with an empty partition name", "ignored an add with an empty partition name"},
		},
		{
			name: "remove then re-add in one plan needs both proofs", current: ab, published: i(90),
			remove:    []RemoveProof{{Partition: "b", Sealed: true, SealedThrough: i(95)}},
			add:       []AddProof{{Partition: "b", CoveredFrom: i(99)}},
			wantParts: []string{"a", "b"}, wantUnproven: []string{"b"}, wantCutover: i(90),
			wantReason: []string{"add b: covered only from 99"},
		},
		{
			name: "remove unsealed then re-add with coverage settles it", current: ab, published: i(90),
			remove:    []RemoveProof{{Partition: "b"}},
			add:       []AddProof{{Partition: "b", CoveredFrom: i(90)}},
			wantParts: []string{"a", "b"}, wantProven: true, wantCutover: i(90),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			next := PlanChange(tc.current, tc.published, tc.add, tc.remove)
			assert.Equal(t, tc.current.Epoch+1, next.Epoch, "every change is a new epoch")
			assert.Equal(t, tc.wantParts, next.Partitions)
			assert.Equal(t, tc.wantProven, next.Proven)
			assert.Equal(t, tc.wantUnproven, next.Unproven)
			assert.Equal(t, tc.wantCutover, next.Cutover)
			for _, r := range tc.wantReason {
				assert.Contains(t, next.Reason, r)
			}
			if len(tc.wantReason) == 0 {
				assert.Empty(t, next.Reason)
			}
			for _, p := range next.Unproven {
				assert.Contains(t, next.Reason, p, "the reason names every unproven partition")
			}
		})
	}
}

// TestPlanChange_UnprovenCarriesUntilSettled walks a gap through epochs: an
// unproven add stays unproven across unrelated changes and is settled only
// by a proof for that partition.
func TestPlanChange_UnprovenCarriesUntilSettled(t *testing.T) {
	i := coord.Integer
	m := Membership{Epoch: 1, Partitions: []string{"a", "b"}, Proven: true}

	m = PlanChange(m, i(90), []AddProof{{Partition: "c", CoveredFrom: i(100)}}, nil)
	require.False(t, m.Proven)
	require.Equal(t, []string{"c"}, m.Unproven)
	require.Equal(t, i(90), m.Cutover)

	// An unrelated, proven change: the scalar stays withheld because of c.
	// No scalar was published in the unproven epoch, so the caller passes
	// zero and the cutover (90) is used.
	m = PlanChange(m, coord.Watermark{}, []AddProof{{Partition: "d", CoveredFrom: i(90)}}, nil)
	assert.False(t, m.Proven)
	assert.Equal(t, []string{"c"}, m.Unproven)
	assert.Equal(t, uint64(3), m.Epoch)
	assert.Equal(t, i(90), m.Cutover)
	assert.Contains(t, m.Reason, "c: added by an earlier epoch without proof of coverage")

	// A still-invalid proof keeps it unproven, with the new reason.
	m = PlanChange(m, coord.Watermark{}, []AddProof{{Partition: "c", CoveredFrom: i(95)}}, nil)
	assert.False(t, m.Proven)
	assert.Contains(t, m.Reason, "add c: covered only from 95")

	// A replay of c's earlier range settles it.
	m = PlanChange(m, coord.Watermark{}, []AddProof{{Partition: "c", Replayed: true}}, nil)
	assert.True(t, m.Proven)
	assert.Empty(t, m.Unproven)
	assert.Empty(t, m.Reason)
	assert.Equal(t, []string{"a", "b", "c", "d"}, m.Partitions)
	assert.Equal(t, uint64(5), m.Epoch)
}

func TestPlanChange_UnprovenRemovalSettledBySealOrRemovalOfAnUnprovenAdd(t *testing.T) {
	i := coord.Integer
	m := Membership{Epoch: 1, Partitions: []string{"a", "b"}, Proven: true}

	m = PlanChange(m, i(90), nil, []RemoveProof{{Partition: "b"}})
	require.Equal(t, []string{"b"}, m.Unproven)
	require.Equal(t, []string{"a"}, m.Partitions)

	m = PlanChange(m, coord.Watermark{}, nil, nil)
	assert.Contains(t, m.Reason, "b: removed by an earlier epoch without proof of sealing")
	assert.False(t, m.Proven)

	// The seal proof for the former member arrives.
	m = PlanChange(m, coord.Watermark{}, nil, []RemoveProof{{Partition: "b", Sealed: true, SealedThrough: i(90)}})
	assert.True(t, m.Proven)
	assert.Equal(t, []string{"a"}, m.Partitions)

	// An unproven add removed again with a seal proof is settled too.
	m = PlanChange(m, coord.Watermark{}, []AddProof{{Partition: "c"}}, nil)
	require.False(t, m.Proven)
	m = PlanChange(m, coord.Watermark{}, nil, []RemoveProof{{Partition: "c", Sealed: true, SealedThrough: i(91)}})
	assert.True(t, m.Proven)
	assert.Equal(t, []string{"a"}, m.Partitions)
}

// TestPlanChange_UnprovenWithoutListIsSticky pins the conservative reading of
// a record stored without its Unproven list: the gap cannot be located, so
// every later epoch stays unproven.
func TestPlanChange_UnprovenWithoutListIsSticky(t *testing.T) {
	lost := Membership{Epoch: 7, Partitions: []string{"a"}, Cutover: coord.Integer(9)}
	m := PlanChange(lost, coord.Watermark{}, []AddProof{{Partition: "b", Replayed: true}}, nil)
	assert.False(t, m.Proven)
	assert.Empty(t, m.Unproven)
	assert.Contains(t, m.Reason, "epoch 7 was unproven without naming its unproven partitions (no reason recorded)")
	m = PlanChange(m, coord.Watermark{}, nil, nil)
	assert.False(t, m.Proven)
	assert.Contains(t, m.Reason, "epoch 8 was unproven without naming its unproven partitions (epoch 7 was unproven")
}
