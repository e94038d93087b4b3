package reconcile

import (
	"errors"
	"fmt"

	"github.com/tidemark/tidemark/internal/coord"
)

var (
	// ErrBadResponse is the sentinel every error about a response that cannot
	// be reconciled unwraps to: *MissingError, *DuplicateIDError,
	// *OrderError, *HasMoreError, *MovedError and *ReceiptConflictError. Build and Classify
	// return them. The caller must not emit the response's events nor promote
	// its successor; it parks the partition with the error's text as reason.
	ErrBadResponse = errors.New("witness: response cannot be reconciled")

	// ErrMissing: an event has no stable id or no source position
	// (*MissingError, from Build).
	ErrMissing = errors.New("witness: event without id or position")
	// ErrDuplicateID: one response carries the same event id twice
	// (*DuplicateIDError, from Build and Classify).
	ErrDuplicateID = errors.New("witness: duplicate event id in one response")
	// ErrOutOfOrder: the contract declares ordered positions and a response's
	// positions do not strictly increase (*OrderError, from Build and
	// Classify).
	ErrOutOfOrder = errors.New("witness: positions out of order")
	// ErrMoved: an event id appears at one position in the new response and
	// at another in a prior witness or receipt for the same (cursor,
	// generation) (*MovedError, from Classify).
	ErrMoved = errors.New("witness: same event id at two positions")
	// ErrReceiptConflict: the new response shows, at the position of a
	// durable receipt, another identity or another payload digest
	// (*ReceiptConflictError, from Classify).
	ErrReceiptConflict = errors.New("witness: response conflicts with a durable receipt")
	// ErrHasMoreContradicted: a response says more pages follow (has_more
	// true) but gives no successor to fetch them with, or says so on a page
	// that seals the partition (*HasMoreError, from Build).
	ErrHasMoreContradicted = errors.New("witness: has_more true on a response that ends the partition")

	// ErrLoop is returned by Build (as *LoopError) for a response with no
	// events and no evidence bound to it whose successor equals its input
	// cursor: nothing can be recorded or promoted. It does not unwrap to
	// ErrBadResponse: for a polling provider at the end of its stream it is
	// the normal idle state. The caller stores nothing, backs off and fetches
	// the same cursor again; if it persists, the provider may be stuck.
	ErrLoop = errors.New("witness: empty response loops to its own input cursor")

	// ErrInvalid reports a caller mistake, never provider input: an empty
	// partition or attempt id, a contract with an unknown EmptyPage or
	// Recovery, prior witnesses of another (scope, partition, cursor,
	// generation) given to Classify, or an event-witness blob DecodeEvents
	// cannot read.
	ErrInvalid = errors.New("witness: invalid argument")
)

func idLabel(id string, h uint64) string {
	if id != "" {
		return fmt.Sprintf("%q", id)
	}
	return fmt.Sprintf("id#%016x", h)
}

// MissingError reports an event without a stable id or a position. It
// unwraps to ErrBadResponse and ErrMissing.
type MissingError struct {
	Partition string
	// Index is the event's index in the response.
	Index int
	// Field is "id" or "position".
	Field string
	// Position is the event's position when Field is "id".
	Position coord.Position
	// ID is the event's id when Field is "position".
	ID string
}

func (e *MissingError) Error() string {
	if e.Field == "position" {
		return fmt.Sprintf("witness: partition %s: event %d (id %q) has no position", e.Partition, e.Index, e.ID)
	}
	return fmt.Sprintf("witness: partition %s: event %d at position %s has no id", e.Partition, e.Index, e.Position)
}

// Unwrap makes errors.Is hold for ErrBadResponse and ErrMissing.
func (e *MissingError) Unwrap() []error { return []error{ErrBadResponse, ErrMissing} }

// DuplicateIDError reports one id twice in one response. It unwraps to
// ErrBadResponse and ErrDuplicateID.
type DuplicateIDError struct {
	Partition string
	// ID is the duplicated id; empty when only its hash is known (a stored
	// witness checked by Classify).
	ID     string
	IDHash uint64
	// Positions are the two positions it was seen at, in response order.
	Positions [2]coord.Position
}

func (e *DuplicateIDError) Error() string {
	return fmt.Sprintf("witness: partition %s: duplicate id %s at positions %s and %s in one response",
		e.Partition, idLabel(e.ID, e.IDHash), e.Positions[0], e.Positions[1])
}

// Unwrap makes errors.Is hold for ErrBadResponse and ErrDuplicateID.
func (e *DuplicateIDError) Unwrap() []error { return []error{ErrBadResponse, ErrDuplicateID} }

// KindError reports an event position whose kind is not the contract's
// position kind. It unwraps to ErrBadResponse.
type KindError struct {
	Partition string
	// Index is the index of the offending event in the response.
	Index    int
	Position coord.Position
	Want     coord.Kind
}

