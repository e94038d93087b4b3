package clustersim

import (
	"fmt"
	"hash/fnv"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"math/rand/v2"

	"github.com/tidemark/tidemark/internal/chain"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/store/memstore"
	"github.com/tidemark/tidemark/provider"
)

// Variant injects one deliberately broken behaviour into the simulated
// workers, publisher or store, to prove that the oracle catches it. The
// zero value, Faithful, is the production behaviour.
type Variant uint8

const (
	// Faithful: workers, publisher and store behave as in production.
	Faithful Variant = iota
	// PromoteOtherSuccessor: a worker promotes the successor of another
	// response to the same (cursor, generation) with the completion
	// evidence of its own (breaks invariant 1).
	PromoteOtherSuccessor
	// MaxFrontier: the publisher publishes the maximum of the partitions'
	// watermarks instead of the minimum (breaks invariant 7).
	MaxFrontier
	// BareEmptyPage: workers treat every empty page as the end of the data,
	// so a bare empty page without evidence advances (breaks invariant 6).
	BareEmptyPage
	// UnconditionalWrite: Promote ignores FromCursor and FromGeneration and
	// overwrites the stored checkpoint (breaks invariant 2).
	UnconditionalWrite
	// IgnoreLease: lease mode in every schedule, and Promote and SetParked
	// state the stored lease instead of the writer's, so a zombie whose
	// lease was stolen still writes (breaks the lease fence, CheckLease).
	IgnoreLease
	// AnyWatermarkCovers: workers count any complete-through watermark as
	// coverage of a response's whole range, so a retry that omits an event
	// an earlier answer showed, with a watermark below it, advances
	// (breaks invariant 5, docs/design.md#invariants).
	AnyWatermarkCovers
	// ParkOnMalformed: workers park on the first malformed answer instead
	// of fetching the page again (fetch_retries 0), so a transient
	// malformed body parks an honest partition (CheckMalformed).
	ParkOnMalformed
	// RetryMalformedForever: workers fetch a malformed page again without
	// bound, so a persistently malformed partition never parks
	// (CheckLiveness).
	RetryMalformedForever
	// PartialView: each publisher computes the frontier from the
	// checkpoints of the partitions its own instance would hold (half of
	// them, by a stable hash), the old bug of publishing from one
	// instance's partitions instead of every checkpoint of the scope
	// (breaks publication from durable state: the published frontier
	// never catches up with what is complete, CheckLiveness).
	PartialView
	// ChildrenFirst: lanes read a split's children at once, without
	// waiting for their parents to complete (breaks parents-first,
	// CheckLineage).
	ChildrenFirst
	// SelfCertifiedWatermark: workers accept a complete-through the
	// contract declares no finality for (finality none read as source), so
	// a listing's own last key becomes its durable watermark although a
	// key may still appear below it (breaks "finality is declared, never
	// inferred": CheckNoLoss, CheckMonotone).
	SelfCertifiedWatermark
	// IgnoreOffsetOverlap: workers of an offset-paged partition skip the
	// overlap check (its contract is read as offset_unproven), so a page
	// that begins one event late after a delete on an earlier page is
	// accepted and the event that slid onto a page already read is lost
	// (docs/design.md#offset-pagination, CheckNoLoss).
	IgnoreOffsetOverlap
	// IgnoreIncarnation: lanes read on across a changed source
	// incarnation (in the schedules that recreate sources): the old cursor goes on
	// against the recreated source, whose events below it are never read
	// (docs/design.md#source-incarnations, CheckLiveness).
	IgnoreIncarnation
	// CoalescedWatermarkDropped: a coalesced promotion keeps the watermark
	// the checkpoint had instead of the merged pages' (the group's write
	// drops the watermark its pages certified). A run on its own stays
	// within the invariants (a lower watermark claims less; TestSim's
	// liveness sees it only where the lowered watermark traps the
	// restarts of an exclusive-boundary partition, 2 of seeds 1..100);
	// the metamorphic comparison shows it: the same schedule ends with a
	// lower watermark and frontier when promotions coalesce
	// (CheckMetamorphic, RunMetamorphic).
	CoalescedWatermarkDropped
	// AcceptOffsetShaped: workers read a token contract with ordered
	// positions as keyset pagination, which the offset_shaped_successor
	// monitor exempts (a key grows too), so the pages of a provider that
	// pages by offset undeclared are delivered and their successors
	// promoted (docs/design.md#contract-monitors, CheckMonitor).
	AcceptOffsetShaped
	// TrustFirstPage: workers ignore the declared origin of dense
	// positions (contract first_position), so the first page of a
	// traversal that a source cut above its origin (the model's cutFirst:
	// retention dropped the oldest events, a limit kept the newest) is read
	// on as if nothing came before it, and the events it cut are lost
	// (docs/design.md#contract-fields, CheckNoLoss).
	TrustFirstPage
	// EmitBeforeIncarnationCheck: lanes emit a page's events before an
	// incarnation check asked after its answer has answered (the check
	// before its promotion still runs): a page a recreated source served
	// under the old cursor leaves under the old incarnation's epoch and
	// frontier (docs/design.md#source-incarnations, CheckIncarnation).
	EmitBeforeIncarnationCheck
	// SkipRereadReceipts: a re-read pass takes every event at or below its
	// mark as received without a receipt, so an event that appeared below
	// the progress is dropped, never delivered
	// (docs/design.md#re-read-windows, CheckBinding: its page is promoted
	// without an outcome for it; CheckLiveness).
	SkipRereadReceipts
	// KeepLostLease: lease mode in every schedule, and a worker's instance
	// machine that stops a partition whose lease is lost (a read showed
	// another lease, a write was fenced, the incarnation is gone) leaves
	// the partition's lane reading under that lease (CheckLease: a lane
	// reads under a lease its instance no longer runs it under).
	KeepLostLease
	// ExitWithParked: schedules with exit_when_complete (and a persistently
	// malformed partition), and the workers' instance machines count a
	// parked partition as complete (instance.Config.ExitParked), so a
	// worker exits as complete while a partition of its membership is
	// parked (CheckExit, exit.go).
	ExitWithParked
	// PublishBeforePromotion: the publishers' feed is told of a promotion
	// when a lane's machine asks for it, not once it took effect, so a
	// publisher may publish a watermark no checkpoint holds durably (the
	// promotion is still to be sent, or fails) (CheckPublication).
	PublishBeforePromotion
)

