package clustersim

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/tidemark/tidemark/internal/chain"
	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/store"
)

// Check names one family of oracle checks; the invariant numbers are those
// of docs/design.md#invariants.
type Check string

const (
	// CheckNoLoss (a), invariant 9: every event below a partition's durable
	// cursor, at or below its applied boundary and at or below its
	// complete-through watermark has a terminal outcome at the sink; every
	// durable receipt (AckedThrough) claims only events that have one.
	CheckNoLoss Check = "no-loss"
	// CheckWitnessFirst, invariant 4: a batch leaves the input only when
	// the witness it is attributed to is durable.
	CheckWitnessFirst Check = "witness-first"
	// CheckBinding (b), invariants 1 and 2: every promotion moves the
	// checkpoint by exactly one generation from the (cursor, generation)
	// its witness was fetched from, to exactly that witness's successor,
	// and every event of that witness has a terminal outcome.
	CheckBinding Check = "binding"
	// CheckMonotone (c), invariants 3 and 7: durable watermarks and applied
	// boundaries never decrease; the published frontier never decreases
	// within an epoch and epochs never go back; a published scalar never
	// exceeds the durable watermark of any partition of its epoch, and
	// every event at or below it in those partitions (and in partitions
	// removed with proof) has a terminal outcome.
	CheckMonotone Check = "monotone"
	// CheckMembership (d), invariant 8: no scalar frontier in an epoch whose
	// membership change is unproven; the published vector names exactly the
	// epoch's partitions.
	CheckMembership Check = "membership"
	// CheckRecords (Config.StrictRecords only): a witness's stored
	// disposition agrees with the checkpoints: a witness promoted into a
	// checkpoint is never recorded abandoned, and no witness recorded
	// abandoned is promoted. Violations are record inconsistencies, not
	// losses (the compare-and-swap still decides), so they are counted in
	// Stats.DispositionConflicts and fail a run only when asked.
	CheckRecords Check = "records"
	// CheckModel: the model's own consistency (a delivered event the
	// provider never issued).
	CheckModel Check = "model"
	// CheckMalformed: a partition parks for malformed pages only when its
	// answers turned persistently malformed (transient ones are fetched
	// again, never park), and its park reason names the class, the
	// attempts (fetch retries + 1) and the partition; a persistently
	// malformed partition does park (CheckLiveness reports one that does
	// not).
	CheckMalformed Check = "malformed"
	// CheckLineage: parents first. No event of a split's child leaves the
	// input, and no lane fetches it, while a parent of it that is a member
	// of the stored membership is not durably complete.
	CheckLineage Check = "lineage"
	// CheckExit: an instance that ends as complete (exit_when_complete)
	// has every partition of its membership complete and none parked: its
	// machine's Exit agrees with the Completed and Parked news its lanes
	// gave it.
	CheckExit Check = "exit"
	// CheckPublication: publication follows promotion. Every published
	// vector entry is a watermark its partition's checkpoint held durably
	// (the monotone checks hold it to the current one).
	CheckPublication Check = "publication"
	// CheckIncarnation: emission bracketed by the incarnation check
	// (docs/design.md#source-incarnations). No event of a source's
	// incarnation leaves the input under an epoch whose claims are about
	// another incarnation of it (the one its checkpoint held in that
	// epoch): a recreated source's events never travel with the old
	// incarnation's epoch and frontier.
	CheckIncarnation Check = "incarnation"
	// CheckLateArrival: late arrivals against a re-read window
	// (docs/design.md#re-read-windows). An event the source shows beyond
	// the declared window may stay undelivered, but no watermark or
	// published scalar covers it unless its basis names the re-read lag
	// (CheckNoLoss reports a proven one that does); a late arrival near the
	// window's edge a pass names (chain.LateArrival) is an event that
	// appeared at least that far below what was visible.
	CheckLateArrival Check = "late-arrival"
)

type wref struct {
	part    string
	gen     uint64
	attempt string
}

// oracle checks the invariants after every step, from the in-memory store (memstore) under
// every wrapper and the model's ground truth.
type oracle struct {
	s         *sim
	witnesses map[wref]*reconcile.Witness
	// promoted marks the witnesses a checkpoint was promoted to.
	promoted map[wref]bool
	last     map[string]store.Checkpoint
	epochs   map[uint64]store.Membership
	lastM    store.Membership
	lastF    store.Frontier
	hasF     bool
	// removedProven: partitions that left the membership with proof.
	removedProven map[string]bool
	// incs is, per partition, the incarnations its checkpoint has been in
	// and the epoch from which each holds (docs/design.md#source-incarnations).
	incs map[string][]incSpan
	// highest is, per partition, the highest watermark its checkpoint
	// ever held durably (CheckPublication).
	highest map[string]coord.Watermark
	fail    *violation
}

