package reconcile

import (
	"fmt"

	"github.com/tidemark/tidemark/internal/coord"
)

// Disposition is the lifecycle state of a response witness. The zero value is
// invalid on purpose.
type Disposition uint8

const (
	// Pending: recorded, its successor not (yet) promoted.
	Pending Disposition = 1 + iota
	// Promoted: its successor was written to the checkpoint by a winning
	// compare-and-swap.
	Promoted
	// Abandoned: another response for the same (cursor, generation) won, or
	// the partition was restarted from another boundary. Its successor must
	// never be promoted.
	Abandoned
)

func (d Disposition) String() string {
	switch d {
	case Pending:
		return "pending"
	case Promoted:
		return "promoted"
	case Abandoned:
		return "abandoned"
	}
	return fmt.Sprintf("disposition(%d)", uint8(d))
}

// EventWitness is the compact, durable identity of one event of a response:
// a 64-bit hash of its stable id, its source position, and a 64-bit payload
// digest (the first 8 bytes of a SHA-256, or of a semantic projection).
type EventWitness struct {
	IDHash   uint64
	Position coord.Position
	Digest   uint64
}

// Witness is the durable record of one successful fetch (see "response
// witness" in docs/design.md#vocabulary).
type Witness struct {
	Scope     string
	Partition string
	// Generation and InputCursor are the checkpoint state the request was
	// made from.
	Generation  uint64
	InputCursor []byte
	// AttemptID is a locally generated response-attempt identifier, supplied
	// by the caller so the core stays deterministic.
	AttemptID string
	// Events is the ordered event witness.
	Events []EventWitness
	// Successor is the exact opaque successor cursor the response returned.
	// Empty means the provider returned none.
	Successor []byte
	// Marker is the provider's snapshot or coverage marker, if any, kept
	// opaque.
	Marker []byte
	// CompleteThrough is the complete-through watermark the response
	// certifies (zero when it certifies none).
	CompleteThrough coord.Watermark
	// Sealed is set when the provider says the partition ends with this
	// response.
	Sealed bool
	// Disposition is pending, promoted or abandoned.
	Disposition Disposition
	// AckedThrough counts the leading events of Events that have a durable
	// terminal outcome downstream: the receipts of this response, written
	// once per acknowledged batch.
	AckedThrough int
}
