package lease

// The heartbeat lease lifecycle (Machine) driven against the in-memory
// store on a simulated clock: a tiny synchronous driver that does what the
// input does, one instance after another each renew interval.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/store/memstore"
	"math/rand/v2"
)

const (
	mScope  = "s"
	mPeriod = 10 * time.Second
	mRenew  = 3 * time.Second
)

// countingStore counts the store calls by method.
type countingStore struct {
	store.Store
	mu sync.Mutex
	n  map[string]int
}

func (c *countingStore) count(op string) {
	c.mu.Lock()
	c.n[op]++
	c.mu.Unlock()
}

func (c *countingStore) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, v := range c.n {
		out[k] = v
	}
	return out
}

func (c *countingStore) RenewHeartbeat(ctx context.Context, hb store.Heartbeat, held int) (store.Heartbeat, error) {
	c.count("RenewHeartbeat")
	return c.Store.RenewHeartbeat(ctx, hb, held)
}

func (c *countingStore) ListHeartbeats(ctx context.Context, scope string) ([]store.Heartbeat, error) {
	c.count("ListHeartbeats")
	return c.Store.ListHeartbeats(ctx, scope)
}

func (c *countingStore) ListCheckpoints(ctx context.Context, scope string) ([]store.Checkpoint, error) {
	c.count("ListCheckpoints")
	return c.Store.ListCheckpoints(ctx, scope)
}

func (c *countingStore) ClaimLease(ctx context.Context, k store.Key, expect store.Lease, owner string) (store.Checkpoint, error) {
	c.count("ClaimLease")
	return c.Store.ClaimLease(ctx, k, expect, owner)
}

func (c *countingStore) ReleaseLease(ctx context.Context, k store.Key, held store.Lease) (store.Checkpoint, error) {
	c.count("ReleaseLease")
	return c.Store.ReleaseLease(ctx, k, held)
}

func (c *countingStore) TakeOverHeartbeat(ctx context.Context, seen store.Heartbeat, by string) (store.Heartbeat, error) {
	c.count("TakeOverHeartbeat")
	return c.Store.TakeOverHeartbeat(ctx, seen, by)
}

func (c *countingStore) DeleteHeartbeat(ctx context.Context, hb store.Heartbeat) error {
	c.count("DeleteHeartbeat")
	return c.Store.DeleteHeartbeat(ctx, hb)
}

// mInstance is one instance incarnation driven by the test.
type mInstance struct {
	id     string
	m      *Machine
	paused bool
	dead   bool
	gone   []string // reasons of lost incarnations
	inc    int
}

type mCluster struct {
	t     *testing.T
	st    *countingStore
	now   time.Time
	parts []string
	cfg   Config
	insts []*mInstance
	round int
}

func newMCluster(t *testing.T, parts int, cfg Config) *mCluster {
	c := &mCluster{t: t, st: &countingStore{Store: memstore.New(), n: map[string]int{}}, now: time.Unix(1_000_000, 0), cfg: cfg}
	for i := range parts {
		p := fmt.Sprintf("p%04d", i)
		c.parts = append(c.parts, p)
		_, err := c.st.Store.CreateCheckpoint(context.Background(), store.Checkpoint{Key: store.Key{Scope: mScope, Partition: p}, Cursor: []byte("c"), Generation: 1, Epoch: 1})
		require.NoError(t, err)
	}
	return c
}

func (c *mCluster) add(id string) *mInstance {
	in := &mInstance{id: id}
	in.m = c.newMachine(in)
	c.insts = append(c.insts, in)
	return in
}

func (c *mCluster) newMachine(in *mInstance) *Machine {
	cfg := c.cfg
	cfg.Self = fmt.Sprintf("%s#%d", in.id, in.inc)
	in.inc++
	return NewMachine(cfg)
}

