package input

// Lease tests (the pure balance rules and the tracker are internal/lease's):
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
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/chain"
	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/e2etest"
	"github.com/tidemark/tidemark/internal/leasing"
	"github.com/tidemark/tidemark/internal/publish"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/store/memstore"
	"github.com/tidemark/tidemark/provider/simulated"
)

// leaseParts returns n partition names p00, p01, ...
func leaseParts(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("p%02d", i)
	}
	return out
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
	lc, err := leasing.ConfigFromParsed(conf.Namespace(ppFieldLeases))
	require.NoError(t, err)
	require.Nil(t, lc, "no leases object: no leases")

	conf = leaseParse(t, leaseBaseYAML+"leases: {}\n")
	lc, err = leasing.ConfigFromParsed(conf.Namespace(ppFieldLeases))
	require.NoError(t, err)
	require.NotNil(t, lc)
	require.Equal(t, DefaultLeaseConfig(), *lc)
	require.NoError(t, lc.Validate())

	conf = leaseParse(t, leaseBaseYAML+`leases:
  instance_id: connect-0
  lease_period: 2s
  renew_interval: 500ms
  balance_interval: 1s
  max_partitions_per_instance: 5
  max_steals_per_balance: 2
`)
	lc, err = leasing.ConfigFromParsed(conf.Namespace(ppFieldLeases))
	require.NoError(t, err)
	require.Equal(t, LeaseConfig{InstanceID: "connect-0", Period: 2 * time.Second, RenewInterval: 500 * time.Millisecond, BalanceInterval: time.Second, MaxPartitions: 5, MaxSteals: 2}, *lc)

	conf = leaseParse(t, leaseBaseYAML+"leases: { enabled: false, lease_period: 2s }\n")
	lc, err = leasing.ConfigFromParsed(conf.Namespace(ppFieldLeases))
	require.NoError(t, err)
	require.Nil(t, lc)

	for _, bad := range []LeaseConfig{
		{Period: 2 * time.Second, RenewInterval: time.Second, BalanceInterval: time.Second}, // renew not < period/2
		{Period: 2 * time.Second, RenewInterval: 500 * time.Millisecond},                    // no balance interval
		{Period: 2 * time.Second, RenewInterval: 500 * time.Millisecond, BalanceInterval: time.Second, MaxPartitions: -1},
		{InstanceID: "a#b", Period: 2 * time.Second, RenewInterval: 500 * time.Millisecond, BalanceInterval: time.Second},
	} {
		require.Error(t, bad.Validate(), "%+v", bad)
	}

	// exit_when_complete cannot be combined with leases.
	c := Config{Scope: "s", Partitions: []string{"p"}, Leases: lc, Config: chain.Config{MaxPagesInFlight: 1, PollInterval: time.Second, ParkCheckInterval: time.Second,
		StoreBackoff: time.Second, FetchBackoff: time.Second, ExitWhenComplete: true}}
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
	// publish is the instances' frontier_publish_interval (0: none).
	publish time.Duration
	// scope is the instances' scope. (The in-process feed of checkpoint
	// writes is per scope and process-wide: a test that reads it uses a
	// scope of its own.)
	scope string

	mu        sync.Mutex
	delivered map[string]int
	epochs    map[string]int // tidemark_epoch values delivered
	insts     map[string]*leaseInst
}

