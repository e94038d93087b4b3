package reconcile

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/provider"
)

// A scenario retries one input cursor (C41 at generation 9) a few times
// against a provider that shifts its pages at random: it replays, rotates
// tokens, drops, inserts and renumbers events, changes payloads, truncates,
// extends, grows at the head, empties pages and adds or removes coverage
// evidence. Each fetch
// goes through the caller's duties (Build, persist, Classify, record
// receipts); after each one every witness with a verdict is offered to
// DecidePromotion, and every promotion is checked by an oracle written
// independently of the classifier.
//
// The oracle's safety property: a promoted response never omits, inside its
// range (above the applied boundary, up to its last position; everything
// above the boundary for an empty response), an event that another fetch of
// C41 showed, unless that fetch was one the response was reconciled with
// and the response carries a coverage proof that the event is no longer
// required. In particular an event shown by a fetch after the response's
// classification, or by any fetch when there is no proof, is never skipped.

// chooser is the scenario's only source of choices: a seeded PCG in the
// property test, the fuzzer's bytes in FuzzClassify.
type chooser interface{ IntN(n int) int }

// bytesChooser draws choices from bytes, then zeros.
type bytesChooser struct{ b []byte }

func (c *bytesChooser) IntN(n int) int {
	if n <= 1 || len(c.b) == 0 {
		return 0
	}
	v := int(c.b[0])
	c.b = c.b[1:]
	return v % n
}

type pageEvent struct {
	id      string
	pos     int64
	payload string
}

type page struct {
	events    []pageEvent
	successor string
	marker    string
	ct        int64 // 0: no watermark
}

func (p page) clone() page {
	p.events = slices.Clone(p.events)
	return p
}

func (p page) response() Response {
	r := Response{Successor: []byte(p.successor), Marker: []byte(p.marker)}
	if p.ct != 0 {
		r.CompleteThrough = coord.Integer(p.ct)
	}
	for _, e := range p.events {
		r.Events = append(r.Events, evp(e.id, e.pos, e.payload))
	}
	return r
}

func (p page) String() string {
	var b strings.Builder
	for i, e := range p.events {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s@%d", e.id, e.pos)
		if e.payload != "p" {
			fmt.Fprintf(&b, "(%s)", e.payload)
		}
	}
	fmt.Fprintf(&b, " -> %s", p.successor)
	if p.marker != "" {
		fmt.Fprintf(&b, " marker=%s", p.marker)
	}
	if p.ct != 0 {
		fmt.Fprintf(&b, " ct=%d", p.ct)
	}
	return b.String()
}

type stats struct {
	fetches, promotions, errors, replays, loops int
	classes                                     map[RetryClass]int
}

func (s *stats) add(o stats) {
	s.fetches += o.fetches
	s.promotions += o.promotions
	s.errors += o.errors
	s.replays += o.replays
	if s.classes == nil {
		s.classes = map[RetryClass]int{}
	}
	for k, v := range o.classes {
		s.classes[k] += v
	}
}

type scenario struct {
	ch        chooser
	c         Contract
	cp        Checkpoint
	boundary  pageEvent
	receipts  []EventWitness
	pages     []page
	ws        []Witness
	verdicts  map[string]Verdict
	accepted  bool // every classification so far advanced without error
	nextID    int
	log       []string
	st        stats
	violation error
}

func (s *scenario) logf(format string, a ...any) { s.log = append(s.log, fmt.Sprintf(format, a...)) }

func (s *scenario) fail(format string, a ...any) {
	if s.violation == nil {
		s.violation = fmt.Errorf(format, a...)
	}
}

func (s *scenario) newID() string { s.nextID++; return fmt.Sprintf("e%d", s.nextID) }

// successor draws a successor: "" (a head page, polled again under
// missing_successor: poll) one time in five, else one of four tokens.
func (s *scenario) successor() string {
	if n := s.ch.IntN(5); n < 4 {
		return fmt.Sprintf("N%d", n)
	}
	return ""
}

