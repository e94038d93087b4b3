package instance

import (
	"fmt"
	"slices"
	"time"

	"github.com/tidemark/tidemark/internal/chain"
	"github.com/tidemark/tidemark/internal/lease"
	"github.com/tidemark/tidemark/internal/publish"
	"github.com/tidemark/tidemark/internal/store"
)

// Config configures a Machine.
type Config struct {
	// Scope is the scope whose partitions the instance reads.
	Scope string
	// Leases shares the partitions with other instances through heartbeat
	// leases; nil: this instance reads every partition of the membership
	// alone.
	Leases *LeaseConfig
	// ExitWhenComplete ends the instance once every partition of the
	// membership is complete (without leases only: an instance cannot tell
	// when the partitions others hold are complete).
	ExitWhenComplete bool
	// ParkedGrace: with ExitWhenComplete, once every partition is complete
	// or parked, with at least one parked, for this long, the instance
	// ends as a failed run (0: parked partitions never end it).
	ParkedGrace time.Duration
	// PublishInterval is the shortest time between two rounds of the
	// frontier publisher (frontier_publish_interval; 0: it never runs). A
	// change of this process (Promoted, a newer epoch adopted) is
	// published at once when the last round started at least this long
	// ago, else this long after it (publish.Pacer, which the machine
	// keeps).
	PublishInterval time.Duration
	// PublishIdle and PublishMaxIdle pace the rounds without a change of
	// this process (they only read, to follow the other instances): the
	// first PublishIdle after the last round, the wait doubling while
	// nothing changes anywhere, up to PublishMaxIdle. Each is raised to
	// the one before it (PublishInterval ≤ PublishIdle ≤ PublishMaxIdle).
	PublishIdle, PublishMaxIdle time.Duration
	// MembershipCheck is how often the membership record (and, with
	// Discover, the discovery request counter) is read: a newer epoch is
	// adopted, an operator's request runs discovery (0: never read).
	MembershipCheck time.Duration
	// Discover runs discovery (list the provider, decide, write) every
	// DiscoveryInterval (0: on request only), on an operator's request and
	// while a source incarnation awaits its proof.
	Discover          bool
	DiscoveryInterval time.Duration
	// UnorderedLineage starts children without waiting for their parents;
	// otherwise a member with parents starts once each parent that is
	// still a member is complete, its parents' checkpoints read every
	// ParentsPoll (default 1s) until then.
	UnorderedLineage bool
	ParentsPoll      time.Duration
	// PruneEvery: after this many promoted generations of a partition its
	// witnesses below are deleted (Prune; 0: never).
	PruneEvery uint64
	// ExitParked counts a parked partition as complete at exit. Only the
	// simulator's broken variant sets it (clustersim.ExitWithParked).
	ExitParked bool
}

// LeaseConfig is the heartbeat lease timing and limits (lease.Config
// without the owner, which changes with each incarnation).
type LeaseConfig struct {
	Period, RenewInterval, BalanceInterval time.Duration
	MaxOwned, MaxMoves                     int
}

// CreateInFlight is the least number of missing checkpoints a lease read
// asks to create (about twice what this instance still lacks of its share
// otherwise).
const CreateInFlight = 16

type phase uint8

const (
	idle       phase = iota // no observation round running
	heartbeats              // ReadHeartbeats asked
	takeovers               // TakeOvers asked, pending answers
	leases                  // ReadLeases asked
	acting                  // claims and releases asked, pending answers
)

