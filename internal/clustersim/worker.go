package clustersim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tidemark/tidemark/internal/chain"
	"github.com/tidemark/tidemark/internal/chain/chainstore"
	"github.com/tidemark/tidemark/internal/instance"
	"github.com/tidemark/tidemark/internal/membership"
	"github.com/tidemark/tidemark/internal/publish"
	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/sdkcoord"
	"github.com/tidemark/tidemark/internal/store"
)

// A worker stands for one process running the paginated_partitions input:
// a lane per partition it reads, all lost together when it crashes. A lane
// drives the partition's chain machine (internal/chain), the very machine
// the input drives, one step at a time: each step feeds the machine one
// input (a fetch result, the acks that arrived, the time it waits for) or
// performs one thing it asked (a fetch of the model provider, or one store
// call against the store with its faults); whatever follows runs at the
// lane's next step, so every store call is a point where another actor, a
// fault or a crash can cut in. The broken variants are applied to the
// machine's configuration or to the actions it returns (variant.go); the
// faithful lanes perform the machine's actions as they are: the lane's
// lease (from its worker's instance machine) and its worker's epoch are
// the machine's inputs (chain.Config, EpochChanged), as the input's
// workers are given theirs.

type worker struct {
	id    int
	inc   int
	lanes []*lane // in partition order
	epoch uint64
	// parents is the stored membership's lineage (each child's parents),
	// which the instance machine gates with in lease mode.
	parents map[string][]string
	// Lease mode (lease.go): ticks is the worker's own clock (its lane
	// steps); a paused worker is not stepped; resumed: it was paused and
	// resumed since its last crash.
	ticks           int
	paused, resumed bool
	pauseTicks      []int // every worker's ticks when it was paused
	// im is the worker's instance machine (nil until its first lease step
	// after a start or crash); self its incarnation's owner, incs the
	// incarnations so far; run the partitions it runs, under their
	// leases; calls its store calls not yet performed.
	im    *instance.Machine
	pub   *publish.Publisher // the frontier publisher whose rounds im times
	self  string
	incs  int
	run   map[string]store.Lease
	calls []instance.Action
	// exited: in exit mode (exit.go) its instance machine ended it.
	exited bool
}

type lane struct {
	s    *sim
	w    *worker
	p    *part
	key  store.Key
	dead bool

	// m is the partition's machine, made at the lane's first step (in lease
	// mode: once the lease is held).
	m *chain.Machine
	// call is a store call the machine asked for that the lane performs at
	// its next step; fetch a fetch it asked for, not yet made; results the
	// fetches made, not yet stepped; acks the outcomes of its batches.
	call    chain.Action
	fetch   *chain.Fetch
	results []chain.Fetched
	acks    []chain.Ack
	// now is the lane's clock; wake the time of the machine's last Wait.
	now, wake time.Time

	// Lease mode (lease.go): the lease its worker's instance runs it under.
	lease store.Lease
	// exited: the machine completed under exit_when_complete;
	// emptyFinal is the model's finality clock T when it last answered
	// this lane with an honest empty page (what "caught up" claims).
	exited     bool
	emptyFinal int64
	// complete: the machine completed (durably, or caught up under
	// exit_when_complete); parked: the park reason of the last checkpoint
	// it observed (exit.go's CheckExit).
	complete bool
	parked   string

	// released: the partition's parents (a split's) are complete or left
	// the membership, so the lane may read it (membership.Waiting).
	released bool

	// Beside the machine, as the input's driver (chain/driver.go):
	// cfg is the machine's config (its FetchRetry is the retry of
	// transient fetch failures), retry the transient retries of the fetch
	// in flight; outbox the emissions not yet handed
	// to the sink (schedules with setup.queue), dropped when their chain
	// ends; prune the witness deletion rule and prunes the deletions due,
	// performed at later steps (beside the worker, as the input's).
	cfg    chain.Config
	retry  chain.FetchRetry
	outbox []*delivery
	prune  chain.Pruning
	prunes []uint64

	budget int
	// pending are the machine's actions handle has yet to perform;
	// handling: handle is performing them (an answer's actions queue).
	pending  []chain.Action
	handling bool
	// out collects what the current step did, for the trace.
	out []string
}

var bg = context.Background()

// simFetchRetries is the workers' fetch_retries: a page parks on its third
// malformed answer in a row.
const simFetchRetries = 2

// fetchBackoff is the workers' fetch_backoff.
const fetchBackoff = 100 * time.Millisecond

