package reconcile

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/provider"
)

// RetryClass is how a response for (cursor C, generation G) relates to the
// earlier responses for (C, G) (docs/design.md#retry-classification). The
// zero value is invalid.
type RetryClass uint8

const (
	// FirstResponse: no earlier witness exists for (C, G).
	FirstResponse RetryClass = 1 + iota
	// ExactReplay: the ordered event witness and the successor are identical
	// to an earlier witness's (and the response carries no evidence that
	// witness lacks). Resume the existing witness.
	ExactReplay
	// TokenRotation: the ordered event witness is identical but the
	// successor differs. A distinct response; allowed only when the contract
	// permits token rotation, otherwise UnprovableDivergence.
	TokenRotation
	// ShiftedPage: the event contents differ; the overlap matched the
	// durable receipts and the response covers the next required portion of
	// the stream (or carries a coverage proof).
	ShiftedPage
	// UnprovableDivergence: none of the above can be proven. Stop advancing
	// and recover as the contract allows (Verdict.Recovery).
	UnprovableDivergence
	// HeadGrowth: the page only grew at the head. Every earlier response
	// for (C, G) was a head answer (empty on its own evidence, or without a
	// successor under missing_successor: poll) and is an exact prefix of
	// this one (same identities, positions and digests, in order), positions
	// are ordered, and every event past each prefix lies above the durable
	// applied boundary (and above the prefix's own watermark when that is
	// in the positions' coordinate). A distinct response: its own witness,
	// its own successor; the receipts of the prefix satisfy its leading
	// events. It is normal growth of a polled feed, not divergence
	// (docs/design.md#retry-classification).
	HeadGrowth
)

// classes is every retry class, with its name and whether a verdict of
// it lets the successor be promoted: the one table a new class joins. No
// range of values decides either (a class added past the last one would
// silently never promote).
var classes = [...]struct {
	class    RetryClass
	name     string
	advances bool
}{
	{FirstResponse, "first_response", true},
	{ExactReplay, "exact_replay", true},
	{TokenRotation, "token_rotation", true},
	{ShiftedPage, "shifted_page", true},
	{UnprovableDivergence, "unprovable_divergence", false},
	{HeadGrowth, "head_growth", true},
}

// Classes is every retry class, in declaration order.
func Classes() []RetryClass {
	out := make([]RetryClass, len(classes))
	for i, k := range classes {
		out[i] = k.class
	}
	return out
}

// Known reports whether c is one of Classes.
func (c RetryClass) Known() bool {
	for _, k := range classes {
		if k.class == c {
			return true
		}
	}
	return false
}

// Advances reports whether a verdict of class c lets its successor be
// promoted (every class but UnprovableDivergence; false for an unknown
// value).
func (c RetryClass) Advances() bool {
	for _, k := range classes {
		if k.class == c {
			return k.advances
		}
	}
	return false
}

func (c RetryClass) String() string {
	for _, k := range classes {
		if k.class == c {
			return k.name
		}
	}
	return fmt.Sprintf("retry_class(%d)", uint8(c))
}

// ClassifyInput is a new witness for (C, G) and what is durable about (C, G).
type ClassifyInput struct {
	Contract Contract
	// Applied and HasApplied are the checkpoint's durable applied boundary:
	// the position of the last event with a durable terminal outcome at or
	// before C. HasApplied false: nothing applied yet.
	Applied    coord.Position
	HasApplied bool
	// Prior is every earlier witness recorded for (C, G), oldest first. The
	// first AckedThrough events of each are durable receipts.
	Prior []Witness
	// Receipts are further durable receipts the caller knows, typically the
	// events of the witness promoted into the checkpoint (all durable). With
	// them, an event at or below the applied boundary that a provider
	// repeats is checked against its receipt. Optional.
	Receipts []EventWitness
	// Pending are the events of the page whose successor is this
	// response's cursor while that page is not yet promoted (a page fetched
	// ahead). They will all have a durable outcome before this response can
	// be promoted (pages are promoted in order), so a repeat of one of them
	// is checked like a receipt (conflicts, rule (a)); but they satisfy
	// nothing: a repeated event is emitted again, and no receipt claims an
	// outcome that is not durable yet.
	Pending []EventWitness
	// Witness is the new response's witness, already made durable.
	Witness Witness
}