// runScenario plays one scenario and returns the first violation, with the
// scenario's log.
func runScenario(ch chooser) (stats, []string, error) {
	s := &scenario{ch: ch, verdicts: map[string]Verdict{}, accepted: true, st: stats{classes: map[RetryClass]int{}}}
	s.c = Contract{
		EmptyPage:         EmptyPage(1 + ch.IntN(3)),
		TokensMayRotate:   ch.IntN(2) == 0,
		OrderedPositions:  true,
		DensePositions:    ch.IntN(2) == 0,
		ExclusiveBoundary: ch.IntN(2) == 0,
		SnapshotMarker:    ch.IntN(2) == 0,
		Recovery:          Recovery(ch.IntN(4)),
		Finality:          provider.FinalitySource,
	}
	has := ch.IntN(4) != 0
	s.cp = Checkpoint{Scope: scope, Partition: part, Cursor: []byte("C41"), Generation: 9, PromotedWitness: "z0"}
	next := int64(1)
	if has {
		s.cp.Applied, s.cp.HasApplied = coord.IntPosition(100), true
		next = 101
		s.boundary = pageEvent{"b100", 100, "p"}
		if ch.IntN(2) == 0 {
			s.receipts = []EventWitness{EventOf(evp("b100", 100, "p"))}
		}
	}
	s.logf("contract %+v applied=%v/%s receipts=%d", s.c, has, s.cp.Applied, len(s.receipts))

	base := page{successor: s.successor()}
	for range 1 + ch.IntN(5) {
		if ch.IntN(8) == 0 {
			next++ // a position never shown by any fetch
		}
		base.events = append(base.events, pageEvent{s.newID(), next, "p"})
		next += 1
		if !s.c.DensePositions {
			next += int64(ch.IntN(3))
		}
	}
	s.fetch(base, "first")
	for range 1 + ch.IntN(5) {
		if s.violation != nil {
			break
		}
		p, op := s.mutate()
		s.fetch(p, op)
	}
	if s.violation == nil {
		s.settle()
	}
	return s.st, s.log, s.violation
}

// mutate derives the next response from one fetched earlier.
func (s *scenario) mutate() (page, string) {
	ch := s.ch
	p := s.pages[ch.IntN(len(s.pages))].clone()
	n := len(p.events)
	top := s.cp.Applied.Int
	if n > 0 {
		top = p.events[n-1].pos
	}
	fresh := func() {
		p.successor = s.successor()
		p.marker, p.ct = "", 0
		if ch.IntN(4) == 0 {
			p.marker = fmt.Sprintf("M%d", ch.IntN(3))
		}
		if ch.IntN(6) == 0 {
			p.ct = top + int64(ch.IntN(3))
		}
	}
	switch op := ch.IntN(10); op {
	case 0:
		return p, "replay"
	case 1:
		old := p.successor
		for p.successor == old {
			p.successor = fmt.Sprintf("R%d", s.nextID)
			s.nextID++
		}
		return p, "rotate"
	case 2:
		if n > 0 {
			i := ch.IntN(n)
			p.events = slices.Delete(p.events, i, i+1)
		}
		fresh()
		return p, "drop"
	case 3:
		e := pageEvent{s.newID(), top + 1, "p"}
		switch {
		case s.c.DensePositions && n > 0 && ch.IntN(2) == 0:
			i := ch.IntN(n) // insert before i, renumbering the rest
			e.pos = p.events[i].pos
			for j := i; j < n; j++ {
				p.events[j].pos++
			}
			p.events = slices.Insert(p.events, i, e)
		case !s.c.DensePositions:
			lo := s.cp.Applied.Int + 1
			e.pos = lo + int64(ch.IntN(int(top-lo+3)))
			if !slices.ContainsFunc(p.events, func(x pageEvent) bool { return x.pos == e.pos }) {
				p.events = append(p.events, e)
				slices.SortFunc(p.events, func(a, b pageEvent) int { return int(a.pos - b.pos) })
			}
		default:
			p.events = append(p.events, e)
		}
		fresh()
		return p, "insert"
	case 4:
		if n > 0 {
			p.events[ch.IntN(n)].payload = fmt.Sprintf("v%d", ch.IntN(3))
		}
		fresh()
		return p, "payload"
	case 5:
		if n > 0 && ch.IntN(2) == 0 {
			p.events = p.events[:n-1]
		} else {
			p.events = append(p.events, pageEvent{s.newID(), top + 1 + int64(ch.IntN(2)), "p"})
		}
		fresh()
		return p, "resize"
	case 6:
		p.events = nil
		fresh()
		return p, "empty"
	case 7:
		if ch.IntN(2) == 0 {
			p.marker = fmt.Sprintf("M%d", ch.IntN(3))
		} else {
			p.ct = top
		}
		return p, "evidence"
	case 8:
		// Growth at the head: the source appended after the page, which
		// stays a head page (no successor) or gets one.
		for range 1 + ch.IntN(2) {
			top += 1 + int64(ch.IntN(2))
			if s.c.DensePositions {
				top = max(top, s.cp.Applied.Int+1)
			}
			p.events = append(p.events, pageEvent{s.newID(), top, "p"})
		}
		p.successor = ""
		if ch.IntN(3) == 0 {
			p.successor = s.successor()
		}
		return p, "grow"
	default:
		if s.cp.HasApplied && (n == 0 || p.events[0].pos > s.cp.Applied.Int) {
			b := s.boundary
			if ch.IntN(3) == 0 {
				b.id = "other100"
			}
			p.events = append([]pageEvent{b}, p.events...)
		}
		fresh()
		return p, "repeat-boundary"
	}
}

