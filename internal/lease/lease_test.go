package lease

// The balance rules, the rendezvous order and the tracker, on a simulated
// clock.

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/store"
)

var leaseT0 = time.Unix(1_000_000, 0)

// leaseParts returns n partition names p00, p01, ...
func leaseParts(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("p%02d", i)
	}
	return out
}

// leaseViewsOf builds views of consecutive partitions: owners[i] owns
// p<i> ("" = unowned), counter 1, seen since `since`.
func leaseViewsOf(since time.Time, owners ...string) []View {
	out := make([]View, len(owners))
	for i, o := range owners {
		out[i] = View{Partition: fmt.Sprintf("p%02d", i), Lease: store.Lease{Owner: o, Counter: 1}, Since: since}
	}
	return out
}

func leaseRepeat(owner string, n int) []string { return slices.Repeat([]string{owner}, n) }

func leaseClaimed(plan Plan, kind ClaimKind) []string {
	var out []string
	for _, c := range plan.Claims {
		if c.Kind == kind {
			out = append(out, c.Partition)
		}
	}
	slices.Sort(out)
	return out
}

func leaseInput(views []View) BalanceInput {
	return BalanceInput{Self: "me", Now: leaseT0, Period: 10 * time.Second, MaxSteals: 1, Steal: true, Leases: views}
}

// Alone, an instance claims every unowned partition: the target is all of
// them when no other owner is live.
func TestLeaseBalanceAloneClaimsAll(t *testing.T) {
	plan := Balance(leaseInput(leaseViewsOf(leaseT0, leaseRepeat("", 12)...)))
	require.Equal(t, 1, plan.Live)
	require.Equal(t, 12, plan.Target)
	require.Equal(t, leaseParts(12), leaseClaimed(plan, ClaimFree))
	require.True(t, plan.NextExpiry.IsZero())
	for _, c := range plan.Claims {
		require.Equal(t, store.Lease{Counter: 1}, c.Expect, "a claim expects the lease it saw")
	}
}

// With two live owners of 4 partitions each, the fair share of 12 is 4:
// exactly the 4 free ones are claimed, nothing is stolen.
func TestLeaseBalanceFairShare(t *testing.T) {
	owners := append(append(leaseRepeat("a", 4), leaseRepeat("b", 4)...), leaseRepeat("", 4)...)
	plan := Balance(leaseInput(leaseViewsOf(leaseT0, owners...)))
	require.Equal(t, 3, plan.Live)
	require.Equal(t, 4, plan.Target)
	require.Equal(t, []string{"p08", "p09", "p10", "p11"}, leaseClaimed(plan, ClaimFree))
	require.Empty(t, leaseClaimed(plan, ClaimSteal))
	require.Equal(t, leaseT0.Add(10*time.Second), plan.NextExpiry)
}

// Expiry is decided without comparing clocks of different hosts
// (docs/design.md#leases-and-fencing). A lease is expired when its (owner, counter) pair has
// not changed for the lease period on this instance's own clock, and not a
// nanosecond earlier; an expired owner no longer counts as live.
func TestLeaseBalanceExpiry(t *testing.T) {
	period := 10 * time.Second
	views := leaseViewsOf(leaseT0, append(leaseRepeat("dead", 6), leaseRepeat("alive", 6)...)...)
	for i := 6; i < 12; i++ {
		views[i].Since = leaseT0.Add(5 * time.Second) // renewed later
	}
	in := leaseInput(views)
	in.MaxSteals = 0 // this test is about expiry, not stealing

	in.Now = leaseT0.Add(period - time.Nanosecond)
	plan := Balance(in)
	require.Empty(t, plan.Claims, "nothing expires before a full lease period: %s", plan)
	require.Equal(t, 3, plan.Live)
	require.Equal(t, leaseT0.Add(period), plan.NextExpiry)

	in.Now = leaseT0.Add(period)
	plan = Balance(in)
	require.Equal(t, 2, plan.Live, "the owner whose leases all expired is not live")
	require.Equal(t, 6, plan.Target)
	require.Equal(t, leaseParts(6), leaseClaimed(plan, ClaimExpired))
	for _, c := range plan.Claims {
		require.Equal(t, store.Lease{Owner: "dead", Counter: 1}, c.Expect, "the take-over expects the exact lease seen")
	}
	require.Equal(t, leaseT0.Add(5*time.Second+period), plan.NextExpiry)

	// Expiry rounds (between balance ticks) claim expired leases too.
	in.Steal = false
	require.Equal(t, leaseParts(6), leaseClaimed(Balance(in), ClaimExpired))
}