// Verdict is the outcome of Classify. It binds to one response: Attempt.
type Verdict struct {
	Class RetryClass
	// Attempt is the witness whose successor this verdict is about: the new
	// witness, or for ExactReplay the resumed one. DecidePromotion refuses
	// a verdict for any other witness.
	Attempt string
	// Resume is a copy of the earlier witness to resume (ExactReplay; also
	// set when an exact replay is UnprovableDivergence).
	Resume *Witness
	// Reason says which rule decided, with positions.
	Reason string
	// Recovery is what the contract allows when Class is
	// UnprovableDivergence (provider.RecoveryPark when the contract names none).
	Recovery Recovery
	// Satisfied counts the leading events of the new witness that match a
	// durable receipt (position, identity and digest): their outcome is
	// already durable, so the caller may record AckedThrough = Satisfied for
	// the new witness without emitting them again.
	Satisfied int
	// Against lists the attempt ids of the prior witnesses the response was
	// reconciled with. DecidePromotion treats any other witness of (C, G) as
	// a later fetch.
	Against []string
}

// Advances reports whether the verdict lets the successor of Attempt be
// promoted once its response is complete (CanPromote).
func (v Verdict) Advances() bool { return v.Class.Advances() }

func (v Verdict) String() string {
	return fmt.Sprintf("%s (attempt %s): %s", v.Class, v.Attempt, v.Reason)
}

