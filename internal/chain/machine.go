package chain

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/provider"
)

// MaxRestarts is the default of Config.MaxRestarts: how many restarts from
// a boundary in a row, without a response promoted in between, a partition
// makes before it parks; MaxRestartBackoff caps the wait before each of
// them.
const (
	MaxRestarts       = 8
	MaxRestartBackoff = 30 * time.Second
)

// PromoteMinPages and PromoteLinger are the input's defaults of
// Config.PromoteMinPages and Config.PromoteLinger (promotion_min_pages,
// promotion_linger).
const (
	PromoteMinPages = 2
	PromoteLinger   = 50 * time.Millisecond
	// WitnessGroupPages is the input's default of Config.WitnessGroupPages
	// (witness_group_pages).
	WitnessGroupPages = 2
)

// Config is one partition's machine.
type Config struct {
	Key      store.Key
	Contract provider.Contract
	// Restarter: the provider can name a stable boundary cursor
	// (RestartCursor); without it every recovery parks.
	Restarter bool
	// StartCursor and Epoch are written when the checkpoint is created;
	// Epoch is written with every promotion. Epoch is the machine's epoch
	// until EpochChanged (or a reset into a new source incarnation) moves
	// it.
	StartCursor []byte
	Epoch       uint64
	// Leased: the partition is read under a lease (scale-out,
	// docs/design.md#leases-and-fencing) and Lease is the one it holds when
	// the machine starts (a held partition lease never moves while held:
	// the instance renews its heartbeat), LeaseLost ends it. A
	// leased machine states its lease in every write that the lease fences
	// (each Promote, Resolve and Reincarnate's Promotion.Lease, Park.Lease),
	// so the store's condition is the holder's lease; and it stops
	// (StateLeaseLost, LeaseGone) as soon as a load, a park check or a
	// read-back finds another lease stored, or a write is fenced by one.
	// The driver must not let the stored lease move while a call that
	// carries it is outstanding (a release waits for it), so that a call
	// never carries a lease its own holder has replaced. Without Leased
	// the writes state the lease of the checkpoint last read.
	Leased bool
	Lease  store.Lease
	// MaxPagesInFlight (at least 1: New panics otherwise) bounds the
	// chain; MaxBatchSize (0: a
	// whole page) the events of one Emit.
	MaxPagesInFlight int
	MaxBatchSize     int
	// PollInterval, ParkCheckInterval and StoreBackoff must be positive.
	PollInterval time.Duration
	// MaxPollInterval, when longer than PollInterval, backs off the polls
	// of a quiet partition: after an answer without events the next poll
	// waits PollInterval, then twice as long after each further such
	// answer in a row, up to MaxPollInterval; an answer with events returns
	// the partition to PollInterval. Zero (or not longer than PollInterval):
	// every poll waits PollInterval. Transient failures always wait
	// PollInterval.
	MaxPollInterval   time.Duration
	ParkCheckInterval time.Duration
	StoreBackoff      time.Duration
	// FetchRetries is how many times a malformed answer to one fetch
	// (cursor, generation) is fetched again before the partition parks: a
	// page parks on its FetchRetries+1st malformed answer in a row
	// (malformed.go). 0 parks on the first.
	FetchRetries int
	// FetchBackoff is the wait before the first of those retries; it
	// doubles on each further one, up to MaxFetchBackoff (or FetchBackoff
	// itself, when longer).
	FetchBackoff time.Duration
	// Jitter, when set, draws the actual wait from a back-off d; its
	// result is kept within [0, d]. nil: no jitter (the machine itself
	// draws no random numbers).
	Jitter func(d time.Duration) time.Duration
	// MaxRestarts is how many restarts from a stable boundary in a row,
	// without a real response promoted in between, the partition makes
	// before it parks (0: the default, MaxRestarts).
	MaxRestarts int
	// ExitWhenComplete: the partition completes once it is caught up on
	// evidence bound to its last page (caughtUp).
	ExitWhenComplete bool
	// CoalescePromotions: when the head page is promoted, the delivered
	// pages after it that the core would promote one by one from the
	// checkpoints in between are promoted with it, in one conditional
	// write (coalesce.go).
	CoalescePromotions bool
	// PromoteMinPages and PromoteLinger (with CoalescePromotions): a head
	// page ready to be promoted whose promotion would cover fewer than
	// PromoteMinPages pages waits, while the next page is coming (in the
	// chain awaiting its outcomes, or being fetched by this chain), at most
	// PromoteLinger from when it was first ready (coalesce.go, lingers).
	// PromoteMinPages below 2 or PromoteLinger 0: never waits.
	PromoteMinPages int
	PromoteLinger   time.Duration
	// WitnessGroupPages (2 or more, with PromoteLinger): a fresh page's
	// witness waits, while the page behind it is being fetched, to be made
	// durable with the witnesses of the pages that come meanwhile in one
	// write (store.PutWitnesses), at most WitnessGroupPages of them (and
	// store.MaxWitnessGroup), at most PromoteLinger from when the first
	// was ready (witnessgroup.go). Below 2, or PromoteLinger 0: every
	// witness is written alone, at once.
	WitnessGroupPages int
	// CompactWitness builds compact event witnesses (reconcile.BuildInput
	// Compact: one 32-bit fingerprint of each event's id and payload
	// projection, 4 bytes an event stored, under the collision bound of
	// docs/design.md#retry-classification) instead of 64-bit id hashes and
	// digests.
	CompactWitness bool
	// Incarnation: the provider names the incarnation of the partition's
	// source (CheckIncarnation); it is checked when the partition starts,
	// before every recovery, on evidence of a recreated source and every
	// IncarnationInterval while reading (0: only then). incarnation.go.
	Incarnation         bool
	IncarnationInterval time.Duration
	// IgnoreIncarnation makes the machine read on across a changed
	// incarnation. Only the simulator's broken variant sets it.
	IgnoreIncarnation bool
	// EmitBeforeCheck makes the machine emit a page's events before an
	// incarnation check that began after the page arrived has answered (the
	// check before the promotion still runs): the order of the previous
	// release. Only the simulator's broken variant and the benchmark's
	// baseline set it.
	EmitBeforeCheck bool
	// SkipRereadReceipts: a re-read pass takes every event at or below the
	// pass's mark as received without looking for its receipt. Only the
	// simulator's broken variants set it.
	SkipRereadReceipts bool
	// Classify replaces reconcile.Classify (nil: reconcile.Classify). Only the
	// simulator's broken variants set it.
	Classify func(reconcile.ClassifyInput) (reconcile.Verdict, error)
}

type phase uint8

const (
	phaseNew      phase = iota
	phaseLoading        // loading the checkpoint (or backing off before it)
	phaseParked         // waiting for the park reason to be cleared
	phaseChain          // running a chain
	phaseDone           // complete: nothing more
	phaseWatching       // complete, its source's incarnation checked on the interval
	phaseStopped
	phaseLeaseLost // the lease is gone: nothing more
)

// page is one fetched response travelling through the chain, from its
// witness write to its promotion.
type page struct {
	chain      uint64 // the chain that fetched it
	fromCursor []byte
	fromGen    uint64
	w          reconcile.Witness
	v          verdict
	events     []reconcile.Event // the response's events (ids, payloads)
	bytes      int64             // what the page holds: ids, payloads, cursors (PageBytes)
	decision   reconcile.Promotion
	// coalesced are the pages after this one promoted with it in one
	// write (coalesce.go); set when its promotion is built.
	coalesced []*page

	spans     []span // emitted batches: event index ranges
	spanAcked []bool
	ackedUpTo int // leading events with a terminal outcome (receipts)
	receiptAt int // AckedThrough last written to the store
	nacked    bool
	// seq numbers the fetch results in arrival order (incarnation.go: a
	// page is emitted and promoted only after an incarnation check that
	// began after it arrived). unchecked: the page is witnessed and waits for that
	// check before its events are emitted.
	seq       uint64
	unchecked bool
	// rrDone: the page's re-read window receipts are written (reread.go).
	rrDone bool
	// unwitnessed: the page's witness waits to be written with the pages
	// behind it (witnessgroup.go); nothing of it is emitted or promoted.
	unwitnessed bool
}

type span struct{ from, to int }