// Machine is the instance: the pure decisions of one paginated_partitions
// input over its scope. It performs no I/O, starts no goroutine, reads no
// clock and is not safe for concurrent use: the driver steps it from one
// goroutine and performs the actions it returns.
type Machine struct {
	cfg Config
	now time.Time

	started, exited bool
	members         Membership
	member          map[string]bool

	workers  map[string]store.Lease // running workers, by partition
	stopping map[string]bool        // workers told to stop, not yet returned
	// gated are the partitions to start (with leases: claimed) once their
	// parents are complete (lineage).
	gated map[string]*gate

	// Membership reads: one call at a time (memBusy); requests is the
	// discovery request counter last read (requestsKnown: once read).
	memBusy                 bool
	nextCheck, nextDiscover time.Time
	requests                uint64
	requestsKnown           bool
	memRead                 bool // the first ReadMembership was answered

	// Pruning: each partition's deletion rule, the deletions in flight,
	// and an exit decided while some were (it waits for them).
	prunes  map[string]*chain.Pruning
	pruning int
	held    *Exit

	complete    map[string]bool
	parked      map[string]string
	parkedSince time.Time // every member complete or parked since (zero: not)

	// Publication (Config.PublishInterval > 0): pace decides when the
	// next round is due; publishing: a round was asked for and not yet
	// answered (Published); changedDuring: a promotion was reported while
	// it ran (the round may have read before it).
	pace          publish.Pacer
	publishing    bool
	changedDuring bool
	pubEpoch      uint64 // the epoch the last round read

	// Leases.
	lm                              *lease.Machine
	rejoining                       bool   // NewIncarnation asked, no Incarnation yet
	goneWhy                         string // why the incarnation is gone, until a new one
	renewing                        bool
	nextRenew, nextObserve, nextBal time.Time
	nextExpiry                      time.Time
	rebalance, roundRebalance       bool
	phase                           phase
	pending                         int
	readLeases                      bool
	createBudget                    int
	shutdown                        bool
	lastWake                        time.Time
	out                             []Action
}

// New returns the machine of an instance; Start starts it.
func New(cfg Config) *Machine {
	idle := max(cfg.PublishIdle, cfg.PublishInterval)
	return &Machine{
		cfg:      cfg,
		pace:     publish.Pacer{MinGap: cfg.PublishInterval, Idle: idle, MaxIdle: max(cfg.PublishMaxIdle, idle)},
		member:   map[string]bool{},
		workers:  map[string]store.Lease{},
		stopping: map[string]bool{},
		gated:    map[string]*gate{},
		prunes:   map[string]*chain.Pruning{},
		complete: map[string]bool{},
		parked:   map[string]string{},
	}
}

// Self is the current incarnation's owner ("" without leases).
func (m *Machine) Self() string {
	if m.lm == nil {
		return ""
	}
	return m.lm.Self()
}

// Epoch is the membership epoch adopted.
func (m *Machine) Epoch() uint64 { return m.members.Epoch }

// Partitions is the membership adopted.
func (m *Machine) Partitions() []string { return m.members.Partitions }

// Running lists the partitions whose worker runs (not told to stop),
// sorted.
func (m *Machine) Running() []string { return sortedKeys(m.workers) }

// Waiting lists the partitions that start once their parents are complete
// (lineage), sorted.
func (m *Machine) Waiting() []string { return sortedKeys(m.gated) }

// Held lists the partitions whose lease the incarnation holds, sorted (nil
// without leases).
func (m *Machine) Held() []string {
	if m.lm == nil || m.rejoining {
		return nil
	}
	return m.lm.Held()
}

// HeldLease returns the held lease of part.
func (m *Machine) HeldLease(part string) (store.Lease, bool) {
	if m.lm == nil || m.rejoining {
		return store.Lease{}, false
	}
	return m.lm.Lease(part)
}

// Owned is the number of partitions whose lease is held (the owned gauge).
func (m *Machine) Owned() int { return len(m.Held()) }

// Gone returns why the current incarnation is gone, until a new one
// started ("" while live, and without leases).
func (m *Machine) Gone() string { return m.goneWhy }

// FreshUntil is the instant until which the incarnation's heartbeat is
// fresh (what it holds is still its own: Holds); zero while gone or before
// its first renewal, and without leases.
func (m *Machine) FreshUntil() time.Time {
	if m.lm == nil || m.rejoining {
		return time.Time{}
	}
	return m.lm.FreshUntil()
}

// Exited reports whether the machine returned Exit.
func (m *Machine) Exited() bool { return m.exited }

// Holds is the pipeline's lease check: whether at now this instance runs
// part's worker under l and (with leases) its heartbeat is fresh, so a
// frontier attached to part's messages cannot go back.
func (m *Machine) Holds(part string, l store.Lease, now time.Time) bool {
	h, ok := m.workers[part]
	if !ok || h != l {
		return false
	}
	return m.lm == nil || m.lm.Fresh(now)
}

