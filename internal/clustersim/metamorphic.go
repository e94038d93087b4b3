package clustersim

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/tidemark/tidemark/internal/store"
)

// The metamorphic comparison runs one schedule (a seed's ops) under
// several shapes of the input — promotion coalescing on and off,
// max_pages_in_flight 1, 2 and 8 — and requires the same outcome of each.
// The oracle judges every run on its own; the comparison catches what no
// single run shows: a configuration that changes what the scope ends with
// (a coalesced write that drops the watermark of a merged page stays
// consistent with every invariant of its own run).
//
// Config.Metamorphic makes the outcome a function of the ops alone:
//   - the event log is drawn from its own PRNG per partition (not the one
//     the provider's answers draw from, whose use depends on how often a
//     shape fetches), so every shape's provider holds the same events;
//   - the ops are those whose effect does not depend on the store's state
//     (no membership changes, appearances, operator restarts or recreated
//     sources, no seals of partitions whose empty pages cannot complete
//     them; no discovery, leases, exit_when_complete, late listings,
//     persistently malformed or regressing partitions, profiles that park
//     on divergence, rogue rotations): each of those may rightly end a
//     shape elsewhere (a park, an unproven epoch, an exit before later
//     events);
//   - the fault-free phase also stops pages without a successor, and runs
//     until nothing changes for settleRounds rounds, so every lane has
//     polled its head to the end.
// The first shape generates the ops; the others replay them (Config.Ops).

// Shape is the input's configuration a metamorphic run varies.
type Shape struct {
	Coalesce bool
	Depth    int           // max_pages_in_flight
	MaxPoll  time.Duration // max_poll_interval (0: no back-off)
	// Instances, when not 0, replaces the seed's number of workers (the
	// input's instances): each partition is read by one of them, by a
	// stable hash of its name, or, with Leases, they share every
	// partition through heartbeat leases, each running its instance
	// machine (lease.go). A step or crash of worker w in the ops is one of
	// worker w mod Instances.
	Instances int
	Leases    bool
	// Membership: the schedule runs discovery, its ops making partitions
	// appear and split at the provider (lanes read them from the start);
	// the number of epochs the discoverer writes may then differ (two
	// changes it decided apart may be written as one after a failed
	// swap), so the outcome compares the final membership and the
	// published frontier without their epoch numbers.
	Membership bool
}

func (s Shape) String() string {
	out := fmt.Sprintf("coalesce=%v depth=%d max_poll=%s", s.Coalesce, s.Depth, s.MaxPoll)
	if s.Instances > 0 {
		out += fmt.Sprintf(" instances=%d", s.Instances)
	}
	if s.Leases {
		out += " leases"
	}
	if s.Membership {
		out += " membership"
	}
	return out
}

// Shapes are the configurations every schedule is compared under; the
// first is the reference.
var Shapes = []Shape{{Depth: 1}, {Depth: 2}, {Depth: 8}, {Coalesce: true, Depth: 1}, {Coalesce: true, Depth: 2}, {Coalesce: true, Depth: 8}, {Depth: 2, MaxPoll: 8 * time.Second}, {Coalesce: true, Depth: 8, MaxPoll: 8 * time.Second}}

// InstanceShapes compare one schedule run by one instance, by three
// instances each reading its own partitions, and by three instances that
// share the partitions through heartbeat leases (RunInstances).
// The reference is three instances, so that the ops step every one of
// them.
var InstanceShapes = []Shape{{Coalesce: true, Depth: 2, Instances: 3}, {Coalesce: true, Depth: 2, Instances: 1}, {Coalesce: true, Depth: 2, Instances: 3, Leases: true}}

// MembershipInstanceShapes are InstanceShapes with membership changes
// (Shape.Membership).
var MembershipInstanceShapes = withMembership(InstanceShapes)

func withMembership(shapes []Shape) []Shape {
	out := slices.Clone(shapes)
	for i := range out {
		out[i].Membership = true
	}
	return out
}

// CheckMetamorphic: one schedule ends differently under two shapes.
const CheckMetamorphic Check = "metamorphic"

// settleRounds is how many fault-free rounds in a row change nothing
// before a metamorphic run's outcome is read.
const settleRounds = 20

