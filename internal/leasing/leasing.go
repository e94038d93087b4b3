// Package leasing shares a scope's partitions between the instances of
// one pipeline through leases: it drives the pure instance machine
// (internal/instance, which owns the incarnation's lease.Machine) against
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
//   - internal/instance (pure): the instance machine owns the timers
//     (renewal, observation, balance, the next heartbeat expiry), the
//     incarnations and the workers' start and stop; its lease.Machine
//     (internal/lease) decides, from the heartbeats and checkpoint leases
//     read and from the results of the writes, at this instance's own
//     clock readings, which instances are dead, what to take over, claim
//     and release.
//   - Holder: one held lease and the worker it runs; a release waits
//     for the worker's conditional write in flight (fenced).
//   - the worker's chain machine (internal/chain) is given the lease as an
//     input (chain.Config.Leased, Lease; chain.LeaseLost when the manager
//     loses it): it states the lease in every Promote and SetParked, and
//     stops (chain.LeaseGone, which the worker reports to its holder) when
//     a load or a write finds another lease.
//   - Manager: the driver: one goroutine steps the machine and performs
//     its actions; each store call runs on its own goroutine with its
//     deadline and posts its answer back (at most InFlight claims and
//     releases at once); on shutdown the machine stops every worker, hands
//     the leases off and removes the heartbeat.
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
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/tidemark/tidemark/internal/instance"
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

// Manager runs this instance's share of the partitions: a thin driver of
// the pure instance machine (internal/instance, which owns the current
// incarnation's lease.Machine and decides every renewal, observation,
// takeover, checkpoint read, claim, release, worker start and stop). One
// goroutine (Run) steps the machine and performs its actions; each store
// call runs on its own goroutine (never holding up the loop: a renewal is
// never behind a balance round), with its deadline, and posts its answer
// back; at most InFlight claims and releases are sent at once.
type Manager struct {
	host    Host
	cfg     Config
	id      string // instance id
	log     *service.Logger
	metrics *metrics

	// Owned by Run's goroutine.
	im      *instance.Machine
	holders map[string]*Holder // running workers, by partition
	// holdersChanged: holders changed since the last snapshot.
	holdersChanged bool
	stopping       map[string]*Holder // workers told to stop, not yet returned
	queue          []queuedOp         // claims and releases not sent yet
	inFlight       int
	base           context.Context // the context of store calls (a shutdown one at the end)

	events  chan event    // answers and worker news, to Run
	done    chan struct{} // closed once Run stops reading events
	io      sync.WaitGroup
	workers sync.WaitGroup

	// snap is what Holds reads from the pipeline's goroutines.
	snap atomic.Pointer[holdSnapshot]
	self atomic.Pointer[string]
}

// event is an input for the machine; op marks the answer of a claim or a
// release (one fewer in flight).
type event struct {
	in instance.Input
	op bool
}

type queuedOp struct {
	owner string
	run   func(base context.Context)
}

// holdSnapshot is the holders and the heartbeat's freshness after the
// machine's last step.
type holdSnapshot struct {
	held       map[string]*Holder
	freshUntil time.Time
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
	// Membership returns the membership the instance starts with (the
	// machine then adopts newer epochs: Post(instance.Adopt{...}), and
	// tells them with the EpochChanged the host performs).
	Membership func() instance.Membership
	// Epoch returns the current membership epoch (a new checkpoint's).
	Epoch func() uint64
	// Launch runs partition's worker under h until ctx ends or the worker
	// stops; it calls done once the worker returned.
	Launch func(ctx context.Context, partition string, h *Holder, done func())
	// Instance is the rest of the instance machine's configuration: the
	// publication's pace, the membership reads and discovery, the lineage
	// gate, pruning (the manager sets Scope and Leases).
	Instance instance.Config
	// Perform performs the machine's actions that are not the leases' nor
	// the workers' (Publish, ReadMembership, Discover, ReadParents,
	// LineageWait, Prune, EpochChanged), in the order returned; it must
	// not block: the host runs each call on its own goroutine under its
	// deadline and answers with Post. The host reports its durable
	// checkpoints (instance.Promoted) and memberships read (Adopt) with
	// Post too.
	Perform func(instance.Action)
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
		holders:  map[string]*Holder{},
		stopping: map[string]*Holder{},
		events:   make(chan event, 4*InFlight),
		done:     make(chan struct{}),
		im:       instance.New(instanceConfig(host, cfg)),
	}
	self := m.newOwner()
	m.self.Store(&self)
	m.snap.Store(&holdSnapshot{})
	return m
}

