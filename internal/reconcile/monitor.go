package reconcile

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

	"github.com/tidemark/tidemark/internal/coord"
)

// ViolationKind names an observation that contradicts the declared
// contract (docs/design.md#contract-monitors). The zero value is invalid.
type ViolationKind uint8

const (
	// TokensRotated: a retry returned the same events with another
	// successor though the contract declares tokens stable
	// (tokens_may_rotate: false).
	TokensRotated ViolationKind = 1 + iota
	// SnapshotUnstable: two responses carried the same snapshot marker with
	// different events though the contract declares markers stable
	// (snapshot_marker: true).
	SnapshotUnstable
	// LatePosition: an event arrived at a position at or below the durable
	// complete-through watermark (positions in its coordinate), above the
	// durable applied boundary and not delivered before: the watermark
	// claimed it was final. Breaks a claim already published.
	LatePosition
	// WatermarkRegressed: a response with new events (or none) certifies a
	// complete-through watermark below the durable one. Breaks a claim
	// already published.
	WatermarkRegressed
	// PositionsBackwards: positions of one response do not increase though
	// the contract declares them ordered (an *OrderError; the response is
	// malformed).
	PositionsBackwards
	// SelfCertified: the complete-through watermark equalled the page's
	// last position on SelfCertifiedPages pages with events in a row: it
	// may be computed from the page's own events, which proves nothing.
	SelfCertified
	// OffsetShapedSuccessor: a successor differs from its request only by
	// a growing offset or page number (OffsetShaped) though the contract
	// does not declare pagination: offset. The page is refused: it was
	// read by an offset nothing checks.
	OffsetShapedSuccessor
)

// SelfCertifiedPages is how many pages with events in a row whose
// watermark equals their last position make a SelfCertified observation.
const SelfCertifiedPages = 8

var violationNames = [...]string{"", "tokens_rotated", "snapshot_unstable", "late_position", "watermark_regressed", "positions_backwards", "self_certified_watermark", "offset_shaped_successor"}

func (k ViolationKind) String() string {
	if k >= TokensRotated && k <= OffsetShapedSuccessor {
		return violationNames[k]
	}
	return fmt.Sprintf("violation(%d)", uint8(k))
}

// BreaksClaim reports whether an observation of kind k contradicts a claim
// the partition may already have published: its durable complete-through
// watermark. The scalar frontier must then be withdrawn.
func (k ViolationKind) BreaksClaim() bool { return k == LatePosition || k == WatermarkRegressed }

// Violation is one observation that contradicts the contract.
type Violation struct {
	Kind      ViolationKind
	Partition string
	// Evidence says what was seen, with positions and watermarks; cursors
	// and markers only as CursorHash.
	Evidence string
}

func (v Violation) String() string {
	return fmt.Sprintf("contract violation %s: partition %s: %s", v.Kind, v.Partition, v.Evidence)
}

// MonitorInput is one classified response and what is durable about its
// partition.
type MonitorInput struct {
	Contract Contract
	// Durable is the checkpoint's complete-through watermark once the
	// response's generation is durable (zero: none): what the pages before
	// it certified, published before it can be.
	Durable coord.Watermark
	// Applied and HasApplied are the applied boundary the response was
	// classified against (ClassifyInput).
	Applied    coord.Position
	HasApplied bool
	// Replay is set when the response may legitimately re-read a range
	// already certified: the checkpoint holds a restart or repair cursor.
	// An empty response with a lower watermark is then no regression.
	// (A response whose events all lie at or below the applied boundary is
	// a replay in any case; an event above it is new whatever the cursor.)
	Replay bool
	// Prior, Receipts and Pending are the classification's (ClassifyInput):
	// an event that matches one of them was delivered (or is being
	// delivered) before.
	Prior    []Witness
	Receipts []EventWitness
	Pending  []EventWitness
	// Witness is the new response's witness.
	Witness Witness
}

