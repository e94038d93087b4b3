package reconcile

import (
	"fmt"

	"github.com/tidemark/tidemark/provider"
)

// ContinuityInput is one response to a request of an offset-paged
// partition and what is known of the page it must continue.
type ContinuityInput struct {
	Contract Contract
	// Boundary: the request's cursor is a stable boundary (the partition's
	// start, a restart or repair cursor), not the successor of a page. The
	// response begins a traversal and continues nothing.
	Boundary bool
	// Previous is the last event of the page whose successor the request's
	// cursor is. HasPrevious false: unknown (its witness is gone and the
	// checkpoint names no applied id) or that page had no events.
	Previous    EventWitness
	HasPrevious bool
	// PreviousIDOnly: only the identity and position of Previous are known
	// (from the checkpoint's applied boundary and applied id), not its
	// digest.
	PreviousIDOnly bool
	// Witness is the response's witness.
	Witness Witness
}

// Continuity is the verdict of CheckContinuity.
type Continuity struct {
	// Continues: the response may be classified and delivered. false: it
	// cannot be shown to continue the previous page; treat it as unprovable
	// divergence (recover as Contract.Recovery says, never skip on).
	Continues bool
	// Overlap counts the leading events of the response that repeat the
	// previous page (1 under a matched overlap check, else 0). They match a
	// receipt (or a page about to be promoted) and are not new.
	Overlap int
	// Unproven: the contract declares that nothing proves continuity
	// (OffsetUnproven). The caller says so in its log, and the partition
	// never claims completeness.
	Unproven bool
	// Reason says which rule decided, with identities and positions.
	Reason string
}

// CheckContinuity decides whether a response of an offset-paged partition
// continues exactly after the page before it (docs/pagination.md,
// docs/design.md#offset-pagination). Values in, verdict out; a reason on
// every branch:
//
//   - not offset pagination: continues (the source names the next page);
//   - under OffsetOverlap, a response to a boundary cursor begins a
//     traversal and continues; any other response must begin with the
//     previous page's last event (identity, position and, when known,
//     digest), or the page shifted (an earlier event was deleted or
//     inserted) and it does not continue; an unknown previous page or an
//     empty response proves nothing and does not continue either;
//   - under dense positions: continues here, because coverage rule (b) of
//     Classify requires the page to start right after the applied
//     boundary;
//   - under OffsetUnproven: continues, Unproven, with the reason to log.
func CheckContinuity(in ContinuityInput) Continuity {
	c, w := in.Contract, in.Witness
	if c.Pagination != provider.PaginationOffset {
		return Continuity{Continues: true, Reason: fmt.Sprintf("%s pagination: the source names the next page, no offset can shift", c.Pagination)}
	}
	switch {
	case c.OffsetOverlap:
		return overlapContinuity(in)
	case c.DensePositions:
		return Continuity{Continues: true, Reason: "offset pagination over dense positions: coverage rule (b) requires the page to start right after the durable applied boundary"}
	case c.OffsetUnproven:
		return Continuity{Continues: true, Unproven: true, Reason: fmt.Sprintf("partition %s pages by offset over positions that are not dense, without an overlap check (offset_unproven): "+
			"an event that slides onto a page already read when an earlier one is deleted is skipped and nothing detects it, so the partition claims no completeness", w.Partition)}
	}
	return Continuity{Reason: fmt.Sprintf("partition %s: offset pagination without dense positions, an overlap check or offset_unproven: an invalid contract", w.Partition)}
}

func overlapContinuity(in ContinuityInput) Continuity {
	w, p := in.Witness, in.Previous
	if in.Boundary {
		return Continuity{Continues: true, Reason: "the first page of a traversal (a start or restart boundary): nothing to continue"}
	}
	if !in.HasPrevious {
		return Continuity{Reason: fmt.Sprintf("offset overlap check: partition %s: the last event of the page before cursor %s is unknown (no witness of it, no applied id), so nothing proves this page continues it",
			w.Partition, CursorHash(w.InputCursor))}
	}
	want := fmt.Sprintf("the previous page's last event (%s at position %s)", idLabel("", p.IDHash), p.Position)
	if len(w.Events) == 0 {
		return Continuity{Reason: fmt.Sprintf("offset overlap check: partition %s: the page is empty, but it must begin with %s: that event was deleted or moved, and an event may have slid onto a page already read",
			w.Partition, want)}
	}
	f := w.Events[0]
	same := f.IDHash == p.IDHash && f.Position == p.Position && (in.PreviousIDOnly || f.Digest == p.Digest)
	if !same {
		return Continuity{Reason: fmt.Sprintf("offset overlap check: partition %s: the page shifted: it begins with %s at position %s instead of %s; an event on an earlier page was deleted, inserted or changed, and an event may have slid onto a page already read",
			w.Partition, idLabel("", f.IDHash), f.Position, want)}
	}
	return Continuity{Continues: true, Overlap: 1, Reason: fmt.Sprintf("offset overlap check: the page begins with %s, so it continues right after it", want)}
}
