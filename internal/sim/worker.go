package sim

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/witness"
)

// A worker stands for one process running the paginated_partitions input:
// a lane per partition it reads, all lost together when it crashes. A lane
// is input/partition.go's per-partition loop turned into a state machine:
// the same chain of in-flight pages, the same order of core calls and store
// writes, the same reactions to errors. Each step performs at most one
// store call; whatever follows it runs at the lane's next step, so every
// store call is a point where another actor, a fault or a crash can cut in.
//
// The sequence per page, as in the input: load the checkpoint and every
// witness at or above its generation once per (re)start; fetch the tail
// cursor; Build; Classify against the known witnesses of (cursor,
// generation) with the tail's applied boundary; PutWitness (fresh
// witnesses with events or completion evidence) before any event is
// emitted; emit the events that lack a receipt; on acks, RecordReceipt for
// partly acknowledged heads; once the head page is complete,
// DecidePromotion and one Promote compare-and-swap; on *FenceError mark the
// witness abandoned and reload; on an unknown outcome ResolvePromotion by
// reading; on success mark the other pending witnesses of (C, G)
// abandoned. Refusals and divergence recover as the contract says
// (restart from a stable boundary with one conditional write, or park).

type worker struct {
	id    int
	inc   int
	lanes []*lane // in partition order
	epoch uint64
	// Lease mode (lease.go): ticks is the worker's own clock (its lane
	// steps); a paused worker is not stepped; resumed: it was paused and
	// resumed since its last crash.
	ticks           int
	paused, resumed bool
	pauseTicks      []int // every worker's ticks when it was paused
}

type laneMode uint8

const (
	modeLoad laneMode = 1 + iota
	modeParked
	modeRun
)

type span struct{ from, to int }

// page is one fetched response travelling through a lane's chain.
type page struct {
	chain      uint64
	fromCursor []byte
	fromGen    uint64
	w          witness.Witness
	v          verdict
	decision   witness.Promotion
	spans      []span
	spanAcked  []bool
	ackedUpTo  int
	receiptAt  int
	nacked     bool
}

func (pg *page) complete() bool { return pg.ackedUpTo >= len(pg.w.Events) }

type verdict struct {
	class      string
	w          witness.Witness
	core       witness.Verdict
	fresh      bool
	idle       bool
	diverged   bool
	reason     string
	promotable bool
	final      bool
}

type fetchResult struct {
	chain  uint64
	cursor []byte
	gen    uint64
	resp   witness.Response
	note   fetchNote
	err    error
}

type ackEvent struct {
	pg   *page
	span int
	err  error
}

type task struct {
	name string
	run  func()
}

type lane struct {
	s    *sim
	w    *worker
	p    *part
	key  store.Key
	dead bool
	mode laneMode
	// ended: the lane promoted or held a sealed page and stops fetching.
	ended bool

	cp       store.Checkpoint
	chainID  uint64
	chain    []*page
	prior    map[uint64][]witness.Witness
	fetching bool
	results  []*fetchResult
	tailCur  []byte
	tailGen  uint64
	// tailApplied is the applied boundary the checkpoint will hold when the
	// tail's generation becomes durable.
	tailApplied    int64
	tailHasApplied bool
	extend         bool
	pollWait       int
	acks           []ackEvent

	// Lease mode (lease.go): the lease the lane holds, the lease it last
	// saw held by another and its worker's tick then, a claim to make, a
	// checkpoint to create, lane steps since the last renewal.
	lease, seen store.Lease
	seenAt      int
	seenOK      bool
	claim       *store.Lease
	create      bool
	sinceRenew  int
	renewAt     int

	task   *task
	budget int
	// out collects what the current step did, for the trace.
	out []string
}

var bg = context.Background()

func (l *lane) name() string { return fmt.Sprintf("w%d/%s", l.w.id, l.p.name) }

func (l *lane) st() store.Store { return l.s.st }

func (l *lane) note(format string, a ...any) {
	l.out = append(l.out, fmt.Sprintf(format, a...))
}

// contract is the contract the lane works with: the provider's, or under
// Variant BareEmptyPage one that calls every empty page the end of the
// data.
func (l *lane) contract() witness.Contract {
	c := l.p.prof.contract
	if l.s.variant == BareEmptyPage {
		c.EmptyPage = witness.EmptyEndOfData
	}
	return c
}

