package input

import (
	"errors"

	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/witness"
)

type witnessResponse = witness.Response

// verdict is the input's view of one reconciled response.
type verdict struct {
	class    string
	w        witness.Witness // the witness to use (new, or resumed on exact replay)
	core     witness.Verdict
	fresh    bool // w must be written before emission
	idle     bool // an empty response that loops to its own cursor: nothing to record
	diverged bool
	reason   string
	// promotable: once every event has a terminal outcome, the response
	// carries completion evidence for its own successor, so the chain may be
	// fetched past it.
	promotable bool
	// final: the partition is caught up for exit_when_complete: an empty
	// page with evidence bound to it and no has_more.
	final    bool
	ids      []string
	payloads [][]byte
}

// reconcile builds the witness of a fetched response and classifies it
// against the earlier witnesses of its (cursor, generation).
func (in *paginatedInput) reconcile(p *partition, r fetchResult, prior []witness.Witness) (verdict, error) {
	contract := in.prov.Contract()
	w, err := witness.Build(witness.BuildInput{
		Scope: p.key.Scope, Partition: p.key.Partition,
		Generation: r.gen, InputCursor: r.cursor,
		AttemptID: in.newAttemptID(), Response: r.resp, Contract: contract,
	})
	if errors.Is(err, witness.ErrLoop) {
		return verdict{class: "idle", idle: true, final: caughtUp(r.resp, false), reason: err.Error()}, nil
	}
	if err != nil {
		return verdict{}, err
	}
	if len(w.Events) == 0 && !witness.CanPromote(contract, w).Complete {
		// An empty response without evidence bound to it proves nothing
		// and can never be promoted: its witness would stay pending for
		// ever. Record nothing and poll the cursor again; in particular a
		// transient empty retry of a cursor whose earlier response had
		// events is not divergence, it is no answer.
		return verdict{class: "empty_no_evidence", idle: true, final: caughtUp(r.resp, false), reason: "empty response without evidence"}, nil
	}
	applied, hasApplied := p.tailApplied, p.tailHasApplied
	cv, err := witness.Classify(witness.ClassifyInput{
		Contract: contract, Applied: applied, HasApplied: hasApplied,
		Prior: prior, Receipts: p.receiptsFor(r.gen), Witness: w,
	})
	if err != nil {
		return verdict{}, err
	}
	v := verdict{class: cv.Class.String(), core: cv, reason: cv.Reason}
	if !cv.Advances() {
		v.diverged = true
		return v, nil
	}
	if cv.Class == witness.ExactReplay && cv.Resume != nil {
		v.w = cv.Resume.Clone()
	} else {
		v.w = w
		v.w.AckedThrough = cv.Satisfied
		v.fresh = true
	}
	all := v.w
	all.AckedThrough = len(all.Events)
	v.promotable = witness.CanPromote(contract, all).Complete
	v.final = caughtUp(r.resp, v.promotable)
	v.ids = make([]string, len(r.resp.Events))
	v.payloads = make([][]byte, len(r.resp.Events))
	for i, e := range r.resp.Events {
		v.ids[i], v.payloads[i] = e.ID, e.Payload
	}
	return v, nil
}

// caughtUp reports whether an empty response says the partition is caught
// up, for exit_when_complete: its emptiness is evidence bound to it
// (evidenced), or the provider states its "more pages" flag and it is
// false. A transient empty page of a source that states neither (has_more
// unmapped, empty_page: no_evidence) never counts.
func caughtUp(r witness.Response, evidenced bool) bool {
	return len(r.Events) == 0 && !r.HasMore && (evidenced || r.HasMoreKnown)
}

// decidePromotion asks the core whether the head page's successor may be
// promoted from the durable checkpoint now.
func (in *paginatedInput) decidePromotion(p *partition, pg *page) witness.Decision {
	return witness.DecidePromotion(witness.PromotionInput{
		Contract:   in.prov.Contract(),
		Checkpoint: witnessCheckpoint(p.cp),
		Witness:    pg.w,
		Verdict:    pg.verdict.core,
		Witnesses:  p.prior[pg.fromGen],
	})
}

// witnessCheckpoint is the part of a stored checkpoint the core reads.
func witnessCheckpoint(cp store.Checkpoint) witness.Checkpoint {
	return witness.Checkpoint{
		Scope: cp.Scope, Partition: cp.Partition, Cursor: cp.Cursor, Generation: cp.Generation,
		Applied: cp.Applied, HasApplied: cp.HasApplied, Watermark: cp.Watermark,
		PromotedWitness: cp.PromotedWitness, Parked: cp.Parked, Complete: cp.Complete,
	}
}

// storePromotion turns the core's decision into the store's one
// conditional write.
func (in *paginatedInput) storePromotion(p *partition, d witness.Promotion) store.Promotion {
	return store.Promotion{
		Key:            p.key,
		FromCursor:     d.FromCursor,
		FromGeneration: d.FromGeneration,
		To:             d.To,
		WitnessID:      d.WitnessID,
		Watermark:      d.Watermark,
		Applied:        d.Applied,
		HasApplied:     d.HasApplied,
		Complete:       d.Complete,
		Epoch:          in.epoch(),
		Lease:          p.cp.Lease,
	}
}