// incSpan: from epoch from on, the partition's checkpoint belongs to the
// incarnation whose hash is hash.
type incSpan struct {
	from uint64
	hash string
}

// observeIncarnation records the incarnation of a checkpoint.
func (o *oracle) observeIncarnation(cp store.Checkpoint) {
	if cp.Incarnation == "" {
		return
	}
	spans := o.incs[cp.Partition]
	switch {
	case len(spans) == 0:
		o.incs[cp.Partition] = []incSpan{{0, cp.Incarnation}}
	case cp.IncarnationEpoch > spans[len(spans)-1].from:
		o.incs[cp.Partition] = append(spans, incSpan{cp.IncarnationEpoch, cp.Incarnation})
	}
}

// at is the log of p's incarnation that epoch e's claims are about: the
// one its checkpoint belonged to in e.
func (o *oracle) at(p *part, e uint64) *part {
	h := ""
	for _, sp := range o.incs[p.name] {
		if sp.from <= e {
			h = sp.hash
		}
	}
	return p.incarnation(h)
}

type violation struct {
	check  Check
	detail string
}

func newOracle(s *sim) *oracle {
	return &oracle{
		s:             s,
		witnesses:     map[wref]*reconcile.Witness{},
		promoted:      map[wref]bool{},
		last:          map[string]store.Checkpoint{},
		epochs:        map[uint64]store.Membership{},
		removedProven: map[string]bool{},
		incs:          map[string][]incSpan{},
		highest:       map[string]coord.Watermark{},
	}
}

func (o *oracle) violate(c Check, format string, a ...any) {
	if o.fail == nil {
		o.fail = &violation{check: c, detail: fmt.Sprintf(format, a...)}
	}
}

// truth checks that the events of a witness are events the provider
// issued, and that the first n have a terminal outcome.
func (o *oracle) truth(c Check, what string, part string, events []reconcile.EventWitness, n int) {
	p := o.s.part(part)
	if p == nil {
		o.violate(CheckModel, "%s: unknown partition %s", what, part)
		return
	}
	for i, e := range events {
		log, k := issued(p, e)
		if k < 0 {
			o.violate(CheckModel, "%s: partition %s position %s is not an event the provider issued", what, part, e.Position)
			return
		}
		if i < n && !log.events[k].acked {
			o.violate(c, "%s: partition %s event %s (position %s) has no terminal outcome at the sink", what, part, log.events[k].id, e.Position)
			return
		}
	}
}

func (o *oracle) witnessStored(w reconcile.Witness) {
	r := wref{w.Partition, w.Generation, w.AttemptID}
	if old, ok := o.witnesses[r]; ok {
		// An idempotent repeat: the stored record keeps its receipts.
		_ = old
		return
	}
	c := w.Clone()
	o.witnesses[r] = &c
	o.truth(CheckNoLoss, fmt.Sprintf("witness %s stored with receipts through %d", w.AttemptID, w.AckedThrough), w.Partition, w.Events, w.AckedThrough)
}

func (o *oracle) receiptStored(k store.Key, gen uint64, attempt string, n int) {
	w, ok := o.witnesses[wref{k.Partition, gen, attempt}]
	if !ok {
		o.violate(CheckModel, "receipt for unknown witness %s/%d/%s", k.Partition, gen, attempt)
		return
	}
	w.AckedThrough = max(w.AckedThrough, n)
	o.truth(CheckNoLoss, fmt.Sprintf("receipt of witness %s through %d", attempt, n), k.Partition, w.Events, n)
}

func (o *oracle) dispositionStored(k store.Key, gen uint64, attempt string, d reconcile.Disposition) {
	r := wref{k.Partition, gen, attempt}
	w, ok := o.witnesses[r]
	if !ok {
		return
	}
	if w.Disposition == reconcile.Pending {
		w.Disposition = d
	}
	if d == reconcile.Abandoned && o.promoted[r] {
		o.s.stats.DispositionConflicts++
		if o.s.strictRecords {
			o.violate(CheckRecords, "witness %s of partition %s was promoted into generation %d, yet is now recorded abandoned", attempt, k.Partition, gen+1)
		}
	}
}