// Step feeds one input and returns the actions to perform, in order.
func (m *Machine) Step(in Input) []Action {
	m.out = nil
	if m.exited {
		return nil
	}
	switch in := in.(type) {
	case Start:
		m.start(in)
	case Tick:
		m.tick(in.Now)
	case Adopt:
		m.advance(in.Now)
		m.adopt(in.Membership, in.Source, in.Record)
	case MembershipRead:
		m.advance(in.Now)
		m.membershipRead(in)
	case Discovered:
		m.advance(in.Now)
		m.memBusy = false
		if in.Err == nil {
			m.adopt(in.Membership, in.Why, in.Record)
		}
	case ParentsRead:
		m.advance(in.Now)
		m.parentsRead(in)
	case Pruned:
		m.pruned(in)
	case Incarnation:
		m.advance(in.Now)
		m.incarnation(in.Self)
	case Renewed:
		m.renewed(in)
	case HeartbeatsRead:
		m.heartbeatsRead(in)
	case TookOver:
		m.tookOver(in)
	case LeasesRead:
		m.leasesRead(in)
	case Claimed:
		m.claimed(in)
	case Released:
		m.released(in)
	case WorkerLost:
		m.workerLost(in)
	case WorkerStopped:
		m.workerStopped(in.Partition)
	case Completed:
		if m.member[in.Partition] {
			m.complete[in.Partition] = true
		}
	case Parked:
		if m.member[in.Partition] {
			if in.Reason != "" {
				m.parked[in.Partition] = in.Reason
			} else {
				delete(m.parked, in.Partition)
			}
		}
	case Promoted:
		m.advance(in.Now)
		m.promoted()
		m.prune(in.Partition, in.Generation)
	case Published:
		m.advance(in.Now)
		m.published(in)
	case Shutdown:
		m.advance(in.Now)
		m.beginShutdown()
	}
	m.checkExit()
	m.maybePublish()
	m.wake()
	return m.out
}

func (m *Machine) emit(a Action) { m.out = append(m.out, a) }

func (m *Machine) advance(now time.Time) {
	if now.After(m.now) {
		m.now = now
	}
}

func (m *Machine) start(in Start) {
	if m.started {
		return
	}
	m.started = true
	m.advance(in.Now)
	m.setMembers(in.Membership)
	if m.cfg.MembershipCheck > 0 {
		// The first read only learns the discovery request counter (a
		// request from now on runs discovery).
		m.memBusy = true
		m.nextCheck = m.now.Add(m.cfg.MembershipCheck)
		m.emit(ReadMembership{})
	}
	if m.cfg.Discover && m.cfg.DiscoveryInterval > 0 {
		m.nextDiscover = m.now.Add(m.cfg.DiscoveryInterval)
	}
	if m.cfg.Leases == nil {
		m.syncWorkers()
		return
	}
	m.nextBal = m.now.Add(m.cfg.Leases.BalanceInterval)
	m.incarnation(in.Self)
}

func (m *Machine) setMembers(ms Membership) {
	m.members = Membership{Epoch: ms.Epoch, Partitions: slices.Clone(ms.Partitions), Parents: ms.Parents}
	clear(m.member)
	for _, p := range ms.Partitions {
		m.member[p] = true
	}
}

// ---------------------------------------------------------------------------
// Membership and workers without leases.

func (m *Machine) adopt(ms Membership, source string, record store.Membership) {
	if !m.started || m.shutdown || ms.Epoch <= m.members.Epoch {
		return
	}
	prev := m.members.Epoch
	m.setMembers(ms)
	m.emit(EpochChanged{Epoch: ms.Epoch, Previous: prev, Partitions: slices.Clone(ms.Partitions), Source: source, Record: record})
	if !m.publishing && ms.Epoch > m.pubEpoch {
		// The new epoch's record is published at once (or after the
		// gap); one adopted while a round runs is weighed when it ends
		// (published: the round may have read it itself).
		m.pace.Changed()
	}
	for p := range m.complete {
		if !m.member[p] {
			delete(m.complete, p)
		}
	}
	for p := range m.parked {
		if !m.member[p] {
			delete(m.parked, p)
		}
	}
	if m.cfg.Leases == nil {
		m.syncWorkers()
	}
	// With leases, the next observation reads the leases (a held partition
	// left the membership) and releases the leavers.
}