func newLeaseCluster(t *testing.T, parts []string) *leaseCluster {
	return &leaseCluster{
		t: t, st: memstore.New(), parts: parts, scope: "orders",
		lc:        LeaseConfig{Period: time.Second, RenewInterval: 200 * time.Millisecond, BalanceInterval: 300 * time.Millisecond, MaxSteals: 1},
		delivered: map[string]int{}, epochs: map[string]int{}, insts: map[string]*leaseInst{},
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
		Scope: c.scope, Partitions: c.parts,
		Config: chain.Config{
			MaxPagesInFlight: 2, PollInterval: 50 * time.Millisecond, CoalescePromotions: true,
			ParkCheckInterval: time.Second, StoreBackoff: 50 * time.Millisecond, FetchRetries: 3, FetchBackoff: 10 * time.Millisecond,
		},
		Leases: &lc, FrontierPublishInterval: c.publish,
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
				e, _ := m.MetaGet(MetaEpoch)
				c.epochs[e]++
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
	cps, err := c.st.ListCheckpoints(context.Background(), c.scope)
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
			cps, err := c.st.ListCheckpoints(context.Background(), c.scope)
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
		cp, err := c.st.LoadCheckpoint(context.Background(), store.Key{Scope: c.scope, Partition: p})
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
	cps, err := c.st.ListCheckpoints(context.Background(), c.scope)
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

// The published frontier counts the partitions another process holds: two
// of the four partitions are held (leased) by an instance in another
// process, simulated here by the test promoting their checkpoints in the
// store directly and running that process's publisher (which observes its
// own promotions, as the input's feed does). No in-process feed reports
// them here, so the scalar (the minimum over all four) rises only if this
// input's publisher reads what the other published; and across every
// sample no vector entry and no scalar goes down.
func TestPublisherCountsPartitionsPublishedByAnotherProcess(t *testing.T) {
	c := newLeaseCluster(t, leaseParts(4))
	c.lc.Period = time.Minute // the foreign leases never expire in the test
	c.publish = 20 * time.Millisecond
	c.scope = "orders-remote"
	ctx := t.Context()
	foreign := store.Lease{Owner: "z#1", Counter: 1}
	remote := map[string]store.Checkpoint{}
	for _, p := range c.parts[2:] {
		cp, err := c.st.CreateCheckpoint(ctx, store.Checkpoint{Key: store.Key{Scope: c.scope, Partition: p}, Generation: 1, Lease: foreign})
		require.NoError(t, err)
		remote[p] = cp
	}
	remotePub := publish.NewPublisher(c.st, c.scope)
	advanceRemote := func(wm int64) {
		for p, cp := range remote {
			next, err := c.st.Promote(ctx, store.Promotion{Key: cp.Key, FromCursor: cp.Cursor, FromGeneration: cp.Generation,
				To: []byte(fmt.Sprintf("z-%d", wm)), WitnessID: fmt.Sprintf("z-%s-%d", p, wm), Watermark: coord.Integer(wm),
				Applied: coord.IntPosition(wm), HasApplied: true, Lease: foreign})
			require.NoError(t, err)
			remote[p] = next
			remotePub.Observe(p, next.Watermark)
		}
	}
	// The other process's publisher, one round per sample.
	publishRemote := func() {
		if _, _, _, err := remotePub.Round(ctx); err != nil && !errors.Is(err, store.ErrFenced) && !errors.Is(err, store.ErrNotFound) {
			require.NoError(t, err)
		}
	}
	advanceRemote(10)
	c.start("a", c.st)
	c.waitFor("a holds its two partitions", func() bool { return len(c.owners()["a"]) == 2 })

	var prev store.Frontier
	sample := func() store.Frontier {
		publishRemote()
		f, err := c.st.LoadFrontier(ctx, c.scope)
		if errors.Is(err, store.ErrNotFound) {
			return f
		}
		require.NoError(t, err)
		if !prev.IsZero() && f.Epoch == prev.Epoch {
			if !prev.Scalar.IsZero() {
				require.False(t, f.Scalar.IsZero() || f.Scalar.Less(prev.Scalar), "the scalar went from %s to %s", prev.Scalar, f.Scalar)
			}
			for p, w := range prev.Vector {
				if !w.IsZero() {
					require.False(t, f.Vector[p].IsZero() || f.Vector[p].Less(w), "partition %s's published watermark went from %s to %s", p, w, f.Vector[p])
				}
			}
		}
		prev = f
		return f
	}
	c.waitFor("the scalar is published at the remote partitions' 10", func() bool { return sample().Scalar == coord.Integer(10) })
	for _, wm := range []int64{20, 30} {
		advanceRemote(wm)
		c.waitFor(fmt.Sprintf("the scalar follows the remote partitions to %d", wm), func() bool { return sample().Scalar == coord.Integer(wm) })
	}
	f := sample()
	for _, p := range c.parts[2:] {
		require.Equal(t, coord.Integer(30), f.Vector[p], "the vector carries the remote partition %s", p)
	}
	for _, p := range c.owners()["a"] {
		require.False(t, f.Vector[p].Less(coord.Integer(30)), "a's partition %s is past the remote ones", p)
	}
}

// An epoch advanced in the store while the input runs (by an operator's
// `advance-epoch` or another instance) reaches the running input within a
// publish interval: messages carry it from then on, and the published
// frontier moves to it.
func TestRunningInputPicksUpANewEpoch(t *testing.T) {
	c := newLeaseCluster(t, leaseParts(2))
	c.publish = 20 * time.Millisecond
	c.scope = "orders-epoch"
	c.start("a", c.st)
	c.waitFor("messages under epoch 1", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.epochs["1"] > 0
	})
	_, err := c.st.SwapMembership(t.Context(), 1, store.Membership{Scope: c.scope, Epoch: 2, Partitions: c.parts, Proven: true})
	require.NoError(t, err)
	c.waitFor("messages under epoch 2 and a frontier published for it", func() bool {
		c.mu.Lock()
		n := c.epochs["2"]
		c.mu.Unlock()
		f, err := c.st.LoadFrontier(t.Context(), c.scope)
		return n > 0 && err == nil && f.Epoch == 2
	})
	require.Contains(t, c.insts["a"].log.String(), "is now this input's (was 1)")
}

// leaseGate wraps one instance's store: while the gate is closed, the
// instance's heartbeat and lease writes, lease reads, promotions and parks wait, ignoring
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

func (g *leaseGate) RenewHeartbeat(ctx context.Context, hb store.Heartbeat, held int) (store.Heartbeat, error) {
	g.wait(false)
	return g.Store.RenewHeartbeat(ctx, hb, held)
}

func (g *leaseGate) ListHeartbeats(ctx context.Context, scope string) ([]store.Heartbeat, error) {
	g.wait(false)
	return g.Store.ListHeartbeats(ctx, scope)
}

func (g *leaseGate) TakeOverHeartbeat(ctx context.Context, seen store.Heartbeat, by string) (store.Heartbeat, error) {
	g.wait(false)
	return g.Store.TakeOverHeartbeat(ctx, seen, by)
}

func (g *leaseGate) DeleteHeartbeat(ctx context.Context, hb store.Heartbeat) error {
	g.wait(false)
	return g.Store.DeleteHeartbeat(ctx, hb)
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
	// z gives up each partition: its lease is lost (a fenced promotion,
	// or the whole incarnation gone), or z's first round after the freeze
	// releases it to rebalance, and the release is fenced: a and b hold
	// every lease.
	gaveUp := func(log, part string) bool {
		return regexp.MustCompile(`Partition ` + part + `: (lease lost|releasing lease \S+ failed)`).MatchString(log)
	}
	e2etest.WaitFor(c.t, e2etest.Patience, "z gave up every partition", func() (bool, string) {
		log := z.log.String()
		var lines []string
		for line := range strings.Lines(log) {
			if strings.Contains(line, "ease") || strings.Contains(line, "ncarnation") {
				lines = append(lines, line)
			}
		}
		for _, p := range c.parts {
			if !gaveUp(log, p) {
				return false, fmt.Sprintf("owners %v; %s not given up; z's lease lines:\n%s", c.owners(), p, strings.Join(lines, ""))
			}
		}
		return true, ""
	})
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

// leaseCounting counts the lease and heartbeat calls of the instances by
// method; lossy heartbeat renewals (by call number, 1-based) are applied
// and their responses lost, the way a connection reset after the request
// was sent does.
type leaseCounting struct {
	store.Store
	mu    sync.Mutex
	n     map[string]int
	lose  map[int]bool
	renew int
}

func newLeaseCounting(st store.Store) *leaseCounting {
	return &leaseCounting{Store: st, n: map[string]int{}, lose: map[int]bool{}}
}

func (s *leaseCounting) count(op string) {
	s.mu.Lock()
	s.n[op]++
	s.mu.Unlock()
}

func (s *leaseCounting) snapshot() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.n)
}

