package reconcile

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/provider"
)

// HashID is the stored identity of an event: the first 8 bytes of the
// SHA-256 of its stable id, big-endian. See the package doc for the collision
// bound.
func HashID(id string) uint64 {
	s := sha256.Sum256([]byte(id))
	return binary.BigEndian.Uint64(s[:8])
}

// HashPayload is the stored payload digest: the first 8 bytes of the SHA-256
// of the bytes given, big-endian.
func HashPayload(b []byte) uint64 {
	s := sha256.Sum256(b)
	return binary.BigEndian.Uint64(s[:8])
}

// EventOf returns the event witness of e: HashID of its id, its position,
// and HashPayload of Semantic when not nil, else of Payload.
func EventOf(e Event) EventWitness {
	p := e.Payload
	if e.Semantic != nil {
		p = e.Semantic
	}
	return EventWitness{IDHash: HashID(e.ID), Position: e.Position, Digest: HashPayload(p)}
}

// HashCompact is the compact event witness's fingerprint of an event (the
// opt-in compact_witness encoding): the first 4 bytes of the SHA-256 of its
// id (length-prefixed) and the payload bytes given, big-endian, as a
// number below 2^32. It stands for both the id hash and the payload digest
// (EventOfCompact); see the package doc for its collision bound.
func HashCompact(id string, payload []byte) uint64 {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(id)))])
	h.Write([]byte(id))
	h.Write(payload)
	var s [sha256.Size]byte
	return uint64(binary.BigEndian.Uint32(h.Sum(s[:0])[:4]))
}

// EventOfCompact returns the compact event witness of e: IDHash and Digest
// both HashCompact of its id and of Semantic when not nil, else of
// Payload, and its exact position. A changed payload under the same id is
// therefore another identity at the same position (under ordered
// positions a receipt conflict, as a changed digest is; otherwise the
// earlier event is missing from the retry: divergence).
func EventOfCompact(e Event) EventWitness {
	p := e.Payload
	if e.Semantic != nil {
		p = e.Semantic
	}
	fp := HashCompact(e.ID, p)
	return EventWitness{IDHash: fp, Position: e.Position, Digest: fp}
}

// CursorHash names an opaque cursor in logs and errors without revealing it:
// "sha256:" and the first 8 bytes of its SHA-256 in hex ("none" for an empty
// cursor).
func CursorHash(cursor []byte) string {
	if len(cursor) == 0 {
		return "none"
	}
	s := sha256.Sum256(cursor)
	return "sha256:" + hex.EncodeToString(s[:8])
}

// BuildInput is one successful fetch and the checkpoint state it was made
// from.
type BuildInput struct {
	Scope     string
	Partition string
	// Generation and InputCursor are the checkpoint the fetch was made from.
	Generation  uint64
	InputCursor []byte
	// AttemptID is a fresh, caller-generated response-attempt id. Ids that
	// sort in fetch order make the store's "attempt order" the fetch order.
	AttemptID string
	Response  Response
	Contract  Contract
	// Compact builds the compact event witness (EventOfCompact, 4 bytes an
	// event when stored) instead of EventOf's 64-bit id hash and digest.
	// A page two of whose distinct ids share a fingerprint is built with
	// EventOf (a deterministic function of the page: a retry of the same
	// page gets the same form).
	Compact bool
}