// Monitor returns the contract violations a response shows, at most one
// per kind, in kind order: tokens that rotate though declared stable, a
// snapshot marker repeated with other events, an event at or below the
// durable watermark that was not delivered before, a watermark below the
// durable one, a successor shaped like an offset or page number under a
// contract that does not declare offset pagination. It reads values only;
// the caller counts, logs and acts.
func Monitor(in MonitorInput) []Violation {
	c, w := in.Contract, in.Witness
	var out []Violation
	add := func(k ViolationKind, format string, a ...any) {
		out = append(out, Violation{Kind: k, Partition: w.Partition, Evidence: fmt.Sprintf(format, a...)})
	}
	if !c.TokensMayRotate {
		for _, p := range in.Prior {
			if slices.Equal(p.Events, w.Events) && !bytes.Equal(p.Successor, w.Successor) {
				add(TokensRotated, "generation %d cursor %s: attempts %s and %s returned the same %d events with successors %s and %s, and the contract declares tokens_may_rotate: false",
					w.Generation, CursorHash(w.InputCursor), p.AttemptID, w.AttemptID, len(w.Events), CursorHash(p.Successor), CursorHash(w.Successor))
				break
			}
		}
	}
	if c.SnapshotMarker && len(w.Marker) > 0 {
		for _, p := range in.Prior {
			if bytes.Equal(p.Marker, w.Marker) && !slices.Equal(p.Events, w.Events) {
				add(SnapshotUnstable, "generation %d cursor %s: attempts %s and %s carried snapshot marker %s with %d and %d different events, and the contract declares snapshot_marker: true",
					w.Generation, CursorHash(w.InputCursor), p.AttemptID, w.AttemptID, CursorHash(w.Marker), len(p.Events), len(w.Events))
				break
			}
		}
	}
	if d := in.Durable; !d.IsZero() {
		if e, ok := late(in); ok {
			add(LatePosition, "generation %d cursor %s: attempt %s has an event at position %s (%s), at or below the durable complete-through watermark %s and above the applied boundary %s, never delivered before",
				w.Generation, CursorHash(w.InputCursor), w.AttemptID, e.Position, idLabel("", e.IDHash), d, boundary{in.Applied, in.HasApplied})
		}
		if ct := w.CompleteThrough; !ct.IsZero() && ct.Kind == d.Kind && ct.Less(d) && fresh(in) {
			add(WatermarkRegressed, "generation %d cursor %s: attempt %s certifies complete through %s, below the durable complete-through watermark %s",
				w.Generation, CursorHash(w.InputCursor), w.AttemptID, ct, d)
		}
	}
	if v, ok := offsetShapedSuccessor(c, w); ok {
		out = append(out, v)
	}
	return out
}

// late returns the first event of in.Witness at or below the durable
// watermark (positions in its coordinate) and above the applied boundary
// that matches no known receipt, prior event or pending event.
func late(in MonitorInput) (EventWitness, bool) {
	if !in.Contract.WatermarkCoversPositions {
		return EventWitness{}, false
	}
	d := coord.Position(in.Durable)
	known := map[EventWitness]bool{}
	for _, e := range in.Receipts {
		known[e] = true
	}
	for _, e := range in.Pending {
		known[e] = true
	}
	for _, p := range in.Prior {
		for _, e := range p.Events {
			known[e] = true
		}
	}
	for _, e := range in.Witness.Events {
		if e.Position.Kind != d.Kind || e.Position.Compare(d) > 0 || known[e] {
			continue
		}
		if in.HasApplied && e.Position.Compare(in.Applied) <= 0 {
			continue
		}
		return e, true
	}
	return EventWitness{}, false
}

// fresh reports whether in.Witness is not merely a replay of delivered
// positions: it has an event above the applied boundary, or it is empty
// and not read from a restart cursor.
func fresh(in MonitorInput) bool {
	if len(in.Witness.Events) == 0 {
		return !in.Replay
	}
	if !in.HasApplied {
		return true
	}
	for _, e := range in.Witness.Events {
		if e.Position.Compare(in.Applied) > 0 {
			return true
		}
	}
	return false
}

// BuildViolation returns the violation an error of Build shows: positions
// going backwards under an ordered contract (*OrderError).
func BuildViolation(err error) (Violation, bool) {
	var oe *OrderError
	if !errors.As(err, &oe) {
		return Violation{}, false
	}
	return Violation{Kind: PositionsBackwards, Partition: oe.Partition,
		Evidence: fmt.Sprintf("position %s (event %d) follows position %s in one response, and the contract declares ordered positions", oe.Position, oe.Index, oe.Previous)}, true
}

// SelfCertifyRun counts pages with events in a row whose complete-through
// watermark equals their last position. A value type: Observe returns the
// next run.
type SelfCertifyRun struct {
	// N is the length of the current run.
	N int
}

// Observe adds w to the run and returns the next run and, when the run
// reaches exactly SelfCertifiedPages, the SelfCertified violation. Pages
// without events leave the run unchanged; a page with events whose
// watermark is absent or differs from its last position ends it.
func (r SelfCertifyRun) Observe(w Witness) (SelfCertifyRun, Violation, bool) {
	n := len(w.Events)
	if n == 0 {
		return r, Violation{}, false
	}
	last := w.Events[n-1].Position
	if ct := w.CompleteThrough; ct.IsZero() || ct.Kind != last.Kind || coord.Position(ct).Compare(last) != 0 {
		return SelfCertifyRun{}, Violation{}, false
	}
	r.N++
	if r.N != SelfCertifiedPages {
		return r, Violation{}, false
	}
	return r, Violation{Kind: SelfCertified, Partition: w.Partition,
		Evidence: fmt.Sprintf("the complete-through watermark equalled the page's last position on %d pages with events in a row (the last at generation %d: %s); a watermark computed from the page's own events proves nothing unless the source certifies it",
			SelfCertifiedPages, w.Generation, last)}, true
}