// Outcome is what a metamorphic run must end with under every shape.
//
// What must be equal, and why:
//   - Delivered: the stable ids of the events with a terminal outcome at
//     the sink (at least once; duplicates and their number differ with
//     every retry). Every shape reads every event.
//   - Checkpoints, per partition: the complete flag; the watermark (the
//     last complete-through the provider certified, the same log's); and,
//     unless complete, the position the durable cursor resumes at (the
//     model's cursor also carries a session and a rotated nonce, which
//     differ with the answers a shape drew; a complete checkpoint's
//     cursor is its last page's own, whose start depends on where the
//     provider cut the pages, and it is never read again). Generations
//     differ: coalescing writes several pages at once, and the numbers
//     of restarts and of no-op promotions differ between shapes.
//   - Frontier: the published epoch, scalar and vector (its version, the
//     number of publications, differs).
//   - Membership: the stored membership's partitions and whether it is
//     proven (with its epoch unless Shape.Membership).
type Outcome struct {
	Delivered   []string
	Checkpoints map[string]string
	Frontier    string
	Membership  string
}

// diff returns the first difference between two outcomes ("" if none).
func (o Outcome) diff(p Outcome) string {
	if !slices.Equal(o.Delivered, p.Delivered) {
		for _, id := range o.Delivered {
			if !slices.Contains(p.Delivered, id) {
				return fmt.Sprintf("event %s delivered in one, not the other (%d vs %d events)", id, len(o.Delivered), len(p.Delivered))
			}
		}
		for _, id := range p.Delivered {
			if !slices.Contains(o.Delivered, id) {
				return fmt.Sprintf("event %s delivered in one, not the other (%d vs %d events)", id, len(o.Delivered), len(p.Delivered))
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(o.Checkpoints)) {
		if a, b := o.Checkpoints[name], p.Checkpoints[name]; a != b {
			return fmt.Sprintf("partition %s ends %s vs %s", name, a, b)
		}
	}
	if len(o.Checkpoints) != len(p.Checkpoints) {
		return fmt.Sprintf("checkpoints of %d vs %d partitions", len(o.Checkpoints), len(p.Checkpoints))
	}
	if o.Frontier != p.Frontier {
		return fmt.Sprintf("frontier %s vs %s", o.Frontier, p.Frontier)
	}
	if o.Membership != p.Membership {
		return fmt.Sprintf("membership %s vs %s", o.Membership, p.Membership)
	}
	return ""
}

// outcome reads the run's outcome from the model and the in-memory store (memstore).
func (s *sim) outcome() *Outcome {
	o := &Outcome{Checkpoints: map[string]string{}}
	for _, p := range s.parts {
		for _, log := range p.logs() {
			for _, e := range log.events {
				if e.acked {
					o.Delivered = append(o.Delivered, e.id)
				}
			}
		}
		cp, err := s.mem.LoadCheckpoint(bg, store.Key{Scope: s.scope, Partition: p.name})
		if err != nil {
			continue
		}
		resume := "-"
		if !cp.Complete {
			if c, err := decodeCursor(cp.Cursor); err == nil {
				resume = fmt.Sprint(c.next)
			}
		}
		o.Checkpoints[p.name] = fmt.Sprintf("(resume %s, watermark %s, complete %v, parked %q)", resume, cp.Watermark, cp.Complete, cp.Parked)
	}
	slices.Sort(o.Delivered)
	o.Delivered = slices.Compact(o.Delivered)
	epochs := s.cfg.Shape == nil || !s.cfg.Shape.Membership
	if m, err := s.mem.LoadMembership(bg, s.scope); err == nil {
		o.Membership = fmt.Sprintf("%v proven %v", m.Partitions, m.Proven)
		if epochs {
			o.Membership = fmt.Sprintf("epoch %d %s", m.Epoch, o.Membership)
		}
	}
	if f, err := s.mem.LoadFrontier(bg, s.scope); err == nil {
		var b strings.Builder
		if epochs {
			fmt.Fprintf(&b, "epoch %d ", f.Epoch)
		}
		fmt.Fprintf(&b, "scalar %s vector", f.Scalar)
		for _, n := range slices.Sorted(maps.Keys(f.Vector)) {
			fmt.Fprintf(&b, " %s=%s", n, f.Vector[n])
		}
		o.Frontier = b.String()
	}
	return o
}

// metamorphicOp reports whether op may be part of a metamorphic schedule.
func (s *sim) metamorphicOp(op Op) bool {
	switch k := op.Kind; k {
	case OpAppear, OpSplit, OpDiscover:
		// Only under Shape.Membership (discovery): the provider's list is
		// the model's, and the membership settles to it.
		return s.setup.discovery
	case OpAdd, OpRemove, OpRestart, OpRecreate, OpPause, OpResume:
		return false
	case OpSeal:
		// Only partitions whose sealed empty page completes them: where
		// empty pages carry no evidence, only a page with events read
		// after the seal completes it, which depends on when it is read
		// (seed 312 of -base=201: depth 1 read b's last events after the
		// seal, depth 8 before it).
		p := s.part(op.P)
		return p != nil && p.prof.completes()
	}
	return true
}

// metamorphicSetup restricts the seed's setup (drawn as usual, so the
// other choices of the seed stay) to what ends alike under every shape.
func (s *sim) metamorphicSetup(su *setup) {
	su.exit, su.discovery, su.recreates = false, false, false
	if sh := s.cfg.Shape; sh != nil {
		su.coalesce, su.depth, su.maxPoll = sh.Coalesce, sh.Depth, sh.MaxPoll
		su.discovery = sh.Membership
	}
}

// metamorphicProfile replaces a profile a metamorphic schedule cannot end
// alike under every shape.
func metamorphicProfile(prof profile) profile {
	switch prof.name {
	case densePark.name, lateListing.name, rereadLate.name, rereadBeyond.name:
		// A re-read partition restarts a pass every interval for ever:
		// its checkpoint never stops changing, so a schedule with one
		// never settles and runs every settle round (maxRounds).
		prof = denseCT
	}
	prof.rogue = 0
	return prof
}

// logRNG is the PRNG of a metamorphic partition's event log.
func logRNG(seed uint64, name string) *rand.Rand {
	return rand.New(rand.NewPCG(partSeed(seed, name+"@log"), 0x106))
}

// settle runs fault-free rounds, after the partitions caught up, until
// settleRounds in a row change neither a checkpoint nor the frontier.
func (s *sim) settle(step *int) {
	last, still := "", 0
	for round := 0; round < maxRounds && still < settleRounds && s.oracle.fail == nil; round++ {
		o := s.outcome()
		now := fmt.Sprint(o.Checkpoints, o.Frontier, len(o.Delivered))
		if now == last && s.settled() == "" {
			still++
		} else {
			last, still = now, 0
		}
		s.round(round, step, "settle")
	}
}

// MetamorphicResult is the outcome of one schedule under every shape.
type MetamorphicResult struct {
	Seed    uint64
	Runs    int
	Failure *Failure
	// Outcome is the reference shape's (every shape's, when Failure is
	// nil).
	Outcome *Outcome
	// Stats sums the runs' counts.
	Stats Stats
}

// RunMetamorphic runs cfg's schedule under every shape (Shapes) with the
// oracle and liveness on, and compares their outcomes with the first's.
func RunMetamorphic(cfg Config) MetamorphicResult {
	return runShapes(cfg, Shapes)
}

// RunInstances runs cfg's schedule under every InstanceShapes (one
// instance, three, three with leases) with the oracle and liveness on, and
// compares their outcomes with the first's: the same source contents and
// faults (the ops name the partitions and the faults; a step of a worker
// the run lacks is one of another), so the same events delivered, the
// same final checkpoints and the same published frontier.
func RunInstances(cfg Config) MetamorphicResult {
	return runShapes(cfg, InstanceShapes)
}

// RunInstancesMembership is RunInstances with membership changes
// (MembershipInstanceShapes): partitions appear and split at the provider,
// the discoverer changes the membership, and children wait for their
// parents, in the same schedule by three instances, one, and three with
// leases.
func RunInstancesMembership(cfg Config) MetamorphicResult {
	return runShapes(cfg, MembershipInstanceShapes)
}

func runShapes(cfg Config, shapes []Shape) MetamorphicResult {
	cfg.Metamorphic, cfg.Liveness = true, true
	res := MetamorphicResult{Seed: cfg.Seed}
	var ref *Outcome
	var refShape Shape
	for i, sh := range shapes {
		c := cfg
		c.Shape = &sh
		r := Run(c)
		res.Runs++
		res.Stats.Add(r.Stats)
		if r.Failure != nil {
			res.Failure = r.Failure
			return res
		}
		if i == 0 {
			ref, refShape = r.Outcome, sh
			res.Outcome = ref
			cfg.Ops = r.ops()
			continue
		}
		if d := ref.diff(*r.Outcome); d != "" {
			res.Failure = &Failure{Seed: cfg.Seed, Variant: cfg.Variant, Config: c, Replayed: true, Step: r.Steps - 1, Check: CheckMetamorphic,
				Detail: fmt.Sprintf("%s and %s end differently: %s", refShape, sh, d), Setup: r.Setup, Ops: r.ops()}
			return res
		}
	}
	return res
}
