package input

// Lease tests: the pure balance rules (lease.go), the tracker,
// the `leases` config, and several inputs sharing one in-memory store in
// one process: a graceful hand-off, and a zombie whose store calls are held
// at a gate (a frozen process) while the others take its leases over. The
// multi-process test (kill -9, SIGSTOP, dynalite) is
// internal/e2e/lease_test.go.
//
// Every identifier here starts with lease/Lease: other test files of the
// package are written concurrently.

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/input/simulated"
	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/e2etest"
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
func leaseViewsOf(since time.Time, owners ...string) []leaseView {
	out := make([]leaseView, len(owners))
	for i, o := range owners {
		out[i] = leaseView{Partition: fmt.Sprintf("p%02d", i), Lease: store.Lease{Owner: o, Counter: 1}, Since: since}
	}
	return out
}

func leaseRepeat(owner string, n int) []string { return slices.Repeat([]string{owner}, n) }

func leaseClaimed(plan balancePlan, kind claimKind) []string {
	var out []string
	for _, c := range plan.Claims {
		if c.Kind == kind {
			out = append(out, c.Partition)
		}
	}
	slices.Sort(out)
	return out
}

func leaseInput(views []leaseView) balanceInput {
	return balanceInput{Self: "me", Now: leaseT0, Period: 10 * time.Second, MaxSteals: 1, Steal: true, Leases: views}
}

// Alone, an instance claims every unowned partition: the target is all of
// them when no other owner is live.
func TestLeaseBalanceAloneClaimsAll(t *testing.T) {
	plan := balance(leaseInput(leaseViewsOf(leaseT0, leaseRepeat("", 12)...)))
	require.Equal(t, 1, plan.Live)
	require.Equal(t, 12, plan.Target)
	require.Equal(t, leaseParts(12), leaseClaimed(plan, claimFree))
	require.True(t, plan.NextExpiry.IsZero())
	for _, c := range plan.Claims {
		require.Equal(t, store.Lease{Counter: 1}, c.Expect, "a claim expects the lease it saw")
	}
}

// With two live owners of 4 partitions each, the fair share of 12 is 4:
// exactly the 4 free ones are claimed, nothing is stolen.
func TestLeaseBalanceFairShare(t *testing.T) {
	owners := append(append(leaseRepeat("a", 4), leaseRepeat("b", 4)...), leaseRepeat("", 4)...)
	plan := balance(leaseInput(leaseViewsOf(leaseT0, owners...)))
	require.Equal(t, 3, plan.Live)
	require.Equal(t, 4, plan.Target)
	require.Equal(t, []string{"p08", "p09", "p10", "p11"}, leaseClaimed(plan, claimFree))
	require.Empty(t, leaseClaimed(plan, claimSteal))
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
	plan := balance(in)
	require.Empty(t, plan.Claims, "nothing expires before a full lease period: %s", plan)
	require.Equal(t, 3, plan.Live)
	require.Equal(t, leaseT0.Add(period), plan.NextExpiry)

	in.Now = leaseT0.Add(period)
	plan = balance(in)
	require.Equal(t, 2, plan.Live, "the owner whose leases all expired is not live")
	require.Equal(t, 6, plan.Target)
	require.Equal(t, leaseParts(6), leaseClaimed(plan, claimExpired))
	for _, c := range plan.Claims {
		require.Equal(t, store.Lease{Owner: "dead", Counter: 1}, c.Expect, "the take-over expects the exact lease seen")
	}
	require.Equal(t, leaseT0.Add(5*time.Second+period), plan.NextExpiry)

	// Expiry rounds (between balance ticks) claim expired leases too.
	in.Steal = false
	require.Equal(t, leaseParts(6), leaseClaimed(balance(in), claimExpired))
}

