package reconcile

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every retry class is named and decides its own promotion in the one
// table (classes): String never falls back to the numeric form for a
// class, names are distinct, and a verdict advances exactly when its
// class does (only UnprovableDivergence stops), so a class added after
// HeadGrowth cannot silently never promote.
func TestEveryRetryClassIsNamedAndDecidesItsPromotion(t *testing.T) {
	wantAdvances := map[RetryClass]bool{
		FirstResponse: true, ExactReplay: true, TokenRotation: true, ShiftedPage: true,
		UnprovableDivergence: false, HeadGrowth: true,
	}
	require.Len(t, Classes(), len(wantAdvances), "a class was added: say here whether it promotes")
	seen := map[string]bool{}
	for _, c := range Classes() {
		name := c.String()
		assert.NotContains(t, name, "retry_class(", "class %d has no name", uint8(c))
		assert.False(t, seen[name], "name %q used twice", name)
		seen[name] = true
		assert.True(t, c.Known())
		want, listed := wantAdvances[c]
		require.True(t, listed, "class %s not in this test's table", c)
		assert.Equal(t, want, c.Advances(), "class %s", c)
		assert.Equal(t, want, Verdict{Class: c}.Advances(), "verdict of class %s", c)
	}
	var zero RetryClass
	assert.False(t, zero.Known())
	assert.False(t, zero.Advances(), "the zero class is invalid and never promotes")
	past := RetryClass(uint8(HeadGrowth) + 1)
	assert.False(t, past.Known())
	assert.False(t, Verdict{Class: past}.Advances(), "an unknown class never promotes")
}