// syncWorkers starts a worker for every member without one (never for a
// complete partition) and stops the workers of partitions that left.
func (m *Machine) syncWorkers() {
	for _, p := range m.runningOrGated() {
		if !m.member[p] {
			m.stop(p, fmt.Sprintf("the partition left the membership (epoch %d)", m.members.Epoch))
		}
	}
	for _, p := range m.members.Partitions {
		if _, ok := m.workers[p]; ok || m.gated[p] != nil || m.complete[p] || m.stopping[p] {
			continue
		}
		m.launch(p, store.Lease{})
	}
}

// runningOrGated lists the partitions whose worker runs or waits for its
// parents, sorted.
func (m *Machine) runningOrGated() []string {
	out := sortedKeys(m.workers)
	for p := range m.gated {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// launch starts part's worker under l, or, when it has parents (lineage),
// reads their checkpoints first: it starts once they are complete.
func (m *Machine) launch(part string, l store.Lease) {
	if !m.cfg.UnorderedLineage && len(m.members.Parents[part]) > 0 {
		g := &gate{lease: l}
		m.gated[part] = g
		m.readParents(part, g)
		return
	}
	m.workers[part] = l
	m.emit(StartWorker{Partition: part, Lease: l, Epoch: m.members.Epoch})
}

// stop stops part's worker (StopWorker first, before anything else of the
// partition); a partition waiting for its parents has none: it no longer
// waits.
func (m *Machine) stop(part, why string) {
	if _, ok := m.gated[part]; ok {
		delete(m.gated, part)
		return
	}
	if _, ok := m.workers[part]; !ok {
		return
	}
	delete(m.workers, part)
	m.stopping[part] = true
	m.emit(StopWorker{Partition: part, Reason: why})
}

func (m *Machine) workerStopped(part string) {
	told := m.stopping[part]
	delete(m.stopping, part)
	if !told {
		if _, ok := m.workers[part]; !ok {
			return
		}
		// Ended on its own (complete, or its lease gone): it stays ended;
		// with leases its lease is claimed back or taken by the others.
		delete(m.workers, part)
		if m.lm != nil {
			m.lm.Lose(part)
		}
		return
	}
	// Without leases a worker is told to stop only when its partition left
	// the membership: a member again by now, it starts again.
	if m.cfg.Leases == nil && !m.shutdown && m.member[part] && !m.complete[part] {
		m.launch(part, store.Lease{})
	}
}

// ---------------------------------------------------------------------------
// Exit and publication.

// checkExit ends the instance (ExitWhenComplete) once every member is
// complete: the final publication, then Exit. Once every member is
// complete or parked, with one parked at least, it ends it as a failed run
// after ParkedGrace (a partition unparked or restarted meanwhile resets
// the grace); a parked partition never ends it as complete.
func (m *Machine) checkExit() {
	if !m.cfg.ExitWhenComplete || m.exited || m.held != nil || !m.started || m.shutdown || len(m.members.Partitions) == 0 {
		return
	}
	var reasons []string
	for _, p := range m.members.Partitions {
		switch {
		case m.complete[p] && m.parked[p] == "":
		case m.cfg.ExitParked && m.parked[p] != "":
		case m.parked[p] != "":
			reasons = append(reasons, fmt.Sprintf("partition %s of scope %s is parked: %s", p, m.cfg.Scope, m.parked[p]))
		default:
			m.parkedSince = time.Time{}
			return
		}
	}
	if len(reasons) == 0 {
		m.parkedSince = time.Time{}
		m.finish(Exit{})
		return
	}
	if m.cfg.ParkedGrace <= 0 {
		return
	}
	if m.parkedSince.IsZero() {
		m.parkedSince = m.now
		m.emit(ParkedWait{Parked: len(reasons), At: m.now.Add(m.cfg.ParkedGrace)})
	}
	if m.now.Sub(m.parkedSince) >= m.cfg.ParkedGrace {
		m.finish(Exit{Failed: true, Reasons: reasons})
	}
}

// finish ends the instance: the final publication (also of a failed run:
// what is durable is published), then Exit (the workers stop when the
// driver closes).
func (m *Machine) finish(e Exit) {
	if m.pruning > 0 {
		// The deletions of witnesses in flight end first (each call has
		// its deadline), so a run that completes leaves none below its
		// checkpoints but the last round's; no other starts.
		m.held = &e
		return
	}
	m.held = nil
	if m.cfg.PublishInterval > 0 {
		m.emit(Publish{Final: true})
	}
	m.emit(e)
	m.exited = true
}

// promoted: a partition of this process promoted durably, so the
// frontier may have moved: a round is due (at once, or PublishInterval
// after the last one; promotions meanwhile share it).
func (m *Machine) promoted() {
	if m.cfg.PublishInterval <= 0 {
		return
	}
	if m.publishing {
		m.changedDuring = true
		return
	}
	m.pace.Changed()
}

// published: the round asked for ended. A round that found anything
// changed (or failed) keeps the idle pace short; one fenced by another
// publisher, one during which a promotion arrived, or one that did not
// publish the epoch adopted meanwhile leaves a change pending.
func (m *Machine) published(in Published) {
	if !m.publishing {
		return
	}
	m.publishing = false
	m.pace.Ran(in.Start, in.Active)
	m.pubEpoch = max(m.pubEpoch, in.Epoch)
	if in.Fenced || m.changedDuring || in.Epoch < m.members.Epoch {
		m.pace.Changed()
	}
	m.changedDuring = false
}

// maybePublish asks for a round of the frontier publisher when one is due
// (publish.Pacer; the first at once) and none runs.
func (m *Machine) maybePublish() {
	if m.cfg.PublishInterval <= 0 || m.publishing || m.exited || !m.started || m.shutdown {
		return
	}
	if due := m.pace.Due(); !due.IsZero() && m.now.Before(due) {
		return
	}
	m.publishing = true
	m.emit(Publish{})
}

// ---------------------------------------------------------------------------
// Timers.

func (m *Machine) tick(now time.Time) {
	m.advance(now)
	if !m.started || m.shutdown {
		return
	}
	m.tickMembership()
	for _, p := range sortedKeys(m.gated) {
		if g := m.gated[p]; !g.reading && !m.now.Before(g.next) {
			m.readParents(p, g)
		}
	}
	if m.lm == nil || m.rejoining {
		return
	}
	lc := m.cfg.Leases
	if why := m.lm.Stale(m.now); why != "" {
		m.gone(why)
		return
	}
	if !m.renewing && !m.now.Before(m.nextRenew) {
		if hb, held, ok := m.lm.Heartbeat(m.cfg.Scope); ok {
			m.renewing = true
			m.nextRenew = m.now.Add(lc.RenewInterval)
			m.emit(RenewHeartbeat{Heartbeat: hb, Held: held})
		}
	}
	if !m.now.Before(m.nextBal) {
		m.rebalance = true
		m.nextBal = m.now.Add(lc.BalanceInterval)
	}
	if m.phase != idle {
		return
	}
	observe := !m.now.Before(m.nextObserve)
	expiry := !m.nextExpiry.IsZero() && !m.now.Before(m.nextExpiry)
	if !observe && !expiry {
		return
	}
	m.roundRebalance = false
	if observe {
		m.nextObserve = m.now.Add(lc.RenewInterval)
		m.roundRebalance, m.rebalance = m.rebalance, false
	}
	m.nextExpiry = time.Time{}
	m.phase = heartbeats
	m.emit(ReadHeartbeats{Owner: m.lm.Self()})
}

// wake asks for a Tick at the earliest timer due (when it changed).
func (m *Machine) wake() {
	if m.exited || !m.started || m.shutdown {
		return
	}
	var at time.Time
	earliest := func(t time.Time) {
		if !t.IsZero() && (at.IsZero() || t.Before(at)) {
			at = t
		}
	}
	if m.cfg.PublishInterval > 0 && !m.publishing {
		earliest(m.pace.Due())
	}
	if !m.parkedSince.IsZero() && m.held == nil {
		// (An exit decided waits for the deletions in flight, not for a
		// timer.)
		earliest(m.parkedSince.Add(m.cfg.ParkedGrace))
	}
	if !m.memBusy {
		if m.cfg.MembershipCheck > 0 {
			earliest(m.nextCheck)
		}
		if m.cfg.Discover && m.cfg.DiscoveryInterval > 0 {
			earliest(m.nextDiscover)
		}
	}
	for _, g := range m.gated {
		if !g.reading {
			earliest(g.next)
		}
	}
	if m.lm != nil && !m.rejoining {
		if !m.renewing {
			earliest(m.nextRenew)
		}
		earliest(m.nextBal)
		if m.phase == idle {
			earliest(m.nextObserve)
			earliest(m.nextExpiry)
		}
	}
	// Asked again when it changed, or when it is due already (a tick that
	// came early, or a timer a round in flight held back).
	if !at.IsZero() && (!at.Equal(m.lastWake) || !at.After(m.now)) {
		m.lastWake = at
		m.emit(Wake{At: at})
	}
}

// ---------------------------------------------------------------------------
// Leases.

func (m *Machine) incarnation(self string) {
	if m.cfg.Leases == nil || m.shutdown || (m.lm != nil && !m.rejoining) {
		return
	}
	lc := m.cfg.Leases
	m.lm = lease.NewMachine(lease.Config{Self: self, Period: lc.Period, RenewInterval: lc.RenewInterval, MaxOwned: lc.MaxOwned, MaxMoves: lc.MaxMoves})
	m.rejoining, m.renewing, m.goneWhy = false, false, ""
	m.phase, m.pending, m.nextExpiry = idle, 0, time.Time{}
	m.nextRenew = m.now
	m.nextObserve = m.now.Add(lc.RenewInterval)
	m.tick(m.now)
}

// mine reports whether an answer is for the current incarnation.
func (m *Machine) mine(owner string) bool {
	return m.lm != nil && !m.rejoining && owner == m.lm.Self()
}

// gone: the incarnation lost its heartbeat. Every worker stops first;
// then a new incarnation is asked for.
func (m *Machine) gone(why string) {
	for _, p := range m.runningOrGated() {
		m.stop(p, "incarnation gone: "+why)
	}
	m.rejoining, m.goneWhy = true, why
	m.phase, m.pending = idle, 0
	if m.shutdown {
		return
	}
	m.emit(NewIncarnation{Reason: why})
}

func (m *Machine) renewed(in Renewed) {
	if !m.mine(in.Owner) {
		return
	}
	m.renewing = false
	if why := m.lm.Renewed(in.Start, in.Heartbeat, in.Err); why != "" {
		m.gone(why)
	}
}

func (m *Machine) heartbeatsRead(in HeartbeatsRead) {
	if !m.mine(in.Owner) || m.phase != heartbeats {
		return
	}
	m.advance(in.Now)
	if in.Err != nil {
		m.phase = idle
		return
	}
	r := m.lm.Observe(in.Now, in.Heartbeats, m.members.Partitions)
	m.nextExpiry = r.NextExpiry
	m.readLeases = r.ReadLeases
	m.createBudget = max(2*(r.Share-m.lm.Owned()), CreateInFlight)
	if len(r.TakeOvers) > 0 {
		m.phase, m.pending = takeovers, len(r.TakeOvers)
		for _, hb := range r.TakeOvers {
			m.emit(TakeOver{Owner: m.lm.Self(), Seen: hb})
		}
		return
	}
	m.afterTakeovers()
}

func (m *Machine) tookOver(in TookOver) {
	if !m.mine(in.Owner) || m.phase != takeovers {
		return
	}
	m.lm.TookOver(in.Seen, in.Err)
	m.readLeases = true
	if m.pending--; m.pending == 0 {
		m.afterTakeovers()
	}
}

func (m *Machine) afterTakeovers() {
	if m.readLeases {
		m.phase = leases
		m.emit(ReadLeases{Owner: m.lm.Self(), Partitions: slices.Clone(m.members.Partitions), CreateBudget: m.createBudget})
		return
	}
	m.decide(nil)
}

func (m *Machine) leasesRead(in LeasesRead) {
	if !m.mine(in.Owner) || m.phase != leases {
		return
	}
	m.advance(in.Now)
	if in.Err != nil {
		m.phase = idle
		return
	}
	cps := in.Checkpoints
	if cps == nil {
		cps = []store.Checkpoint{}
	}
	m.decide(cps)
}

// decide applies one round's decision: lost partitions stop first, then
// releases (each after its worker's stop), claims, heartbeat deletions.
func (m *Machine) decide(cps []store.Checkpoint) {
	busy := make(map[string]bool, len(m.stopping))
	for p := range m.stopping {
		busy[p] = true
	}
	d := m.lm.Decide(lease.DecideInput{Now: m.now, Parts: m.members.Partitions, Leases: cps, Busy: busy, Rebalance: m.roundRebalance})
	stored := make(map[string]store.Lease, len(cps))
	for _, cp := range cps {
		stored[cp.Partition] = cp.Lease
	}
	for _, p := range d.Lost {
		why := fmt.Sprintf("lease lost: the stored lease is %s, this instance held %s", stored[p], m.workers[p])
		if _, ok := stored[p]; !ok {
			why = fmt.Sprintf("lease lost: the checkpoint is gone, this instance held %s", m.workers[p])
		}
		m.stop(p, why)
	}
	m.pending = 0
	for _, p := range d.Release {
		l, _ := m.lm.Lease(p)
		why := "above this instance's share"
		if !m.member[p] {
			why = "the partition left the membership"
		}
		m.stop(p, "released: "+why)
		m.pending++
		m.emit(ReleaseLease{Owner: m.lm.Self(), Partition: p, Lease: l, Why: why})
	}
	for _, c := range d.Claims {
		m.pending++
		m.emit(ClaimLease{Owner: m.lm.Self(), Claim: c})
	}
	for _, hb := range d.DeleteHeartbeats {
		m.emit(DeleteHeartbeat{Heartbeat: hb})
	}
	m.phase = acting
	if m.pending == 0 {
		m.phase = idle
	}
}

func (m *Machine) claimed(in Claimed) {
	if m.shutdown {
		// A claim sent before the shutdown: a lease won is handed off too.
		if m.mine(in.Owner) {
			if m.lm.Claimed(in.Partition, in.Lease, in.Err) {
				m.emit(ReleaseLease{Owner: m.lm.Self(), Partition: in.Partition, Lease: in.Lease, Why: "shutdown"})
				return
			}
			m.answeredShutdown()
		}
		return
	}
	if !m.mine(in.Owner) || m.phase != acting {
		return
	}
	if m.lm.Claimed(in.Partition, in.Lease, in.Err) && !m.shutdown {
		m.launch(in.Partition, in.Lease)
	}
	m.answered()
}

func (m *Machine) released(in Released) {
	if m.shutdown {
		if m.lm != nil && in.Owner == m.lm.Self() {
			m.lm.Released(in.Partition, in.Err)
			m.answeredShutdown()
		}
		return
	}
	if !m.mine(in.Owner) || m.phase != acting {
		return
	}
	m.lm.Released(in.Partition, in.Err)
	m.answered()
}

func (m *Machine) answered() {
	if m.pending--; m.pending <= 0 {
		m.pending, m.phase = 0, idle
	}
}

func (m *Machine) workerLost(in WorkerLost) {
	if _, ok := m.workers[in.Partition]; !ok {
		return
	}
	if m.lm != nil {
		m.lm.Lose(in.Partition)
	}
	m.stop(in.Partition, "lease lost: "+in.Reason)
}

// ---------------------------------------------------------------------------
// Shutdown.

func (m *Machine) beginShutdown() {
	if m.shutdown || !m.started {
		return
	}
	m.shutdown = true
	for _, p := range m.runningOrGated() {
		m.stop(p, "shutdown")
	}
	if m.lm == nil || m.rejoining {
		m.emit(Exit{})
		m.exited = true
		return
	}
	// The claims and releases of a round in flight are still answered:
	// the shutdown waits for them (a claim won is released too).
	if m.phase != acting {
		m.pending = 0
	}
	m.phase = idle
	for _, p := range m.lm.Held() {
		l, _ := m.lm.Lease(p)
		m.pending++
		m.emit(ReleaseLease{Owner: m.lm.Self(), Partition: p, Lease: l, Why: "shutdown"})
	}
	if m.pending == 0 {
		m.endShutdown()
	}
}

func (m *Machine) answeredShutdown() {
	if m.pending--; m.pending <= 0 {
		m.endShutdown()
	}
}

func (m *Machine) endShutdown() {
	if hb, _, ok := m.lm.Heartbeat(m.cfg.Scope); ok && hb.Counter > 0 {
		m.emit(DeleteHeartbeat{Heartbeat: hb})
	}
	m.emit(Exit{})
	m.exited = true
}

func sortedKeys[V any](mp map[string]V) []string {
	out := make([]string, 0, len(mp))
	for k := range mp {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
