package clustersim

import (
	"container/heap"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tidemark/tidemark/internal/instance"
	"github.com/tidemark/tidemark/internal/lease"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/store/memstore"
	"math/rand/v2"
)

// The heartbeat lease simulation (RunLeases): several instances, each
// process life stepping the real instance machine (internal/instance, which
// owns its incarnation's lease.Machine) and performing its actions, against
// the real in-memory store's heartbeat,
// claim, release and fenced-promotion conditional writes. It is a
// discrete-event simulation on one virtual timeline: nothing sleeps, reads
// a clock or starts a goroutine, and one seed decides everything.
//
// Each instance reads its own monotonic clock: its own origin and a rate
// within ±0.1% of the timeline's, so no two instances' readings are
// comparable (the machine never compares them). A store call is sent at
// one instant, takes effect in the store at a later one and answers later
// still; a call whose answer comes after the store timeout (the renew
// interval, as in the input) is an unknown outcome, and the fault injector
// also fails calls before they take effect and loses answers of calls that
// did. Faults, during the fault phase only: heartbeat and other write
// failures and unknown outcomes, pauses longer than the lease period (a
// SIGSTOP: the instance's timers and answers wait; its requests already
// sent still land), kill -9 and restart as a new incarnation, an instance
// added, slow observers (heartbeat and checkpoint reads answering seconds
// late). Each holder's partition worker makes fenced checkpoint writes
// (Promote carrying the held lease) at random instants.
//
// Oracle:
//   - lease-writer: every promotion that took effect was sent by the
//     incarnation its checkpoint's lease named at that instant;
//   - write-after-gone: no promotion, claim or renewal sent by an
//     incarnation after it was gone (its machine said so, or it received
//     the fence of its renewal: its heartbeat was taken over) takes effect;
//   - lease-liveness: once faults stop, every partition is held by a live
//     incarnation (stored lease and machine agree, no partition held twice)
//     within lease period + renew interval + balance rounds + the claims'
//     time, and every live instance holds exactly its fair share within a
//     bounded number of balance rounds after that;
//   - lease-lost: no lease is lost while no fault happens (the fault-free
//     schedules throughout, every schedule after it converged).

// Checks of the lease simulation.
const (
	CheckLeaseWriter    Check = "lease-writer"
	CheckWriteAfterGone Check = "write-after-gone"
	CheckLeaseLiveness  Check = "lease-liveness"
	CheckLeaseLost      Check = "lease-lost"
)

// LeaseVariant is the driver behaviour under test in RunLeases.
type LeaseVariant uint8

const (
	// LeaseFaithful performs the instance machine's actions as they are.
	LeaseFaithful LeaseVariant = iota
	// RenewAfterTakeover is a broken driver: when the machine says the
	// incarnation is gone (its heartbeat renewal was fenced: taken over;
	// or it went unrenewed for a lease period) it keeps its workers
	// writing and keeps renewing, as if nothing happened.
	RenewAfterTakeover
	// PromoteWithoutLease is a broken worker: its promotions carry no
	// lease (no lease condition), so a zombie's promotion lands after its
	// partition was claimed away.
	PromoteWithoutLease
	// KeepLostPartition is a broken instance machine: the StopWorker it
	// returns for a partition whose lease is lost (a read showed another
	// lease, a write was fenced, or the incarnation is gone: its heartbeat
	// was taken over, the way a held lease is lost) is dropped, so the
	// partition's worker keeps running and writing under the lost lease
	// while the machine goes on (CheckWriteAfterGone, or
	// CheckLeaseLiveness: a worker runs under a lease that is not the
	// stored one).
	KeepLostPartition
)

func (v LeaseVariant) String() string {
	switch v {
	case LeaseFaithful:
		return "faithful"
	case RenewAfterTakeover:
		return "renew-after-takeover"
	case PromoteWithoutLease:
		return "promote-without-lease"
	case KeepLostPartition:
		return "keep-lost-partition"
	}
	return "lease-variant-" + strconv.Itoa(int(v))
}

// ParseLeaseVariant reads the names LeaseVariant.String prints.
func ParseLeaseVariant(s string) (LeaseVariant, error) {
	for _, v := range []LeaseVariant{LeaseFaithful, RenewAfterTakeover, PromoteWithoutLease, KeepLostPartition} {
		if v.String() == s {
			return v, nil
		}
	}
	return 0, fmt.Errorf("unknown lease variant %q", s)
}

// LeaseSimConfig configures one lease schedule.
type LeaseSimConfig struct {
	Seed uint64
	// Instances started together (default 3); Partitions (default 200).
	Instances, Partitions int
	// FaultPhase is how long faults are injected (default 2 minutes of
	// virtual time); 0 faults with NoFaults.
	FaultPhase time.Duration
	NoFaults   bool
	Variant    LeaseVariant
	// TraceTail is how many history lines a failure carries (default 40).
	TraceTail int
	// OnEvent, when set, sees every history line.
	OnEvent func(string)
}

// LeaseSimStats counts what a lease schedule did.
type LeaseSimStats struct {
	Renewals, RenewFenced, TakeOvers, Claims, ClaimsExpired, Releases int
	Promotions, PromotionsFenced, StaleStops, Lost                    int
	Pauses, Kills, Restarts, Added, SlowObservers, FailedCalls        int
	UnknownOutcomes                                                   int
	// Owned and Converged: after the faults, when every partition was held
	// by a live incarnation, and when the shares were fair (time after the
	// faults stopped).
	Owned, Converged time.Duration
}

