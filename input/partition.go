package input

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/tidemark/tidemark/internal/chain"
	"github.com/tidemark/tidemark/internal/chain/chainstore"
	"github.com/tidemark/tidemark/internal/leasing"
	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/redact"
	"github.com/tidemark/tidemark/internal/sdkcoord"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/provider"
)

type fetchResult struct {
	id   uint64
	resp provider.Response
	err  error
}

// partition drives one partition's chain machine (internal/chain): it
// steps the machine and performs what it asks — store calls inline,
// fetches on their own goroutine, emissions through the input's channel,
// waits in the input's one scheduler (partitionRunner). It holds a
// goroutine only while it has something to do: a fetch result, acks, a
// deadline that came due, emissions to hand downstream. Otherwise (a quiet
// partition waiting for its next poll, a chain waiting for acks) it holds
// none, and a complete partition's worker ends.
type partition struct {
	in  *paginatedInput
	key store.Key
	log *service.Logger
	// lease is the lease this worker runs under (nil without leases; see
	// lease.go): its machine is given it (chain.Config.Lease) and states it
	// in its writes, its messages carry it.
	lease *leasing.Holder
	// red redacts this partition's logs and park reasons: the input's
	// credentials and the cursors and successors it fetched lately.
	red *redact.Set

	// The mailbox: what arrived since the partition last ran. running: a
	// goroutine (of the input's pool) drives the partition; it is woken
	// through wake. ended: the worker ended; nothing arrives any more.
	mu       sync.Mutex
	started  bool
	stopping bool
	due      bool
	ackQ     []chain.Ack
	results  []fetchResult
	running  bool
	ended    bool
	wake     chan struct{}
	stopHook func() bool

	// Set by launch.
	ctx  context.Context
	done func()

	// owned by the goroutine that drives the partition.
	m      *chain.Machine
	outbox []emission
	// redacted are the two cursors last added to red (a quiet partition
	// polls the same cursor again and again).
	redacted [2][]byte
	state    chain.State // the machine's state last logged (state.go)
}
type emission struct {
	chain uint64
	batch service.MessageBatch
	ack   service.AckFunc
}

func newPartition(in *paginatedInput, name string) *partition {
	return &partition{
		in:   in,
		key:  store.Key{Scope: in.cfg.Scope, Partition: name},
		log:  in.log.With("partition", name, "scope", in.cfg.Scope),
		red:  in.red.Child(partitionRedactCursors),
		wake: make(chan struct{}, 1),
	}
}

func (p *partition) enqueueAck(a chain.Ack) {
	p.post(func() { p.ackQ = append(p.ackQ, a) })
}

func (p *partition) machineConfig() chain.Config {
	_, restarter := p.in.prov.(provider.Restarter)
	incarnation, every := false, time.Duration(0)
	if ip, ok := p.in.prov.(provider.Incarnations); ok {
		incarnation, every = ip.IncarnationCheck()
	}
	// The spec's fields (Config's embedded chain.Config), then what is
	// the partition's own.
	c := p.in.cfg.Config
	c.Key, c.Contract, c.Restarter, c.Epoch = p.key, p.in.prov.Contract(), restarter, p.in.epoch()
	c.Incarnation, c.IncarnationInterval = incarnation, every
	c.Jitter = equalJitter
	if p.lease != nil {
		c.Leased = true
		c.Lease, _ = p.lease.Current()
	}
	return c
}

// equalJitter draws a back-off from [d/2, d] ("equal jitter"), so that
// partitions whose pages turned malformed at the same moment do not fetch
// again in lockstep.
func equalJitter(d time.Duration) time.Duration {
	half := d / 2
	return half + rand.N(half+1)
}

// launch starts the partition's worker under ctx: it drives the machine
// until ctx ends or the partition is complete; with a lease (p.lease), its
// machine is given it. done is called once, when the worker ended. This is
// the one way workers start, when the instance machine says so
// (instance.StartWorker: instance.go without leases, lease.go with them;
// a child of a split only once its parents are complete).
func (p *partition) launch(ctx context.Context, done func()) {
	p.ctx, p.done = ctx, done
	p.in.runner.live.Add(1)
	p.m = chain.New(p.machineConfig())
	p.mu.Lock()
	p.stopHook = context.AfterFunc(p.ctx, func() { p.post(func() { p.stopping = true }) })
	p.mu.Unlock()
	p.post(func() { p.started = true })
}

// post changes the mailbox with f and makes sure a goroutine will look at
// it: the one driving the partition is woken, or one of the pool's is
// asked to.
func (p *partition) post(f func()) {
	p.mu.Lock()
	if p.ended {
		p.mu.Unlock()
		return
	}
	f()
	if p.running {
		p.mu.Unlock()
		select {
		case p.wake <- struct{}{}:
		default:
		}
		return
	}
	p.running = true
	p.mu.Unlock()
	p.in.runner.driving.Add(1)
	p.in.runner.pool.Go(p.drive)
}

