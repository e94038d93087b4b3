//go:build linux

package e2e

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func leaseI(v int64) *int64 { return &v }

// TestLeaseMonotoneOracleCatchesFrontierGoingBack: the monotone oracle of
// the three-process lease test orders a partition's messages by the
// holders' tenures (lease counter), then by each holder's output order,
// accepts a frontier that never goes back across hand-offs, and names the
// message where the scalar or a vector entry goes back or is withdrawn.
func TestLeaseMonotoneOracleCatchesFrontierGoingBack(t *testing.T) {
	vec := func(a, b int64) map[string]*int64 { return map[string]*int64{"a": leaseI(a), "b": leaseI(b)} }
	line := func(id, owner, counter string, pos int64, frontier *int64, v map[string]*int64) leaseLine {
		return leaseLine{ID: id, Partition: "a", Pos: pos, Owner: owner, Counter: counter, Frontier: frontier, FrontierEpoch: 1, FrontierVector: v}
	}
	for _, tc := range []struct {
		name      string
		outs      map[string][]leaseLine
		violation string // substring of the first violation ("": none)
		handOffs  int
		checked   int
	}{
		{
			name: "kept across a hand-off; the frozen holder's late message belongs to its own tenure",
			outs: map[string][]leaseLine{
				"i1": {
					line("a-1", "i1#x", "1", 1, nil, map[string]*int64{"a": nil, "b": nil}),
					line("a-2", "i1#x", "1", 2, leaseI(5), vec(5, 7)),
					// Written after i2 took over (written late, file order).
					line("a-3", "i1#x", "1", 3, leaseI(5), vec(6, 7)),
				},
				"i2": {
					line("a-3", "i2#y", "2", 3, leaseI(6), vec(6, 8)),
					line("a-4", "i2#y", "2", 4, leaseI(6), vec(6, 8)),
				},
			},
			handOffs: 1, checked: 4,
		},
		{
			name: "the new holder attaches a lower scalar",
			outs: map[string][]leaseLine{
				"i1": {line("a-1", "i1#x", "1", 1, leaseI(5), vec(5, 7))},
				"i2": {line("a-2", "i2#y", "2", 2, leaseI(4), vec(5, 7))},
			},
			violation: "a: epoch 1 frontier 5 attached at a-1 (i1, lease i1#x/1, position 1), then 4 at a-2 (i2, lease i2#y/2, position 2)",
			handOffs:  1, checked: 2,
		},
		{
			name: "the new holder withdraws the scalar",
			outs: map[string][]leaseLine{
				"i1": {line("a-1", "i1#x", "1", 1, leaseI(5), vec(5, 7))},
				"i2": {line("a-2", "i2#y", "2", 2, nil, vec(5, 7))},
			},
			violation: "frontier 5 attached at a-1 (i1, lease i1#x/1, position 1), then withdrawn at a-2",
			handOffs:  1, checked: 1,
		},
		{
			name: "a vector entry goes back under the same scalar",
			outs: map[string][]leaseLine{
				"i1": {line("a-1", "i1#x", "1", 1, leaseI(5), vec(5, 9))},
				"i2": {line("a-2", "i2#y", "2", 2, leaseI(5), vec(5, 8))},
			},
			violation: "vector entry of b was 9 at a-1 (i1, lease i1#x/1, position 1), then 8 at a-2",
			handOffs:  1, checked: 2,
		},
		{
			name: "within one holder, output order counts",
			outs: map[string][]leaseLine{
				"i1": {
					line("a-2", "i1#x", "3", 2, leaseI(6), vec(6, 9)),
					line("a-1", "i1#x", "3", 1, leaseI(5), vec(6, 9)),
				},
			},
			violation: "frontier 6 attached at a-2 (i1, lease i1#x/3, position 2), then 5 at a-1",
			checked:   2,
		},
		{
			name: "two holders with one lease counter",
			outs: map[string][]leaseLine{
				"i1": {line("a-1", "i1#x", "1", 1, leaseI(5), vec(5, 7))},
				"i2": {line("a-2", "i2#y", "1", 2, leaseI(5), vec(5, 7))},
			},
			violation: "a: lease counter 1 on messages of i1 and of i2",
			handOffs:  1, checked: 2,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := leaseMonotoneOracle(tc.outs)
			if tc.violation == "" {
				require.Empty(t, res.violations)
			} else {
				require.NotEmpty(t, res.violations)
				require.Contains(t, res.violations[0], tc.violation)
			}
			require.Equal(t, tc.handOffs, res.handOffs)
			require.Equal(t, tc.checked, res.checked)
		})
	}
}