// Classify reconciles a new witness for (C, G) with the earlier witnesses
// for (C, G), their receipts and the durable applied boundary, as
// docs/design.md#retry-classification describes:
//
//   - exact replay: identical ordered event witness and successor; resume
//     the existing witness (a pending one when there are several);
//   - token rotation: identical events, other successor; a distinct
//     response, advancing only if Contract.TokensMayRotate (without it, an
//     exact replay of one of two such responses does not advance either);
//   - shifted page: events differ; every overlap with a durable receipt must
//     match it, and the response must prove it covers the next required
//     portion of the stream;
//   - grew at the head: every earlier response was a head answer that is an
//     exact prefix of this one, and what it adds lies above the durable
//     applied boundary (grewAtHead); a distinct response, bound to its own
//     successor;
//   - unprovable divergence: anything that cannot be proven.
//
// Whatever the class, the response may not advance when (a) it repeats an
// event at or below the applied boundary that the contract says is
// excluded and no receipt matches it; (b) under DensePositions, its first
// event above the boundary is not at the next required position or its
// positions skip one, and with no applied boundary (the first page of a
// traversal) its first event is not at the declared origin
// (Contract.FirstPosition, when declared); (c) an earlier witness showed an event inside this
// response's range (above the boundary, up to its last position; everything
// above the boundary for an empty response) that this response omits; or
// its snapshot marker equals an earlier witness's while the events differ.
// A shifted page of a provider with sparse positions also needs a coverage
// proof. A coverage proof (a snapshot marker under Contract.SnapshotMarker,
// or a complete-through watermark) bound to the new response overrides (b)
// and (c): it says the omitted event is no longer required.
//
// Errors: *DuplicateIDError, *OrderError, *MovedError,
// *ReceiptConflictError (all ErrBadResponse), ErrInvalid. On error the
// verdict is the zero Verdict and nothing may be emitted or promoted.
func Classify(in ClassifyInput) (Verdict, error) {
	c, w := in.Contract, in.Witness
	if err := c.Validate(); err != nil {
		return Verdict{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if w.Partition == "" || w.AttemptID == "" {
		return Verdict{}, fmt.Errorf("%w: classify needs a witness with a partition and an attempt id", ErrInvalid)
	}
	against := make([]string, 0, len(in.Prior))
	for _, p := range in.Prior {
		if !sameRequest(p, w) || p.AttemptID == w.AttemptID {
			return Verdict{}, fmt.Errorf("%w: partition %s: prior attempt %s is not an earlier response to the same (scope, cursor, generation %d) as attempt %s",
				ErrInvalid, w.Partition, p.AttemptID, w.Generation, w.AttemptID)
		}
		against = append(against, p.AttemptID)
	}
	if err := checkEvents(c, w); err != nil {
		return Verdict{}, err
	}
	// The history is only ever asked about the events of w (check,
	// satisfied, unsafe's rule (a)): an answer without events, a quiet
	// partition's poll, needs none (its nil maps read as empty).
	var h history
	if len(w.Events) > 0 {
		h = newHistory(in.Prior, in.Receipts, in.Pending)
	}
	if err := h.check(c, w); err != nil {
		return Verdict{}, err
	}
	b := boundary{applied: in.Applied, has: in.HasApplied}
	v := Verdict{Attempt: w.AttemptID, Satisfied: h.satisfied(w), Against: against}

	exact, rotated, evidenced := -1, -1, -1
	for i, p := range in.Prior {
		if !slices.Equal(p.Events, w.Events) {
			continue
		}
		switch {
		case !bytes.Equal(p.Successor, w.Successor):
			if rotated < 0 {
				rotated = i
			}
		case !evidenceWithin(w, p):
			if evidenced < 0 {
				evidenced = i
			}
		case exact < 0 || (in.Prior[exact].Disposition != Pending && p.Disposition == Pending):
			exact = i
		}
	}
	shifted := false
	switch {
	case exact >= 0:
		r := in.Prior[exact].Clone()
		v.Class, v.Attempt, v.Resume = ExactReplay, r.AttemptID, &r
		v.Reason = fmt.Sprintf("exact replay of attempt %s: identical ordered event witness and successor; resume it", r.AttemptID)
	case rotated >= 0:
		p := in.Prior[rotated]
		v.Class = TokenRotation
		v.Reason = fmt.Sprintf("token rotation: same %d events as attempt %s, successor %s instead of %s; a distinct response",
			len(w.Events), p.AttemptID, CursorHash(w.Successor), CursorHash(p.Successor))
	case evidenced >= 0:
		v.Class = ShiftedPage
		v.Reason = fmt.Sprintf("same events and successor as attempt %s with coverage evidence that attempt lacks: a distinct response bound to its own evidence",
			in.Prior[evidenced].AttemptID)
	case len(in.Prior) == 0:
		v.Class = FirstResponse
		v.Reason = "first response for this cursor and generation"
	default:
		if why := grewAtHead(c, b, in.Prior, w); why != "" {
			v.Class, v.Reason = HeadGrowth, why
			break
		}
		shifted = true
		v.Class = ShiftedPage
	}
	if rotated >= 0 && !c.TokensMayRotate {
		// Also for an exact replay of another witness: the provider has
		// returned these events with two successors.
		p := in.Prior[rotated]
		return diverge(c, v, fmt.Sprintf("token rotation: attempt %s returned the same %d events with successor %s instead of %s, and the provider contract does not permit token rotation",
			p.AttemptID, len(w.Events), CursorHash(p.Successor), CursorHash(w.Successor))), nil
	}
	if why := unsafe(c, b, h, in.Prior, w, shifted); why != "" {
		return diverge(c, v, why), nil
	}
	if shifted {
		v.Reason = "shifted page: overlap matches the durable receipts and " + coverage(c, b, w)
	}
	return v, nil
}

func diverge(c Contract, v Verdict, why string) Verdict {
	v.Class, v.Reason, v.Recovery = UnprovableDivergence, why, c.EffectiveRecovery()
	return v
}

// coverage says why a shifted page that passed unsafe covers the next
// required portion of the stream.
func coverage(c Contract, b boundary, w Witness) string {
	if c.DensePositions {
		if b.has {
			return fmt.Sprintf("its dense positions continue at the next required position %s (gaps only at or below its complete-through watermark)", b.next())
		}
		return "its dense positions omit nothing an earlier fetch showed (gaps only at or below its complete-through watermark)"
	}
	return fmt.Sprintf("its complete-through watermark %s covers its whole range %s", w.CompleteThrough, b.rangeOf(w))
}

// evidenceWithin reports whether every piece of coverage evidence w carries
// is also carried by p, so resuming p loses nothing bound to w.
func evidenceWithin(w, p Witness) bool {
	return (len(w.Marker) == 0 || bytes.Equal(w.Marker, p.Marker)) &&
		(w.CompleteThrough.IsZero() || w.CompleteThrough == p.CompleteThrough) &&
		(!w.Sealed || p.Sealed)
}

// unsafe returns why w may not advance, or "".
//
// Evidence is bound to positions: a complete-through watermark W (under
// Contract.WatermarkCoversPositions) proves coverage of the positions at or
// below W and of none above it; a snapshot marker proves nothing about an
// event an earlier response showed (the same marker with other events is an
// unstable snapshot, another marker is another snapshot).
func unsafe(c Contract, b boundary, h history, prior []Witness, w Witness, shifted bool) string {
	// (a) Every event at or below the durable applied boundary is either
	// absent under exclusive-boundary semantics or matches its durable
	// receipt by identity (a conflicting receipt was already an error).
	if b.has && c.ExclusiveBoundary {
		for _, e := range w.Events {
			if e.Position.Compare(b.applied) <= 0 && !h.matches(e) && h.soon[e.IDHash].ev != e {
				return fmt.Sprintf("coverage rule (a): partition %s: position %s (%s) is at or below the durable applied boundary %s, which the contract declares exclusive, and no durable receipt matches it",
					w.Partition, e.Position, idLabel("", e.IDHash), b.applied)
			}
		}
	}
	if c.SnapshotMarker && len(w.Marker) > 0 {
		for _, p := range prior {
			if bytes.Equal(p.Marker, w.Marker) && !slices.Equal(p.Events, w.Events) {
				return fmt.Sprintf("partition %s: snapshot marker %s is the one attempt %s carried, yet the events differ: the snapshot is not stable",
					w.Partition, CursorHash(w.Marker), p.AttemptID)
			}
		}
	}
	// (c) An event an earlier fetch of (C, G) showed inside this response's
	// range and this response omits: divergence, unless the contract lets
	// events be withdrawn and this response proves the position covered.
	for _, o := range omissions(b, w, prior) {
		if c.EventsMayBeWithdrawn && covers(c, w, o.ev.Position) {
			continue
		}
		why := "the contract does not let events be withdrawn"
		switch {
		case !c.EventsMayBeWithdrawn:
		case w.CompleteThrough.IsZero():
			why = "this response carries no complete-through watermark"
		case !c.WatermarkCoversPositions:
			why = fmt.Sprintf("its complete-through watermark %s is not in the positions' coordinate", w.CompleteThrough)
		default:
			why = fmt.Sprintf("its complete-through watermark %s is below that position", w.CompleteThrough)
		}
		return fmt.Sprintf("partition %s: attempt %s showed position %s (%s) inside this response's range %s, and this response omits it; %s, so nothing proves it is no longer required",
			w.Partition, o.attempt, o.ev.Position, idLabel("", o.ev.IDHash), b.rangeOf(w), why)
	}
	// (b) The unseen suffix begins at the next required position: under
	// dense positions every gap above the boundary must lie at or below the
	// response's own complete-through watermark.
	if c.DensePositions {
		prev, started := b.applied, b.has
		for _, e := range w.Events {
			if b.has && e.Position.Compare(b.applied) <= 0 {
				continue
			}
			if !started {
				// The first page of a traversal (nothing applied yet: a
				// fresh start, a new incarnation after a reset) begins at
				// the declared origin.
				if why := firstPageGap(c, w, e.Position); why != "" {
					return why
				}
			}
			if started && !follows(prev, e.Position) && !coversBefore(c, w, e.Position) {
				if b.has && prev == b.applied {
					return fmt.Sprintf("coverage rule (b): partition %s: the first event above the durable applied boundary %s is at position %s, not at the next required position %s, and no complete-through watermark covers the gap",
						w.Partition, b.applied, e.Position, b.next())
				}
				return fmt.Sprintf("coverage rule (b): partition %s: positions are dense but %s follows %s: position %s is missing and no complete-through watermark covers it",
					w.Partition, e.Position, prev, nextOf(prev))
			}
			prev, started = e.Position, true
		}
		return ""
	}
	if hi, bounded := top(w); shifted && (!bounded || !covers(c, w, hi)) {
		return fmt.Sprintf("coverage rule (b): partition %s: the page shifted and positions may be sparse; only a complete-through watermark in the positions' coordinate at or above %s could prove that no intermediate event of its range %s was skipped",
			w.Partition, hi, b.rangeOf(w))
	}
	return ""
}

// firstPageGap returns why the first event at first, of a response read
// with no applied boundary (the first page of a traversal), is a gap under
// the contract's declared origin (Contract.FirstPosition), or "". Without an
// origin nothing is checked. Above the origin the positions from the origin
// up to it were never delivered (retention dropped the oldest events, a
// limit kept the newest), unless the response's own complete-through
// watermark covers them (as it would a rule (b) gap); below it the source
// does not start where the contract says, and nothing covers that.
func firstPageGap(c Contract, w Witness, first coord.Position) string {
	o := FirstPosition(c)
	if o.IsZero() || first == o {
		return ""
	}
	if first.Kind != o.Kind || first.Less(o) {
		return fmt.Sprintf("coverage rule (b), first page: partition %s: nothing is applied yet (a fresh start or a new incarnation) and the first event is at position %s, below the declared first position %s (contract first_position): the source does not start where the contract says",
			w.Partition, first, o)
	}
	if coversBefore(c, w, first) {
		return ""
	}
	missing := "position " + o.String() + " was"
	if last, _ := first.Prev(); last != o {
		missing = fmt.Sprintf("positions %s through %s were", o, last)
	}
	return fmt.Sprintf("coverage rule (b), first page: partition %s: nothing is applied yet (a fresh start or a new incarnation) and the first event is at position %s, not at the declared first position %s (contract first_position): %s never delivered (dropped by retention, or a page that keeps the newest events) and no complete-through watermark covers the gap",
		w.Partition, first, o, missing)
}

// grewAtHead returns why w only grew at the head of the prior responses of
// (C, G), or "" when it did not (docs/design.md#retry-classification,
// head_growth). It holds when positions are ordered and every prior
// response p
//
//   - is a head answer: not sealed, and either empty (recorded on evidence
//     bound to it: nothing followed C when it was fetched) or without a
//     successor under provider.MissingSuccessorPoll (the feed's head, polled again);
//   - is an exact prefix of w (same identities, positions and digests, in
//     order; shorter, since a prior with w's very events is a replay or a
//     rotation);
//   - leaves in w only events above the durable applied boundary and, when
//     p's watermark is in the positions' coordinate, above that watermark.
//
// Then w differs from each prior only by what the source appended after
// it: nothing a prior showed is omitted, moved or changed, and nothing
// appeared inside a range a prior enumerated.
func grewAtHead(c Contract, b boundary, prior []Witness, w Witness) string {
	if !c.Ordered() || len(prior) == 0 {
		return ""
	}
	shortest := len(w.Events)
	head := ""
	for _, p := range prior {
		n := len(p.Events)
		switch {
		case p.Sealed, n >= len(w.Events), !slices.Equal(p.Events, w.Events[:n]):
			return ""
		case n == 0 && emptyEvidence(c, p) != "":
			head = "empty"
		case len(p.Successor) == 0 && c.MissingSuccessor == provider.MissingSuccessorPoll:
			head = "without a successor (polled)"
		default:
			return ""
		}
		if ct, ok := coveredThrough(c, p); ok && ct.Kind == w.Events[n].Position.Kind && w.Events[n].Position.Compare(ct) <= 0 {
			return ""
		}
		shortest = min(shortest, n)
	}
	added := w.Events[shortest:]
	if b.has && added[0].Position.Compare(b.applied) <= 0 {
		return ""
	}
	return fmt.Sprintf("grew at the head: %d earlier head answer(s) (the last %s, %d events) are exact prefixes of this response; its %d new events at positions %s..%s lie above the durable applied boundary %s; a distinct response bound to its own successor",
		len(prior), head, len(prior[len(prior)-1].Events), len(added), added[0].Position, added[len(added)-1].Position, b.String())
}

// String renders the boundary ("none" when nothing is applied).
func (b boundary) String() string {
	if !b.has {
		return "none"
	}
	return b.applied.String()
}

// boundary is the durable applied boundary.
type boundary struct {
	applied coord.Position
	has     bool
}

// next renders the next required position after the boundary.
func (b boundary) next() string { return nextOf(b.applied) }

// nextOf renders the position right after p ("after p" when its kind has no
// successor arithmetic).
func nextOf(p coord.Position) string {
	if n, ok := p.Next(); ok {
		return n.String()
	}
	return "after " + p.String()
}

// follows reports whether q is the position right after p.
func follows(p, q coord.Position) bool {
	n, ok := p.Next()
	return ok && n == q
}

// top is the top of w's range: its greatest position; bounded is false for
// an empty response (which claims to cover everything up to its successor).
func top(w Witness) (hi coord.Position, bounded bool) {
	if len(w.Events) == 0 {
		return coord.Position{}, false
	}
	m := w.Events[0].Position
	for _, e := range w.Events[1:] {
		m = coord.MaxPosition(m, e.Position)
	}
	return m, true
}

// within reports whether p is at or below the top of w's range.
func within(w Witness, p coord.Position) bool {
	hi, bounded := top(w)
	return !bounded || p.Compare(hi) <= 0
}

func (b boundary) rangeOf(w Witness) string {
	lo := "(start"
	if b.has {
		lo = fmt.Sprintf("(%s", b.applied)
	}
	hi, bounded := top(w)
	if !bounded {
		return lo + ", successor]"
	}
	return fmt.Sprintf("%s, %s]", lo, hi)
}

type omission struct {
	attempt string
	ev      EventWitness
}

// omissions lists the events of others inside w's range (above the
// boundary, up to its greatest position; everything above the boundary for
// an empty response) whose identity w lacks.
func omissions(b boundary, w Witness, others []Witness) []omission {
	ids := make(map[uint64]struct{}, len(w.Events))
	for _, e := range w.Events {
		ids[e.IDHash] = struct{}{}
	}
	var out []omission
	for _, o := range others {
		for _, e := range o.Events {
			if _, ok := ids[e.IDHash]; !ok && (!b.has || e.Position.Compare(b.applied) > 0) && within(w, e.Position) {
				out = append(out, omission{o.AttemptID, e})
			}
		}
	}
	return out
}

// omitted returns the first of omissions(b, w, others).
func omitted(b boundary, w Witness, others []Witness) (string, EventWitness, bool) {
	if o := omissions(b, w, others); len(o) > 0 {
		return o[0].attempt, o[0].ev, true
	}
	return "", EventWitness{}, false
}

type receipt struct {
	ev      EventWitness
	attempt string
}

// history indexes the prior witnesses of (C, G) and the caller's receipts:
// the durable receipts by identity (and by position, which ordered
// contracts make unique) and the first place each id was seen. Receipts
// are matched by identity: two events may share a position when the
// contract does not order positions (two keys written in one transaction).
type history struct {
	byID  map[uint64]receipt
	byPos map[coord.Position]receipt
	seen  map[uint64]receipt
	// soon and soonPos hold the pending receipts by identity and by
	// position: checked like receipts, satisfying nothing.
	soon    map[uint64]receipt
	soonPos map[coord.Position]receipt
}

func newHistory(prior []Witness, extra, pending []EventWitness) history {
	// Sized once (a poll of a quiet partition builds one for every
	// answer); the pending maps stay nil, and read as empty, without
	// pending events.
	n := len(extra)
	for _, p := range prior {
		n += len(p.Events)
	}
	h := history{byID: make(map[uint64]receipt, n), byPos: make(map[coord.Position]receipt, n), seen: make(map[uint64]receipt, n)}
	if len(pending) > 0 {
		h.soon, h.soonPos = make(map[uint64]receipt, len(pending)), make(map[coord.Position]receipt, len(pending))
	}
	for _, e := range pending {
		if _, ok := h.soon[e.IDHash]; !ok {
			h.soon[e.IDHash] = receipt{e, "pending"}
		}
		if _, ok := h.soonPos[e.Position]; !ok {
			h.soonPos[e.Position] = receipt{e, "pending"}
		}
	}
	add := func(e EventWitness, attempt string, durable bool) {
		if durable {
			if _, ok := h.byID[e.IDHash]; !ok {
				h.byID[e.IDHash] = receipt{e, attempt}
			}
			if _, ok := h.byPos[e.Position]; !ok {
				h.byPos[e.Position] = receipt{e, attempt}
			}
		}
		if _, ok := h.seen[e.IDHash]; !ok {
			h.seen[e.IDHash] = receipt{e, attempt}
		}
	}
	for _, e := range extra {
		add(e, "receipt", true)
	}
	for _, p := range prior {
		acked := min(max(p.AckedThrough, 0), len(p.Events))
		for i, e := range p.Events {
			add(e, p.AttemptID, i < acked)
		}
	}
	return h
}

// check rejects a new witness that conflicts with a durable receipt (the
// same identity with another payload digest; under ordered positions also
// another identity at a receipt's immutable position) or puts a known id at
// another position.
func (h history) check(c Contract, w Witness) error {
	for _, e := range w.Events {
		if s, ok := h.seen[e.IDHash]; ok && s.ev.Position != e.Position {
			return &MovedError{Partition: w.Partition, IDHash: e.IDHash, Position: e.Position, PriorPosition: s.ev.Position, PriorAttempt: s.attempt}
		}
		if r, ok := h.byID[e.IDHash]; ok && r.ev.Digest != e.Digest {
			return &ReceiptConflictError{Partition: w.Partition, Position: e.Position, Attempt: r.attempt, Receipt: r.ev, Got: e}
		}
		if r, ok := h.soon[e.IDHash]; ok && (r.ev.Digest != e.Digest || r.ev.Position != e.Position) {
			return &ReceiptConflictError{Partition: w.Partition, Position: e.Position, Attempt: r.attempt, Receipt: r.ev, Got: e}
		}
		if r, ok := h.soonPos[e.Position]; ok && c.Ordered() && r.ev.IDHash != e.IDHash {
			return &ReceiptConflictError{Partition: w.Partition, Position: e.Position, Attempt: r.attempt, Receipt: r.ev, Got: e}
		}
		if r, ok := h.byPos[e.Position]; ok && c.Ordered() && r.ev.IDHash != e.IDHash {
			return &ReceiptConflictError{Partition: w.Partition, Position: e.Position, Attempt: r.attempt, Receipt: r.ev, Got: e}
		}
	}
	return nil
}

// matches reports whether e matches a durable receipt: same identity,
// position and digest.
func (h history) matches(e EventWitness) bool {
	r, ok := h.byID[e.IDHash]
	return ok && r.ev == e
}

// satisfied counts the leading events of w that match a durable receipt.
func (h history) satisfied(w Witness) int {
	for i, e := range w.Events {
		if !h.matches(e) {
			return i
		}
	}
	return len(w.Events)
}