func (l *lane) name() string { return fmt.Sprintf("w%d/%s", l.w.id, l.p.name) }

func (l *lane) st() store.Store { return l.s.st }

func (l *lane) note(format string, a ...any) {
	l.out = append(l.out, fmt.Sprintf(format, a...))
}

// config is the machine of the lane's partition: the provider's contract,
// the run's depth and batch size, and the variant's changes (variant.go).
func (l *lane) config() chain.Config {
	cfg := chain.Config{
		Key: l.key, Contract: l.p.prof.contract, Restarter: true, Epoch: l.w.epoch,
		Leased: l.s.lease != nil, Lease: l.lease,
		MaxPagesInFlight: l.s.setup.depth, MaxBatchSize: l.s.setup.batch,
		PollInterval: time.Second, ParkCheckInterval: time.Second, StoreBackoff: time.Second,
		FetchRetries: simFetchRetries, FetchBackoff: fetchBackoff,
		// Every source names its incarnation (the model's counter); a
		// reading lane checks it every few polls.
		Incarnation: true, IncarnationInterval: 5 * time.Second,
	}
	if cfg.Contract.HasFirstPosition() {
		// The declared origin is the partition's own first position (a
		// partition created later, or a split's child, starts above 1), in
		// every incarnation.
		cfg.Contract.FirstPosition = sdkcoord.SDKPosition(l.p.at(l.p.created))
	}
	cfg.ExitWhenComplete = l.s.setup.exit && l.s.lease == nil
	cfg.CoalescePromotions = l.s.setup.coalesce
	cfg.PromoteMinPages, cfg.PromoteLinger = l.s.setup.minPages, l.s.setup.linger
	cfg.WitnessGroupPages = l.s.setup.witnessGroup
	cfg.MaxPollInterval = l.s.setup.maxPoll
	l.s.variant.configure(&cfg)
	return cfg
}

// step advances the lane by one event: a call the machine asked for, or
// one of its inputs (a fetch result, acks, a fetch, the time it waits for)
// chosen by sel.
func (l *lane) step(sel int) string {
	l.out = l.out[:0]
	l.budget = 1
	if l.s.lease == nil && !l.released && !l.parentsDone() {
		return joinNotes(l.out)
	}
	if l.s.lease != nil {
		l.s.caller = l.w.owner()
		defer func() { l.s.caller = "" }()
		if l.leaseStep() {
			return joinNotes(l.out)
		}
	}
	if l.s.exitMode() && l.exitStep() {
		return joinNotes(l.out)
	}
	if l.m != nil && l.m.Epoch() != l.w.epoch {
		// The worker's epoch moved (a membership change): the machine's
		// writes state it from now on.
		l.m.Step(chain.EpochChanged{Epoch: l.w.epoch})
	}
	switch {
	case l.m == nil:
		l.cfg = l.config()
		l.prune = chain.Pruning{Every: l.s.setup.prune}
		l.m = chain.New(l.cfg)
		l.feed(chain.Start{})
	case l.call != nil:
		a := l.call
		l.call = nil
		l.budget--
		l.perform(a)
	default:
		var inputs []func()
		if len(l.results) > 0 {
			inputs = append(inputs, func() {
				r := l.results[0]
				l.results = l.results[1:]
				l.feed(r)
			})
		}
		if len(l.acks) > 0 {
			inputs = append(inputs, func() {
				acks := l.acks
				l.acks = nil
				l.feed(chain.Delivered{Acks: acks})
			})
		}
		if l.fetch != nil {
			inputs = append(inputs, l.doFetch)
		}
		if len(l.outbox) > 0 {
			inputs = append(inputs, l.read)
		}
		if len(l.prunes) > 0 {
			inputs = append(inputs, l.doPrune)
		}
		if !l.wake.IsZero() {
			inputs = append(inputs, func() {
				l.now, l.wake = l.wake, time.Time{}
				l.feed(chain.Tick{Now: l.now})
			})
		}
		if len(inputs) == 0 {
			l.note("idle")
			break
		}
		inputs[sel%len(inputs)]()
	}
	return joinNotes(l.out)
}

func joinNotes(out []string) string { return strings.Join(out, "; ") }