// instanceConfig is the instance machine's configuration of host's
// partitions under cfg.
func instanceConfig(host Host, cfg Config) instance.Config {
	c := host.Instance
	c.Scope = host.Scope
	c.Leases = &instance.LeaseConfig{
		Period: cfg.Period, RenewInterval: cfg.RenewInterval, BalanceInterval: cfg.BalanceInterval,
		MaxOwned: cfg.MaxPartitions, MaxMoves: cfg.MaxSteals,
	}
	return c
}

// Post hands the instance machine an input from the host (the answer of
// an action Perform performed, a durable checkpoint, a membership read);
// it waits only for room in the manager's queue, and is dropped once Run
// ended.
func (m *Manager) Post(in instance.Input) { m.post(event{in: in}) }

// newOwner names a new incarnation: a new random suffix.
func (m *Manager) newOwner() string { return m.id + "#" + incarnation() }

// Owner is the current incarnation's owner name.
func (m *Manager) Owner() string { return *m.self.Load() }

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

// Run manages the leases until ctx ends, then stops every worker, hands
// every held lease off and removes the heartbeat.
func (m *Manager) Run(ctx context.Context) {
	m.log.Infof("Leases: instance %s shares %d partitions of scope %s (lease period %s, heartbeat every %s, balance every %s)",
		m.Owner(), len(m.host.Membership().Partitions), m.host.Scope, m.cfg.Period, m.cfg.RenewInterval, m.cfg.BalanceInterval)
	m.base = ctx
	wake := time.NewTimer(time.Hour)
	defer wake.Stop()
	m.step(ctx, wake, instance.Start{Now: time.Now(), Self: m.Owner(), Membership: m.host.Membership()})
	stop := ctx.Done()
	for !m.im.Exited() {
		select {
		case <-stop:
			stop = nil
			// The hand-offs and the heartbeat's removal run past the run's
			// end, each with its deadline.
			sctx, cancel := context.WithTimeout(context.Background(), max(m.storeTimeout(), 2*time.Second))
			defer cancel()
			m.base = sctx
			m.step(ctx, wake, instance.Shutdown{Now: time.Now()})
		case ev := <-m.events:
			if ev.op {
				m.inFlight--
			}
			m.step(ctx, wake, ev.in)
			m.pump()
		case <-wake.C:
			m.step(ctx, wake, instance.Tick{Now: time.Now()})
		}
		if stop == nil && m.base.Err() != nil {
			break // the shutdown's deadline passed
		}
	}
	close(m.done)
	m.io.Wait()
	m.workers.Wait()
	m.metrics.owned.Set(0)
}

// step feeds the machine one input and performs its actions in order.
func (m *Manager) step(ctx context.Context, wake *time.Timer, in instance.Input) {
	for _, a := range m.im.Step(in) {
		m.perform(ctx, wake, a)
	}
	m.publishSnapshot()
	m.metrics.owned.Set(int64(m.im.Owned()))
}

// publishSnapshot hands the holders and the heartbeat's freshness to
// Holds. The holders are copied only when they changed (a worker started
// or stopped), not at each step of the machine (renewals, reads, answers).
func (m *Manager) publishSnapshot() {
	prev := m.snap.Load()
	held := prev.held
	if m.holdersChanged || held == nil {
		held = make(map[string]*Holder, len(m.holders))
		maps.Copy(held, m.holders)
		m.holdersChanged = false
	} else if m.im.FreshUntil().Equal(prev.freshUntil) {
		return // nothing changed
	}
	m.snap.Store(&holdSnapshot{held: held, freshUntil: m.im.FreshUntil()})
}

// post hands an answer to Run (dropped once Run stopped reading).
func (m *Manager) post(ev event) {
	select {
	case m.events <- ev:
	case <-m.done:
	}
}

// call runs one store call on its own goroutine under the call deadline.
func (m *Manager) call(timeout time.Duration, f func(ctx context.Context)) {
	base := m.base
	m.io.Go(func() {
		ctx, cancel := context.WithTimeout(base, timeout)
		defer cancel()
		f(ctx)
	})
}