// Steal only when below the target and the busiest live owner is above it;
// at most max_steals_per_balance, never taking the victim below the target.
func TestLeaseBalanceSteal(t *testing.T) {
	owners := append(leaseRepeat("a", 8), leaseRepeat("b", 4)...)
	in := leaseInput(leaseViewsOf(leaseT0, owners...))
	plan := Balance(in)
	require.Equal(t, 4, plan.Target)
	stolen := leaseClaimed(plan, ClaimSteal)
	require.Len(t, stolen, 1)
	require.Equal(t, "a", in.Leases[slices.IndexFunc(in.Leases, func(v View) bool { return v.Partition == stolen[0] })].Lease.Owner, "steals come from the busiest owner")

	in.MaxSteals = 10
	require.Len(t, leaseClaimed(Balance(in), ClaimSteal), 4, "a steals down to the target: 8 - 4")
	in.MaxSteals = 0
	require.Empty(t, Balance(in).Claims, "max_steals_per_balance 0 never steals")
	in.MaxSteals, in.Steal = 1, false
	require.Empty(t, Balance(in).Claims, "expiry rounds never steal")

	// 5/4/3 with me at 3: 5 > target 4, steal one -> 4/4/4.
	in = leaseInput(leaseViewsOf(leaseT0, append(leaseRepeat("a", 5), append(leaseRepeat("b", 4), leaseRepeat("me", 3)...)...)...))
	in.Held = map[string]store.Lease{}
	for _, v := range in.Leases[9:] {
		in.Held[v.Partition] = v.Lease
	}
	require.Len(t, leaseClaimed(Balance(in), ClaimSteal), 1)
	// 4/4/4: balanced, nothing to do.
	in = leaseInput(leaseViewsOf(leaseT0, append(leaseRepeat("a", 4), append(leaseRepeat("b", 4), leaseRepeat("me", 4)...)...)...))
	in.Held = map[string]store.Lease{}
	for _, v := range in.Leases[8:] {
		in.Held[v.Partition] = v.Lease
	}
	require.Empty(t, Balance(in).Claims)
}

// A held lease whose stored lease differs was taken: it is lost at once and
// not claimed back in the same round.
func TestLeaseBalanceLost(t *testing.T) {
	in := leaseInput(leaseViewsOf(leaseT0, "thief", "me", ""))
	in.Held = map[string]store.Lease{"p00": {Owner: "me", Counter: 7}, "p01": {Owner: "me", Counter: 1}}
	plan := Balance(in)
	require.Equal(t, []string{"p00"}, plan.Lost)
	require.Equal(t, []string{"p02"}, leaseClaimed(plan, ClaimFree))
	require.NotContains(t, leaseClaimed(plan, ClaimSteal), "p00")
}

// A lease the store shows as ours but that is not held here (a claim whose
// response was lost) is free to claim again, with the exact lease seen.
func TestLeaseBalanceOwnLeaseNotHeld(t *testing.T) {
	views := leaseViewsOf(leaseT0, "me")
	views[0].Lease.Counter = 5
	plan := Balance(leaseInput(views))
	require.Equal(t, []Claim{{Partition: "p00", Expect: store.Lease{Owner: "me", Counter: 5}, Kind: ClaimFree}}, plan.Claims)
}

func TestLeaseBalanceMaxOwnedAndBusy(t *testing.T) {
	in := leaseInput(leaseViewsOf(leaseT0, leaseRepeat("", 6)...))
	in.MaxOwned = 2
	plan := Balance(in)
	require.Equal(t, 2, plan.Target)
	require.Len(t, plan.Claims, 2, "never above max_partitions_per_instance")

	in.Busy = map[string]bool{}
	for _, p := range leaseParts(5) {
		in.Busy[p] = true
	}
	plan = Balance(in)
	require.Equal(t, []string{"p05"}, leaseClaimed(plan, ClaimFree), "a partition whose old worker is still stopping is not claimed")

	// Holding more than the cap (the cap was lowered): release the excess.
	in = leaseInput(leaseViewsOf(leaseT0, leaseRepeat("me", 4)...))
	in.Held = map[string]store.Lease{}
	for _, v := range in.Leases {
		in.Held[v.Partition] = v.Lease
	}
	in.MaxOwned = 1
	plan = Balance(in)
	require.Len(t, plan.Release, 3)
	require.Empty(t, plan.Claims)
}

// Instances starting together prefer different partitions (rendezvous
// order), so their first claims mostly do not collide.
func TestLeaseBalanceRendezvous(t *testing.T) {
	views := leaseViewsOf(leaseT0, leaseRepeat("", 12)...)
	firsts := map[string]bool{}
	for _, self := range []string{"i1#a", "i2#b", "i3#c", "i4#d", "i5#e"} {
		in := leaseInput(views)
		in.Self = self
		firsts[Balance(in).Claims[0].Partition] = true
	}
	require.Greater(t, len(firsts), 1)
}

// leaseSim is a deterministic model of several instances running balance
// against one store with perfect, consistent observation; one round is one
// balance interval, and every live instance renews every round.
type leaseSim struct {
	t      *testing.T
	rng    *rand.Rand
	parts  []string
	stored map[string]store.Lease
	insts  []*leaseSimInst
	now    time.Time
	period time.Duration
}

type leaseSimInst struct {
	self    string
	held    map[string]store.Lease
	tracker Tracker
	dead    bool
}

func (s *leaseSim) checkpoints() []store.Checkpoint {
	out := make([]store.Checkpoint, 0, len(s.parts))
	for _, p := range s.parts {
		out = append(out, store.Checkpoint{Key: store.Key{Scope: "s", Partition: p}, Generation: 1, Lease: s.stored[p]})
	}
	return out
}