// parentsDone is the parents-first gate the input keeps, for the lanes
// that no instance machine runs (without leases; with leases the workers'
// instance machines keep it: lease.go): a child of a
// split is not read (no load, no fetch) while
// membership.Waiting names a parent, from the stored membership record
// and every checkpoint of the scope. The check costs the step; once the
// parents are done (completion is permanent, and a parent that left is
// never added back) the lane is released for good.
func (l *lane) parentsDone() bool {
	if len(l.p.parents) == 0 || l.s.variant == ChildrenFirst {
		l.released = true
		return true
	}
	m, err := l.st().LoadMembership(bg, l.s.scope)
	if err != nil {
		l.note("cannot read the membership: %v", err)
		return false
	}
	cps, err := l.st().ListCheckpoints(bg, l.s.scope)
	if err != nil {
		l.note("cannot read the checkpoints: %v", err)
		return false
	}
	if w := membership.Waiting(m, l.p.name, cps); len(w) > 0 {
		l.s.stats.LineageWaits++
		l.note("waiting for parents %v to complete", w)
		return false
	}
	l.released = true
	l.s.stats.ChildrenReleased++
	l.note("parents %v done: reading", l.p.parents)
	return false
}

// feed steps the machine with in and handles what it asks.
func (l *lane) feed(in chain.Input) {
	if _, ok := in.(chain.Tick); !ok {
		l.note("%s", in)
	}
	l.stepCounted(in)
}

// handle performs the machine's actions in the order it emitted them. The
// answer to a call made meanwhile (a store call, a restart cursor, an
// incarnation) is stepped at once, and the actions of that step are queued
// after the rest, as the input's partition.perform does: a Wait is the
// machine's latest deadline only when applied in emission order (the
// machine announces a deadline once, when it changes), so a Wait emitted
// before a call must not overwrite the one its answer's step emitted.
func (l *lane) handle(acts []chain.Action) {
	l.pending = append(l.pending, acts...)
	if l.handling {
		return
	}
	l.handling = true
	defer func() { l.handling = false }()
	for len(l.pending) > 0 {
		a := l.pending[0]
		l.pending = l.pending[1:]
		switch a := a.(type) {
		case chain.Fetch:
			l.note("%s", a)
			l.fetch = &a
			l.retry = chain.FetchRetry{}
			if l.s.setup.retry {
				l.retry = l.cfg.FetchRetry()
			}
			if a.Ahead {
				l.s.stats.FetchAhead++
			}
		case chain.Emit:
			d := &delivery{lane: l, batch: a.Batch, chain: a.Chain, part: l.p.name, gen: a.Generation, attempt: a.Attempt, events: a.Witnessed, epoch: l.m.Epoch()}
			if l.s.setup.queue {
				l.outbox = append(l.outbox, d)
				l.note("queue %s", d)
				break
			}
			l.s.deliver(d)
			l.note("emit %s", d)
		case chain.EndChain:
			kept := l.outbox[:0]
			for _, d := range l.outbox {
				if a.Ends(d.chain) {
					l.s.stats.DroppedEmissions++
					l.note("drop %s", d)
					continue
				}
				kept = append(kept, d)
			}
			l.outbox = kept
		case chain.Observe:
			l.parked = a.Checkpoint.Parked
			if l.s.exitMode() {
				l.s.feedExit(l.w, l, instance.Parked{Partition: l.p.name, Reason: a.Checkpoint.Parked})
			}
			switch {
			case l.s.lease != nil:
				// The worker's instance machine decides the deletions
				// (instance.Prune, performed as its store calls) and the
				// publication rounds; its publisher's feed is the durable
				// checkpoints of what it runs, as the input's.
				if l.w.im != nil {
					l.w.pub.Observe(l.p.name, a.Checkpoint.Watermark)
					l.s.feedInstance(l.w, l, instance.Promoted{Now: l.w.clock(), Partition: l.p.name, Generation: a.Checkpoint.Generation})
				}
			default:
				if below, ok := l.prune.Due(a.Checkpoint.Generation); ok {
					l.prunes = append(l.prunes, below)
				}
			}
		case chain.Wait:
			l.wake = a.Until
		case chain.Count:
			l.s.stats.count(a)
		case chain.Log:
			if a.Late != nil {
				l.s.oracle.lateArrival(l.p, *a.Late)
			}
		case chain.Completed:
			l.note("completed")
			l.complete = true
			l.completed()
			if l.s.exitMode() {
				l.s.feedExit(l.w, l, instance.Completed{Partition: l.p.name})
			}
		case chain.LeaseGone:
			// The machine found another lease (on a load, a read-back or a
			// fenced write) and stopped: a zombie gives the partition up.
			l.note("%s", a)
			l.giveUp("lease lost")
		case chain.RestartCursor:
			in := chain.RestartCursorFound{Cursor: l.p.restartCursor(a.Watermark, a.Applied, a.HasApplied)}
			l.note("%s -> %s", a, in)
			l.handle(l.m.Step(in))
		case chain.CheckIncarnation:
			in := chain.IncarnationFound{Value: l.p.incarnationValue()}
			l.note("%s -> %s", a, in)
			l.handle(l.m.Step(in))
		default:
			// A store call: the step's one, or the next step's.
			if _, ok := a.(chain.PutWitnesses); ok {
				l.s.stats.WitnessGroups++
			}
			l.s.variant.asked(l, a)
			if l.budget > 0 {
				l.budget--
				l.perform(a)
			} else {
				l.call = a
			}
		}
	}
}

