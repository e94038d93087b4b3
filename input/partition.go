package input

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/tidemark/tidemark/input/provider"
	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/witness"
)

// page is one fetched response travelling through a partition's chain, from
// its witness write to its promotion.
type page struct {
	chain      uint64 // the chain incarnation that fetched it
	fromCursor []byte
	fromGen    uint64
	w          witness.Witness
	verdict    verdict
	decision   witness.Promotion // set when the core decided to promote

	spans      []span // emitted batches: event index ranges
	spanAcked  []bool
	ackedUpTo  int // leading events with a terminal outcome (receipts)
	receiptAt  int // AckedThrough last written to the store
	nacked     bool
	nackReason error
}

type span struct{ from, to int }

// complete reports whether every event of the page has a terminal outcome.
func (pg *page) complete() bool { return pg.ackedUpTo >= len(pg.w.Events) }

// ackEvent is one ack or nack of one emitted batch.
type ackEvent struct {
	pg   *page
	span int
	err  error
}

type fetchResult struct {
	chain   uint64
	cursor  []byte
	gen     uint64
	attempt int
	resp    witness.Response
	err     error
}

// partition owns one partition's chain of in-flight pages. Only its run
// goroutine touches its state; acks arrive through ackQ.
type partition struct {
	in  *paginatedInput
	key store.Key
	log *service.Logger
	// lease is the lease this worker runs under (nil without leases; see
	// lease.go): its writes are fenced by it, its messages carry it.
	lease *leaseHolder

	ackMu   sync.Mutex
	ackQ    []ackEvent
	ackWake chan struct{}

	// state of the current chain, owned by run.
	cp       store.Checkpoint
	chainID  uint64
	chain    []*page
	prior    map[uint64][]witness.Witness // witnesses by generation, loaded and written
	fetching bool
	tailCur  []byte
	tailGen  uint64
	// tailApplied is the applied boundary the checkpoint will hold when the
	// tail's generation becomes durable.
	tailApplied    int64
	tailHasApplied bool
	// tailWatermark is the complete-through watermark the checkpoint will
	// hold when the tail's generation becomes durable: what a fetch of the
	// tail's cursor is requested with, so every fetch of one (cursor,
	// generation) sees the same watermark.
	tailWatermark coord.Watermark
	// promotedEvents are the events of the witness whose successor is the
	// durable cursor: all durable, the receipts a retry of that cursor is
	// checked against.
	promotedEvents []witness.EventWitness
	// restarts counts restarts from a boundary since the last promotion of
	// a real response; it sets the back-off and, past maxRestarts, parks.
	restarts int
	extend   bool // whether the tail may be fetched past
	done     bool
	outbox   []emission
	results  chan fetchResult
	pollAt   time.Time
}

type emission struct {
	batch service.MessageBatch
	ack   service.AckFunc
}

func newPartition(in *paginatedInput, name string) *partition {
	return &partition{
		in:      in,
		key:     store.Key{Scope: in.cfg.Scope, Partition: name},
		log:     in.log.With("partition", name, "scope", in.cfg.Scope),
		ackWake: make(chan struct{}, 1),
		results: make(chan fetchResult, 1),
	}
}

func (p *partition) enqueueAck(e ackEvent) {
	p.ackMu.Lock()
	p.ackQ = append(p.ackQ, e)
	p.ackMu.Unlock()
	select {
	case p.ackWake <- struct{}{}:
	default:
	}
}

func (p *partition) takeAcks() []ackEvent {
	p.ackMu.Lock()
	q := p.ackQ
	p.ackQ = nil
	p.ackMu.Unlock()
	return q
}

// errRestartChain ends the current chain; run reloads the checkpoint and
// starts a new one.
var errRestartChain = errors.New("restart chain")

