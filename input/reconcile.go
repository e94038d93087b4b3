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
	// final: the provider says nothing follows (sealed, or an empty page
	// without has_more).
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
	// An empty response without has_more (or sealed) says nothing follows,
	// also when it is no answer: exit_when_complete needs that.
	final := r.resp.Sealed || (len(r.resp.Events) == 0 && !r.resp.HasMore)
	if errors.Is(err, witness.ErrLoop) {
		return verdict{class: "idle", idle: true, final: final, reason: err.Error()}, nil
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
		return verdict{class: "empty_no_evidence", idle: true, final: final, reason: "empty response without evidence"}, nil
	}
	applied, hasApplied := p.tailApplied, p.tailHasApplied
	cv, err := witness.Classify(witness.ClassifyInput{
		Contract: contract, Applied: applied, HasApplied: hasApplied,
		Prior: prior, Witness: w,
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
	v.final = r.resp.Sealed || (len(r.resp.Events) == 0 && !r.resp.HasMore)
	v.ids = make([]string, len(r.resp.Events))
	v.payloads = make([][]byte, len(r.resp.Events))
	for i, e := range r.resp.Events {
		v.ids[i], v.payloads[i] = e.ID, e.Payload
	}
	return v, nil
}

// decidePromotion asks the core whether the head page's successor may be
// promoted from the durable checkpoint now.
func (in *paginatedInput) decidePromotion(p *partition, pg *page) witness.Decision {
	cp := p.cp
	return witness.DecidePromotion(witness.PromotionInput{
		Contract: in.prov.Contract(),
		Checkpoint: witness.Checkpoint{
			Scope: cp.Scope, Partition: cp.Partition, Cursor: cp.Cursor, Generation: cp.Generation,
			Applied: cp.Applied, HasApplied: cp.HasApplied, Watermark: cp.Watermark,
			PromotedWitness: cp.PromotedWitness, Parked: cp.Parked,
		},
		Witness:   pg.w,
		Verdict:   pg.verdict.core,
		Witnesses: p.prior[pg.fromGen],
	})
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
		Epoch:          in.epoch(),
		Lease:          p.cp.Lease,
	}
}
