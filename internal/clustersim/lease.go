package clustersim

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tidemark/tidemark/internal/instance"
	"github.com/tidemark/tidemark/internal/lease"
	"github.com/tidemark/tidemark/internal/publish"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/store/memstore"
	"math/rand/v2"
)

// Lease mode (scale-out, internal/leasing). In a seeded fraction of the
// schedules (every schedule under Variant IgnoreLease) the workers share
// the partitions through heartbeat leases, as the input's instances do:
//
//   - every worker runs the real instance machine (internal/instance, which
//     owns its incarnation's lease.Machine) on its OWN clock (a worker's
//     clock counts its lane steps, a tick a millisecond; clocks of
//     different workers are never compared), and has a lane for every
//     partition of the membership; a lane reads its partition only while
//     its worker's machine runs it (StartWorker, under the claimed lease:
//     chain.Config.Lease) and drops all its state at StopWorker;
//   - at the start of every lane step the worker's machine is ticked and
//     performs at most one of its store calls (heartbeat renewal, heartbeat
//     read, takeover, checkpoint read with the creation of missing
//     checkpoints, claim, release, heartbeat deletion) against the
//     faulty store, its answer fed back at once; such a step is the lane's;
//   - "pause w1" freezes a worker (its lanes are not stepped and its clock
//     stops); "resume w1" lets it continue from its stale in-memory state.
//     The others see its heartbeat counter unchanged for a lease period on
//     their own clocks, take it over and claim its partitions; the zombie's
//     promotion, restart or park is fenced by the store (*store.FenceError
//     whose winner holds another lease): its machine stops (chain.LeaseGone),
//     the worker's instance is told (WorkerLost) and stops the lane, and its
//     next renewal is fenced: every lane stops, a new incarnation rejoins;
//   - a crash ("crash w1") is a new process: a new instance machine and
//     incarnation; the old heartbeat is taken over by the others.
//
// An owner name is unique per worker incarnation ("w1.2"), as the input's
// instance id plus incarnation suffix is.
//
// CheckLease: the oracle sees every promotion and park that took effect
// (tap) and checks that the stored lease then names the lane that wrote it:
// a promotion is written only by the current lease holder.

// CheckLease: a checkpoint write of a lane took effect while another owner
// held the partition's lease.
const CheckLease Check = "lease"

type leases struct {
	rng *rand.Rand
	// period: ticks of a worker's own clock a heartbeat counter must stay
	// unchanged before the others take it over; renew: ticks between
	// renewals.
	period int
	renew  int
	// jitter decides whether a lane step performs its worker's pending
	// store call (one in two) or goes to the lane, so the instance's
	// periodic calls do not resonate with the order in which a lane picks
	// its inputs (a lane whose every other step is a renewal, the other an
	// interval check, never fetches). It is drawn only in lane steps, so a
	// replay draws the same numbers.
	jitter *rand.Rand
}

// newLeases decides, from the seed alone and without touching the
// schedule's main PRNG (so schedules without leases are unchanged), whether
// the run uses leases and with which timing.
func newLeases(cfg Config) *leases {
	r := rand.New(rand.NewPCG(cfg.Seed, 0x1ea5e))
	on := r.IntN(4) == 0
	if cfg.Variant == IgnoreLease || cfg.Variant == KeepLostLease {
		on = true
	}
	if cfg.Metamorphic && cfg.Shape != nil && cfg.Shape.Leases {
		on = true
	}
	if cfg.Variant == ExitWithParked {
		on = false // exit_when_complete is for instances without leases
	}
	if !on {
		return nil
	}
	return &leases{rng: r, period: 48 + r.IntN(25), renew: 2 + r.IntN(3), jitter: rand.New(rand.NewPCG(cfg.Seed, 0x717e))}
}

func (lm *leases) String() string {
	if lm == nil {
		return "leases=off"
	}
	return fmt.Sprintf("leases(period=%d renew=%d)", lm.period, lm.renew)
}

// tick is one tick of a worker's clock.
const tick = time.Millisecond