var variantNames = [...]string{"faithful", "promote-other-successor", "max-frontier", "bare-empty-page", "unconditional-write", "ignore-lease", "any-watermark-covers", "park-on-malformed", "retry-malformed-forever", "partial-view", "children-first", "self-certified-watermark", "ignore-offset-overlap", "ignore-incarnation", "coalesced-watermark-dropped", "accept-offset-shaped-successor", "trust-first-page", "emit-before-incarnation-check", "skip-reread-receipts", "keep-lost-lease", "exit-with-parked", "publish-before-promotion"}

func (v Variant) String() string {
	if int(v) < len(variantNames) {
		return variantNames[v]
	}
	return fmt.Sprintf("variant(%d)", uint8(v))
}

// ParseVariant reads the names Variant.String prints.
func ParseVariant(s string) (Variant, error) {
	for i, n := range variantNames {
		if n == s {
			return Variant(i), nil
		}
	}
	return 0, fmt.Errorf("sim: unknown variant %q (want one of %s)", s, strings.Join(variantNames[:], ", "))
}

// Variants lists the broken variants (every Variant but Faithful).
func Variants() []Variant {
	return []Variant{PromoteOtherSuccessor, MaxFrontier, BareEmptyPage, UnconditionalWrite, IgnoreLease, AnyWatermarkCovers, ParkOnMalformed, RetryMalformedForever, PartialView, ChildrenFirst, SelfCertifiedWatermark, IgnoreOffsetOverlap, IgnoreIncarnation, CoalescedWatermarkDropped, AcceptOffsetShaped, TrustFirstPage, EmitBeforeIncarnationCheck, SkipRereadReceipts, KeepLostLease, ExitWithParked, PublishBeforePromotion}
}

// DefaultSteps is the length of a schedule when Config.Steps is zero.
const DefaultSteps = 1500

// Config is one simulated schedule.
type Config struct {
	// Seed determines everything: the setup, the ops, every partition's
	// provider stream and the store faults.
	Seed uint64
	// Steps is the number of ops (default DefaultSteps).
	Steps int
	// Variant is the behaviour under test (default Faithful).
	Variant Variant
	// TraceTail is the number of history lines a failure prints (default
	// 60).
	TraceTail int
	// Ops, when not nil, replaces the generated ops (a replay); Steps is
	// then len(Ops).
	Ops []Op
	// Liveness adds a fault-free phase after the steps and fails the run
	// when a partition a worker reads does not catch up (CheckLiveness).
	Liveness bool
	// OnStep, when not nil, receives every history line as it is made.
	OnStep func(line string)
	// StrictRecords also fails a run on CheckRecords: a witness's stored
	// disposition contradicting the checkpoints (an inconsistency of the
	// records, not a loss).
	StrictRecords bool
	// Shape, when not nil, replaces the seed's promotion coalescing and
	// pipelining depth; Metamorphic restricts the schedule to what must
	// end alike under every shape, and reads its Outcome after a settling
	// phase (metamorphic.go, RunMetamorphic).
	Shape       *Shape
	Metamorphic bool
	// NoDriverPaths turns the driver's own paths (setup.retry, queue,
	// prune) off, so schedules pinned before they existed replay as
	// recorded.
	NoDriverPaths bool
	// NoPromotionWait: promotions never wait for the page behind
	// (promotion_min_pages 1), so schedules pinned before the wait existed
	// replay as recorded.
	NoPromotionWait bool
	// NoWitnessGroups: every witness is written alone
	// (witness_group_pages 1), so schedules pinned before group commit
	// existed replay as recorded.
	NoWitnessGroups bool
}

// Result is the outcome of one schedule.
type Result struct {
	Seed    uint64
	Variant Variant
	Steps   int
	Setup   string
	Stats   Stats
	// Failure is nil when every check held after every step.
	Failure *Failure
	// Outcome is what a Metamorphic run ended with (nil otherwise, or on
	// a failure).
	Outcome *Outcome
	opList  []Op
}

// ops returns the ops the run executed.
func (r Result) ops() []Op { return r.opList }

// Failure is an oracle violation with what is needed to reproduce it.
type Failure struct {
	Seed    uint64
	Variant Variant
	// Config is the configuration of the failed run (its Ops and OnStep
	// cleared); Replayed says it ran given ops.
	Config   Config
	Replayed bool
	Step     int
	Check    Check
	Detail   string
	Setup    string
	// Trace is the tail of the history, oldest first.
	Trace []string
	// Ops is every op executed up to and including the failing one.
	Ops []Op
}

// Rerun is the command that reproduces the failure.
func (f *Failure) Rerun() string {
	cmd := fmt.Sprintf("go test ./internal/clustersim -run TestSim -seed=%d", f.Seed)
	c := f.Config
	if c.Metamorphic {
		cmd = fmt.Sprintf("go test ./internal/clustersim -run TestMetamorphic -seed=%d", f.Seed)
		if f.Variant != Faithful {
			cmd += " -variant=" + f.Variant.String()
		}
		return cmd + " -v"
	}
	if f.Variant != Faithful {
		cmd += " -variant=" + f.Variant.String()
	}
	if c.Steps != 0 && c.Steps != DefaultSteps {
		cmd += fmt.Sprintf(" -steps=%d", c.Steps)
	}
	if c.Liveness {
		cmd += " -liveness"
	}
	if c.StrictRecords {
		cmd += " -strict-records"
	}
	if f.Replayed {
		cmd += " -replay=<the ops file>"
	}
	return cmd + " -v"
}

func (f *Failure) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "sim: seed %d (%s) failed check %s at step %d:\n  %s\n", f.Seed, f.Variant, f.Check, f.Step, f.Detail)
	fmt.Fprintf(&b, "setup: %s\n", f.Setup)
	fmt.Fprintf(&b, "trace (last %d of %d steps):\n", len(f.Trace), f.Step+1)
	for _, l := range f.Trace {
		b.WriteString("  ")
		b.WriteString(l)
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "rerun: %s\n", f.Rerun())
	return b.String()
}

