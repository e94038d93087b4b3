package input

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/tidemark/tidemark/input/provider"
	"github.com/tidemark/tidemark/internal/chain"
	"github.com/tidemark/tidemark/internal/chain/chainstore"
	"github.com/tidemark/tidemark/internal/redact"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/witness"
)

type fetchResult struct {
	id   uint64
	resp witness.Response
	err  error
}

// partition drives one partition's chain machine (internal/chain): its run
// goroutine steps the machine and performs what it asks — store calls
// inline, fetches on their own goroutine, emissions through the input's
// channel, waits on a timer. Acks arrive through ackQ.
type partition struct {
	in  *paginatedInput
	key store.Key
	log *service.Logger
	// lease is the lease this worker runs under (nil without leases; see
	// lease.go): its writes are fenced by it, its messages carry it.
	lease *leaseHolder
	// red redacts this partition's logs and park reasons: the input's
	// credentials and the cursors and successors it fetched lately.
	red *redact.Set

	ackMu   sync.Mutex
	ackQ    []chain.Ack
	ackWake chan struct{}

	// owned by run.
	m       *chain.Machine
	outbox  []emission
	results chan fetchResult
	timer   *time.Timer
}

type emission struct {
	chain uint64
	batch service.MessageBatch
	ack   service.AckFunc
}

func newPartition(in *paginatedInput, name string) *partition {
	return &partition{
		in:      in,
		key:     store.Key{Scope: in.cfg.Scope, Partition: name},
		log:     in.log.With("partition", name, "scope", in.cfg.Scope),
		red:     in.red.Child(partitionRedactCursors),
		ackWake: make(chan struct{}, 1),
		results: make(chan fetchResult, 1),
	}
}

func (p *partition) enqueueAck(a chain.Ack) {
	p.ackMu.Lock()
	p.ackQ = append(p.ackQ, a)
	p.ackMu.Unlock()
	select {
	case p.ackWake <- struct{}{}:
	default:
	}
}

func (p *partition) takeAcks() []chain.Ack {
	p.ackMu.Lock()
	q := p.ackQ
	p.ackQ = nil
	p.ackMu.Unlock()
	return q
}

func (p *partition) machineConfig() chain.Config {
	cfg := p.in.cfg
	_, restarter := p.in.prov.(provider.Restarter)
	incarnation, every := false, time.Duration(0)
	if ip, ok := p.in.prov.(provider.Incarnations); ok {
		incarnation, every = ip.IncarnationCheck()
	}
	return chain.Config{
		Incarnation: incarnation, IncarnationInterval: every,
		Key: p.key, Contract: p.in.prov.Contract(), Restarter: restarter,
		StartCursor: cfg.StartCursor, Epoch: p.in.epoch(),
		MaxPagesInFlight: cfg.MaxPagesInFlight, MaxBatchSize: cfg.MaxBatchSize,
		PollInterval: cfg.PollInterval, ParkCheckInterval: cfg.ParkCheckInterval, StoreBackoff: cfg.StoreBackoff,
		FetchRetries: cfg.FetchRetries, FetchBackoff: cfg.FetchBackoff, Jitter: equalJitter,
		ExitWhenComplete: cfg.ExitWhenComplete, CoalescePromotions: !cfg.NoCoalescing,
		MaxRestarts: cfg.MaxRestarts,
	}
}

// equalJitter draws a back-off from [d/2, d] ("equal jitter"), so that
// partitions whose pages turned malformed at the same moment do not fetch
// again in lockstep.
func equalJitter(d time.Duration) time.Duration {
	half := d / 2
	return half + rand.N(half+1)
}