// fetch plays the caller's duties for one response.
func (s *scenario) fetch(p page, op string) {
	attempt := fmt.Sprintf("a%02d", len(s.pages)+1)
	s.pages = append(s.pages, p)
	s.st.fetches++
	w, err := Build(BuildInput{Scope: scope, Partition: part, Generation: 9, InputCursor: []byte("C41"), AttemptID: attempt, Response: p.response(), Contract: s.c})
	if err != nil {
		s.logf("%s %s: %s => build: %v", attempt, op, p, err)
		if !errors.Is(err, ErrBadResponse) && !errors.Is(err, ErrLoop) {
			s.fail("build %s: unexpected error %v", attempt, err)
		}
		if errors.Is(err, ErrLoop) {
			s.st.loops++
		}
		s.accepted = false
		return
	}
	v, err := Classify(ClassifyInput{Contract: s.c, Applied: s.cp.Applied, HasApplied: s.cp.HasApplied, Prior: s.ws, Receipts: s.receipts, Witness: w})
	s.ws = append(s.ws, w) // the witness is durable before anything else
	if err != nil {
		s.logf("%s %s: %s => classify: %v", attempt, op, p, err)
		if !errors.Is(err, ErrBadResponse) {
			s.fail("classify %s: unexpected error %v", attempt, err)
		}
		s.st.errors++
		s.accepted = false
		return
	}
	s.logf("%s %s: %s => %s", attempt, op, p, v)
	s.st.classes[v.Class]++

	// Property: exact replays are always recognised, and accepted when the
	// history so far was accepted and nothing shows the replayed response
	// skipping an event.
	if op == "replay" {
		s.st.replays++
		if v.Resume == nil || !slices.Equal(v.Resume.Events, w.Events) || !bytes.Equal(v.Resume.Successor, w.Successor) {
			s.fail("exact replay %s not resumed: %s", attempt, v)
			return
		}
		if s.accepted && oracleSkip(s.c, s.cp, w, Verdict{}, s.ws) == "" && v.Class != ExactReplay {
			s.fail("exact replay %s of an accepted history not accepted: %s", attempt, v)
			return
		}
	}
	if !v.Advances() {
		s.accepted = false
		return
	}
	s.verdicts[v.Attempt] = v
	// Record receipts for a prefix of the selected response.
	for i := range s.ws {
		if s.ws[i].AttemptID == v.Attempt {
			n := len(s.ws[i].Events)
			s.ws[i].AckedThrough = max(s.ws[i].AckedThrough, v.Satisfied, min(n, s.ch.IntN(n+2)))
		}
	}
	s.checkPromotions()
}

// checkPromotions offers every witness with a verdict to DecidePromotion
// and checks each promotion with the oracle.
func (s *scenario) checkPromotions() {
	for _, x := range s.ws {
		vx, ok := s.verdicts[x.AttemptID]
		if !ok {
			continue
		}
		d := DecidePromotion(PromotionInput{Contract: s.c, Checkpoint: s.cp, Witness: x, Verdict: vx, Witnesses: s.ws})
		if d.Action == Promote {
			s.st.promotions++
			if why := s.oracle(x, vx, d.Promotion); why != "" {
				s.fail("promotion of %s violates: %s (decision: %s)", x.AttemptID, why, d.Reason)
				return
			}
		}
		// Binding: a verdict never promotes another response.
		for _, y := range s.ws {
			if vy, ok := s.verdicts[y.AttemptID]; ok && y.AttemptID != x.AttemptID {
				if d := DecidePromotion(PromotionInput{Contract: s.c, Checkpoint: s.cp, Witness: x, Verdict: vy, Witnesses: s.ws}); d.Action != Refuse {
					s.fail("witness %s with the verdict of %s: %s", x.AttemptID, y.AttemptID, d.Action)
					return
				}
			}
		}
	}
}

