package reconcile

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/provider"
)

// Checkpoint is the part of a partition's durable checkpoint the core reads;
// the store's checkpoint carries the same fields under the same names.
type Checkpoint struct {
	Scope     string
	Partition string
	// Cursor and Generation are the (C, G) the checkpoint holds.
	Cursor     []byte
	Generation uint64
	// Applied and HasApplied are the durable applied boundary.
	Applied    coord.Position
	HasApplied bool
	// Watermark is the durable complete-through watermark (zero: none).
	Watermark coord.Watermark
	// PromotedWitness is the attempt id whose successor is Cursor.
	PromotedWitness string
	// Parked, when not empty, is why the partition stopped advancing (an
	// unprovable divergence, a bad response). Nothing is promoted from a
	// parked checkpoint.
	Parked string
	// Complete: the partition is complete (sealed, or its finite traversal
	// ended). Nothing is promoted from a complete checkpoint.
	Complete bool
}

// holds reports whether cp still holds the (scope, partition, cursor,
// generation) w was fetched from.
func (cp Checkpoint) holds(w Witness) bool {
	return cp.Scope == w.Scope && cp.Partition == w.Partition && cp.Generation == w.Generation &&
		bytes.Equal(cp.Cursor, w.InputCursor)
}

// Completion says whether a response has the completion evidence its
// successor needs, bound to that response alone.
type Completion struct {
	Complete bool
	// Reason names the evidence, or what is missing.
	Reason string
	// Watermark is what the response's own CompleteThrough may become under
	// the contract's finality (Contract.Final; zero: none). It is never
	// derived from event positions.
	Watermark coord.Watermark
	// Basis is the finality Watermark rests on (Contract.Basis).
	Basis Basis
	// NotFinal, when not empty, says why the response's CompleteThrough
	// does not become a durable watermark.
	NotFinal string
	// Applied is the greatest event position (the last event's, positions
	// being ordered); HasApplied is false for an empty response.
	Applied    coord.Position
	HasApplied bool
	// FollowOnly: an empty response complete only because the contract
	// says its successor continues the traversal (provider.EmptyFollowsSuccessor).
	// It proves no completeness: Watermark is zero and the response never
	// says the partition is caught up.
	FollowOnly bool
}

// CanPromote reports whether w carries completion evidence for its own
// successor. A response with events is complete when every event has a
// durable terminal outcome (AckedThrough >= len(Events)). An empty response
// is complete only with evidence bound to it: a CompleteThrough under
// provider.EmptyFinalThroughWatermark, a marker under SnapshotMarker, or the
// provider.EmptyEndOfData contract, or a successor other than its own cursor under
// provider.EmptyFollowsSuccessor (FollowOnly: promoted to move on, claiming nothing);
// otherwise its witness stays pending. A seal flag or the absence of events
// is never evidence.
func CanPromote(c Contract, w Witness) Completion {
	fin := FinalOf(c, w.CompleteThrough)
	comp := Completion{Watermark: fin.Watermark, Basis: fin.Basis, NotFinal: fin.Reason}
	if c.OffsetUnproven {
		// No completeness is claimed (Build records no watermark either).
		comp.Watermark, comp.Basis = coord.Watermark{}, Basis{}
	}
	if n := len(w.Events); n > 0 {
		comp.Applied, comp.HasApplied = top(w)
		if w.AckedThrough >= n {
			comp.Complete = true
			comp.Reason = fmt.Sprintf("all %d events have a durable terminal outcome", n)
		} else {
			comp.Reason = fmt.Sprintf("%d of %d events have a durable terminal outcome", max(w.AckedThrough, 0), n)
		}
		return comp
	}
	if ev := emptyEvidence(c, w); ev != "" {
		comp.Complete = true
		comp.Reason = "empty response with evidence bound to it: " + ev
		if followsOnly(c, w) {
			// Followed, not proven: a watermark on it is not written.
			comp.FollowOnly, comp.Watermark = true, coord.Watermark{}
			comp.Reason = "empty response followed to its successor: " + ev
		}
		return comp
	}
	comp.Reason = "empty response without evidence bound to it (coverage watermark, snapshot marker or empty-page contract): its witness stays pending"
	return comp
}

// Action is what DecidePromotion tells the caller to do with a witness. The
// zero value is invalid.
type Action uint8