// step runs one renew interval: every live instance renews, observes,
// takes over, reads the leases when asked, decides and performs.
func (c *mCluster) step(rebalance bool) {
	ctx := context.Background()
	c.round++
	for _, in := range c.insts {
		if in.dead || in.paused {
			continue
		}
		m := in.m
		if why := m.Stale(c.now); why != "" || m.Gone() != "" {
			in.gone = append(in.gone, m.Gone())
			in.m = c.newMachine(in)
			m = in.m
		}
		hb, held, ok := m.Heartbeat(mScope)
		require.True(c.t, ok)
		got, err := c.st.RenewHeartbeat(ctx, hb, held)
		if why := m.Renewed(c.now, got, err); why != "" {
			in.gone = append(in.gone, why)
			in.m = c.newMachine(in)
			continue
		}
		hbs, err := c.st.ListHeartbeats(ctx, mScope)
		require.NoError(c.t, err)
		r := m.Observe(c.now, hbs, c.parts)
		for _, seen := range r.TakeOvers {
			_, err := c.st.TakeOverHeartbeat(ctx, seen, m.Self())
			m.TookOver(seen, err)
			r.ReadLeases = true
		}
		var cps []store.Checkpoint
		if r.ReadLeases {
			cps, err = c.st.ListCheckpoints(ctx, mScope)
			require.NoError(c.t, err)
		}
		d := m.Decide(DecideInput{Now: c.now, Parts: c.parts, Leases: cps, Rebalance: rebalance})
		for _, p := range d.Release {
			l, _ := m.Lease(p)
			_, err := c.st.ReleaseLease(ctx, store.Key{Scope: mScope, Partition: p}, l)
			m.Released(p, err)
		}
		for _, cl := range d.Claims {
			cp, err := c.st.ClaimLease(ctx, store.Key{Scope: mScope, Partition: cl.Partition}, cl.Expect, m.Self())
			m.Claimed(cl.Partition, cp.Lease, err)
		}
		for _, hb := range d.DeleteHeartbeats {
			_ = c.st.DeleteHeartbeat(ctx, hb)
		}
	}
	c.now = c.now.Add(mRenew)
}

// owned counts the partitions each instance id holds in the store.
func (c *mCluster) owned() map[string]int {
	cps, err := c.st.Store.ListCheckpoints(context.Background(), mScope)
	require.NoError(c.t, err)
	out := map[string]int{}
	for _, cp := range cps {
		id := ""
		if cp.Lease.Owner != "" {
			id = cp.Lease.Owner[:len(cp.Lease.Owner)-2]
		}
		out[id]++
	}
	return out
}

// balanced reports whether every live instance holds between floor and
// ceil of its share and no partition is unowned.
func (c *mCluster) balanced() bool {
	live := 0
	for _, in := range c.insts {
		if !in.dead && !in.paused {
			live++
		}
	}
	o := c.owned()
	if o[""] > 0 {
		return false
	}
	share := (len(c.parts) + live - 1) / live
	for _, in := range c.insts {
		if in.dead || in.paused {
			continue
		}
		if o[in.id] > share || o[in.id] < len(c.parts)/live {
			return false
		}
	}
	return true
}

// stepUntil steps (balance every other step) until cond, at most n steps;
// it returns the steps taken.
func (c *mCluster) stepUntil(n int, cond func() bool) int {
	for i := range n {
		if cond() {
			return i
		}
		c.step(c.round%2 == 1)
	}
	require.True(c.t, cond(), "not reached within %d steps: %v", n, c.owned())
	return n
}

func mConfig() Config {
	return Config{Period: mPeriod, RenewInterval: mRenew, MaxMoves: 256}
}

// Instances that start together converge to their share without one
// grabbing most: nobody claims before seeing the others' heartbeats, and
// then each claims at most its share.
func TestMachineFairStart(t *testing.T) {
	for _, parts := range []int{12, 1000} {
		t.Run(fmt.Sprint(parts), func(t *testing.T) {
			c := newMCluster(t, parts, mConfig())
			for _, id := range []string{"i1", "i2", "i3"} {
				c.add(id)
			}
			share := (parts + 2) / 3
			steps := 0
			for !c.balanced() {
				require.Less(t, steps, 10, "not balanced after 10 renew intervals: %v", c.owned())
				c.step(steps%2 == 1)
				steps++
				for id, n := range c.owned() {
					if id != "" {
						require.LessOrEqual(t, n, share, "%s above its share %d: %v", id, share, c.owned())
					}
				}
			}
			require.LessOrEqual(t, steps, 4)
		})
	}
}

// Once balanced, idle upkeep is one heartbeat write and one heartbeat
// query per instance per renew interval, whatever the number of
// partitions: no checkpoint read, no lease write.
func TestMachineIdleUpkeepIndependentOfPartitions(t *testing.T) {
	upkeep := map[int]map[string]int{}
	for _, parts := range []int{10, 1000} {
		c := newMCluster(t, parts, mConfig())
		for _, id := range []string{"i1", "i2", "i3"} {
			c.add(id)
		}
		c.stepUntil(20, c.balanced)
		c.step(true) // let the heartbeats carry the final counts
		c.step(false)
		before := c.st.snapshot()
		const intervals = 50
		for i := range intervals {
			c.step(i%2 == 0)
		}
		after := c.st.snapshot()
		delta := map[string]int{}
		for k, v := range after {
			if d := v - before[k]; d > 0 {
				delta[k] = d
			}
		}
		require.Equal(t, map[string]int{"RenewHeartbeat": 3 * intervals, "ListHeartbeats": 3 * intervals}, delta, "%d partitions", parts)
		upkeep[parts] = delta
	}
	require.Equal(t, upkeep[10], upkeep[1000])
}

