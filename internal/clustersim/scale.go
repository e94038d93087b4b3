package clustersim

import (
	"container/heap"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tidemark/tidemark/internal/instance"
	"github.com/tidemark/tidemark/internal/lease"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/store/memstore"
)

// The scale simulation (RunScale): the lease protocol at 10,000 to 100,000
// partitions in simulated time. Each instance's process steps the real
// instance machine (internal/instance, owning the real lease.Machine), as
// RunLeases does; the simulation performs its actions the way
// internal/leasing does (the same store calls, deadlines, create budget and
// 16 claims or releases in flight) against the real in-memory store, every
// request passing through a store model: a latency distribution, per-key
// and optional table-wide capacity with throttling answers retried as the
// AWS SDK's standard retryer does, and optionally a single server that
// serves requests one at a time (dynalite's one Node.js thread).
//
// One run measures, in order: balance after a cold start (every partition
// held once, no instance above its share), the cold-start work (each
// partition's first page: a checkpoint load, a witness and a fenced
// promotion), the idle store requests a second, balance after an added
// instance, and the takeover after kill -9 of one instance (its partitions
// held by the others). Nothing sleeps or reads a clock; one seed decides
// everything.

// StoreModel is how the simulated store answers.
type StoreModel struct {
	Name string
	// Median and P99 of a request's round trip outside the server
	// (network and the service's own latency), lognormal.
	Median, P99 time.Duration
	// KeyReadUnits, KeyWriteUnits: capacity units a second one partition
	// key serves (0: unlimited); a request beyond them is throttled.
	KeyReadUnits, KeyWriteUnits float64
	// TableReadUnits, TableWriteUnits: the table's capacity units a second
	// (0: unlimited, as on-demand below its quota).
	TableReadUnits, TableWriteUnits float64
	// Servers > 0: requests are served one at a time by that many servers
	// (a queue), each taking Service plus ServicePerItem per item past the
	// first of a batch; 0: no queue.
	Servers                 int
	Service, ServicePerItem time.Duration
	// MaxAttempts and MaxBackoff are the SDK retryer's (the store's
	// defaults: max_retries 7, max_backoff 2 s).
	MaxAttempts int
	MaxBackoff  time.Duration
}

// DynamoDBModel is DynamoDB as its documentation describes it: single-digit
// millisecond requests, each partition key limited to 1,000 write units and
// 3,000 read units a second, on-demand (no table limit).
func DynamoDBModel() StoreModel {
	return StoreModel{
		Name: "dynamodb", Median: 6 * time.Millisecond, P99: 25 * time.Millisecond,
		KeyReadUnits: 3000, KeyWriteUnits: 1000,
		MaxAttempts: 8, MaxBackoff: 2 * time.Second,
	}
}

// DynaliteModel is dynalite on the benchmark machine: one server thread
// (one Node.js process) taking 0.8 ms a request, its measured ceiling of
// about 1,240 writes a second (618 pages/s of two writes,
// docs/benchmarks.md), and 40 µs per further item of a batch (one
// ListCheckpoints of 1,000 partitions, a Query and ten BatchGetItems of
// 100, took 36–63 ms: BenchmarkListCheckpointsDynalite,
// internal/dynamostore), with a 0.4 ms median round trip besides (one
// sequential promotion took 1.1–1.5 ms on an idle machine), and no
// capacity limits or throttling (dynalite has none).
func DynaliteModel() StoreModel {
	return StoreModel{
		Name: "dynalite", Median: 400 * time.Microsecond, P99: 2 * time.Millisecond,
		Servers: 1, Service: 800 * time.Microsecond, ServicePerItem: 40 * time.Microsecond,
		MaxAttempts: 8, MaxBackoff: 2 * time.Second,
	}
}

// ScaleConfig configures one scale run.
type ScaleConfig struct {
	Seed                  uint64
	Partitions, Instances int
	Model                 StoreModel
	// PhaseTimeout bounds each phase (default 10 minutes); Settle is the
	// wait before the idle window, the added instance and the kill
	// (default 5 s); Idle the idle window (default 45 s).
	PhaseTimeout, Settle, Idle time.Duration
	// Poll is how often balance is checked (default 500 ms).
	Poll time.Duration
	// Existing: the scope's checkpoints (and its partition index) exist
	// before the instances start, unleased: a restart of every instance,
	// not a new scope (default: a new scope, every checkpoint created by
	// the instances' lease reads).
	Existing bool
	// LegacyIndex (with Existing): the scope's partition index is in the
	// layout of releases before issue 35 (64 string sets under the one key
	// <scope>##partitions, about 40 bytes a name), which every listing
	// still reads whole, instead of this release's entries.
	LegacyIndex bool
	// ListTimeout bounds one checkpoint listing of a lease read (default
	// the store timeout internal/leasing gives it: the renew interval). A
	// longer one is a what-if of the simulation, not the product's.
	ListTimeout time.Duration
}

