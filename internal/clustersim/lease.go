package clustersim

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tidemark/tidemark/internal/chain"
	"github.com/tidemark/tidemark/internal/lease"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/store/memstore"
	"math/rand/v2"
)

// Lease mode (scale-out, internal/leasing). In a seeded fraction of the
// schedules (every schedule under Variant IgnoreLease) every lane must hold
// its partition's lease before it loads, fetches or writes:
//
//   - a lane without the lease reads the checkpoint (creating it when
//     none exists) and claims an unowned lease, or steals a held one whose
//     (owner, counter) has not moved for leases.period ticks of its OWN
//     worker's clock (a worker's clock counts its lane steps; clocks of
//     different workers are never compared), decided by the input's own
//     lease.Tracker and lease.Balance on that clock;
//   - a holder renews every leases.renew lane steps; its machine is given
//     the lease (chain.Config.Lease, then chain.LeaseChanged after each
//     renewal) and states it on every Promote and SetParked
//     (Promotion.Lease). A renewal waits while the machine has a call
//     outstanding that carries the lease, as the input's release waits for
//     the worker's write in flight: a call never carries a lease its own
//     holder has replaced;
//   - "pause w1" freezes a worker (its lanes are not stepped and its clock
//     stops); "resume w1" lets it continue from its stale in-memory state.
//     A worker whose lease was stolen meanwhile is a zombie: its renewal,
//     promotion, restart or park is fenced by the store (*store.FenceError
//     whose winner holds another lease), and it gives the partition up: the
//     lane drops all its state, as after a crash, and starts acquiring again.
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
	// period: ticks of the watcher's own clock an unchanged lease must stay
	// unchanged before it is stolen.
	period int
	// renew: least lane steps between renewals; jitter adds 0..2 to each
	// interval, so that renewals do not resonate with the order in which a
	// lane picks its inputs (acks starved behind a periodic renewal). It is
	// drawn only in lane steps, so a replay draws the same numbers.
	renew  int
	jitter *rand.Rand
}

// newLeases decides, from the seed alone and without touching the
// schedule's main PRNG (so schedules without leases are unchanged), whether
// the run uses leases and with which timing.
func newLeases(cfg Config) *leases {
	r := rand.New(rand.NewPCG(cfg.Seed, 0x1ea5e))
	on := r.IntN(4) == 0
	if cfg.Variant == IgnoreLease {
		on = true
	}
	if !on {
		return nil
	}
	lm := &leases{rng: r, period: 48 + r.IntN(25), renew: 2 + r.IntN(3), jitter: rand.New(rand.NewPCG(cfg.Seed, 0x717e))}
	return lm
}

func (lm *leases) String() string {
	if lm == nil {
		return "leases=off"
	}
	return fmt.Sprintf("leases(period=%d renew=%d)", lm.period, lm.renew)
}

// owner is the lease owner name of the worker's current incarnation.
func (w *worker) owner() string { return fmt.Sprintf("w%d.%d", w.id, w.inc) }

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
		// lease period since the pause: long enough for a steal.
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
		// Its renewal timer fires late: the in-flight work of the zombie
		// runs first.
		for _, l := range w.lanes {
			l.sinceRenew = 0
		}
		return fmt.Sprintf("worker %d resumes at tick %d from its in-memory state", w.id, w.ticks)
	}
	return "nothing to do"
}