// A dead instance's heartbeat is taken over once its counter has not moved
// for a lease period on the observer's clock, then its partitions are
// claimed (one conditional write each) by the survivors, and its heartbeat
// record is removed.
func TestMachineTakeOverAfterDeath(t *testing.T) {
	c := newMCluster(t, 300, mConfig())
	for _, id := range []string{"i1", "i2", "i3"} {
		c.add(id)
	}
	c.stepUntil(20, c.balanced)
	c.insts[0].dead = true
	died := c.round
	// Before a lease period has passed on the observers' clocks, nothing of
	// i1's is claimed.
	for c.now.Sub(time.Unix(1_000_000, 0)) < time.Duration(died)*mRenew+mPeriod-mRenew {
		c.step(false)
		require.Greater(t, c.owned()["i1"], 0)
	}
	steps := c.stepUntil(10, c.balanced)
	require.LessOrEqual(t, steps, 3, "taken over within a lease period and a renew interval or two")
	c.step(false)
	hbs, err := c.st.ListHeartbeats(context.Background(), mScope)
	require.NoError(t, err)
	require.Len(t, hbs, 2, "the dead heartbeat is removed once its partitions moved: %v", hbs)
}

// An instance paused longer than the lease finds its heartbeat taken over
// when it wakes: its renewal fails and it drops every partition at once,
// then rejoins as a new incarnation and gets its share back.
func TestMachinePauseLongerThanTheLease(t *testing.T) {
	c := newMCluster(t, 60, mConfig())
	for _, id := range []string{"i1", "i2", "i3"} {
		c.add(id)
	}
	c.stepUntil(20, c.balanced)
	z := c.insts[1]
	zombie := z.m
	require.NotZero(t, zombie.Owned())
	z.paused = true
	c.stepUntil(20, c.balanced)
	require.Zero(t, c.owned()["i2"])
	z.paused = false
	c.step(false)
	require.NotEmpty(t, z.gone, "the thawed instance gives its incarnation up")
	require.Zero(t, zombie.Owned(), "the zombie incarnation holds nothing")
	// Its heartbeat was taken over (and removed once its partitions
	// moved): a renewal by the zombie is fenced.
	hb, _, _ := NewMachine(Config{Self: zombie.Self()}).Heartbeat(mScope)
	hb.Counter = zombie.hb.Counter
	_, err := c.st.RenewHeartbeat(context.Background(), hb, 1)
	require.ErrorIs(t, err, store.ErrFenced)
	c.stepUntil(20, c.balanced)
}

// Adding an instance to a balanced cluster moves a share to it within a
// few balance rounds: the others release their excess (at most MaxMoves a
// round, never more than the newcomer can take), the newcomer claims.
func TestMachineRebalanceOnJoin(t *testing.T) {
	c := newMCluster(t, 999, mConfig())
	for _, id := range []string{"i1", "i2", "i3"} {
		c.add(id)
	}
	c.stepUntil(20, c.balanced)
	c.add("i4")
	steps := c.stepUntil(30, c.balanced)
	require.LessOrEqual(t, steps, 8, "999 partitions rebalanced to 4 instances in a few balance rounds")
}

// With MaxMoves 0 an instance never releases to rebalance.
func TestMachineNoMovesKeepsLeases(t *testing.T) {
	cfg := mConfig()
	cfg.MaxMoves = 0
	c := newMCluster(t, 30, cfg)
	c.add("i1")
	c.stepUntil(10, c.balanced)
	c.add("i2")
	for range 10 {
		c.step(true)
	}
	require.Equal(t, map[string]int{"i1": 30}, c.owned())
}

// MaxOwned caps the share; partitions nobody may take stay unowned.
func TestMachineMaxOwned(t *testing.T) {
	cfg := mConfig()
	cfg.MaxOwned = 4
	c := newMCluster(t, 10, cfg)
	c.add("i1")
	c.add("i2")
	for range 8 {
		c.step(true)
	}
	require.Equal(t, map[string]int{"i1": 4, "i2": 4, "": 2}, c.owned())
}