// Stats counts what a run exercised, so tests can assert the simulator
// reaches the states it is meant to. Every field is a count.
type Stats struct {
	Steps, Fetches, FetchAhead                 int
	Promotions, Transitions, Fenced            int
	ResolvedApplied, ResolvedMoved             int
	ResolvedRetry                              int
	FirstResponses, ExactReplays, Rotations    int
	ShiftedPages, Divergences, Refusals        int
	Holds, Idle, BadResponses                  int
	Restarts, Parks, Unparks, Expired, Repairs int
	Crashes, PubCrashes, Acks, Nacks           int
	Throttled, LostResponses                   int
	Glitches, Omissions, Shifts, Stalls, Lags  int
	Garbage                                    int
	// Torn counts pages that said has_more without a successor (profile
	// torn): malformed, fetched again, never the end of a traversal.
	Torn int
	// Malformed answers the model gave (transient and persistent), the
	// machines' malformed answers (garbage included), parks after a page's
	// malformed answers, schedules with a persistently malformed partition.
	MalformedFaults, MalformedAnswers, MalformedParks, BrokenRuns int
	Published, ScalarsPublished                                   int
	ScalarsAfterChange                                            int
	Epochs, UnprovenEpochs                                        int
	DispositionConflicts, SharedPartitions                        int
	NoopPromotions, NoopUnsealed                                  int
	// Coalesced counts writes that promoted several pages; PromotionWaits
	// the times a ready promotion began to wait for the page behind it
	// (promotion_min_pages).
	Coalesced, PromotionWaits int
	// WitnessGroups counts the writes of several witnesses in one
	// (witness_group_pages).
	WitnessGroups int
	// Recreates counts sources recreated (op recreate); Reincarnations the
	// resets into a new incarnation that lanes wrote; ReopenedComplete the
	// resets of a durably complete checkpoint (a sealed source recreated:
	// the lane watching its complete partition found the new incarnation).
	Recreates, Reincarnations, ReopenedComplete int
	// Pages without a successor, retries repeating the boundary event,
	// pages with tied positions, durably completed partitions.
	NoSuccessor, BoundaryRepeats, Ties, Completions int
	// Lanes ended by exit_when_complete; workers whose instance machine
	// ended them (Exit, exit.go).
	Exits, InstanceExits int
	// Beside the machine (chain/driver.go): transient fetch failures the
	// lanes retried, and those whose retries ran out (the machine saw
	// them); queued emissions dropped when their chain ended; witness
	// deletions made and the witnesses they deleted.
	TransientRetries, TransientGiveUps, DroppedEmissions, Prunes, Pruned int
	// Lease mode: publication rounds the workers' instance machines asked
	// for (instance.Publish) and the records they wrote.
	InstanceRounds, InstancePublished int
	// Lease mode (lease.go): schedules with leases, claims of free leases,
	// claims of leases whose owner's heartbeat was taken over (steals),
	// heartbeat renewals, lanes stopped for a lost lease or a gone
	// incarnation, promotions of zombies fenced by the lease (and those of
	// zombies of a pause), pauses.
	LeaseRuns, Claims, Steals, Renewals, LeaseLost int
	ZombieFenced, PausedZombieFenced, Pauses       int
	// Discovery (membership.go): schedules with discovery, those with three
	// publishers, splits at the provider, epochs the discoverer wrote,
	// split parents that left sealed, lane steps of a child waiting for its
	// parents, children released to be read, schedules with a split that
	// ended (after the fault-free phase) in a proven epoch without any
	// split parent.
	DiscoveryRuns, ThreePublisherRuns, Splits, DiscoveryEpochs int
	ParentsRetired, LineageWaits, ChildrenReleased             int
	SplitRunsSettled                                           int
	// HeadGrowths: retries that only grew at the head (head_growth).
	// Contract violations the machines' monitors reported
	// (docs/design.md#contract-monitors): tokens rotated though declared
	// stable (the model's rogue rotations), a watermark equal to the
	// last position page after page (the model's own watermarks: a hint,
	// not a fault), and any other kind, which the model never commits: a
	// false alarm (TestSim fails on one).
	HeadGrowths, RogueRotationsSeen, SelfCertifiedSeen, FalseAlarms int
	// LateSeen: events at or below a durable watermark, never delivered
	// (late_position): only a recreated source's restarted positions,
	// read from the old incarnation's cursor before the incarnation
	// check, make them.
	LateSeen int
	// UnstableSeen: two answers of one (C, G) with the same snapshot
	// marker and different events (snapshot_unstable): only a recreated
	// source, whose new incarnation numbers its snapshots from the start
	// again, answers the old incarnation's cursor so, before the
	// incarnation check explains it.
	UnstableSeen int
	// Regressing watermarks: schedules with the fault, pages that carried
	// one, reports of it (watermark_regressed), withdrawals of the scalar
	// frontier written.
	RegressRuns, Regressions, RegressionsSeen, Withdrawals int
	// Offset-shaped successors: schedules with a partition whose provider
	// pages by offset under a contract that does not say so
	// (part.offsetURLs), and reports of it (offset_shaped_successor).
	OffsetShapedRuns, OffsetShapedSeen int
	// FirstPagesCut: first pages of a traversal that began above the
	// declared origin (profile cutFirst).
	FirstPagesCut int
	// Late arrivals against a re-read window (profile reread-beyond):
	// events shown beyond the declared window; late arrivals near the
	// window's edge the machines named (chain.LateArrival); events shown
	// beyond the window still undelivered when a schedule ended, and
	// those of a partition whose run had named a late arrival near the
	// edge.
	LateBeyondWindow, LateNearEdgeNamed, BeyondMissed, BeyondMissedNamed int
}

// Add adds o to s.
func (s *Stats) Add(o Stats) {
	a, b := reflect.ValueOf(s).Elem(), reflect.ValueOf(o)
	for i := 0; i < a.NumField(); i++ {
		a.Field(i).SetInt(a.Field(i).Int() + b.Field(i).Int())
	}
}

func (s *Stats) note(n fetchNote) {
	s.Fetches++
	switch n {
	case "glitch", "stall-glitch":
		s.Glitches++
	case "omit":
		s.Omissions++
	case "shift":
		s.Shifts++
	case "lag":
		s.Lags++
	case "garbage":
		s.Garbage++
	case "torn":
		s.Torn++
	case "malformed":
		s.MalformedFaults++
	case "nosucc":
		s.NoSuccessor++
	case "overlap":
		s.BoundaryRepeats++
	case "tie":
		s.Ties++
	case "regress":
		s.Regressions++
	case "cut-first":
		s.FirstPagesCut++
	}
	if strings.HasPrefix(string(n), "stall") {
		s.Stalls++
	}
}

