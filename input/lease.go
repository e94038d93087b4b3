package input

// Scale-out: several instances of one pipeline share a scope's partitions
// through leases kept on the partitions' checkpoint records (see
// internal/store/lease.go for the lease state diagram).
//
// Roles:
//   - internal/lease (pure): lease.Balance decides from the observed leases
//     and this instance's own clock readings which leases are lost, which
//     to release, and which to claim (free, expired) or steal;
//     lease.Tracker remembers, per partition, when this instance first saw
//     the current (owner, counter) pair. No I/O, no clock inside.
//   - leaseHolder: one held lease and the worker it runs; it serialises the
//     worker's conditional writes with the lease's renewals, so that a
//     renewal (which moves the counter) never fences its own worker.
//   - leasedStore: the input's store when leases are on; it stamps the
//     holder's current lease on every Promote and SetParked of a worker
//     (the holder rides in the worker's context), refuses them once the
//     lease is lost, and marks the lease lost when a write is fenced by
//     another lease.
//   - leaseManager: one goroutine that renews, balances, starts and stops
//     partition workers, and hands the leases off on shutdown.
//
// Expiry never compares the clocks of two hosts: an instance treats a lease
// as expired when the pair (owner, counter) has not changed for
// lease_period measured on its own monotonic clock since it first saw the
// pair. A holder renews every renew_interval (< lease_period/2), and stops
// its own worker when it has not renewed for lease_period since the start
// of its last successful renewal: before anyone else can have seen the
// lease expire (the others' clocks start later, when they read the pair).
// Safety never depends on time: every write of progress is conditional on
// the lease, and the lease counter strictly increases on every claim,
// renewal, steal and release.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/tidemark/tidemark/internal/lease"
	"github.com/tidemark/tidemark/internal/store"
)

// Field names of the `leases` object.
const (
	lsFieldEnabled         = "enabled"
	lsFieldInstanceID      = "instance_id"
	lsFieldPeriod          = "lease_period"
	lsFieldRenewInterval   = "renew_interval"
	lsFieldBalanceInterval = "balance_interval"
	lsFieldMaxPartitions   = "max_partitions_per_instance"
	lsFieldMaxSteals       = "max_steals_per_balance"
)

// Metadata keys of the fencing token, set on every message when leases are
// on (with MetaGeneration): an idempotent sink that keeps, per partition,
// the highest lease counter it accepted can refuse writes from a zombie.
const (
	MetaLeaseOwner   = "tidemark_lease_owner"
	MetaLeaseCounter = "tidemark_lease_counter"
)

// LeaseConfig configures scale-out. The zero value is not valid; see
// DefaultLeaseConfig.
type LeaseConfig struct {
	// InstanceID names this instance in leases, logs and metadata.
	// Default (""): a random id per process. The stored lease owner is
	// "<InstanceID>#<incarnation>", with a random incarnation per process,
	// so that a restarted or paused copy can never pass for the current one.
	InstanceID string
	// Period is how long a lease whose (owner, counter) does not change is
	// still considered alive by the others. Default 10s.
	Period time.Duration
	// RenewInterval is how often a holder renews; less than Period/2.
	// Default 3s.
	RenewInterval time.Duration
	// BalanceInterval is how often an instance reads every lease, claims
	// free or expired ones and steals to even out the load. Default 5s.
	BalanceInterval time.Duration
	// MaxPartitions caps the partitions one instance holds. Default 0:
	// unlimited.
	MaxPartitions int
	// MaxSteals caps the leases taken from a live owner per balance round.
	// Default 1; 0 never steals.
	MaxSteals int
}

// DefaultLeaseConfig returns the defaults of the `leases` fields.
func DefaultLeaseConfig() LeaseConfig {
	return LeaseConfig{Period: 10 * time.Second, RenewInterval: 3 * time.Second, BalanceInterval: 5 * time.Second, MaxSteals: 1}
}