func (s *leaseCounting) RenewHeartbeat(ctx context.Context, hb store.Heartbeat, held int) (store.Heartbeat, error) {
	got, err := s.Store.RenewHeartbeat(ctx, hb, held)
	s.mu.Lock()
	s.n["RenewHeartbeat"]++
	s.renew++
	lost := s.lose[s.renew]
	s.mu.Unlock()
	if lost && err == nil {
		return store.Heartbeat{}, fmt.Errorf("renew heartbeat of %s: connection reset after the request was sent", hb.Owner)
	}
	return got, err
}

func (s *leaseCounting) ListHeartbeats(ctx context.Context, scope string) ([]store.Heartbeat, error) {
	s.count("ListHeartbeats")
	return s.Store.ListHeartbeats(ctx, scope)
}

func (s *leaseCounting) TakeOverHeartbeat(ctx context.Context, seen store.Heartbeat, by string) (store.Heartbeat, error) {
	s.count("TakeOverHeartbeat")
	return s.Store.TakeOverHeartbeat(ctx, seen, by)
}

func (s *leaseCounting) ListCheckpoints(ctx context.Context, scope string) ([]store.Checkpoint, error) {
	s.count("ListCheckpoints")
	return s.Store.ListCheckpoints(ctx, scope)
}

func (s *leaseCounting) ClaimLease(ctx context.Context, k store.Key, expect store.Lease, owner string) (store.Checkpoint, error) {
	s.count("ClaimLease")
	return s.Store.ClaimLease(ctx, k, expect, owner)
}

