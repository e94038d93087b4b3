package chain

import (
	"errors"
	"strings"

	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/provider"
)

// verdict is the machine's view of one reconciled response.
type verdict struct {
	class    RetryClass
	w        reconcile.Witness // the witness to use (new, or resumed on exact replay)
	core     reconcile.Verdict
	fresh    bool // w must be written before emission
	idle     bool // no answer: nothing to record, poll again
	diverged bool
	reason   string
	// promotable: once every event has a terminal outcome, the response
	// carries completion evidence for its own successor, so the chain may be
	// fetched past it.
	promotable bool
	// final: the partition is caught up for exit_when_complete (caughtUp).
	final bool
	// violations are the contract violations the response shows
	// (monitor.go).
	violations []reconcile.Violation
	// followOnly: an empty response promotable only to follow its successor
	// (empty_page follow_successor): it claims nothing, no watermark.
	followOnly bool
	// refused, when its Kind is set, is the violation for which the page
	// is refused (diverged too): an offset-shaped successor.
	refused reconcile.Violation
}

// reconcile builds the witness of a fetched response and classifies it
// against the earlier witnesses of its (cursor, generation)
// (docs/design.md#retry-classification).
func (m *Machine) reconcile(f *fetchRec, r Fetched) (verdict, error) {
	contract := m.cfg.Contract
	w, err := reconcile.Build(reconcile.BuildInput{
		Scope: m.cfg.Key.Scope, Partition: m.cfg.Key.Partition,
		Generation: f.gen, InputCursor: f.cursor,
		AttemptID: r.Attempt, Response: r.Response, Contract: contract,
		Compact: m.cfg.CompactWitness,
	})
	if errors.Is(err, reconcile.ErrLoop) {
		return verdict{class: ClassIdle, idle: true, final: caughtUp(r.Response, false), reason: err.Error()}, nil
	}
	if errors.Is(err, reconcile.ErrBadResponse) {
		// Wrong on its own (no id or position, a duplicate id, positions
		// out of order or of another kind): a malformed answer, nothing of
		// it recorded.
		return verdict{}, malformedPage{err}
	}
	if err != nil {
		return verdict{}, err
	}
	if contract.Pagination == provider.PaginationOffset {
		// Before anything else, an empty page included: under the overlap
		// check an empty answer to a successor says the page shifted.
		if ct := reconcile.CheckContinuity(m.continuityInput(f, w)); !ct.Continues {
			return verdict{class: ClassUnprovableDivergence, diverged: true, reason: ct.Reason}, nil
		}
	}
	if len(w.Events) == 0 && !reconcile.CanPromote(contract, w).Complete {
		// An empty response without evidence bound to it proves nothing
		// and can never be promoted: its witness would stay pending for
		// ever. Record nothing and poll the cursor again; in particular a
		// transient empty retry of a cursor whose earlier response had
		// events is not divergence, it is no answer.
		return verdict{class: ClassEmptyNoEvidence, idle: true, final: caughtUp(r.Response, false), reason: "empty response without evidence"}, nil
	}
	classify := m.cfg.Classify
	if classify == nil {
		classify = reconcile.Classify
	}
	applied, hasApplied := m.tail.applied, m.tail.hasApplied
	if from, has, ok := m.rereadBoundary(); ok {
		// Under a re-read window the source may show events below the
		// applied boundary, down to the pass's range start: that is the
		// boundary responses are classified against (reread.go).
		applied, hasApplied = from, has
	}
	in := reconcile.ClassifyInput{
		Contract: contract, Applied: applied, HasApplied: hasApplied,
		Prior: m.priorWitnesses(f.cursor, f.gen), Receipts: m.receiptsFor(f.gen), Pending: m.pendingFor(f.gen), Witness: w,
	}
	cv, err := classify(in)
	if err != nil {
		return verdict{}, err
	}
	v := verdict{class: classOf(cv.Class), core: cv, reason: cv.Reason, violations: m.monitorResponse(f, in, cv.Class)}
	if rv, ok := refusing(v.violations); ok {
		// The page was read by an offset (or page number) the contract
		// does not know: rows may have slid past it unseen. Nothing of it
		// is emitted and its successor is never promoted (monitor.go).
		v.diverged, v.refused, v.reason = true, rv, rv.String()
		return v, nil
	}
	if !cv.Advances() {
		v.diverged = true
		return v, nil
	}
	if cv.Class == reconcile.ExactReplay && cv.Resume != nil {
		v.w = cv.Resume.Clone()
	} else {
		v.w = w
		v.w.AckedThrough = cv.Satisfied
		v.fresh = true
	}
	all := v.w
	all.AckedThrough = len(all.Events)
	comp := reconcile.CanPromote(contract, all)
	v.promotable, v.followOnly = comp.Complete, comp.FollowOnly
	// An empty page followed to its successor (follow_successor) is not
	// evidence that the partition is caught up: only its has_more can say so.
	v.final = caughtUp(r.Response, v.promotable && !comp.FollowOnly)
	return v, nil
}