// LeaseSimResult is the outcome of RunLeases.
type LeaseSimResult struct {
	Setup   string
	Stats   LeaseSimStats
	Failure *LeaseFailure
}

// LeaseFailure is an oracle violation of a lease schedule.
type LeaseFailure struct {
	Seed    uint64
	Variant LeaseVariant
	Check   Check
	At      time.Duration
	Detail  string
	Setup   string
	Trace   []string
}

func (f *LeaseFailure) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "leasesim: seed %d (%s) failed check %s at %s:\n  %s\n  setup: %s\n  replay: go test ./internal/clustersim/ -run 'TestLeaseSim$' -lease-seed=%d", f.Seed, f.Variant, f.Check, f.At, f.Detail, f.Setup, f.Seed)
	if f.Variant != LeaseFaithful {
		fmt.Fprintf(&b, " -lease-variant=%s", f.Variant)
	}
	b.WriteString("\n  history tail:\n")
	for _, l := range f.Trace {
		b.WriteString("    " + l + "\n")
	}
	return b.String()
}

// Lease timing of the simulated instances: the input's defaults.
const (
	lsPeriod   = 10 * time.Second
	lsRenew    = 3 * time.Second
	lsBalance  = 5 * time.Second
	lsMaxMoves = 256
	lsInFlight = 16 // claims and releases in flight per instance, as leaseInFlight
	lsScope    = "leasesim"
	lsTimeout  = lsRenew // the store timeout of a lease call, as storeTimeout
)

var errLSUnavailable = errors.New("leasesim: store unavailable (nothing written)")
var errLSLost = errors.New("leasesim: answer lost (the write may have taken effect)")
var errLSTimeout = errors.New("leasesim: store call timed out (the write may have taken effect)")

// ---------------------------------------------------------------------------
// Events.

type lsEvent struct {
	at  time.Duration
	seq uint64
	// in, when set, makes the event local to a process life: dropped once
	// the life ended, delayed while the instance is paused.
	in   *lsInstance
	life int
	fn   func()
}

type lsQueue []*lsEvent