const (
	// Promote: perform Decision.Promotion as one compare-and-swap.
	Promote Action = 1 + iota
	// Hold: leave the witness pending; decide again after more receipts (or
	// never, for an empty response without evidence).
	Hold
	// Refuse: this witness's successor may not be promoted from this
	// checkpoint, now or later.
	Refuse
)

var actionNames = [...]string{"", "promote", "hold", "refuse"}

func (a Action) String() string {
	if a >= Promote && a <= Refuse {
		return actionNames[a]
	}
	return fmt.Sprintf("action(%d)", uint8(a))
}

// Promotion is the one compare-and-swap that promotes a witness's successor.
// Its fields carry the store's names.
type Promotion struct {
	Scope     string
	Partition string
	// FromCursor and FromGeneration must still be the durable checkpoint.
	FromCursor     []byte
	FromGeneration uint64
	// To is the exact successor of witness WitnessID (empty only for a sealed
	// partition's last response).
	To        []byte
	WitnessID string
	// Watermark is the response's CompleteThrough, as the contract's
	// finality makes it final (Contract.Final), when it does not lower the
	// durable one; zero keeps the stored watermark.
	Watermark coord.Watermark
	// Finality, with a Watermark, is the finality it rests on
	// (Contract.Basis: source, an append-only writer assertion, a lag).
	Finality Basis
	// Applied, when HasApplied, is the new durable applied boundary: the
	// greatest of the response's last position and the current boundary.
	Applied    coord.Position
	HasApplied bool
	// Sealed: the provider says the partition ends with this response.
	Sealed bool
	// Complete: the promotion completes the partition (Sealed, or a last
	// page without a successor under provider.MissingSuccessorEndsTraversal); the
	// store keeps the mark with the checkpoint.
	Complete bool
}

// Decision is DecidePromotion's answer.
type Decision struct {
	Action Action
	Reason string
	// Promotion is set when Action is Promote.
	Promotion Promotion
}

// PromotionInput is a candidate witness, its verdict, and the durable state
// of (C, G).
type PromotionInput struct {
	Contract   Contract
	Checkpoint Checkpoint
	// Witness is the candidate with its current AckedThrough and
	// Disposition (for an exact replay, the resumed witness).
	Witness Witness
	// Verdict is Classify's verdict for Witness.
	Verdict Verdict
	// Witnesses is every witness recorded for (C, G) now; those the verdict
	// was not reconciled with count as later fetches.
	Witnesses []Witness
}