// instanceConfig is the workers' instance machine configuration: the
// lease period, and a renew interval of 4 × renew ticks (8..16: the
// instance's renewal and heartbeat read take about 2 lane steps in every
// renew interval, so its lanes keep most of their steps), under half the
// period (48..72).
//
// The machine keeps the lineage gate (a claimed child starts once its
// parents are complete, read every renew interval); variant ChildrenFirst
// skips it (UnorderedLineage), as a broken input would.
//
// It also decides the witness deletions (witness_cleanup every
// setup.prune generations, performed as its store calls).
//
// And it times its frontier publisher (instance.Publish: a round after a
// durable checkpoint at most every renew interval, idle reads from 4 to
// 16 renew intervals apart), whose rounds are its store calls too (beside
// the simulator's publisher actors). The machine's publication rounds,
// deletions and parents' reads are performed when it asks, in the same
// step, not queued behind the lease calls.
func (lm *leases) instanceConfig(scope string, v Variant, prune uint64) instance.Config {
	renew := time.Duration(4*lm.renew) * tick
	return instance.Config{Scope: scope, Leases: &instance.LeaseConfig{
		Period: time.Duration(lm.period) * tick, RenewInterval: renew,
		BalanceInterval: 2*renew + tick, MaxMoves: 256,
	}, UnorderedLineage: v == ChildrenFirst, ParentsPoll: renew, PruneEvery: prune,
		PublishInterval: renew, PublishIdle: 4 * renew, PublishMaxIdle: 16 * renew}
}

// owner is the lease owner name of the worker's current incarnation ("":
// its instance has not started).
func (w *worker) owner() string { return w.self }

// clock is the worker's own clock.
func (w *worker) clock() time.Time { return time.Unix(0, 0).Add(time.Duration(w.ticks) * tick) }

// members is the membership the worker's lanes read (every partition of
// the stored membership in lease mode), with the stored record's lineage.
func (w *worker) members() instance.Membership {
	ms := instance.Membership{Epoch: w.epoch, Parents: w.parents}
	for _, l := range w.lanes {
		ms.Partitions = append(ms.Partitions, l.p.name)
	}
	return ms
}

// leaseOp draws a pause or resume op from the lease PRNG, or reports none.
func (s *sim) leaseOp() (Op, bool) {
	lm := s.lease
	if lm == nil || len(s.workers) < 2 {
		return Op{}, false
	}
	x := lm.rng.IntN(1000)
	running := 0
	for _, w := range s.workers {
		if !w.paused {
			running++
			continue
		}
		// Resume only after some other worker's own clock ran past the
		// lease period since the pause: long enough for a takeover.
		for _, o := range s.workers {
			if o != w && o.ticks-w.pauseTicks[o.id] > lm.period && x < 100 {
				return Op{Kind: OpResume, W: w.id}, true
			}
		}
	}
	if x >= 992 && running >= 2 {
		var cand []int
		for _, w := range s.workers {
			if !w.paused && len(w.lanes) > 0 {
				cand = append(cand, w.id)
			}
		}
		if len(cand) > 0 {
			return Op{Kind: OpPause, W: cand[lm.rng.IntN(len(cand))]}, true
		}
	}
	return Op{}, false
}

// execLease performs a pause or resume op.
func (s *sim) execLease(op Op) string {
	if op.W < 0 || op.W >= len(s.workers) {
		return "no such worker"
	}
	w := s.workers[op.W]
	switch {
	case op.Kind == OpPause && !w.paused:
		w.paused, w.pauseTicks = true, w.pauseTicks[:0]
		for _, o := range s.workers {
			w.pauseTicks = append(w.pauseTicks, o.ticks)
		}
		s.stats.Pauses++
		return fmt.Sprintf("worker %d paused at tick %d", w.id, w.ticks)
	case op.Kind == OpResume && w.paused:
		w.paused, w.resumed = false, true
		return fmt.Sprintf("worker %d resumes at tick %d from its in-memory state", w.id, w.ticks)
	}
	return "nothing to do"
}