func (s *leaseCounting) ReleaseLease(ctx context.Context, k store.Key, held store.Lease) (store.Checkpoint, error) {
	s.count("ReleaseLease")
	return s.Store.ReleaseLease(ctx, k, held)
}

// Heartbeat renewals whose responses are lost (applied in the store) lose
// no lease: the next renewal repeats the write and the store recognises the
// applied one. A held partition's lease counter never moves while it is
// held (no per-partition renewal), and every partition keeps advancing.
func TestLeaseHeartbeatLostResponsesLoseNothing(t *testing.T) {
	c := newLeaseCluster(t, leaseParts(3))
	c.lc = LeaseConfig{Period: 10 * time.Second, RenewInterval: 40 * time.Millisecond, BalanceInterval: 100 * time.Millisecond, MaxSteals: 16}
	counting := newLeaseCounting(c.st)
	counting.lose = map[int]bool{3: true, 10: true, 11: true, 20: true}
	solo := c.start("solo", counting)
	c.waitFor("solo holds every partition", func() bool { return len(c.owners()["solo"]) == 3 })
	held, err := c.st.ListCheckpoints(context.Background(), "orders")
	require.NoError(t, err)
	c.waitFor("the lost renewal responses exercised", func() bool { return counting.snapshot()["RenewHeartbeat"] > 25 })
	before := c.generations()
	c.waitFor("every partition advances", func() bool { return c.advanced(before, c.parts) })
	now, err := c.st.ListCheckpoints(context.Background(), "orders")
	require.NoError(t, err)
	for i := range now {
		require.Equal(t, held[i].Lease, now[i].Lease, "a held lease does not move while held")
	}
	require.NotContains(t, solo.log.String(), "lease lost", "a lost renewal response cost a lease:\n%s", solo.log)
	c.stop("solo")
	c.requireNoLoss()
}