// complete reports whether every event of the page has a terminal outcome.
// A page whose witness waits for its group (witnessgroup.go) is not: it
// is never promoted before its witness is durable.
func (pg *page) complete() bool { return !pg.unwitnessed && pg.ackedUpTo >= len(pg.w.Events) }

type batchRef struct {
	pg   *page
	span int
}

// fetchRec is the fetch in flight.
type fetchRec struct {
	id     uint64
	chain  uint64
	cursor []byte
	gen    uint64
	// wm is the watermark the checkpoint holds once generation gen is
	// durable (tail.wm): what the pages before this fetch certify.
	wm coord.Watermark
	// seq is the fetch's place in the order the results arrived (0: not
	// yet): set when its result reaches the machine, queued or not, so an
	// incarnation check answered later covers it (CheckIncarnation).
	seq uint64
}

// tail is where the chain's next fetch starts: the cursor and generation
// after the last page that may be fetched past, with the applied boundary
// and watermark the checkpoint will hold once that generation is durable
// (every fetch of one (cursor, generation) sees one watermark).
type tail struct {
	cur        []byte
	gen        uint64
	applied    coord.Position
	hasApplied bool
	wm         coord.Watermark
}

func tailOf(cp store.Checkpoint) tail {
	return tail{cur: cp.Cursor, gen: cp.Generation, applied: cp.Applied, hasApplied: cp.HasApplied, wm: cp.Watermark}
}

// call is the machine's one outstanding call: the state it was made in,
// the action awaited (answers says which input answers it), and what to do
// with the answer.
type call struct {
	state  State
	action Action
	next   *next
}

// sleep is the machine's back-off: the state it waits in, until when, and
// what runs then.
type sleep struct {
	state State
	until time.Time
	next  *next
}

// Machine is one partition's chain (see the package doc). It is not safe
// for concurrent use: one driver steps it.
type Machine struct {
	cfg Config
	// lease is the lease a leased machine holds (Config.Leased); lostWhy
	// why it was lost.
	lease   store.Lease
	lostWhy string
	now     time.Time
	// announced is the deadline of the last Wait.
	announced time.Time
	out       []Action

	phase phase
	await *call
	sleep *sleep
	queue []Input // fetch results and delivery outcomes that came while a call or a sleep was outstanding

	cp             store.Checkpoint
	prior          map[uint64][]reconcile.Witness // witnesses by generation, loaded and written
	promotedEvents []reconcile.EventWitness       // events of the witness whose successor is the durable cursor
	// restarts counts restarts from a boundary since the partition last
	// got past the point of its first restart (restartMark); it sets the
	// back-off and, past MaxRestarts, parks. A promotion that only
	// re-reads what the restart replays (the pages before a cursor that
	// expires again) is not progress and does not reset it.
	restarts int
	// restartMark is the checkpoint's progress when the first of the
	// current run of restarts happened (nil: none since the last
	// progress).
	restartMark *store.Checkpoint
	// failing is the current run of transient fetch failures (none since
	// the last answer), and noteDue when the next failure note may be
	// written (failure.go).
	failing failureRun
	noteDue time.Time
	done    bool

	chainID   uint64
	chain     []*page
	batches   map[uint64]batchRef
	nextBatch uint64
	fetch     *fetchRec // the fetch in flight, if any
	nextFetch uint64
	tail      tail
	extend    bool // whether the tail may be fetched past
	pollAt    time.Time
	// quiet counts the answers in a row that carried no events; it sets
	// the back-off of the next poll (pollLater, Config.MaxPollInterval).
	quiet int
	// idle tracks answers without evidence in a row: since when, how
	// many, and when the machine last said so at info level.
	idle idleRun
	// malformed counts the malformed answers in a row to one fetch;
	// parkDrained is the reason of a park that waits for the pages before
	// a malformed page to be promoted (malformed.go).
	malformed   malformedRun
	parkDrained ParkReason
	// mon is the state of the contract monitors (monitor.go).
	mon monitorState
	// unprovenSaid: the machine has logged that its contract proves no
	// continuity of offset pages (provider.Contract.OffsetUnproven).
	unprovenSaid bool
	// incarnation is the hash of the source incarnation the partition
	// reads (checked, or the checkpoint's); promotions record it.
	// nextCheck is when the reading partition checks it again.
	incarnation string
	nextCheck   time.Time
	// arrived counts fetch results as they reach the machine (queued or
	// not); confirmed is the count when the last incarnation check that
	// found the incarnation unchanged answered (every result it holds then
	// arrived before the check began, CheckIncarnation): every page whose
	// result had arrived by then may be emitted and promoted.
	arrived, confirmed uint64
	// evidenceResets counts the resets this machine made on evidence its
	// provider's incarnation check did not confirm (positions went back,
	// reconcile.Recreated): one per process, then the same evidence is the
	// contract violation it also is. reincarnations counts every reset, to
	// back off before the next one.
	evidenceResets, reincarnations int
	// rr is the re-read window's state (reread.go).
	rr rereadState
	// linger is the head page whose promotion waits for the page behind
	// it, until lingerUntil (coalesce.go, lingers); nil: none waits.
	linger      *page
	lingerUntil time.Time
	// wgroup are the pages whose witnesses wait to be written together
	// (witnessgroup.go), wgroupBytes their store.WitnessSize, wgroupUntil
	// the end of the wait.
	wgroup      []*page
	wgroupBytes int
	wgroupUntil time.Time
}

// idleRun is a run of answers that prove nothing (empty pages without
// evidence): the partition does not advance, and says so at info level
// once it has lasted IdleReport, then every IdleReport.
type idleRun struct {
	since, reported time.Time
	n               int
}

// IdleReport is how long a partition answers only without evidence before
// it says so at info level (and then how often it repeats it).
const IdleReport = time.Minute

// New returns a machine for cfg; Start starts it. cfg.MaxPagesInFlight
// must be at least 1: the input refuses a smaller max_pages_in_flight at
// config, so a driver that passes one has a bug, and New panics rather than
// run with another value than the one configured.
func New(cfg Config) *Machine {
	if cfg.MaxPagesInFlight < 1 {
		panic(fmt.Sprintf("chain.New: MaxPagesInFlight must be at least 1, got %d", cfg.MaxPagesInFlight))
	}
	return &Machine{cfg: cfg, lease: cfg.Lease, prior: map[uint64][]reconcile.Witness{}, batches: map[uint64]batchRef{}}
}

// PromotionWaiting reports whether the head page's promotion waits for the
// page behind it (Config.PromoteMinPages).
func (m *Machine) PromotionWaiting() bool { return m.linger != nil }

// Known returns a copy of the witnesses the machine knows for generation
// gen (loaded, or written since).
func (m *Machine) Known(gen uint64) []reconcile.Witness {
	return append([]reconcile.Witness(nil), m.prior[gen]...)
}

// Step feeds one input and returns the actions it leads to, in order.
func (m *Machine) Step(in Input) []Action {
	m.out = nil
	if m.phase == phaseStopped || m.phase == phaseLeaseLost {
		return nil
	}
	switch in := in.(type) {
	case Start:
		if m.phase == phaseNew {
			m.load()
		}
	case Stop:
		m.halt(phaseStopped)
		return m.out
	case LeaseLost:
		m.lostWhy = in.Reason
		m.halt(phaseLeaseLost)
		return m.out
	case EpochChanged:
		m.cfg.Epoch = in.Epoch
		return m.out
	case Tick:
		if in.Now.After(m.now) {
			m.now = in.Now
		}
		if s := m.sleep; s != nil && !m.now.Before(s.until) {
			m.sleep = nil
			m.run(s.next, nil)
		}
	default:
		if f, ok := in.(Fetched); ok && m.fetch != nil && m.fetch.id == f.Fetch && m.fetch.seq == 0 {
			// The answer arrived: a check answered from now on began after
			// it (even while it waits in the queue).
			m.arrived++
			m.fetch.seq = m.arrived
		}
		switch {
		case m.await != nil && answers(m.await.action, in):
			c := m.await
			m.await = nil
			m.run(c.next, in)
		case m.busy():
			if external(in) {
				m.queue = append(m.queue, in)
			}
		default:
			m.external(in)
		}
	}
	m.settle()
	return m.out
}

func external(in Input) bool {
	switch in.(type) {
	case Fetched, Acked, Nacked, Delivered:
		return true
	}
	return false
}

