// Package leasing shares a scope's partitions between the instances of
// one pipeline through leases: it drives the pure lease.Machine against
// the store and runs the input's worker of each partition it holds
// (docs/design.md#leases-and-fencing; the heartbeat and lease state
// diagrams are in internal/store/heartbeat.go and lease.go).
//
// Each instance incarnation (owner "<instance_id>#<incarnation>") keeps ONE
// heartbeat record in the scope and renews it every renew_interval: one
// conditional write, however many partitions it holds. A partition's lease
// on its checkpoint names the holder's owner and a counter that moves only
// on claim, takeover and release, so promotion fencing stays one condition
// on the checkpoint item and idle upkeep is O(instances) writes.
//
// Roles:
//   - internal/lease (pure): lease.Machine decides, from the heartbeats and
//     checkpoint leases read and from the results of the writes, at this
//     instance's own clock readings, which instances are dead, what to
//     take over, claim and release, and which workers to start and stop.
//   - Holder: one held lease and the worker it runs; a release waits
//     for the worker's conditional write in flight (fenced).
//   - the worker's chain machine (internal/chain) is given the lease as an
//     input (chain.Config.Leased, Lease; chain.LeaseLost when the manager
//     loses it): it states the lease in every Promote and SetParked, and
//     stops (chain.LeaseGone, which the worker reports to its holder) when
//     a load or a write finds another lease.
//   - Manager: drives the machine: one goroutine renews the heartbeat,
//     another observes, takes over, claims and releases (bounded
//     concurrency), and hands the leases off on shutdown.
//
// Expiry never compares the clocks of two hosts: an instance treats another
// as dead when its heartbeat counter has not changed for lease_period
// measured on its own monotonic clock since it first saw that counter. It
// then takes the heartbeat over (one write conditional on that counter),
// so the zombie's next renewal fails and it stops every worker at once, and
// claims the dead instance's partitions (one conditional write each). A
// holder also stops every worker when it has not renewed for lease_period
// since the start of its last successful renewal, before anyone else can
// have seen its heartbeat expire, and rejoins as a new incarnation. Safety
// never depends on time: every write of progress is conditional on the
// lease, and the lease counter strictly increases on every claim, takeover
// and release.
package leasing

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
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

// Config configures scale-out. The zero value is not valid; see
// DefaultConfig.
type Config struct {
	// InstanceID names this instance in leases, logs and metadata.
	// Default (""): a random id per process. The stored lease owner is
	// "<InstanceID>#<incarnation>", with a random incarnation per process,
	// so that a restarted or paused copy can never pass for the current one.
	InstanceID string
	// Period is how long an instance whose heartbeat counter does not
	// change is still considered alive by the others. Default 10s.
	Period time.Duration
	// RenewInterval is how often an instance renews its heartbeat (one
	// write) and reads the others' (one query); less than Period/2.
	// Default 3s.
	RenewInterval time.Duration
	// BalanceInterval is how often an instance above its fair share
	// releases its excess to instances below theirs. Default 5s.
	BalanceInterval time.Duration
	// MaxPartitions caps the partitions one instance holds. Default 0:
	// unlimited.
	MaxPartitions int
	// MaxSteals caps the leases an instance above its share releases per
	// balance round (field max_steals_per_balance; the name is kept for
	// compatibility). Default 256; 0 never rebalances.
	MaxSteals int
}

// DefaultConfig returns the defaults of the `leases` fields.
func DefaultConfig() Config {
	return Config{Period: 10 * time.Second, RenewInterval: 3 * time.Second, BalanceInterval: 5 * time.Second, MaxSteals: 256}
}