// Steal only when below the target and the busiest live owner is above it;
// at most max_steals_per_balance, never taking the victim below the target.
func TestLeaseBalanceSteal(t *testing.T) {
	owners := append(leaseRepeat("a", 8), leaseRepeat("b", 4)...)
	in := leaseInput(leaseViewsOf(leaseT0, owners...))
	plan := balance(in)
	require.Equal(t, 4, plan.Target)
	stolen := leaseClaimed(plan, claimSteal)
	require.Len(t, stolen, 1)
	require.Equal(t, "a", in.Leases[slices.IndexFunc(in.Leases, func(v leaseView) bool { return v.Partition == stolen[0] })].Lease.Owner, "steals come from the busiest owner")

	in.MaxSteals = 10
	require.Len(t, leaseClaimed(balance(in), claimSteal), 4, "a steals down to the target: 8 - 4")
	in.MaxSteals = 0
	require.Empty(t, balance(in).Claims, "max_steals_per_balance 0 never steals")
	in.MaxSteals, in.Steal = 1, false
	require.Empty(t, balance(in).Claims, "expiry rounds never steal")

	// 5/4/3 with me at 3: 5 > target 4, steal one -> 4/4/4.
	in = leaseInput(leaseViewsOf(leaseT0, append(leaseRepeat("a", 5), append(leaseRepeat("b", 4), leaseRepeat("me", 3)...)...)...))
	in.Held = map[string]store.Lease{}
	for _, v := range in.Leases[9:] {
		in.Held[v.Partition] = v.Lease
	}
	require.Len(t, leaseClaimed(balance(in), claimSteal), 1)
	// 4/4/4: balanced, nothing to do.
	in = leaseInput(leaseViewsOf(leaseT0, append(leaseRepeat("a", 4), append(leaseRepeat("b", 4), leaseRepeat("me", 4)...)...)...))
	in.Held = map[string]store.Lease{}
	for _, v := range in.Leases[8:] {
		in.Held[v.Partition] = v.Lease
	}
	require.Empty(t, balance(in).Claims)
}

// A held lease whose stored lease differs was taken: it is lost at once and
// not claimed back in the same round.
func TestLeaseBalanceLost(t *testing.T) {
	in := leaseInput(leaseViewsOf(leaseT0, "thief", "me", ""))
	in.Held = map[string]store.Lease{"p00": {Owner: "me", Counter: 7}, "p01": {Owner: "me", Counter: 1}}
	plan := balance(in)
	require.Equal(t, []string{"p00"}, plan.Lost)
	require.Equal(t, []string{"p02"}, leaseClaimed(plan, claimFree))
	require.NotContains(t, leaseClaimed(plan, claimSteal), "p00")
}

// A lease the store shows as ours but that is not held here (a claim whose
// response was lost) is free to claim again, with the exact lease seen.
func TestLeaseBalanceOwnLeaseNotHeld(t *testing.T) {
	views := leaseViewsOf(leaseT0, "me")
	views[0].Lease.Counter = 5
	plan := balance(leaseInput(views))
	require.Equal(t, []leaseClaim{{Partition: "p00", Expect: store.Lease{Owner: "me", Counter: 5}, Kind: claimFree}}, plan.Claims)
}