func (c LeaseConfig) validate() error {
	switch {
	case c.Period <= 0 || c.RenewInterval <= 0 || c.BalanceInterval <= 0:
		return errors.New("leases: lease_period, renew_interval and balance_interval must be positive")
	case 2*c.RenewInterval >= c.Period:
		return fmt.Errorf("leases: renew_interval (%s) must be less than half of lease_period (%s)", c.RenewInterval, c.Period)
	case c.MaxPartitions < 0 || c.MaxSteals < 0:
		return errors.New("leases: max_partitions_per_instance and max_steals_per_balance must not be negative")
	case c.InstanceID != "" && strings.Contains(c.InstanceID, "#"):
		return fmt.Errorf("leases: instance_id %q must not contain '#'", c.InstanceID)
	}
	return store.CheckName("leases: instance_id", c.InstanceID+"#00000000")
}

// LeaseFields are the fields of the `leases` object.
func LeaseFields() []*service.ConfigField {
	d := DefaultLeaseConfig()
	return []*service.ConfigField{
		service.NewBoolField(lsFieldEnabled).
			Description("Share the partitions through leases. It defaults to true once a `leases` object is written, so `leases: {}` enables leases with every default; an absent `leases` object means this instance reads every partition alone.").
			Default(true).Example(true),
		service.NewStringField(lsFieldInstanceID).
			Description("Names this instance in leases, logs and the `tidemark_lease_owner` metadata. Empty: a random id per process. The stored owner is `<instance_id>#<incarnation>` with a random incarnation per process start, so a restarted or paused copy can never pass for the current one.").
			Default("").Example("connect-0"),
		service.NewDurationField(lsFieldPeriod).
			Description("A lease whose owner and counter have not changed for this long, measured on each instance's own clock since it first saw them, is expired and may be claimed by another instance. Every instance reads the leases every `renew_interval`, so the partitions of a dead instance are taken over at most `lease_period` plus one `renew_interval` after its last renewal.").
			Default(d.Period.String()).Example("30s"),
		service.NewDurationField(lsFieldRenewInterval).
			Description("How often a holder renews its leases (each renewal is one conditional write per partition that increments the lease counter). Must be less than half of `lease_period`.").
			Default(d.RenewInterval.String()).Example("5s"),
		service.NewDurationField(lsFieldBalanceInterval).
			Description("How often an instance evens out the load: its fair share is the partitions divided by the live instances (owners of leases that are not expired), rounded up; below it, it steals from the busiest owner when that owner holds more than its share. (Unowned and expired leases are claimed up to the share after every renewal.)").
			Default(d.BalanceInterval.String()).Example("10s"),
		service.NewIntField(lsFieldMaxPartitions).
			Description("The most partitions this instance holds at once; 0 means no limit.").
			Default(d.MaxPartitions).Example(16),
		service.NewIntField(lsFieldMaxSteals).
			Description("The most leases taken from a live owner in one balance round (a steal stops that owner's worker for the partition: in-flight pages are dropped and their events delivered again by the thief); 0 never steals.").
			Default(d.MaxSteals).Example(2).Advanced(),
	}
}

// leaseObjectDefault is the value of an absent `leases` object: leases off.
func leaseObjectDefault() map[string]any { return map[string]any{lsFieldEnabled: false} }

// leaseConfigFromParsed reads the `leases` object (conf is its namespace);
// nil when leases are off.
func leaseConfigFromParsed(conf *service.ParsedConfig) (*LeaseConfig, error) {
	on, err := conf.FieldBool(lsFieldEnabled)
	if err != nil || !on {
		return nil, err
	}
	c, err := readLeaseConfig(conf)
	return &c, err
}

func readLeaseConfig(conf *service.ParsedConfig) (LeaseConfig, error) {
	var c LeaseConfig
	var err error
	if c.InstanceID, err = conf.FieldString(lsFieldInstanceID); err != nil {
		return c, err
	}
	for fld, dst := range map[string]*time.Duration{
		lsFieldPeriod: &c.Period, lsFieldRenewInterval: &c.RenewInterval, lsFieldBalanceInterval: &c.BalanceInterval,
	} {
		if *dst, err = conf.FieldDuration(fld); err != nil {
			return c, err
		}
	}
	if c.MaxPartitions, err = conf.FieldInt(lsFieldMaxPartitions); err != nil {
		return c, err
	}
	if c.MaxSteals, err = conf.FieldInt(lsFieldMaxSteals); err != nil {
		return c, err
	}
	return c, nil
}

// ---------------------------------------------------------------------------
// Holders and the fenced store.