// mail is what a partition's mailbox held.
type mail struct {
	start, stop, due bool
	acks             []chain.Ack
	results          []fetchResult
}

func (p *partition) take() mail {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := mail{start: p.started, stop: p.stopping, due: p.due, acks: p.ackQ, results: p.results}
	p.started, p.due, p.ackQ, p.results = false, false, nil, nil
	return m
}

// takeResults takes the fetch results in the mailbox.
func (p *partition) takeResults() []fetchResult {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.results
	p.results = nil
	return r
}

// idle gives the partition's goroutine back when nothing arrived
// meanwhile; false: go on.
func (p *partition) idle() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started || p.stopping || p.due || len(p.ackQ) > 0 || len(p.results) > 0 {
		return false
	}
	p.running = false
	p.in.runner.driving.Add(-1)
	return true
}

// yieldAfter is how many rounds a partition runs before it lets the
// partitions queued for the pool go first.
const yieldAfter = 32

// drive runs the partition on the calling goroutine (one of the pool's)
// until it has nothing to do, it yields to the queued partitions, or its
// worker ends.
func (p *partition) drive() {
	ctx := p.ctx
	for round := 1; ; round++ {
		mb := p.take()
		if mb.stop || ctx.Err() != nil {
			p.perform(ctx, p.m.Step(p.stopInput()))
			p.end()
			return
		}
		if mb.start {
			p.step(ctx, chain.Start{})
		}
		for _, r := range mb.results {
			p.step(ctx, p.fetched(r))
		}
		if len(mb.acks) > 0 {
			p.step(ctx, chain.Delivered{Acks: mb.acks})
		}
		if mb.due {
			p.step(ctx, chain.Tick{Now: time.Now()})
		}
		if p.m.State() == chain.StateComplete && len(p.outbox) == 0 {
			// Complete: nothing is read again (a worker started anew, by
			// a membership change or a lease, loads the checkpoint again).
			p.end()
			return
		}
		if len(p.outbox) == 0 {
			if p.idle() {
				return
			}
			continue
		}
		if round%yieldAfter == 0 && p.in.runner.pool.Waiting() > 0 {
			p.in.runner.pool.Go(p.drive)
			return
		}
		select {
		case <-ctx.Done():
		case p.in.out <- p.outbox[0]:
			p.outbox[0] = emission{}
			p.outbox = p.outbox[1:]
		case <-p.wake:
		}
	}
}

// stopInput is what a stopping worker steps its machine with: the lost
// lease as an input (chain.LeaseLost, the machine stops in
// chain.StateLeaseLost), or a plain Stop.
func (p *partition) stopInput() chain.Input {
	if p.lease != nil {
		if _, lost := p.lease.Current(); lost != "" {
			return chain.LeaseLost{Reason: lost}
		}
	}
	return chain.Stop{}
}

// end ends the worker: its deadline is dropped, the budget forgets it and
// done is called.
func (p *partition) end() {
	p.mu.Lock()
	p.ended = true
	if p.running {
		p.running = false
		p.in.runner.driving.Add(-1)
	}
	p.ackQ, p.results = nil, nil
	stop := p.stopHook
	p.mu.Unlock()
	if stop != nil {
		stop()
	}
	p.in.runner.sched.Cancel(p)
	p.outbox = nil
	p.in.budget.set(p.key.Partition, 0)
	p.forgetState()
	p.in.runner.live.Add(-1)
	p.done()
}

// fire is called by the input's scheduler when the partition's deadline
// (the machine's latest Wait) came due.
func (p *partition) fire() { p.post(func() { p.due = true }) }

// step tells the machine the time, feeds it in and performs what follows,
// then tells the input's byte budget what the chain holds.
func (p *partition) step(ctx context.Context, in chain.Input) {
	acts := p.m.Step(chain.Tick{Now: time.Now()})
	p.perform(ctx, append(acts, p.m.Step(in)...))
	p.in.budget.set(p.key.Partition, p.m.TrackedBytes())
}