func (q lsQueue) Len() int { return len(q) }
func (q lsQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q lsQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *lsQueue) Push(x any)   { *q = append(*q, x.(*lsEvent)) }
func (q *lsQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// ---------------------------------------------------------------------------
// The simulation.

type leaseSim struct {
	cfg   LeaseSimConfig
	rng   *rand.Rand // setup and fault schedule
	frng  *rand.Rand // store faults and latencies
	wrng  *rand.Rand // worker timing
	mem   *memstore.Store
	parts []string

	now    time.Duration
	seq    uint64
	q      lsQueue
	faulty bool // the fault phase is on
	end    time.Duration
	// outageUntil: store calls fail or lose their answers often until then.
	outageUntil time.Duration
	faultEnd    time.Duration

	insts []*lsInstance
	// goneAt: when each incarnation was gone (timeline), by owner, and
	// goneStep the event during which it went (events at one instant run
	// in order).
	goneAt   map[string]time.Duration
	goneStep map[string]uint64
	step     uint64 // events run
	// lostCount counts leases lost (Decide's Lost, fenced workers, stopped
	// incarnations' held partitions); lostWatch starts the lease-lost
	// check.
	lostWatch bool

	stats   LeaseSimStats
	setup   string
	trace   []string
	failure *LeaseFailure
}

type lsInstance struct {
	id   string
	n    int // incarnations started
	life int // process lives (kill ends one)
	dead bool
	// pausedUntil: timeline instant a pause ends (SIGCONT).
	pausedUntil time.Duration
	origin      time.Time
	rate        float64
	slow        time.Duration // extra latency of its reads (slow observer)

	// im is the process life's instance machine; self its current
	// incarnation's owner.
	im   *instance.Machine
	self string
	// workers run, by partition; stopping: stopped with a write in flight.
	workers, stopping map[string]*lsWorker
	wakeTok           int // token of the Wake armed last
	// The claims and releases asked, at most lsInFlight sent at once.
	pending  []lsOp
	inFlight int
}

// lsOp is a claim or release asked by the incarnation owner.
type lsOp struct {
	owner string
	do    func(done func())
}

type lsWorker struct {
	part     string
	lease    store.Lease
	owner    string
	stopped  bool
	loaded   bool
	cursor   []byte
	gen      uint64
	inflight bool
	// afterWrite runs once the write in flight answered (a release waits
	// for it, as leasing.Holder's semaphore makes it).
	afterWrite func()
}

// RunLeases runs one lease schedule.
func RunLeases(cfg LeaseSimConfig) LeaseSimResult {
	if cfg.Instances <= 0 {
		cfg.Instances = 3
	}
	if cfg.Partitions <= 0 {
		cfg.Partitions = 200
	}
	if cfg.FaultPhase <= 0 {
		cfg.FaultPhase = 2 * time.Minute
	}
	if cfg.TraceTail <= 0 {
		cfg.TraceTail = 40
	}
	s := &leaseSim{
		cfg:    cfg,
		rng:    rand.New(rand.NewPCG(cfg.Seed, 0x1ea5e51)),
		frng:   rand.New(rand.NewPCG(cfg.Seed, 0xfa17)),
		wrng:   rand.New(rand.NewPCG(cfg.Seed, 0x3017)),
		mem:    memstore.New(),
		goneAt: map[string]time.Duration{}, goneStep: map[string]uint64{},
	}
	for i := range cfg.Partitions {
		s.parts = append(s.parts, fmt.Sprintf("p%05d", i))
	}
	s.run()
	return LeaseSimResult{Setup: s.setup, Stats: s.stats, Failure: s.failure}
}

func (s *leaseSim) logf(format string, args ...any) {
	line := fmt.Sprintf("%9s ", s.now.Round(time.Millisecond)) + fmt.Sprintf(format, args...)
	if s.cfg.OnEvent != nil {
		s.cfg.OnEvent(line)
	}
	s.trace = append(s.trace, line)
	if len(s.trace) > 4*s.cfg.TraceTail {
		s.trace = slices.Clone(s.trace[len(s.trace)-s.cfg.TraceTail:])
	}
}

func (s *leaseSim) fail(c Check, format string, args ...any) {
	if s.failure != nil {
		return
	}
	detail := fmt.Sprintf(format, args...)
	s.logf("VIOLATION %s: %s", c, detail)
	tail := s.trace[max(0, len(s.trace)-s.cfg.TraceTail):]
	s.failure = &LeaseFailure{Seed: s.cfg.Seed, Variant: s.cfg.Variant, Check: c, At: s.now, Detail: detail, Setup: s.setup, Trace: slices.Clone(tail)}
}

// at schedules fn at the timeline instant t (local to in's current life
// when in is set).
func (s *leaseSim) at(t time.Duration, in *lsInstance, fn func()) {
	s.seq++
	e := &lsEvent{at: max(t, s.now), seq: s.seq, in: in, fn: fn}
	if in != nil {
		e.life = in.life
	}
	heap.Push(&s.q, e)
}

// after schedules fn after d of in's own clock.
func (s *leaseSim) after(in *lsInstance, d time.Duration, fn func()) {
	s.at(s.now+time.Duration(float64(d)/in.rate), in, fn)
}

// clock is in's monotonic clock reading now.
func (in *lsInstance) clock(now time.Duration) time.Time {
	return in.origin.Add(time.Duration(float64(now) * in.rate))
}

func (in *lsInstance) owner() string { return in.self }

func (s *leaseSim) run() {
	r := s.rng
	faults := !s.cfg.NoFaults
	var setup []string
	setup = append(setup, fmt.Sprintf("instances=%d partitions=%d faults=%v phase=%s variant=%s", s.cfg.Instances, s.cfg.Partitions, faults, s.cfg.FaultPhase, s.cfg.Variant))
	for range s.cfg.Instances {
		s.addInstance(time.Duration(r.IntN(500)) * time.Millisecond)
	}
	faultEnd := time.Duration(0)
	if faults {
		s.faulty = true
		faultEnd = s.cfg.FaultPhase
		s.faultEnd = faultEnd
		s.scheduleFaults(faultEnd, &setup)
		s.at(faultEnd, nil, s.endFaults)
	}
	s.setup = strings.Join(setup, "; ")
	s.lostWatch = !faults
	// Liveness deadlines after the faults (or the cold start).
	ownedBound := lsPeriod + lsRenew + 3*lsBalance + 2*lsRenew + s.claimTime()
	s.at(faultEnd, nil, func() { s.watch(faultEnd, faultEnd+ownedBound) })
	s.end = faultEnd + ownedBound + s.balanceBound() + 3*lsPeriod
	for s.q.Len() > 0 && s.failure == nil {
		e := heap.Pop(&s.q).(*lsEvent)
		if e.at > s.end {
			break
		}
		s.now = e.at
		if in := e.in; in != nil {
			if in.dead || e.life != in.life {
				continue
			}
			if in.pausedUntil > s.now {
				e.at = in.pausedUntil
				heap.Push(&s.q, e)
				continue
			}
		}
		s.step++
		e.fn()
	}
	if s.failure == nil && s.stats.Converged == 0 {
		s.fail(CheckLeaseLiveness, "the shares never became fair: %s", s.ownership())
	}
	if s.failure == nil && s.cfg.NoFaults && s.stats.Lost > 0 {
		s.fail(CheckLeaseLost, "%d leases lost in a schedule without faults", s.stats.Lost)
	}
}

// claimTime bounds the time to claim every partition with lsInFlight
// claims in flight.
func (s *leaseSim) claimTime() time.Duration {
	return time.Duration((len(s.parts)+lsInFlight-1)/lsInFlight) * 40 * time.Millisecond
}

// balanceBound bounds the balance rounds to converge to the fair shares:
// an instance above its share moves at most lsMaxMoves a round.
func (s *leaseSim) balanceBound() time.Duration {
	rounds := (len(s.parts)+lsMaxMoves-1)/lsMaxMoves + 3
	return time.Duration(rounds)*lsBalance + s.claimTime()
}

func (s *leaseSim) scheduleFaults(end time.Duration, setup *[]string) {
	r := s.rng
	n := 4 + r.IntN(8)
	for range n {
		t := time.Duration(r.Int64N(int64(end - lsPeriod)))
		switch k := r.IntN(10); {
		case k < 3:
			d := lsPeriod + time.Duration(r.Int64N(int64(2*lsPeriod)))
			if r.IntN(3) == 0 {
				d = time.Duration(r.Int64N(int64(lsPeriod))) // a short pause
			}
			s.at(t, nil, func() { s.pause(d) })
		case k < 5:
			s.at(t, nil, s.kill)
		case k < 6:
			s.at(t, nil, func() {
				if len(s.insts) < 5 {
					s.stats.Added++
					s.addInstance(0)
				}
			})
		case k < 8:
			s.at(t, nil, s.slowObserver)
		default:
			s.at(t, nil, s.outage)
		}
	}
	*setup = append(*setup, fmt.Sprintf("%d faults", n))
}

// ---------------------------------------------------------------------------
// Faults.

func (s *leaseSim) pick() *lsInstance {
	var live []*lsInstance
	for _, in := range s.insts {
		if !in.dead && in.pausedUntil <= s.now {
			live = append(live, in)
		}
	}
	if len(live) == 0 {
		return nil
	}
	return live[s.rng.IntN(len(live))]
}

func (s *leaseSim) pause(d time.Duration) {
	in := s.pick()
	if in == nil || !s.faulty {
		return
	}
	d = min(d, s.faultEnd-s.now) // the pause is a fault: it ends with them
	in.pausedUntil = s.now + d
	s.stats.Pauses++
	s.logf("%s paused (SIGSTOP) for %s", in.owner(), d)
	s.at(in.pausedUntil, nil, func() { s.logf("%s resumes", in.owner()) })
}

func (s *leaseSim) kill() {
	in := s.pick()
	if in == nil || !s.faulty {
		return
	}
	s.stats.Kills++
	s.logf("%s killed (-9), holding %d", in.owner(), in.im.Owned())
	s.markGone(in.owner(), "killed")
	in.dead = true
	in.life++
	in.workers, in.stopping = map[string]*lsWorker{}, map[string]*lsWorker{}
	delay := time.Duration(s.rng.Int64N(int64(2 * lsPeriod)))
	s.at(s.now+delay, nil, func() { s.restart(in) })
}

func (s *leaseSim) restart(in *lsInstance) {
	if !in.dead {
		return
	}
	s.stats.Restarts++
	in.dead = false
	in.pausedUntil = 0
	s.startLife(in, 0)
}

func (s *leaseSim) slowObserver() {
	in := s.pick()
	if in == nil || !s.faulty {
		return
	}
	in.slow = time.Duration(500+s.rng.IntN(3500)) * time.Millisecond
	s.stats.SlowObservers++
	s.logf("%s is a slow observer: its reads answer %s late", in.owner(), in.slow)
}

// outage makes a stretch of store calls fail or lose their answers.
func (s *leaseSim) outage() {
	d := time.Duration(1+s.rng.IntN(8)) * time.Second
	s.logf("store outage for %s", d)
	until := s.now + d
	s.outageUntil = max(s.outageUntil, until)
}

func (s *leaseSim) endFaults() {
	s.faulty = false
	s.logf("faults stop")
	for _, in := range s.insts {
		in.slow = 0
		if in.dead {
			s.restart(in)
		}
	}
}

// ---------------------------------------------------------------------------
// Instances: each process life steps the real instance machine
// (internal/instance), which owns its incarnation's lease.Machine, as the
// input does; the simulation performs its actions against the store.

func (s *leaseSim) addInstance(delay time.Duration) {
	in := &lsInstance{
		id:       fmt.Sprintf("i%d", len(s.insts)+1),
		origin:   time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(s.rng.Int64N(int64(1000 * time.Hour)))),
		rate:     1 + (s.rng.Float64()-0.5)/500,
		workers:  map[string]*lsWorker{},
		stopping: map[string]*lsWorker{},
	}
	s.insts = append(s.insts, in)
	s.startLife(in, delay)
}