// queuedOutcomes takes the delivery outcomes at the head of the queue as
// one list when promotions coalesce: they are then applied together, so
// that the promotion they allow covers every page they complete. (Without
// coalescing each is applied on its own, as it arrived.)
func (m *Machine) queuedOutcomes() []Ack {
	if !m.cfg.CoalescePromotions {
		return nil
	}
	var acks []Ack
	n := 0
	for _, in := range m.queue {
		switch in := in.(type) {
		case Acked:
			acks = append(acks, Ack{Batch: in.Batch})
		case Nacked:
			err := in.Err
			if err == nil {
				err = errors.New("delivery failed")
			}
			acks = append(acks, Ack{Batch: in.Batch, Err: err})
		case Delivered:
			acks = append(acks, in.Acks...)
		default:
			m.queue = m.queue[n:]
			return acks
		}
		n++
	}
	m.queue = m.queue[n:]
	return acks
}

func (m *Machine) busy() bool { return m.await != nil || m.sleep != nil }

// settle runs what the input's loop runs between two events: the queued
// inputs, the end of a complete chain, the next fetch, and announces the
// earliest deadline.
func (m *Machine) settle() {
	if m.phase == phaseLeaseLost {
		return
	}
	for !m.busy() && len(m.queue) > 0 {
		if acks := m.queuedOutcomes(); len(acks) > 0 {
			m.onAcks(acks)
			continue
		}
		in := m.queue[0]
		m.queue = m.queue[1:]
		m.external(in)
	}
	if !m.busy() && m.phase == phaseChain && len(m.wgroup) > 0 && !m.groupWaits() {
		// The page behind the waiting witnesses is not coming (any more),
		// or the wait is over: write them (witnessgroup.go).
		m.flushWitnesses(nil)
	}
	if !m.busy() && m.phase == phaseChain && m.checkDue() && !m.now.Before(m.nextCheck) {
		m.checkWhileReading()
	}
	if !m.busy() && m.phase == phaseWatching && !m.nextCheck.IsZero() && !m.now.Before(m.nextCheck) {
		m.checkComplete()
	}
	if !m.busy() && m.phase == phaseChain && m.linger != nil {
		// A promotion waits for the page behind it: decide again whether
		// it still should (what it waited for may have come, or ended).
		if len(m.chain) > 0 && m.chain[0] == m.linger {
			m.promoteHead()
		} else {
			m.linger = nil
		}
	}
	if !m.busy() && m.phase == phaseChain {
		if m.done && len(m.chain) == 0 {
			m.finish(m.endedText())
		} else {
			m.maybeFetch()
		}
	}
	var d time.Time
	if m.sleep != nil {
		d = m.sleep.until
	}
	if m.phase == phaseChain && m.pollAt.After(m.now) && (d.IsZero() || m.pollAt.Before(d)) {
		d = m.pollAt
	}
	if (m.phase == phaseChain && m.checkDue() || m.phase == phaseWatching) && m.nextCheck.After(m.now) && (d.IsZero() || m.nextCheck.Before(d)) {
		d = m.nextCheck
	}
	if m.phase == phaseChain && m.linger != nil && m.lingerUntil.After(m.now) && (d.IsZero() || m.lingerUntil.Before(d)) {
		d = m.lingerUntil
	}
	if m.phase == phaseChain && len(m.wgroup) > 0 && m.wgroupUntil.After(m.now) && (d.IsZero() || m.wgroupUntil.Before(d)) {
		d = m.wgroupUntil
	}
	if !d.IsZero() && !d.Equal(m.announced) {
		m.announced = d
		m.emit(Wait{Until: d})
	}
}

func (m *Machine) external(in Input) {
	switch in := in.(type) {
	case Fetched:
		f := m.fetch
		if f == nil || f.id != in.Fetch {
			return // not the fetch in flight
		}
		m.fetch = nil
		if m.phase != phaseChain || f.chain != m.chainID || m.done {
			// A fetch of an abandoned chain, or one past the page that
			// ended the partition (done: a fetch ahead answered while
			// that page's promotion was in flight; nothing follows a
			// durably complete partition's last page). An answer that
			// can be read still ends a run of malformed answers: the
			// source answers.
			if in.Err == nil {
				m.malformedDone()
			}
			return
		}
		m.onFetched(f, in)
	case Acked:
		m.onAcks([]Ack{{Batch: in.Batch}})
	case Nacked:
		err := in.Err
		if err == nil {
			err = errors.New("delivery failed")
		}
		m.onAcks([]Ack{{Batch: in.Batch, Err: err}})
	case Delivered:
		m.onAcks(in.Acks)
	}
}

// halt ends the machine in phase p (stopped, or the lease lost) with the
// bookkeeping a stop needs.
func (m *Machine) halt(p phase) {
	if m.phase == phaseParked {
		m.count(MetricParked, -1)
	}
	m.phase = p
}

// ---------------------------------------------------------------------------
// The lease (Config.Leased).

// writeLease is the lease a write states: the held one when leased,
// otherwise the one the checkpoint last read holds.
func (m *Machine) writeLease() store.Lease {
	if m.cfg.Leased {
		return m.lease
	}
	return m.cp.Lease
}

// foreign reports, for a leased machine, why checkpoint cp (just read or
// written) shows the lease gone: it holds another lease than this one.
func (m *Machine) foreign(cp store.Checkpoint) (string, bool) {
	if !m.cfg.Leased || cp.Lease == m.lease {
		return "", false
	}
	return fmt.Sprintf("the stored lease is %s, this worker held %s", cp.Lease, m.lease), true
}

// fenced reports, for a leased machine, why err shows the lease gone: a
// write carrying lease carried was fenced, and the winner holds another
// lease.
func (m *Machine) fenced(err error, carried store.Lease) (string, bool) {
	var fe *store.FenceError
	if !m.cfg.Leased || !errors.As(err, &fe) || fe.Winner == nil || fe.Winner.Lease == carried {
		return "", false
	}
	return fmt.Sprintf("%s fenced: the lease is now %s, this worker held %s", fe.Op, fe.Winner.Lease, carried), true
}

// loseLease stops the machine: its lease is gone. The driver is told
// (LeaseGone); the chain's emissions not yet handed on are dropped.
func (m *Machine) loseLease(why string) {
	if m.phase == phaseChain {
		m.emit(EndChain{Chain: m.chainID})
		m.chain = nil
		m.dropWitnessGroup()
		clear(m.batches)
	}
	m.halt(phaseLeaseLost)
	m.lostWhy = why
	m.await, m.sleep, m.queue, m.fetch = nil, nil, nil, nil
	m.emit(LeaseGone{Reason: why})
}

// Epoch is the membership epoch the machine's writes state now
// (Config.Epoch, EpochChanged, or the epoch of a reset into a new source
// incarnation).
func (m *Machine) Epoch() uint64 { return m.cfg.Epoch }

// LostLease returns why a leased machine's lease was lost ("" while it
// holds it).
func (m *Machine) LostLease() string { return m.lostWhy }

// ---------------------------------------------------------------------------
// Helpers.

func (m *Machine) emit(a Action) { m.out = append(m.out, a) }

func (m *Machine) logf(l Level, format string, a ...any) {
	m.emit(Log{Level: l, Text: fmt.Sprintf(format, a...)})
}

func (m *Machine) count(metric Metric, n int64) {
	m.emit(Count{Metric: metric, N: n})
}

// ask emits call a in state st; k runs with its answer (next.go).
func (m *Machine) ask(st State, a Action, k next) {
	m.emit(a)
	m.await = &call{state: st, action: a, next: &k}
}

// answers reports whether in is the answer to call a.
func answers(a Action, in Input) bool {
	switch a.(type) {
	case Load:
		_, ok := in.(Loaded)
		return ok
	case PutWitness, PutWitnesses:
		_, ok := in.(WitnessStored)
		return ok
	case RecordReceipt:
		_, ok := in.(ReceiptStored)
		return ok
	case Abandon:
		_, ok := in.(Abandoned)
		return ok
	case Promote:
		_, ok := in.(Promoted)
		return ok
	case Resolve:
		_, ok := in.(Resolved)
		return ok
	case Park:
		_, ok := in.(Parked)
		return ok
	case NoteFailure:
		_, ok := in.(FailureNoted)
		return ok
	case WaitUnparked:
		_, ok := in.(ParkChecked)
		return ok
	case RestartCursor:
		_, ok := in.(RestartCursorFound)
		return ok
	case CheckIncarnation:
		_, ok := in.(IncarnationFound)
		return ok
	case Reincarnate:
		_, ok := in.(Reincarnated)
		return ok
	case Withdraw:
		_, ok := in.(Withdrawn)
		return ok
	case LoadReceipts:
		_, ok := in.(ReceiptsLoaded)
		return ok
	case PutReceipts:
		_, ok := in.(ReceiptsStored)
		return ok
	case PruneReceipts:
		_, ok := in.(ReceiptsPruned)
		return ok
	}
	return false
}