// leaseHolder is one lease this instance holds and the worker running the
// partition under it.
type leaseHolder struct {
	key store.Key
	// sem serialises the worker's conditional writes with the renewals of
	// the lease (a buffered channel of one, so acquiring can time out or be
	// cancelled).
	sem chan struct{}

	mu    sync.Mutex
	lease store.Lease
	lost  string // why the lease was lost; "" while held
	// onLost is called once, outside mu, when the lease is lost.
	onLost func(h *leaseHolder, reason string)

	// Owned by the manager goroutine.
	renewedAt   time.Time // start of the last successful claim or renewal
	uncertain   bool      // the last renewal's outcome is unknown: sem is kept
	uncertainAt time.Time // start of that renewal
	cancel      context.CancelFunc
	done        chan struct{} // closed when the worker returned
}

func newLeaseHolder(k store.Key, lease store.Lease, at time.Time, onLost func(*leaseHolder, string)) *leaseHolder {
	return &leaseHolder{key: k, sem: make(chan struct{}, 1), lease: lease, renewedAt: at, onLost: onLost, cancel: func() {}, done: make(chan struct{})}
}

func (h *leaseHolder) acquire(ctx context.Context) error {
	select {
	case h.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (h *leaseHolder) release() { <-h.sem }

// current returns the held lease and, once lost, why.
func (h *leaseHolder) current() (store.Lease, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lease, h.lost
}

func (h *leaseHolder) setLease(l store.Lease) {
	h.mu.Lock()
	h.lease = l
	h.mu.Unlock()
}

// lose marks the lease lost (once), stops the worker and tells the
// manager.
func (h *leaseHolder) lose(reason string) {
	if h.stop(reason) && h.onLost != nil {
		h.onLost(h, reason)
	}
}

// stop ends the holding (once) and stops the worker; it reports whether
// this call ended it. From then on every write of the worker is refused.
func (h *leaseHolder) stop(reason string) bool {
	h.mu.Lock()
	first := h.lost == ""
	if first {
		h.lost = reason
	}
	h.mu.Unlock()
	if first {
		h.cancel()
	}
	return first
}

// checkFence marks the lease lost when err is a fence whose winner holds
// another lease than the one the write carried.
func (h *leaseHolder) checkFence(err error, carried store.Lease) {
	var fe *store.FenceError
	if errors.As(err, &fe) && fe.Winner != nil && fe.Winner.Lease != carried {
		h.lose(fmt.Sprintf("%s fenced: the lease is now %s, this worker held %s", fe.Op, fe.Winner.Lease, carried))
	}
}

type holderCtxKey struct{}

func withHolder(ctx context.Context, h *leaseHolder) context.Context {
	return context.WithValue(ctx, holderCtxKey{}, h)
}

func holderOf(ctx context.Context) *leaseHolder {
	h, _ := ctx.Value(holderCtxKey{}).(*leaseHolder)
	return h
}

// leasedStore fences a worker's writes by its lease: the holder rides in
// the worker's context. Calls without a holder (membership, frontier, the
// manager itself) pass through.
type leasedStore struct {
	store.Store
}

// Promote stamps the holder's current lease on p, while no renewal runs.
func (s leasedStore) Promote(ctx context.Context, p store.Promotion) (store.Checkpoint, error) {
	h := holderOf(ctx)
	if h == nil {
		return s.Store.Promote(ctx, p)
	}
	if err := h.acquire(ctx); err != nil {
		return store.Checkpoint{}, err
	}
	defer h.release()
	lease, lost := h.current()
	if lost != "" {
		return store.Checkpoint{}, &store.FenceError{Key: p.Key, Op: "promote", Reason: "lease lost: " + lost, WantGeneration: p.FromGeneration}
	}
	p.Lease = lease
	cp, err := s.Store.Promote(ctx, p)
	h.checkFence(err, lease)
	if err == nil && cp.Lease != lease {
		h.lose(fmt.Sprintf("the promoted checkpoint holds lease %s, this worker held %s", cp.Lease, lease))
	}
	return cp, err
}

// SetParked stamps the holder's current lease, while no renewal runs.
func (s leasedStore) SetParked(ctx context.Context, k store.Key, cursor []byte, generation uint64, _ store.Lease, reason string) (store.Checkpoint, error) {
	h := holderOf(ctx)
	if h == nil {
		return s.Store.SetParked(ctx, k, cursor, generation, store.Lease{}, reason)
	}
	if err := h.acquire(ctx); err != nil {
		return store.Checkpoint{}, err
	}
	defer h.release()
	lease, lost := h.current()
	if lost != "" {
		return store.Checkpoint{}, &store.FenceError{Key: k, Op: "set parked", Reason: "lease lost: " + lost, WantGeneration: generation}
	}
	cp, err := s.Store.SetParked(ctx, k, cursor, generation, lease, reason)
	h.checkFence(err, lease)
	return cp, err
}

// LoadCheckpoint also checks the lease: a worker that (re)loads its
// checkpoint and finds another lease stops at once instead of fetching
// pages it could never promote.
func (s leasedStore) LoadCheckpoint(ctx context.Context, k store.Key) (store.Checkpoint, error) {
	h := holderOf(ctx)
	if h == nil {
		return s.Store.LoadCheckpoint(ctx, k)
	}
	if err := h.acquire(ctx); err != nil {
		return store.Checkpoint{}, err
	}
	defer h.release()
	cp, err := s.Store.LoadCheckpoint(ctx, k)
	if lease, lost := h.current(); err == nil && lost == "" && cp.Lease != lease {
		h.lose(fmt.Sprintf("the stored lease is %s, this worker held %s", cp.Lease, lease))
	}
	return cp, err
}

// ---------------------------------------------------------------------------
// The manager.

type leaseMetrics struct {
	owned  *service.MetricGauge
	steals *service.MetricCounter
	lost   *service.MetricCounter
}

func newLeaseMetrics(m *service.Metrics) *leaseMetrics {
	return &leaseMetrics{
		owned:  m.NewGauge("tidemark_owned_partitions"),
		steals: m.NewCounter("tidemark_lease_steals", "reason"),
		lost:   m.NewCounter("tidemark_leases_lost"),
	}
}

// leaseManager runs this instance's share of the partitions.
type leaseManager struct {
	in      *paginatedInput
	cfg     LeaseConfig
	owner   string
	log     *service.Logger
	metrics *leaseMetrics

	// Owned by the run goroutine.
	parts    []string
	held     map[string]*leaseHolder
	stopping map[string]*leaseHolder
	tracker  lease.Tracker
	workers  sync.WaitGroup

	wake chan struct{} // a holder was lost
}

func newLeaseManager(in *paginatedInput, cfg LeaseConfig, res *service.Resources) *leaseManager {
	var b [4]byte
	_, _ = rand.Read(b[:])
	incarnation := hex.EncodeToString(b[:])
	id := cfg.InstanceID
	if id == "" {
		_, _ = rand.Read(b[:])
		id = hex.EncodeToString(b[:])
	}
	owner := id + "#" + incarnation
	return &leaseManager{
		in: in, cfg: cfg, owner: owner,
		log:      res.Logger().With("lease_owner", owner),
		metrics:  newLeaseMetrics(res.Metrics()),
		held:     map[string]*leaseHolder{},
		stopping: map[string]*leaseHolder{},
		wake:     make(chan struct{}, 1),
	}
}

// storeTimeout bounds one lease write or list.
func (m *leaseManager) storeTimeout() time.Duration { return m.cfg.RenewInterval }

// run manages the leases until ctx ends, then stops every worker and hands
// every held lease off. Every renew_interval it renews its leases, then
// reads every lease and claims free and expired ones (no steal): so a
// dead owner's last counter is seen within one renew_interval and its
// leases are taken over at most lease_period + renew_interval after its
// last renewal. Every balance_interval it also steals. Between ticks, a
// timer wakes it at the instant the next foreign lease would expire.
func (m *leaseManager) run(ctx context.Context) {
	m.parts = slices.Clone(m.in.memberNames())
	m.log.Infof("Leases: instance %s shares %d partitions of scope %s (lease period %s, renew every %s, balance every %s)",
		m.owner, len(m.parts), m.in.cfg.Scope, m.cfg.Period, m.cfg.RenewInterval, m.cfg.BalanceInterval)
	renew := time.NewTicker(m.cfg.RenewInterval)
	defer renew.Stop()
	bal := time.NewTicker(m.cfg.BalanceInterval)
	defer bal.Stop()
	expiry := time.NewTimer(time.Hour)
	defer expiry.Stop()
	arm := func(at time.Time) {
		expiry.Stop()
		if !at.IsZero() {
			expiry.Reset(max(time.Until(at), 0))
		}
	}
	arm(m.balanceRound(ctx, true))
	for {
		select {
		case <-ctx.Done():
			m.shutdown()
			return
		case <-renew.C:
			m.renewAll(ctx)
			arm(m.balanceRound(ctx, false))
		case <-bal.C:
			arm(m.balanceRound(ctx, true))
		case <-expiry.C:
			arm(m.balanceRound(ctx, false))
		case <-m.wake:
			m.reap()
		}
	}
}

// onLost is called by a holder (from a worker or the manager) when its
// lease is lost.
func (m *leaseManager) onLost(h *leaseHolder, reason string) {
	m.metrics.lost.Incr(1)
	m.log.Warnf("Partition %s: lease lost (%s); stopping its worker and dropping its in-flight pages", h.key.Partition, reason)
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// reap moves lost holders to stopping and forgets stopped workers.
func (m *leaseManager) reap() {
	for p, h := range m.held {
		if _, lost := h.current(); lost != "" {
			delete(m.held, p)
			if h.uncertain {
				h.uncertain = false
				h.release()
			}
			m.stopping[p] = h
		}
	}
	for p, h := range m.stopping {
		select {
		case <-h.done:
			delete(m.stopping, p)
		default:
		}
	}
	m.metrics.owned.Set(int64(len(m.held)))
}

// start runs the partition's worker under lease.
func (m *leaseManager) start(ctx context.Context, part string, lease store.Lease, at time.Time) {
	h := newLeaseHolder(store.Key{Scope: m.in.cfg.Scope, Partition: part}, lease, at, m.onLost)
	wctx, cancel := context.WithCancel(ctx)
	h.cancel = cancel
	p := newPartition(m.in, part)
	p.lease = h
	m.held[part] = h
	m.workers.Add(1)
	p.launch(wctx, func() {
		cancel()
		close(h.done)
		m.workers.Done()
	})
}

// renewAll renews every held lease, concurrently (one slow partition must
// not make the others expire).
func (m *leaseManager) renewAll(ctx context.Context) {
	var wg sync.WaitGroup
	for _, h := range m.held {
		wg.Go(func() { m.renew(ctx, h) })
	}
	wg.Wait()
	m.reap()
}

// renew renews one lease while no write of its worker is in flight. A
// renewal with an unknown outcome keeps the holder's semaphore, so the
// worker cannot write with a lease that may just have moved on; the next
// renewal resolves it (a repeat of an applied renewal succeeds).
func (m *leaseManager) renew(ctx context.Context, h *leaseHolder) {
	start := time.Now()
	tctx, cancel := context.WithTimeout(ctx, m.storeTimeout())
	defer cancel()
	if !h.uncertain {
		if err := h.acquire(tctx); err != nil {
			m.checkStale(h, start, "a write of its worker is still in flight")
			return
		}
	}
	lease, lost := h.current()
	if lost != "" {
		h.uncertain = false
		h.release()
		return
	}
	cp, err := m.in.store.RenewLease(tctx, h.key, lease)
	var fe *store.FenceError
	switch {
	case err == nil:
		h.setLease(cp.Lease)
		h.renewedAt = start
		h.uncertain = false
		h.release()
	case errors.As(err, &fe) || errors.Is(err, store.ErrNoCheckpoint) || errors.Is(err, store.ErrInvalid):
		h.uncertain = false
		h.release()
		h.lose(fmt.Sprintf("renewal of %s failed: %v", lease, err))
	default:
		if !h.uncertain {
			h.uncertain, h.uncertainAt = true, start
		}
		m.log.Debugf("Partition %s: renewal of lease %s has an unknown outcome: %v", h.key.Partition, lease, err)
		m.checkStale(h, start, err.Error())
	}
}

// checkStale gives the lease up when it was not renewed for a lease
// period: the others may consider it expired from now on.
func (m *leaseManager) checkStale(h *leaseHolder, now time.Time, why string) {
	if now.Sub(h.renewedAt) >= m.cfg.Period {
		h.lose(fmt.Sprintf("not renewed for %s (%s); the others may consider it expired", now.Sub(h.renewedAt).Round(time.Millisecond), why))
	}
}

// balanceRound reads every lease, decides, and acts; it returns the
// instant of the next possible expiry.
func (m *leaseManager) balanceRound(ctx context.Context, steal bool) time.Time {
	m.reap()
	// The membership may have changed (live membership): balance over the
	// current partitions, and hand off the leases of those that left.
	m.parts = slices.Clone(m.in.memberNames())
	for p, h := range m.held {
		if !slices.Contains(m.parts, p) {
			m.release(ctx, h, "the partition left the membership")
		}
	}
	tctx, cancel := context.WithTimeout(ctx, m.storeTimeout())
	cps, err := m.in.store.ListCheckpoints(tctx, m.in.cfg.Scope)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			m.log.Warnf("Leases: cannot read the leases of scope %s: %v", m.in.cfg.Scope, err)
		}
		return time.Time{}
	}
	if missing := m.missing(cps); len(missing) > 0 {
		m.create(ctx, missing)
		tctx, cancel := context.WithTimeout(ctx, m.storeTimeout())
		cps, err = m.in.store.ListCheckpoints(tctx, m.in.cfg.Scope)
		cancel()
		if err != nil {
			return time.Time{}
		}
	}
	now := time.Now()
	m.resolve(cps)
	held := make(map[string]store.Lease, len(m.held))
	for p, h := range m.held {
		held[p], _ = h.current()
	}
	busy := make(map[string]bool, len(m.stopping))
	for p := range m.stopping {
		busy[p] = true
	}
	plan := lease.Balance(lease.BalanceInput{
		Self: m.owner, Now: now, Period: m.cfg.Period,
		MaxOwned: m.cfg.MaxPartitions, MaxSteals: m.cfg.MaxSteals, Steal: steal,
		Held: held, Busy: busy, Leases: m.tracker.Observe(cps, m.parts, now),
	})
	if len(plan.Lost)+len(plan.Release)+len(plan.Claims) > 0 {
		m.log.Debugf("Leases: %s", plan)
	}
	for _, p := range plan.Lost {
		if h := m.held[p]; h != nil {
			stored := ""
			for _, cp := range cps {
				if cp.Partition == p {
					stored = cp.Lease.String()
				}
			}
			lease, _ := h.current()
			h.lose(fmt.Sprintf("the stored lease is %s, this instance held %s", stored, lease))
		}
	}
	for _, p := range plan.Release {
		if h := m.held[p]; h != nil {
			m.release(ctx, h, "above max_partitions_per_instance")
		}
	}
	for _, c := range plan.Claims {
		if ctx.Err() != nil {
			break
		}
		m.claim(ctx, c)
	}
	m.reap()
	return plan.NextExpiry
}

// resolve settles the renewals whose outcome was unknown by what was just
// read: the renewal's exact result stored means it was applied, the held
// lease still stored means it was not; either way the holder's worker may
// write again. Anything else is left to balance (the lease was lost).
func (m *leaseManager) resolve(cps []store.Checkpoint) {
	for _, cp := range cps {
		h := m.held[cp.Partition]
		if h == nil || !h.uncertain {
			continue
		}
		lease, _ := h.current()
		switch cp.Lease {
		case store.RenewedLease(lease):
			h.setLease(cp.Lease)
			h.renewedAt = h.uncertainAt
		case lease:
		default:
			continue
		}
		h.uncertain = false
		h.release()
	}
}

// missing lists the partitions without a checkpoint: the lease lives on
// the checkpoint, so it must exist before anyone can claim it.
func (m *leaseManager) missing(cps []store.Checkpoint) []string {
	have := make(map[string]bool, len(cps))
	for _, cp := range cps {
		have[cp.Partition] = true
	}
	var out []string
	for _, p := range m.parts {
		if !have[p] {
			out = append(out, p)
		}
	}
	return out
}

// create writes the first checkpoints of parts (losing a creation race is
// fine: the winner's checkpoint is the same start).
func (m *leaseManager) create(ctx context.Context, parts []string) {
	for _, p := range parts {
		tctx, cancel := context.WithTimeout(ctx, m.storeTimeout())
		_, err := m.in.store.CreateCheckpoint(tctx, store.Checkpoint{
			Key: store.Key{Scope: m.in.cfg.Scope, Partition: p}, Cursor: m.in.cfg.StartCursor, Generation: 1, Epoch: m.in.epoch(),
		})
		cancel()
		if err != nil && !errors.Is(err, store.ErrFenced) {
			m.log.Warnf("Leases: cannot create the checkpoint of partition %s: %v", p, err)
		}
	}
}

// claim performs one claim and starts the worker when it wins.
func (m *leaseManager) claim(ctx context.Context, c lease.Claim) {
	start := time.Now()
	tctx, cancel := context.WithTimeout(ctx, m.storeTimeout())
	defer cancel()
	cp, err := m.in.store.ClaimLease(tctx, store.Key{Scope: m.in.cfg.Scope, Partition: c.Partition}, c.Expect, m.owner)
	if err != nil {
		if errors.Is(err, store.ErrFenced) {
			m.log.Debugf("Partition %s: %s lost the race: %v", c.Partition, c, err)
		} else if ctx.Err() == nil {
			// Unknown outcome: if it was applied, the next round finds the
			// lease ours in the store and claims it again.
			m.log.Warnf("Partition %s: %s failed: %v", c.Partition, c, err)
		}
		return
	}
	switch c.Kind {
	case lease.ClaimSteal:
		m.metrics.steals.Incr(1, "balance")
	case lease.ClaimExpired:
		m.metrics.steals.Incr(1, "expired")
	}
	m.log.Infof("Partition %s: lease %s claimed (%s, was %s)", c.Partition, cp.Lease, c.Kind, c.Expect)
	m.start(ctx, c.Partition, cp.Lease, start)
}

// release stops the worker and hands the lease off with one conditional
// write (after any write of the worker still in flight).
func (m *leaseManager) release(ctx context.Context, h *leaseHolder, why string) {
	h.stop("released: " + why)
	tctx, cancel := context.WithTimeout(ctx, m.storeTimeout())
	defer cancel()
	if !h.uncertain {
		if err := h.acquire(tctx); err != nil {
			return
		}
	}
	h.uncertain = false
	defer h.release()
	// Read the lease under sem: no renewal can move it any more.
	lease, _ := h.current()
	_, err := m.in.store.ReleaseLease(tctx, h.key, lease)
	var fe *store.FenceError
	if errors.As(err, &fe) && fe.Winner != nil && fe.Winner.Lease.Owner == lease.Owner && fe.Winner.Lease.Counter > lease.Counter {
		// A renewal whose outcome was unknown did land: the stored lease is
		// still this instance's (no other instance writes its owner name),
		// one counter on. Release that one.
		lease = fe.Winner.Lease
		_, err = m.in.store.ReleaseLease(tctx, h.key, lease)
	}
	if err != nil {
		m.log.Warnf("Partition %s: releasing lease %s failed (it expires after the lease period instead): %v", h.key.Partition, lease, err)
		return
	}
	m.log.Infof("Partition %s: lease %s released (%s)", h.key.Partition, lease, why)
}

// shutdown stops every worker, then hands every held lease off.
func (m *leaseManager) shutdown() {
	held := make([]*leaseHolder, 0, len(m.held))
	for _, h := range m.held {
		h.cancel()
		held = append(held, h)
	}
	m.workers.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), max(m.storeTimeout(), 2*time.Second))
	defer cancel()
	var wg sync.WaitGroup
	for _, h := range held {
		if _, lost := h.current(); lost == "" {
			wg.Go(func() { m.release(ctx, h, "shutdown") })
		}
	}
	wg.Wait()
	clear(m.held)
	m.metrics.owned.Set(0)
}

// leaseMeta sets the fencing token of the worker that emitted m.
func leaseMeta(p *partition, m *service.Message) {
	if p.lease == nil {
		return
	}
	l, _ := p.lease.current()
	m.MetaSetMut(MetaLeaseOwner, l.Owner)
	m.MetaSetMut(MetaLeaseCounter, strconv.FormatUint(l.Counter, 10))
}
