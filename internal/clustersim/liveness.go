package clustersim

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/tidemark/tidemark/internal/chain"
	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/frontier"
	"github.com/tidemark/tidemark/internal/frontierrec"
	"github.com/tidemark/tidemark/internal/membership"
	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/store"
)

// CheckLiveness: after the faults stop, every partition a worker reads
// catches up with its provider: every event has a terminal outcome and the
// durable cursor is past the last event; a partition whose answers are
// persistently malformed (the one fault that does not stop) ends parked
// for it instead, unless it completed first. Once every partition is read
// the scope settles: the published frontier catches up with the durable
// checkpoints (what a publisher reading every checkpoint of the epoch would
// publish is published), with discovery the membership is what the
// provider's list asks for, and a schedule with a split ends in a proven
// epoch without the split parents. The operator unparks parked
// partitions, and restarts from the provider's boundary those parked for a
// reason that only an operator can clear (an expired cursor under a park
// recovery, a provider that broke its own contract).
const CheckLiveness Check = "liveness"

// The fault-free phase runs in rounds: a round steps every lane once,
// acknowledges every batch in flight, repairs parked partitions and steps
// the publishers. It ends when every read partition caught up, or when
// stallRounds rounds in a row made no progress (no event newly
// acknowledged, no durable cursor moved forward since the round before),
// or after maxRounds.
const (
	stallRounds = 150
	maxRounds   = 20000
)

// operatorRestart reports whether an operator clears a park reason with a
// restart from a stable boundary rather than an unpark: the provider's own
// faults (an expired cursor, a rotation its contract forbids, which only
// the classifier's detail names) that a retry of the same cursor cannot
// get past.
func operatorRestart(parked string) bool {
	return chain.ParkKindOf(parked) == chain.ParkExpired || strings.Contains(parked, "does not permit token rotation")
}

// quiesce stops every fault and runs until every read partition caught up
// or quiesceRounds passed. It reports a liveness violation for the
// partitions that did not.
func (s *sim) quiesce(step *int) {
	s.faults.throttle, s.faults.lost = 0, 0
	for _, p := range s.parts {
		p.prof.transient, p.prof.glitch, p.prof.quiet, p.prof.omit, p.prof.lag, p.prof.rogue, p.prof.shift, p.prof.garbage = 0, 0, 0, 0, 0, 0, 0, 0
		p.prof.malformed = 0 // the persistent fault (part.broken) stays
		p.regress = 0
		p.prof.offsetShift = 0
		p.prof.cutFirst = 0
		p.stall = 0
		if s.cfg.Metamorphic {
			p.prof.nosucc = 0 // every head ends with a successor: cursors converge
		}
		p.show() // every writer has finished: late keys are visible
	}
	for _, w := range s.workers {
		w.paused = false
	}
	s.record(fmt.Sprintf("#%d quiesce: faults stopped", *step))
	// Progress is judged against the round before, not the best so far: a
	// restart from the provider's boundary moves the durable cursor back
	// (a listing that is not a snapshot restarts from its first key and
	// walks up to its applied boundary again), and the walk back up is
	// progress. A partition that loops for ever still fails, at maxRounds.
	last, still := s.progress(), 0
	for round := 0; round < maxRounds && still < stallRounds; round++ {
		if s.caughtUp() == "" && s.settled() == "" {
			s.splitsSettled()
			return
		}
		if p := s.progress(); p > last {
			last, still = p, 0
		} else {
			last = p
			still++
		}
		s.round(round, step, "quiesce")
		if s.oracle.fail != nil {
			return
		}
	}
	if why := s.caughtUp(); why != "" {
		s.oracle.violate(CheckLiveness, "no progress in %d fault-free rounds after the faults stopped: %s", stallRounds, why)
	} else if why := s.settled(); why != "" {
		s.oracle.violate(CheckLiveness, "every partition was read, yet the scope did not settle in %d fault-free rounds: %s", stallRounds, why)
	}
}