// ScalePhase is the outcome of one phase: how long it took (Done false: not
// within the timeout, At the timeout) and what the store did meanwhile.
type ScalePhase struct {
	Done bool
	At   time.Duration
	// Owned: the partitions each live instance held at the end.
	Owned []int
	ScaleCounts
}

// ScaleCounts counts store requests (every attempt, throttled ones too).
type ScaleCounts struct {
	Requests   map[string]int
	Throttled  int
	ReadUnits  float64
	WriteUnits float64
	Timeouts   int // calls that failed on their deadline
	LeaseReads int
	Lost       int // leases lost (a worker stopped as lost)
}

// ScaleResult is the outcome of RunScale.
type ScaleResult struct {
	Config ScaleConfig
	// ColdBalanced: every partition held once, none above its share;
	// ColdWork: every partition's first page promoted.
	ColdBalanced, ColdWork ScalePhase
	// Idle: the idle window (requests per second: IdleRate).
	Idle ScalePhase
	// Added: balanced over one more instance; Takeover: every partition
	// held by the instances left after kill -9 of one (TakeoverBalanced:
	// and balanced over them).
	Added, Takeover, TakeoverBalanced ScalePhase
	// DoubleHeld: the most partitions ever held by two live instances at
	// one poll (0 when the protocol is right).
	DoubleHeld int
	// Disagree: the first time a live instance's machine held other
	// partitions than the workers the simulation runs for it, checked at
	// the end of every phase ("" when never).
	Disagree string
	// Events is the number of simulated events run.
	Events uint64
}

// IdleRate is the idle window's requests a second, by operation, and in
// all.
func (r ScaleResult) IdleRate() (map[string]float64, float64) {
	out := map[string]float64{}
	n := 0
	secs := r.Config.Idle.Seconds()
	for op, k := range r.Idle.Requests {
		out[op] = float64(k) / secs
		n += k
	}
	return out, float64(n) / secs
}

var errScaleThrottled = errors.New("scalesim: throttled (ProvisionedThroughputExceededException), retries exhausted")
var errScaleTimeout = errors.New("scalesim: no answer before the call's deadline (the write may have taken effect)")

const scaleScope = "scale"

type scaleSim struct {
	cfg  ScaleConfig
	rng  *rand.Rand // latencies, backoffs
	mem  *memstore.Store
	part []string
	// sigma of the lognormal latency.
	sigma float64

	now  time.Duration
	seq  uint64
	q    lsQueue
	runs uint64

	insts []*scInstance
	// holders counts the live workers of each partition; held counts the
	// partitions with at least one, double those with two or more.
	holders      map[string]int
	held, double int
	// done: partitions whose first page was promoted.
	done map[string]bool
	// indexed: partitions in the partition index; indexBytes the bytes of
	// the entries under each of its keys (dynamostore's layout: one
	// keys-only item per partition under key store.PartitionIndexKey),
	// legacyBytes those of an earlier release's shards under its one key.
	indexed     map[string]bool
	indexBytes  [store.PartitionIndexKeys]int
	legacyBytes int

	// The store model's state.
	buckets    map[string]*[2]scBucket // per partition key: read, write
	tableR     scBucket
	tableW     scBucket
	serverFree []time.Duration

	counts ScaleCounts
	res    ScaleResult
}

type scBucket struct {
	tokens float64
	at     time.Duration
	init   bool
}

type scInstance struct {
	id       string
	n, life  int
	dead     bool
	origin   time.Time
	im       *instance.Machine
	self     string
	workers  map[string]store.Lease
	wakeTok  int
	pending  []lsOp
	inFlight int
}

// RunScale runs one scale measurement.
func RunScale(cfg ScaleConfig) ScaleResult {
	if cfg.Instances <= 0 {
		cfg.Instances = 3
	}
	if cfg.Partitions <= 0 {
		cfg.Partitions = 1000
	}
	if cfg.Model.Name == "" {
		cfg.Model = DynamoDBModel()
	}
	if cfg.Model.MaxAttempts <= 0 {
		cfg.Model.MaxAttempts = 1
	}
	if cfg.PhaseTimeout <= 0 {
		cfg.PhaseTimeout = 10 * time.Minute
	}
	if cfg.Settle <= 0 {
		cfg.Settle = 5 * time.Second
	}
	if cfg.Idle <= 0 {
		cfg.Idle = 45 * time.Second
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 500 * time.Millisecond
	}
	if cfg.ListTimeout <= 0 {
		cfg.ListTimeout = lsTimeout
	}
	m := cfg.Model
	s := &scaleSim{
		cfg:     cfg,
		rng:     rand.New(rand.NewPCG(cfg.Seed, 0x5ca1e)),
		mem:     memstore.New(),
		holders: map[string]int{},
		done:    map[string]bool{},
		indexed: map[string]bool{},
		buckets: map[string]*[2]scBucket{},
	}
	if m.P99 > m.Median && m.Median > 0 {
		s.sigma = math.Log(float64(m.P99)/float64(m.Median)) / 2.326
	}
	s.serverFree = make([]time.Duration, max(m.Servers, 0))
	for i := range cfg.Partitions {
		// 36-character names, as the dynalite benchmark's.
		s.part = append(s.part, fmt.Sprintf("%08x-0000-4000-8000-%012x", uint32(i)*2654435761, i))
	}
	slices.Sort(s.part)
	if cfg.Existing {
		for _, p := range s.part {
			if _, err := s.mem.CreateCheckpoint(bg, store.Checkpoint{Key: store.Key{Scope: scaleScope, Partition: p}, Cursor: []byte("c0"), Generation: 1, Epoch: 1}); err != nil {
				panic(err)
			}
			if cfg.LegacyIndex {
				s.indexed[p] = true
				s.legacyBytes += scLegacyIndexNameBytes
			} else {
				s.index(p)
			}
		}
	}
	s.res.Config = cfg
	s.run()
	s.res.Events = s.runs
	return s.res
}