// spend takes the step's one store call, or defers again to the next step.
func (l *lane) spend(name string, again func()) bool {
	if l.budget > 0 {
		l.budget--
		return true
	}
	l.task = &task{name: name, run: again}
	return false
}

// step advances the lane by one event: a pending task, or one of its
// inputs (a fetch result, acks, a new fetch, a poll wait) chosen by sel.
func (l *lane) step(sel int) string {
	l.out = l.out[:0]
	l.budget = 1
	if l.s.lease != nil {
		l.s.caller = l.w.owner()
		defer func() { l.s.caller = "" }()
		if l.leaseStep() {
			return joinNotes(l.out)
		}
	}
	switch l.mode {
	case modeLoad:
		l.load()
	case modeParked:
		l.checkUnparked()
	default:
		if t := l.task; t != nil {
			l.task = nil
			l.note("[%s]", t.name)
			t.run()
			break
		}
		var inputs []func()
		if len(l.results) > 0 {
			inputs = append(inputs, l.onFetched)
		}
		if len(l.acks) > 0 {
			inputs = append(inputs, l.onAcks)
		}
		if l.canFetch() {
			inputs = append(inputs, l.fetch)
		}
		if l.pollWait > 0 {
			inputs = append(inputs, func() { l.pollWait--; l.note("poll wait") })
		}
		if len(inputs) == 0 {
			l.note("idle")
			break
		}
		inputs[sel%len(inputs)]()
	}
	return joinNotes(l.out)
}

func joinNotes(out []string) string {
	var b bytes.Buffer
	for i, s := range out {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(s)
	}
	return b.String()
}

func (l *lane) canFetch() bool {
	return !l.ended && !l.fetching && l.extend && len(l.chain) < l.s.setup.depth && l.pollWait == 0
}

// load reads (or creates) the durable checkpoint and starts a chain.
func (l *lane) load() {
	cp, err := l.st().LoadCheckpoint(bg, l.key)
	if errors.Is(err, store.ErrNoCheckpoint) {
		cp, err = l.st().CreateCheckpoint(bg, store.Checkpoint{Key: l.key, Generation: 1, Epoch: l.w.epoch})
		var fe *store.FenceError
		if errors.As(err, &fe) && fe.Winner != nil {
			cp, err = *fe.Winner, nil
		}
	}
	if err != nil {
		l.note("load failed: %v", err)
		return
	}
	l.ended = false
	// One query for every witness an earlier incarnation or chain left at
	// or above the durable generation; afterwards the lane keeps the map
	// itself (input/partition.go load).
	ws, err := l.st().WitnessesFrom(bg, l.key, cp.Generation)
	if err != nil {
		l.note("load failed: %v", err)
		return
	}
	l.cp = cp
	l.prior = map[uint64][]witness.Witness{}
	for _, w := range ws {
		l.prior[w.Generation] = append(l.prior[w.Generation], w)
	}
	if cp.Parked != "" {
		l.mode = modeParked
		l.note("loaded g%d: parked", cp.Generation)
		return
	}
	l.chainID++
	l.chain = nil
	l.tailCur, l.tailGen = cp.Cursor, cp.Generation
	l.tailApplied, l.tailHasApplied = cp.Applied, cp.HasApplied
	l.extend = true
	l.pollWait = 0
	l.acks = nil // acks of an earlier chain are ignored
	l.task = nil
	l.mode = modeRun
	l.note("loaded g%d %s", cp.Generation, curString(cp.Cursor))
}

func (l *lane) checkUnparked() {
	cp, err := l.st().LoadCheckpoint(bg, l.key)
	if err == nil && cp.Parked == "" {
		l.mode = modeLoad
		l.note("unparked at g%d", cp.Generation)
		return
	}
	l.note("still parked")
}

// restart ends the chain; the lane reloads its checkpoint at its next step.
func (l *lane) restart(why string) {
	l.note("restart chain: %s", why)
	l.mode = modeLoad
	l.chainID++
	l.chain = nil
	l.task = nil
}

func (l *lane) fetch() {
	l.fetching = true
	resp, note, err := l.p.fetch(l.tailCur)
	r := &fetchResult{chain: l.chainID, cursor: clone(l.tailCur), gen: l.tailGen, resp: resp, note: note, err: err}
	l.results = append(l.results, r)
	if len(l.chain) > 0 {
		l.s.stats.FetchAhead++
	}
	switch {
	case err != nil:
		l.note("fetch %s g%d: %v", curString(r.cursor), r.gen, err)
	case note != "":
		l.note("fetch %s g%d -> %s (%s)", curString(r.cursor), r.gen, describeResponse(resp), note)
	default:
		l.note("fetch %s g%d -> %s", curString(r.cursor), r.gen, describeResponse(resp))
	}
	l.s.stats.note(note)
}