// leaseStep runs at the start of every lane step in lease mode. It advances
// the worker's clock, renews a held lease when due, and otherwise acquires
// the lease. It reports whether it used the step.
func (l *lane) leaseStep() bool {
	lm := l.s.lease
	l.w.ticks++
	if l.lease.Held() {
		l.sinceRenew++
		if l.sinceRenew < l.renewAt || carriesLease(l.call) {
			return false
		}
		l.sinceRenew, l.renewAt = 0, lm.renew+lm.jitter.IntN(3)
		l.budget--
		cp, err := l.st().RenewLease(bg, l.key, l.lease)
		var fe *store.FenceError
		switch {
		case err == nil:
			l.lease = cp.Lease
			if l.m != nil {
				l.m.Step(chain.LeaseChanged{Lease: l.lease})
			}
			l.s.stats.Renewals++
			l.note("renewed lease %s", l.lease)
		case errors.As(err, &fe):
			l.note("renew lease %s: %s", l.lease, fe.Reason)
			if l.m != nil {
				l.m.Step(chain.LeaseLost{Reason: "renewal fenced: " + fe.Reason})
			}
			l.giveUp("lease lost")
		default:
			// Maybe applied: renewing again is recognised by the store.
			l.note("renew lease %s: %v", l.lease, err)
			l.renewAt = 0
		}
		return true
	}
	// Without the lease the lane holds no state (a fresh lane): acquire.
	l.budget--
	var fe *store.FenceError
	switch {
	case l.create:
		_, err := l.st().CreateCheckpoint(bg, store.Checkpoint{Key: l.key, Generation: 1, Epoch: l.w.epoch})
		if err == nil || errors.As(err, &fe) {
			l.create = false
		}
		l.note("create checkpoint to hold a lease: %v", err)
		return true
	case l.claim != nil:
		from := *l.claim
		cp, err := l.st().ClaimLease(bg, l.key, from, l.w.owner())
		switch {
		case err == nil:
			l.claim = nil
			l.lease, l.sinceRenew, l.renewAt = cp.Lease, 0, lm.renew
			if from.Held() {
				l.s.stats.Steals++
				l.note("stole lease %s -> %s", from, l.lease)
			} else {
				l.s.stats.Claims++
				l.note("claimed lease %s", l.lease)
			}
		case errors.As(err, &fe):
			l.claim = nil
			l.note("claim of lease %s lost: %s", from, fe.Reason)
		default:
			// Maybe applied: claiming again is recognised by the store.
			l.note("claim of lease %s: %v", from, err)
		}
		return true
	}
	cp, err := l.st().LoadCheckpoint(bg, l.key)
	switch {
	case errors.Is(err, store.ErrNotFound):
		l.create = true
		l.note("no checkpoint to hold a lease on")
		return true
	case err != nil:
		l.note("read lease: %v", err)
		return true
	}
	cur := cp.Lease
	if cur.Held() && cur.Owner == l.w.owner() {
		// This incarnation holds it (a renewal whose response was lost).
		l.lease, l.sinceRenew, l.renewAt = cur, 0, lm.renew
		l.note("holds lease %s", cur)
		return true
	}
	// The input's own rules decide (internal/lease): expiry on this
	// worker's clock since it first saw the pair, claims of free and
	// expired leases. A worker's tick is a millisecond of its clock.
	now := time.Unix(0, 0).Add(time.Duration(l.w.ticks) * time.Millisecond)
	views := l.tracker.Observe([]store.Checkpoint{cp}, []string{l.key.Partition}, now)
	plan := lease.Balance(lease.BalanceInput{
		Self: l.w.owner(), Now: now, Period: time.Duration(lm.period) * time.Millisecond,
		Held: map[string]store.Lease{}, Leases: views,
	})
	for _, c := range plan.Claims {
		if c.Partition == l.key.Partition {
			expect := c.Expect
			l.claim = &expect
			l.note("lease %s: claim it (%s)", expect, c.Kind)
			return true
		}
	}
	l.note("lease held: %s (%s)", cur, plan)
	return true
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

// carriesLease reports whether the machine's outstanding call a states
// the lease.
func carriesLease(a chain.Action) bool {
	switch a.(type) {
	case chain.Promote, chain.Resolve, chain.Park, chain.NoteFailure, chain.Reincarnate:
		return true
	}
	return false
}

// giveUp drops all of the lane's state: the worker replaces it by a fresh
// lane for the same partition, which must acquire the lease again.
func (l *lane) giveUp(why string) {
	l.s.stats.LeaseLost++
	l.note("gives the partition up: %s", why)
	l.dead = true
	n := l.s.newLane(l.w, l.p)
	for i, x := range l.w.lanes {
		if x == l {
			l.w.lanes[i] = n
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