// rejectionKind is the park kind of an error Classify returned for a
// response that contradicts durable evidence.
func rejectionKind(err error) ParkKind {
	switch {
	case errors.Is(err, reconcile.ErrReceiptConflict):
		return ParkReceiptConflict
	case errors.Is(err, reconcile.ErrMoved):
		return ParkMovedEvent
	}
	return ParkUnreconcilable
}

// caughtUp reports whether an empty response says the partition is caught
// up, for exit_when_complete: its emptiness is evidence bound to it
// (evidenced), or the provider states its "more pages" flag and it is
// false. A transient empty page of a source that states neither (has_more
// unmapped, empty_page: no_evidence) never counts.
func caughtUp(r reconcile.Response, evidenced bool) bool {
	return len(r.Events) == 0 && !r.HasMore && (evidenced || r.HasMoreKnown)
}

// receiptsFor returns the durable receipts a response for generation gen
// is checked against: the events of the witness whose successor is the
// durable cursor.
func (m *Machine) receiptsFor(gen uint64) []reconcile.EventWitness {
	if gen == m.cp.Generation {
		return m.promotedEvents
	}
	return nil
}

// pendingFor returns, for a page fetched ahead (gen past the durable
// generation), the events of the chain page whose successor it follows:
// not durable yet, so they satisfy nothing (reconcile.ClassifyInput.Pending).
func (m *Machine) pendingFor(gen uint64) []reconcile.EventWitness {
	if gen == m.cp.Generation {
		return nil
	}
	for _, pg := range m.chain {
		if pg.fromGen+1 == gen {
			return pg.w.Events
		}
	}
	return nil
}

// priorWitnesses returns the witnesses recorded for (cursor, gen): complete
// since the load (see loaded), kept up to date since.
func (m *Machine) priorWitnesses(cursor []byte, gen uint64) []reconcile.Witness {
	var out []reconcile.Witness
	for _, w := range m.prior[gen] {
		if string(w.InputCursor) == string(cursor) {
			out = append(out, w)
		}
	}
	return out
}

func (m *Machine) rememberWitness(w reconcile.Witness) {
	ws := m.prior[w.Generation]
	for i := range ws {
		if ws[i].AttemptID == w.AttemptID {
			ws[i] = w
			return
		}
	}
	m.prior[w.Generation] = append(ws, w)
}

// decide asks the core whether the head page's successor may be promoted
// from the durable checkpoint now.
func (m *Machine) decide(pg *page) reconcile.Decision {
	return reconcile.DecidePromotion(reconcile.PromotionInput{
		Contract:   m.cfg.Contract,
		Checkpoint: witnessCheckpoint(m.cp),
		Witness:    pg.w,
		Verdict:    pg.v.core,
		Witnesses:  m.prior[pg.fromGen],
	})
}

// witnessCheckpoint is the part of a stored checkpoint the core reads.
func witnessCheckpoint(cp store.Checkpoint) reconcile.Checkpoint {
	return reconcile.Checkpoint{
		Scope: cp.Scope, Partition: cp.Partition, Cursor: cp.Cursor, Generation: cp.Generation,
		Applied: cp.Applied, HasApplied: cp.HasApplied, Watermark: cp.Watermark,
		PromotedWitness: cp.PromotedWitness, Parked: cp.Parked, Complete: cp.Complete,
	}
}