// perform carries out the machine's actions in order; the answer to a call
// is stepped at once and its actions performed after the rest.
func (p *partition) perform(ctx context.Context, acts []chain.Action) {
	defer p.noteState()
	for len(acts) > 0 {
		p.noteState()
		a := acts[0]
		acts = acts[1:]
		switch a := a.(type) {
		case chain.Fetch:
			if ctx.Err() != nil {
				return
			}
			p.redactCursor(a.Cursor)
			p.startFetch(ctx, a)
		case chain.Emit:
			p.emit(a)
		case chain.EndChain:
			// The chain's emissions not yet read are dropped (their acks
			// would be ignored).
			kept := p.outbox[:0]
			for _, e := range p.outbox {
				if !a.Ends(e.chain) {
					kept = append(kept, e)
				}
			}
			p.outbox = kept
		case chain.Wait:
			p.in.runner.sched.At(p, a.Until)
		case chain.Log:
			p.logText(a)
		case chain.Count:
			p.in.metrics.count(a)
		case chain.Observe:
			p.in.observeCheckpoint(a.Checkpoint)
		case chain.Completed:
			p.in.partitionDone(p)
		case chain.LeaseGone:
			// The machine found another lease (only a leased machine
			// does): the holder stops the worker and tells the manager.
			if p.lease != nil {
				p.lease.Lose(a.Reason)
			}
		case chain.RestartCursor:
			if ctx.Err() != nil {
				return
			}
			// Only asked when the provider is a Restarter (Config.Restarter).
			cursor, err := p.in.prov.(provider.Restarter).RestartCursor(ctx, provider.Boundary{
				Partition: a.Partition, Watermark: sdkcoord.SDKWatermark(a.Watermark),
				Applied: sdkcoord.SDKPosition(a.Applied), HasApplied: a.HasApplied, AppliedID: a.AppliedID,
				Expired: a.Expired,
			})
			acts = append(acts, p.m.Step(chain.RestartCursorFound{Cursor: cursor, Err: err})...)
		case chain.CheckIncarnation:
			if ctx.Err() != nil {
				return
			}
			// The answers already fetched are handed to the machine
			// first (it queues them): the check begins after they
			// arrived, so it covers them too and their pages are emitted
			// without a request of their own (chain.CheckIncarnation).
			for _, r := range p.takeResults() {
				acts = append(acts, p.m.Step(p.fetched(r))...)
			}
			// Only asked when the provider declares an incarnation.
			v, err := p.in.prov.(provider.Incarnations).Incarnation(ctx, a.Key.Scope, a.Key.Partition)
			acts = append(acts, p.m.Step(chain.IncarnationFound{Value: v, Err: err})...)
		case chain.Reincarnate:
			if ctx.Err() != nil {
				return
			}
			var r chain.Reincarnated
			if !p.call(ctx, a, func() { r = chainstore.Reincarnate(ctx, p.in.store, a) }) {
				return // the lease is lost: drive steps chain.LeaseLost
			}
			if r.Membership.Epoch > 0 {
				// The new epoch is the input's before any event of the new
				// incarnation leaves: its messages carry it, and their
				// frontier is that epoch's (withheld until proven).
				p.in.adopt(r.Membership, "source incarnation change of "+a.Key.Partition)
			}
			acts = append(acts, p.m.Step(r)...)
		default:
			// A stopping worker makes no further call, but what the last
			// answer says is still logged and counted (a promotion fenced
			// by a lost lease).
			if ctx.Err() != nil {
				return
			}
			var in chain.Input
			ok := true
			if !p.call(ctx, a, func() { in, ok = chainstore.Do(ctx, redactingStore{Store: p.in.store, red: p.red}, a) }) {
				return // the lease is lost: drive steps chain.LeaseLost
			}
			if !ok {
				return
			}
			p.in.metrics.storeCalled(a, in)
			acts = append(acts, p.m.Step(in)...)
		}
	}
}

// call performs the machine's store call a (do). Under a lease, a call
// that carries or checks the lease runs while no release runs
// (leasing.Holder.Fenced); false: the lease is lost (or ctx ended while
// waiting) and the call was not made. A lost lease cancels the worker's
// context, so drive then steps the machine with chain.LeaseLost and ends
// the worker.
func (p *partition) call(ctx context.Context, a chain.Action, do func()) bool {
	switch a.(type) {
	case chain.Load, chain.WaitUnparked, chain.Promote, chain.Resolve, chain.Park, chain.NoteFailure, chain.Reincarnate:
	default:
		do()
		return true
	}
	if p.lease == nil {
		do()
		return true
	}
	ok, err := p.lease.Fenced(ctx, do)
	return ok && err == nil
}

// redactCursor adds a cursor or successor to the partition's redaction
// set, unless it is one of the two it added last (still in the set: it
// keeps partitionRedactCursors).
func (p *partition) redactCursor(c []byte) {
	if bytes.Equal(c, p.redacted[0]) || bytes.Equal(c, p.redacted[1]) {
		return
	}
	p.red.AddBytes(c)
	p.redacted[1] = p.redacted[0]
	p.redacted[0] = bytes.Clone(c)
}

// redactedText is a log line redacted when (and only when) a logger
// formats it: a debug line the logger drops costs no redaction.
type redactedText struct {
	red  *redact.Set
	text string
}

func (r redactedText) String() string { return r.red.Apply(r.text) }