// leaseStep runs at the start of every lane step in lease mode. It
// advances the worker's clock, ticks its instance machine and performs one
// of the machine's store calls if any is due; it reports whether it used
// the step (a store call of the instance, or a lane its machine does not
// run).
func (l *lane) leaseStep() bool {
	s, w := l.s, l.w
	w.ticks++
	if w.im == nil {
		w.incs++
		w.self = fmt.Sprintf("w%d.%d", w.id, w.incs)
		w.im = instance.New(s.lease.instanceConfig(s.scope, s.variant, s.setup.prune))
		w.pub = publish.NewPublisher(s.st, s.scope)
		w.run, w.calls = map[string]store.Lease{}, nil
		s.feedInstance(w, l, instance.Start{Now: w.clock(), Self: w.self, Membership: w.members()})
	}
	if w.im.Epoch() < w.epoch {
		s.feedInstance(w, l, instance.Adopt{Now: w.clock(), Membership: w.members(), Source: "the stored membership"})
	}
	if len(w.calls) == 0 {
		s.feedInstance(w, l, instance.Tick{Now: w.clock()})
	}
	if len(w.calls) > 0 && (l.dead || w.run[l.p.name].IsZero() || s.lease.jitter.IntN(2) == 0) {
		a := w.calls[0]
		w.calls = w.calls[1:]
		l.budget--
		s.instanceCall(w, l, a)
		return true
	}
	if l.dead {
		return true
	}
	held, ok := w.run[l.p.name]
	if l.m != nil && (!ok || held != l.lease) {
		// A lane still reading under a lease its instance no longer runs
		// it under: the instance's StopWorker was not performed.
		s.oracle.violate(CheckLease, "partition %s: the lane of %s reads under lease %s, which its instance no longer runs it under", l.p.name, w.self, l.lease)
		return true
	}
	if !ok {
		l.note("not held by %s", w.self)
		return true
	}
	if l.m == nil {
		l.lease = held
	}
	return false
}

// feedInstance steps w's instance machine and performs its actions: the
// worker-local ones at once, the store calls queued, one per lease step
// (in order).
func (s *sim) feedInstance(w *worker, l *lane, in instance.Input) {
	for _, a := range w.im.Step(in) {
		switch a := a.(type) {
		case instance.StartWorker:
			w.run[a.Partition] = a.Lease
			if len(w.parents[a.Partition]) > 0 {
				s.stats.ChildrenReleased++
			}
			l.note("%s runs %s under %s", w.self, a.Partition, a.Lease)
		case instance.LineageWait:
			if len(a.Waiting) > 0 {
				s.stats.LineageWaits++
			}
			l.note("%s: %s", w.self, a)
		case instance.StopWorker:
			s.stopLane(w, l, a)
		case instance.NewIncarnation:
			old := w.self
			w.incs++
			w.self = fmt.Sprintf("w%d.%d", w.id, w.incs)
			w.calls = nil // the gone incarnation's calls are never sent
			l.note("%s is gone (%s); rejoins as %s", old, a.Reason, w.self)
			s.feedInstance(w, l, instance.Incarnation{Now: w.clock(), Self: w.self})
		case instance.Publish, instance.Prune, instance.ReadParents:
			// Performed at once, through the store's faults, without taking
			// a lane step (the lanes keep theirs, so the schedules still
			// reach the conflicts the lease checks look for).
			s.instanceCall(w, l, a)
		case instance.Wake, instance.EpochChanged, instance.Exit:
			// Ticked at every lease step; the lanes read the worker's epoch;
			// no exit with leases.
		default:
			w.calls = append(w.calls, a)
		}
	}
}

// stopLane performs StopWorker: the partition's lane drops all its state
// (a fresh lane replaces it, as after a crash) before anything else; the
// machine is told it stopped.
func (s *sim) stopLane(w *worker, l *lane, a instance.StopWorker) {
	delete(w.run, a.Partition)
	lost := strings.HasPrefix(a.Reason, "lease lost") || strings.HasPrefix(a.Reason, "incarnation gone")
	if lost && s.cfg.Variant == KeepLostLease {
		// Broken: the lane keeps reading; the machine believes it stopped.
		s.feedInstance(w, l, instance.WorkerStopped{Partition: a.Partition})
		return
	}
	for i, x := range w.lanes {
		if x.p.name != a.Partition {
			continue
		}
		if lost {
			s.stats.LeaseLost++
		}
		x.note("stops: %s", a.Reason)
		x.dead = true
		w.lanes[i] = s.newLane(w, x.p)
	}
	l.note("%s stops %s: %s", w.self, a.Partition, a.Reason)
	s.feedInstance(w, l, instance.WorkerStopped{Partition: a.Partition})
}