// priorWitnesses returns the witnesses the lane knows for (cursor, gen):
// those loaded at its (re)start and those it wrote since.
func (l *lane) priorWitnesses(cursor []byte, gen uint64) []witness.Witness {
	var out []witness.Witness
	for _, w := range l.prior[gen] {
		if bytes.Equal(w.InputCursor, cursor) {
			out = append(out, w)
		}
	}
	return out
}

func (l *lane) rememberWitness(w witness.Witness) {
	ws := l.prior[w.Generation]
	for i := range ws {
		if ws[i].AttemptID == w.AttemptID {
			ws[i] = w
			return
		}
	}
	l.prior[w.Generation] = append(ws, w)
}

// onFetched reconciles the oldest fetch result.
func (l *lane) onFetched() {
	r := l.results[0]
	l.results = l.results[1:]
	l.fetching = false
	if r.chain != l.chainID {
		l.note("dropped a fetch of an abandoned chain")
		return
	}
	if r.err != nil {
		var fe *fetchError
		if errors.As(r.err, &fe) && fe.expired {
			l.s.stats.Expired++
			l.recover(fmt.Sprintf("cursor %s expired: %s", curString(r.cursor), fe.reason))
			return
		}
		l.note("fetch failed, poll again")
		l.pollWait = 1
		return
	}
	prior := l.priorWitnesses(r.cursor, r.gen)
	v, err := l.reconcile(r, prior)
	if err != nil {
		l.s.stats.BadResponses++
		l.park(fmt.Sprintf("malformed page at generation %d cursor %s: %v", r.gen, curString(r.cursor), err))
		return
	}
	if v.idle {
		l.s.stats.Idle++
		l.note("idle: %s", v.reason)
		l.pollWait = 1
		return
	}
	l.s.stats.class(v.class)
	if v.diverged {
		l.note("%s", v.class)
		l.s.stats.Divergences++
		l.recover(fmt.Sprintf("unprovable divergence at generation %d cursor %s: %s", r.gen, curString(r.cursor), v.reason))
		return
	}
	pg := &page{chain: l.chainID, fromCursor: r.cursor, fromGen: r.gen, w: v.w, v: v, ackedUpTo: v.w.AckedThrough, receiptAt: v.w.AckedThrough}
	l.note("%s %s (satisfied %d)", v.class, pg.w.AttemptID, v.w.AckedThrough)
	if v.fresh && (len(pg.w.Events) > 0 || v.promotable) {
		l.putWitness(pg, r)
		return
	}
	l.afterWitness(pg, r)
}