// delivered checks a batch as it leaves the input.
func (o *oracle) delivered(d *delivery) {
	if _, ok := o.witnesses[wref{d.part, d.gen, d.attempt}]; !ok {
		o.violate(CheckWitnessFirst, "batch %s left the input before its witness was durable", d)
	}
	o.truth(CheckModel, "batch "+d.String(), d.part, d.events, 0)
	o.parentsFirst(d)
	o.sameIncarnation(d)
}

// sameIncarnation checks that every event of batch d belongs to the
// incarnation its epoch's claims are about: the one the partition's
// checkpoint held in that epoch (at). A page a recreated source served
// under the old cursor, emitted before a check asked after it, breaks it.
func (o *oracle) sameIncarnation(d *delivery) {
	p := o.s.part(d.part)
	if p == nil || len(p.retired) == 0 || len(o.incs[p.name]) == 0 {
		return // never recreated, or no incarnation recorded yet
	}
	want := o.at(p, d.epoch)
	for _, e := range d.events {
		if log, k := issued(p, e); k >= 0 && log != want {
			o.violate(CheckIncarnation, "batch %s left the input under epoch %d, whose claims are about incarnation %d of %s, yet its event at position %s is of incarnation %d", d, d.epoch, want.inc, p.name, e.Position, log.inc)
			return
		}
	}
}

// parentsFirst checks that a batch of a child leaves the input only when
// every parent that is a member of the stored membership is complete.
func (o *oracle) parentsFirst(d *delivery) {
	if parent, epoch, ok := o.parentPending(d.part); ok {
		o.violate(CheckLineage, "batch %s of partition %s left the input while its parent %s, a member of epoch %d, is not complete", d, d.part, parent, epoch)
	}
}

// readingChild checks that a lane reads (fetches) a split's child only
// when every parent that is a member of the stored membership is complete:
// the gate holds the child's reads, not only its emissions.
func (o *oracle) readingChild(lane string, part string) {
	if parent, epoch, ok := o.parentPending(part); ok {
		o.violate(CheckLineage, "lane %s fetches partition %s while its parent %s, a member of epoch %d, is not complete", lane, part, parent, epoch)
	}
}

// parentPending returns a parent of part that is a member of the stored
// membership and not durably complete, with the membership's epoch.
func (o *oracle) parentPending(part string) (string, uint64, bool) {
	s := o.s
	p := s.part(part)
	if p == nil || len(p.parents) == 0 {
		return "", 0, false
	}
	m, err := s.mem.LoadMembership(bg, s.scope)
	if err != nil {
		o.violate(CheckModel, "cannot read membership: %v", err)
		return "", 0, false
	}
	for _, parent := range p.parents {
		if !slices.Contains(m.Partitions, parent) {
			continue
		}
		cp, err := s.mem.LoadCheckpoint(bg, store.Key{Scope: s.scope, Partition: parent})
		if err != nil || !cp.Complete {
			return parent, m.Epoch, true
		}
	}
	return "", 0, false
}

// acked records the terminal outcome of a batch at the sink.
func (o *oracle) acked(d *delivery) {
	p := o.s.part(d.part)
	for _, e := range d.events {
		if log, k := issued(p, e); k >= 0 {
			log.events[k].acked = true
		}
	}
}

// issued finds e in the log of any incarnation of p (ids differ between
// incarnations): the log and the index, or -1.
func issued(p *part, e reconcile.EventWitness) (*part, int) {
	for _, log := range p.logs() {
		if k := log.find(e); k >= 0 && log.events[k].digest == e.Digest {
			return log, k
		}
	}
	return p, -1
}

// below reports a violation when partition p has an event below pos
// without a terminal outcome.
func (o *oracle) below(p *part, pos int64, format string, a ...any) {
	if e, ok := p.ackedBelow(pos); !ok {
		o.violate(CheckNoLoss, "partition %s: %s, yet event %s (position %d) has no terminal outcome at the sink", p.name, fmt.Sprintf(format, a...), e.id, e.pos)
	}
}

// belowWatermark is below for a watermark or published scalar whose
// basis is basis: one that names the re-read lag (provider.Contract.Basis
// under a re-read window) may cover an event the source showed beyond
// the window, undelivered; a proven one may not.
func (o *oracle) belowWatermark(p *part, pos int64, basis string, format string, a ...any) {
	if !strings.HasPrefix(basis, "reread lag ") {
		o.below(p, pos, format, a...)
		return
	}
	if e, ok := p.ackedBelowInWindow(pos); !ok {
		o.violate(CheckNoLoss, "partition %s: %s (basis %s), yet event %s (position %d), within the bound of the re-read window, has no terminal outcome at the sink", p.name, fmt.Sprintf(format, a...), basis, e.id, e.pos)
	}
}