func (c Config) Validate() error {
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

// Fields are the fields of the `leases` object.
func Fields() []*service.ConfigField {
	d := DefaultConfig()
	return []*service.ConfigField{
		service.NewBoolField(lsFieldEnabled).
			Description("Share the partitions through leases. It defaults to true once a `leases` object is written, so `leases: {}` enables leases with every default; an absent `leases` object means this instance reads every partition alone.").
			Default(true).Example(true),
		service.NewStringField(lsFieldInstanceID).
			Description("Names this instance in leases, logs and the `tidemark_lease_owner` metadata. Empty: a random id per process. The stored owner is `<instance_id>#<incarnation>` with a random incarnation per process start, so a restarted or paused copy can never pass for the current one.").
			Default("").Example("connect-0"),
		service.NewDurationField(lsFieldPeriod).
			Description("An instance whose heartbeat counter has not changed for this long, measured on each other instance's own clock since it first saw that counter, is dead: another instance takes its heartbeat over (so its next renewal fails and it stops every worker) and claims its partitions. Every instance reads the heartbeats every `renew_interval`, so the partitions of a dead instance are taken over about `lease_period` plus one `renew_interval` after its last renewal. A holder that could not renew for `lease_period` stops its workers itself and rejoins as a new incarnation.").
			Default(d.Period.String()).Example("30s"),
		service.NewDurationField(lsFieldRenewInterval).
			Description("How often an instance renews its heartbeat (one conditional write per instance, however many partitions it holds; partition leases are not renewed) and reads every heartbeat of the scope (one query). Checkpoints are read only when partitions are free, orphaned or to rebalance. Must be less than half of `lease_period`.").
			Default(d.RenewInterval.String()).Example("5s"),
		service.NewDurationField(lsFieldBalanceInterval).
			Description("How often an instance evens out the load. Its fair share is the partitions divided by the live instances (live heartbeats), the remainder going one each to the first instances in owner order; an instance above its share releases its excess (up to what the instances below their shares can take) and they claim it. (Unowned and orphaned partitions are claimed up to the share every `renew_interval`.)").
			Default(d.BalanceInterval.String()).Example("10s"),
		service.NewIntField(lsFieldMaxPartitions).
			Description("The most partitions this instance holds at once; 0 means no limit.").
			Default(d.MaxPartitions).Example(16),
		service.NewIntField(lsFieldMaxSteals).
			Description("The most leases an instance above its fair share hands off in one balance round (a hand-off stops this instance's worker for the partition: in-flight pages are dropped and their events delivered again by the next holder); 0 never hands off to rebalance. The name is kept from when rebalancing stole leases one at a time.").
			Default(d.MaxSteals).Example(2).Advanced(),
	}
}

// ObjectDefault is the value of an absent `leases` object: leases off.
func ObjectDefault() map[string]any { return map[string]any{lsFieldEnabled: false} }

// ConfigFromParsed reads the `leases` object (conf is its namespace);
// nil when leases are off.
func ConfigFromParsed(conf *service.ParsedConfig) (*Config, error) {
	on, err := conf.FieldBool(lsFieldEnabled)
	if err != nil || !on {
		return nil, err
	}
	c, err := readConfig(conf)
	return &c, err
}

func readConfig(conf *service.ParsedConfig) (Config, error) {
	var c Config
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

// Holder is one lease this instance holds and the worker running the
// partition under it.
type Holder struct {
	key store.Key
	// sem serialises the worker's store calls that carry or check the
	// lease (fenced) with the release of the lease (a buffered channel of
	// one, so acquiring can time out or be cancelled).
	sem chan struct{}

	mu    sync.Mutex
	lease store.Lease
	lost  string // why the lease was lost; "" while held
	// onLost is called once, outside mu, when the lease is lost.
	onLost func(h *Holder, reason string)

	cancel context.CancelFunc
	done   chan struct{} // closed when the worker returned
}

func newHolder(k store.Key, lease store.Lease, onLost func(*Holder, string)) *Holder {
	return &Holder{key: k, sem: make(chan struct{}, 1), lease: lease, onLost: onLost, cancel: func() {}, done: make(chan struct{})}
}

func (h *Holder) acquire(ctx context.Context) error {
	select {
	case h.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (h *Holder) release() { <-h.sem }

// current returns the held lease and, once lost, why.
func (h *Holder) Current() (store.Lease, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lease, h.lost
}

// lose marks the lease lost (once), stops the worker and tells the
// manager.
func (h *Holder) Lose(reason string) {
	if h.stop(reason) && h.onLost != nil {
		h.onLost(h, reason)
	}
}

// stop ends the holding (once) and stops the worker; it reports whether
// this call ended it. From then on every write of the worker is refused.
func (h *Holder) stop(reason string) bool {
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

// fenced performs one store call of the worker that carries or checks
// the lease (Load, WaitUnparked, Promote, Resolve, Park, Reincarnate)
// while no release of the lease runs, and reports false without calling
// when the lease is already lost (the worker then steps the machine with
// chain.LeaseLost).
//
// This is the guarantee the fencing needs beside the store's condition: a
// held partition lease moves only on claim, takeover and release (the
// heartbeat, not the partition lease, is renewed), so the lease the
// machine states in its writes is the one it was given at its start; and a
// release first marks the holding lost (stop) and then takes sem, so it
// waits for the write in flight and every later write is never sent. A
// write therefore either completes before the lease is handed off or does
// not happen; one that races a takeover by another instance is refused by
// the store (its lease condition) and the machine stops.
func (h *Holder) Fenced(ctx context.Context, call func()) (bool, error) {
	if err := h.acquire(ctx); err != nil {
		return false, err
	}
	defer h.release()
	if _, lost := h.Current(); lost != "" {
		return false, nil
	}
	call()
	return true, nil
}

// ---------------------------------------------------------------------------
// The manager.

type metrics struct {
	owned  *service.MetricGauge
	steals *service.MetricCounter
	lost   *service.MetricCounter
}

func newMetrics(m *service.Metrics) *metrics {
	ms := &metrics{
		owned:  m.NewGauge("tidemark_owned_partitions"),
		steals: m.NewCounter("tidemark_lease_steals", "reason"),
		lost:   m.NewCounter("tidemark_leases_lost"),
	}
	// The series exist from the start (at 0), so an alert on their
	// increase sees the first lease lost (deploy/prometheus).
	ms.owned.Set(0)
	ms.steals.Incr(0, "expired")
	ms.lost.Incr(0)
	return ms
}

// InFlight bounds the claims and releases in flight at once.
const InFlight = 16

// Manager runs this instance's share of the partitions. It drives the
// pure lease.Machine of the current incarnation: one goroutine renews the
// heartbeat every renew_interval (never behind a balance round), another
// reads the heartbeats every renew_interval, takes dead instances over,
// reads the checkpoint leases only when the machine asks, and claims and
// releases with bounded concurrency.
type Manager struct {
	host    Host
	cfg     Config
	id      string // instance id
	log     *service.Logger
	metrics *metrics

	mu       sync.Mutex // guards everything below; never held across I/O
	m        *lease.Machine
	held     map[string]*Holder
	stopping map[string]*Holder
	workers  sync.WaitGroup

	wake chan struct{} // a holder was lost
}

func incarnation() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Host is what the manager needs of the input whose partitions it shares.
type Host struct {
	// Scope is the scope whose partitions are shared.
	Scope string
	// StartCursor is the cursor of a partition's first checkpoint, which
	// the manager creates when it is missing (the lease lives on it).
	StartCursor []byte
	// Store holds the heartbeats and the checkpoints with their leases.
	Store Store
	// Members returns the partitions of the current membership.
	Members func() []string
	// Epoch returns the current membership epoch.
	Epoch func() uint64
	// Launch runs partition's worker under h until ctx ends or the worker
	// stops; it calls done once the worker returned.
	Launch func(ctx context.Context, partition string, h *Holder, done func())
}

// Store is the part of the store the manager uses: the heartbeats, the
// leases on the checkpoints, and the creation and listing of checkpoints.
type Store interface {
	store.LeaseStore
	CreateCheckpoint(ctx context.Context, c store.Checkpoint) (store.Checkpoint, error)
	ListCheckpoints(ctx context.Context, scope string) ([]store.Checkpoint, error)
}

// New returns the manager of host's partitions under cfg (cfg valid); Run
// runs it.
func New(host Host, cfg Config, res *service.Resources) *Manager {
	id := cfg.InstanceID
	if id == "" {
		id = incarnation()
	}
	m := &Manager{
		host: host, cfg: cfg, id: id,
		log:      res.Logger().With("lease_instance", id),
		metrics:  newMetrics(res.Metrics()),
		held:     map[string]*Holder{},
		stopping: map[string]*Holder{},
		wake:     make(chan struct{}, 1),
	}
	m.m = m.newMachine()
	return m
}

// newMachine starts a new incarnation: a new owner name, holding nothing.
func (m *Manager) newMachine() *lease.Machine {
	return lease.NewMachine(lease.Config{
		Self: m.id + "#" + incarnation(), Period: m.cfg.Period, RenewInterval: m.cfg.RenewInterval,
		MaxOwned: m.cfg.MaxPartitions, MaxMoves: m.cfg.MaxSteals,
	})
}

// owner is the current incarnation's owner name.
func (m *Manager) Owner() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.m.Self()
}

// storeTimeout bounds one lease write or list.
func (m *Manager) storeTimeout() time.Duration { return m.cfg.RenewInterval }

// renewTimeout bounds one heartbeat renewal: lease_period minus one renew
// interval, longer than the other lease calls. A renewal counts from its
// start, so on a store that answers slowly (saturated, throttling) a late
// answer still keeps the incarnation alive, where giving up after one
// renew interval lost every lease once three renewals in a row took
// longer than that (make bench-scale at 5,000 partitions: "heartbeat not
// renewed for 12s", 901 workers stopped). Safety does not depend on it:
// the incarnation stops itself a lease period after the start of its last
// successful renewal, whatever is in flight.
func (m *Manager) renewTimeout() time.Duration {
	return max(m.cfg.Period-m.cfg.RenewInterval, m.storeTimeout())
}

// run manages the leases until ctx ends, then stops every worker, hands
// every held lease off and removes the heartbeat.
func (m *Manager) Run(ctx context.Context) {
	m.log.Infof("Leases: instance %s shares %d partitions of scope %s (lease period %s, heartbeat every %s, balance every %s)",
		m.Owner(), len(m.host.Members()), m.host.Scope, m.cfg.Period, m.cfg.RenewInterval, m.cfg.BalanceInterval)
	var renewer sync.WaitGroup
	renewer.Go(func() { m.renewLoop(ctx) })
	observe := time.NewTicker(m.cfg.RenewInterval)
	defer observe.Stop()
	bal := time.NewTicker(m.cfg.BalanceInterval)
	defer bal.Stop()
	// Between ticks, a timer wakes the loop at the instant the next
	// heartbeat would expire (it never fires while every counter moves).
	expiry := time.NewTimer(time.Hour)
	defer expiry.Stop()
	arm := func(at time.Time) {
		expiry.Stop()
		if !at.IsZero() {
			expiry.Reset(max(time.Until(at), 0))
		}
	}
	// A balance tick marks the next observation a rebalancing one: the
	// heartbeats are read once per renew interval while every instance is
	// alive.
	rebalance := false
	for {
		select {
		case <-ctx.Done():
			renewer.Wait()
			m.shutdown()
			return
		case <-observe.C:
			arm(m.round(ctx, rebalance))
			rebalance = false
		case <-expiry.C:
			arm(m.round(ctx, false))
		case <-bal.C:
			rebalance = true
		case <-m.wake:
			m.mu.Lock()
			m.reap()
			m.mu.Unlock()
		}
	}
}

// holds is the pipeline's lease check (feed.LeaseHolder): whether this
// instance still holds part under (owner, counter) at now, its heartbeat
// fresh. A message emitted before a freeze longer than the lease and
// processed after it gets no frontier: the partition's new holder may
// already have attached a lower one from its own view, and a frontier
// attached to a partition's messages must not go back (docs/design.md,
// "Leases and fencing").
func (m *Manager) Holds(part, owner string, counter uint64, now time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.held[part]
	if h == nil || !m.m.Fresh(now) {
		return false
	}
	l, lost := h.Current()
	return lost == "" && l.Owner == owner && l.Counter == counter
}

// renewLoop renews the heartbeat at once and then every renew_interval,
// on its own goroutine: a balance round never delays it.
func (m *Manager) renewLoop(ctx context.Context) {
	t := time.NewTicker(m.cfg.RenewInterval)
	defer t.Stop()
	for {
		m.renew(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// renew performs one heartbeat renewal (one conditional write).
func (m *Manager) renew(ctx context.Context) {
	m.mu.Lock()
	mach := m.m
	hb, held, ok := mach.Heartbeat(m.host.Scope)
	m.mu.Unlock()
	if !ok {
		return
	}
	start := time.Now()
	tctx, cancel := context.WithTimeout(ctx, m.renewTimeout())
	got, err := m.host.Store.RenewHeartbeat(tctx, hb, held)
	cancel()
	if err != nil && ctx.Err() != nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if mach != m.m {
		return
	}
	if err != nil && !errors.Is(err, store.ErrFenced) {
		m.log.Debugf("Leases: heartbeat renewal of %s has an unknown outcome: %v", hb.Owner, err)
	}
	if why := mach.Renewed(start, got, err); why != "" {
		m.loseAll(why)
	}
}

// loseAll stops every worker of the incarnation that lost its heartbeat
// (under mu). The next round starts a new incarnation.
func (m *Manager) loseAll(why string) {
	m.log.Warnf("Leases: incarnation %s stops all %d workers: %s", m.m.Self(), len(m.held), why)
	for _, h := range m.held {
		h.Lose(why)
	}
	m.reap()
}

// onLost is called by a holder when its lease is lost (it must not take
// mu: loseAll calls it under mu).
func (m *Manager) onLost(h *Holder, reason string) {
	m.metrics.lost.Incr(1)
	m.log.Warnf("Partition %s: lease lost (%s); stopping its worker and dropping its in-flight pages", h.key.Partition, reason)
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// reap moves lost holders to stopping and forgets stopped workers (under
// mu).
func (m *Manager) reap() {
	for p, h := range m.held {
		if _, lost := h.Current(); lost != "" {
			delete(m.held, p)
			m.m.Lose(p)
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

// start runs the partition's worker under lease (under mu).
func (m *Manager) start(ctx context.Context, part string, l store.Lease) {
	h := newHolder(store.Key{Scope: m.host.Scope, Partition: part}, l, m.onLost)
	wctx, cancel := context.WithCancel(ctx)
	h.cancel = cancel
	m.held[part] = h
	m.metrics.owned.Set(int64(len(m.held)))
	m.workers.Add(1)
	m.host.Launch(wctx, part, h, func() {
		cancel()
		close(h.done)
		m.workers.Done()
	})
}

// round is one observation (every renew_interval; rebalance on balance
// ticks): read the heartbeats, take dead instances over, read the
// checkpoint leases when the machine asks, decide, act. It returns the
// instant the next live heartbeat would expire (zero: none).
func (m *Manager) round(ctx context.Context, rebalance bool) time.Time {
	m.mu.Lock()
	m.reap()
	if why := m.m.Stale(time.Now()); why != "" {
		m.loseAll(why)
	}
	if why := m.m.Gone(); why != "" {
		old := m.m.Self()
		m.m = m.newMachine()
		m.log.Infof("Leases: incarnation %s is gone (%s); rejoining as %s", old, why, m.m.Self())
	}
	mach := m.m
	m.mu.Unlock()

	parts := slices.Clone(m.host.Members())
	scope := m.host.Scope
	tctx, cancel := context.WithTimeout(ctx, m.storeTimeout())
	hbs, err := m.host.Store.ListHeartbeats(tctx, scope)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			m.log.Warnf("Leases: cannot read the heartbeats of scope %s: %v", scope, err)
		}
		return time.Time{}
	}
	m.mu.Lock()
	r := mach.Observe(time.Now(), hbs, parts)
	// Missing checkpoints this round creates: about twice what this
	// instance still lacks of its share (the others create theirs), and a
	// few more for the stragglers nobody's share picked first.
	createBudget := max(2*(r.Share-mach.Owned()), InFlight)
	m.mu.Unlock()
	for _, seen := range r.TakeOvers {
		tctx, cancel := context.WithTimeout(ctx, m.storeTimeout())
		_, err := m.host.Store.TakeOverHeartbeat(tctx, seen, mach.Self())
		cancel()
		m.mu.Lock()
		mach.TookOver(seen, err)
		m.mu.Unlock()
		if err == nil {
			m.log.Infof("Leases: instance %s seen dead (heartbeat counter %d unchanged for %s); heartbeat taken over, its %d partitions are claimable", seen.Owner, seen.Counter, m.cfg.Period, seen.Held)
		} else {
			m.log.Debugf("Leases: takeover of %s lost: %v", seen.Owner, err)
		}
		r.ReadLeases = true
	}
	var cps []store.Checkpoint
	if r.ReadLeases {
		if cps, err = m.readLeases(ctx, mach.Self(), parts, createBudget); err != nil {
			if ctx.Err() == nil {
				m.log.Warnf("Leases: cannot read the leases of scope %s: %v", scope, err)
			}
			return r.NextExpiry
		}
	}

	m.mu.Lock()
	busy := make(map[string]bool, len(m.stopping))
	for p := range m.stopping {
		busy[p] = true
	}
	d := mach.Decide(lease.DecideInput{Now: time.Now(), Parts: parts, Leases: cps, Busy: busy, Rebalance: rebalance})
	if len(d.Lost)+len(d.Release)+len(d.Claims)+len(d.DeleteHeartbeats) > 0 {
		m.log.Debugf("Leases: %s", d)
	}
	stored := map[string]store.Lease{}
	for _, cp := range cps {
		stored[cp.Partition] = cp.Lease
	}
	for _, p := range d.Lost {
		if h := m.held[p]; h != nil {
			l, _ := h.Current()
			h.Lose(fmt.Sprintf("the stored lease is %s, this instance held %s", stored[p], l))
		}
	}
	var releases []*Holder
	for _, p := range d.Release {
		if h := m.held[p]; h != nil {
			releases = append(releases, h)
		}
	}
	m.mu.Unlock()

	member := make(map[string]bool, len(parts))
	for _, p := range parts {
		member[p] = true
	}
	sem := make(chan struct{}, InFlight)
	var wg sync.WaitGroup
	for _, h := range releases {
		why := "above this instance's share"
		if !member[h.key.Partition] {
			why = "the partition left the membership"
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			err := m.release(ctx, h, why)
			m.mu.Lock()
			mach.Released(h.key.Partition, err)
			if m.held[h.key.Partition] == h {
				delete(m.held, h.key.Partition)
				m.stopping[h.key.Partition] = h
			}
			m.metrics.owned.Set(int64(len(m.held)))
			m.mu.Unlock()
		})
	}
	for _, c := range d.Claims {
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			m.claim(ctx, mach, c)
		})
	}
	wg.Wait()
	for _, hb := range d.DeleteHeartbeats {
		tctx, cancel := context.WithTimeout(ctx, m.storeTimeout())
		if err := m.host.Store.DeleteHeartbeat(tctx, hb); err == nil {
			m.log.Debugf("Leases: heartbeat of %s removed (taken over, holds no partition)", hb.Owner)
		}
		cancel()
	}
	m.mu.Lock()
	m.reap()
	m.mu.Unlock()
	return r.NextExpiry
}

// readLeases reads every checkpoint of the scope, creating up to budget
// missing ones first (the lease lives on the checkpoint; a partition
// without one cannot be claimed): those first in this incarnation's
// rendezvous order, the ones its claims pick first. Instances started
// together on a new scope create about their own shares instead of every
// instance creating every checkpoint before its first claim; a partition
// left out is created by a later round of an instance below its share
// (which reads the leases every round until it reaches it).
func (m *Manager) readLeases(ctx context.Context, self string, parts []string, budget int) ([]store.Checkpoint, error) {
	tctx, cancel := context.WithTimeout(ctx, m.storeTimeout())
	cps, err := m.host.Store.ListCheckpoints(tctx, m.host.Scope)
	cancel()
	if err != nil {
		return nil, err
	}
	if missing := missingCheckpoints(cps, parts); len(missing) > 0 {
		lease.Rendezvous(self, missing)
		m.create(ctx, self, missing[:min(len(missing), budget)])
		tctx, cancel := context.WithTimeout(ctx, m.storeTimeout())
		cps, err = m.host.Store.ListCheckpoints(tctx, m.host.Scope)
		cancel()
	}
	return cps, err
}

// missingCheckpoints lists the partitions without a checkpoint.
func missingCheckpoints(cps []store.Checkpoint, parts []string) []string {
	have := make(map[string]bool, len(cps))
	for _, cp := range cps {
		have[cp.Partition] = true
	}
	var out []string
	for _, p := range parts {
		if !have[p] {
			out = append(out, p)
		}
	}
	return out
}

// create writes the first checkpoints of parts (losing a creation race is
// fine: the winner's checkpoint is the same start), InFlight at a
// time, in this incarnation's rendezvous order: instances that start
// together on a new scope create different partitions first instead of
// all racing for the same item, one at a time (at 10,000 partitions, 3
// instances made 30,000 sequential writes, two thirds refused, before the
// first claim).
func (m *Manager) create(ctx context.Context, self string, parts []string) {
	parts = slices.Clone(parts)
	lease.Rendezvous(self, parts)
	sem := make(chan struct{}, InFlight)
	var wg sync.WaitGroup
	for _, p := range parts {
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			tctx, cancel := context.WithTimeout(ctx, m.storeTimeout())
			defer cancel()
			_, err := m.host.Store.CreateCheckpoint(tctx, store.Checkpoint{
				Key: store.Key{Scope: m.host.Scope, Partition: p}, Cursor: m.host.StartCursor, Generation: 1, Epoch: m.host.Epoch(),
			})
			if err != nil && !errors.Is(err, store.ErrFenced) && ctx.Err() == nil {
				m.log.Warnf("Leases: cannot create the checkpoint of partition %s: %v", p, err)
			}
		})
	}
	wg.Wait()
}

// claim performs one claim (one conditional write) and starts the worker
// when it wins; the owned gauge moves at once.
func (m *Manager) claim(ctx context.Context, mach *lease.Machine, c lease.Claim) {
	tctx, cancel := context.WithTimeout(ctx, m.storeTimeout())
	defer cancel()
	cp, err := m.host.Store.ClaimLease(tctx, store.Key{Scope: m.host.Scope, Partition: c.Partition}, c.Expect, mach.Self())
	m.mu.Lock()
	defer m.mu.Unlock()
	start := mach.Claimed(c.Partition, cp.Lease, err)
	if err != nil {
		if errors.Is(err, store.ErrFenced) {
			m.log.Debugf("Partition %s: %s lost the race: %v", c.Partition, c, err)
		} else if ctx.Err() == nil {
			// Unknown outcome: if it was applied, a later read finds the
			// lease ours in the store and claims it again.
			m.log.Warnf("Partition %s: %s failed: %v", c.Partition, c, err)
		}
		return
	}
	if !start || mach != m.m || ctx.Err() != nil {
		return // the incarnation is gone: the lease is an orphan for the others
	}
	if c.Kind == lease.ClaimExpired {
		m.metrics.steals.Incr(1, "expired")
	}
	m.log.Infof("Partition %s: lease %s claimed (%s, was %s)", c.Partition, cp.Lease, c.Kind, c.Expect)
	m.start(ctx, c.Partition, cp.Lease)
}

// release stops the worker and hands the lease off with one conditional
// write (after any write of the worker still in flight).
func (m *Manager) release(ctx context.Context, h *Holder, why string) error {
	first := h.stop("released: " + why)
	tctx, cancel := context.WithTimeout(ctx, m.storeTimeout())
	defer cancel()
	if err := h.acquire(tctx); err != nil {
		return err
	}
	defer h.release()
	l, _ := h.Current()
	if _, err := m.host.Store.ReleaseLease(tctx, h.key, l); err != nil {
		var fe *store.FenceError
		if errors.As(err, &fe) && fe.Winner != nil && fe.Winner.Lease != l && first {
			// Taken over before the hand-off: the lease was lost, not
			// released (counted and logged as such, once: first says no
			// loss was reported for this holding; the worker is stopped
			// already).
			m.onLost(h, fmt.Sprintf("release fenced: the lease is now %s, this instance held %s", fe.Winner.Lease, l))
			return err
		}
		m.log.Warnf("Partition %s: releasing lease %s failed (this incarnation claims it back, or the others take it once it is gone): %v", h.key.Partition, l, err)
		return err
	}
	m.log.Infof("Partition %s: lease %s released (%s)", h.key.Partition, l, why)
	return nil
}

// shutdown stops every worker, hands every held lease off (bounded
// concurrency), then removes the heartbeat.
func (m *Manager) shutdown() {
	m.mu.Lock()
	held := make([]*Holder, 0, len(m.held))
	for _, h := range m.held {
		h.cancel()
		held = append(held, h)
	}
	mach := m.m
	m.mu.Unlock()
	m.workers.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), max(m.storeTimeout(), 2*time.Second))
	defer cancel()
	sem := make(chan struct{}, InFlight)
	var wg sync.WaitGroup
	for _, h := range held {
		if _, lost := h.Current(); lost == "" {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				_ = m.release(ctx, h, "shutdown")
			})
		}
	}
	wg.Wait()
	m.mu.Lock()
	hb, _, ok := mach.Heartbeat(m.host.Scope)
	clear(m.held)
	m.metrics.owned.Set(0)
	m.mu.Unlock()
	if ok && hb.Counter > 0 {
		if err := m.host.Store.DeleteHeartbeat(ctx, hb); err != nil {
			m.log.Debugf("Leases: removing heartbeat %s: %v", hb.Owner, err)
		}
	}
}