// instanceCall performs one store call of w's instance machine and feeds
// its answer back.
func (s *sim) instanceCall(w *worker, l *lane, a instance.Action) {
	st := l.st()
	now := w.clock()
	switch a := a.(type) {
	case instance.RenewHeartbeat:
		got, err := st.RenewHeartbeat(bg, a.Heartbeat, a.Held)
		if err == nil {
			s.stats.Renewals++
		}
		l.note("renew heartbeat %s: %v", a.Heartbeat.Owner, err)
		s.feedInstance(w, l, instance.Renewed{Owner: a.Heartbeat.Owner, Start: now, Heartbeat: got, Err: err})
	case instance.ReadHeartbeats:
		hbs, err := st.ListHeartbeats(bg, s.scope)
		l.note("read %d heartbeats: %v", len(hbs), err)
		s.feedInstance(w, l, instance.HeartbeatsRead{Owner: a.Owner, Now: now, Heartbeats: hbs, Err: err})
	case instance.TakeOver:
		_, err := st.TakeOverHeartbeat(bg, a.Seen, a.Owner)
		l.note("take over %s: %v", a.Seen, err)
		s.feedInstance(w, l, instance.TookOver{Owner: a.Owner, Seen: a.Seen, Err: err})
	case instance.ReadLeases:
		cps, err := st.ListCheckpoints(bg, s.scope)
		if err == nil {
			have := map[string]bool{}
			for _, cp := range cps {
				have[cp.Partition] = true
			}
			var missing []string
			for _, p := range a.Partitions {
				if !have[p] {
					missing = append(missing, p)
				}
			}
			if len(missing) > 0 {
				lease.Rendezvous(a.Owner, missing)
				for _, p := range missing[:min(len(missing), a.CreateBudget)] {
					_, cerr := st.CreateCheckpoint(bg, store.Checkpoint{Key: store.Key{Scope: s.scope, Partition: p}, Generation: 1, Epoch: w.epoch})
					l.note("create checkpoint %s to hold a lease: %v", p, cerr)
				}
				cps, err = st.ListCheckpoints(bg, s.scope)
			}
		}
		l.note("read %d leases: %v", len(cps), err)
		s.feedInstance(w, l, instance.LeasesRead{Owner: a.Owner, Now: now, Checkpoints: cps, Err: err})
	case instance.ClaimLease:
		c := a.Claim
		cp, err := st.ClaimLease(bg, store.Key{Scope: s.scope, Partition: c.Partition}, c.Expect, a.Owner)
		if err == nil {
			if c.Kind == lease.ClaimExpired {
				s.stats.Steals++
				l.note("took over lease %s -> %s", c.Expect, cp.Lease)
			} else {
				s.stats.Claims++
				l.note("claimed lease %s", cp.Lease)
			}
		} else {
			l.note("%s: %v", c, err)
		}
		s.feedInstance(w, l, instance.Claimed{Owner: a.Owner, Partition: c.Partition, Lease: cp.Lease, Err: err})
	case instance.ReleaseLease:
		_, err := st.ReleaseLease(bg, store.Key{Scope: s.scope, Partition: a.Partition}, a.Lease)
		l.note("release %s %s: %v", a.Partition, a.Lease, err)
		s.feedInstance(w, l, instance.Released{Owner: a.Owner, Partition: a.Partition, Err: err})
	case instance.DeleteHeartbeat:
		err := st.DeleteHeartbeat(bg, a.Heartbeat)
		l.note("delete heartbeat %s: %v", a.Heartbeat, err)
	case instance.Publish:
		// One round of the worker's publisher (its reads and its
		// conditional write in one step), as the input's.
		s.stats.InstanceRounds++
		r, f, _, err := w.pub.Round(bg)
		if err == nil && r.Next != nil {
			s.stats.InstancePublished++
			l.note("%s published %s", w.self, describeFrontier(f))
		} else {
			l.note("%s publication round: %v", w.self, err)
		}
		s.feedInstance(w, l, instance.Published{
			Now: now, Start: now, Active: err != nil || r.Next != nil || r.EpochChanged || r.RecordChanged,
			Fenced: errors.Is(err, store.ErrFenced), Epoch: w.pub.Epoch(),
		})
	case instance.Prune:
		// A witness deletion, as the input's (its lanes prune only without
		// leases).
		n, err := st.PruneWitnesses(bg, store.Key{Scope: s.scope, Partition: a.Partition}, a.Below)
		if err == nil {
			s.stats.Prunes++
			s.stats.Pruned += n
		}
		l.note("%s: pruned %d witnesses of %s below g%d: %v", w.self, n, a.Partition, a.Below, err)
		s.feedInstance(w, l, instance.Pruned{Partition: a.Partition, Below: a.Below, Err: err})
	case instance.ReadParents:
		// The lineage gate's read, as the input's (a parent without a
		// checkpoint is not complete).
		r := instance.ParentsRead{Now: now, Partition: a.Partition}
		for _, p := range a.Parents {
			cp, err := st.LoadCheckpoint(bg, store.Key{Scope: s.scope, Partition: p})
			switch {
			case err == nil:
				r.Checkpoints = append(r.Checkpoints, cp)
			case !errors.Is(err, store.ErrNotFound):
				r.Err = err
			}
		}
		l.note("read the parents %v of %s: %v", a.Parents, a.Partition, r.Err)
		s.feedInstance(w, l, r)
	}
}