// wait sleeps d in state st (nothing else is handled meanwhile), then runs
// k.
func (m *Machine) wait(st State, d time.Duration, k next) {
	m.sleep = &sleep{state: st, until: m.now.Add(d), next: &k}
}

func (m *Machine) part() string { return m.cfg.Key.Partition }

// Tracked reports what the machine keeps of its chain: pages not yet
// promoted and emitted batches still awaiting an outcome. Both are bounded
// by max_pages_in_flight, however long the chain runs.
func (m *Machine) Tracked() (pages, batches int) { return len(m.chain), len(m.batches) }

// TrackedBytes is what the pages of the chain hold (PageBytes of each):
// the memory a driver's byte budget counts, released as pages are promoted
// or the chain ends.
func (m *Machine) TrackedBytes() int64 {
	var n int64
	for _, pg := range m.chain {
		n += pg.bytes
	}
	return n
}

// PageBytes estimates the memory one response holds while its page is in
// the chain: its events' ids and payloads, its cursors and marker, and a
// fixed overhead per event.
func PageBytes(r reconcile.Response) int64 {
	// The event, its witness and the driver's message with its metadata
	// (about ten entries): measured with the binary at about 1 KiB of live
	// heap per event of a small payload.
	const perEvent = 1 << 10
	n := int64(len(r.Successor) + len(r.Marker))
	for _, e := range r.Events {
		n += int64(len(e.ID)+len(e.Payload)) + perEvent
	}
	return n
}

// ---------------------------------------------------------------------------
// Loading and parking.

// load reads (or creates) the durable checkpoint and the witnesses a
// previous incarnation may have left for the generations ahead.
func (m *Machine) load() {
	m.phase = phaseLoading
	ld := Load{Key: m.cfg.Key, Create: store.Checkpoint{Key: m.cfg.Key, Cursor: m.cfg.StartCursor, Generation: 1, Epoch: m.cfg.Epoch}}
	m.ask(StateLoading, ld, next{kind: onLoaded, ld: &ld})
}

func (m *Machine) onLoaded(ld Load, r Loaded) {
	if r.Err != nil {
		m.logf(Error, "Partition %s cannot load its checkpoint, not advancing: %v", m.part(), r.Err)
		m.wait(StateLoading, m.cfg.StoreBackoff, next{kind: doLoad})
		return
	}
	if why, ok := m.foreign(r.Checkpoint); ok {
		// Another holder: stop at once rather than fetch pages this worker
		// could never promote.
		m.loseLease(why)
		return
	}
	m.loaded(ld.From(r.Checkpoint), r.Checkpoint, r.Witnesses)
}

// loaded keeps what a load read. Afterwards the witness map is complete,
// so pages in steady state need no reads. The promoted witness of the
// generation before is the durable cursor's receipts; the other pending
// witnesses of that generation lost and are marked abandoned (again, if an
// earlier incarnation could not).
func (m *Machine) loaded(from uint64, cp store.Checkpoint, ws []reconcile.Witness) {
	m.cp = cp
	m.prior = map[uint64][]reconcile.Witness{}
	m.promotedEvents = nil
	var older []reconcile.Witness
	for _, w := range ws {
		switch {
		case w.Generation >= cp.Generation:
			m.prior[w.Generation] = append(m.prior[w.Generation], w)
		case w.AttemptID == cp.PromotedWitness:
			m.promotedEvents = w.Events
		default:
			older = append(older, w)
		}
	}
	m.abandonAll(StateLoading, from, reconcile.Abandon(witnessCheckpoint(cp), older), &next{kind: doAfterLoad, cp: &cp})
}

// afterLoad goes on with the loaded checkpoint cp once the leftover
// witnesses are marked abandoned.
func (m *Machine) afterLoad(cp store.Checkpoint) {
	m.emit(Observe{Checkpoint: cp})
	switch {
	case cp.Parked != "":
		m.phase = phaseParked
		m.count(MetricParked, +1)
		m.logf(Warn, "Partition %s is parked (%s); it resumes when the reason is cleared (connect tidemark unpark)", m.part(), cp.Parked)
		m.checkUnparked()
	case cp.Complete && m.cfg.Incarnation:
		// A complete partition is checked too: a recreated source reopens
		// it in a new incarnation (a Kinesis shard id of a deleted stream
		// is an open shard of the stream created under its name).
		m.verifyIncarnation("the complete partition starts", &next{kind: doFinishComplete})
	case cp.Complete:
		m.finishComplete()
	default:
		m.verifyIncarnation("the partition starts", &next{kind: doStartChain})
	}
}

// finishComplete ends the machine of a durably complete partition.
func (m *Machine) finishComplete() {
	m.done = true
	m.finish(fmt.Sprintf("Partition %s is complete (durably, at generation %d)%s: nothing is read again%s", m.part(), m.cp.Generation, throughText(m.cp.Watermark), m.traversalGap()))
}

// checkUnparked re-reads a parked checkpoint every ParkCheckInterval.
func (m *Machine) checkUnparked() {
	m.wait(StateParked, m.cfg.ParkCheckInterval, next{kind: doAskUnparked})
}

func (m *Machine) askUnparked() {
	m.ask(StateParked, WaitUnparked{Key: m.cfg.Key}, next{kind: onParkChecked})
}

func (m *Machine) onParkChecked(r ParkChecked) {
	if why, ok := m.foreign(r.Checkpoint); r.Err == nil && ok {
		m.loseLease(why)
		return
	}
	if r.Err == nil && r.Checkpoint.Parked == "" {
		m.logf(Info, "Partition %s unparked at generation %d", m.part(), r.Checkpoint.Generation)
		m.count(MetricParked, -1)
		m.load()
		return
	}
	m.checkUnparked()
}

// finish ends the machine: the partition is complete. A durably complete
// partition whose provider names incarnations goes on checking it every
// IncarnationInterval (watching, incarnation.go), unless the input exits
// once every partition is complete.
func (m *Machine) finish(text string) {
	if m.phase == phaseChain {
		m.emit(EndChain{Chain: m.chainID})
		m.chain = nil
		m.dropWitnessGroup()
	}
	m.phase = phaseDone
	if m.watches() {
		m.phase = phaseWatching
		m.nextCheck = m.now.Add(m.cfg.IncarnationInterval)
		text += fmt.Sprintf(" (its source's incarnation is checked every %s: a recreated source reopens it)", m.cfg.IncarnationInterval)
	}
	m.logf(Info, "%s", text)
	m.emit(Completed{})
}

// endedText is the log line of a partition whose chain ended: durably
// complete (sealed, or its finite traversal ended), or only caught up (an
// answer proved there is nothing more to read for now, under
// exit_when_complete), which the next run reads on from. A watermark is
// named only when one is certified: "through none" would read as a claim.
func (m *Machine) endedText() string {
	through := throughText(m.cp.Watermark)
	if m.cp.Complete {
		return fmt.Sprintf("Partition %s is complete (durably, at generation %d)%s%s", m.part(), m.cp.Generation, through, m.traversalGap())
	}
	return fmt.Sprintf("Partition %s is caught up (nothing more to read for now; not marked complete, the next run reads on from its cursor)%s", m.part(), through)
}

// traversalGap names, for a partition completed by the end of a finite
// traversal (missing_successor: end_of_traversal) of a source that names
// no snapshot, what it will not see: a listing is not a snapshot, so an
// event written below the traversal's progress while it ran, or written
// after it ended, is never read, and the log says so rather than staying
// silent. Empty otherwise.
func (m *Machine) traversalGap() string {
	c := m.cfg.Contract
	if c.MissingSuccessor != provider.MissingSuccessorEndsTraversal || c.SnapshotMarker {
		return ""
	}
	return "; its traversal ended and nothing is listed again: an event written below its progress while it ran, or after it ended, is not read (a listing without a snapshot marker is not a snapshot; to read them, relist with missing_successor: poll and a reread_window, docs/design.md#re-read-windows)"
}