func (m *Manager) perform(ctx context.Context, wake *time.Timer, a instance.Action) {
	switch a := a.(type) {
	case instance.RenewHeartbeat:
		m.call(m.renewTimeout(), func(tctx context.Context) {
			start := time.Now()
			got, err := m.host.Store.RenewHeartbeat(tctx, a.Heartbeat, a.Held)
			if err != nil && !errors.Is(err, store.ErrFenced) && ctx.Err() == nil {
				m.log.Debugf("Leases: heartbeat renewal of %s has an unknown outcome: %v", a.Heartbeat.Owner, err)
			}
			m.post(event{in: instance.Renewed{Owner: a.Heartbeat.Owner, Start: start, Heartbeat: got, Err: err}})
		})
	case instance.ReadHeartbeats:
		m.call(m.storeTimeout(), func(tctx context.Context) {
			hbs, err := m.host.Store.ListHeartbeats(tctx, m.host.Scope)
			if err != nil && ctx.Err() == nil {
				m.log.Warnf("Leases: cannot read the heartbeats of scope %s: %v", m.host.Scope, err)
			}
			m.post(event{in: instance.HeartbeatsRead{Owner: a.Owner, Now: time.Now(), Heartbeats: hbs, Err: err}})
		})
	case instance.TakeOver:
		m.call(m.storeTimeout(), func(tctx context.Context) {
			_, err := m.host.Store.TakeOverHeartbeat(tctx, a.Seen, a.Owner)
			if err == nil {
				m.log.Infof("Leases: instance %s seen dead (heartbeat counter %d unchanged for %s); heartbeat taken over, its %d partitions are claimable", a.Seen.Owner, a.Seen.Counter, m.cfg.Period, a.Seen.Held)
			} else {
				m.log.Debugf("Leases: takeover of %s lost: %v", a.Seen.Owner, err)
			}
			m.post(event{in: instance.TookOver{Owner: a.Owner, Seen: a.Seen, Err: err}})
		})
	case instance.ReadLeases:
		base := m.base
		m.io.Go(func() {
			cps, err := m.readLeases(base, a.Owner, a.Partitions, a.CreateBudget)
			if err != nil && ctx.Err() == nil {
				m.log.Warnf("Leases: cannot read the leases of scope %s: %v", m.host.Scope, err)
			}
			m.post(event{in: instance.LeasesRead{Owner: a.Owner, Now: time.Now(), Checkpoints: cps, Err: err}})
		})
	case instance.ClaimLease:
		m.queue = append(m.queue, queuedOp{owner: a.Owner, run: func(base context.Context) { m.claim(ctx, base, a) }})
		m.pump()
	case instance.ReleaseLease:
		h := m.stopping[a.Partition]
		m.queue = append(m.queue, queuedOp{owner: a.Owner, run: func(base context.Context) { m.release(base, a, h) }})
		m.pump()
	case instance.StartWorker:
		m.start(ctx, a)
	case instance.StopWorker:
		m.stop(a)
	case instance.DeleteHeartbeat:
		m.call(m.storeTimeout(), func(tctx context.Context) {
			if err := m.host.Store.DeleteHeartbeat(tctx, a.Heartbeat); err == nil {
				m.log.Debugf("Leases: heartbeat of %s removed", a.Heartbeat.Owner)
			} else {
				m.log.Debugf("Leases: removing heartbeat %s: %v", a.Heartbeat.Owner, err)
			}
		})
	case instance.NewIncarnation:
		old := m.Owner()
		self := m.newOwner()
		m.self.Store(&self)
		m.queue = m.queue[:0] // the gone incarnation's claims not sent yet are never sent
		m.log.Infof("Leases: incarnation %s is gone (%s); rejoining as %s", old, a.Reason, self)
		m.step(ctx, wake, instance.Incarnation{Now: time.Now(), Self: self})
	case instance.Wake:
		wake.Stop()
		wake.Reset(max(time.Until(a.At), 0))
	case instance.Exit:
		// Ends Run.
	default:
		// Publication, membership reads, lineage, pruning, epochs: the
		// host's.
		if m.host.Perform != nil {
			m.host.Perform(a)
		}
	}
}

// pump sends queued claims and releases, at most InFlight at once.
func (m *Manager) pump() {
	for m.inFlight < InFlight && len(m.queue) > 0 {
		op := m.queue[0]
		m.queue = m.queue[1:]
		if op.owner != m.im.Self() {
			continue // queued by a gone incarnation
		}
		m.inFlight++
		base := m.base
		m.io.Go(func() { op.run(base) })
	}
}

// start runs the partition's worker under its lease.
func (m *Manager) start(ctx context.Context, a instance.StartWorker) {
	p := a.Partition
	h := newHolder(store.Key{Scope: m.host.Scope, Partition: p}, a.Lease, m.onLost)
	wctx, cancel := context.WithCancel(ctx)
	h.cancel = cancel
	m.holders[p] = h
	m.holdersChanged = true
	m.workers.Add(1)
	m.host.Launch(wctx, p, h, func() {
		cancel()
		close(h.done)
		m.workers.Done()
		m.post(event{in: instance.WorkerStopped{Partition: p}})
	})
}