// leaseFenced counts a write carrying lease carried that was fenced
// because the lane's lease is gone (a zombie); the machine, given the
// answer, stops (chain.LeaseGone) and the lane gives the partition up. It
// reports whether err was such a fence.
func (l *lane) leaseFenced(err error, carried store.Lease, what string) bool {
	var fe *store.FenceError
	if l.s.lease == nil || !errors.As(err, &fe) || fe.Winner == nil || fe.Winner.Lease == carried {
		return false
	}
	if fe.Winner.Lease.Owner != l.w.owner() {
		if what == "promote" {
			l.s.stats.ZombieFenced++
			if l.w.resumed {
				l.s.stats.PausedZombieFenced++
			}
		}
		l.note("zombie %s fenced: held %s, stored %s", what, carried, fe.Winner.Lease)
	}
	return true
}

// giveUp: the lane's machine found its lease gone (chain.LeaseGone). The
// worker's instance is told (WorkerLost) and stops the lane; a lane its
// instance no longer runs drops its state at once.
func (l *lane) giveUp(why string) {
	w := l.w
	l.note("gives the partition up: %s", why)
	if _, ok := w.run[l.p.name]; ok && w.im != nil {
		l.s.feedInstance(w, l, instance.WorkerLost{Partition: l.p.name, Reason: why})
		return
	}
	l.s.stats.LeaseLost++
	l.dead = true
	n := l.s.newLane(w, l.p)
	for i, x := range w.lanes {
		if x == l {
			w.lanes[i] = n
		}
	}
}

// leaseWrite is the oracle's CheckLease: a checkpoint write a lane made took
// effect only if the stored lease names that lane's worker.
func (o *oracle) leaseWrite(what string, k store.Key, cp store.Checkpoint) {
	s := o.s
	if s.lease == nil || s.caller == "" {
		return
	}
	if cp.Lease.Owner != s.caller {
		o.violate(CheckLease, "partition %s: %s (g%d %s) written by %s while the lease is %s", k.Partition, what, cp.Generation, curString(cp.Cursor), s.caller, cp.Lease)
	}
}

func (t tap) Promote(ctx context.Context, p store.Promotion) (store.Checkpoint, error) {
	cp, err := t.Store.Promote(ctx, p)
	if err == nil {
		t.o.leaseWrite("promotion", p.Key, cp)
		t.o.offsetPromotion(p)
	}
	return cp, err
}

func (t tap) SetParked(ctx context.Context, k store.Key, cursor []byte, generation uint64, lease store.Lease, reason string) (store.Checkpoint, error) {
	cp, err := t.Store.SetParked(ctx, k, cursor, generation, lease, reason)
	if err == nil {
		t.o.leaseWrite("park", k, cp)
	}
	return cp, err
}

// leaseBlind is Variant IgnoreLease: Promote and SetParked re-read the
// stored lease and state it instead of the writer's, so a zombie's writes
// lose the lease condition (only cursor and generation still fence them).
type leaseBlind struct {
	store.Store
	mem *memstore.Store
}

func (b leaseBlind) Promote(ctx context.Context, p store.Promotion) (store.Checkpoint, error) {
	if cp, err := b.mem.LoadCheckpoint(ctx, p.Key); err == nil {
		p.Lease = cp.Lease
	}
	return b.Store.Promote(ctx, p)
}

func (b leaseBlind) SetParked(ctx context.Context, k store.Key, cursor []byte, generation uint64, lease store.Lease, reason string) (store.Checkpoint, error) {
	if cp, err := b.mem.LoadCheckpoint(ctx, k); err == nil {
		lease = cp.Lease
	}
	return b.Store.SetParked(ctx, k, cursor, generation, lease, reason)
}