// round is one fault-free round: every lane stepped once, every batch in
// flight acknowledged, parked partitions repaired, the discoverer and the
// publishers stepped; then the oracle.
func (s *sim) round(round int, step *int, what string) {
	var lines []string
	for _, w := range s.workers {
		for _, l := range w.lanes {
			if out := l.step(round); out != "" {
				lines = append(lines, l.name()+": "+out)
			}
		}
	}
	for len(s.sink.inflight) > 0 {
		d := s.sink.take(0)
		s.oracle.acked(d)
		if !d.lane.dead {
			d.lane.acks = append(d.lane.acks, chain.Ack{Batch: d.batch})
		}
	}
	for _, p := range s.parts {
		if out := s.repair(p); out != "" {
			lines = append(lines, p.name+": "+out)
		}
	}
	if s.setup.discovery {
		lines = append(lines, "discover: "+s.disc.step())
	}
	for _, f := range s.publishers {
		lines = append(lines, fmt.Sprintf("f%d: %s", f.id, f.step()))
	}
	*step++
	s.stats.Steps++
	s.record(fmt.Sprintf("#%d %s round %d: %s", *step, what, round, strings.Join(lines, " | ")))
	s.syncLanes()
	s.oracle.check()
}

// settled returns "" when the scope's published state has caught up with
// its durable state, else what lags: with discovery, the membership the
// provider's list asks for (membership.Decide from the store changes
// nothing); always, the published frontier: what a publisher reading every
// checkpoint of the current epoch computes (frontier.Tracker) would not
// be published over the stored record (frontier.NextPublication).
func (s *sim) settled() string {
	if s.setup.discovery {
		in, err := membership.Read(bg, s.mem, s.scope, s.listing(), true)
		if err != nil {
			return err.Error()
		}
		if plan := membership.Decide(in); plan.Changed {
			return "the membership is not the one the provider's list asks for: " + plan.String()
		}
	}
	m, err := s.mem.LoadMembership(bg, s.scope)
	if err != nil {
		return err.Error()
	}
	t, err := frontier.NewTrackerFor(frontierrec.Membership(m))
	if err != nil {
		return err.Error()
	}
	cps, err := s.mem.ListCheckpoints(bg, s.scope)
	if err != nil {
		return err.Error()
	}
	for _, cp := range cps {
		_, _ = t.Apply(cp.Partition, cp.Watermark)
	}
	// In the form the store keeps it (held-by list capped), as the
	// publisher compares it.
	truth := frontierrec.Snapshot(frontierrec.Record(s.scope, t.Frontier()))
	f, err := s.mem.LoadFrontier(bg, s.scope)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err.Error()
	}
	if _, lags := frontier.NextPublication(frontierrec.Snapshot(f), truth); lags {
		return fmt.Sprintf("the published frontier (%s) lags what every checkpoint of the epoch gives (%s)", describeFrontier(f), truth)
	}
	return ""
}

// splitsSettled checks, once the scope settled, that a schedule with a
// split ended in a proven epoch without any split parent (each complete,
// it left sealed although the provider still lists it).
func (s *sim) splitsSettled() {
	var parents []string
	for _, p := range s.parts {
		if p.split {
			parents = append(parents, p.name)
		}
	}
	if len(parents) == 0 {
		return
	}
	m, err := s.mem.LoadMembership(bg, s.scope)
	if err != nil {
		s.oracle.violate(CheckModel, "cannot read membership: %v", err)
		return
	}
	for _, p := range parents {
		if slices.Contains(m.Partitions, p) || slices.Contains(m.Unproven, p) {
			s.oracle.violate(CheckLiveness, "the scope settled in epoch %d with the split parent %s still in it: %s", m.Epoch, p, describeMembership(m))
			return
		}
	}
	if !m.Proven && s.stats.RegressionsSeen == 0 && !s.awaitingIncarnations(m) {
		// (After a reported regression the scalar may be withdrawn — also
		// by a write whose response was lost — and the epoch stays
		// unproven until an operator proves a cutover.)
		s.oracle.violate(CheckLiveness, "the scope settled after splits of %v in an unproven epoch: %s", parents, describeMembership(m))
		return
	}
	if !m.Proven {
		return
	}
	s.stats.SplitRunsSettled++
}