func (s *Stats) class(c chain.RetryClass) {
	switch c {
	case chain.ClassFirstResponse:
		s.FirstResponses++
	case chain.ClassExactReplay:
		s.ExactReplays++
	case chain.ClassTokenRotation:
		s.Rotations++
	case chain.ClassShiftedPage:
		s.ShiftedPages++
	case chain.ClassHeadGrowth:
		s.HeadGrowths++
	case chain.ClassUnprovableDivergence:
		s.Divergences++
	case chain.ClassIdle, chain.ClassEmptyNoEvidence:
		s.Idle++
	}
}

// setup is what the seed decides before the first op.
type setup struct {
	workers    int
	publishers int
	depth      int // pages in flight per lane (max_pages_in_flight)
	batch      int // events per emitted batch (0: the whole page)
	throttle   float64
	lost       float64
	initial    int // partitions in epoch 1
	assign     map[string][]int
	// exit: the lanes run with exit_when_complete (schedules without
	// leases only): a lane caught up on evidence ends.
	exit bool
	// coalesce: the machines coalesce promotions (the input's default).
	coalesce bool
	// minPages and linger: with coalesce, a ready promotion waits for the
	// page behind it (promotion_min_pages, promotion_linger).
	minPages int
	linger   time.Duration
	// witnessGroup: witnesses of up to this many pages written in one
	// write (witness_group_pages; 1: each alone).
	witnessGroup int
	// broken names the partition whose answers turn persistently
	// malformed (empty: none).
	broken string
	// regress names the partition whose watermarks sometimes regress.
	regress string
	// offsetShaped names the partition whose provider pages by offset
	// under a contract that does not declare it (part.offsetURLs).
	offsetShaped string
	// discovery: the discoverer owns the membership (ops "discover" and
	// "split" instead of the operator's "add" and "remove").
	discovery bool
	// retry: the lanes retry transient fetch failures fetch_retries
	// times, as the input does (in the others the machine sees every one,
	// as after retries that ran out); queue: emissions wait in the lane's
	// outbox until read, and are dropped when their chain ends; prune:
	// witness_cleanup every prune generations (0: none; 1: the memory
	// backend's).
	retry, queue bool
	prune        uint64
	// maxPoll: the machines back off quiet polls up to it
	// (max_poll_interval; 0: none).
	maxPoll time.Duration
	// recreates: partitions' sources are now and then deleted and created
	// again under the same name (op "recreate", a new incarnation).
	recreates bool
}

type sim struct {
	cfg     Config
	variant Variant
	setup   setup
	rng     *rand.Rand
	scope   string

	parts  []*part
	byName map[string]*part

	mem    *memstore.Store
	faults *Faults
	st     store.Store

	workers    []*worker
	publishers []*publisher
	coord      *coordinator
	disc       *discoverer
	sink       sink
	oracle     *oracle
	// everMember: partitions that have been in some membership epoch.
	everMember    map[string]bool
	strictRecords bool

	// lease is nil unless the run uses leases (lease.go); caller is the
	// lease owner of the lane being stepped, for CheckLease.
	lease  *leases
	caller string

	attemptSeq int
	stats      Stats
	hist       []string
	ops        []Op
	desc       string
}

// Run executes one schedule and checks the oracle after every step.
func Run(cfg Config) Result {
	if cfg.Steps <= 0 {
		cfg.Steps = DefaultSteps
	}
	if cfg.TraceTail <= 0 {
		cfg.TraceTail = 60
	}
	if cfg.Ops != nil {
		cfg.Steps = len(cfg.Ops)
	}
	s := newSim(cfg)
	res := Result{Seed: cfg.Seed, Variant: cfg.Variant, Setup: s.desc}
	i := 0
	for ; i < cfg.Steps && s.oracle.fail == nil; i++ {
		var op Op
		if cfg.Ops != nil {
			op = cfg.Ops[i]
		} else {
			op = s.genOp()
		}
		s.ops = append(s.ops, op)
		out := s.exec(op)
		s.record(fmt.Sprintf("#%d %s: %s", i, op, out))
		s.syncLanes()
		s.oracle.check()
		s.stats.Steps++
	}
	i--
	if s.oracle.fail == nil && cfg.Liveness {
		s.quiesce(&i)
	}
	if s.oracle.fail == nil && cfg.Metamorphic {
		s.settle(&i)
		if s.oracle.fail == nil {
			res.Outcome = s.outcome()
		}
	}
	if s.oracle.fail == nil {
		s.checkMonitors()
	}
	for _, p := range s.parts {
		s.stats.LateBeyondWindow += p.beyondShown
		for _, e := range p.events {
			if e.beyond && !e.acked {
				s.stats.BeyondMissed++
				if p.lateNamed > 0 {
					s.stats.BeyondMissedNamed++
				}
			}
		}
	}
	if v := s.oracle.fail; v != nil {
		tail := s.hist
		if len(tail) > cfg.TraceTail {
			tail = tail[len(tail)-cfg.TraceTail:]
		}
		fc := cfg
		fc.Ops, fc.OnStep = nil, nil
		if cfg.Ops != nil {
			fc.Steps = 0
		}
		res.Failure = &Failure{Seed: cfg.Seed, Variant: cfg.Variant, Config: fc, Replayed: cfg.Ops != nil, Step: i, Check: v.check, Detail: v.detail, Setup: s.desc, Trace: slices.Clone(tail), Ops: s.ops}
	}
	res.Steps = s.stats.Steps
	res.Stats = s.stats
	res.opList = s.ops
	return res
}

func (s *sim) record(line string) {
	if s.cfg.OnStep != nil {
		s.cfg.OnStep(line)
	}
	s.hist = append(s.hist, line)
	// Keep memory bounded on long runs: only the tail is ever printed.
	if len(s.hist) > 4*s.cfg.TraceTail {
		s.hist = append(s.hist[:0], s.hist[len(s.hist)-s.cfg.TraceTail:]...)
	}
}

func partSeed(seed uint64, name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return h.Sum64() ^ seed
}

var universe = []string{"a", "b", "c", "d", "e", "f"}