func (s *leaseSim) round() (changes int) {
	s.now = s.now.Add(time.Second)
	for _, i := range s.rng.Perm(len(s.insts)) {
		in := s.insts[i]
		if in.dead {
			continue
		}
		// Renew (a CAS on the held lease).
		for p, l := range in.held {
			if s.stored[p] == l {
				s.stored[p] = store.RenewedLease(l)
				in.held[p] = s.stored[p]
			}
		}
		plan := Balance(BalanceInput{
			Self: in.self, Now: s.now, Period: s.period, MaxSteals: 1, Steal: true,
			Held: maps(in.held), Leases: in.tracker.Observe(s.checkpoints(), s.parts, s.now),
		})
		for _, p := range plan.Lost {
			delete(in.held, p)
			changes++
		}
		for _, c := range plan.Claims {
			if s.stored[c.Partition] != c.Expect {
				continue // fenced
			}
			s.stored[c.Partition] = store.ClaimedLease(c.Expect, in.self)
			in.held[c.Partition] = s.stored[c.Partition]
			changes++
		}
	}
	// Fencing: at most one instance holds the stored lease of a partition.
	for _, p := range s.parts {
		n := 0
		for _, in := range s.insts {
			if l, ok := in.held[p]; ok && l == s.stored[p] && !in.dead {
				n++
			}
		}
		require.LessOrEqual(s.t, n, 1, "partition %s held by two instances", p)
	}
	return changes
}

// counts returns the partitions held by each live instance (by the store).
func (s *leaseSim) counts() (live []int, unowned int) {
	by := map[string]int{}
	for _, p := range s.parts {
		by[s.stored[p].Owner]++
	}
	for _, in := range s.insts {
		if !in.dead {
			live = append(live, by[in.self])
		}
	}
	return live, len(s.parts) - sum(live)
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

func maps(m map[string]store.Lease) map[string]store.Lease {
	out := make(map[string]store.Lease, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// settle runs rounds until none changes ownership for `quiet` rounds in a
// row, and fails after limit rounds.
func (s *leaseSim) settle(limit, quiet int) int {
	calm := 0
	for r := 1; r <= limit; r++ {
		if s.round() == 0 {
			calm++
			if calm == quiet {
				return r
			}
		} else {
			calm = 0
		}
	}
	s.t.Fatalf("ownership still changing after %d rounds", limit)
	return 0
}

// Property: whatever the number of instances and partitions, balancing
// converges to a stable assignment where every partition is owned and no
// instance holds more than ceil(partitions / instances); after a crash the
// survivors take everything over and converge again; a stable assignment
// stays stable (no ping-pong).
func TestLeaseBalanceConverges(t *testing.T) {
	for seed := range uint64(60) {
		rng := rand.New(rand.NewPCG(seed, 7))
		n := 1 + rng.IntN(5)
		p := 1 + rng.IntN(40)
		t.Run(fmt.Sprintf("seed=%d/instances=%d/partitions=%d", seed, n, p), func(t *testing.T) {
			s := &leaseSim{t: t, rng: rng, parts: leaseParts(p), stored: map[string]store.Lease{}, now: leaseT0, period: 2 * time.Second}
			for i := range n {
				s.insts = append(s.insts, &leaseSimInst{self: fmt.Sprintf("i%d", i), held: map[string]store.Lease{}})
			}
			check := func(alive int) {
				t.Helper()
				counts, unowned := s.counts()
				require.Zero(t, unowned, "unowned partitions remain (counts %v)", counts)
				require.LessOrEqual(t, slices.Max(counts), (p+alive-1)/alive, "counts %v", counts)
			}
			s.settle(20*p+20, 5)
			check(n)
			require.Zero(t, s.settle(50, 50)-50, "a stable assignment changed")
			if n > 1 {
				s.insts[rng.IntN(n)].dead = true // crash: stops renewing
				s.settle(20*p+20, 5)
				check(n - 1)
			}
		})
	}
}

func TestLeaseTracker(t *testing.T) {
	var tr Tracker
	cp := func(p string, l store.Lease) store.Checkpoint {
		return store.Checkpoint{Key: store.Key{Scope: "s", Partition: p}, Generation: 1, Lease: l}
	}
	a1 := store.Lease{Owner: "a", Counter: 1}
	v := tr.Observe([]store.Checkpoint{cp("p1", a1), cp("p0", a1), cp("other", a1)}, []string{"p0", "p1"}, leaseT0)
	require.Equal(t, []View{{"p0", a1, leaseT0}, {"p1", a1, leaseT0}}, v, "partitions outside the membership are ignored")

	later := leaseT0.Add(3 * time.Second)
	a2 := store.RenewedLease(a1)
	v = tr.Observe([]store.Checkpoint{cp("p0", a1), cp("p1", a2)}, []string{"p0", "p1"}, later)
	require.Equal(t, leaseT0, v[0].Since, "an unchanged pair keeps the instant it was first seen")
	require.Equal(t, later, v[1].Since, "a changed pair restarts the clock")
}