// lateArrival checks a late arrival near a re-read window's edge that a
// lane's machine named: the model must hold a late event at its position
// that appeared at least its depth below the greatest visible position.
func (o *oracle) lateArrival(p *part, la chain.LateArrival) {
	o.s.stats.LateNearEdgeNamed++
	if cur := o.s.part(p.name); cur != nil {
		cur.lateNamed++
	}
	n, ok := p.ord(la.Position.AsWatermark())
	if !ok {
		o.violate(CheckModel, "partition %s: a late arrival named at %s, not a position of the model", p.name, la.Position)
		return
	}
	for _, log := range p.logs() {
		for k := log.index(n); k < len(log.events) && log.events[k].pos == n; k++ {
			if e := log.events[k]; e.late && e.above-e.pos >= la.Depth {
				return
			}
		}
	}
	o.violate(CheckLateArrival, "partition %s: a re-read pass named a late arrival at %s, at least %d below what was delivered (window %d), yet no event there appeared that late", p.name, la.Position, la.Depth, la.Window)
}

// belowOnTime is below for the cursor and applied-boundary rules: a late
// event (a listing that is not a snapshot) may lie below them undelivered;
// it may never lie at or below a watermark or a published frontier.
func (o *oracle) belowOnTime(p *part, pos int64, format string, a ...any) {
	if e, ok := p.ackedBelowOnTime(pos); !ok {
		o.violate(CheckNoLoss, "partition %s: %s, yet event %s (position %d) has no terminal outcome at the sink", p.name, fmt.Sprintf(format, a...), e.id, e.pos)
	}
}

// check runs every state check after a step.
func (o *oracle) check() {
	s := o.s
	for _, p := range s.parts {
		if !p.appeared {
			continue
		}
		cp, err := s.mem.LoadCheckpoint(bg, store.Key{Scope: s.scope, Partition: p.name})
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			o.violate(CheckModel, "cannot read checkpoint of %s: %v", p.name, err)
			continue
		}
		if h, ok := o.highest[p.name]; !ok || h.IsZero() || h.Less(cp.Watermark) {
			o.highest[p.name] = cp.Watermark
		}
		o.checkpoint(p, cp)
	}
	o.membership()
	o.frontier()
}