// startLife starts a process life: a new instance machine and its first
// incarnation.
func (s *leaseSim) startLife(in *lsInstance, delay time.Duration) {
	in.n++
	in.self = in.id + "#" + strconv.Itoa(in.n)
	in.im = instance.New(instance.Config{Scope: lsScope, Leases: &instance.LeaseConfig{
		Period: lsPeriod, RenewInterval: lsRenew, BalanceInterval: lsBalance, MaxMoves: lsMaxMoves,
	}})
	in.workers, in.stopping = map[string]*lsWorker{}, map[string]*lsWorker{}
	in.pending, in.inFlight = nil, 0
	s.logf("%s starts", in.self)
	self := in.self
	s.at(s.now+delay, in, func() {
		s.feed(in, instance.Start{Now: in.clock(s.now), Self: self, Membership: instance.Membership{Epoch: 1, Partitions: s.parts}})
	})
}

// feed steps in's machine and performs its actions in order.
func (s *leaseSim) feed(in *lsInstance, input instance.Input) {
	for _, a := range in.im.Step(input) {
		s.perform(in, a)
	}
}

// answer feeds input to in's machine at the current instant, as its own
// event (never inside the step that asked).
func (s *leaseSim) answer(in *lsInstance, input instance.Input) {
	im := in.im
	s.at(s.now, in, func() {
		if in.im == im {
			s.feed(in, input)
		}
	})
}