// stop marks the worker stopped (its fenced writes are refused from now
// on) and cancels it.
func (m *Manager) stop(a instance.StopWorker) {
	h := m.holders[a.Partition]
	if h == nil {
		return
	}
	delete(m.holders, a.Partition)
	m.holdersChanged = true
	m.stopping[a.Partition] = h
	first := h.stop(a.Reason)
	if first && (strings.HasPrefix(a.Reason, "lease lost") || strings.HasPrefix(a.Reason, "incarnation gone")) {
		m.metrics.lost.Incr(1)
		m.log.Warnf("Partition %s: lease lost (%s); stopping its worker and dropping its in-flight pages", a.Partition, strings.TrimPrefix(a.Reason, "lease lost: "))
	}
}

// onLost is called by a holder whose worker found its lease gone (a fenced
// write): the machine is told.
func (m *Manager) onLost(h *Holder, reason string) {
	m.post(event{in: instance.WorkerLost{Partition: h.key.Partition, Reason: reason}})
}

// claim performs one claim (one conditional write).
func (m *Manager) claim(ctx, base context.Context, a instance.ClaimLease) {
	c := a.Claim
	tctx, cancel := context.WithTimeout(base, m.storeTimeout())
	defer cancel()
	cp, err := m.host.Store.ClaimLease(tctx, store.Key{Scope: m.host.Scope, Partition: c.Partition}, c.Expect, a.Owner)
	switch {
	case err == nil:
		if c.Kind == lease.ClaimExpired {
			m.metrics.steals.Incr(1, "expired")
		}
		m.log.Infof("Partition %s: lease %s claimed (%s, was %s)", c.Partition, cp.Lease, c.Kind, c.Expect)
	case errors.Is(err, store.ErrFenced):
		m.log.Debugf("Partition %s: %s lost the race: %v", c.Partition, c, err)
	case ctx.Err() == nil:
		// Unknown outcome: if it was applied, a later read finds the lease
		// ours in the store and claims it again.
		m.log.Warnf("Partition %s: %s failed: %v", c.Partition, c, err)
	}
	m.post(event{in: instance.Claimed{Owner: a.Owner, Partition: c.Partition, Lease: cp.Lease, Err: err}, op: true})
}

// release hands the lease off with one conditional write, after the
// stopped worker's write in flight (its holder's semaphore).
func (m *Manager) release(base context.Context, a instance.ReleaseLease, h *Holder) {
	err := m.handOff(base, a, h)
	m.post(event{in: instance.Released{Owner: a.Owner, Partition: a.Partition, Err: err}, op: true})
}

func (m *Manager) handOff(base context.Context, a instance.ReleaseLease, h *Holder) error {
	tctx, cancel := context.WithTimeout(base, m.storeTimeout())
	defer cancel()
	if h != nil {
		if err := h.acquire(tctx); err != nil {
			return err
		}
		defer h.release()
	}
	key := store.Key{Scope: m.host.Scope, Partition: a.Partition}
	if _, err := m.host.Store.ReleaseLease(tctx, key, a.Lease); err != nil {
		var fe *store.FenceError
		if errors.As(err, &fe) && fe.Winner != nil && fe.Winner.Lease != a.Lease {
			// Taken over before the hand-off: the lease was lost, not
			// released.
			m.metrics.lost.Incr(1)
			m.log.Warnf("Partition %s: lease lost (release fenced: the lease is now %s, this instance held %s)", a.Partition, fe.Winner.Lease, a.Lease)
			return err
		}
		m.log.Warnf("Partition %s: releasing lease %s failed (this incarnation claims it back, or the others take it once it is gone): %v", a.Partition, a.Lease, err)
		return err
	}
	m.log.Infof("Partition %s: lease %s released (%s)", a.Partition, a.Lease, a.Why)
	return nil
}

// Holds is the pipeline's lease check (feed.LeaseHolder): whether this
// instance still holds part under (owner, counter) at now, its heartbeat
// fresh. A message emitted before a freeze longer than the lease and
// processed after it gets no frontier: the partition's new holder may
// already have attached a lower one from its own view, and a frontier
// attached to a partition's messages must not go back (docs/design.md,
// "Leases and fencing").
func (m *Manager) Holds(part, owner string, counter uint64, now time.Time) bool {
	s := m.snap.Load()
	h := s.held[part]
	if h == nil || !now.Before(s.freshUntil) {
		return false
	}
	l, lost := h.Current()
	return lost == "" && l.Owner == owner && l.Counter == counter
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