func (o *oracle) checkpoint(p *part, cp store.Checkpoint) {
	if chain.ParkKindOf(cp.Parked) == chain.ParkMalformed {
		want := chain.ParkReason{Kind: chain.ParkMalformed, Detail: fmt.Sprintf("after %d attempts: partition %s, generation %d, cursor %s: ", simFetchRetries+1, p.name, cp.Generation, reconcile.CursorHash(cp.Cursor))}.String()
		switch {
		case !p.brokenActive():
			o.violate(CheckMalformed, "partition %s parked for malformed pages, yet its provider gives one reader at most %d malformed answers in a row (a transient fault): %s", p.name, maxMalformedStreak, cp.Parked)
		case !strings.HasPrefix(cp.Parked, want):
			o.violate(CheckMalformed, "partition %s: park reason %q does not start with %q", p.name, cp.Parked, want)
		}
	}
	// (a) No loss, in the incarnation the checkpoint belongs to.
	o.observeIncarnation(cp)
	p = p.incarnation(cp.Incarnation)
	c, err := decodeCursor(cp.Cursor)
	if err != nil {
		o.violate(CheckModel, "partition %s: checkpoint cursor: %v", p.name, err)
		return
	}
	o.belowOnTime(p, c.next, "the durable cursor %s (g%d) resumes at position %d", curString(cp.Cursor), cp.Generation, c.next)
	if cp.HasApplied {
		if n, ok := p.ord(cp.Applied.AsWatermark()); ok {
			o.belowOnTime(p, n+1, "the durable applied boundary is %s (g%d)", cp.Applied, cp.Generation)
		} else {
			o.violate(CheckModel, "partition %s: the durable applied boundary %s is not a position the provider issued", p.name, cp.Applied)
		}
	}
	if n, ok := p.ord(cp.Watermark); ok {
		o.belowWatermark(p, n+1, cp.Finality.String(), "the durable watermark is %s (g%d)", cp.Watermark, cp.Generation)
	}
	if cp.Complete {
		// Complete means nothing follows: only a sealed partition may be,
		// and every one of its events has a terminal outcome.
		if !p.sealed {
			o.violate(CheckBinding, "partition %s: checkpoint g%d is complete, yet the provider never sealed it", p.name, cp.Generation)
		}
		// A finite traversal that is not a snapshot ends without the
		// events that appeared below its progress (late): complete is no
		// claim about them, only a watermark would be.
		o.belowOnTime(p, math.MaxInt64, "the checkpoint is complete (g%d)", cp.Generation)
	}
	last, seen := o.last[p.name]
	o.last[p.name] = cp
	if !seen {
		if cp.Generation != 1 {
			o.violate(CheckBinding, "partition %s: first checkpoint seen at generation %d", p.name, cp.Generation)
		}
		return
	}
	if strings.HasPrefix(cp.PromotedWitness, "incarnation:") && cp.Generation == last.Generation+1 && cp.IncarnationEpoch == last.IncarnationEpoch {
		// The first incarnation recorded: nothing else moves.
		o.s.stats.Transitions++
		if !bytes.Equal(cp.Cursor, last.Cursor) || cp.Watermark != last.Watermark || cp.Applied != last.Applied || last.Incarnation != "" {
			o.violate(CheckBinding, "partition %s: recording incarnation %s changed the checkpoint (g%d %s -> g%d %s)", p.name, cp.Incarnation, last.Generation, curString(last.Cursor), cp.Generation, curString(cp.Cursor))
		}
		return
	}
	if strings.HasPrefix(cp.PromotedWitness, "incarnation:") && cp.Generation == last.Generation+1 && cp.PromotedWitness != last.PromotedWitness {
		// A reset into a new incarnation: the coordinates restart, only in
		// a newer epoch than the checkpoint's own.
		o.s.stats.Transitions++
		if last.Complete {
			o.s.stats.ReopenedComplete++
		}
		switch {
		case cp.IncarnationEpoch <= last.Epoch:
			o.violate(CheckMonotone, "partition %s: reset into incarnation %s at epoch %d clears progress written at epoch %d", p.name, cp.Incarnation, cp.IncarnationEpoch, last.Epoch)
		case !cp.Watermark.IsZero() || cp.HasApplied || len(cp.Cursor) != 0:
			o.violate(CheckBinding, "partition %s: reset into incarnation %s keeps coordinates (g%d %s)", p.name, cp.Incarnation, cp.Generation, curString(cp.Cursor))
		}
		return
	}
	// (c) Monotone. Completion is durable: only an operator's repair
	// reopens a complete partition.
	if last.Complete && !cp.Complete && !strings.HasPrefix(cp.PromotedWitness, chain.RepairWitnessPrefix) {
		o.violate(CheckMonotone, "partition %s: complete at g%d, then g%d (witness %s) is not", p.name, last.Generation, cp.Generation, cp.PromotedWitness)
	}
	if !last.Watermark.IsZero() {
		if cmp, err := cp.Watermark.Compare(last.Watermark); err != nil || cmp < 0 {
			o.violate(CheckMonotone, "partition %s: durable watermark went from %s to %s (g%d -> g%d)", p.name, last.Watermark, cp.Watermark, last.Generation, cp.Generation)
		}
	}
	if last.HasApplied && (!cp.HasApplied || cp.Applied.Less(last.Applied)) {
		o.violate(CheckMonotone, "partition %s: applied boundary went from %s to %s (g%d -> g%d)", p.name, last.Applied, cp.Applied, last.Generation, cp.Generation)
	}
	// (b) Binding.
	switch {
	case cp.Generation == last.Generation:
		if !bytes.Equal(cp.Cursor, last.Cursor) || cp.PromotedWitness != last.PromotedWitness {
			o.violate(CheckBinding, "partition %s: checkpoint changed at generation %d: %s -> %s", p.name, cp.Generation, curString(last.Cursor), curString(cp.Cursor))
		}
		return
	case cp.Generation < last.Generation:
		o.violate(CheckBinding, "partition %s: generation went back from %d to %d", p.name, last.Generation, cp.Generation)
		return
	case cp.Generation > last.Generation+1:
		o.coalesced(p, last, cp)
		return
	}
	o.s.stats.Transitions++
	if cp.Complete && !last.Complete {
		o.s.stats.Completions++
	}
	if strings.HasPrefix(cp.PromotedWitness, "restart:") || strings.HasPrefix(cp.PromotedWitness, "repair:") {
		// A re-read pass's start under finality lag writes the watermark the
		// previous pass proves, named as the re-read lag (the watermark
		// checks above judge it); nothing else a restart moves.
		lagged := cp.PromotedWitness == chain.RereadWitnessID && strings.HasPrefix(cp.Finality.String(), "reread lag ") && (last.Watermark.IsZero() || last.Watermark.Less(cp.Watermark))
		if (cp.Watermark != last.Watermark && !lagged) || cp.Applied != last.Applied {
			o.violate(CheckBinding, "partition %s: a restart to %s changed the watermark or applied boundary", p.name, curString(cp.Cursor))
		}
		return
	}
	r := wref{p.name, last.Generation, cp.PromotedWitness}
	w, ok := o.witnesses[r]
	switch {
	case !ok:
		where := "no witness of that id is durable"
		for ref := range o.witnesses {
			if ref.part == p.name && ref.attempt == cp.PromotedWitness {
				where = fmt.Sprintf("it was fetched at generation %d from %s", ref.gen, curString(o.witnesses[ref].InputCursor))
			}
		}
		o.violate(CheckBinding, "partition %s: generation %d promotes witness %q over generation %d (%s): %s", p.name, cp.Generation, cp.PromotedWitness, last.Generation, curString(last.Cursor), where)
		return
	case !bytes.Equal(w.InputCursor, last.Cursor):
		o.violate(CheckBinding, "partition %s: generation %d promotes witness %s, fetched from %s, over the checkpoint %s (g%d)", p.name, cp.Generation, w.AttemptID, curString(w.InputCursor), curString(last.Cursor), last.Generation)
	case len(w.Successor) == 0 && cp.Complete && bytes.Equal(cp.Cursor, last.Cursor):
		// The last page of a finite traversal: the partition completes at
		// its own cursor.
	case !bytes.Equal(w.Successor, cp.Cursor):
		o.violate(CheckBinding, "partition %s: generation %d writes cursor %s with the evidence of witness %s, whose own successor is %s", p.name, cp.Generation, curString(cp.Cursor), w.AttemptID, curString(w.Successor))
	case w.Disposition == reconcile.Abandoned:
		o.s.stats.DispositionConflicts++
		if o.s.strictRecords {
			o.violate(CheckRecords, "partition %s: generation %d promotes witness %s, which is recorded abandoned", p.name, cp.Generation, w.AttemptID)
		}
	}
	if bytes.Equal(cp.Cursor, last.Cursor) && store.SameWatermark(cp.Watermark, last.Watermark) && cp.Applied == last.Applied && cp.HasApplied == last.HasApplied {
		// A write that moved nothing but the generation (a sealed
		// partition's empty last page, promoted on every poll).
		o.s.stats.NoopPromotions++
		if !p.sealed {
			o.s.stats.NoopUnsealed++
		}
	}
	o.promoted[r] = true
	o.truth(CheckBinding, fmt.Sprintf("promotion of witness %s into g%d", w.AttemptID, cp.Generation), p.name, w.Events, len(w.Events))
}