// perform makes one store call the machine asked for and steps the
// answer. The call is the machine's own (its lease and epoch are the
// machine's inputs), changed only by a broken variant (variant.go).
func (l *lane) perform(a chain.Action) {
	switch a.(type) {
	case chain.Promote, chain.Resolve:
		a = l.s.variant.rewrite(l, a)
	}
	l.note("%s", a)
	in, ok := chainstore.Do(bg, l.st(), a)
	if !ok {
		panic(fmt.Sprintf("sim: not a store call: %s", a))
	}
	switch r := in.(type) {
	case chain.Promoted:
		what := "promote"
		if a.(chain.Promote).Restart {
			what = "restart"
		}
		if l.leaseFenced(r.Err, a.(chain.Promote).Promotion.Lease, what) {
			break
		}
		if what == "promote" {
			var fe *store.FenceError
			switch {
			case r.Err == nil:
				l.s.stats.Promotions++
			case errors.As(r.Err, &fe):
				l.s.stats.Fenced++
			}
		}
	case chain.Resolved:
		switch {
		case r.Err != nil:
		case r.Applied:
			l.s.stats.ResolvedApplied++
		case !a.(chain.Resolve).Promotion.StillAt(r.Checkpoint):
			l.s.stats.ResolvedMoved++
		default:
			l.s.stats.ResolvedRetry++
		}
	case chain.Withdrawn:
		if r.Err == nil && r.Changed {
			l.s.stats.Withdrawals++
		}
	case chain.Reincarnated:
		if l.leaseFenced(r.Err, a.(chain.Reincarnate).Reset.Lease, "reincarnate") {
			break
		}
		if r.Err == nil {
			l.s.stats.Reincarnations++
			l.w.epoch = max(l.w.epoch, r.Epoch)
		}
	case chain.Parked:
		if l.leaseFenced(r.Err, a.(chain.Park).Lease, "park") {
			break
		}
		if r.Err == nil {
			l.s.stats.Parks++
			if a.(chain.Park).Reason.Kind == chain.ParkMalformed {
				l.s.stats.MalformedParks++
			}
		}
	}
	l.note("-> %s", in)
	l.stepCounted(in)
}

// completed checks what a completion claims. A durable completion is the
// oracle's (the checkpoint is complete); one under exit_when_complete says
// the partition was caught up: every event up to the model's finality
// clock when it last served this lane an honest empty page has a terminal
// outcome. The lane then ends.
func (l *lane) completed() {
	cp, err := l.s.mem.LoadCheckpoint(bg, l.key)
	if err == nil && cp.Complete {
		return
	}
	l.exited = true
	l.s.stats.Exits++
	if e, ok := l.p.ackedBelow(l.emptyFinal + 1); !ok {
		l.s.oracle.violate(CheckNoLoss, "partition %s: exit_when_complete ended the partition as caught up through %d, yet event %s (position %d) has no terminal outcome", l.p.name, l.emptyFinal, e.id, e.pos)
	}
}