func newSim(cfg Config) *sim {
	s := &sim{
		cfg:           cfg,
		variant:       cfg.Variant,
		rng:           rand.New(rand.NewPCG(cfg.Seed, 0x5eed)),
		scope:         "sim",
		byName:        map[string]*part{},
		mem:           memstore.New(),
		everMember:    map[string]bool{},
		strictRecords: cfg.StrictRecords,
	}
	r := s.rng
	su := setup{
		workers:    1 + r.IntN(3),
		publishers: 1 + r.IntN(2),
		depth:      1 + r.IntN(4),
		batch:      r.IntN(4),
		throttle:   []float64{0, 0.02, 0.05, 0.1}[r.IntN(4)],
		lost:       []float64{0, 0.02, 0.05, 0.1}[r.IntN(4)],
		initial:    2 + r.IntN(3),
		assign:     map[string][]int{},
		// From its own hash, so that the other choices of a seed stay.
		exit:         partSeed(cfg.Seed, "exit_when_complete")%4 == 0,
		coalesce:     partSeed(cfg.Seed, "coalesce_promotions")%2 == 0,
		minPages:     []int{1, 2, 4}[partSeed(cfg.Seed, "promotion_min_pages")%3],
		linger:       []time.Duration{10 * time.Millisecond, 100 * time.Millisecond, time.Second}[partSeed(cfg.Seed, "promotion_linger")%3],
		witnessGroup: []int{1, 1, 2, 4}[partSeed(cfg.Seed, "witness_group_pages")%4],
		// A third of the schedules run discovery, with one to three
		// publishers (from its own hash too).
		discovery: partSeed(cfg.Seed, "discovery")%3 == 0,
		// A quarter of the schedules recreate sources, from its own hash
		// too.
		recreates: (partSeed(cfg.Seed, "recreate")>>2)%4 == 0,
		// The driver's own paths, from their own hashes too.
		retry: partSeed(cfg.Seed, "fetch_retries")%2 == 0,
		queue: partSeed(cfg.Seed, "queued_emissions")%2 == 0,
		prune: []uint64{0, 1, 3}[partSeed(cfg.Seed, "witness_cleanup")%3],
		// Half back off quiet polls, from its own hash too.
		maxPoll: []time.Duration{0, 8 * time.Second}[partSeed(cfg.Seed, "max_poll_interval")%2],
	}
	if cfg.Variant == ExitWithParked {
		su.exit = true // the variant only shows where the instance exits (with a malformed partition, below)
	}
	if cfg.NoDriverPaths {
		su.retry, su.queue, su.prune = false, false, 0
	}
	if cfg.NoPromotionWait {
		su.minPages = 1
	}
	if cfg.NoWitnessGroups {
		su.witnessGroup = 1
	}
	if cfg.Metamorphic {
		s.metamorphicSetup(&su)
	}
	if su.discovery {
		su.publishers = 1 + int(partSeed(cfg.Seed, "publishers")%3)
		s.stats.DiscoveryRuns++
		if su.publishers == 3 {
			s.stats.ThreePublisherRuns++
		}
	}
	// In an eighth of the schedules one initial partition's answers turn
	// persistently malformed after a few fetches (from its own hash too).
	broken := partSeed(cfg.Seed, "persistent_malformed")
	// In a sixteenth, one partition's watermarks sometimes regress (a
	// contract violation, docs/design.md#contract-monitors). Not under
	// exclusive_boundary: a durable watermark left below the applied
	// boundary makes every restart from it replay applied positions that
	// rule (a) refuses (see docs/design.md#known-gaps).
	regress := partSeed(cfg.Seed, "regressing_watermark")
	// In a sixteenth, one initial partition's provider pages by offset
	// though its contract does not say so (part.offsetURLs): the monitors
	// must refuse its pages read by an offset. Not a rotating profile (its
	// nonce changes too, so no successor differs by the offset only), not
	// an offset profile (declared), not the late listing.
	offsetShaped := partSeed(cfg.Seed, "offset_shaped_successor")
	total := su.initial + r.IntN(3)
	scalarRun := r.IntN(10) < 7
	var desc []string
	for i, name := range universe[:total] {
		var prof profile
		if scalarRun {
			prof = scalarProfiles[r.IntN(len(scalarProfiles))]
		} else {
			prof = append(slices.Clone(scalarProfiles), otherProfiles...)[r.IntN(len(scalarProfiles)+len(otherProfiles))]
		}
		if o := partSeed(cfg.Seed, "dense_origin"); o%4 == 0 && uint64(i) == (o>>2)%uint64(total) {
			// A quarter of the schedules read one partition (perhaps one
			// that appears later, above position 1) as a dense feed that
			// declares its origin and sometimes cuts its first page above
			// it (dense-origin, origin.go).
			prof = denseOrigin
		}
		if i == 0 && partSeed(cfg.Seed, "late_listing")%3 == 0 {
			// A third of the schedules list one partition that is not a
			// snapshot, its pages' own last keys mapped as complete_through
			// under finality none.
			prof = lateListing
		}
		if i == 1 && partSeed(cfg.Seed, "reread")%3 == 0 {
			// A third of the schedules read one partition whose events
			// appear below the progress with a re-read window.
			prof = rereadLate
		}
		if i == 2 && partSeed(cfg.Seed, "reread")%3 != 0 && partSeed(cfg.Seed, "late_beyond")%4 == 0 {
			// A quarter of the others read one whose events appear below
			// the progress within a narrow re-read window, or beyond it
			// (one re-read partition a schedule: two re-reading from their
			// start at every head leave too few steps to settle).
			prof = rereadBeyond
		}
		if cfg.Metamorphic {
			prof = metamorphicProfile(prof)
		}
		if cfg.Variant == SkipRereadReceipts && i == 0 {
			prof = rereadLate // the variant only shows on a re-read partition
		}
		if cfg.Variant == IgnoreOffsetOverlap && i == 0 {
			prof = offsetOverlap // the variant only shows on an offset partition
		}
		if cfg.Variant == AcceptOffsetShaped && i == 0 {
			prof = denseCT // the variant only shows on a partition paged by offset undeclared (below)
		}
		if cfg.Variant == TrustFirstPage {
			prof = denseOrigin // the variant only shows where an origin is declared
		}
		p := newPart(name, rand.New(rand.NewPCG(partSeed(cfg.Seed, name), 0x9a27)), prof, 1)
		if cfg.Metamorphic {
			p.log = logRNG(cfg.Seed, name)
		}
		ws := []int{r.IntN(su.workers)}
		if su.workers > 1 && r.IntN(2) == 0 {
			ws = append(ws, (ws[0]+1+r.IntN(su.workers-1))%su.workers)
			s.stats.SharedPartitions++
		}
		su.assign[name] = ws
		if (broken%8 == 0 || cfg.Variant == ExitWithParked) && !cfg.Metamorphic && uint64(i) == (broken>>3)%uint64(su.initial) {
			p.broken, p.brokenAfter = true, int((broken>>8)%20)
			su.broken = name
			s.stats.BrokenRuns++
		}
		if regress%16 == 0 && !cfg.Metamorphic && uint64(i) == (regress>>4)%uint64(total) && prof.ct && !prof.contract.ExclusiveBoundary {
			p.regress = .05
			su.regress = name
			s.stats.RegressRuns++
		}
		chosen := offsetShaped%16 == 0 && !cfg.Metamorphic && i < su.initial && uint64(i) == (offsetShaped>>4)%uint64(su.initial)
		if cfg.Variant == AcceptOffsetShaped {
			chosen = i == 0
		}
		if chosen && su.broken != name && su.regress != name && !prof.rotate && prof.contract.Pagination == provider.PaginationToken && prof.name != lateListing.name {
			p.offsetURLs = true
			su.offsetShaped = name
			s.stats.OffsetShapedRuns++
		}
		if i < su.initial {
			p.appeared = true
			p.appendEvents(r.IntN(4))
			desc = append(desc, fmt.Sprintf("%s:%s@%v", name, prof.name, ws))
		} else {
			// Appears later: an old partition with a backlog, or a new one.
			if r.IntN(2) == 0 {
				p.created = 0 // decided when it appears
			}
			desc = append(desc, fmt.Sprintf("%s:%s@%v(later)", name, prof.name, ws))
		}
		s.parts = append(s.parts, p)
		s.byName[name] = p
	}
	if sh := cfg.Shape; cfg.Metamorphic && sh != nil && sh.Instances > 0 {
		// The shape's instances, each partition on one of them (drawn
		// after the seed's choices, which stay).
		su.workers = sh.Instances
		for name := range su.assign {
			su.assign[name] = []int{int(partSeed(cfg.Seed, name+"@instance") % uint64(sh.Instances))}
		}
	}
	s.setup = su
	s.oracle = newOracle(s)
	s.lease = newLeases(cfg)
	if cfg.Metamorphic && (cfg.Shape == nil || !cfg.Shape.Leases) {
		s.lease = nil
	}
	if s.lease != nil {
		s.stats.LeaseRuns++
	}
	var inner store.Store = tap{Store: s.mem, o: s.oracle}
	if cfg.Variant == UnconditionalWrite {
		inner = unconditional{Store: inner}
	}
	if cfg.Variant == IgnoreLease {
		inner = leaseBlind{Store: inner, mem: s.mem}
	}
	s.faults = NewFaults(inner, cfg.Seed, su.throttle, su.lost)
	s.faults.on = func(_ string, f Fault) {
		if f == Throttle {
			s.stats.Throttled++
		} else {
			s.stats.LostResponses++
		}
	}
	s.st = s.faults
	s.coord = &coordinator{s: s}
	s.disc = &discoverer{s: s}
	for i := 0; i < su.publishers; i++ {
		s.publishers = append(s.publishers, &publisher{s: s, id: i})
	}
	for i := 0; i < su.workers; i++ {
		s.workers = append(s.workers, &worker{id: i})
	}
	// Epoch 1: the initial partitions, written directly (no faults).
	var members []string
	for _, p := range s.parts[:su.initial] {
		members = append(members, p.name)
	}
	if _, err := s.mem.SwapMembership(bg, 0, store.Membership{Scope: s.scope, Epoch: 1, Partitions: members, Proven: true}); err != nil {
		panic(err)
	}
	s.oracle.membership()
	s.syncLanes()
	s.desc = fmt.Sprintf("seed=%d variant=%s workers=%d publishers=%d depth=%d batch=%d coalesce=%v min_pages=%d linger=%s witness_group=%d retry=%v queue=%v prune=%d max_poll=%s %s %s parts=%s",
		cfg.Seed, cfg.Variant, su.workers, su.publishers, su.depth, su.batch, su.coalesce, su.minPages, su.linger, su.witnessGroup, su.retry, su.queue, su.prune, su.maxPoll, s.faults, s.lease, strings.Join(desc, ","))
	if su.discovery {
		s.desc += " discovery"
	}
	if su.broken != "" {
		s.desc += fmt.Sprintf(" malformed=%s(after %d fetches)", su.broken, s.byName[su.broken].brokenAfter)
	}
	if su.regress != "" {
		s.desc += " regressing-watermark=" + su.regress
	}
	if su.offsetShaped != "" {
		s.desc += " offset-shaped-successors=" + su.offsetShaped
	}
	return s
}