// throughText names a partition's complete-through watermark in a log
// line, and says so when none is certified (never "through none").
func throughText(w coord.Watermark) string {
	if w.IsZero() {
		return "; no complete-through watermark is certified"
	}
	return ", complete through " + w.String()
}

// abandonAll marks the witnesses ids of generation gen abandoned, in
// order, in state st, then runs then.
func (m *Machine) abandonAll(st State, gen uint64, ids []string, then *next) {
	if len(ids) == 0 {
		m.resume(then)
		return
	}
	m.setAbandoned(st, gen, ids[0], &next{kind: doAbandonAll, st: st, gen: gen, ids: ids[1:], then: then})
}

// setAbandoned marks a witness abandoned. Dispositions are hints that only
// save classification work: "promoted" is never stored (the checkpoint's
// promoted witness says it), "abandoned" is redone on the next load when a
// write is lost.
func (m *Machine) setAbandoned(st State, gen uint64, attempt string, then *next) {
	m.ask(st, Abandon{Key: m.cfg.Key, Generation: gen, Attempt: attempt}, next{kind: onAbandoned, text: attempt, then: then})
}

func (m *Machine) onAbandoned(attempt string, r Abandoned, then *next) {
	if r.Err != nil && !errors.Is(r.Err, store.ErrFenced) {
		m.logf(Debug, "Partition %s: marking witness %s abandoned: %v", m.part(), attempt, r.Err)
	}
	m.resume(then)
}

// ---------------------------------------------------------------------------
// The chain.

// startChain starts a chain from the loaded checkpoint.
func (m *Machine) startChain() {
	m.phase = phaseChain
	m.parkDrained = ParkReason{}
	m.mon.recoverDrained = ParkReason{}
	m.chainID++
	m.chain = nil
	m.dropWitnessGroup()
	clear(m.batches)
	m.tail = tailOf(m.cp)
	m.extend = true
	m.pollAt, m.rr.atHead = time.Time{}, false
	if !m.unprovenSaid {
		ct := reconcile.CheckContinuity(reconcile.ContinuityInput{Contract: m.cfg.Contract, Boundary: true, Witness: reconcile.Witness{Partition: m.part()}})
		if ct.Unproven {
			m.unprovenSaid = true
			m.logf(Warn, "Partition %s cannot prove completeness: %s", m.part(), ct.Reason)
		}
	}
}

// progressedPast reports whether cp got past the progress mark recorded at
// the first of a run of restarts: its applied boundary or its
// complete-through watermark is beyond the mark's. Re-reading the pages a
// restart replays moves neither, however many promotions it writes.
func progressedPast(mark, cp *store.Checkpoint) bool {
	if cp.HasApplied && (!mark.HasApplied || mark.Applied.Less(cp.Applied)) {
		return true
	}
	return !cp.Watermark.IsZero() && (mark.Watermark.IsZero() || mark.Watermark.Less(cp.Watermark))
}

// appliedText is a checkpoint's applied boundary for a reason ("none"
// before anything was applied).
func appliedText(cp *store.Checkpoint) string {
	if !cp.HasApplied {
		return "none"
	}
	return cp.Applied.String()
}

// maxRestarts is Config.MaxRestarts or its default.
func (m *Machine) maxRestarts() int {
	if m.cfg.MaxRestarts > 0 {
		return m.cfg.MaxRestarts
	}
	return MaxRestarts
}

// restartChain ends the chain; the checkpoint is loaded again.
func (m *Machine) restartChain() {
	m.parkDrained = ParkReason{}
	m.mon.recoverDrained = ParkReason{}
	m.emit(EndChain{Chain: m.chainID})
	m.chain = nil
	m.dropWitnessGroup()
	clear(m.batches)
	m.load()
}

// maybeFetch starts the next fetch when the chain has room.
func (m *Machine) maybeFetch() {
	if m.fetch != nil || !m.extend || m.done || len(m.chain) >= m.cfg.MaxPagesInFlight {
		return
	}
	if !m.pollAt.IsZero() && m.now.Before(m.pollAt) {
		return
	}
	if m.rr.atHead && !m.pollAt.IsZero() && m.rereadDue() {
		// The poll of the head is due, and so is a re-read pass: the
		// pass reads the head too (reread.go).
		m.pollAt, m.rr.atHead = time.Time{}, false
		m.startPass()
		return
	}
	m.pollAt, m.rr.atHead = time.Time{}, false
	m.nextFetch++
	m.fetch = &fetchRec{id: m.nextFetch, chain: m.chainID, cursor: m.tail.cur, gen: m.tail.gen, wm: m.tail.wm}
	m.emit(Fetch{
		ID: m.nextFetch, Cursor: m.tail.cur, Generation: m.tail.gen, Watermark: m.tail.wm,
		Attempt: len(m.prior[m.tail.gen]), Ahead: len(m.chain) > 0,
	})
}

// maxQuiet bounds Machine.quiet: past it the back-off has long reached
// any MaxPollInterval.
const maxQuiet = 64

// pollLater fetches the tail's cursor again after the poll wait.
// At the head, a partition with a re-read window starts its next pass
// instead when one is due (reread.go).
func (m *Machine) pollLater() {
	m.pollAt = m.now.Add(m.pollWait())
	m.rr.atHead = true
	if m.rereadDue() {
		m.startPass()
	}
}

// pollWait is the wait before the next poll: PollInterval, doubled for
// each answer in a row without events after the first, up to
// MaxPollInterval when that is longer.
func (m *Machine) pollWait() time.Duration {
	d, most := m.cfg.PollInterval, m.cfg.MaxPollInterval
	for i := 1; i < m.quiet && d <= most/2; i++ {
		d *= 2
	}
	if most > m.cfg.PollInterval {
		d = min(d, most)
	}
	return d
}

// onFetched reconciles one response: build its witness, classify it
// against the earlier witnesses of its (cursor, generation), make the
// witness durable, then emit the events that still need an outcome.
func (m *Machine) onFetched(f *fetchRec, r Fetched) {
	if r.Err != nil {
		m.onFetchError(f, r)
		return
	}
	m.failing = failureRun{}
	if why, ok := m.recreated(f, r.Response); ok {
		m.onRecreated(f, r.Attempt, why)
		return
	}
	v, err := m.reconcile(f, r)
	var mp malformedPage
	switch {
	case errors.As(err, &mp):
		var vs []reconcile.Violation
		if bv, ok := reconcile.BuildViolation(mp.err); ok {
			vs = append(vs, bv)
		}
		m.report(vs, &next{kind: doOnMalformed, f: f, text: mp.Error()})
		return
	case err != nil:
		// The response contradicts what is durable (a receipt, an earlier
		// witness of its cursor and generation): fetching it again cannot
		// make the two agree.
		m.count(MetricBadResponses, 1)
		m.park(ParkReason{rejectionKind(err), fmt.Sprintf("at generation %d cursor %s: %v", f.gen, reconcile.CursorHash(f.cursor), err)})
		return
	}
	// The first observation of a kind that breaks a claim makes the
	// partition recover once the page is promoted; later ones are counted.
	var recoverWith ParkReason
	if b, ok := claimBroken(v.violations); ok && !v.diverged && !m.mon.withdrawn[b.Kind] {
		recoverWith = recoverAfter(f.gen, f.cursor, b)
	}
	m.report(v.violations, &next{kind: doOnReconciled, f: f, fetched: &r, v: &v, reason: recoverWith})
}