func (p *partition) logText(l chain.Log) {
	if l.Level == chain.Debug {
		p.log.Debugf("%s", redactedText{p.red, l.Text})
		return
	}
	text := p.red.Apply(l.Text)
	switch l.Level {
	case chain.Info:
		p.log.Info(text)
	case chain.Warn:
		p.log.Warn(text)
	default:
		p.log.Error(text)
	}
}

// partitionRedactCursors is how many of its latest cursors and successors
// a partition's redaction set keeps.
const partitionRedactCursors = 64

// redactingStore redacts the park reasons a partition writes (with its
// credentials and cursors, and the cursor the write names).
type redactingStore struct {
	store.Store
	red *redact.Set
}

// Unwrap returns the decorated store, so that the readers of the
// membership and published frontier records (store.FrontierCache,
// store.MembershipCache) find its cheap reads (the root alone, the epoch
// alone) instead of reading every shard every round.
func (s redactingStore) Unwrap() store.Store { return s.Store }

// The partitions' store writes a group of witnesses in one write when the
// store under it does (a decorator that hid it would write one a page).
var _ store.WitnessGrouper = redactingStore{}

// PutWitnesses passes a group of witnesses to the decorated store in one
// write (store.WitnessGrouper), as PutWitness passes one.
func (s redactingStore) PutWitnesses(ctx context.Context, ws []reconcile.Witness) error {
	return store.PutWitnesses(ctx, s.Store, ws)
}

func (s redactingStore) SetParked(ctx context.Context, k store.Key, cursor []byte, generation uint64, lease store.Lease, reason string) (store.Checkpoint, error) {
	if reason != "" {
		s.red.AddBytes(cursor)
		reason = s.red.Apply(reason)
	}
	return s.Store.SetParked(ctx, k, cursor, generation, lease, reason)
}

// NoteFailure redacts the failure note as SetParked redacts a park reason.
func (s redactingStore) NoteFailure(ctx context.Context, k store.Key, cursor []byte, generation uint64, lease store.Lease, note string) (store.Checkpoint, error) {
	if note != "" {
		s.red.AddBytes(cursor)
		note = s.red.Apply(note)
	}
	return s.Store.NoteFailure(ctx, k, cursor, generation, lease, note)
}

// startFetch fetches on its own goroutine (fetchWithRetry retries
// transient failures); the result comes back through p.results.
func (p *partition) startFetch(ctx context.Context, f chain.Fetch) {
	// The budget must know the pages the chain holds now, the one just
	// fetched included, before this fetch checks it.
	p.in.budget.set(p.key.Partition, p.m.TrackedBytes())
	go func() {
		// A fetch ahead waits while the input's pages hold
		// max_bytes_in_flight (byteBudget).
		if p.in.budget.wait(ctx, p.key.Partition) != nil {
			return
		}
		resp, err := p.in.fetchWithRetry(ctx, p, provider.Request{
			Scope: p.key.Scope, Partition: p.key.Partition, Cursor: f.Cursor, Watermark: sdkcoord.SDKWatermark(f.Watermark), Attempt: f.Attempt,
		})
		r := fetchResult{id: f.ID, resp: resp, err: err}
		p.post(func() { p.results = append(p.results, r) })
	}()
}

// fetched turns a fetch result into the machine's input: a fresh attempt
// id for its witness, or the class of its error (a malformed answer is
// fetched again by the machine, chain.Config.FetchRetries times).
func (p *partition) fetched(r fetchResult) chain.Input {
	p.redactCursor(r.resp.Successor)
	// The provider's values enter the core here, in its coordinates.
	in := chain.Fetched{Fetch: r.id, Attempt: p.in.newAttemptID(), Response: reconcile.FromProvider(r.resp), Err: p.red.Error(r.err)}
	var exp *provider.ExpiredError
	var mal *provider.MalformedError
	switch {
	case r.err == nil:
	case errors.As(r.err, &exp):
		in.Failure, in.Detail = chain.FetchExpired, p.red.Apply(exp.Reason)
	case errors.As(r.err, &mal):
		in.Failure, in.Err = chain.FetchMalformed, mal
	case errors.Is(r.err, provider.ErrPermanent):
		in.Failure = chain.FetchPermanent
	}
	return in
}

// emit queues one batch of a page for ReadBatch.
func (p *partition) emit(e chain.Emit) {
	batch := make(service.MessageBatch, 0, len(e.Events))
	for i := range e.Events {
		batch = append(batch, p.in.message(p, e, i))
	}
	id := e.Batch
	p.outbox = append(p.outbox, emission{chain: e.Chain, batch: batch, ack: func(_ context.Context, err error) error {
		p.enqueueAck(chain.Ack{Batch: id, Err: err})
		return nil
	}})
}