// awaitingIncarnations reports whether every unproven entry of m is a
// recreated source whose checkpoint was reset by that change and whose new
// incarnation has given nothing to promote yet (no event, no evidence: a
// quiet source without watermarks). Its proof is the new incarnation's
// first promoted page (docs/design.md#source-incarnations); until then
// the epoch is rightly unproven, and the scalar would be withheld anyway
// (the partition has no watermark).
func (s *sim) awaitingIncarnations(m store.Membership) bool {
	if len(m.Unproven) == 0 {
		return false
	}
	for _, p := range m.Unproven {
		e, ok := m.Incarnations[p]
		if !ok {
			return false
		}
		cp, err := s.mem.LoadCheckpoint(bg, store.Key{Scope: s.scope, Partition: p})
		if err != nil || cp.IncarnationEpoch != e || !strings.HasPrefix(cp.PromotedWitness, "incarnation:") || !cp.Watermark.IsZero() {
			return false
		}
	}
	return true
}

// progress grows whenever an event gets its first terminal outcome, a
// durable cursor moves forward, a partition completes, a membership epoch
// is written or the frontier is published.
func (s *sim) progress() int64 {
	var n int64
	for _, p := range s.parts {
		p.ackedBelow(0)
		n += int64(p.firstUnacked)
		for i := p.firstUnacked; i < len(p.events); i++ {
			if p.events[i].acked {
				n++
			}
		}
		if cp, err := s.mem.LoadCheckpoint(bg, store.Key{Scope: s.scope, Partition: p.name}); err == nil {
			if c, err := decodeCursor(cp.Cursor); err == nil {
				n += c.next
			}
			// A restart from the same boundary writes a new generation and
			// moves nothing else: a run of them is the way to the park
			// that ends a restart loop (max_restarts, with a growing
			// back-off), which takes more rounds than stallRounds when
			// one lane also renews heartbeats and checks incarnations. A
			// loop that never parks still fails, at maxRounds.
			n += int64(cp.Generation)
			if cp.Complete {
				n++
			}
		}
	}
	// The scope settling is progress too: a new epoch, a publication.
	if m, err := s.mem.LoadMembership(bg, s.scope); err == nil {
		n += int64(m.Epoch)
	}
	if f, err := s.mem.LoadFrontier(bg, s.scope); err == nil {
		n += int64(f.Version)
	}
	return n
}

// repair is the operator: unpark a parked partition, or restart it from
// the provider's boundary when its reason calls for it.
func (s *sim) repair(p *part) string {
	k := store.Key{Scope: s.scope, Partition: p.name}
	cp, err := s.st.LoadCheckpoint(bg, k)
	if err != nil || cp.Parked == "" {
		return ""
	}
	if p.brokenActive() && chain.ParkKindOf(cp.Parked) == chain.ParkMalformed {
		return "" // its source is broken: an unpark would only park it again
	}
	if offsetShapedPark(p, cp) {
		return "" // its contract does not say how it pages: an unpark would only park it again
	}
	if operatorRestart(cp.Parked) {
		return s.restartRepair(p)
	}
	if _, err := s.st.SetParked(bg, k, cp.Cursor, cp.Generation, cp.Lease, ""); err != nil {
		return fmt.Sprintf("unpark: %v", err)
	}
	s.stats.Unparks++
	return "unparked (" + cp.Parked + ")"
}

// restartRepair is `tidemark restart`: unpark if parked, then one
// promotion from the (cursor, generation) read to the provider's boundary,
// keeping the watermark.
func (s *sim) restartRepair(p *part) string {
	k := store.Key{Scope: s.scope, Partition: p.name}
	cp, err := s.st.LoadCheckpoint(bg, k)
	if err != nil {
		return fmt.Sprintf("restart: %v", err)
	}
	if cp.Parked != "" {
		if cp, err = s.st.SetParked(bg, k, cp.Cursor, cp.Generation, cp.Lease, ""); err != nil {
			return fmt.Sprintf("restart: unpark: %v", err)
		}
	}
	to := p.restartCursor(cp.Watermark, coord.Position{}, false) // a re-read partition: from its start
	if _, err := s.st.Promote(bg, store.Promotion{
		Key: k, FromCursor: cp.Cursor, FromGeneration: cp.Generation,
		To: to, WitnessID: "repair:restart", Epoch: cp.Epoch, Lease: cp.Lease,
	}); err != nil {
		return fmt.Sprintf("restart: %v", err)
	}
	s.stats.Repairs++
	return "restarted at " + curString(to)
}