// coalesced checks a promotion that moved several generations in one write
// (coalescing): a chain of durable witnesses, one per generation from
// last's, each fetched from the successor of the one before (the first from
// last's cursor), the last one named by cp and holding cp's cursor as its
// successor, every event of each with a terminal outcome. Each page's
// successor must be bound to its own witness.
//
// The checkpoint names only the last witness of the chain. Where two
// lanes recorded different witnesses for one generation from the same
// cursor (a page that shifted between their fetches), the oracle cannot
// tell which one the promoting lane delivered, so it accepts the promotion
// when some chain is delivered throughout, exactly as a one-generation
// promotion is judged by its own witness. Candidates are tried in attempt
// order so that a schedule's verdict does not depend on map order.
func (o *oracle) coalesced(p *part, last, cp store.Checkpoint) {
	k := cp.Generation - last.Generation
	if strings.Contains(cp.PromotedWitness, ":") {
		o.violate(CheckBinding, "partition %s: restart or repair %s moved %d generations", p.name, cp.PromotedWitness, k)
		return
	}
	refs := slices.SortedFunc(maps.Keys(o.witnesses), func(a, b wref) int { return strings.Compare(a.attempt, b.attempt) })
	var find func(gen uint64, cursor []byte, delivered bool) []*reconcile.Witness
	find = func(gen uint64, cursor []byte, delivered bool) []*reconcile.Witness {
		for _, ref := range refs {
			w := o.witnesses[ref]
			if ref.part != p.name || ref.gen != gen || !bytes.Equal(w.InputCursor, cursor) {
				continue
			}
			if delivered && !o.terminal(p, w.Events) {
				continue
			}
			if gen == cp.Generation-1 {
				// The last page: its successor is the new cursor, or it is
				// the last page of a finite traversal and the partition
				// completes at its own cursor.
				ends := len(w.Successor) == 0 && cp.Complete && bytes.Equal(cp.Cursor, w.InputCursor)
				if ref.attempt == cp.PromotedWitness && (bytes.Equal(w.Successor, cp.Cursor) || ends) {
					return []*reconcile.Witness{w}
				}
				continue
			}
			if len(w.Successor) == 0 {
				continue
			}
			if rest := find(gen+1, w.Successor, delivered); rest != nil {
				return append([]*reconcile.Witness{w}, rest...)
			}
		}
		return nil
	}
	chain := find(last.Generation, last.Cursor, true)
	if chain == nil {
		// No delivered chain: name the undelivered event of a chain that
		// exists, or report that none does.
		chain = find(last.Generation, last.Cursor, false)
	}
	if chain == nil {
		o.violate(CheckBinding, "partition %s: one write moved from g%d (%s) to g%d (%s, witness %s), and no chain of durable witnesses, each fetched from its predecessor's successor, leads there",
			p.name, last.Generation, curString(last.Cursor), cp.Generation, curString(cp.Cursor), cp.PromotedWitness)
		return
	}
	o.s.stats.Transitions += int(k)
	o.s.stats.Coalesced++
	if cp.Complete && !last.Complete {
		o.s.stats.Completions++
	}
	for _, w := range chain {
		o.promoted[wref{p.name, w.Generation, w.AttemptID}] = true
		o.truth(CheckBinding, fmt.Sprintf("coalesced promotion of witness %s into g%d", w.AttemptID, cp.Generation), p.name, w.Events, len(w.Events))
	}
}

