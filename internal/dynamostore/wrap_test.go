package dynamostore

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tidemark/tidemark/internal/store"
)

// A failed read says it wrote nothing; only a failed write is labelled
// with an unknown outcome to resolve by reading. Every read and write the
// store names is classed by its verb.
func TestWrapLabelsOnlyWritesWithAnUnknownOutcome(t *testing.T) {
	s := &DynamoStore{table: "t"}
	k := store.Key{Scope: "s", Partition: "p"}
	cause := errors.New("connection reset")
	for op, read := range map[string]bool{
		"load checkpoint": true, "list checkpoints of": true, "read witnesses of": true, "scan for a cursor in": true,
		"load membership of": true, "list heartbeats of": true,
		"promote": false, "put witness": false, "set parked": false, "record receipt of": false, "swap membership of": false,
		"put witness: reading the stored witness of": false, "create checkpoint": false, "prune witnesses of": false,
	} {
		err := s.wrap(op, k, cause)
		assert.ErrorIs(t, err, cause, op)
		if read {
			assert.Contains(t, err.Error(), "a read: nothing was written", op)
			assert.NotContains(t, err.Error(), "outcome unknown", op)
		} else {
			assert.Contains(t, err.Error(), "outcome unknown for a write", op)
		}
	}
}