// DecidePromotion decides whether the successor of in.Witness may be
// promoted now. It refuses a verdict bound to another response, a verdict
// that does not advance, an abandoned or promoted witness, a parked
// checkpoint, a checkpoint that
// no longer holds the witness's (C, G) (a losing retry never publishes its
// candidate), and a response that omits, inside its range, an event a later
// fetch of (C, G) showed. It holds while the response lacks completion
// evidence (CanPromote), when the response returned no successor, and when
// promoting would change nothing. Otherwise it returns the Promotion: from
// (C, G) to the witness's own successor, with the witness's own
// complete-through watermark as the contract's finality makes it final
// (Contract.Final: none under provider.FinalityNone) and applied boundary.
func DecidePromotion(in PromotionInput) Decision {
	c, cp, w, v := in.Contract, in.Checkpoint, in.Witness, in.Verdict
	refuse := func(format string, a ...any) Decision {
		return Decision{Action: Refuse, Reason: fmt.Sprintf(format, a...)}
	}
	hold := func(format string, a ...any) Decision {
		return Decision{Action: Hold, Reason: fmt.Sprintf(format, a...)}
	}
	switch {
	case v.Class == 0:
		return refuse("attempt %s has no verdict: classify it first", w.AttemptID)
	case v.Attempt != w.AttemptID:
		return refuse("the verdict binds attempt %s, not %s: a successor advances only with completion evidence for the exact response that issued it",
			v.Attempt, w.AttemptID)
	case !v.Advances():
		return refuse("%s", v)
	case w.Disposition == Abandoned || w.Disposition == Promoted:
		return refuse("attempt %s is %s", w.AttemptID, w.Disposition)
	case cp.Parked != "":
		return refuse("partition %s is parked: %s", cp.Partition, cp.Parked)
	case cp.Complete:
		return refuse("partition %s is complete: nothing follows its last page", cp.Partition)
	case !cp.holds(w):
		return refuse("partition %s: the checkpoint holds generation %d, cursor %s, not the generation %d, cursor %s attempt %s was fetched from: a losing retry never publishes its candidate successor",
			w.Partition, cp.Generation, CursorHash(cp.Cursor), w.Generation, CursorHash(w.InputCursor), w.AttemptID)
	}
	b := boundary{applied: cp.Applied, has: cp.HasApplied}
	var later []Witness
	for _, o := range in.Witnesses {
		if o.AttemptID != w.AttemptID && sameRequest(o, w) && !slices.Contains(v.Against, o.AttemptID) {
			later = append(later, o)
		}
	}
	if a, e, ok := omitted(b, w, later); ok {
		return refuse("partition %s: a later fetch (attempt %s) shows position %s (%s) inside the range %s of attempt %s, which omits it: promoting its successor would skip it",
			w.Partition, a, e.Position, idLabel("", e.IDHash), b.rangeOf(w), w.AttemptID)
	}
	comp := CanPromote(c, w)
	if !comp.Complete {
		return hold("attempt %s: %s", w.AttemptID, comp.Reason)
	}
	ends := len(w.Successor) == 0 && c.MissingSuccessor == provider.MissingSuccessorEndsTraversal
	if len(w.Successor) == 0 && !w.Sealed && !ends {
		return hold("attempt %s returned no successor: under missing_successor poll the same cursor is fetched again later (its receipts keep its events from being emitted again)", w.AttemptID)
	}
	p := Promotion{
		Scope: w.Scope, Partition: w.Partition,
		FromCursor: clone(cp.Cursor), FromGeneration: cp.Generation,
		To: clone(w.Successor), WitnessID: w.AttemptID,
		Sealed: w.Sealed, Complete: w.Sealed || ends,
	}
	if len(w.Successor) == 0 {
		// The partition ends here: the checkpoint keeps the page's own
		// cursor (an empty cursor would read as "never started").
		p.To = clone(cp.Cursor)
	}
	reason := fmt.Sprintf("attempt %s: %s", w.AttemptID, comp.Reason)
	if p.Complete {
		reason += "; the partition is complete"
	}
	rises := false
	if comp.NotFinal != "" {
		reason += "; its " + comp.NotFinal
	}
	if wm := comp.Watermark; !wm.IsZero() {
		cmp, err := wm.Compare(cp.Watermark)
		switch {
		case cp.Watermark.IsZero() || (err == nil && cmp >= 0):
			p.Watermark, p.Finality, rises = wm, comp.Basis, cp.Watermark.IsZero() || cmp > 0
		default:
			reason += fmt.Sprintf("; its watermark %s does not rise above the durable %s and is not written", wm, cp.Watermark)
		}
	}
	if comp.HasApplied {
		p.Applied, p.HasApplied = comp.Applied, true
		if cp.HasApplied {
			p.Applied = coord.MaxPosition(p.Applied, cp.Applied)
		}
	}
	if len(w.Events) == 0 && bytes.Equal(w.Successor, cp.Cursor) && !rises && !p.Complete {
		return hold("attempt %s: nothing to advance: no events, its successor is the checkpoint's cursor and no watermark rises", w.AttemptID)
	}
	return Decision{Action: Promote, Reason: reason, Promotion: p}
}

// Abandon returns, in input order, the attempt ids of the pending witnesses
// in ws that the observed winning checkpoint has left behind: every pending
// witness of the same scope and partition fetched at an older generation,
// except the one the winner promoted (winner.PromotedWitness at generation
// winner.Generation-1, which the caller marks Promoted). While the
// checkpoint still holds a witness's generation, nothing is abandoned.
func Abandon(winner Checkpoint, ws []Witness) []string {
	var out []string
	for _, w := range ws {
		switch {
		case w.Disposition != Pending,
			w.Scope != winner.Scope || w.Partition != winner.Partition,
			winner.Generation <= w.Generation,
			winner.PromotedWitness == w.AttemptID && winner.Generation == w.Generation+1:
			continue
		}
		out = append(out, w.AttemptID)
	}
	return out
}