// run drives the partition until ctx ends.
func (p *partition) run(ctx context.Context) {
	defer p.in.partitionStopped(p)
	for ctx.Err() == nil {
		if err := p.load(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			p.log.Errorf("Partition %s cannot load its checkpoint, not advancing: %v", p.key.Partition, err)
			p.sleep(ctx, p.in.cfg.StoreBackoff)
			continue
		}
		if p.cp.Parked != "" {
			p.waitUnparked(ctx)
			continue
		}
		if p.cp.Complete {
			p.done = true
			p.log.Infof("Partition %s is complete (durably, at generation %d) through %s: nothing is read again", p.key.Partition, p.cp.Generation, p.cp.Watermark)
			p.in.partitionDone(p)
			<-ctx.Done()
			return
		}
		err := p.runChain(ctx)
		if ctx.Err() != nil {
			return
		}
		if p.done {
			p.log.Infof("Partition %s is complete through %s", p.key.Partition, p.cp.Watermark)
			p.in.partitionDone(p)
			<-ctx.Done()
			return
		}
		if err != nil && !errors.Is(err, errRestartChain) {
			p.log.Errorf("Partition %s chain stopped: %v", p.key.Partition, err)
			p.sleep(ctx, p.in.cfg.StoreBackoff)
		}
	}
}

func (p *partition) sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// load reads (or creates) the durable checkpoint and the witnesses a
// previous incarnation may have left for the generations ahead.
func (p *partition) load(ctx context.Context) error {
	cp, err := p.in.store.LoadCheckpoint(ctx, p.key)
	if errors.Is(err, store.ErrNoCheckpoint) {
		cp, err = p.in.store.CreateCheckpoint(ctx, store.Checkpoint{
			Key: p.key, Cursor: p.in.cfg.StartCursor, Generation: 1, Epoch: p.in.epoch(),
		})
		var fe *store.FenceError
		if errors.As(err, &fe) && fe.Winner != nil {
			cp, err = *fe.Winner, nil
		}
	}
	if err != nil {
		return err
	}
	// One query for every witness an earlier incarnation (or an earlier
	// chain) left at or above the generation before the durable one;
	// afterwards the map is complete, so pages in steady state need no
	// reads. The promoted witness of the generation before is the durable
	// cursor's receipts; the other pending witnesses of that generation lost
	// and are marked abandoned (again, if an earlier incarnation could not).
	from := max(cp.Generation, 2) - 1
	ws, err := p.in.store.WitnessesFrom(ctx, p.key, from)
	if err != nil {
		return err
	}
	p.cp = cp
	p.prior = map[uint64][]witness.Witness{}
	p.promotedEvents = nil
	var older []witness.Witness
	for _, w := range ws {
		switch {
		case w.Generation >= cp.Generation:
			p.prior[w.Generation] = append(p.prior[w.Generation], w)
		case w.AttemptID == cp.PromotedWitness:
			p.promotedEvents = w.Events
		default:
			older = append(older, w)
		}
	}
	for _, id := range witness.Abandon(witnessCheckpoint(cp), older) {
		p.setAbandoned(ctx, from, id)
	}
	p.in.observeCheckpoint(cp)
	return nil
}

// receiptsFor returns the durable (or, for a page fetched ahead, soon
// durable) receipts a response for generation gen is checked against: the
// events of the witness whose successor is its cursor.
func (p *partition) receiptsFor(gen uint64) []witness.EventWitness {
	if gen == p.cp.Generation {
		return p.promotedEvents
	}
	for _, pg := range p.chain {
		if pg.fromGen+1 == gen {
			return pg.w.Events
		}
	}
	return nil
}

// priorWitnesses returns the witnesses recorded for (cursor, gen).
func (p *partition) priorWitnesses(cursor []byte, gen uint64) []witness.Witness {
	ws := p.prior[gen] // complete since load: see load
	var out []witness.Witness
	for _, w := range ws {
		if string(w.InputCursor) == string(cursor) {
			out = append(out, w)
		}
	}
	return out
}

func (p *partition) rememberWitness(w witness.Witness) {
	ws := p.prior[w.Generation]
	for i := range ws {
		if ws[i].AttemptID == w.AttemptID {
			ws[i] = w
			return
		}
	}
	p.prior[w.Generation] = append(ws, w)
}