func (s *leaseSim) perform(in *lsInstance, a instance.Action) {
	switch a := a.(type) {
	case instance.RenewHeartbeat:
		s.renew(in, a)
	case instance.ReadHeartbeats:
		var hbs []store.Heartbeat
		s.call(in, true, func() error {
			var err error
			hbs, err = s.mem.ListHeartbeats(bg, lsScope)
			return err
		}, func(err error) {
			s.feed(in, instance.HeartbeatsRead{Owner: a.Owner, Now: in.clock(s.now), Heartbeats: hbs, Err: err})
		})
	case instance.TakeOver:
		s.call(in, false, func() error {
			_, err := s.mem.TakeOverHeartbeat(bg, a.Seen, a.Owner)
			if err == nil {
				s.stats.TakeOvers++
				s.logf("%s takes over the heartbeat of %s (counter %d, holding %d)", a.Owner, a.Seen.Owner, a.Seen.Counter, a.Seen.Held)
			}
			return err
		}, func(err error) {
			s.feed(in, instance.TookOver{Owner: a.Owner, Seen: a.Seen, Err: err})
		})
	case instance.ReadLeases:
		var cps []store.Checkpoint
		s.call(in, true, func() error {
			var err error
			cps, err = s.mem.ListCheckpoints(bg, lsScope)
			if err == nil && len(cps) < len(s.parts) {
				s.create(a.Owner, cps, a.CreateBudget)
				cps, err = s.mem.ListCheckpoints(bg, lsScope)
			}
			return err
		}, func(err error) {
			s.feed(in, instance.LeasesRead{Owner: a.Owner, Now: in.clock(s.now), Checkpoints: cps, Err: err})
		})
	case instance.ClaimLease:
		s.queue(in, a.Owner, func(done func()) { s.claim(in, a, done) })
	case instance.ReleaseLease:
		s.queue(in, a.Owner, func(done func()) { s.release(in, a, done) })
	case instance.StartWorker:
		s.stats.Claims++
		w := &lsWorker{part: a.Partition, lease: a.Lease, owner: in.self}
		in.workers[a.Partition] = w
		s.workerTick(in, w)
	case instance.StopWorker:
		s.stopWorker(in, a)
	case instance.DeleteHeartbeat:
		s.call(in, false, func() error { return s.mem.DeleteHeartbeat(bg, a.Heartbeat) }, func(error) {})
	case instance.NewIncarnation:
		old := in.self
		s.markGone(old, a.Reason)
		if strings.HasPrefix(a.Reason, "heartbeat not renewed") {
			s.stats.StaleStops++
		}
		in.n++
		in.self = in.id + "#" + strconv.Itoa(in.n)
		in.pending = nil // the gone incarnation's calls not sent yet are never sent
		s.logf("%s is gone (%s); rejoining as %s", old, a.Reason, in.self)
		s.answer(in, instance.Incarnation{Now: in.clock(s.now), Self: in.self})
	case instance.Wake:
		in.wakeTok++
		tok := in.wakeTok
		// A millisecond late: the tick's reading of the instance's clock is
		// at or past the instant asked.
		s.after(in, max(a.At.Sub(in.clock(s.now)), 0)+time.Millisecond, func() {
			if in.wakeTok == tok {
				s.feed(in, instance.Tick{Now: in.clock(s.now)})
			}
		})
	case instance.EpochChanged, instance.Publish, instance.Exit:
		// One epoch, no publisher, no exit in the lease simulation.
	}
}

// markGone records when an incarnation was gone, for the oracle.
func (s *leaseSim) markGone(owner, why string) {
	if _, ok := s.goneAt[owner]; !ok {
		s.goneAt[owner], s.goneStep[owner] = s.now, s.step
		s.logf("%s is gone: %s", owner, why)
	}
}

// sentAfterGone reports whether a write sent during event step by owner
// was sent once owner was gone.
func (s *leaseSim) sentAfterGone(owner string, step uint64) bool {
	g, ok := s.goneStep[owner]
	return ok && step > g
}

func (s *leaseSim) renew(in *lsInstance, a instance.RenewHeartbeat) {
	hb := a.Heartbeat
	start := in.clock(s.now)
	sent, sentStep := s.now, s.step
	var got store.Heartbeat
	s.call(in, false, func() error {
		var err error
		got, err = s.mem.RenewHeartbeat(bg, hb, a.Held)
		if err == nil && s.sentAfterGone(hb.Owner, sentStep) {
			s.fail(CheckWriteAfterGone, "the heartbeat renewal of %s sent at %s, after it was gone at %s, took effect", hb.Owner, sent, s.goneAt[hb.Owner])
		}
		return err
	}, func(err error) {
		if err == nil {
			s.stats.Renewals++
		}
		if errors.Is(err, store.ErrFenced) {
			s.stats.RenewFenced++
			s.markGone(hb.Owner, "its heartbeat renewal was fenced: "+err.Error())
		}
		if s.cfg.Variant == RenewAfterTakeover && errors.Is(err, store.ErrFenced) {
			// Broken: read the fence as an unknown outcome and go on.
			err = errLSLost
		}
		s.feed(in, instance.Renewed{Owner: hb.Owner, Start: start, Heartbeat: got, Err: err})
	})
}