// The held lease is lost when the checkpoint read shows another lease.
func TestMachineLostOnForeignLease(t *testing.T) {
	m := NewMachine(Config{Self: "me#1", Period: mPeriod, RenewInterval: mRenew, MaxMoves: 1})
	t0 := time.Unix(0, 0)
	m.Renewed(t0, store.Heartbeat{Scope: mScope, Owner: "me#1", Counter: 1}, nil)
	m.Observe(t0.Add(mRenew), nil, []string{"a", "b"})
	d := m.Decide(DecideInput{Now: t0.Add(mRenew), Parts: []string{"a", "b"}, Leases: []store.Checkpoint{
		{Key: store.Key{Scope: mScope, Partition: "a"}},
		{Key: store.Key{Scope: mScope, Partition: "b"}},
	}})
	require.Len(t, d.Claims, 2)
	require.True(t, m.Claimed("a", store.Lease{Owner: "me#1", Counter: 1}, nil))
	require.False(t, m.Claimed("b", store.Lease{}, errors.New("fenced")))
	require.Equal(t, []string{"a"}, m.Held())
	m.Observe(t0.Add(2*mRenew), nil, []string{"a", "b"})
	d = m.Decide(DecideInput{Now: t0.Add(2 * mRenew), Parts: []string{"a", "b"}, Leases: []store.Checkpoint{
		{Key: store.Key{Scope: mScope, Partition: "a"}, Lease: store.Lease{Owner: "x#1", Counter: 2}},
		{Key: store.Key{Scope: mScope, Partition: "b"}, Lease: store.Lease{Owner: "x#1", Counter: 1}},
	}})
	require.Equal(t, []string{"a"}, d.Lost)
	require.Empty(t, m.Held())
}

// The holder stops every worker when its heartbeat went unrenewed for a
// lease period since the start of its last successful renewal; a fenced
// renewal does it at once.
func TestMachineSelfStop(t *testing.T) {
	t0 := time.Unix(0, 0)
	tests := []struct {
		name string
		err  error
		at   time.Duration
		stop bool
	}{
		{"unknown outcome within the period", errors.New("timeout"), mPeriod - time.Millisecond, false},
		{"unknown outcome for a period", errors.New("timeout"), mPeriod, true},
		{"fenced at once", &store.FenceError{Op: "renew heartbeat", Reason: "taken over"}, time.Second, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMachine(Config{Self: "me#1", Period: mPeriod, RenewInterval: mRenew})
			require.Empty(t, m.Renewed(t0, store.Heartbeat{Scope: mScope, Owner: "me#1", Counter: 1}, nil))
			m.held["a"] = store.Lease{Owner: "me#1", Counter: 1}
			why := m.Renewed(t0.Add(tc.at), store.Heartbeat{}, tc.err)
			require.Equal(t, tc.stop, why != "", why)
			require.Equal(t, tc.stop, m.Owned() == 0)
			_, _, ok := m.Heartbeat(mScope)
			require.Equal(t, !tc.stop, ok)
		})
	}
}

// Property: under random deaths, pauses and joins, no two live
// incarnations ever hold the same partition in their machines while both
// believe they hold it AND the store names both (the store names one
// owner per partition); every live instance ends balanced once the faults
// stop.
func TestMachinePropertyRandomFaults(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			c := newMCluster(t, 50+rng.IntN(200), mConfig())
			for i := range 2 + rng.IntN(3) {
				c.add(fmt.Sprintf("i%d", i))
			}
			for range 60 {
				in := c.insts[rng.IntN(len(c.insts))]
				switch x := rng.IntN(20); {
				case x == 0 && !in.dead:
					in.paused = !in.paused
				case x == 1 && len(c.insts) < 6:
					c.add(fmt.Sprintf("i%d", len(c.insts)))
				}
				c.step(rng.IntN(2) == 0)
				// Safety of the machines: a partition a machine holds is
				// stored with exactly its lease, unless it is a zombie
				// (paused, or gone without knowing yet).
				cps, err := c.st.Store.ListCheckpoints(context.Background(), mScope)
				require.NoError(t, err)
				stored := map[string]store.Lease{}
				for _, cp := range cps {
					stored[cp.Partition] = cp.Lease
				}
				for _, in := range c.insts {
					if in.paused || in.dead {
						continue
					}
					for _, p := range in.m.Held() {
						l, _ := in.m.Lease(p)
						require.Equal(t, stored[p], l, "%s believes it holds %s", in.m.Self(), p)
					}
				}
			}
			for _, in := range c.insts {
				in.paused = false
			}
			c.stepUntil(30, c.balanced)
			require.True(t, slices.ContainsFunc(c.insts, func(in *mInstance) bool { return in.m.Owned() > 0 }))
		})
	}
}