// storePromotion turns the core's decision for pg into the store's one
// conditional write.
// cp is the checkpoint it is written over (m.cp, or for a coalesced page
// the checkpoint the pages before it leave).
func (m *Machine) storePromotion(pg *page, d reconcile.Promotion, cp store.Checkpoint) store.Promotion {
	if m.cfg.Leased {
		cp.Lease = m.lease
	}
	return store.Promotion{
		Key:            m.cfg.Key,
		FromCursor:     d.FromCursor,
		FromGeneration: d.FromGeneration,
		To:             d.To,
		WitnessID:      d.WitnessID,
		Watermark:      d.Watermark,
		Finality:       d.Finality,
		Applied:        d.Applied,
		HasApplied:     d.HasApplied,
		AppliedID:      appliedID(pg, d, cp),
		Complete:       d.Complete,
		Epoch:          m.cfg.Epoch,
		Lease:          cp.Lease,
		Incarnation:    m.incarnation,
	}
}

// appliedID is the id of the event at the promotion's applied position:
// the last event of pg at that position, or, when pg has none there (its
// positions lie below the durable boundary), the checkpoint's own. An id
// longer than store.MaxAppliedIDBytes is not recorded.
func appliedID(pg *page, d reconcile.Promotion, cp store.Checkpoint) string {
	if !d.HasApplied {
		return ""
	}
	id := ""
	if cp.HasApplied && cp.Applied == d.Applied {
		id = cp.AppliedID
	}
	for i := len(pg.w.Events) - 1; i >= 0; i-- {
		if pg.w.Events[i].Position == d.Applied && i < len(pg.events) {
			id = pg.events[i].ID
			break
		}
	}
	if len(id) > store.MaxAppliedIDBytes {
		return ""
	}
	return id
}

// lostTo reports whether the observed checkpoint proves that another
// response than pg's won the promotion out of pg's generation: it is the
// very next generation and names another witness.
func lostTo(winner *store.Checkpoint, pg *page) bool {
	return winner != nil && winner.Generation == pg.fromGen+1 && winner.PromotedWitness != pg.w.AttemptID
}

// The witness ids of promotions that no response made: a restart from a
// boundary (the machine's) and an operator's repair (internal/ops). The
// cursor they write is a boundary, not a successor.
const (
	RestartWitnessPrefix = "restart:"
	RepairWitnessPrefix  = "repair:"
)

// continuityInput is what the machine knows of the page a response to f
// must continue (reconcile.CheckContinuity): for a page fetched ahead, the
// chain page whose successor f's cursor is; otherwise the witness promoted
// into the durable checkpoint, or failing that (its witness is gone) the
// checkpoint's applied position and id. A checkpoint that no response
// promoted (the start, a restart or repair) is a boundary.
func (m *Machine) continuityInput(f *fetchRec, w reconcile.Witness) reconcile.ContinuityInput {
	in := reconcile.ContinuityInput{Contract: m.cfg.Contract, Witness: w}
	last := func(evs []reconcile.EventWitness) {
		if n := len(evs); n > 0 {
			in.Previous, in.HasPrevious = evs[n-1], true
		}
	}
	if f.gen != m.cp.Generation {
		for _, pg := range m.chain {
			if pg.fromGen+1 == f.gen {
				last(pg.w.Events)
			}
		}
		return in
	}
	id := m.cp.PromotedWitness
	if id == "" || strings.HasPrefix(id, RestartWitnessPrefix) || strings.HasPrefix(id, RepairWitnessPrefix) {
		in.Boundary = true
		return in
	}
	last(m.promotedEvents)
	if !in.HasPrevious && m.cp.HasApplied && m.cp.AppliedID != "" && !m.cfg.CompactWitness {
		// (A compact witness fingerprints the id with the payload, which
		// the checkpoint does not keep: the boundary event is then known
		// by its position only.)
		in.Previous = reconcile.EventWitness{IDHash: reconcile.HashID(m.cp.AppliedID), Position: m.cp.Applied}
		in.HasPrevious, in.PreviousIDOnly = true, true
	}
	return in
}