// stopWorker performs StopWorker: the worker is stopped at once (it sends
// nothing after); WorkerStopped is reported once its write in flight, if
// any, answered.
func (s *leaseSim) stopWorker(in *lsInstance, a instance.StopWorker) {
	w := in.workers[a.Partition]
	if w == nil {
		return
	}
	if s.cfg.Variant == RenewAfterTakeover && strings.HasPrefix(a.Reason, "incarnation gone") {
		return // broken: the workers of a gone incarnation keep writing
	}
	if s.cfg.Variant == KeepLostPartition && (strings.HasPrefix(a.Reason, "lease lost") || strings.HasPrefix(a.Reason, "incarnation gone")) {
		return // broken: the machine's stop of a lost partition is dropped
	}
	delete(in.workers, a.Partition)
	w.stopped = true
	if strings.HasPrefix(a.Reason, "lease lost") || strings.HasPrefix(a.Reason, "incarnation gone") {
		s.lost(1, "%s: partition %s stopped: %s", w.owner, w.part, a.Reason)
	}
	if w.inflight {
		in.stopping[a.Partition] = w
		return
	}
	s.answer(in, instance.WorkerStopped{Partition: a.Partition})
}

// lost counts leases lost; once the schedule settled, that is a violation.
func (s *leaseSim) lost(n int, format string, args ...any) {
	s.stats.Lost += n
	s.logf(format, args...)
	if s.lostWatch {
		s.fail(CheckLeaseLost, "%d leases lost without a fault: %s", n, fmt.Sprintf(format, args...))
	}
}

// create writes up to budget missing first checkpoints (one writer wins
// each), in owner's rendezvous order, as the input's ReadLeases.
func (s *leaseSim) create(owner string, cps []store.Checkpoint, budget int) {
	have := make(map[string]bool, len(cps))
	for _, cp := range cps {
		have[cp.Partition] = true
	}
	var missing []string
	for _, p := range s.parts {
		if !have[p] {
			missing = append(missing, p)
		}
	}
	lease.Rendezvous(owner, missing)
	for _, p := range missing[:min(len(missing), budget)] {
		_, err := s.mem.CreateCheckpoint(bg, store.Checkpoint{Key: store.Key{Scope: lsScope, Partition: p}, Cursor: []byte("c0"), Generation: 1, Epoch: 1})
		if err != nil && !errors.Is(err, store.ErrFenced) {
			panic(err)
		}
	}
}

// queue queues a claim or release of owner's, sent at most lsInFlight at
// once (pump).
func (s *leaseSim) queue(in *lsInstance, owner string, op func(done func())) {
	in.pending = append(in.pending, lsOp{owner: owner, do: op})
	s.pump(in)
}

// pump sends the queued claims and releases, at most lsInFlight at once.
func (s *leaseSim) pump(in *lsInstance) {
	life := in.life
	for in.inFlight < lsInFlight && len(in.pending) > 0 {
		op := in.pending[0]
		in.pending = in.pending[1:]
		if op.owner != in.self {
			continue // queued by a gone incarnation: never sent
		}
		in.inFlight++
		op.do(func() {
			if in.life != life {
				return
			}
			in.inFlight--
			s.pump(in)
		})
	}
}

func (s *leaseSim) claim(in *lsInstance, a instance.ClaimLease, done func()) {
	c := a.Claim
	sent, sentStep := s.now, s.step
	var cp store.Checkpoint
	s.call(in, false, func() error {
		var err error
		cp, err = s.mem.ClaimLease(bg, store.Key{Scope: lsScope, Partition: c.Partition}, c.Expect, a.Owner)
		if err == nil && s.sentAfterGone(a.Owner, sentStep) && cp.Lease == store.ClaimedLease(c.Expect, a.Owner) {
			s.fail(CheckWriteAfterGone, "the claim of %s by %s sent at %s, after it was gone at %s, took effect", c.Partition, a.Owner, sent, s.goneAt[a.Owner])
		}
		return err
	}, func(err error) {
		defer done()
		if err == nil && c.Kind == lease.ClaimExpired {
			s.stats.ClaimsExpired++
		}
		s.feed(in, instance.Claimed{Owner: a.Owner, Partition: c.Partition, Lease: cp.Lease, Err: err})
	})
}

// release hands a lease off after the stopped worker's write in flight
// answered (as leasing.Holder's semaphore makes it).
func (s *leaseSim) release(in *lsInstance, a instance.ReleaseLease, done func()) {
	send := func() {
		s.call(in, false, func() error {
			_, err := s.mem.ReleaseLease(bg, store.Key{Scope: lsScope, Partition: a.Partition}, a.Lease)
			return err
		}, func(err error) {
			defer done()
			if err == nil {
				s.stats.Releases++
			}
			s.feed(in, instance.Released{Owner: a.Owner, Partition: a.Partition, Err: err})
		})
	}
	if w := in.stopping[a.Partition]; w != nil && w.inflight {
		prev := w.afterWrite
		w.afterWrite = func() {
			if prev != nil {
				prev()
			}
			send()
		}
		return
	}
	send()
}

// ---------------------------------------------------------------------------
// Workers: fenced checkpoint writes at random instants.

func (s *leaseSim) workerTick(in *lsInstance, w *lsWorker) {
	mean := max(2*time.Second, time.Duration(len(s.parts))*10*time.Millisecond)
	d := mean/2 + time.Duration(s.wrng.Int64N(int64(mean)))
	s.after(in, d, func() {
		if w.stopped {
			return
		}
		s.workerWrite(in, w)
	})
}