// runChain fetches, emits and promotes pages from the loaded checkpoint
// until the chain must restart.
func (p *partition) runChain(ctx context.Context) error {
	p.chainID++
	p.chain = nil
	p.outbox = nil
	p.tailCur = p.cp.Cursor
	p.tailGen = p.cp.Generation
	p.tailApplied, p.tailHasApplied = p.cp.Applied, p.cp.HasApplied
	p.tailWatermark = p.cp.Watermark
	p.extend = true
	p.pollAt = time.Time{}
	// Pages of an earlier chain may still be acked; their acks are ignored.
	p.takeAcks()

	for {
		if p.done && len(p.chain) == 0 {
			return nil
		}
		p.maybeFetch(ctx)

		var out chan emission
		var head emission
		if len(p.outbox) > 0 {
			out = p.in.out
			head = p.outbox[0]
		}
		var poll <-chan time.Time
		if !p.fetching && p.extend && !p.pollAt.IsZero() && len(p.chain) < p.in.cfg.MaxPagesInFlight {
			d := time.Until(p.pollAt)
			if d < 0 {
				d = 0
			}
			t := time.NewTimer(d)
			poll = t.C
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case out <- head:
			p.outbox = p.outbox[1:]
		case r := <-p.results:
			p.fetching = false
			if r.chain != p.chainID {
				continue // a fetch of an abandoned chain
			}
			if err := p.onFetched(ctx, r); err != nil {
				return err
			}
		case <-p.ackWake:
			if err := p.onAcks(ctx, p.takeAcks()); err != nil {
				return err
			}
		case <-poll:
			p.pollAt = time.Time{}
		}
	}
}

// maybeFetch starts the next fetch when the chain has room.
func (p *partition) maybeFetch(ctx context.Context) {
	if p.fetching || !p.extend || p.done || len(p.chain) >= p.in.cfg.MaxPagesInFlight {
		return
	}
	if !p.pollAt.IsZero() && time.Now().Before(p.pollAt) {
		return
	}
	p.pollAt = time.Time{}
	p.fetching = true
	cursor, gen, chainID := p.tailCur, p.tailGen, p.chainID
	attempt := len(p.prior[gen])
	wm := p.tailWatermark
	go func() {
		resp, err := p.in.fetchWithRetry(ctx, p, provider.Request{
			Scope: p.key.Scope, Partition: p.key.Partition, Cursor: cursor, Watermark: wm, Attempt: attempt,
		})
		select {
		case p.results <- fetchResult{chain: chainID, cursor: cursor, gen: gen, attempt: attempt, resp: resp, err: err}:
		case <-ctx.Done():
		}
	}()
}

// onFetched reconciles one response: build its witness, classify it
// against the earlier witnesses of its (cursor, generation), make the
// witness durable, then emit the events that still need an outcome.
func (p *partition) onFetched(ctx context.Context, r fetchResult) error {
	if r.err != nil {
		return p.onFetchError(ctx, r)
	}
	prior := p.priorWitnesses(r.cursor, r.gen)
	v, err := p.in.reconcile(p, r, prior)
	if err != nil {
		return p.park(ctx, fmt.Sprintf("malformed page at generation %d cursor %s: %v", r.gen, cursorHash(r.cursor), err))
	}
	p.in.metrics.retryClass(v.class)
	if v.idle {
		// An empty response that loops to its own cursor: nothing to record
		// or emit; poll again. With everything before it promoted and the
		// provider saying nothing follows, the partition is complete.
		if v.final && p.in.cfg.ExitWhenComplete && len(p.chain) == 0 {
			p.done = true
			return nil
		}
		p.pollAt = time.Now().Add(p.in.cfg.PollInterval)
		return nil
	}
	if v.diverged {
		return p.recover(ctx, fmt.Sprintf("unprovable divergence at generation %d cursor %s: %s", r.gen, cursorHash(r.cursor), v.reason))
	}
	pg := &page{chain: p.chainID, fromCursor: r.cursor, fromGen: r.gen, w: v.w, verdict: v, ackedUpTo: v.w.AckedThrough, receiptAt: v.w.AckedThrough}
	p.chain = append(p.chain, pg)
	p.in.metrics.pagesFetched.Incr(1)

	if v.promotable && !v.final && len(pg.w.Successor) > 0 && !bytes.Equal(pg.w.Successor, r.cursor) {
		// The successor may follow this page: fetch ahead, before the
		// witness write below, so the store's latency is not on the
		// fetch path (a fetch of a chain that then fails is discarded).
		p.tailCur, p.tailGen = pg.w.Successor, r.gen+1
		for _, e := range pg.w.Events {
			p.tailApplied, p.tailHasApplied = max(e.Position, p.tailApplied), true
		}
		if ct := pg.w.CompleteThrough; !ct.IsZero() && (p.tailWatermark.IsZero() || p.tailWatermark.Less(ct)) {
			p.tailWatermark = ct
		}
		p.maybeFetch(ctx)
	} else {
		// No successor may be fetched past a page that cannot be promoted
		// (or that ends the partition): re-poll its cursor once the chain
		// drains to it.
		p.extend = false
	}

	// Witness first: durable before any event attributed to it leaves the
	// input. An empty response that cannot be promoted carries no event and
	// no successor we may use, so it is not recorded.
	if v.fresh && (len(pg.w.Events) > 0 || v.promotable) {
		if err := p.putWitness(ctx, pg.w); err != nil {
			return err
		}
		p.rememberWitness(pg.w)
	}
	p.emit(pg, v.payloads)
	return p.promoteHead(ctx)
}

