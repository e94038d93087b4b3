package lease

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// Instances starting together prefer different partitions (rendezvous
// order), so their first claims mostly do not collide; each instance's
// order is a permutation that depends on its owner name alone.
func TestRendezvousSpreadsInstancesStartingTogether(t *testing.T) {
	parts := make([]string, 12)
	for i := range parts {
		parts[i] = fmt.Sprintf("p%02d", i)
	}
	firsts := map[string]bool{}
	for _, self := range []string{"i1#a", "i2#b", "i3#c", "i4#d", "i5#e"} {
		order := slices.Clone(parts)
		Rendezvous(self, order)
		require.ElementsMatch(t, parts, order)
		again := slices.Clone(parts)
		slices.Reverse(again)
		Rendezvous(self, again)
		require.Equal(t, order, again, "the order depends on the owner alone")
		firsts[order[0]] = true
	}
	require.Greater(t, len(firsts), 1, "five instances all start with the same partition")
}