// terminal reports whether every event of a witness is one the provider
// issued and has a terminal outcome at the sink.
func (o *oracle) terminal(p *part, events []reconcile.EventWitness) bool {
	for _, e := range events {
		log, k := issued(p, e)
		if k < 0 || !log.events[k].acked {
			return false
		}
	}
	return true
}

func (o *oracle) membership() {
	s := o.s
	m, err := s.mem.LoadMembership(bg, s.scope)
	if err != nil {
		o.violate(CheckModel, "cannot read membership: %v", err)
		return
	}
	if m.Epoch == o.lastM.Epoch {
		return
	}
	if m.Epoch < o.lastM.Epoch {
		o.violate(CheckMembership, "membership epoch went from %d to %d", o.lastM.Epoch, m.Epoch)
		return
	}
	o.epochs[m.Epoch] = m
	o.lastM = m
	for name := range s.everMember {
		if !slices.Contains(m.Partitions, name) && !slices.Contains(m.Unproven, name) {
			o.removedProven[name] = true
		}
	}
	for _, name := range m.Partitions {
		s.everMember[name] = true
	}
}

// vectorEntry checks that a published vector entry claims no more than is
// complete: it does not exceed the partition's durable watermark, and
// every event of the partition at or below it has a terminal outcome.
func (o *oracle) vectorEntry(f store.Frontier, name string, w coord.Watermark) {
	s := o.s
	if w.IsZero() {
		return
	}
	cp, err := s.mem.LoadCheckpoint(bg, store.Key{Scope: s.scope, Partition: name})
	switch {
	case err == nil && cp.IncarnationEpoch > f.Epoch:
		// The checkpoint has moved on to a later incarnation, in a later
		// epoch: the entry is about the one it left.
	case err != nil || cp.Watermark.IsZero():
		o.violate(CheckMonotone, "vector entry %s=%s published in epoch %d, but %s has no durable watermark", name, w, f.Epoch, name)
		return
	default:
		if c, err := cp.Watermark.Compare(w); err != nil || c < 0 {
			o.violate(CheckMonotone, "vector entry %s=%s published in epoch %d exceeds its durable watermark %s", name, w, f.Epoch, cp.Watermark)
		}
	}
	if p := s.part(name); p != nil {
		p = o.at(p, f.Epoch)
		if n, ok := p.ord(w); ok {
			o.belowWatermark(p, n+1, cp.Finality.String(), "its published vector entry of epoch %d is %s", f.Epoch, w)
		}
	}
}

