package chain

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tidemark/tidemark/internal/reconcile"
)

// The machine's classes are the classifier's, converted, plus its own two
// (idle, empty without evidence), whose values no classifier class takes:
// every class has its own name, the classifier's keep theirs.
func TestMachineClassesAreTheClassifiersAndTwoOfItsOwn(t *testing.T) {
	names := map[string]RetryClass{}
	all := []RetryClass{ClassIdle, ClassEmptyNoEvidence}
	for _, c := range reconcile.Classes() {
		mc := classOf(c)
		assert.NotEqual(t, ClassIdle, mc, "classifier class %s takes the value of idle", c)
		assert.NotEqual(t, ClassEmptyNoEvidence, mc, "classifier class %s takes the value of empty_no_evidence", c)
		assert.Equal(t, c.String(), mc.String())
		all = append(all, mc)
	}
	for _, c := range all {
		name := c.String()
		assert.NotContains(t, name, "retry_class(", "class %d has no name", uint8(c))
		if prev, dup := names[name]; dup {
			t.Errorf("classes %d and %d share the name %q", uint8(prev), uint8(c), name)
		}
		names[name] = c
	}
	assert.Equal(t, "idle", ClassIdle.String())
	assert.Equal(t, "empty_no_evidence", ClassEmptyNoEvidence.String())
}