func (e *KindError) Error() string {
	return fmt.Sprintf("witness: partition %s: event %d has a %s position %s, but the contract declares %s positions",
		e.Partition, e.Index, e.Position.Kind, e.Position, e.Want)
}

// Unwrap makes errors.Is hold for ErrBadResponse.
func (e *KindError) Unwrap() error { return ErrBadResponse }

// OrderError reports positions that do not strictly increase within a
// response of a provider whose contract declares ordered positions. It
// unwraps to ErrBadResponse and ErrOutOfOrder.
type OrderError struct {
	Partition string
	// Index is the index of the offending event in the response.
	Index int
	// Previous is the position of event Index-1, Position that of Index.
	Previous, Position coord.Position
}

func (e *OrderError) Error() string {
	return fmt.Sprintf("witness: partition %s: position %s (event %d) does not follow position %s",
		e.Partition, e.Position, e.Index, e.Previous)
}

// Unwrap makes errors.Is hold for ErrBadResponse and ErrOutOfOrder.
func (e *OrderError) Unwrap() []error { return []error{ErrBadResponse, ErrOutOfOrder} }

// MovedError reports the same event id at two positions: in the new response
// and in a prior witness (or receipt) of the same (cursor, generation).
// Positions are immutable, so one of the two is wrong. It unwraps to
// ErrBadResponse and ErrMoved.
type MovedError struct {
	Partition string
	IDHash    uint64
	// Position is where the new response has it; PriorPosition where attempt
	// PriorAttempt (or a receipt, PriorAttempt "receipt") had it.
	Position, PriorPosition coord.Position
	PriorAttempt            string
}

func (e *MovedError) Error() string {
	return fmt.Sprintf("witness: partition %s: id %s at position %s, but attempt %s had it at position %s",
		e.Partition, idLabel("", e.IDHash), e.Position, e.PriorAttempt, e.PriorPosition)
}

// Unwrap makes errors.Is hold for ErrBadResponse and ErrMoved.
func (e *MovedError) Unwrap() []error { return []error{ErrBadResponse, ErrMoved} }

// ReceiptConflictError reports a different identity or payload digest at the
// immutable position of a durable receipt. It unwraps to ErrBadResponse and
// ErrReceiptConflict.
type ReceiptConflictError struct {
	Partition string
	Position  coord.Position
	// Attempt is the witness whose receipt conflicts ("receipt" for one
	// given in ClassifyInput.Receipts).
	Attempt string
	// Receipt is the durable event witness, Got the new response's.
	Receipt, Got EventWitness
}

func (e *ReceiptConflictError) Error() string {
	what := "payload digest"
	if e.Receipt.IDHash != e.Got.IDHash {
		what = "identity"
	}
	return fmt.Sprintf("witness: partition %s: position %s has another %s than its durable receipt from attempt %s (%s/%016x, got %s/%016x)",
		e.Partition, e.Position, what, e.Attempt,
		idLabel("", e.Receipt.IDHash), e.Receipt.Digest, idLabel("", e.Got.IDHash), e.Got.Digest)
}

// Unwrap makes errors.Is hold for ErrBadResponse and ErrReceiptConflict.
func (e *ReceiptConflictError) Unwrap() []error { return []error{ErrBadResponse, ErrReceiptConflict} }

// HasMoreError reports a response whose has_more is true although it ends
// the partition: it has no successor (a page without one would be held at
// the head, or complete the partition under missing_successor:
// end_of_traversal), or it is sealed. The source says more pages follow
// and gives no way to read them: the page is malformed, never the end. It
// unwraps to ErrBadResponse and ErrHasMoreContradicted.
type HasMoreError struct {
	Partition string
	// Sealed: the response has a successor but is sealed.
	Sealed bool
}

func (e *HasMoreError) Error() string {
	if e.Sealed {
		return fmt.Sprintf("witness: partition %s: has_more true on a sealed page (the source says more pages follow a partition it says has ended)", e.Partition)
	}
	return fmt.Sprintf("witness: partition %s: has_more true without a successor (the source says more pages follow and gives no cursor to fetch them)", e.Partition)
}

// Unwrap makes errors.Is hold for ErrBadResponse and ErrHasMoreContradicted.
func (e *HasMoreError) Unwrap() []error { return []error{ErrBadResponse, ErrHasMoreContradicted} }

// LoopError reports an empty response, without evidence bound to it, whose
// successor is its own input cursor. It unwraps to ErrLoop only.
type LoopError struct {
	Partition  string
	Generation uint64
	// Cursor is CursorHash of the input cursor (cursors are never logged).
	Cursor string
}

func (e *LoopError) Error() string {
	return fmt.Sprintf("witness: partition %s: generation %d: empty response without evidence returns its own input cursor %s",
		e.Partition, e.Generation, e.Cursor)
}

// Unwrap makes errors.Is(err, ErrLoop) hold.
func (e *LoopError) Unwrap() error { return ErrLoop }