func (s *sim) part(name string) *part { return s.byName[name] }

// canRecreate reports whether p's source may be recreated: it exists, is
// neither split nor a split's child (lineage keeps its own proofs), is not
// the persistently malformed one, and no lane ends once caught up
// (exit_when_complete: a lane that ended never sees the new incarnation).
// A sealed source may be: recreated, it is open again, and the lane that
// watches its complete partition must find the new incarnation.
func (s *sim) canRecreate(p *part) bool {
	return p.appeared && !p.split && len(p.parents) == 0 && !p.broken && !p.offsetURLs && !p.prof.eot && !s.setup.exit
}

// maxParts bounds the partitions a schedule's splits may make.
const maxParts = 12

// canSplit returns why p cannot split ("" when it can): it must exist and
// not have split, its profile must complete once sealed, it must not be
// the persistently malformed one (it never completes), and the schedule
// must not end lanes with exit_when_complete (an ended lane would not
// read the seal, and the children would wait for ever).
func (s *sim) canSplit(p *part) string {
	switch {
	case p == nil || !p.appeared:
		return "no such partition"
	case p.split:
		return "already split"
	case p.sealed:
		return "sealed"
	case !p.prof.completes():
		return "its profile never completes"
	case p.broken:
		return "its answers turn persistently malformed"
	case p.offsetURLs:
		return "its provider pages by offset undeclared (its pages are refused)"
	case s.setup.exit:
		return "lanes end with exit_when_complete"
	case len(s.parts)+2 > maxParts:
		return "too many partitions"
	}
	return ""
}