// onReconciled goes on with a reconciled response once its contract
// violations are reported. recoverWith, when not empty, is the reason to
// recover with once the page is delivered and promoted.
func (m *Machine) onReconciled(f *fetchRec, r Fetched, v verdict, recoverWith ParkReason) {
	m.malformedDone()
	m.emit(Count{Metric: MetricRetries, Class: v.class, N: 1})
	if len(r.Response.Events) == 0 {
		m.quiet = min(m.quiet+1, maxQuiet)
	} else {
		m.quiet = 0
	}
	if !v.idle {
		m.idle = idleRun{}
	}
	if v.idle {
		if m.idle.n == 0 {
			m.idle.since = m.now
		}
		m.idle.n++
		if d := m.now.Sub(m.idle.since); d >= IdleReport && m.now.Sub(m.idle.reported) >= IdleReport {
			m.idle.reported = m.now
			m.logf(Info, "Partition %s is not advancing: %d answers in %s proved nothing (%s); polling cursor %s at generation %d every %s",
				m.cfg.Key.Partition, m.idle.n, d.Round(time.Second), v.reason, reconcile.CursorHash(f.cursor), f.gen, m.pollWait())
		}
		// An empty response that loops to its own cursor, or carries no
		// evidence: nothing to record or emit; poll again. With everything
		// before it promoted and the provider saying nothing follows, the
		// partition is complete.
		if v.final && m.cfg.ExitWhenComplete && len(m.chain) == 0 {
			m.done = true
			return
		}
		m.pollLater()
		return
	}
	if v.refused.Kind != 0 {
		m.refuse(v.refused)
		return
	}
	if v.diverged {
		m.recover(false, ParkReason{ParkDivergence, fmt.Sprintf("at generation %d cursor %s: %s", f.gen, reconcile.CursorHash(f.cursor), v.reason)})
		return
	}
	pg := &page{chain: m.chainID, fromCursor: f.cursor, fromGen: f.gen, w: v.w, v: v, events: r.Response.Events, bytes: PageBytes(r.Response), ackedUpTo: v.w.AckedThrough, receiptAt: v.w.AckedThrough, seq: f.seq}
	m.chain = append(m.chain, pg)
	m.count(MetricPagesFetched, 1)
	breaks := !recoverWith.IsZero()
	if breaks {
		// The page is delivered and promoted like any other (its events
		// are never skipped); then the partition recovers as the contract
		// says. Nothing is fetched past it meanwhile.
		m.mon.recoverDrained = recoverWith
	}

	// A page followed only because the contract says its successor
	// continues (empty_page follow_successor) is not fetched past at once:
	// it brought no data, so its successor is polled once it is promoted,
	// after poll_interval, like a head (no tight loop at a quiet head).
	if v.promotable && !v.final && !v.followOnly && !breaks && len(pg.w.Successor) > 0 && !bytes.Equal(pg.w.Successor, f.cursor) {
		// The successor may follow this page: fetch ahead, before the
		// witness write below, so the store's latency is not on the
		// fetch path (a fetch of a chain that then fails is discarded).
		m.tail.cur, m.tail.gen = pg.w.Successor, f.gen+1
		for _, e := range pg.w.Events {
			m.tail.applied, m.tail.hasApplied = coord.MaxPosition(e.Position, m.tail.applied), true
		}
		if ct := reconcile.FinalOf(m.cfg.Contract, pg.w.CompleteThrough).Watermark; !ct.IsZero() && !v.followOnly && (m.tail.wm.IsZero() || m.tail.wm.Less(ct)) {
			m.tail.wm = ct
		}
		m.maybeFetch()
	} else {
		// No successor may be fetched past a page that cannot be promoted
		// (or that ends the partition): re-poll its cursor once the chain
		// drains to it.
		m.extend = false
	}

	m.witnessOrEmit(pg)
}

func (m *Machine) putWitness(w reconcile.Witness, then *next) {
	m.ask(StateWitnessing, PutWitness{Witness: w}, next{kind: onWitnessStored, w: &w, then: then})
}

func (m *Machine) onWitnessStored(w reconcile.Witness, r WitnessStored, then *next) {
	switch {
	case r.Err == nil:
		m.resume(then)
	case errors.Is(r.Err, store.ErrInvalid):
		m.park(ParkReason{ParkUnstorableWitness, fmt.Sprintf("of generation %d (attempt %s): %v", w.Generation, w.AttemptID, r.Err)})
	default:
		m.logf(Warn, "Partition %s cannot record the witness of generation %d (attempt %s), not emitting: %v", m.part(), w.Generation, w.AttemptID, r.Err)
		m.wait(StateWitnessing, m.cfg.StoreBackoff, next{kind: doPutWitness, w: &w, then: then})
	}
}

// emitPage emits the events of pg that lack a terminal outcome, split
// into batches of at most MaxBatchSize.
func (m *Machine) emitPage(pg *page) {
	n := len(pg.w.Events)
	size := m.cfg.MaxBatchSize
	if size <= 0 {
		size = n
	}
	m.noteLateNearEdge(pg)
	for from := pg.ackedUpTo; from < n; {
		if m.received(pg.w.Events[from]) {
			// A re-read event a durable receipt shows delivered: done,
			// not emitted again (reread.go).
			to := from + 1
			for to < n && m.received(pg.w.Events[to]) {
				to++
			}
			pg.spans = append(pg.spans, span{from, to})
			pg.spanAcked = append(pg.spanAcked, true)
			m.count(MetricRereadSkipped, int64(to-from))
			from = to
			continue
		}
		to := min(from+size, n)
		for i := from + 1; i < to; i++ {
			if m.received(pg.w.Events[i]) {
				to = i
				break
			}
		}
		m.nextBatch++
		m.batches[m.nextBatch] = batchRef{pg: pg, span: len(pg.spans)}
		pg.spans = append(pg.spans, span{from, to})
		pg.spanAcked = append(pg.spanAcked, false)
		m.emit(Emit{
			Batch: m.nextBatch, Chain: pg.chain, Cursor: pg.fromCursor, Generation: pg.fromGen,
			Attempt: pg.w.AttemptID, Class: pg.v.class, From: from, To: to,
			Events: pg.events[from:to], Witnessed: pg.w.Events[from:to],
		})
		m.count(MetricEventsEmitted, int64(to-from))
		from = to
	}
	pg.extendAcked()
}