// oracle checks one promotion independently of the classifier.
func (s *scenario) oracle(x Witness, v Verdict, p Promotion) string {
	switch {
	case !bytes.Equal(p.To, x.Successor) || p.WitnessID != x.AttemptID:
		return "promotes another response's successor"
	case !bytes.Equal(p.FromCursor, s.cp.Cursor) || p.FromGeneration != s.cp.Generation:
		return "not a compare-and-swap from the held checkpoint"
	case len(x.Events) > 0 && x.AckedThrough < len(x.Events):
		return fmt.Sprintf("only %d of %d events durable", x.AckedThrough, len(x.Events))
	case len(x.Events) == 0 && !oracleEmptyEvidence(s.c, x):
		return "empty response without evidence bound to it"
	case !s.c.TokensMayRotate && slices.ContainsFunc(s.ws, func(o Witness) bool {
		return slices.Contains(v.Against, o.AttemptID) && slices.Equal(o.Events, x.Events) && !bytes.Equal(o.Successor, x.Successor)
	}):
		return "promotes one of two successors for the same events under a contract without token rotation"
	case p.HasApplied && s.cp.HasApplied && p.Applied.Int < s.cp.Applied.Int:
		return "applied boundary falls"
	}
	if why := oracleSkip(s.c, s.cp, x, v, s.ws); why != "" {
		return why
	}
	if s.c.DensePositions && !oracleProof(s.c, x) && s.cp.HasApplied {
		want := s.cp.Applied.Int + 1
		for _, e := range x.Events {
			if e.Position.Int <= s.cp.Applied.Int {
				continue
			}
			if e.Position.Int != want {
				return fmt.Sprintf("dense stream: position %d skipped", want)
			}
			want++
		}
	}
	return ""
}

func oracleProof(c Contract, w Witness) bool {
	return (c.SnapshotMarker && len(w.Marker) > 0) || w.CompleteThrough.Kind != coord.KindNone
}

func oracleEmptyEvidence(c Contract, w Witness) bool {
	return c.EmptyPage == provider.EmptyEndOfData ||
		(c.EmptyPage == provider.EmptyFinalThroughWatermark && w.CompleteThrough.Kind != coord.KindNone) ||
		(c.SnapshotMarker && len(w.Marker) > 0)
}

// oracleSkip reports an event some fetch showed inside x's range that x
// omits, unless the fetch was reconciled with x (in v.Against) and x
// carries a coverage proof.
func oracleSkip(c Contract, cp Checkpoint, x Witness, v Verdict, all []Witness) string {
	hi := int64(math.MaxInt64)
	if len(x.Events) > 0 {
		hi = x.Events[len(x.Events)-1].Position.Int
	}
	for _, o := range all {
		if o.AttemptID == x.AttemptID {
			continue
		}
		for _, e := range o.Events {
			if (cp.HasApplied && e.Position.Int <= cp.Applied.Int) || e.Position.Int > hi {
				continue
			}
			if slices.ContainsFunc(x.Events, func(y EventWitness) bool { return y.IDHash == e.IDHash }) {
				continue
			}
			if slices.Contains(v.Against, o.AttemptID) && oracleProof(c, x) {
				continue
			}
			return fmt.Sprintf("skips position %s that attempt %s showed", e.Position, o.AttemptID)
		}
	}
	return ""
}

// settle performs the first possible promotion and checks that every other
// witness of (C41, 9) is then abandoned and can never publish.
func (s *scenario) settle() {
	for _, x := range s.ws {
		vx, ok := s.verdicts[x.AttemptID]
		if !ok {
			continue
		}
		d := DecidePromotion(PromotionInput{Contract: s.c, Checkpoint: s.cp, Witness: x, Verdict: vx, Witnesses: s.ws})
		if d.Action != Promote {
			continue
		}
		winner := Checkpoint{Scope: scope, Partition: part, Cursor: d.Promotion.To, Generation: s.cp.Generation + 1, PromotedWitness: x.AttemptID}
		s.logf("promoted %s to %s", x.AttemptID, d.Promotion.To)
		var want []string
		for _, y := range s.ws {
			if CanPublish(winner, y) {
				s.fail("%s can still publish after %s won", y.AttemptID, x.AttemptID)
			}
			if vy, ok := s.verdicts[y.AttemptID]; ok {
				if d := DecidePromotion(PromotionInput{Contract: s.c, Checkpoint: winner, Witness: y, Verdict: vy, Witnesses: s.ws}); d.Action == Promote {
					s.fail("%s promotes after %s won", y.AttemptID, x.AttemptID)
				}
			}
			if y.AttemptID != x.AttemptID {
				want = append(want, y.AttemptID)
			}
		}
		if got := Abandon(winner, s.ws); !slices.Equal(got, want) {
			s.fail("abandon: got %v, want %v", got, want)
		}
		return
	}
}