// reconcile builds the witness of a response and classifies it against the
// earlier witnesses of its (cursor, generation): input/reconcile.go.
func (l *lane) reconcile(r *fetchResult, prior []witness.Witness) (verdict, error) {
	contract := l.contract()
	w, err := witness.Build(witness.BuildInput{
		Scope: l.key.Scope, Partition: l.key.Partition,
		Generation: r.gen, InputCursor: r.cursor,
		AttemptID: l.s.newAttemptID(), Response: r.resp, Contract: contract,
	})
	if errors.Is(err, witness.ErrLoop) {
		return verdict{class: "idle", idle: true, reason: err.Error()}, nil
	}
	if err != nil {
		return verdict{}, err
	}
	if len(w.Events) == 0 && !witness.CanPromote(contract, w).Complete {
		return verdict{class: "empty_no_evidence", idle: true, reason: "empty response without evidence"}, nil
	}
	cv, err := witness.Classify(witness.ClassifyInput{
		Contract: contract, Applied: l.tailApplied, HasApplied: l.tailHasApplied,
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
	return v, nil
}

func (l *lane) putWitness(pg *page, r *fetchResult) {
	if !l.spend("put witness", func() { l.putWitness(pg, r) }) {
		return
	}
	err := l.st().PutWitness(bg, pg.w)
	switch {
	case err == nil:
		l.note("put witness %s", pg.w.AttemptID)
		l.rememberWitness(pg.w)
		l.afterWitness(pg, r)
	case errors.Is(err, store.ErrInvalid):
		l.park(fmt.Sprintf("witness of generation %d cannot be stored: %v", pg.w.Generation, err))
	default:
		l.note("put witness %s failed, not emitting: %v", pg.w.AttemptID, err)
		l.task = &task{name: "put witness", run: func() { l.putWitness(pg, r) }}
	}
}

// afterWitness appends the page to the chain, moves the tail past it when
// it may be fetched past, emits its events and promotes what it can.
func (l *lane) afterWitness(pg *page, r *fetchResult) {
	v := pg.v
	l.chain = append(l.chain, pg)
	if v.promotable && !v.final && len(pg.w.Successor) > 0 && !bytes.Equal(pg.w.Successor, r.cursor) {
		l.tailCur, l.tailGen = pg.w.Successor, r.gen+1
		if n := len(pg.w.Events); n > 0 {
			l.tailApplied, l.tailHasApplied = max(pg.w.Events[n-1].Position, l.tailApplied), true
		}
	} else {
		l.extend = false
	}
	l.emit(pg)
	l.promoteHead()
}

// emit hands the events of pg that lack a terminal outcome to the sink, in
// batches of the run's batch size.
func (l *lane) emit(pg *page) {
	n := len(pg.w.Events)
	size := l.s.setup.batch
	if size <= 0 {
		size = n
	}
	for from := pg.ackedUpTo; from < n; from += size {
		to := min(from+size, n)
		idx := len(pg.spans)
		pg.spans = append(pg.spans, span{from, to})
		pg.spanAcked = append(pg.spanAcked, false)
		d := &delivery{lane: l, pg: pg, span: idx, part: l.p.name, gen: pg.fromGen, attempt: pg.w.AttemptID, events: pg.w.Events[from:to]}
		l.s.deliver(d)
		l.note("emit %s", d)
	}
}

func (l *lane) onAcks() {
	acks := l.acks
	l.acks = nil
	for _, a := range acks {
		pg := a.pg
		if pg.chain != l.chainID {
			continue
		}
		if a.err != nil {
			pg.nacked = true
			l.extend = false
			l.note("nack g%d %s", pg.fromGen, pg.w.AttemptID)
			continue
		}
		pg.spanAcked[a.span] = true
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
	l.note("acks processed")
	l.promoteHead()
}

// promoteHead promotes, strictly in page order, every leading page whose
// events all have a terminal outcome; records receipts for partly
// acknowledged heads; restarts the chain on a nacked head.
func (l *lane) promoteHead() {
	if len(l.chain) == 0 {
		return
	}
	pg := l.chain[0]
	if pg.nacked {
		l.writeReceipt(pg, func() {
			l.restart(fmt.Sprintf("re-fetch %s at g%d after a failed delivery", curString(pg.fromCursor), pg.fromGen))
		})
		return
	}
	if !pg.complete() {
		l.writeReceipt(pg, func() {})
		return
	}
	pg.w.AckedThrough = len(pg.w.Events)
	d := l.decide(pg)
	switch d.Action {
	case witness.Refuse:
		l.s.stats.Refusals++
		l.recover(fmt.Sprintf("promotion of attempt %s refused: %s", pg.w.AttemptID, d.Reason))
		return
	case witness.Hold:
		l.s.stats.Holds++
		l.note("hold %s: %s", pg.w.AttemptID, d.Reason)
		l.chain = l.chain[1:]
		if pg.w.Sealed {
			l.ended = true // input/partition.go ended(): a sealed partition stops
		}
		l.tailCur, l.tailGen = l.cp.Cursor, l.cp.Generation
		l.tailApplied, l.tailHasApplied = l.cp.Applied, l.cp.HasApplied
		if len(l.chain) > 0 {
			l.s.stats.HoldWithChain++
			l.chainID++
			l.chain, l.fetching = nil, false
		}
		l.extend = true
		l.pollWait = 1
		return
	}
	pg.decision = d.Promotion
	l.promote(pg, l.storePromotion(pg), func() {
		l.chain = l.chain[1:]
		if pg.w.Sealed {
			l.ended = true // input/partition.go ended(): a sealed partition stops
		}
		if len(l.chain) == 0 && !l.extend && !l.fetching {
			l.tailCur, l.tailGen = l.cp.Cursor, l.cp.Generation
			l.tailApplied, l.tailHasApplied = l.cp.Applied, l.cp.HasApplied
			l.extend = true
			l.pollWait = 1
		}
		l.promoteHead()
	})
}

func (l *lane) writeReceipt(pg *page, then func()) {
	if pg.ackedUpTo <= pg.receiptAt {
		then()
		return
	}
	if !l.spend("receipt", func() { l.writeReceipt(pg, then) }) {
		return
	}
	err := l.st().RecordReceipt(bg, l.key, pg.fromGen, pg.w.AttemptID, pg.ackedUpTo)
	if err != nil {
		// A receipt only saves duplicates on replay; losing it loses no event.
		l.note("receipt %s through %d not recorded: %v", pg.w.AttemptID, pg.ackedUpTo, err)
	} else {
		l.note("receipt %s through %d", pg.w.AttemptID, pg.ackedUpTo)
		pg.receiptAt = pg.ackedUpTo
		pg.w.AckedThrough = pg.ackedUpTo
		l.rememberWitness(pg.w)
	}
	then()
}

// decide asks the core whether the head page's successor may be promoted
// from the lane's checkpoint now.
func (l *lane) decide(pg *page) witness.Decision {
	cp := l.cp
	return witness.DecidePromotion(witness.PromotionInput{
		Contract: l.contract(),
		Checkpoint: witness.Checkpoint{
			Scope: cp.Scope, Partition: cp.Partition, Cursor: cp.Cursor, Generation: cp.Generation,
			Applied: cp.Applied, HasApplied: cp.HasApplied, Watermark: cp.Watermark,
			PromotedWitness: cp.PromotedWitness, Parked: cp.Parked,
		},
		Witness:   pg.w,
		Verdict:   pg.v.core,
		Witnesses: l.prior[pg.fromGen],
	})
}

// storePromotion turns the core's decision into the store's one
// conditional write. Under Variant PromoteOtherSuccessor it writes the
// successor of another response to the same (cursor, generation) when the
// lane knows one.
func (l *lane) storePromotion(pg *page) store.Promotion {
	d := pg.decision
	p := store.Promotion{
		Key: l.key, FromCursor: d.FromCursor, FromGeneration: d.FromGeneration,
		To: d.To, WitnessID: d.WitnessID, Watermark: d.Watermark,
		Applied: d.Applied, HasApplied: d.HasApplied,
		Epoch: l.w.epoch, Lease: l.fence(),
	}
	if l.s.variant == PromoteOtherSuccessor {
		for _, o := range l.prior[pg.fromGen] {
			if o.AttemptID != d.WitnessID && bytes.Equal(o.InputCursor, pg.fromCursor) && len(o.Successor) > 0 && !bytes.Equal(o.Successor, d.To) {
				p.To = clone(o.Successor)
				l.note("variant: promoting the successor of %s with the evidence of %s", o.AttemptID, d.WitnessID)
				break
			}
		}
	}
	return p
}

// promote performs the one conditional write that moves the checkpoint
// from the page's input cursor to its successor.
func (l *lane) promote(pg *page, prom store.Promotion, then func()) {
	if !l.spend("promote", func() { l.promote(pg, prom, then) }) {
		return
	}
	if l.s.lease != nil {
		// input/lease.go leasedStore: the holder's lease at call time.
		prom.Lease = l.lease
	}
	cp, err := l.st().Promote(bg, prom)
	if err == nil {
		l.note("promoted %s: g%d %s", pg.w.AttemptID, cp.Generation, curString(cp.Cursor))
		l.s.stats.Promotions++
		l.promoted(pg, cp, then)
		return
	}
	if l.leaseFenced(err, "promote") {
		return
	}
	var fe *store.FenceError
	if errors.As(err, &fe) {
		l.s.stats.Fenced++
		l.note("lost the promotion from g%d (%s): %s", pg.fromGen, pg.w.AttemptID, fe.Reason)
		// input/partition.go: abandon only when the winner moved the
		// checkpoint off (C, G); a park or a lease change leaves it pending.
		if w := fe.Winner; w != nil && (w.Generation != pg.fromGen || !bytes.Equal(w.Cursor, pg.fromCursor)) {
			l.abandon(pg, func() { l.restart("lost the promotion") })
		} else {
			l.restart("lost the promotion (checkpoint still at its cursor)")
		}
		return
	}
	l.note("promotion of %s has an unknown outcome: %v", pg.w.AttemptID, err)
	l.resolve(pg, prom, then)
}

// resolve decides a promotion's unknown outcome by reading only.
func (l *lane) resolve(pg *page, prom store.Promotion, then func()) {
	if !l.spend("resolve", func() { l.resolve(pg, prom, then) }) {
		return
	}
	cp, applied, err := store.ResolvePromotion(bg, l.st(), prom)
	switch {
	case err != nil:
		l.note("cannot read back the checkpoint: %v", err)
		l.task = &task{name: "resolve", run: func() { l.resolve(pg, prom, then) }}
	case applied:
		l.s.stats.ResolvedApplied++
		l.note("resolved: %s was promoted (g%d)", pg.w.AttemptID, cp.Generation)
		l.promoted(pg, cp, then)
	case cp.Generation != prom.FromGeneration || !bytes.Equal(cp.Cursor, prom.FromCursor):
		l.s.stats.ResolvedMoved++
		l.note("resolved: the checkpoint moved on to g%d", cp.Generation)
		l.abandon(pg, func() { l.restart("another writer won") })
	default:
		l.s.stats.ResolvedRetry++
		l.note("resolved: not applied, promoting again")
		l.promote(pg, prom, then)
	}
}

func (l *lane) promoted(pg *page, cp store.Checkpoint, then func()) {
	l.cp = cp
	pg.w.Disposition = witness.Promoted
	l.rememberWitness(pg.w)
	var others []witness.Witness
	for _, w := range l.prior[pg.fromGen] {
		if w.AttemptID != pg.w.AttemptID && w.Disposition == witness.Pending && bytes.Equal(w.InputCursor, pg.fromCursor) {
			others = append(others, w)
		}
	}
	l.abandonAll(others, func() {
		delete(l.prior, pg.fromGen)
		then()
	})
}

func (l *lane) abandonAll(ws []witness.Witness, then func()) {
	if len(ws) == 0 {
		then()
		return
	}
	if !l.spend("abandon others", func() { l.abandonAll(ws, then) }) {
		return
	}
	w := ws[0]
	if err := l.st().SetDisposition(bg, l.key, w.Generation, w.AttemptID, witness.Abandoned); err != nil {
		l.note("abandon %s: %v", w.AttemptID, err)
	} else {
		l.note("abandoned %s", w.AttemptID)
	}
	l.abandonAll(ws[1:], then)
}

func (l *lane) abandon(pg *page, then func()) {
	if !l.spend("abandon", func() { l.abandon(pg, then) }) {
		return
	}
	if err := l.st().SetDisposition(bg, l.key, pg.fromGen, pg.w.AttemptID, witness.Abandoned); err != nil {
		l.note("abandon %s: %v", pg.w.AttemptID, err)
	} else {
		l.note("abandoned own %s", pg.w.AttemptID)
	}
	then()
}

// recover applies the contract's recovery: a restart from a stable
// boundary (one conditional write), or parking.
func (l *lane) recover(reason string) {
	c := l.contract()
	if c.Recovery == witness.RecoveryPark {
		l.park(reason)
		return
	}
	if !l.spend("recover", func() { l.recover(reason) }) {
		return
	}
	cur := l.p.restartCursor(l.cp.Watermark)
	l.s.stats.Restarts++
	_, err := l.st().Promote(bg, store.Promotion{
		Key: l.key, FromCursor: l.cp.Cursor, FromGeneration: l.cp.Generation,
		To: cur, WitnessID: "restart:" + c.Recovery.String(), Epoch: l.w.epoch, Lease: l.fence(),
	})
	if l.leaseFenced(err, "restart") {
		return
	}
	if err != nil {
		l.note("restart write from g%d: %v", l.cp.Generation, err)
	} else {
		l.note("restarted from g%d at %s", l.cp.Generation, curString(cur))
	}
	l.restart(reason)
}

// park stops the partition with a visible reason in the store.
func (l *lane) park(reason string) {
	if !l.spend("park", func() { l.park(reason) }) {
		return
	}
	cp, err := l.st().SetParked(bg, l.key, l.cp.Cursor, l.cp.Generation, l.fence(), reason)
	switch {
	case err == nil:
		l.s.stats.Parks++
		l.cp = cp
		l.restart("parked: " + reason)
	case l.leaseFenced(err, "park"):
	case errors.Is(err, store.ErrFenced):
		l.restart("park fenced")
	default:
		l.note("cannot record the park reason: %v", err)
		l.task = &task{name: "park", run: func() { l.park(reason) }}
	}
}

func clone(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return append([]byte(nil), b...)
}