func (s *leaseSim) workerWrite(in *lsInstance, w *lsWorker) {
	k := store.Key{Scope: lsScope, Partition: w.part}
	sent, sentStep := s.now, s.step
	w.inflight = true
	finish := func() {
		w.inflight = false
		if f := w.afterWrite; f != nil {
			w.afterWrite = nil
			f()
		}
		if w.stopped {
			if in.stopping[w.part] == w {
				delete(in.stopping, w.part)
				s.answer(in, instance.WorkerStopped{Partition: w.part})
			}
			return
		}
		s.workerTick(in, w)
	}
	if !w.loaded {
		var cp store.Checkpoint
		s.call(in, false, func() error {
			var err error
			cp, err = s.mem.LoadCheckpoint(bg, k)
			return err
		}, func(err error) {
			if err == nil {
				if cp.Lease != w.lease {
					s.workerLost(in, w, fmt.Sprintf("the stored lease is %s, this worker held %s", cp.Lease, w.lease))
				} else {
					w.loaded, w.cursor, w.gen = true, cp.Cursor, cp.Generation
				}
			}
			finish()
		})
		return
	}
	p := store.Promotion{
		Key: k, FromCursor: w.cursor, FromGeneration: w.gen,
		To: []byte("c" + strconv.FormatUint(w.gen, 10) + "." + w.owner), WitnessID: fmt.Sprintf("w%d-%s", w.gen, strings.ReplaceAll(w.owner, "#", "-")),
		Epoch: 1, Lease: w.lease,
	}
	if s.cfg.Variant == PromoteWithoutLease {
		p.Lease = store.Lease{}
	}
	var got store.Checkpoint
	s.call(in, false, func() error {
		before, _ := s.mem.LoadCheckpoint(bg, k)
		var err error
		got, err = s.mem.Promote(bg, p)
		if err == nil && got.Generation > before.Generation {
			s.stats.Promotions++
			if before.Lease.Owner != w.owner {
				s.fail(CheckLeaseWriter, "the promotion of %s to generation %d by %s took effect while the lease named %s", w.part, got.Generation, w.owner, before.Lease)
			}
			if s.sentAfterGone(w.owner, sentStep) {
				s.fail(CheckWriteAfterGone, "the promotion of %s to generation %d by %s, sent at %s after it was gone at %s (lease %s), took effect", w.part, got.Generation, w.owner, sent, s.goneAt[w.owner], before.Lease)
			}
		}
		return err
	}, func(err error) {
		var fe *store.FenceError
		switch {
		case err == nil:
			w.cursor, w.gen = got.Cursor, got.Generation
		case errors.As(err, &fe) && fe.Winner != nil && fe.Winner.Lease != w.lease:
			s.stats.PromotionsFenced++
			s.workerLost(in, w, fmt.Sprintf("promote fenced: the lease is now %s, this worker held %s", fe.Winner.Lease, w.lease))
		default:
			w.loaded = false // unknown outcome or a stale cursor: load again
		}
		finish()
	})
}

// workerLost is a worker finding its lease gone (chain.LeaseGone): the
// machine is told (WorkerLost) and stops it; a worker the machine no
// longer runs (a gone incarnation's, under RenewAfterTakeover) just stops.
func (s *leaseSim) workerLost(in *lsInstance, w *lsWorker, why string) {
	if w.stopped {
		return
	}
	if in.workers[w.part] != w || w.owner != in.self {
		w.stopped = true
		s.lost(1, "%s: partition %s lost: %s", w.owner, w.part, why)
		return
	}
	s.feed(in, instance.WorkerLost{Partition: w.part, Reason: why})
}

// ---------------------------------------------------------------------------
// Store calls with latency and faults.

// call sends one store call from in: apply runs in the store when the
// request arrives (unless the fault injector fails it first), answer runs
// at in when the answer arrives, or at the store timeout. read marks a
// read (a slow observer's reads answer late).
func (s *leaseSim) call(in *lsInstance, read bool, apply func() error, answer func(error)) {
	r := s.frng
	up := time.Duration(1+r.IntN(15)) * time.Millisecond
	down := time.Duration(1+r.IntN(15)) * time.Millisecond
	fail, lose := false, false
	if s.faulty {
		if read {
			down += in.slow
		}
		switch k := r.IntN(100); {
		case s.now < s.outageUntil && k < 60:
			fail = k < 30
			lose = !fail
		case k < 3:
			fail = true
		case k < 6:
			lose = true
		case k < 7:
			down += lsTimeout + time.Second
		}
	}
	if fail {
		s.stats.FailedCalls++
		s.after(in, up+down, func() { answer(errLSUnavailable) })
		return
	}
	var err error
	s.at(s.now+up, nil, func() { err = apply() })
	if lose {
		s.stats.UnknownOutcomes++
		s.after(in, up+down, func() { answer(errLSLost) })
		return
	}
	if up+down >= lsTimeout {
		s.stats.UnknownOutcomes++
		s.after(in, lsTimeout, func() { answer(errLSTimeout) })
		return
	}
	s.after(in, up+down, func() { answer(err) })
}

// ---------------------------------------------------------------------------
// Liveness.

// liveInstances lists the instances whose incarnation is live: running,
// not paused, not gone, and its stored heartbeat not taken over.
func (s *leaseSim) liveInstances() []*lsInstance {
	hbs, err := s.mem.ListHeartbeats(bg, lsScope)
	if err != nil {
		panic(err)
	}
	taken := map[string]bool{}
	for _, hb := range hbs {
		taken[hb.Owner] = hb.Taken()
	}
	var out []*lsInstance
	for _, in := range s.insts {
		if !in.dead && in.pausedUntil <= s.now && in.im.Gone() == "" && !taken[in.owner()] {
			out = append(out, in)
		}
	}
	return out
}