// ---------------------------------------------------------------------------
// The schedule of phases.

func (s *scaleSim) run() {
	for range s.cfg.Instances {
		s.addInstance(time.Duration(s.rng.IntN(500)) * time.Millisecond)
	}
	s.phase(0, s.balanced, func(p ScalePhase) {
		s.res.ColdBalanced = p
		s.phase(0, func() bool { return len(s.done) == len(s.part) }, func(p ScalePhase) {
			s.res.ColdWork = p
			s.at(s.now+s.cfg.Settle, nil, func() {
				start := s.now
				s.counts = ScaleCounts{}
				s.at(s.now+s.cfg.Idle, nil, func() {
					s.res.Idle = ScalePhase{Done: true, At: s.now - start, Owned: s.owned(), ScaleCounts: s.takeCounts()}
					s.addInstance(0)
					s.phase(s.now, s.balanced, func(p ScalePhase) {
						s.res.Added = p
						s.at(s.now+s.cfg.Settle, nil, func() {
							s.kill(s.insts[0])
							from := s.now
							s.phase(from, func() bool { return s.held == len(s.part) && s.double == 0 }, func(p ScalePhase) {
								s.res.Takeover = p
								s.phase(from, s.balanced, func(p ScalePhase) {
									s.res.TakeoverBalanced = p
									s.q = nil // the end
								})
							})
						})
					})
				})
			})
		})
	})
	for s.q.Len() > 0 {
		e := heap.Pop(&s.q).(*lsEvent)
		s.now = e.at
		s.runs++
		e.fn()
	}
}

// phase polls until cond holds (or the phase timeout), then calls next with
// the time since from and the counts since the phase began.
func (s *scaleSim) phase(from time.Duration, cond func() bool, next func(ScalePhase)) {
	s.counts = ScaleCounts{}
	deadline := s.now + s.cfg.PhaseTimeout
	var poll func()
	poll = func() {
		s.res.DoubleHeld = max(s.res.DoubleHeld, s.double)
		ok := cond()
		if ok || s.now >= deadline {
			s.checkAgreement()
			next(ScalePhase{Done: ok, At: s.now - from, Owned: s.owned(), ScaleCounts: s.takeCounts()})
			return
		}
		s.at(s.now+s.cfg.Poll, nil, poll)
	}
	poll()
}

// checkAgreement compares each live instance's machine (the partitions it
// holds) with the workers the simulation runs for it.
func (s *scaleSim) checkAgreement() {
	if s.res.Disagree != "" {
		return
	}
	for _, in := range s.insts {
		if in.dead {
			continue
		}
		held := in.im.Held()
		if len(held) != len(in.workers) {
			s.res.Disagree = fmt.Sprintf("%s at %s: its machine holds %d partitions, %d workers run", in.self, s.now, len(held), len(in.workers))
			return
		}
		for _, p := range held {
			if _, ok := in.workers[p]; !ok {
				s.res.Disagree = fmt.Sprintf("%s at %s: its machine holds %s, no worker runs it", in.self, s.now, p)
				return
			}
		}
	}
}

func (s *scaleSim) takeCounts() ScaleCounts {
	c := s.counts
	c.Requests = maps.Clone(c.Requests)
	return c
}

// balanced: every partition held by exactly one live instance, none above
// its share ceil(P / live instances) (the dynalite benchmark's test).
func (s *scaleSim) balanced() bool {
	if s.held != len(s.part) || s.double != 0 {
		return false
	}
	live := 0
	for _, in := range s.insts {
		if !in.dead {
			live++
		}
	}
	share := (len(s.part) + live - 1) / live
	for _, in := range s.insts {
		if !in.dead && len(in.workers) > share {
			return false
		}
	}
	return true
}