// Observe asks for a checkpoint read only when something may have
// changed hands; it takes over a heartbeat whose counter has not moved for
// a lease period on this clock.
func TestMachineObserveReadsLeasesOnlyOnChange(t *testing.T) {
	t0 := time.Unix(0, 0)
	parts := []string{"a", "b", "c", "d"}
	hb := func(owner string, counter uint64, held int, taken string) store.Heartbeat {
		return store.Heartbeat{Scope: mScope, Owner: owner, Counter: counter, Held: held, TakenBy: taken}
	}
	// balanced: me holds 2 (read once), x holds 2.
	balanced := func() *Machine {
		m := NewMachine(Config{Self: "me#1", Period: mPeriod, RenewInterval: mRenew, MaxMoves: 8})
		m.Renewed(t0, hb("me#1", 0, 0, ""), nil)
		m.hb.Counter = 1
		m.held["a"], m.held["b"] = store.Lease{Owner: "me#1", Counter: 1}, store.Lease{Owner: "me#1", Counter: 1}
		m.readOnce = true
		m.Observe(t0, []store.Heartbeat{hb("x#1", 5, 2, "")}, parts)
		return m
	}
	tests := []struct {
		name      string
		at        time.Duration
		hbs       []store.Heartbeat
		parts     []string
		read      bool
		takeOvers int
		live      int
	}{
		{"idle and balanced", mRenew, []store.Heartbeat{hb("x#1", 6, 2, "")}, parts, false, 0, 2},
		{"the other released one", mRenew, []store.Heartbeat{hb("x#1", 6, 1, "")}, parts, false, 0, 2},
		{"the other released one and I am below share", mRenew, []store.Heartbeat{hb("x#1", 6, 1, "")}, append(slices.Clone(parts), "e"), true, 0, 2},
		{"a new instance joined", mRenew, []store.Heartbeat{hb("x#1", 6, 2, ""), hb("y#1", 1, 0, "")}, parts, false, 0, 3},
		{"unchanged for less than a period", mPeriod - time.Millisecond, []store.Heartbeat{hb("x#1", 5, 2, "")}, parts, false, 0, 2},
		{"unchanged for a period: take over", mPeriod, []store.Heartbeat{hb("x#1", 5, 2, "")}, parts, true, 1, 1},
		{"a taken heartbeat: orphans", mRenew, []store.Heartbeat{hb("x#1", 5, 2, "z#1")}, parts, true, 0, 1},
		{"a held partition left the membership", mRenew, []store.Heartbeat{hb("x#1", 6, 2, "")}, []string{"b", "c", "d"}, true, 0, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := balanced()
			r := m.Observe(t0.Add(tc.at), tc.hbs, tc.parts)
			require.Equal(t, tc.read, r.ReadLeases, "%s", r)
			require.Len(t, r.TakeOvers, tc.takeOvers)
			require.Equal(t, tc.live, r.Live)
		})
	}
}

// NextExpiry is when the earliest live heartbeat expires if its counter
// stops: the caller observes again then, so a takeover comes at most a
// lease period plus one renew interval after the last renewal.
func TestMachineNextExpiry(t *testing.T) {
	t0 := time.Unix(0, 0)
	m := NewMachine(Config{Self: "me#1", Period: mPeriod, RenewInterval: mRenew})
	hbs := []store.Heartbeat{{Scope: mScope, Owner: "x#1", Counter: 1}, {Scope: mScope, Owner: "y#1", Counter: 1}}
	r := m.Observe(t0, hbs, nil)
	require.Equal(t, t0.Add(mPeriod), r.NextExpiry)
	hbs[0].Counter = 2 // x renewed, y did not
	r = m.Observe(t0.Add(mRenew), hbs, nil)
	require.Equal(t, t0.Add(mPeriod), r.NextExpiry, "y's counter has not moved since t0")
	r = m.Observe(t0.Add(mPeriod), hbs, nil)
	require.Equal(t, []store.Heartbeat{hbs[1]}, r.TakeOvers)
	require.Equal(t, t0.Add(mRenew+mPeriod), r.NextExpiry)
}
