package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/tidemark/tidemark/internal/coord"
)

// RereadState is the durable state of a partition's re-read window
// (docs/design.md#re-read-windows). A pass re-reads the range above From
// (exclusive; HasFrom false: from the partition's start) up to the
// applied boundary Mark it started at. The next pass starts at Mark minus
// the window: every event at or below that was either read by the chain
// when it passed, or became visible before Mark did and lies in the
// range of the pass it then belonged to. The zero value: no pass yet.
type RereadState struct {
	From    coord.Position
	HasFrom bool
	// Mark is the applied boundary when the current pass started; zero
	// (Kind none) when no pass has started.
	Mark coord.Position
}

// Started reports whether a re-read pass has started.
func (r RereadState) Started() bool { return !r.Mark.IsZero() }

// Receipt is the durable record that one event reached a terminal
// outcome, kept while its position lies in a partition's re-read window:
// the event's id hash, its position and its payload digest
// (reconcile.EventWitness), 24 bytes.
type Receipt struct {
	IDHash   uint64
	Position coord.Position
	Digest   uint64
}

// ReceiptChunk is the receipts of one delivered page, written as one
// record: the page's witness (Generation, Attempt) names it, so writing
// it again is a no-op. Receipts' positions are integer or timestamp
// positions (the kinds with arithmetic a window subtracts from).
type ReceiptChunk struct {
	Key
	Generation uint64
	Attempt    string
	Receipts   []Receipt
}

// MaxReceiptsPerChunk bounds a chunk: 24 bytes a receipt keeps the record
// under MaxRecordBytes whatever the page size the witness allowed.
const MaxReceiptsPerChunk = 16_000

// Top is the greatest position of the chunk (the zero Position when it
// has none).
func (c ReceiptChunk) Top() coord.Position {
	var top coord.Position
	for i, r := range c.Receipts {
		if i == 0 {
			top = r.Position
			continue
		}
		top = coord.MaxPosition(top, r.Position)
	}
	return top
}

// Validate rejects a chunk that cannot be stored: no receipts, too many,
// a position that is neither integer nor timestamp or of mixed kinds.
func (c ReceiptChunk) Validate() error {
	if err := c.Key.Validate(); err != nil {
		return err
	}
	if err := CheckName("receipt chunk attempt", c.Attempt); err != nil {
		return err
	}
	if len(c.Receipts) == 0 || len(c.Receipts) > MaxReceiptsPerChunk {
		return fmt.Errorf("%w: a receipt chunk of %d receipts (1 to %d)", ErrInvalid, len(c.Receipts), MaxReceiptsPerChunk)
	}
	k := c.Receipts[0].Position.Kind
	if k != coord.KindInteger && k != coord.KindTimestamp {
		return fmt.Errorf("%w: receipt positions of kind %s (integer or timestamp)", ErrInvalid, k)
	}
	for _, r := range c.Receipts {
		if r.Position.Kind != k {
			return fmt.Errorf("%w: receipt positions of kinds %s and %s in one chunk", ErrInvalid, k, r.Position.Kind)
		}
	}
	return nil
}

// ReceiptStore holds the receipts of a partition's re-read window: one
// record per delivered page, found by the greatest position it holds, and
// deleted once the window has moved past it.
type ReceiptStore interface {
	// PutReceipts stores a chunk; storing the same (key, generation,
	// attempt) again is a no-op.
	PutReceipts(ctx context.Context, c ReceiptChunk) error
	// Receipts returns the receipts of k whose chunk's greatest position
	// is above from (every chunk when hasFrom is false), each receipt
	// above from: what a pass re-reading the range above from checks
	// events against.
	Receipts(ctx context.Context, k Key, from coord.Position, hasFrom bool) ([]Receipt, error)
	// PruneReceipts deletes the chunks of k whose greatest position is at
	// or below through (nothing a later pass reads can match them) and
	// returns how many it deleted.
	PruneReceipts(ctx context.Context, k Key, through coord.Position) (int, error)
}

// ReceiptAbove reports whether r lies in a range above from.
func ReceiptAbove(r Receipt, from coord.Position, hasFrom bool) bool {
	return !hasFrom || (r.Position.Kind == from.Kind && from.Less(r.Position))
}

// SortReceipts orders receipts by position, then id hash, then digest.
func SortReceipts(rs []Receipt) {
	slices.SortFunc(rs, func(a, b Receipt) int {
		if c := a.Position.Compare(b.Position); c != 0 {
			return c
		}
		if c := cmp.Compare(a.IDHash, b.IDHash); c != 0 {
			return c
		}
		return cmp.Compare(a.Digest, b.Digest)
	})
}