// extendAcked extends the page's contiguous prefix of events with
// terminal outcomes over its acknowledged spans.
func (pg *page) extendAcked() {
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

func (m *Machine) onAcks(acks []Ack) {
	if m.phase != phaseChain {
		return
	}
	for _, a := range acks {
		ref, ok := m.batches[a.Batch]
		// A batch has one outcome: forget it, so that the pages of a long
		// chain are not kept alive by the batches they emitted.
		delete(m.batches, a.Batch)
		if !ok || ref.pg.chain != m.chainID {
			continue
		}
		pg := ref.pg
		if a.Err != nil {
			if !pg.nacked {
				m.logf(Warn, "Partition %s: delivery of generation %d events %d-%d failed, the page will be fetched again: %v",
					m.part(), pg.fromGen, pg.spans[ref.span].from, pg.spans[ref.span].to-1, a.Err)
			}
			pg.nacked = true
			m.extend = false
			continue
		}
		pg.spanAcked[ref.span] = true
		// Extend the contiguous prefix of events with terminal outcomes.
		pg.extendAcked()
	}
	m.promoteHead()
}

// promoteHead promotes, strictly in page order, every leading page whose
// events all have a terminal outcome; records receipts for partly
// acknowledged heads; restarts the chain on a nacked head.
func (m *Machine) promoteHead() {
	if len(m.chain) == 0 {
		return
	}
	pg := m.chain[0]
	if pg.nacked {
		// Re-fetch the head's cursor: the retry is classified against this
		// page's witness (and its receipts).
		m.writeReceipt(StateRecordingReceipt, pg, &next{kind: doRefetchAfterNack, pg: pg})
		return
	}
	if !pg.complete() {
		m.writeReceipt(StateRecordingReceipt, pg, nil)
		return
	}
	if m.writeWindowReceipts() {
		// The receipts of the delivered pages of a re-read window first
		// (reread.go); promoteHead runs again once they are written.
		return
	}
	pg.w.AckedThrough = len(pg.w.Events)
	d := m.decide(pg)
	switch d.Action {
	case reconcile.Refuse:
		m.count(MetricRefusals, 1)
		m.recover(false, ParkReason{ParkRefused, fmt.Sprintf("of attempt %s at generation %d: %s", pg.w.AttemptID, pg.fromGen, d.Reason)})
		return
	case reconcile.Hold:
		// Every event delivered, but no evidence to move past it (or
		// nothing would change): keep the witness pending and poll the
		// same cursor again, or stop if the partition is caught up. The
		// receipts are recorded first, so the next poll's exact replay
		// resumes the witness with every event done and emits nothing.
		m.count(MetricHolds, 1)
		m.writeReceipt(StateHolding, pg, &next{kind: doAfterHold, pg: pg, text: d.Reason})
		return
	}
	if !m.incarnationConfirmed(pg) {
		// The page may have come from a source recreated since the last
		// check: confirm the incarnation first (incarnation.go).
		m.confirmIncarnation()
		return
	}
	pg.decision = d.Promotion
	pg.coalesced = m.coalesce(pg)
	if m.lingers(pg) {
		pg.coalesced = nil
		return
	}
	m.linger = nil
	last := pg.last()
	prom := m.groupPromotion(pg)
	prom.Violations = m.violationTotals()
	m.promote(pg, prom, &next{kind: doAfterPromotion, pg: pg, last: last})
}

// afterHold goes on once the receipts of the held head pg are recorded.
func (m *Machine) afterHold(pg *page, reason string) {
	m.chain = m.chain[1:]
	m.passReached(pg, len(pg.w.Successor) == 0)
	// Pages fetched past a held page are dropped, and so is a park
	// waiting for them: the malformed page lay past it.
	m.parkDrained = ParkReason{}
	if m.ended(pg) {
		m.done = true
		return
	}
	if r := m.mon.recoverDrained; !r.IsZero() {
		m.mon.recoverDrained = ParkReason{}
		if len(m.chain) == 0 {
			// The held page broke the claim: recover now.
			m.recover(false, r)
			return
		}
	}
	m.logf(Debug, "Partition %s holds at generation %d: %s", m.part(), pg.fromGen, reason)
	m.tail = tailOf(m.cp)
	if len(m.chain) > 0 {
		// Pages fetched past a held page were fetched from a
		// successor that is not durable: abandon them (their events
		// may repeat, never go missing).
		m.emit(EndChain{Chain: m.chainID})
		m.chainID++
		m.chain = nil
		m.dropWitnessGroup()
		clear(m.batches)
	}
	m.extend = true
	m.pollLater()
}

// afterPromotion goes on once the head pg (and the pages coalesced with
// it, the last of them last) is promoted.
func (m *Machine) afterPromotion(pg, last *page) {
	m.chain = m.chain[1+len(pg.coalesced):]
	if m.ended(last) {
		m.done = true
		m.chain = nil
		m.dropWitnessGroup()
		return
	}
	if r := m.mon.recoverDrained; len(m.chain) == 0 && !r.IsZero() {
		// The page that broke a claim is delivered and promoted.
		m.mon.recoverDrained = ParkReason{}
		m.recover(false, r)
		return
	}
	if len(m.chain) == 0 && !m.parkDrained.IsZero() {
		// Every page before the malformed one is promoted: the
		// checkpoint now holds its cursor.
		m.park(m.parkDrained)
		return
	}
	if len(m.chain) == 0 && !m.extend && m.fetch == nil {
		// The promoted page could not be fetched past (no successor,
		// its own cursor again, or the end of the data for now): poll
		// the new durable cursor.
		m.tail = tailOf(m.cp)
		m.extend = true
		m.pollLater()
	}
	m.promoteHead()
}

// ended reports whether the partition stops after pg: its checkpoint is
// durably complete (the provider sealed it, or its finite traversal ended),
// or it is caught up on evidence bound to pg and the input exits when every
// partition is.
func (m *Machine) ended(pg *page) bool {
	return m.cp.Complete || (pg.v.final && m.cfg.ExitWhenComplete)
}

func (m *Machine) writeReceipt(st State, pg *page, then *next) {
	n := pg.ackedUpTo
	if n <= pg.receiptAt {
		m.resume(then)
		return
	}
	m.ask(st, RecordReceipt{Key: m.cfg.Key, Generation: pg.fromGen, Attempt: pg.w.AttemptID, AckedThrough: n}, next{kind: onReceiptStored, pg: pg, n: n, then: then})
}

func (m *Machine) onReceiptStored(pg *page, n int, r ReceiptStored, then *next) {
	if r.Err != nil {
		// A receipt only saves duplicates on replay; losing it loses no
		// event.
		m.logf(Warn, "Partition %s: receipt for generation %d not recorded (events may repeat on retry): %v", m.part(), pg.fromGen, r.Err)
		m.resume(then)
		return
	}
	pg.receiptAt = n
	pg.w.AckedThrough = n
	m.rememberWitness(pg.w)
	m.resume(then)
}

// promote performs the one conditional write that moves the checkpoint from
// the page's input cursor to its successor.
func (m *Machine) promote(pg *page, prom store.Promotion, then *next) {
	if m.cfg.Leased {
		prom.Lease = m.lease // the held lease now (a retry after Resolve)
	}
	m.ask(StatePromoting, Promote{Promotion: prom}, next{kind: onPromoted, pg: pg, prom: &prom, then: then})
}

func (m *Machine) onPromoted(pg *page, prom store.Promotion, r Promoted, then *next) {
	if why, ok := m.fenced(r.Err, prom.Lease); ok {
		m.count(MetricCASConflicts, 1)
		m.logf(Warn, "Partition %s lost the promotion from generation %d (attempt %s): %v; the lease is gone, the partition stops", m.part(), pg.fromGen, pg.w.AttemptID, r.Err)
		m.loseLease(why)
		return
	}
	if m.leaseGoneAfterWrite(r.Checkpoint, r.Err, prom.Lease) {
		return
	}
	if r.Err == nil {
		m.promoted(pg, r.Checkpoint, then)
		return
	}
	var fe *store.FenceError
	if errors.As(r.Err, &fe) {
		m.count(MetricCASConflicts, 1)
		m.logf(Warn, "Partition %s lost the promotion from generation %d (attempt %s): %v; re-reading the winner", m.part(), pg.fromGen, pg.w.AttemptID, r.Err)
		// Abandon the witness only when the winner shows another
		// response promoted from its (cursor, generation). A park or a
		// lease change leaves (C, G) in place: the witness stays
		// pending and is resumed by the next exact replay.
		m.restartAfterLoss(fe.Winner, pg)
		return
	}
	// The write's outcome is unknown: resolve it by reading, never by
	// writing again blindly.
	m.logf(Warn, "Partition %s: promotion from generation %d has an unknown outcome, reading back: %v", m.part(), pg.fromGen, r.Err)
	m.resolve(pg, prom, then)
}

func (m *Machine) resolve(pg *page, prom store.Promotion, then *next) {
	m.ask(StateResolving, Resolve{Promotion: prom}, next{kind: onResolved, pg: pg, prom: &prom, then: then})
}

func (m *Machine) onResolved(pg *page, prom store.Promotion, r Resolved, then *next) {
	if why, ok := m.foreign(r.Checkpoint); r.Err == nil && ok {
		m.loseLease(why)
		return
	}
	switch {
	case r.Err != nil:
		m.logf(Warn, "Partition %s: cannot read back the checkpoint, not advancing: %v", m.part(), r.Err)
		m.wait(StateResolving, m.cfg.StoreBackoff, next{kind: doResolve, pg: pg, prom: &prom, then: then})
	case r.Applied:
		m.promoted(pg, r.Checkpoint, then)
	case !prom.StillAt(r.Checkpoint):
		// Overtaken. Our witness lost only if the promotion out of its
		// generation names another witness; a checkpoint that has moved
		// further says nothing about it, so it stays pending.
		cp := r.Checkpoint
		m.restartAfterLoss(&cp, pg)
	default:
		m.promote(pg, prom, then) // not applied, still ours to promote: write again
	}
}

// restartAfterLoss abandons pg's witness when winner proves another
// response won its generation, then restarts the chain.
func (m *Machine) restartAfterLoss(winner *store.Checkpoint, pg *page) {
	if lostTo(winner, pg) {
		m.setAbandoned(StateAbandoning, pg.fromGen, pg.w.AttemptID, &next{kind: doRestartChain})
		return
	}
	m.restartChain()
}

func (m *Machine) promoted(pg *page, cp store.Checkpoint, then *next) {
	m.cp = cp
	m.countsWritten()
	m.promotedEvents = pg.last().w.Events
	if m.restartMark == nil || progressedPast(m.restartMark, &cp) {
		m.restarts, m.restartMark = 0, nil
	}
	for _, p := range append([]*page{pg}, pg.coalesced...) {
		m.passReached(p, false)
	}
	// One Count per conditional write, N pages.
	m.count(MetricPromotions, int64(1+len(pg.coalesced)))
	m.emit(Observe{Checkpoint: cp})
	m.settlePages(append([]*page{pg}, pg.coalesced...), 0, then)
}

// settlePages marks pages[i:] promoted, one by one, and the other pending
// witnesses of each one's (cursor, generation) abandoned; then runs then.
func (m *Machine) settlePages(pages []*page, i int, then *next) {
	if i == len(pages) {
		m.resume(then)
		return
	}
	p := pages[i]
	p.w.Disposition = reconcile.Promoted
	m.rememberWitness(p.w)
	// Other pending witnesses of the same (cursor, generation) lost.
	var others []string
	for _, w := range m.prior[p.fromGen] {
		if w.AttemptID != p.w.AttemptID && w.Disposition == reconcile.Pending && string(w.InputCursor) == string(p.fromCursor) {
			others = append(others, w.AttemptID)
		}
	}
	delete(m.prior, p.fromGen)
	m.abandonAll(StateAbandoning, p.fromGen, others, &next{kind: doSettlePages, pages: pages, i: i + 1, then: then})
}

func (m *Machine) onFetchError(f *fetchRec, r Fetched) {
	m.count(MetricFetchErrors, 1)
	switch r.Failure {
	case FetchExpired:
		m.recover(true, ParkReason{ParkExpired, fmt.Sprintf("%s at generation %d: %s", reconcile.CursorHash(f.cursor), f.gen, r.Detail)})
	case FetchMalformed:
		m.onMalformed(f, r.Err.Error())
	case FetchPermanent:
		m.park(ParkReason{ParkPermanent, fmt.Sprintf("of cursor %s at generation %d: %v", reconcile.CursorHash(f.cursor), f.gen, r.Err)})
	default:
		// Transient failures were already retried with back-off; keep the
		// partition where it is and try again.
		m.logf(Warn, "Partition %s: fetch of cursor %s failed, not advancing: %v", m.part(), reconcile.CursorHash(f.cursor), r.Err)
		m.pollAt = m.now.Add(m.cfg.PollInterval)
		m.noteFailure(f, r.Err)
	}
}

// recover applies the contract's recovery for divergence, expiry (expired)
// or a refused promotion: a restart from a provider-supported stable
// boundary (one conditional write), or parking.
func (m *Machine) recover(expired bool, reason ParkReason) {
	// A recreated source shows as divergence or an expired cursor first:
	// check its incarnation before recovering from a boundary of the old
	// one.
	m.checkBefore(reason.String(), &next{kind: doRecoverNow, expired: expired, reason: reason})
}

func (m *Machine) recoverNow(expired bool, reason ParkReason) {
	if m.cp.Complete {
		// A restart promotion would write a checkpoint that is no longer
		// complete: a durably complete partition is only ever reopened
		// by an operator.
		m.finish(fmt.Sprintf("Partition %s is complete (durably, at generation %d)%s: %s, nothing to recover", m.part(), m.cp.Generation, throughText(m.cp.Watermark), reason))
		return
	}
	recovery := m.cfg.Contract.Recovery
	if recovery == provider.RecoveryPark || !m.cfg.Restarter {
		m.park(reason)
		return
	}
	if m.restartMark == nil {
		mark := m.cp
		m.restartMark = &mark
	}
	m.restarts++
	if limit := m.maxRestarts(); m.restarts > limit {
		m.park(reason.also("%d restarts from a stable boundary never got the partition past where the first of them found it (applied boundary %s, complete-through %s; max_restarts %d)",
			limit, appliedText(m.restartMark), m.restartMark.Watermark, limit))
		return
	}
	// Back off before each further restart without progress, so a boundary
	// that diverges again does not loop at full speed.
	if m.restarts > 1 {
		d := min(m.cfg.PollInterval<<(m.restarts-2), MaxRestartBackoff)
		m.logf(Info, "Partition %s: restart %d without progress, waiting %s first", m.part(), m.restarts, d)
		m.wait(StateRecovering, d, next{kind: doRestart, expired: expired, reason: reason})
		return
	}
	m.restartFromBoundary(expired, reason)
}

// restartFromBoundary asks the provider for a stable boundary cursor and
// writes the restart promotion to it. The restart happens from the
// durable checkpoint, so it waits for nothing; pages in flight are
// abandoned (their events may repeat).
func (m *Machine) restartFromBoundary(expired bool, reason ParkReason) {
	rc := RestartCursor{
		Partition: m.part(), Watermark: m.cp.Watermark,
		Applied: m.cp.Applied, HasApplied: m.cp.HasApplied, AppliedID: m.cp.AppliedID,
		Expired: expired,
	}
	if from, has, ok := m.rereadBoundary(); ok {
		// Within a re-read pass: restart the whole pass (reread.go).
		rc.Applied, rc.HasApplied, rc.AppliedID = from, has, ""
	}
	m.ask(StateRecovering, rc, next{kind: onRestartCursor, reason: reason})
}

func (m *Machine) onRestartCursor(reason ParkReason, r RestartCursorFound) {
	if r.Err != nil {
		m.park(reason.also("restart from a stable boundary failed: %v", r.Err))
		return
	}
	recovery := m.cfg.Contract.Recovery
	m.logf(Warn, "Partition %s: %s; restarting from a stable boundary (%s) after generation %d", m.part(), reason, recovery, m.cp.Generation)
	m.count(MetricRestarts, 1)
	prom := store.Promotion{
		Key: m.cfg.Key, FromCursor: m.cp.Cursor, FromGeneration: m.cp.Generation,
		To: r.Cursor, WitnessID: RestartWitnessPrefix + recovery.String(), Epoch: m.cfg.Epoch, Lease: m.writeLease(),
		Violations:  m.violationTotals(),
		Incarnation: m.incarnation,
	}
	m.ask(StateRecovering, Promote{Promotion: prom, Restart: true}, next{kind: onRestartPromoted, prom: &prom})
}

func (m *Machine) onRestartPromoted(carried store.Lease, r Promoted) {
	if m.leaseGoneAfterWrite(r.Checkpoint, r.Err, carried) {
		return
	}
	if r.Err != nil && !errors.Is(r.Err, store.ErrFenced) {
		m.logf(Warn, "Partition %s: restart write has an unknown outcome, re-reading: %v", m.part(), r.Err)
	}
	if r.Err == nil {
		m.countsWritten()
	}
	m.restartChain()
}

// leaseGoneAfterWrite stops a leased machine whose promotion carrying
// lease carried was fenced by another lease, or took effect on a
// checkpoint that holds another lease (the checkpoint is observed first:
// it is durable); it reports whether it did.
func (m *Machine) leaseGoneAfterWrite(cp store.Checkpoint, err error, carried store.Lease) bool {
	if why, ok := m.fenced(err, carried); ok {
		m.loseLease(why)
		return true
	}
	if err == nil && m.cfg.Leased && cp.Lease != carried {
		m.emit(Observe{Checkpoint: cp})
		m.loseLease(fmt.Sprintf("the promoted checkpoint holds lease %s, this worker held %s", cp.Lease, carried))
		return true
	}
	return false
}

// park stops the partition with a visible reason: in the log, a metric and
// the store. The other partitions go on.
func (m *Machine) park(reason ParkReason) {
	m.parkDrained = ParkReason{}
	m.logf(Error, "Partition %s parked: %s", m.part(), reason)
	m.count(MetricParks, 1)
	m.parkWrite(reason)
}

func (m *Machine) parkWrite(reason ParkReason) {
	a := Park{Key: m.cfg.Key, Cursor: m.cp.Cursor, Generation: m.cp.Generation, Lease: m.writeLease(), Reason: reason}
	m.ask(StateParking, a, next{kind: onParked, reason: reason, lease: a.Lease})
}

func (m *Machine) onParked(reason ParkReason, carried store.Lease, r Parked) {
	if why, ok := m.fenced(r.Err, carried); ok {
		m.loseLease(why)
		return
	}
	switch {
	case r.Err == nil:
		m.cp = r.Checkpoint
		m.restartChain()
	case errors.Is(r.Err, store.ErrFenced):
		m.restartChain()
	default:
		m.logf(Warn, "Partition %s: cannot record the park reason: %v", m.part(), r.Err)
		m.wait(StateParking, m.cfg.StoreBackoff, next{kind: doParkWrite, reason: reason})
	}
}