// doFetch makes the fetch the machine asked for against the model
// provider; its result is stepped at a later step.
func (l *lane) doFetch() {
	f := *l.fetch
	l.fetch = nil
	l.s.oracle.readingChild(l.name(), l.p.name)
	resp, note, err := l.p.fetch(fmt.Sprintf("w%d", l.w.id), f.Cursor)
	if note == "empty" {
		l.emptyFinal = l.p.final
	}
	r := chain.Fetched{Fetch: f.ID}
	var fe *fetchError
	if transient := err != nil && !(errors.As(err, &fe) && (fe.expired || fe.malformed)); transient {
		// The driver retries a transient failure (fetch_retries) before
		// the machine sees it, as the input's fetchWithRetry does.
		if d, again := l.retry.Retry(chain.FetchTransient); again {
			l.fetch = &f
			l.s.stats.TransientRetries++
			l.note("fetch %s g%d: %v; retry %d after %s", curString(f.Cursor), f.Generation, err, l.retry.Tries(), d)
			l.s.stats.note(note)
			return
		}
		if l.retry.Tries() > 0 {
			l.s.stats.TransientGiveUps++
		}
	}
	// The provider's values enter the core here, in its coordinates (as
	// the input converts them).
	core := reconcile.FromProvider(resp)
	switch {
	case err == nil:
		r.Attempt, r.Response = l.s.newAttemptID(), core
	case errors.As(err, &fe) && fe.expired:
		l.s.stats.Expired++
		r.Err, r.Failure, r.Detail = err, chain.FetchExpired, fe.reason
	case errors.As(err, &fe) && fe.malformed:
		r.Err, r.Failure = err, chain.FetchMalformed
	default:
		r.Err = err
	}
	l.results = append(l.results, r)
	switch {
	case err != nil:
		l.note("fetch %s g%d: %v", curString(f.Cursor), f.Generation, err)
	case note != "":
		l.note("fetch %s g%d -> %s (%s)", curString(f.Cursor), f.Generation, chain.DescribeResponse(core), note)
	default:
		l.note("fetch %s g%d -> %s", curString(f.Cursor), f.Generation, chain.DescribeResponse(core))
	}
	l.s.stats.note(note)
}

// read hands the oldest queued emission to the sink (ReadBatch).
func (l *lane) read() {
	d := l.outbox[0]
	l.outbox = l.outbox[1:]
	l.s.deliver(d)
	l.note("emit %s", d)
}

// doPrune deletes the witnesses below a durable generation
// (PruneWitnesses through the store's faults).
func (l *lane) doPrune() {
	below := l.prunes[0]
	l.prunes = l.prunes[1:]
	n, err := l.st().PruneWitnesses(bg, l.key, below)
	next, again := l.prune.Done(below, err)
	if err != nil {
		l.note("prune below g%d: %v", below, err)
		return
	}
	l.s.stats.Prunes++
	l.s.stats.Pruned += n
	if again {
		// Checkpoints became durable meanwhile: the next deletion is due
		// at once, as the input's pruning goroutine runs it.
		l.prunes = append(l.prunes, next)
		l.note("pruned %d witnesses below g%d; next below g%d", n, below, next)
		return
	}
	l.note("pruned %d witnesses below g%d", n, below)
}

// count turns the machine's observations into the run's statistics.
func (s *Stats) count(c chain.Count) {
	switch c.Metric {
	case chain.MetricRetries:
		s.class(c.Class)
	case chain.MetricRefusals:
		s.Refusals++
	case chain.MetricHolds:
		s.Holds++
	case chain.MetricBadResponses:
		s.BadResponses++
	case chain.MetricMalformed:
		s.MalformedAnswers++
	case chain.MetricRestarts:
		s.Restarts++
	case chain.MetricViolations:
		switch c.Violation {
		case reconcile.TokensRotated:
			s.RogueRotationsSeen++
		case reconcile.SelfCertified:
			s.SelfCertifiedSeen++
		case reconcile.WatermarkRegressed:
			s.RegressionsSeen++
		case reconcile.LatePosition:
			s.LateSeen++
		case reconcile.SnapshotUnstable:
			s.UnstableSeen++
		case reconcile.OffsetShapedSuccessor:
			s.OffsetShapedSeen++
		default:
			s.FalseAlarms++
		}
	}
}

func clone(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return append([]byte(nil), b...)
}

// otherSuccessor returns the successor of another response the lane knows
// for the (cursor, generation) of promotion p, if any (Variant
// PromoteOtherSuccessor).
func (l *lane) otherSuccessor(p store.Promotion) ([]byte, string, bool) {
	for _, o := range l.m.Known(p.FromGeneration) {
		if o.AttemptID != p.WitnessID && bytes.Equal(o.InputCursor, p.FromCursor) && len(o.Successor) > 0 && !bytes.Equal(o.Successor, p.To) {
			return clone(o.Successor), o.AttemptID, true
		}
	}
	return nil, "", false
}

// stepCounted steps the machine with in, handles what it asks, and counts a
// promotion that began to wait for the page behind it.
func (l *lane) stepCounted(in chain.Input) {
	waiting := l.m.PromotionWaiting()
	l.handle(l.m.Step(in))
	if !waiting && l.m.PromotionWaiting() {
		l.s.stats.PromotionWaits++
	}
}