// split seals partition name at its current end and makes two children
// appear (name+"1", name+"2") with it as their parent, of its profile,
// from the position after the highest finality clock of the provider (a
// child's positions follow its parent's), each with its own stream and
// workers drawn from its name's hash.
func (s *sim) split(name string) string {
	p := s.part(name)
	if why := s.canSplit(p); why != "" {
		return "nothing splits: " + why
	}
	var top int64
	for _, q := range s.parts {
		if q.appeared {
			top = max(top, q.final)
		}
	}
	p.sealed, p.split = true, true
	s.stats.Splits++
	var kids []string
	for i := 1; i <= 2; i++ {
		cn := name + strconv.Itoa(i)
		c := newPart(cn, rand.New(rand.NewPCG(partSeed(s.cfg.Seed, cn), 0x9a27)), p.prof, top+1)
		c.appeared, c.parents = true, []string{name}
		if s.cfg.Metamorphic {
			c.log = logRNG(s.cfg.Seed, cn)
		}
		h := partSeed(s.cfg.Seed, cn+"@workers")
		ws := []int{int(h % uint64(s.setup.workers))}
		if s.setup.workers > 1 && (h>>8)%2 == 0 {
			ws = append(ws, (ws[0]+1+int((h>>16)%uint64(s.setup.workers-1)))%s.setup.workers)
		}
		s.setup.assign[cn] = ws
		s.parts = append(s.parts, c)
		s.byName[cn] = c
		kids = append(kids, fmt.Sprintf("%s@%v", cn, ws))
	}
	return fmt.Sprintf("sealed through %d; children %s from position %d", p.final, strings.Join(kids, ", "), top+1)
}

func (s *sim) newAttemptID() string {
	s.attemptSeq++
	return fmt.Sprintf("a%07d", s.attemptSeq)
}

// syncLanes gives every partition the stored membership reads (its members
// and the partitions whose removal is still unproven) lanes on its
// assigned workers, and drops the lanes of the others.
func (s *sim) syncLanes() {
	m, err := s.mem.LoadMembership(bg, s.scope)
	if err != nil {
		return
	}
	active := map[string]bool{}
	for _, n := range m.Partitions {
		active[n] = true
	}
	for _, n := range m.Unproven {
		active[n] = true
	}
	for _, w := range s.workers {
		w.epoch, w.parents = m.Epoch, m.Parents
		kept := w.lanes[:0]
		for _, l := range w.lanes {
			if active[l.p.name] {
				kept = append(kept, l)
			} else {
				l.dead = true
			}
		}
		w.lanes = kept
	}
	for _, p := range s.parts {
		if !active[p.name] {
			continue
		}
		ws := s.setup.assign[p.name]
		if s.lease != nil {
			// With leases every worker may read every partition: its
			// instance machine decides which it runs.
			ws = ws[:0:0]
			for i := range s.workers {
				ws = append(ws, i)
			}
		}
		for _, wi := range ws {
			w := s.workers[wi]
			if !slices.ContainsFunc(w.lanes, func(l *lane) bool { return l.p == p }) {
				w.lanes = append(w.lanes, s.newLane(w, p))
				slices.SortFunc(w.lanes, func(a, b *lane) int { return strings.Compare(a.p.name, b.p.name) })
			}
		}
	}
}

func (s *sim) newLane(w *worker, p *part) *lane {
	return &lane{s: s, w: w, p: p, key: store.Key{Scope: s.scope, Partition: p.name}}
}

// deliver hands a batch to the sink.
func (s *sim) deliver(d *delivery) {
	s.oracle.delivered(d)
	s.sink.inflight = append(s.sink.inflight, d)
}

// genOp draws the next op from the schedule's PRNG. It looks at the state
// only to avoid ops that would find nothing to do (a worker without
// lanes, an ack with nothing in flight, a partition that does not exist
// yet); the op itself names actors and partitions, never state, so any op
// list can be replayed.
func (s *sim) genOp() Op {
	for {
		if op := s.drawOp(); !s.cfg.Metamorphic || s.metamorphicOp(op) {
			return op
		}
	}
}

func (s *sim) drawOp() Op {
	if op, ok := s.leaseOp(); ok {
		return op
	}
	r := s.rng
	var appeared, hidden []string
	for _, p := range s.parts {
		if p.appeared {
			appeared = append(appeared, p.name)
		} else {
			hidden = append(hidden, p.name)
		}
	}
	pick := func() string { return appeared[r.IntN(len(appeared))] }
	step := func() Op {
		var busy []int
		for _, w := range s.workers {
			if len(w.lanes) > 0 && !w.paused {
				busy = append(busy, w.id)
			}
		}
		w := r.IntN(len(s.workers))
		if len(busy) > 0 {
			w = busy[r.IntN(len(busy))]
		}
		return Op{Kind: OpStep, W: w, N: r.IntN(64), M: r.IntN(64)}
	}
	x := r.IntN(1000)
	switch {
	case x < 540:
		return step()
	case x < 775:
		if len(s.sink.inflight) == 0 {
			return step()
		}
		if x < 760 {
			return Op{Kind: OpAck, N: r.IntN(64)}
		}
		return Op{Kind: OpNack, N: r.IntN(64)}
	case x < 855:
		return Op{Kind: OpAppend, P: pick(), N: 1 + r.IntN(4)}
	case x < 875:
		return Op{Kind: OpTick, P: pick(), N: 1 + r.IntN(5)}
	case x < 882:
		if s.setup.recreates && x >= 879 {
			return Op{Kind: OpRecreate, P: pick()}
		}
		return Op{Kind: OpExpire, P: pick()}
	case x < 890:
		return Op{Kind: OpStall, P: pick(), N: 1 + r.IntN(4)}
	case x < 893:
		return Op{Kind: OpSeal, P: pick()}
	case x < 907:
		return Op{Kind: OpCrash, W: r.IntN(len(s.workers))}
	case x < 962:
		return Op{Kind: OpPublish, W: r.IntN(len(s.publishers))}
	case x < 966:
		return Op{Kind: OpPubCrash, W: r.IntN(len(s.publishers))}
	case x < 970:
		if len(hidden) == 0 {
			return step()
		}
		return Op{Kind: OpAppear, P: hidden[r.IntN(len(hidden))]}
	case x < 986 && s.setup.discovery:
		// The discoverer owns the membership; the provider splits
		// partitions now and then.
		if x < 983 {
			return Op{Kind: OpDiscover}
		}
		var can []string
		for _, name := range appeared {
			if s.canSplit(s.part(name)) == "" {
				can = append(can, name)
			}
		}
		if len(can) == 0 || x == 985 {
			return Op{Kind: OpDiscover}
		}
		return Op{Kind: OpSplit, P: can[r.IntN(len(can))]}
	case x < 980:
		return Op{Kind: OpAdd, P: pick(), Proof: []string{"replay", "replay", "covered", "covered", "none"}[r.IntN(5)]}
	case x < 986:
		return Op{Kind: OpRemove, P: pick(), Proof: []string{"seal", "seal", "seal", "none"}[r.IntN(4)]}
	case x < 988:
		return Op{Kind: OpRestart, P: pick()}
	default:
		return Op{Kind: OpUnpark, P: pick()}
	}
}