// publishedDurable is CheckPublication: a published vector entry is a
// watermark its partition's checkpoint held durably at some point (the
// publisher publishes what promotions made durable, never a promotion
// still in flight or one that failed).
func (o *oracle) publishedDurable(f store.Frontier, name string, w coord.Watermark) {
	if w.IsZero() {
		return
	}
	h, ok := o.highest[name]
	if !ok || h.IsZero() {
		o.violate(CheckPublication, "vector entry %s=%s published in epoch %d, yet %s never held a durable watermark: published before its promotion", name, w, f.Epoch, name)
		return
	}
	if c, err := h.Compare(w); err == nil && c < 0 {
		o.violate(CheckPublication, "vector entry %s=%s published in epoch %d is above every watermark %s ever held durably (%s at most): published before its promotion", name, w, f.Epoch, name, h)
	}
}

func (o *oracle) frontier() {
	s := o.s
	f, err := s.mem.LoadFrontier(bg, s.scope)
	if errors.Is(err, store.ErrNotFound) {
		return
	}
	if err != nil {
		o.violate(CheckModel, "cannot read frontier: %v", err)
		return
	}
	if o.hasF {
		prev := o.lastF
		switch {
		case f.Epoch < prev.Epoch:
			o.violate(CheckMonotone, "published epoch went from %d to %d", prev.Epoch, f.Epoch)
		case f.Epoch == prev.Epoch && !prev.Scalar.IsZero() && f.Scalar.IsZero():
			o.violate(CheckMonotone, "published scalar %s withdrawn within epoch %d", prev.Scalar, f.Epoch)
		case f.Epoch == prev.Epoch && f.Scalar.Less(prev.Scalar):
			o.violate(CheckMonotone, "published scalar went from %s to %s within epoch %d", prev.Scalar, f.Scalar, f.Epoch)
		case f.Epoch == prev.Epoch:
			for _, name := range slices.Sorted(maps.Keys(prev.Vector)) {
				was, now := prev.Vector[name], f.Vector[name]
				if was.IsZero() {
					continue
				}
				if c, err := now.Compare(was); err != nil || c < 0 {
					o.violate(CheckMonotone, "published vector entry of %s went from %s to %s within epoch %d", name, was, now, f.Epoch)
				}
			}
		}
	}
	o.lastF, o.hasF = f, true
	m, ok := o.epochs[f.Epoch]
	if !ok {
		o.violate(CheckMembership, "frontier published for epoch %d, which has no membership record", f.Epoch)
		return
	}
	if len(f.Vector) != len(m.Partitions) {
		o.violate(CheckMembership, "frontier of epoch %d has a vector of %d partitions, the epoch has %v", f.Epoch, len(f.Vector), m.Partitions)
	}
	for _, name := range m.Partitions {
		w, ok := f.Vector[name]
		if !ok {
			o.violate(CheckMembership, "frontier of epoch %d has no vector entry for member %s", f.Epoch, name)
			continue
		}
		o.publishedDurable(f, name, w)
		o.vectorEntry(f, name, w)
	}
	if f.Scalar.IsZero() {
		return
	}
	if !m.Proven {
		o.violate(CheckMembership, "scalar %s published in epoch %d, whose membership change is unproven (%s)", f.Scalar, f.Epoch, m.Reason)
	}
	for _, name := range m.Partitions {
		cp, err := s.mem.LoadCheckpoint(bg, store.Key{Scope: s.scope, Partition: name})
		if err != nil {
			o.violate(CheckMonotone, "scalar %s published in epoch %d, but member %s has no checkpoint", f.Scalar, f.Epoch, name)
			continue
		}
		if cp.IncarnationEpoch <= f.Epoch && (cp.Watermark.IsZero() || cp.Watermark.Less(f.Scalar)) {
			o.violate(CheckMonotone, "scalar %s published in epoch %d exceeds member %s's durable watermark %s", f.Scalar, f.Epoch, name, cp.Watermark)
		}
		if p := s.part(name); p != nil {
			p = o.at(p, f.Epoch)
			if n, ok := p.ord(f.Scalar); ok {
				o.belowWatermark(p, n+1, cp.Finality.String(), "the published scalar of epoch %d is %s", f.Epoch, f.Scalar)
			} else {
				o.violate(CheckModel, "scalar %s published in epoch %d is not in member %s's coordinate", f.Scalar, f.Epoch, name)
			}
		}
	}
	for _, p := range s.parts {
		p = o.at(p, f.Epoch)
		if n, ok := p.ord(f.Scalar); ok && o.removedProven[p.name] {
			o.below(p, n+1, "it left the membership with proof, and the published scalar of epoch %d is %s", f.Epoch, f.Scalar)
		}
	}
}