// Idle upkeep follows instances, not partitions: once three instances are
// balanced, each renew interval costs one heartbeat write and one heartbeat
// query per instance, with no checkpoint read and no lease write, for 6
// partitions as for 240.
func TestLeaseIdleUpkeepIndependentOfPartitions(t *testing.T) {
	upkeep := map[int]map[string]int{}
	for _, parts := range []int{6, 240} {
		c := newLeaseCluster(t, leaseParts(parts))
		c.lc = LeaseConfig{Period: 10 * time.Second, RenewInterval: 100 * time.Millisecond, BalanceInterval: 200 * time.Millisecond, MaxSteals: 256}
		counting := newLeaseCounting(c.st)
		for _, id := range []string{"a", "b", "c"} {
			c.start(id, counting)
		}
		c.waitFor(fmt.Sprintf("%d partitions spread over a, b, c", parts), func() bool { return c.spread(parts/3, "a", "b", "c") })
		// Settle: every heartbeat carries the final counts once each
		// instance has renewed twice more.
		settled := counting.snapshot()["RenewHeartbeat"] + 6
		c.waitFor("two more renewals each", func() bool { return counting.snapshot()["RenewHeartbeat"] >= settled })
		const renewals = 30
		before, from := counting.snapshot(), time.Now()
		c.waitFor(fmt.Sprintf("%d heartbeat renewals", renewals), func() bool {
			return counting.snapshot()["RenewHeartbeat"]-before["RenewHeartbeat"] >= renewals
		})
		after, elapsed := counting.snapshot(), time.Since(from)
		require.True(t, c.spread(parts/3, "a", "b", "c"), "still balanced")
		delta := map[string]int{}
		for k, v := range after {
			if d := v - before[k]; d > 0 {
				delta[k] = d
			}
		}
		t.Logf("%d partitions, 3 instances: lease and heartbeat calls over %d renewals: %v", parts, renewals, delta)
		for _, op := range []string{"ListCheckpoints", "ClaimLease", "ReleaseLease", "TakeOverHeartbeat"} {
			require.Zero(t, delta[op], "%s while idle with %d partitions", op, parts)
		}
		// Observation runs on its own timer, once per renew interval per
		// instance (a ticker drops the ticks a slow round misses), plus a
		// round when another's heartbeat may expire: the heartbeat queries
		// follow time and instances, not partitions. (Renewals on a busy
		// machine fall behind their ticker, so they are no yardstick.)
		ticks := int(elapsed/c.lc.RenewInterval) + 2
		require.LessOrEqual(t, delta["ListHeartbeats"], 3*(ticks+3), "heartbeat queries over %s with %d partitions", elapsed, parts)
		upkeep[parts] = map[string]int{"lease writes": delta["ClaimLease"] + delta["ReleaseLease"], "checkpoint reads": delta["ListCheckpoints"]}
		for _, id := range []string{"a", "b", "c"} {
			c.stop(id)
		}
	}
	require.Equal(t, upkeep[6], upkeep[240])
}

// leaseSlowClaims holds every ClaimLease until release is closed, and
// counts the claims waiting.
type leaseSlowClaims struct {
	*leaseCounting
	release chan struct{}
	mu      sync.Mutex
	waiting int
}

func (s *leaseSlowClaims) ClaimLease(ctx context.Context, k store.Key, expect store.Lease, owner string) (store.Checkpoint, error) {
	s.mu.Lock()
	s.waiting++
	s.mu.Unlock()
	<-s.release
	return s.leaseCounting.ClaimLease(ctx, k, expect, owner)
}

func (s *leaseSlowClaims) claimsWaiting() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waiting
}

// Regression: a balance round claiming many leases once renewed nothing
// until it ended, so the others took fresh leases as expired. Renewal runs
// on its own goroutine: while claims hang for longer than the lease period,
// the heartbeat keeps being renewed, the instance is not taken over, and it
// holds its claims once they land. At most 16 claims are in flight.
func TestLeaseRenewalNeverWaitsBehindClaims(t *testing.T) {
	c := newLeaseCluster(t, leaseParts(40))
	c.lc = LeaseConfig{Period: time.Second, RenewInterval: 100 * time.Millisecond, BalanceInterval: 200 * time.Millisecond, MaxSteals: 256}
	slow := &leaseSlowClaims{leaseCounting: newLeaseCounting(c.st), release: make(chan struct{})}
	solo := c.start("solo", slow)
	c.waitFor("claims hanging", func() bool { return slow.claimsWaiting() > 0 })
	renewed := slow.snapshot()["RenewHeartbeat"]
	// More than a lease period of renewals while the claims hang.
	c.waitFor("the heartbeat renewed 15 times while the claims hang", func() bool {
		return slow.snapshot()["RenewHeartbeat"]-renewed >= 15
	})
	require.LessOrEqual(t, slow.claimsWaiting(), leasing.InFlight, "claims in flight are bounded")
	close(slow.release)
	c.waitFor("solo holds every partition", func() bool { return len(c.owners()["solo"]) == 40 })
	require.NotContains(t, solo.log.String(), "stops all", "the instance gave its incarnation up while its claims hung:\n%s", solo.log)
	require.NotContains(t, solo.log.String(), "lease lost")
	c.stop("solo")
}