func (s *scaleSim) owned() []int {
	var out []int
	for _, in := range s.insts {
		if !in.dead {
			out = append(out, len(in.workers))
		}
	}
	return out
}

// ---------------------------------------------------------------------------
// Events.

func (s *scaleSim) at(t time.Duration, in *scInstance, fn func()) {
	s.seq++
	e := &lsEvent{at: max(t, s.now), seq: s.seq, fn: fn}
	if in != nil {
		// Local to in's process life: dropped once it was killed.
		life := in.life
		e.fn = func() {
			if !in.dead && in.life == life {
				fn()
			}
		}
	}
	heap.Push(&s.q, e)
}

func (in *scInstance) clock(now time.Duration) time.Time { return in.origin.Add(now) }

// ---------------------------------------------------------------------------
// Instances: the real instance machine, performed as internal/leasing does.

func (s *scaleSim) addInstance(delay time.Duration) {
	in := &scInstance{
		id:      fmt.Sprintf("i%d", len(s.insts)+1),
		origin:  time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(s.rng.Int64N(int64(1000 * time.Hour)))),
		workers: map[string]store.Lease{},
	}
	s.insts = append(s.insts, in)
	in.n++
	in.self = in.id + "#" + strconv.Itoa(in.n)
	in.im = instance.New(instance.Config{Scope: scaleScope, Leases: &instance.LeaseConfig{
		Period: lsPeriod, RenewInterval: lsRenew, BalanceInterval: lsBalance, MaxMoves: lsMaxMoves,
	}})
	self := in.self
	s.at(s.now+delay, in, func() {
		s.feed(in, instance.Start{Now: in.clock(s.now), Self: self, Membership: instance.Membership{Epoch: 1, Partitions: s.part}})
	})
}

// kill is kill -9: the process and its calls' answers are gone; its
// requests already sent still land in the store.
func (s *scaleSim) kill(in *scInstance) {
	in.dead = true
	in.life++
	for p := range in.workers {
		s.unhold(p)
	}
	in.workers = map[string]store.Lease{}
	in.pending = nil
}

func (s *scaleSim) feed(in *scInstance, input instance.Input) {
	for _, a := range in.im.Step(input) {
		s.perform(in, a)
	}
}

func (s *scaleSim) answer(in *scInstance, input instance.Input) {
	s.at(s.now, in, func() { s.feed(in, input) })
}

func (s *scaleSim) hold(p string) {
	s.holders[p]++
	switch s.holders[p] {
	case 1:
		s.held++
	case 2:
		s.double++
	}
}

func (s *scaleSim) unhold(p string) {
	s.holders[p]--
	switch s.holders[p] {
	case 0:
		s.held--
	case 1:
		s.double--
	}
}