// ownership checks that every partition is held by exactly one live
// incarnation whose machine agrees with the stored lease; "" when so.
func (s *leaseSim) ownershipProblem() string {
	cps, err := s.mem.ListCheckpoints(bg, lsScope)
	if err != nil {
		return err.Error()
	}
	if len(cps) != len(s.parts) {
		return fmt.Sprintf("%d checkpoints of %d partitions", len(cps), len(s.parts))
	}
	live := map[string]*lsInstance{}
	for _, in := range s.liveInstances() {
		live[in.owner()] = in
	}
	held := map[string]string{}
	for _, in := range s.insts {
		if in.dead {
			continue
		}
		for _, p := range in.im.Held() {
			if o, dup := held[p]; dup {
				return fmt.Sprintf("partition %s held by %s and %s", p, o, in.owner())
			}
			held[p] = in.owner()
		}
	}
	for _, cp := range cps {
		in := live[cp.Lease.Owner]
		if in == nil {
			return fmt.Sprintf("partition %s: lease %s names no live incarnation", cp.Partition, cp.Lease)
		}
		if l, ok := in.im.HeldLease(cp.Partition); !ok || l != cp.Lease {
			return fmt.Sprintf("partition %s: stored lease %s, but %s holds %v (%v)", cp.Partition, cp.Lease, in.owner(), l, ok)
		}
		if w := in.workers[cp.Partition]; w == nil || w.stopped {
			return fmt.Sprintf("partition %s: held by %s without a running worker", cp.Partition, in.owner())
		}
	}
	// No worker of a running instance runs under a lease the store no
	// longer has: a lost lease's worker is stopped (its machine told to).
	stored := make(map[string]store.Lease, len(cps))
	for _, cp := range cps {
		stored[cp.Partition] = cp.Lease
	}
	for _, in := range s.insts {
		if in.dead || in.pausedUntil > s.now {
			continue
		}
		for _, p := range slices.Sorted(maps.Keys(in.workers)) {
			if w := in.workers[p]; !w.stopped && w.lease != stored[p] {
				return fmt.Sprintf("partition %s: a worker of %s still runs under lease %s, the stored lease is %s", p, w.owner, w.lease, stored[p])
			}
		}
	}
	return ""
}

func (s *leaseSim) ownership() string {
	var b strings.Builder
	for _, in := range s.insts {
		state := "live"
		switch {
		case in.dead:
			state = "dead"
		case in.im.Gone() != "":
			state = "gone"
		}
		fmt.Fprintf(&b, "%s(%s) holds %d; ", in.owner(), state, in.im.Owned())
	}
	return b.String()
}

// fairProblem checks that every live instance holds its fair share.
func (s *leaseSim) fairProblem() string {
	live := s.liveInstances()
	for _, in := range s.insts {
		if !in.dead && !slices.Contains(live, in) {
			return fmt.Sprintf("%s runs but its incarnation is not live (gone, or its heartbeat taken over) and did not rejoin", in.owner())
		}
	}
	n := len(live)
	hi := (len(s.parts) + n - 1) / n
	lo := len(s.parts) / n
	for _, in := range live {
		if o := in.im.Owned(); o < lo || o > hi {
			return fmt.Sprintf("%s holds %d, its share is %d..%d (%d live)", in.owner(), o, lo, hi, n)
		}
	}
	return ""
}

// watch polls, every half second from the instant the faults stopped
// (from), for every partition held by a live incarnation (by the deadline
// ownedBy), then for fair shares (within balanceBound of that), then
// watches for lost leases until the end.
func (s *leaseSim) watch(from, ownedBy time.Duration) {
	// A fault's effects outlast it: an instance paused until the faults
	// stopped finds itself stale at its next round, and the others see a
	// heartbeat that stopped moving before then as dead up to a lease
	// period and a renew interval later (and the zombie learns at its next
	// renewal). Nothing counts as settled before then.
	settled := from
	if !s.cfg.NoFaults {
		settled += lsPeriod + 2*lsRenew
	}
	var poll func()
	poll = func() {
		if s.now < settled {
			s.at(settled, nil, poll)
			return
		}
		if s.stats.Owned == 0 {
			if why := s.ownershipProblem(); why != "" {
				if s.now >= ownedBy {
					s.fail(CheckLeaseLiveness, "%s after the faults stopped: %s (%s)", s.now-from, why, s.ownership())
					return
				}
				s.at(s.now+500*time.Millisecond, nil, poll)
				return
			}
			s.stats.Owned = max(s.now-from, 1)
			s.logf("every partition held by a live incarnation: %s", s.ownership())
		}
		why := s.fairProblem()
		if why == "" {
			// Releases of a balance round leave partitions unowned for a
			// moment: fair means fair and every partition held.
			why = s.ownershipProblem()
		}
		if why != "" {
			if s.now-from >= s.stats.Owned+s.balanceBound() {
				s.fail(CheckLeaseLiveness, "%s after the faults stopped, the shares are not fair: %s (%s)", s.now-from, why, s.ownership())
				return
			}
			s.at(s.now+500*time.Millisecond, nil, poll)
			return
		}
		s.stats.Converged = max(s.now-from, 1)
		s.lostWatch = true
		s.logf("converged: %s", s.ownership())
	}
	poll()
}