func TestLeaseBalanceMaxOwnedAndBusy(t *testing.T) {
	in := leaseInput(leaseViewsOf(leaseT0, leaseRepeat("", 6)...))
	in.MaxOwned = 2
	plan := balance(in)
	require.Equal(t, 2, plan.Target)
	require.Len(t, plan.Claims, 2, "never above max_partitions_per_instance")

	in.Busy = map[string]bool{}
	for _, p := range leaseParts(5) {
		in.Busy[p] = true
	}
	plan = balance(in)
	require.Equal(t, []string{"p05"}, leaseClaimed(plan, claimFree), "a partition whose old worker is still stopping is not claimed")

	// Holding more than the cap (the cap was lowered): release the excess.
	in = leaseInput(leaseViewsOf(leaseT0, leaseRepeat("me", 4)...))
	in.Held = map[string]store.Lease{}
	for _, v := range in.Leases {
		in.Held[v.Partition] = v.Lease
	}
	in.MaxOwned = 1
	plan = balance(in)
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
		firsts[balance(in).Claims[0].Partition] = true
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
	tracker leaseTracker
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
		plan := balance(balanceInput{
			Self: in.self, Now: s.now, Period: s.period, MaxSteals: 1, Steal: true,
			Held: maps(in.held), Leases: in.tracker.observe(s.checkpoints(), s.parts, s.now),
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
	var tr leaseTracker
	cp := func(p string, l store.Lease) store.Checkpoint {
		return store.Checkpoint{Key: store.Key{Scope: "s", Partition: p}, Generation: 1, Lease: l}
	}
	a1 := store.Lease{Owner: "a", Counter: 1}
	v := tr.observe([]store.Checkpoint{cp("p1", a1), cp("p0", a1), cp("other", a1)}, []string{"p0", "p1"}, leaseT0)
	require.Equal(t, []leaseView{{"p0", a1, leaseT0}, {"p1", a1, leaseT0}}, v, "partitions outside the membership are ignored")

	later := leaseT0.Add(3 * time.Second)
	a2 := store.RenewedLease(a1)
	v = tr.observe([]store.Checkpoint{cp("p0", a1), cp("p1", a2)}, []string{"p0", "p1"}, later)
	require.Equal(t, leaseT0, v[0].Since, "an unchanged pair keeps the instant it was first seen")
	require.Equal(t, later, v[1].Since, "a changed pair restarts the clock")
}

func leaseParse(t *testing.T, yaml string) *service.ParsedConfig {
	t.Helper()
	conf, err := Spec().ParseYAML(yaml, nil)
	require.NoError(t, err)
	return conf
}

const leaseBaseYAML = `
scope: s
partitions: [ p0, p1 ]
simulated:
  events_per_partition: 10
`

func TestLeaseConfigSpec(t *testing.T) {
	conf := leaseParse(t, leaseBaseYAML)
	lc, err := leaseConfigFromParsed(conf.Namespace(ppFieldLeases))
	require.NoError(t, err)
	require.Nil(t, lc, "no leases object: no leases")

	conf = leaseParse(t, leaseBaseYAML+"leases: {}\n")
	lc, err = leaseConfigFromParsed(conf.Namespace(ppFieldLeases))
	require.NoError(t, err)
	require.NotNil(t, lc)
	require.Equal(t, DefaultLeaseConfig(), *lc)
	require.NoError(t, lc.validate())

	conf = leaseParse(t, leaseBaseYAML+`leases:
  instance_id: connect-0
  lease_period: 2s
  renew_interval: 500ms
  balance_interval: 1s
  max_partitions_per_instance: 5
  max_steals_per_balance: 2
`)
	lc, err = leaseConfigFromParsed(conf.Namespace(ppFieldLeases))
	require.NoError(t, err)
	require.Equal(t, LeaseConfig{InstanceID: "connect-0", Period: 2 * time.Second, RenewInterval: 500 * time.Millisecond, BalanceInterval: time.Second, MaxPartitions: 5, MaxSteals: 2}, *lc)

	conf = leaseParse(t, leaseBaseYAML+"leases: { enabled: false, lease_period: 2s }\n")
	lc, err = leaseConfigFromParsed(conf.Namespace(ppFieldLeases))
	require.NoError(t, err)
	require.Nil(t, lc)

	for _, bad := range []LeaseConfig{
		{Period: 2 * time.Second, RenewInterval: time.Second, BalanceInterval: time.Second}, // renew not < period/2
		{Period: 2 * time.Second, RenewInterval: 500 * time.Millisecond},                    // no balance interval
		{Period: 2 * time.Second, RenewInterval: 500 * time.Millisecond, BalanceInterval: time.Second, MaxPartitions: -1},
		{InstanceID: "a#b", Period: 2 * time.Second, RenewInterval: 500 * time.Millisecond, BalanceInterval: time.Second},
	} {
		require.Error(t, bad.validate(), "%+v", bad)
	}

	// exit_when_complete cannot be combined with leases.
	c := Config{Scope: "s", Partitions: []string{"p"}, MaxPagesInFlight: 1, PollInterval: time.Second, ParkCheckInterval: time.Second,
		StoreBackoff: time.Second, FetchBackoff: time.Second, ExitWhenComplete: true, Leases: lc}
	d := DefaultLeaseConfig()
	c.Leases = &d
	require.ErrorContains(t, c.validate(), "exit_when_complete")
}

// ---------------------------------------------------------------------------
// Several inputs in one process.

// leaseInst is one running input with a consumer that acknowledges every
// batch and records the delivered event ids.
type leaseInst struct {
	in     *paginatedInput
	log    *e2etest.SyncBuffer
	cancel context.CancelFunc
	done   chan struct{}
}

// leaseCluster is the instances of one test and what they delivered.
type leaseCluster struct {
	t     *testing.T
	st    store.Store
	parts []string
	lc    LeaseConfig

	mu        sync.Mutex
	delivered map[string]int
	insts     map[string]*leaseInst
}

func newLeaseCluster(t *testing.T, parts []string) *leaseCluster {
	return &leaseCluster{
		t: t, st: store.NewMemStore(), parts: parts,
		lc:        LeaseConfig{Period: time.Second, RenewInterval: 200 * time.Millisecond, BalanceInterval: 300 * time.Millisecond, MaxSteals: 1},
		delivered: map[string]int{}, insts: map[string]*leaseInst{},
	}
}

// start starts instance id over st (the cluster's store, possibly wrapped).
func (c *leaseCluster) start(id string, st store.Store) *leaseInst {
	c.t.Helper()
	prov, err := simulated.New(simulated.Config{Partitions: c.parts, PageSize: 5, Latency: 5 * time.Millisecond})
	require.NoError(c.t, err)
	lg := &e2etest.SyncBuffer{}
	res := service.MockResources(service.MockResourcesOptUseLogger(service.NewLoggerFromSlog(slog.New(slog.NewTextHandler(lg, &slog.HandlerOptions{Level: slog.LevelDebug})))))
	lc := c.lc
	lc.InstanceID = id
	bi, err := New(Config{
		Scope: "orders", Partitions: c.parts, MaxPagesInFlight: 2, PollInterval: 50 * time.Millisecond,
		ParkCheckInterval: time.Second, StoreBackoff: 50 * time.Millisecond, FetchRetries: 3, FetchBackoff: 10 * time.Millisecond,
		Leases: &lc,
	}, prov, st, nil, res)
	require.NoError(c.t, err)
	in := bi.(*paginatedInput)
	require.NoError(c.t, in.Connect(c.t.Context()))
	ctx, cancel := context.WithCancel(context.Background())
	inst := &leaseInst{in: in, log: lg, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(inst.done)
		for {
			batch, ack, err := in.ReadBatch(ctx)
			if err != nil {
				return
			}
			c.mu.Lock()
			for _, m := range batch {
				id, _ := m.MetaGet(MetaEventID)
				c.delivered[id]++
				if owner, _ := m.MetaGet(MetaLeaseOwner); !strings.HasPrefix(owner, lc.InstanceID+"#") {
					c.t.Errorf("message %s carries lease owner %q, emitted by %s", id, owner, lc.InstanceID)
				}
			}
			c.mu.Unlock()
			_ = ack(ctx, nil)
		}
	}()
	c.mu.Lock()
	c.insts[id] = inst
	c.mu.Unlock()
	c.t.Cleanup(func() { c.stop(id) })
	return inst
}

// stop closes instance id gracefully (its leases are handed off).
func (c *leaseCluster) stop(id string) {
	c.mu.Lock()
	inst := c.insts[id]
	delete(c.insts, id)
	c.mu.Unlock()
	if inst == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(c.t, inst.in.Close(ctx))
	inst.cancel()
	<-inst.done
}

// owners returns the partitions per owner instance id (the part of the
// owner before '#'; "" for unowned).
func (c *leaseCluster) owners() map[string][]string {
	cps, err := c.st.ListCheckpoints(context.Background(), "orders")
	require.NoError(c.t, err)
	out := map[string][]string{}
	for _, cp := range cps {
		id, _, _ := strings.Cut(cp.Lease.Owner, "#")
		out[id] = append(out[id], cp.Partition)
	}
	return out
}

// waitFor waits, for up to e2etest.Patience, until cond holds; the owners
// are the state printed on failure.
func (c *leaseCluster) waitFor(what string, cond func() bool) {
	c.t.Helper()
	e2etest.WaitFor(c.t, e2etest.Patience, what, func() (bool, string) {
		return cond(), fmt.Sprintf("owners %v", c.owners())
	})
}

// spread reports whether every partition is owned by one of ids and no one
// holds more than most.
func (c *leaseCluster) spread(most int, ids ...string) bool {
	o := c.owners()
	n := 0
	for _, id := range ids {
		if len(o[id]) > most {
			return false
		}
		n += len(o[id])
	}
	return n == len(c.parts)
}

// sample watches every checkpoint until stop: generation, watermark and
// lease counter never decrease (docs/design.md#invariants, invariant 3,
// and the lease counter as a fencing token).
func (c *leaseCluster) sample(stop <-chan struct{}) <-chan error {
	errc := make(chan error, 1)
	go func() {
		last := map[string]store.Checkpoint{}
		for {
			cps, err := c.st.ListCheckpoints(context.Background(), "orders")
			if err == nil {
				for _, cp := range cps {
					prev, ok := last[cp.Partition]
					if ok && (cp.Generation < prev.Generation || cp.Lease.Counter < prev.Lease.Counter || cp.Watermark.Less(prev.Watermark)) {
						errc <- fmt.Errorf("partition %s regressed from generation %d watermark %s lease %s to generation %d watermark %s lease %s",
							cp.Partition, prev.Generation, prev.Watermark, prev.Lease, cp.Generation, cp.Watermark, cp.Lease)
						return
					}
					last[cp.Partition] = cp
				}
			}
			select {
			case <-stop:
				errc <- nil
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	return errc
}

// requireNoLoss checks the oracle: every event at or below a partition's
// durable watermark was delivered (docs/design.md#invariants, invariant 9).
func (c *leaseCluster) requireNoLoss() {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.parts {
		cp, err := c.st.LoadCheckpoint(context.Background(), store.Key{Scope: "orders", Partition: p})
		require.NoError(c.t, err)
		require.Equal(c.t, coord.KindInteger, cp.Watermark.Kind, "partition %s made no progress", p)
		for pos := int64(1); pos <= cp.Watermark.Int; pos++ {
			if c.delivered[simulated.EventID(p, pos)] == 0 {
				c.t.Fatalf("event %s is at or below the durable watermark %s of %s but was never delivered", simulated.EventID(p, pos), cp.Watermark, p)
			}
		}
	}
}

// generations returns every partition's generation.
func (c *leaseCluster) generations() map[string]uint64 {
	cps, err := c.st.ListCheckpoints(context.Background(), "orders")
	require.NoError(c.t, err)
	out := map[string]uint64{}
	for _, cp := range cps {
		out[cp.Partition] = cp.Generation
	}
	return out
}

// advanced reports whether every partition in parts moved past the
// generation it had in before.
func (c *leaseCluster) advanced(before map[string]uint64, parts []string) bool {
	now := c.generations()
	for _, p := range parts {
		if now[p] <= before[p] {
			return false
		}
	}
	return true
}

// Three instances spread 6 partitions; one leaves gracefully and its
// partitions are handed off (released, then claimed at the others' next
// balance without waiting for a lease period); nothing is lost and no
// checkpoint regresses.
func TestLeaseInputsShareAndHandOff(t *testing.T) {
	c := newLeaseCluster(t, leaseParts(6))
	// No lease expires in this test, however slow the machine: every
	// change of owner is a claim of a free lease or a steal.
	c.lc.Period = 10 * time.Second
	stop := make(chan struct{})
	regress := c.sample(stop)
	for _, id := range []string{"a", "b", "c"} {
		c.start(id, c.st)
	}
	c.waitFor("6 partitions spread over 3 instances, at most 2 each", func() bool { return c.spread(2, "a", "b", "c") })

	gone := c.owners()["c"]
	require.NotEmpty(t, gone)
	logC, logA, logB := c.insts["c"].log, c.insts["a"].log, c.insts["b"].log
	offA, offB := logA.Len(), logB.Len()
	before := c.generations()
	start := time.Now()
	c.stop("c")
	require.Equal(t, len(gone), strings.Count(logC.String(), "released (shutdown)"), "c hands every lease off:\n%s", logC)
	c.waitFor("a and b own every partition", func() bool { return c.spread(6, "a", "b") })
	handOff := time.Since(start)
	c.waitFor("c's partitions advance under their new owners", func() bool { return c.advanced(before, gone) })
	t.Logf("graceful hand-off of %v: claimed after %s, advancing after %s (balance interval %s, lease period %s; measured, not asserted)",
		gone, handOff.Round(time.Millisecond), time.Since(start).Round(time.Millisecond), c.lc.BalanceInterval, c.lc.Period)
	// A released lease is unowned: a and b claim it as free, without
	// waiting for it to expire (that would be an "expired" claim of c's
	// lease).
	claims := logA.Since(offA) + logB.Since(offB)
	for _, p := range gone {
		require.Contains(t, claims, "Partition "+p+": lease ", "%s was claimed by a or b", p)
		for line := range strings.Lines(claims) {
			if strings.Contains(line, "Partition "+p+": lease ") && strings.Contains(line, " claimed (") {
				require.Contains(t, line, "claimed (free, was unowned/", "%s was claimed as a released lease, not waited for: %s", p, line)
			}
		}
	}

	c.stop("a")
	c.stop("b")
	close(stop)
	require.NoError(t, <-regress)
	c.requireNoLoss()
}

// leaseGate wraps one instance's store: while the gate is closed, the
// instance's lease writes, lease reads, promotions and parks wait, ignoring
// their contexts (a frozen process cannot be cancelled). It records the
// instance's promotions.
type leaseGate struct {
	store.Store
	mu      sync.Mutex
	closed  chan struct{} // nil while open
	blocked int
	opened  bool // the gate was opened again after a close
	promos  []leaseGatePromo
}

type leaseGatePromo struct {
	p         store.Promotion
	cp        store.Checkpoint
	err       error
	afterOpen bool
}

func (g *leaseGate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = make(chan struct{})
}

func (g *leaseGate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed != nil {
		close(g.closed)
		g.closed, g.opened = nil, true
	}
}

func (g *leaseGate) wait(promote bool) {
	g.mu.Lock()
	ch := g.closed
	if ch != nil && promote {
		g.blocked++
	}
	g.mu.Unlock()
	if ch != nil {
		<-ch
	}
}

func (g *leaseGate) blockedPromotions() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.blocked
}

func (g *leaseGate) promotions() []leaseGatePromo {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.promos)
}

func (g *leaseGate) Promote(ctx context.Context, p store.Promotion) (store.Checkpoint, error) {
	g.wait(true)
	cp, err := g.Store.Promote(ctx, p)
	g.mu.Lock()
	g.promos = append(g.promos, leaseGatePromo{p: p, cp: cp, err: err, afterOpen: g.opened})
	g.mu.Unlock()
	return cp, err
}

func (g *leaseGate) SetParked(ctx context.Context, k store.Key, cursor []byte, generation uint64, lease store.Lease, reason string) (store.Checkpoint, error) {
	g.wait(false)
	return g.Store.SetParked(ctx, k, cursor, generation, lease, reason)
}

func (g *leaseGate) ListCheckpoints(ctx context.Context, scope string) ([]store.Checkpoint, error) {
	g.wait(false)
	return g.Store.ListCheckpoints(ctx, scope)
}

func (g *leaseGate) ClaimLease(ctx context.Context, k store.Key, expect store.Lease, owner string) (store.Checkpoint, error) {
	g.wait(false)
	return g.Store.ClaimLease(ctx, k, expect, owner)
}

func (g *leaseGate) RenewLease(ctx context.Context, k store.Key, held store.Lease) (store.Checkpoint, error) {
	g.wait(false)
	return g.Store.RenewLease(ctx, k, held)
}

func (g *leaseGate) ReleaseLease(ctx context.Context, k store.Key, held store.Lease) (store.Checkpoint, error) {
	g.wait(false)
	return g.Store.ReleaseLease(ctx, k, held)
}

// The SIGSTOP case of the multi-process test, in one process. z holds every
// partition and freezes with promotions in flight; a and b see
// its leases unchanged for a lease period on their own clocks and take them
// over; when z thaws, its held promotions reach the store with its old
// lease and are fenced, it logs "lease lost" for every partition and stops
// those workers; no promotion of z ever succeeds with a lease older than
// the take-over; nothing is lost and no checkpoint regresses.
func TestLeaseZombieFenced(t *testing.T) {
	c := newLeaseCluster(t, leaseParts(4))
	gate := &leaseGate{Store: c.st}
	stop := make(chan struct{})
	regress := c.sample(stop)
	z := c.start("z", gate)
	c.waitFor("z holds every partition", func() bool { return len(c.owners()["z"]) == 4 })
	before := c.generations()
	c.waitFor("z promotes", func() bool { return c.advanced(before, c.parts) })

	gate.close()
	c.waitFor("a promotion of z waiting at the gate", func() bool { return gate.blockedPromotions() > 0 })
	frozen := time.Now()
	c.start("a", c.st)
	c.start("b", c.st)
	c.waitFor("a and b took every lease of the frozen z over", func() bool { return c.spread(4, "a", "b") })
	t.Logf("take-over of a frozen instance's leases after %s (lease period %s, balance interval %s)",
		time.Since(frozen).Round(time.Millisecond), c.lc.Period, c.lc.BalanceInterval)
	taken := map[string]store.Lease{}
	cps, err := c.st.ListCheckpoints(context.Background(), "orders")
	require.NoError(t, err)
	for _, cp := range cps {
		taken[cp.Partition] = cp.Lease
	}

	gate.open()
	c.waitFor("z lost every lease", func() bool { return strings.Count(z.log.String(), "lease lost") >= 4 })
	// "lease lost" comes from z's lease manager; the promotion released by
	// the gate reaches the store on its own goroutine: wait for it too.
	c.waitFor("the promotion held at the gate reached the store", func() bool {
		for _, pr := range gate.promotions() {
			if pr.afterOpen {
				return true
			}
		}
		return false
	})
	fenced := 0
	for _, pr := range gate.promotions() {
		if !pr.afterOpen {
			continue
		}
		if pr.err == nil {
			require.Greater(t, pr.p.Lease.Counter, taken[pr.p.Partition].Counter,
				"z promoted %s with lease %s, not newer than the take-over lease %s", pr.p.Partition, pr.p.Lease, taken[pr.p.Partition])
			continue
		}
		require.ErrorIs(t, pr.err, store.ErrFenced)
		require.Contains(t, pr.err.Error(), "lease")
		fenced++
	}
	require.Positive(t, fenced, "the promotion z held at the gate must be fenced")
	// The worker logs the fenced promotion once the store's answer is back
	// to it.
	c.waitFor("the fenced promotion in z's log", func() bool { return strings.Contains(z.log.String(), "lost the promotion") })

	before = c.generations()
	c.waitFor("every partition advances after the zombie", func() bool { return c.advanced(before, c.parts) })
	for _, id := range []string{"z", "a", "b"} {
		c.stop(id)
	}
	close(stop)
	require.NoError(t, <-regress)
	c.requireNoLoss()
}

// leaseLossyRenew applies every RenewLease but loses the response of the
// calls whose number is in lose (1-based), the way a connection reset after
// the request was sent does.
type leaseLossyRenew struct {
	store.Store
	mu    sync.Mutex
	calls int
	lose  map[int]bool
}

func (s *leaseLossyRenew) RenewLease(ctx context.Context, k store.Key, held store.Lease) (store.Checkpoint, error) {
	cp, err := s.Store.RenewLease(ctx, k, held)
	s.mu.Lock()
	s.calls++
	lost := s.lose[s.calls]
	s.mu.Unlock()
	if lost && err == nil {
		return store.Checkpoint{}, fmt.Errorf("renew lease of %s: connection reset after the request was sent", k)
	}
	return cp, err
}

// Regression: a renewal moves the lease counter, and a promotion of the
// same instance carrying the counter from just before must not be fenced by
// it (the holder serialises its worker's writes with its renewals). A
// renewal whose response is lost keeps the worker's writes waiting until a
// later renewal resolves it (the repeat of an applied renewal succeeds), so
// the worker never writes with a lease that may have moved on. One instance
// alone, renewing every 40ms while promoting continuously: no lease is ever
// lost, and the partitions keep advancing.
func TestLeaseRenewalNeverFencesOwnWorker(t *testing.T) {
	c := newLeaseCluster(t, leaseParts(3))
	// Renewals every 40ms, interleaved with the worker's promotions. The
	// lease period is long so that no scheduling delay of a loaded machine
	// can expire the lease: any "lease lost" is then a fence by its own
	// renewal, the bug this test is about.
	c.lc = LeaseConfig{Period: 10 * time.Second, RenewInterval: 40 * time.Millisecond, BalanceInterval: 100 * time.Millisecond, MaxSteals: 1}
	lossy := &leaseLossyRenew{Store: c.st, lose: map[int]bool{10: true, 11: true, 20: true}}
	solo := c.start("solo", lossy)
	c.waitFor("solo holds every partition", func() bool { return len(c.owners()["solo"]) == 3 })
	renewals := func() int {
		lossy.mu.Lock()
		defer lossy.mu.Unlock()
		return lossy.calls
	}
	counter := func() uint64 {
		cp, err := c.st.LoadCheckpoint(context.Background(), store.Key{Scope: "orders", Partition: "p00"})
		require.NoError(t, err)
		return cp.Lease.Counter
	}
	// Three rounds of: every partition promotes, and p00's lease is renewed
	// again (its counter moves); until the lost responses were exercised.
	var counters []uint64
	for round := 0; round < 3 || renewals() <= 20; round++ {
		before, last := c.generations(), counter()
		c.waitFor("every partition advances", func() bool { return c.advanced(before, c.parts) })
		c.waitFor(fmt.Sprintf("p00's lease renewed past counter %d", last), func() bool { return counter() > last })
		counters = append(counters, counter())
	}
	require.True(t, slices.IsSorted(counters), "the lease counter only grows: %v", counters)
	require.NotContains(t, solo.log.String(), "lease lost", "a renewal fenced its own worker:\n%s", solo.log)
	require.NotContains(t, solo.log.String(), "lost the promotion")
	c.stop("solo")
	c.requireNoLoss()
}

// A graceful hand-off after a renewal whose response was lost but which was
// applied: the holder still believes the old counter, the store holds the
// next one under this instance's owner. The release must hand off the
// stored lease, not leave it to expire.
func TestLeaseReleaseAfterAnAppliedRenewalWithALostResponse(t *testing.T) {
	st := store.NewMemStore()
	k := store.Key{Scope: "release", Partition: "p0"}
	_, err := st.CreateCheckpoint(context.Background(), store.Checkpoint{Key: k, Cursor: []byte("c"), Generation: 1, Epoch: 1})
	require.NoError(t, err)
	claimed, err := st.ClaimLease(context.Background(), k, store.Lease{}, "i1#a")
	require.NoError(t, err)
	renewed, err := st.RenewLease(context.Background(), k, claimed.Lease) // applied; its response "lost"
	require.NoError(t, err)
	require.Greater(t, renewed.Lease.Counter, claimed.Lease.Counter)

	res := service.MockResources()
	in := &paginatedInput{store: st}
	m := newLeaseManager(in, LeaseConfig{Period: 10 * time.Second, RenewInterval: time.Second, BalanceInterval: time.Second}, res)
	h := newLeaseHolder(k, claimed.Lease, time.Now(), m.onLost)
	m.release(context.Background(), h, "shutdown")

	cp, err := st.LoadCheckpoint(context.Background(), k)
	require.NoError(t, err)
	require.False(t, cp.Lease.Held(), "the lease was handed off, not left to expire: %+v", cp.Lease)
}