func (s *scaleSim) perform(in *scInstance, a instance.Action) {
	hbKey := scaleScope + "##heartbeat"
	storeTimeout := lsTimeout
	switch a := a.(type) {
	case instance.RenewHeartbeat:
		start := in.clock(s.now)
		var got store.Heartbeat
		s.call(in, scReq{op: "UpdateItem", key: hbKey, wcu: 1}, lsPeriod-lsRenew, func() error {
			var err error
			got, err = s.mem.RenewHeartbeat(bg, a.Heartbeat, a.Held)
			return err
		}, func(err error) {
			s.feed(in, instance.Renewed{Owner: a.Heartbeat.Owner, Start: start, Heartbeat: got, Err: err})
		})
	case instance.ReadHeartbeats:
		var hbs []store.Heartbeat
		s.call(in, scReq{op: "Query", key: hbKey, rcu: 1}, storeTimeout, func() error {
			var err error
			hbs, err = s.mem.ListHeartbeats(bg, scaleScope)
			return err
		}, func(err error) {
			s.feed(in, instance.HeartbeatsRead{Owner: a.Owner, Now: in.clock(s.now), Heartbeats: hbs, Err: err})
		})
	case instance.TakeOver:
		s.call(in, scReq{op: "UpdateItem", key: hbKey, wcu: 1}, storeTimeout, func() error {
			_, err := s.mem.TakeOverHeartbeat(bg, a.Seen, a.Owner)
			return err
		}, func(err error) {
			s.feed(in, instance.TookOver{Owner: a.Owner, Seen: a.Seen, Err: err})
		})
	case instance.ReadLeases:
		s.counts.LeaseReads++
		s.readLeases(in, a)
	case instance.ClaimLease:
		s.queue(in, a.Owner, func(done func()) {
			c := a.Claim
			var cp store.Checkpoint
			s.call(in, scReq{op: "UpdateItem", key: c.Partition, wcu: 1}, storeTimeout, func() error {
				var err error
				cp, err = s.mem.ClaimLease(bg, store.Key{Scope: scaleScope, Partition: c.Partition}, c.Expect, a.Owner)
				return err
			}, func(err error) {
				done()
				s.feed(in, instance.Claimed{Owner: a.Owner, Partition: c.Partition, Lease: cp.Lease, Err: err})
			})
		})
	case instance.ReleaseLease:
		s.queue(in, a.Owner, func(done func()) {
			s.call(in, scReq{op: "UpdateItem", key: a.Partition, wcu: 1}, storeTimeout, func() error {
				_, err := s.mem.ReleaseLease(bg, store.Key{Scope: scaleScope, Partition: a.Partition}, a.Lease)
				return err
			}, func(err error) {
				done()
				s.feed(in, instance.Released{Owner: a.Owner, Partition: a.Partition, Err: err})
			})
		})
	case instance.StartWorker:
		if _, ok := in.workers[a.Partition]; !ok {
			s.hold(a.Partition)
		}
		in.workers[a.Partition] = a.Lease
		if !s.done[a.Partition] {
			s.firstPage(in, a.Partition, a.Lease)
		}
	case instance.StopWorker:
		// Stopped at once: an idle worker has no write in flight, and a
		// cold-start write still in flight is fenced by the lease (the
		// input's release waits for it; here the release does not).
		if _, ok := in.workers[a.Partition]; ok {
			delete(in.workers, a.Partition)
			s.unhold(a.Partition)
			if strings.HasPrefix(a.Reason, "lease lost") || strings.HasPrefix(a.Reason, "incarnation gone") {
				s.counts.Lost++
			}
		}
		s.answer(in, instance.WorkerStopped{Partition: a.Partition})
	case instance.DeleteHeartbeat:
		s.call(in, scReq{op: "DeleteItem", key: hbKey, wcu: 1}, storeTimeout, func() error { return s.mem.DeleteHeartbeat(bg, a.Heartbeat) }, func(error) {})
	case instance.NewIncarnation:
		in.n++
		in.self = in.id + "#" + strconv.Itoa(in.n)
		in.pending = nil
		s.answer(in, instance.Incarnation{Now: in.clock(s.now), Self: in.self})
	case instance.Wake:
		in.wakeTok++
		tok := in.wakeTok
		s.at(s.now+max(a.At.Sub(in.clock(s.now)), 0)+time.Millisecond, in, func() {
			if in.wakeTok == tok {
				s.feed(in, instance.Tick{Now: in.clock(s.now)})
			}
		})
	case instance.EpochChanged, instance.Publish, instance.Exit:
	}
}

// firstPage is a partition worker's cold-start work, as the dynalite
// benchmark's simulated provider makes it (5 events, then nothing): load
// the checkpoint (a consistent GetItem), put the page's witness (PutItem,
// about 1.7 KB: 2 write units) and promote it (a conditional UpdateItem
// fenced by the lease). A fenced promotion is the worker finding its lease
// gone.
func (s *scaleSim) firstPage(in *scInstance, p string, l store.Lease) {
	k := store.Key{Scope: scaleScope, Partition: p}
	still := func() bool { cur, ok := in.workers[p]; return ok && cur == l && !s.done[p] }
	// A failed call (throttled past its retries, or no answer in time) is
	// tried again a second later, from the load, while the worker runs.
	retry := func() {
		s.at(s.now+time.Second, in, func() {
			if still() {
				s.firstPage(in, p, l)
			}
		})
	}
	var cp store.Checkpoint
	s.call(in, scReq{op: "GetItem", key: p, rcu: 1}, 5*time.Second, func() error {
		var err error
		cp, err = s.mem.LoadCheckpoint(bg, k)
		return err
	}, func(err error) {
		if !still() {
			return
		}
		if err != nil {
			retry()
			return
		}
		s.call(in, scReq{op: "PutItem", key: p, wcu: 2}, 5*time.Second, func() error { return nil }, func(err error) {
			if !still() {
				return
			}
			if err != nil {
				retry()
				return
			}
			var got store.Checkpoint
			s.call(in, scReq{op: "UpdateItem", key: p, wcu: 1}, 5*time.Second, func() error {
				var err error
				got, err = s.mem.Promote(bg, store.Promotion{Key: k, FromCursor: cp.Cursor, FromGeneration: cp.Generation,
					To: []byte("c1"), WitnessID: "w1", Epoch: 1, Lease: l})
				return err
			}, func(err error) {
				var fe *store.FenceError
				switch {
				case err == nil && got.Generation > 1:
					s.done[p] = true
				case errors.As(err, &fe) && fe.Winner != nil && fe.Winner.Lease != l:
					if cur, ok := in.workers[p]; ok && cur == l {
						s.feed(in, instance.WorkerLost{Partition: p, Reason: "promote fenced"})
					}
				case errors.As(err, &fe) && fe.Winner != nil && fe.Winner.Generation > 1:
					s.done[p] = true // an earlier attempt's promotion took effect
				default:
					retry()
				}
			})
		})
	})
}