// exec performs one op and describes what happened.
func (s *sim) exec(op Op) string {
	if s.cfg.Metamorphic && (op.Kind == OpStep || op.Kind == OpCrash) && op.W >= 0 && len(s.workers) > 0 {
		// A metamorphic schedule replayed by fewer instances (Shape).
		op.W %= len(s.workers)
	}
	switch op.Kind {
	case OpStep:
		if op.W < 0 || op.W >= len(s.workers) {
			return "no such worker"
		}
		w := s.workers[op.W]
		if len(w.lanes) == 0 {
			return "no lanes"
		}
		if w.paused {
			return "paused"
		}
		l := w.lanes[op.N%len(w.lanes)]
		return l.name() + ": " + l.step(op.M)
	case OpAck, OpNack:
		d := s.sink.take(op.N)
		if d == nil {
			return "nothing in flight"
		}
		var err error
		if op.Kind == OpAck {
			s.oracle.acked(d)
			s.stats.Acks++
		} else {
			err = fmt.Errorf("nacked by the sink")
			s.stats.Nacks++
		}
		if !d.lane.dead {
			d.lane.acks = append(d.lane.acks, chain.Ack{Batch: d.batch, Err: err})
		}
		return d.String()
	case OpAppend:
		p := s.part(op.P)
		if p == nil || !p.appeared {
			return "no such partition"
		}
		first, last := p.appendEvents(op.N)
		if first == 0 {
			return "sealed"
		}
		return fmt.Sprintf("positions %d..%d", first, last)
	case OpTick:
		if p := s.part(op.P); p != nil && p.appeared {
			p.tick(op.N)
			return fmt.Sprintf("final through %d", p.final)
		}
		return "no such partition"
	case OpExpire:
		if p := s.part(op.P); p != nil && p.appeared {
			p.session++
			return fmt.Sprintf("session %d", p.session)
		}
		return "no such partition"
	case OpRecreate:
		if p := s.part(op.P); p != nil && s.canRecreate(p) {
			p.recreate()
			s.stats.Recreates++
			return fmt.Sprintf("incarnation %d: positions start again at %d", p.inc, p.created)
		}
		return "nothing to recreate"
	case OpStall:
		if p := s.part(op.P); p != nil && p.appeared {
			p.stall += op.N
			return fmt.Sprintf("stalled for %d fetches", p.stall)
		}
		return "no such partition"
	case OpSeal:
		// A source read with a re-read window shows late events below its
		// progress: it never ends.
		if p := s.part(op.P); p != nil && p.appeared && !p.sealed && !p.prof.contract.Rereads() {
			p.sealed = true
			return fmt.Sprintf("sealed through %d", p.final)
		}
		return "nothing to seal"
	case OpCrash:
		if op.W < 0 || op.W >= len(s.workers) {
			return "no such worker"
		}
		w := s.workers[op.W]
		w.inc++
		w.paused, w.resumed = false, false
		// A new process: a new instance machine and incarnation at its
		// next lease step (its old heartbeat is taken over by the others).
		w.im, w.pub, w.run, w.calls, w.exited = nil, nil, nil, nil, false
		s.stats.Crashes++
		for i, l := range w.lanes {
			l.dead = true
			w.lanes[i] = s.newLane(w, l.p)
		}
		return fmt.Sprintf("worker %d lost its memory (incarnation %d)", w.id, w.inc)
	case OpPublish:
		if op.W < 0 || op.W >= len(s.publishers) {
			return "no such publisher"
		}
		return s.publishers[op.W].step()
	case OpPubCrash:
		if op.W < 0 || op.W >= len(s.publishers) {
			return "no such publisher"
		}
		s.publishers[op.W].crash()
		s.stats.PubCrashes++
		return "publisher lost its memory"
	case OpAppear:
		p := s.part(op.P)
		if p == nil || p.appeared {
			return "nothing appears"
		}
		p.appeared = true
		if p.created == 0 {
			// A new partition: nothing before the highest clock so far.
			var top int64
			for _, q := range s.parts {
				if q.appeared && q != p {
					top = max(top, q.final)
				}
			}
			p.created = top + 1
			p.final = top
			return fmt.Sprintf("new partition from position %d", p.created)
		}
		first, last := p.appendEvents(2 + p.log.IntN(4))
		return fmt.Sprintf("old partition with a backlog %d..%d", first, last)
	case OpAdd, OpRemove:
		return s.coord.step(op)
	case OpDiscover:
		return s.disc.step()
	case OpSplit:
		return s.split(op.P)
	case OpPause, OpResume:
		return s.execLease(op)
	case OpRestart:
		// `tidemark restart` is the repair of a parked partition (README:
		// "fix the cause, then unpark or restart"); a worker notices it
		// through its park poll.
		p := s.part(op.P)
		if p == nil || !p.appeared {
			return "no such partition"
		}
		if cp, err := s.mem.LoadCheckpoint(bg, store.Key{Scope: s.scope, Partition: p.name}); err != nil || cp.Parked == "" {
			return "not parked"
		}
		return s.restartRepair(p)
	case OpUnpark:
		p := s.part(op.P)
		if p == nil || !p.appeared {
			return "no such partition"
		}
		k := store.Key{Scope: s.scope, Partition: p.name}
		cp, err := s.st.LoadCheckpoint(bg, k)
		if err != nil || cp.Parked == "" {
			return "not parked"
		}
		if _, err := s.st.SetParked(bg, k, cp.Cursor, cp.Generation, cp.Lease, ""); err != nil {
			return fmt.Sprintf("unpark: %v", err)
		}
		s.stats.Unparks++
		return "unparked"
	}
	return "unknown op"
}