// Build makes the response witness of one fetch: the ordered event witness
// (EventOf each event), copies of the input cursor, successor and marker
// (never aliases of the caller's memory), the complete-through watermark and
// seal flag, Disposition Pending and AckedThrough 0.
//
// It returns *MissingError, *DuplicateIDError, *OrderError (when the
// contract declares ordered positions), *HasMoreError (has_more true on a
// response without successor or sealed), *LoopError, or ErrInvalid for an
// empty partition or attempt id or an invalid contract; the witness is then
// the zero Witness.
func Build(in BuildInput) (Witness, error) {
	if in.Partition == "" || in.AttemptID == "" {
		return Witness{}, fmt.Errorf("%w: build needs a partition and an attempt id (got %q, %q)", ErrInvalid, in.Partition, in.AttemptID)
	}
	if err := in.Contract.Validate(); err != nil {
		return Witness{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	r := in.Response
	events := make([]EventWitness, 0, len(r.Events))
	seen := make(map[string]coord.Position, len(r.Events))
	for i, e := range r.Events {
		switch {
		case e.ID == "":
			return Witness{}, &MissingError{Partition: in.Partition, Index: i, Field: "id", Position: e.Position}
		case e.NoPosition:
			return Witness{}, &MissingError{Partition: in.Partition, Index: i, Field: "position", ID: e.ID}
		}
		if p, dup := seen[e.ID]; dup {
			return Witness{}, &DuplicateIDError{Partition: in.Partition, ID: e.ID, IDHash: HashID(e.ID), Positions: [2]coord.Position{p, e.Position}}
		}
		seen[e.ID] = e.Position
		if e.Position.Kind != PositionKind(in.Contract) {
			return Witness{}, &KindError{Partition: in.Partition, Index: i, Position: e.Position, Want: PositionKind(in.Contract)}
		}
		if in.Contract.Ordered() && i > 0 && e.Position.Compare(r.Events[i-1].Position) <= 0 {
			return Witness{}, &OrderError{Partition: in.Partition, Index: i, Previous: r.Events[i-1].Position, Position: e.Position}
		}
		if in.Compact {
			events = append(events, EventOfCompact(e))
		} else {
			events = append(events, EventOf(e))
		}
	}
	if in.Compact && !distinctHashes(events) {
		for i, e := range r.Events {
			events[i] = EventOf(e)
		}
	}
	if r.HasMore && (len(r.Successor) == 0 || r.Sealed) {
		// The source's own flag says more pages follow: a page that would
		// end the partition (no successor to fetch them with, or sealed)
		// contradicts it. It is malformed, never the end of the data.
		return Witness{}, &HasMoreError{Partition: in.Partition, Sealed: len(r.Successor) > 0}
	}
	w := Witness{
		Scope:           in.Scope,
		Partition:       in.Partition,
		Generation:      in.Generation,
		InputCursor:     clone(in.InputCursor),
		AttemptID:       in.AttemptID,
		Events:          events,
		Successor:       clone(r.Successor),
		Marker:          clone(r.Marker),
		CompleteThrough: r.CompleteThrough,
		Sealed:          r.Sealed,
		Disposition:     Pending,
	}
	if in.Contract.OffsetUnproven {
		// The contract claims no completeness: a watermark would be a claim.
		w.CompleteThrough = coord.Watermark{}
	}
	if len(events) == 0 && bytes.Equal(w.Successor, w.InputCursor) && emptyEvidence(in.Contract, w) == "" {
		return Witness{}, &LoopError{Partition: in.Partition, Generation: in.Generation, Cursor: CursorHash(in.InputCursor)}
	}
	return w, nil
}

// checkEvents re-checks a witness's event witness at the hash level (a
// stored witness, or one not made by Build): no id hash twice, and strictly
// increasing positions when the contract declares them ordered.
func checkEvents(c Contract, w Witness) error {
	seen := make(map[uint64]coord.Position, len(w.Events))
	for i, e := range w.Events {
		if p, dup := seen[e.IDHash]; dup {
			return &DuplicateIDError{Partition: w.Partition, IDHash: e.IDHash, Positions: [2]coord.Position{p, e.Position}}
		}
		seen[e.IDHash] = e.Position
		if c.Ordered() && i > 0 && e.Position.Compare(w.Events[i-1].Position) <= 0 {
			return &OrderError{Partition: w.Partition, Index: i, Previous: w.Events[i-1].Position, Position: e.Position}
		}
	}
	return nil
}

// emptyEvidence names the evidence, bound to w itself, that may let an empty
// response promote under contract c, or returns "" when there is none.
func emptyEvidence(c Contract, w Witness) string {
	switch {
	case c.EmptyPage == provider.EmptyFinalThroughWatermark && c.Certifies() && !w.CompleteThrough.IsZero():
		return "complete-through watermark " + w.CompleteThrough.String() + " (the contract makes empty pages final through it)"
	case c.SnapshotMarker && len(w.Marker) > 0:
		return "snapshot marker " + CursorHash(w.Marker)
	case c.EmptyPage == provider.EmptyEndOfData:
		return "the contract's empty-page semantics (end of data)"
	case followsOnly(c, w):
		return "the contract's empty-page semantics (follow the successor: the source continues the traversal after the range this page read; nothing is claimed)"
	}
	return ""
}

// followsOnly reports whether an empty response w may promote only because
// the contract says its successor continues the traversal
// (provider.EmptyFollowsSuccessor), with no other evidence: a successor other than
// its own cursor, or none on a sealed response (the source documents that a
// closed partition answers without successor: Kinesis "returns null in
// NextShardIterator"; the traversal ends there). Such a promotion claims
// nothing: no watermark, no applied boundary, not caught up.
func followsOnly(c Contract, w Witness) bool {
	if c.EmptyPage != provider.EmptyFollowsSuccessor || len(w.Events) > 0 || (c.SnapshotMarker && len(w.Marker) > 0) {
		return false
	}
	if len(w.Successor) == 0 {
		return w.Sealed
	}
	return !bytes.Equal(w.Successor, w.InputCursor)
}

// coveredThrough returns the greatest position w's own evidence proves
// covered (every required event at or below it was delivered), and whether
// it proves any: only a complete-through watermark in the positions'
// coordinate (Contract.WatermarkCoversPositions) that the source certifies
// (provider.FinalitySource) does. A watermark is never evidence for a position above
// its value.
func coveredThrough(c Contract, w Witness) (coord.Position, bool) {
	if !c.WatermarkCoversPositions || !c.Certifies() || w.CompleteThrough.IsZero() {
		return coord.Position{}, false
	}
	return coord.Position(w.CompleteThrough), true
}

// covers reports whether w's own evidence proves position pos covered: its
// watermark is of pos's kind and at or above it.
func covers(c Contract, w Witness, pos coord.Position) bool {
	ct, ok := coveredThrough(c, w)
	return ok && ct.Kind == pos.Kind && pos.Compare(ct) <= 0
}

// coversBefore reports whether w's own evidence proves every position
// before pos covered (pos-1 covered, under successor arithmetic).
func coversBefore(c Contract, w Witness, pos coord.Position) bool {
	p, ok := pos.Prev()
	return ok && covers(c, w, p)
}

func clone(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return append([]byte(nil), b...)
}

// Clone returns a deep copy of w.
func (w Witness) Clone() Witness {
	c := w
	c.InputCursor = clone(w.InputCursor)
	c.Successor = clone(w.Successor)
	c.Marker = clone(w.Marker)
	if w.Events != nil {
		c.Events = append([]EventWitness(nil), w.Events...)
	}
	return c
}

// String renders w for logs; cursors and markers appear only as CursorHash.
func (w Witness) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s/%s g%d attempt %s: ", w.Scope, w.Partition, w.Generation, w.AttemptID)
	switch n := len(w.Events); n {
	case 0:
		b.WriteString("no events")
	default:
		fmt.Fprintf(&b, "%d events %s..%s", n, w.Events[0].Position, w.Events[n-1].Position)
	}
	fmt.Fprintf(&b, ", successor %s, %s, acked %d", CursorHash(w.Successor), w.Disposition, w.AckedThrough)
	if len(w.Marker) > 0 {
		fmt.Fprintf(&b, ", marker %s", CursorHash(w.Marker))
	}
	if !w.CompleteThrough.IsZero() {
		fmt.Fprintf(&b, ", complete through %s", w.CompleteThrough)
	}
	if w.Sealed {
		b.WriteString(", sealed")
	}
	return b.String()
}

// sameRequest reports whether a and b were fetched with the same (scope,
// partition, input cursor, generation).
func sameRequest(a, b Witness) bool {
	return a.Scope == b.Scope && a.Partition == b.Partition && a.Generation == b.Generation &&
		bytes.Equal(a.InputCursor, b.InputCursor)
}

// distinctHashes reports whether no two events share an IDHash.
func distinctHashes(events []EventWitness) bool {
	seen := make(map[uint64]struct{}, len(events))
	for _, e := range events {
		if _, dup := seen[e.IDHash]; dup {
			return false
		}
		seen[e.IDHash] = struct{}{}
	}
	return true
}