// caughtUp returns "" when every partition a lane reads has caught up,
// else which one has not and why.
func (s *sim) caughtUp() string {
	read, reading := map[string]bool{}, map[string]bool{}
	for _, w := range s.workers {
		for _, l := range w.lanes {
			read[l.p.name] = true
			if !l.exited && !l.w.exited {
				reading[l.p.name] = true
			}
		}
	}
	for _, p := range s.parts {
		if !read[p.name] || !reading[p.name] {
			continue // not read, or every lane reading it ended (exit_when_complete)
		}
		cp, err := s.mem.LoadCheckpoint(bg, store.Key{Scope: s.scope, Partition: p.name})
		if err != nil {
			return fmt.Sprintf("partition %s has no checkpoint", p.name)
		}
		if offsetShapedPark(p, cp) {
			continue // it pages by offset undeclared: parked for it, as it must
		}
		if p.broken && !cp.Complete {
			// Persistently malformed answers: it must end parked for them.
			if p.brokenActive() && chain.ParkKindOf(cp.Parked) == chain.ParkMalformed {
				continue
			}
			return fmt.Sprintf("partition %s answers only malformed pages after %d fetches (%d made) but is not parked for it (checkpoint g%d %s%s)", p.name, p.brokenAfter, p.fetches, cp.Generation, curString(cp.Cursor), parked(cp))
		}
		if h := reconcile.IncarnationHash(p.incarnationValue()); cp.Incarnation != "" && cp.Incarnation != h {
			return fmt.Sprintf("partition %s: the checkpoint (g%d %s%s) reads incarnation %s, the source is in incarnation %d (%s)", p.name, cp.Generation, curString(cp.Cursor), parked(cp), cp.Incarnation, p.inc, h)
		}
		ackedBelow := p.ackedBelowOnTime
		if p.prof.contract.Rereads() {
			// A re-read window delivers the late events too, those shown
			// within it (event.beyond: the source broke the bound).
			ackedBelow = p.ackedBelowInWindow
		}
		if e, ok := ackedBelow(p.final + 1); !ok {
			return fmt.Sprintf("partition %s: event %s has no terminal outcome (checkpoint g%d %s%s)", p.name, e.id, cp.Generation, curString(cp.Cursor), parked(cp))
		}
		if cp.Complete {
			continue // complete: every event has an outcome (checked above) and nothing follows
		}
		if p.split {
			// A split parent is sealed and must complete (then leave the
			// membership, splitsSettled): a parent without events of its
			// own has a cursor past them from its start.
			return fmt.Sprintf("split parent %s is sealed but not complete (checkpoint g%d %s%s)", p.name, cp.Generation, curString(cp.Cursor), parked(cp))
		}
		if p.prof.nosucc > 0 {
			// missing_successor: poll: the last page holds (its receipts
			// recorded) until the source gives a successor; every event
			// has an outcome (checked above).
			continue
		}
		c, err := decodeCursor(cp.Cursor)
		if err != nil {
			return err.Error()
		}
		if n := len(p.events); n > 0 && c.next <= p.events[n-1].pos {
			return fmt.Sprintf("partition %s: durable cursor %s (g%d%s) is not past its last event %d", p.name, curString(cp.Cursor), cp.Generation, parked(cp), p.events[n-1].pos)
		}
	}
	return ""
}

func parked(cp store.Checkpoint) string {
	if cp.Parked == "" {
		return ""
	}
	return ", parked: " + cp.Parked
}

// offsetShapedPark reports whether p, whose provider pages by offset
// though its contract does not say so (part.offsetURLs), is parked for it:
// the monitor refused its pages (docs/design.md#contract-monitors).
func offsetShapedPark(p *part, cp store.Checkpoint) bool {
	return p.offsetURLs && chain.ParkKindOf(cp.Parked) == chain.ParkContractViolation && strings.Contains(cp.Parked, "offset_shaped_successor")
}