// readLeases is internal/leasing's readLeases: list every checkpoint (the
// partition index's keys, then batches of 100 consistent reads, under one
// store timeout: listCheckpoints), create up to the budget of missing
// ones (16 in flight, each under its own timeout) and list again.
func (s *scaleSim) readLeases(in *scInstance, a instance.ReadLeases) {
	finish := func(cps []store.Checkpoint, err error) {
		s.feed(in, instance.LeasesRead{Owner: a.Owner, Now: in.clock(s.now), Checkpoints: cps, Err: err})
	}
	s.listCheckpoints(in, func(cps []store.Checkpoint, err error) {
		if err != nil {
			finish(nil, err)
			return
		}
		have := make(map[string]bool, len(cps))
		for _, cp := range cps {
			have[cp.Partition] = true
		}
		var missing []string
		for _, p := range a.Partitions {
			if !have[p] {
				missing = append(missing, p)
			}
		}
		if len(missing) == 0 {
			finish(cps, nil)
			return
		}
		lease.Rendezvous(a.Owner, missing)
		missing = missing[:min(len(missing), a.CreateBudget)]
		left, next := len(missing), 0
		var send func()
		send = func() {
			p := missing[next]
			next++
			after := func(error) {
				left--
				if next < len(missing) {
					send()
				}
				if left == 0 {
					s.listCheckpoints(in, finish)
				}
			}
			// dynamostore's CreateCheckpoint: the partition's index entry
			// first (a PutItem of the keys alone under one of the index's
			// keys: one write unit), then the checkpoint.
			s.call(in, scReq{op: "PutItem", key: scIndexPK(store.PartitionIndexKey(p)), wcu: math.Ceil(float64(scIndexEntryBytes(p)) / 1024)}, lsTimeout, func() error {
				s.index(p)
				return nil
			}, func(err error) {
				if err != nil {
					after(err)
					return
				}
				s.call(in, scReq{op: "PutItem", key: p, wcu: 1}, lsTimeout, func() error {
					_, err := s.mem.CreateCheckpoint(bg, store.Checkpoint{Key: store.Key{Scope: scaleScope, Partition: p}, Cursor: []byte("c0"), Generation: 1, Epoch: 1})
					if errors.Is(err, store.ErrFenced) {
						return nil
					}
					return err
				}, after)
			})
		}
		if len(missing) == 0 {
			s.listCheckpoints(in, finish)
			return
		}
		for range min(lsInFlight, len(missing)) {
			send()
		}
	})
}

// scIndexPK is the partition key of the scale scope's index entries
// numbered n (dynamostore's indexPK).
func scIndexPK(n int) string { return fmt.Sprintf("%s##partitions#%02d", scaleScope, n) }

// scIndexEntryBytes is DynamoDB's size of p's index entry: the names and
// values of its two key attributes (dynamostore's indexEntry; its
// TestPartitionIndexEntryIsItsKeysAlone pins that size).
func scIndexEntryBytes(p string) int {
	return len("pk") + len(scIndexPK(0)) + len("sk") + len("p#") + len(p)
}

// scLegacyIndexNameBytes is what a name costs in an earlier release's
// string-set shard (the name and its share of the shard's keys).
const scLegacyIndexNameBytes = 40

// index records p's index entry (writing it again changes nothing).
func (s *scaleSim) index(p string) {
	if !s.indexed[p] {
		s.indexed[p] = true
		s.indexBytes[store.PartitionIndexKey(p)] += scIndexEntryBytes(p)
	}
}