func (p *partition) putWitness(ctx context.Context, w witness.Witness) error {
	for {
		err := p.in.store.PutWitness(ctx, w)
		if err == nil {
			return nil
		}
		if errors.Is(err, store.ErrInvalid) {
			return p.park(ctx, fmt.Sprintf("witness of generation %d cannot be stored: %v", w.Generation, err))
		}
		p.log.Warnf("Partition %s cannot record the witness of generation %d (attempt %s), not emitting: %v", p.key.Partition, w.Generation, w.AttemptID, err)
		p.sleep(ctx, p.in.cfg.StoreBackoff)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// emit queues the events of pg that lack a terminal outcome, split into
// batches of at most MaxBatchSize.
func (p *partition) emit(pg *page, payloads [][]byte) {
	n := len(pg.w.Events)
	size := p.in.cfg.MaxBatchSize
	if size <= 0 {
		size = n
	}
	for from := pg.ackedUpTo; from < n; from += size {
		to := min(from+size, n)
		idx := len(pg.spans)
		pg.spans = append(pg.spans, span{from, to})
		pg.spanAcked = append(pg.spanAcked, false)
		batch := make(service.MessageBatch, 0, to-from)
		for i := from; i < to; i++ {
			batch = append(batch, p.in.message(p, pg, i, payloads[i]))
		}
		p.outbox = append(p.outbox, emission{batch: batch, ack: func(_ context.Context, err error) error {
			p.enqueueAck(ackEvent{pg: pg, span: idx, err: err})
			return nil
		}})
		p.in.metrics.eventsEmitted.Incr(int64(to - from))
	}
}

func (p *partition) onAcks(ctx context.Context, acks []ackEvent) error {
	for _, a := range acks {
		pg := a.pg
		if pg.chain != p.chainID {
			continue
		}
		if a.err != nil {
			if !pg.nacked {
				p.log.Warnf("Partition %s: delivery of generation %d events %d-%d failed, the page will be fetched again: %v",
					p.key.Partition, pg.fromGen, pg.spans[a.span].from, pg.spans[a.span].to-1, a.err)
			}
			pg.nacked = true
			pg.nackReason = a.err
			p.extend = false
			continue
		}
		pg.spanAcked[a.span] = true
		// Extend the contiguous prefix of events with terminal outcomes.
		for i, s := range pg.spans {
			if s.to <= pg.ackedUpTo {
				continue
			}
			if s.from != pg.ackedUpTo || !pg.spanAcked[i] {
				break
			}
			pg.ackedUpTo = s.to
		}
	}
	return p.promoteHead(ctx)
}

// promoteHead promotes, strictly in page order, every leading page whose
// events all have a terminal outcome; records receipts for partly
// acknowledged heads; restarts the chain on a nacked head.
func (p *partition) promoteHead(ctx context.Context) error {
	for len(p.chain) > 0 {
		pg := p.chain[0]
		if pg.nacked {
			// Re-fetch the head's cursor: the retry is classified against
			// this page's witness (and its receipts).
			if err := p.writeReceipt(ctx, pg); err != nil {
				return err
			}
			p.log.Infof("Partition %s re-fetching cursor %s at generation %d after a failed delivery", p.key.Partition, cursorHash(pg.fromCursor), pg.fromGen)
			return errRestartChain
		}
		if !pg.complete() {
			return p.writeReceipt(ctx, pg)
		}
		pg.w.AckedThrough = len(pg.w.Events)
		d := p.in.decidePromotion(p, pg)
		switch d.Action {
		case witness.Refuse:
			return p.recover(ctx, fmt.Sprintf("promotion of attempt %s refused: %s", pg.w.AttemptID, d.Reason))
		case witness.Hold:
			// Every event delivered, but no evidence to move past it (or
			// nothing would change): keep the witness pending and poll the
			// same cursor again, or stop if the partition is caught up. The
			// receipts are recorded first, so the next poll's exact replay
			// resumes the witness with every event done and emits nothing.
			if err := p.writeReceipt(ctx, pg); err != nil {
				return err
			}
			p.chain = p.chain[1:]
			if p.ended(pg) {
				p.done = true
				return nil
			}
			p.log.Debugf("Partition %s holds at generation %d: %s", p.key.Partition, pg.fromGen, d.Reason)
			p.tailCur, p.tailGen = p.cp.Cursor, p.cp.Generation
			p.tailApplied, p.tailHasApplied = p.cp.Applied, p.cp.HasApplied
			p.tailWatermark = p.cp.Watermark
			if len(p.chain) > 0 {
				// Pages fetched past a held page were fetched from a
				// successor that is not durable: abandon them (their events
				// may repeat, never go missing).
				p.chainID++
				p.chain, p.outbox, p.fetching = nil, nil, false
			}
			p.extend = true
			p.pollAt = time.Now().Add(p.in.cfg.PollInterval)
			return nil
		}
		pg.decision = d.Promotion
		if err := p.promote(ctx, pg); err != nil {
			return err
		}
		p.chain = p.chain[1:]
		if p.ended(pg) {
			p.done = true
			p.chain = nil
			return nil
		}
		if len(p.chain) == 0 && !p.extend && !p.fetching {
			// The promoted page could not be fetched past (no successor,
			// its own cursor again, or the end of the data for now): poll
			// the new durable cursor.
			p.tailCur, p.tailGen = p.cp.Cursor, p.cp.Generation
			p.tailApplied, p.tailHasApplied = p.cp.Applied, p.cp.HasApplied
			p.tailWatermark = p.cp.Watermark
			p.extend = true
			p.pollAt = time.Now().Add(p.in.cfg.PollInterval)
		}
	}
	return nil
}

// ended reports whether the partition stops after pg: its checkpoint is
// durably complete (the provider sealed it, or its finite traversal ended),
// or it is caught up on evidence bound to pg and the input exits when every
// partition is.
func (p *partition) ended(pg *page) bool {
	return p.cp.Complete || (pg.verdict.final && p.in.cfg.ExitWhenComplete)
}

func (p *partition) writeReceipt(ctx context.Context, pg *page) error {
	if pg.ackedUpTo <= pg.receiptAt {
		return nil
	}
	err := p.in.store.RecordReceipt(ctx, p.key, pg.fromGen, pg.w.AttemptID, pg.ackedUpTo)
	if err != nil {
		// A receipt only saves duplicates on replay; losing it loses no
		// event.
		p.log.Warnf("Partition %s: receipt for generation %d not recorded (events may repeat on retry): %v", p.key.Partition, pg.fromGen, err)
		return nil
	}
	pg.receiptAt = pg.ackedUpTo
	pg.w.AckedThrough = pg.ackedUpTo
	p.rememberWitness(pg.w)
	return nil
}

// promote performs the one conditional write that moves the checkpoint from
// the page's input cursor to its successor.
func (p *partition) promote(ctx context.Context, pg *page) error {
	prom := p.in.storePromotion(p, pg.decision)
	for {
		cp, err := p.in.store.Promote(ctx, prom)
		if err == nil {
			p.promoted(ctx, pg, cp)
			return nil
		}
		var fe *store.FenceError
		if errors.As(err, &fe) {
			p.in.metrics.casConflicts.Incr(1)
			p.log.Warnf("Partition %s lost the promotion from generation %d (attempt %s): %v; re-reading the winner", p.key.Partition, pg.fromGen, pg.w.AttemptID, err)
			// Abandon the witness only when the winner shows another
			// response promoted from its (cursor, generation). A park or a
			// lease change leaves (C, G) in place: the witness stays
			// pending and is resumed by the next exact replay.
			if lostTo(fe.Winner, pg) {
				p.abandon(ctx, pg)
			}
			return errRestartChain
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// The write's outcome is unknown: resolve it by reading, never by
		// writing again blindly.
		p.log.Warnf("Partition %s: promotion from generation %d has an unknown outcome, reading back: %v", p.key.Partition, pg.fromGen, err)
		for {
			cp, applied, rerr := store.ResolvePromotion(ctx, p.in.store, prom)
			if rerr == nil {
				if applied {
					p.promoted(ctx, pg, cp)
					return nil
				}
				if !prom.StillAt(cp) {
					// Overtaken. Our witness lost only if the promotion out
					// of its generation names another witness; a checkpoint
					// that has moved further says nothing about it, so it
					// stays pending.
					if lostTo(&cp, pg) {
						p.abandon(ctx, pg)
					}
					return errRestartChain
				}
				break // not applied, still ours to promote: write again
			}
			p.log.Warnf("Partition %s: cannot read back the checkpoint, not advancing: %v", p.key.Partition, rerr)
			p.sleep(ctx, p.in.cfg.StoreBackoff)
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
	}
}

func (p *partition) promoted(ctx context.Context, pg *page, cp store.Checkpoint) {
	p.cp = cp
	p.promotedEvents = pg.w.Events
	p.restarts = 0
	pg.w.Disposition = witness.Promoted
	p.rememberWitness(pg.w)
	p.in.metrics.promotions.Incr(1)
	p.in.observeCheckpoint(cp)
	// Other pending witnesses of the same (cursor, generation) lost.
	for _, w := range p.prior[pg.fromGen] {
		if w.AttemptID != pg.w.AttemptID && w.Disposition == witness.Pending && string(w.InputCursor) == string(pg.fromCursor) {
			if err := p.in.store.SetDisposition(ctx, p.key, w.Generation, w.AttemptID, witness.Abandoned); err != nil && !errors.Is(err, store.ErrFenced) {
				p.log.Debugf("Partition %s: marking witness %s abandoned: %v", p.key.Partition, w.AttemptID, err)
			}
		}
	}
	delete(p.prior, pg.fromGen)
}

// lostTo reports whether the observed checkpoint proves that another
// response than pg's won the promotion out of pg's generation: it is the
// very next generation and names another witness.
func lostTo(winner *store.Checkpoint, pg *page) bool {
	return winner != nil && winner.Generation == pg.fromGen+1 && winner.PromotedWitness != pg.w.AttemptID
}

func (p *partition) abandon(ctx context.Context, pg *page) {
	p.setAbandoned(ctx, pg.fromGen, pg.w.AttemptID)
}

// setAbandoned marks a witness abandoned. Dispositions are hints that only
// save classification work: "promoted" is never stored (the checkpoint's
// promoted witness says it), "abandoned" is redone on the next load when a
// write is lost.
func (p *partition) setAbandoned(ctx context.Context, gen uint64, attempt string) {
	if err := p.in.store.SetDisposition(ctx, p.key, gen, attempt, witness.Abandoned); err != nil && !errors.Is(err, store.ErrFenced) {
		p.log.Debugf("Partition %s: marking witness %s abandoned: %v", p.key.Partition, attempt, err)
	}
}

func (p *partition) onFetchError(ctx context.Context, r fetchResult) error {
	var exp *provider.ExpiredError
	var mal *provider.MalformedError
	switch {
	case errors.As(r.err, &exp):
		p.in.metrics.fetchErrors.Incr(1)
		return p.recover(ctx, fmt.Sprintf("cursor %s expired: %s", cursorHash(r.cursor), exp.Reason))
	case errors.As(r.err, &mal):
		p.in.metrics.fetchErrors.Incr(1)
		return p.park(ctx, fmt.Sprintf("malformed page at generation %d cursor %s: %s", r.gen, cursorHash(r.cursor), mal.Error()))
	case errors.Is(r.err, provider.ErrPermanent):
		p.in.metrics.fetchErrors.Incr(1)
		return p.park(ctx, fmt.Sprintf("fetch of cursor %s failed permanently: %v", cursorHash(r.cursor), r.err))
	case errors.Is(r.err, context.Canceled) && ctx.Err() != nil:
		return ctx.Err()
	default:
		// Transient failures were already retried with back-off; keep the
		// partition where it is and try again.
		p.in.metrics.fetchErrors.Incr(1)
		p.log.Warnf("Partition %s: fetch of cursor %s failed, not advancing: %v", p.key.Partition, cursorHash(r.cursor), r.err)
		p.pollAt = time.Now().Add(p.in.cfg.PollInterval)
		return nil
	}
}

// maxRestarts is how many restarts from a boundary in a row, without a
// response promoted in between, a partition makes before it parks;
// maxRestartBackoff caps the wait before each of them.
const (
	maxRestarts       = 8
	maxRestartBackoff = 30 * time.Second
)

// recover applies the contract's recovery for divergence or expiry: a
// restart from a provider-supported stable boundary (one conditional
// write), or parking.
func (p *partition) recover(ctx context.Context, reason string) error {
	contract := p.in.prov.Contract()
	rs, ok := p.in.prov.(provider.Restarter)
	if contract.Recovery == witness.RecoveryPark || !ok {
		return p.park(ctx, reason)
	}
	p.restarts++
	if p.restarts > maxRestarts {
		return p.park(ctx, fmt.Sprintf("%s; %d restarts from a stable boundary in a row made no progress", reason, maxRestarts))
	}
	// Back off before each further restart without progress, so a boundary
	// that diverges again does not loop at full speed.
	if p.restarts > 1 {
		d := min(p.in.cfg.PollInterval<<(p.restarts-2), maxRestartBackoff)
		p.log.Infof("Partition %s: restart %d without progress, waiting %s first", p.key.Partition, p.restarts, d)
		p.sleep(ctx, d)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	// Drain: the restart happens from the durable checkpoint, so wait for
	// nothing; pages in flight are abandoned (their events may repeat).
	cursor, err := rs.RestartCursor(ctx, p.key.Partition, p.cp.Watermark)
	if err != nil {
		return p.park(ctx, fmt.Sprintf("%s; restart from a stable boundary failed: %v", reason, err))
	}
	p.log.Warnf("Partition %s: %s; restarting from a stable boundary (%s) after generation %d", p.key.Partition, reason, contract.Recovery, p.cp.Generation)
	p.in.metrics.restarts.Incr(1)
	_, err = p.in.store.Promote(ctx, store.Promotion{
		Key: p.key, FromCursor: p.cp.Cursor, FromGeneration: p.cp.Generation,
		To: cursor, WitnessID: "restart:" + contract.Recovery.String(), Epoch: p.in.epoch(), Lease: p.cp.Lease,
	})
	if err != nil && !errors.Is(err, store.ErrFenced) {
		p.log.Warnf("Partition %s: restart write has an unknown outcome, re-reading: %v", p.key.Partition, err)
	}
	return errRestartChain
}

// park stops the partition with a visible reason: in the log, a metric and
// the store. The other partitions go on.
func (p *partition) park(ctx context.Context, reason string) error {
	p.log.Errorf("Partition %s parked: %s", p.key.Partition, reason)
	p.in.metrics.parks.Incr(1)
	for ctx.Err() == nil {
		cp, err := p.in.store.SetParked(ctx, p.key, p.cp.Cursor, p.cp.Generation, p.cp.Lease, reason)
		if err == nil {
			p.cp = cp
			break
		}
		if errors.Is(err, store.ErrFenced) {
			return errRestartChain
		}
		p.log.Warnf("Partition %s: cannot record the park reason: %v", p.key.Partition, err)
		p.sleep(ctx, p.in.cfg.StoreBackoff)
	}
	return errRestartChain
}

func (p *partition) waitUnparked(ctx context.Context) {
	p.in.metrics.setParked(+1)
	defer p.in.metrics.setParked(-1)
	p.log.Warnf("Partition %s is parked (%s); it resumes when the reason is cleared (connect tidemark unpark)", p.key.Partition, p.cp.Parked)
	for ctx.Err() == nil {
		p.sleep(ctx, p.in.cfg.ParkCheckInterval)
		cp, err := p.in.store.LoadCheckpoint(ctx, p.key)
		if err == nil && cp.Parked == "" {
			p.log.Infof("Partition %s unparked at generation %d", p.key.Partition, cp.Generation)
			return
		}
	}
}