// run drives the partition until ctx ends.
func (p *partition) run(ctx context.Context) {
	defer p.in.partitionStopped(p)
	defer p.in.budget.set(p.key.Partition, 0)
	p.m = chain.New(p.machineConfig())
	p.timer = time.NewTimer(time.Hour)
	p.timer.Stop()
	defer p.timer.Stop()
	p.step(ctx, chain.Start{})
	for {
		var out chan emission
		var head emission
		if len(p.outbox) > 0 {
			out = p.in.out
			head = p.outbox[0]
		}
		select {
		case <-ctx.Done():
			p.perform(ctx, p.m.Step(chain.Stop{}))
			return
		case out <- head:
			p.outbox = p.outbox[1:]
		case r := <-p.results:
			if ctx.Err() != nil {
				return
			}
			p.step(ctx, p.fetched(r))
		case <-p.ackWake:
			p.step(ctx, chain.Delivered{Acks: p.takeAcks()})
		case <-p.timer.C:
			p.step(ctx, chain.Tick{Now: time.Now()})
		}
	}
}

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
	for len(acts) > 0 {
		a := acts[0]
		acts = acts[1:]
		switch a := a.(type) {
		case chain.Fetch:
			if ctx.Err() != nil {
				return
			}
			p.red.AddBytes(a.Cursor)
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
			p.timer.Reset(max(time.Until(a.Until), 0))
		case chain.Log:
			p.logText(a)
		case chain.Count:
			p.in.metrics.count(a)
		case chain.Observe:
			p.in.observeCheckpoint(a.Checkpoint)
		case chain.Completed:
			p.in.partitionDone(p)
		case chain.RestartCursor:
			if ctx.Err() != nil {
				return
			}
			// Only asked when the provider is a Restarter (Config.Restarter).
			cursor, err := p.in.prov.(provider.Restarter).RestartCursor(ctx, provider.Boundary{
				Partition: a.Partition, Watermark: a.Watermark,
				Applied: a.Applied, HasApplied: a.HasApplied, AppliedID: a.AppliedID,
				Expired: a.Expired,
			})
			acts = append(acts, p.m.Step(chain.RestartCursorFound{Cursor: cursor, Err: err})...)
		case chain.CheckIncarnation:
			if ctx.Err() != nil {
				return
			}
			// Only asked when the provider declares an incarnation.
			v, err := p.in.prov.(provider.Incarnations).Incarnation(ctx, a.Key.Scope, a.Key.Partition)
			acts = append(acts, p.m.Step(chain.IncarnationFound{Value: v, Err: err})...)
		case chain.Reincarnate:
			if ctx.Err() != nil {
				return
			}
			r := chainstore.Reincarnate(ctx, p.in.store, a)
			if r.Membership.Epoch > 0 {
				// The new epoch is the input's before any event of the new
				// incarnation leaves: its messages carry it, and their
				// frontier is that epoch's (withheld until proven).
				p.in.adopt(r.Membership, "source incarnation change of "+a.Key.Partition)
			}
			if r.Err == nil {
				p.in.metrics.incarnationChanges.Incr(1)
			}
			acts = append(acts, p.m.Step(r)...)
		default:
			// A stopping worker makes no further call, but what the last
			// answer says is still logged and counted (a promotion fenced
			// by a lost lease).
			if ctx.Err() != nil {
				return
			}
			in, ok := chainstore.Do(ctx, redactingStore{Store: p.in.store, red: p.red}, a)
			if !ok {
				return
			}
			acts = append(acts, p.m.Step(in)...)
		}
	}
}

func (p *partition) logText(l chain.Log) {
	text := p.red.Apply(l.Text)
	switch l.Level {
	case chain.Debug:
		p.log.Debug(text)
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

func (s redactingStore) SetParked(ctx context.Context, k store.Key, cursor []byte, generation uint64, lease store.Lease, reason string) (store.Checkpoint, error) {
	if reason != "" {
		s.red.AddBytes(cursor)
		reason = s.red.Apply(reason)
	}
	return s.Store.SetParked(ctx, k, cursor, generation, lease, reason)
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
			Scope: p.key.Scope, Partition: p.key.Partition, Cursor: f.Cursor, Watermark: f.Watermark, Attempt: f.Attempt,
		})
		select {
		case p.results <- fetchResult{id: f.ID, resp: resp, err: err}:
		case <-ctx.Done():
		}
	}()
}

// fetched turns a fetch result into the machine's input: a fresh attempt
// id for its witness, or the class of its error (a malformed answer is
// fetched again by the machine, chain.Config.FetchRetries times).
func (p *partition) fetched(r fetchResult) chain.Input {
	p.red.AddBytes(r.resp.Successor)
	in := chain.Fetched{Fetch: r.id, Attempt: p.in.newAttemptID(), Response: r.resp, Err: p.red.Error(r.err)}
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