// listCheckpoints is dynamostore's ListCheckpoints under one store timeout:
// one consistent Query of each partition-index key (the key of earlier
// releases and the store.PartitionIndexKeys keys: the total size of the
// items returned, rounded up to 4 KB, at least one read unit; 1 MB a
// page, its pages one after the other), store.ListReadsInFlight at a
// time, then a BatchGetItem of 100 consistent reads for every 100
// indexed names, store.ListReadsInFlight at a time. The store's answer is
// taken when the last batch is served.
func (s *scaleSim) listCheckpoints(in *scInstance, done func([]store.Checkpoint, error)) {
	deadline := s.now + s.cfg.ListTimeout
	type query struct {
		key         string
		bytes, size int // bytes of the items; bytes an item
	}
	queries := []query{{key: scaleScope + "##partitions", bytes: s.legacyBytes, size: scLegacyIndexNameBytes}}
	entry := scIndexEntryBytes(s.part[0])
	for n, b := range s.indexBytes {
		queries = append(queries, query{key: scIndexPK(n), bytes: b, size: entry})
	}
	indexed := len(s.indexed)
	batches := (indexed + 99) / 100
	failed := false
	fail := func(err error) {
		if !failed {
			failed = true
			done(nil, err)
		}
	}
	left := func() (time.Duration, bool) {
		l := deadline - s.now
		if l <= 0 {
			s.counts.Timeouts++
			fail(errScaleTimeout)
			return 0, false
		}
		return l, true
	}
	answer := func() {
		cps, err := s.mem.ListCheckpoints(bg, scaleScope)
		if err != nil {
			fail(err)
			return
		}
		done(cps, nil)
	}
	served, sent := 0, 0
	var send func()
	send = func() {
		b := sent
		sent++
		l, ok := left()
		if !ok {
			return
		}
		n := min(100, indexed-b*100)
		s.call(in, scReq{op: "BatchGetItem", rcu: float64(n), items: n}, l, func() error { return nil }, func(err error) {
			if failed {
				return
			}
			if err != nil {
				fail(err)
				return
			}
			served++
			switch {
			case served == batches:
				answer()
			case sent < batches:
				send()
			}
		})
	}
	queried, qsent := 0, 0
	var page func(q query, off int)
	next := func() {
		q := queries[qsent]
		qsent++
		page(q, 0)
	}
	page = func(q query, off int) {
		l, ok := left()
		if !ok {
			return
		}
		bytes := min(1<<20, q.bytes-off)
		s.call(in, scReq{op: "Query", key: q.key, rcu: max(1, math.Ceil(float64(bytes)/4096)), items: bytes / q.size}, l, func() error { return nil }, func(err error) {
			if failed {
				return
			}
			if err != nil {
				fail(err)
				return
			}
			if off+bytes < q.bytes {
				page(q, off+bytes)
				return
			}
			queried++
			switch {
			case queried < len(queries):
				if qsent < len(queries) {
					next()
				}
			case batches == 0:
				answer()
			default:
				for range min(store.ListReadsInFlight, batches) {
					send()
				}
			}
		})
	}
	for range min(store.ListReadsInFlight, len(queries)) {
		next()
	}
}

// queue and pump: claims and releases, at most lsInFlight in flight.
func (s *scaleSim) queue(in *scInstance, owner string, op func(done func())) {
	in.pending = append(in.pending, lsOp{owner: owner, do: op})
	s.pump(in)
}

func (s *scaleSim) pump(in *scInstance) {
	life := in.life
	for in.inFlight < lsInFlight && len(in.pending) > 0 {
		op := in.pending[0]
		in.pending = in.pending[1:]
		if op.owner != in.self {
			continue
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

// ---------------------------------------------------------------------------
// The store model.

type scReq struct {
	op       string
	key      string // partition key ("" for a batch of distinct keys)
	rcu, wcu float64
	items    int
}

func (s *scaleSim) latency() time.Duration {
	m := s.cfg.Model
	if s.sigma == 0 {
		return m.Median
	}
	return time.Duration(float64(m.Median) * math.Exp(s.sigma*s.rng.NormFloat64()))
}

// call sends one store call from in with a deadline (relative): each
// attempt is counted; a throttled attempt is retried after the SDK's
// backoff while attempts and the deadline allow; apply runs in the store
// when the request is served; answer runs at in when the answer arrives,
// or errScaleTimeout at the deadline.
func (s *scaleSim) call(in *scInstance, r scReq, timeout time.Duration, apply func() error, answer func(error)) {
	deadline := s.now + timeout
	answered := false
	reply := func(t time.Duration, err error) {
		if t > deadline {
			t, err = deadline, errScaleTimeout
		}
		s.at(t, in, func() {
			if answered {
				return
			}
			answered = true
			if errors.Is(err, errScaleTimeout) {
				s.counts.Timeouts++
			}
			answer(err)
		})
	}
	var attempt func(n int)
	attempt = func(n int) {
		if s.counts.Requests == nil {
			s.counts.Requests = map[string]int{}
		}
		s.counts.Requests[r.op]++
		lat := s.latency()
		arrive := s.now + lat/2
		s.at(arrive, nil, func() {
			if !s.admit(r) {
				s.counts.Throttled++
				back := s.backoff(n)
				if n+1 < s.cfg.Model.MaxAttempts && s.now+lat/2+back < deadline {
					s.at(s.now+lat/2+back, nil, func() { attempt(n + 1) })
					return
				}
				reply(s.now+lat/2, errScaleThrottled)
				return
			}
			served := s.serve(r.items)
			s.at(served, nil, func() {
				err := apply()
				reply(s.now+lat/2, err)
			})
		})
	}
	attempt(0)
}

// backoff is the SDK's exponential jitter backoff before retry n+1:
// uniform below 2^(n+1) seconds, capped at MaxBackoff.
func (s *scaleSim) backoff(n int) time.Duration {
	ceil := time.Duration(1<<min(n+1, 10)) * time.Second
	if ceil > s.cfg.Model.MaxBackoff {
		return s.cfg.Model.MaxBackoff
	}
	return time.Duration(s.rng.Float64() * float64(ceil))
}

// admit takes r's capacity units from its key's and the table's buckets
// (a bucket holds one second of capacity), or refuses: throttled.
func (s *scaleSim) admit(r scReq) bool {
	m := s.cfg.Model
	take := func(b *scBucket, rate, units float64) bool {
		if rate <= 0 || units == 0 {
			return true
		}
		if !b.init {
			b.init, b.tokens, b.at = true, rate, s.now
		}
		b.tokens = min(rate, b.tokens+rate*(s.now-b.at).Seconds())
		b.at = s.now
		return b.tokens >= units || b.tokens >= rate // a request larger than a second's capacity passes on a full bucket
	}
	spend := func(b *scBucket, rate, units float64) {
		if rate > 0 {
			b.tokens -= units
		}
	}
	var kb *[2]scBucket
	if r.key != "" {
		kb = s.buckets[r.key]
		if kb == nil {
			kb = &[2]scBucket{}
			s.buckets[r.key] = kb
		}
		if !take(&kb[0], m.KeyReadUnits, r.rcu) || !take(&kb[1], m.KeyWriteUnits, r.wcu) {
			return false
		}
	}
	if !take(&s.tableR, m.TableReadUnits, r.rcu) || !take(&s.tableW, m.TableWriteUnits, r.wcu) {
		return false
	}
	if kb != nil {
		spend(&kb[0], m.KeyReadUnits, r.rcu)
		spend(&kb[1], m.KeyWriteUnits, r.wcu)
	}
	spend(&s.tableR, m.TableReadUnits, r.rcu)
	spend(&s.tableW, m.TableWriteUnits, r.wcu)
	s.counts.ReadUnits += r.rcu
	s.counts.WriteUnits += r.wcu
	return true
}

// serve is when a request that arrived now is served: at once without
// servers, else after the queue of the earliest free server.
func (s *scaleSim) serve(items int) time.Duration {
	m := s.cfg.Model
	if m.Servers <= 0 {
		return s.now
	}
	i := 0
	for j := range s.serverFree {
		if s.serverFree[j] < s.serverFree[i] {
			i = j
		}
	}
	start := max(s.now, s.serverFree[i])
	s.serverFree[i] = start + m.Service + time.Duration(max(items-1, 0))*m.ServicePerItem
	return s.serverFree[i]
}

func scaleRow(r ScaleResult) string {
	ops, total := r.IdleRate()
	return fmt.Sprintf("P=%d n=%d %s: cold %s (work %s; throttled %d, timeouts %d, lease reads %d) idle %.2f/s %v | add %s | takeover %s, balanced %s | double %d",
		r.Config.Partitions, r.Config.Instances, r.Config.Model.Name, phaseCell(r.ColdBalanced), phaseCell(r.ColdWork), r.ColdBalanced.Throttled, r.ColdBalanced.Timeouts, r.ColdBalanced.LeaseReads, total, ops, phaseCell(r.Added), phaseCell(r.Takeover), phaseCell(r.TakeoverBalanced), r.DoubleHeld)
}

func phaseCell(p ScalePhase) string {
	if !p.Done {
		return fmt.Sprintf("not after %s %v", p.At.Round(time.Second), p.Owned)
	}
	return fmt.Sprintf("%.1f s", p.At.Seconds())
}

// ScaleTable renders scale results as a Markdown table (simulated time).
func ScaleTable(rows []ScaleResult) string {
	var b strings.Builder
	b.WriteString("| partitions | instances | store model, scope | balanced after cold start | first pages promoted | balanced after adding one | takeover after kill -9 | balanced after it | idle requests/s (simulated) | idle write units/s | cold start: requests, throttled, lease reads, calls timed out | double-held |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		ops, total := r.IdleRate()
		var by []string
		for _, op := range slices.Sorted(maps.Keys(ops)) {
			by = append(by, fmt.Sprintf("%s %.2f", op, ops[op]))
		}
		reqs := 0
		for _, n := range r.ColdBalanced.Requests {
			reqs += n
		}
		setup := r.Config.Model.Name + ", new scope"
		if r.Config.Existing {
			setup = r.Config.Model.Name + ", existing scope"
			if r.Config.LegacyIndex {
				setup += " (partition index of an earlier release)"
			}
		}
		if r.Config.ListTimeout != lsTimeout {
			setup += fmt.Sprintf(", what-if: listing deadline %s", r.Config.ListTimeout)
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %s | %s | %.2f (%s) | %.2f | %s, %d, %d, %d | %d |\n",
			commas(r.Config.Partitions), r.Config.Instances, setup,
			phaseCell(r.ColdBalanced), phaseCell(r.ColdWork), phaseCell(r.Added), phaseCell(r.Takeover), phaseCell(r.TakeoverBalanced),
			total, strings.Join(by, ", "), r.Idle.WriteUnits/r.Config.Idle.Seconds(),
			commas(reqs), r.ColdBalanced.Throttled, r.ColdBalanced.LeaseReads, r.ColdBalanced.Timeouts, r.DoubleHeld)
	}
	return b.String()
}

func commas(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
