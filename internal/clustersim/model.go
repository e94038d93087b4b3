package clustersim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/sdkcoord"
	"github.com/tidemark/tidemark/provider"
)

// The model provider: one event log per partition, paginated by opaque
// cursors, honest about everything its declared contract lets the core
// check and free to misbehave wherever the contract says it may (transient
// empty pages with a skipping successor, rotated tokens, shifted pages,
// expiry, stalls, flaky omissions that dense positions expose).
//
// Honesty is what makes the oracle exact: an event the model has issued
// can only be skipped by the consumer, never by the provider, so any event
// below durable progress without a terminal outcome is a consumer bug.
// The rules the model keeps:
//   - Positions only grow: an event is appended above the partition's
//     finality clock T, which then moves to it. No event ever appears at or
//     below T later (no late visibility).
//   - A successor after a non-empty page points just past its last event;
//     an honest empty page's successor points past T. Only an empty page
//     without evidence (a "glitch") may carry a successor that skips events,
//     which is exactly why such a page must not advance
//     (docs/design.md#invariants, invariant 6).
//   - Every CompleteThrough is true: T, the page's last position, or (a
//     lagging retry) the position before the page.
//   - A snapshot marker names the log revision; the same revision gives the
//     same page. Omissions happen only on dense profiles without
//     complete-through evidence, and only strictly inside a page, where the
//     dense-position rule can see the gap.

// profile is one provider behaviour with its declared contract.
type profile struct {
	name     string
	contract provider.Contract
	// ct: responses carry complete-through watermarks.
	ct bool
	// marker: responses carry the log revision as a snapshot marker.
	marker bool
	// rotate: every response carries a fresh successor token.
	rotate bool
	// rogue: probability of rotating a token although the contract does not
	// permit it (a provider contract violation the core must refuse).
	rogue float64
	// omit: probability of dropping one interior event of a page (dense
	// profiles without complete-through evidence only).
	omit float64
	// lag: probability that a retry of a position drops one interior event
	// and carries a complete-through watermark lagging below it (true:
	// everything before the page is final), the response that exposes a
	// consumer counting any watermark as coverage (dense profiles with
	// complete-through evidence only).
	lag float64
	// glitch: probability of an empty page without evidence whose
	// successor skips ahead (never under EmptyEndOfData).
	glitch float64
	// quiet: probability of an empty page without evidence at the same
	// position.
	quiet float64
	// shift: probability that a retry of a position gets another page size
	// (profiles without markers; with markers the size follows the
	// revision).
	shift float64
	// transient: probability of a transient fetch error.
	transient float64
	// garbage: probability of a response carrying one event twice (a
	// malformed page the core must refuse, and fetch again).
	garbage float64
	// torn: probability that a page with more after it (has_more true)
	// comes without its successor: under missing_successor
	// end_of_traversal it would look like the last page and complete the
	// partition with events unread. The core must take it for malformed
	// (reconcile.HasMoreError) and fetch it again; like garbage it is
	// transient. Only in profiles that map has_more.
	torn float64
	// malformed: probability of an answer that cannot be read (a truncated
	// body: chain.FetchMalformed). Garbage and malformed answers are
	// transient: one reader gets at most maxMalformedStreak of them in a
	// row for one position, so no page of an honest partition parks.
	malformed float64
	// gap: sparse positions: up to gap positions are skipped between events.
	gap      int
	pageSize int
	// nosucc: probability that a page reaching the end of the log carries
	// no successor (missing_successor: poll; the consumer polls its cursor
	// again, and later events come as a longer answer to it).
	nosucc float64
	// eot: a finite traversal (missing_successor: end_of_traversal): once
	// the partition is sealed, its last page carries no successor, which
	// completes it.
	eot bool
	// ties: probability that an appended event shares the previous event's
	// position (unordered profiles: two keys written in one transaction). A
	// page never splits a group of tied events.
	ties float64
	// overlap: probability that a retry repeats the event just before the
	// requested position (the boundary event, same identity and payload),
	// which the receipts of the promoted page must satisfy.
	overlap float64
	// hasMore: the source's "more pages" flag is mapped (HasMoreKnown);
	// without it every response says HasMore false, which proves nothing
	// (a transient empty page then looks like the end). Profiles under
	// empty_page: end_of_data map it: their quiet pages are honest only
	// because they say more follows.
	hasMore bool
	// selfCT: responses carry the page's own last position (T on an empty
	// page) as their complete-through: a value the page computes from its
	// own events, which certifies nothing (an object listing's last key).
	// Its contract declares no finality, so it is only recorded.
	selfCT bool
	// hidden: probability that an appended event is not visible yet (a
	// key whose writer has not finished, or a listing that is not a
	// snapshot): fetches skip it until the next append reveals it, by then
	// below positions already served. Such an event is late: a faithful
	// consumer of a listing cannot see it below its progress, so the
	// oracle exempts it from the cursor and applied-boundary rules, never
	// from a watermark or a published frontier.
	hidden float64
	// kind is the position kind the provider states positions and
	// watermarks in (integer when zero). The model numbers events with
	// int64 ordinals; at and ord translate, preserving order and successor
	// arithmetic (decimal), so the core sees Kinesis-like 56-digit sequence
	// numbers or object keys while the oracle reasons in ordinals.
	kind coord.Kind
	// offsetShift: probability that an earlier page of an offset-paged
	// profile (Contract.OffsetOverlap) lost or gained a row, so the page
	// does not begin with the previous page's last event (offsetPage).
	offsetShift float64
	// cutFirst: probability that the first page of a traversal (a fetch
	// that would begin at the partition's first event) begins one to
	// pageSize events above it, as a source whose retention dropped its
	// oldest events, or whose limit keeps the newest, answers. The events
	// cut are in no answer: only the declared origin (Contract.FirstPosition,
	// set per partition to its first position by lane.config) lets the
	// core see the gap, since nothing is applied yet to continue. Transient
	// (a restart from the start may answer whole), so an honest lane gets
	// past it; a persistent cut parks after max_restarts (chain golden
	// first_page_origin).
	cutFirst float64
}

// at is the position of ordinal n in p's kind.
func (p *part) at(n int64) coord.Position {
	switch p.prof.kind {
	case coord.KindDecimal:
		d, err := coord.DecimalPosition(fmt.Sprintf("49%054d", n))
		if err != nil {
			panic(err)
		}
		return d
	case coord.KindString:
		return coord.StringPosition(fmt.Sprintf("objects/%019d", n))
	}
	return coord.IntPosition(n)
}

// wm is the watermark of ordinal n in p's kind.
func (p *part) wm(n int64) coord.Watermark { return p.at(n).AsWatermark() }

// ord is the ordinal of a position or watermark of p's kind; ok is false
// for another kind (nothing of p's compares with it).
func (p *part) ord(w coord.Watermark) (n int64, ok bool) {
	switch {
	case w.IsZero() || w.Kind != p.at(0).Kind:
		return 0, false
	case w.Kind == coord.KindDecimal:
		n, err := strconv.ParseInt(strings.TrimPrefix(w.Str, "49"), 10, 64)
		return n, err == nil
	case w.Kind == coord.KindString:
		n, err := strconv.ParseInt(strings.TrimPrefix(w.Str, "objects/"), 10, 64)
		return n, err == nil
	}
	return w.Int, true
}

var (
	denseCT = profile{name: "dense-ct", hasMore: true,
		contract: provider.Contract{EmptyPage: provider.EmptyFinalThroughWatermark, OrderedPositions: true, DensePositions: true, WatermarkCoversPositions: true, Finality: provider.FinalitySource, Recovery: provider.RecoveryRestartFromBoundary},
		ct:       true, lag: .1, glitch: .05, quiet: .05, shift: .25, transient: .04, garbage: .003, malformed: .02, pageSize: 3}
	denseCTRotate = profile{name: "dense-ct-rotate",
		contract: provider.Contract{EmptyPage: provider.EmptyFinalThroughWatermark, TokensMayRotate: true, OrderedPositions: true, DensePositions: true, WatermarkCoversPositions: true, Finality: provider.FinalitySource, Recovery: provider.RecoveryRestartFromBoundary},
		ct:       true, lag: .1, rotate: true, glitch: .05, quiet: .05, shift: .25, transient: .04, garbage: .003, malformed: .02, pageSize: 3}
	denseOmit = profile{name: "dense-omit",
		contract: provider.Contract{EmptyPage: provider.EmptyNoEvidence, OrderedPositions: true, DensePositions: true, Recovery: provider.RecoveryRestartFromBoundary},
		omit:     .1, rogue: .03, glitch: .05, quiet: .05, shift: .25, transient: .04, garbage: .003, malformed: .02, pageSize: 4}
	densePark = profile{name: "dense-park",
		contract: provider.Contract{EmptyPage: provider.EmptyNoEvidence, OrderedPositions: true, DensePositions: true, Recovery: provider.RecoveryPark},
		omit:     .06, rogue: .02, glitch: .04, quiet: .05, shift: .2, transient: .04, garbage: .003, malformed: .02, pageSize: 3}
	sparseCT = profile{name: "sparse-ct", hasMore: true,
		contract: provider.Contract{EmptyPage: provider.EmptyFinalThroughWatermark, OrderedPositions: true, WatermarkCoversPositions: true, Finality: provider.FinalitySource, Recovery: provider.RecoveryRestartFromBoundary},
		ct:       true, glitch: .05, quiet: .05, shift: .25, transient: .04, garbage: .003, malformed: .02, gap: 3, pageSize: 3}
	sparseMarker = profile{name: "sparse-marker",
		contract: provider.Contract{EmptyPage: provider.EmptyNoEvidence, OrderedPositions: true, SnapshotMarker: true, WatermarkCoversPositions: true, Finality: provider.FinalitySource, Recovery: provider.RecoveryFreshSnapshot},
		ct:       true, marker: true, glitch: .05, quiet: .05, transient: .04, garbage: .003, malformed: .02, gap: 2, pageSize: 3}
	sparseMarkerRotate = profile{name: "sparse-marker-rotate",
		contract: provider.Contract{EmptyPage: provider.EmptyNoEvidence, TokensMayRotate: true, OrderedPositions: true, SnapshotMarker: true, Recovery: provider.RecoveryFreshSnapshot},
		marker:   true, rotate: true, glitch: .05, quiet: .05, transient: .04, garbage: .003, malformed: .02, gap: 2, pageSize: 2}
	sparseEOD = profile{name: "sparse-eod", hasMore: true,
		contract: provider.Contract{EmptyPage: provider.EmptyEndOfData, OrderedPositions: true, Recovery: provider.RecoveryRestartFromBoundary},
		quiet:    .05, shift: .2, transient: .04, garbage: .003, malformed: .02, gap: 3, pageSize: 3}
	sparseRotate = profile{name: "sparse-rotate",
		contract: provider.Contract{EmptyPage: provider.EmptyNoEvidence, TokensMayRotate: true, OrderedPositions: true, Recovery: provider.RecoveryRestartFromBoundary},
		rotate:   true, glitch: .06, quiet: .05, shift: .2, transient: .04, garbage: .003, malformed: .02, gap: 2, pageSize: 3}
	// densePoll: the head of a change feed answers without a successor.
	densePoll = profile{name: "dense-poll", hasMore: true,
		contract: provider.Contract{EmptyPage: provider.EmptyNoEvidence, OrderedPositions: true, DensePositions: true, MissingSuccessor: provider.MissingSuccessorPoll, Recovery: provider.RecoveryRestartFromBoundary},
		nosucc:   .5, overlap: .1, glitch: .04, quiet: .05, shift: .2, transient: .04, garbage: .003, malformed: .02, pageSize: 3}
	// denseExclusive: the source resumes strictly after the applied
	// boundary, yet retries repeat the boundary event (its receipt matches)
	// and restarts go to just after the durable watermark.
	denseExclusive = profile{name: "dense-exclusive",
		contract: provider.Contract{EmptyPage: provider.EmptyFinalThroughWatermark, OrderedPositions: true, DensePositions: true, WatermarkCoversPositions: true, ExclusiveBoundary: true, Finality: provider.FinalitySource, Recovery: provider.RecoveryRestartFromBoundary},
		ct:       true, overlap: .15, lag: .05, glitch: .04, quiet: .05, shift: .25, transient: .04, garbage: .003, malformed: .02, pageSize: 3}
	// finiteList: a finite traversal (an object listing) whose last page has
	// no successor once the partition is sealed.
	finiteList = profile{name: "finite-list", hasMore: true,
		contract: provider.Contract{EmptyPage: provider.EmptyEndOfData, OrderedPositions: true, DensePositions: true, MissingSuccessor: provider.MissingSuccessorEndsTraversal, Recovery: provider.RecoveryRestartFromBoundary},
		eot:      true, overlap: .1, quiet: .05, shift: .2, transient: .04, garbage: .003, torn: .02, malformed: .02, pageSize: 3}
	// unorderedTies: positions carry no order and two events may share one.
	unorderedTies = profile{name: "unordered-ties",
		contract: provider.Contract{EmptyPage: provider.EmptyNoEvidence, Recovery: provider.RecoveryRestartFromBoundary},
		ties:     .3, quiet: .05, transient: .04, garbage: .003, malformed: .02, pageSize: 3}
)

// lateListing: a listing that is not a snapshot (keys may become visible
// below its progress) whose pages' own last keys are mapped as
// complete_through under finality none: recorded, never durable.
var lateListing = profile{name: "late-listing",
	contract: provider.Contract{EmptyPage: provider.EmptyNoEvidence, OrderedPositions: true, Recovery: provider.RecoveryRestartFromBoundary},
	selfCT:   true, hidden: .3, glitch: .04, quiet: .05, shift: .2, transient: .04, garbage: .003, malformed: .02, gap: 2, pageSize: 3}

// rereadLate: keyset pages over a source whose events may become visible
// below the reader's progress (hidden, then shown), read with a re-read
// window wide enough to cover every late event the schedule makes
// (docs/design.md#re-read-windows): each pass restarts from the window's
// start, emits only what no receipt shows, and every event, the late ones
// included, must be delivered once the faults stop.
var rereadLate = profile{name: "reread-late",
	contract: provider.Contract{EmptyPage: provider.EmptyNoEvidence, OrderedPositions: true, Pagination: provider.PaginationKeyset,
		MissingSuccessor: provider.MissingSuccessorPoll, Recovery: provider.RecoveryRestartFromBoundary, RereadWindow: 1 << 40},
	hidden: .3, glitch: .04, quiet: .05, shift: .2, transient: .04, garbage: .003, malformed: .02, gap: 2, pageSize: 3}

// rereadBeyond: rereadLate with a window of 8 positions under finality
// lag, narrower than how late the source shows some events: a late event
// appears up to a whole append (several events, gaps of up to 3) below
// the greatest visible position, within the window or beyond it
// (event.beyond). What is shown within it must be delivered; what is
// shown beyond it breaks the declared bound: it may stay undelivered, but
// only a watermark whose basis names the re-read lag may cover it (never
// a proven one), and a pass that delivers a late event near the window's
// edge must say so (chain.LateArrival, checked against the model).
var rereadBeyond = profile{name: "reread-beyond",
	contract: provider.Contract{EmptyPage: provider.EmptyNoEvidence, OrderedPositions: true, Pagination: provider.PaginationKeyset,
		MissingSuccessor: provider.MissingSuccessorPoll, Recovery: provider.RecoveryRestartFromBoundary,
		Finality: provider.FinalityLag, FinalityLag: 8, RereadWindow: 8},
	hidden: .5, glitch: .04, quiet: .05, shift: .2, transient: .04, garbage: .003, malformed: .02, gap: 3, pageSize: 3}

// Profiles whose positions and watermarks are of other kinds: a shard of
// a stream whose sequence numbers are 56-digit decimals, resuming strictly
// after the applied one; and an object listing whose positions are keys
// (byte-ordered strings, sparse).
var (
	denseDecimal = withKind(denseExclusive, "dense-decimal", coord.KindDecimal)
	sparseKeys   = withKind(sparseCT, "sparse-keys", coord.KindString)
)

// withKind is p under another name with positions and watermarks of kind k.
func withKind(p profile, name string, k coord.Kind) profile {
	p.name, p.kind, p.contract.PositionKind = name, k, sdkcoord.SDKKind(k)
	return p
}

// scalarProfiles carry complete-through watermarks, so a run made of them
// can publish a scalar frontier; otherProfiles cannot (the kinded ones can
// only among themselves: a scope mixing kinds publishes the vector).
var (
	scalarProfiles = []profile{denseCT, denseCTRotate, sparseCT, sparseMarker, denseExclusive}
	otherProfiles  = []profile{denseOmit, densePark, sparseMarkerRotate, sparseEOD, sparseRotate, densePoll, finiteList, unorderedTies, denseDecimal, sparseKeys}
)

// cursor is the model's token: the next position to read, the session it
// was issued in (expiry) and a nonce (rotation). The consumer never parses
// it; the model and the oracle do.
type cursor struct {
	next    int64
	session int64 // -1: the start cursor, which never expires
	nonce   uint64
}

func (c cursor) bytes() []byte {
	return []byte("c" + strconv.FormatInt(c.next, 10) + "." + strconv.FormatInt(c.session, 10) + "." + strconv.FormatUint(c.nonce, 10))
}

// offsetURLBase starts the cursors of a partition whose provider pages by
// offset (part.offsetURLs).
const offsetURLBase = "https://offset.sim.invalid/"

// offsetURL is c as a provider that pages by offset writes it
// (part.offsetURLs): a URL of the partition whose offset parameter is the
// next position, the session and nonce parameters unchanged from page to
// page unless the cursor expires or rotates.
func (c cursor) offsetURL(part string) []byte {
	return []byte(offsetURLBase + url.PathEscape(part) + "?limit=3&offset=" + strconv.FormatInt(c.next, 10) +
		"&session=" + strconv.FormatInt(c.session, 10) + "&nonce=" + strconv.FormatUint(c.nonce, 10))
}

// decodeCursor reads a model cursor (or its offsetURL form); nil or empty
// is the partition's start.
func decodeCursor(b []byte) (cursor, error) {
	if len(b) == 0 {
		return cursor{next: 1, session: -1}, nil
	}
	s := string(b)
	if strings.HasPrefix(s, offsetURLBase) {
		u, err := url.Parse(s)
		if err != nil {
			return cursor{}, fmt.Errorf("not a model cursor: %w", err)
		}
		q := u.Query()
		next, err1 := strconv.ParseInt(q.Get("offset"), 10, 64)
		sess, err2 := strconv.ParseInt(q.Get("session"), 10, 64)
		nonce, err3 := strconv.ParseUint(q.Get("nonce"), 10, 64)
		if err := errors.Join(err1, err2, err3); err != nil {
			return cursor{}, fmt.Errorf("not a model cursor %q: %w", s, err)
		}
		return cursor{next: next, session: sess, nonce: nonce}, nil
	}
	if !strings.HasPrefix(s, "c") {
		return cursor{}, fmt.Errorf("not a model cursor: %q", s)
	}
	f := strings.Split(s[1:], ".")
	if len(f) != 3 {
		return cursor{}, fmt.Errorf("not a model cursor: %q", s)
	}
	next, err1 := strconv.ParseInt(f[0], 10, 64)
	sess, err2 := strconv.ParseInt(f[1], 10, 64)
	nonce, err3 := strconv.ParseUint(f[2], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return cursor{}, fmt.Errorf("not a model cursor %q: %w", s, err)
	}
	return cursor{next: next, session: sess, nonce: nonce}, nil
}

// curString renders a cursor for traces ("start" for the empty one).
func curString(b []byte) string {
	if len(b) == 0 {
		return "start"
	}
	return string(b)
}

// event is one event of the model log with its ground truth at the sink.
type event struct {
	pos     int64
	id      string
	payload []byte
	idHash  uint64
	digest  uint64
	acked   bool
	// hidden: not served yet (profile.hidden); late: it was created
	// hidden, so it may become visible below positions already served.
	hidden, late bool
	// above: when it was shown (a late event), the greatest position
	// visible then; beyond: that was at or above pos + the declared
	// re-read window, against the bound the window declares (the source
	// shows an event at p before any at p + w): no pass need read it.
	above  int64
	beyond bool
}

// part is one partition of the model provider, with its own PRNG.
type part struct {
	name string
	rng  *rand.Rand
	// log draws the event log (the rng, but its own in metamorphic runs).
	log  *rand.Rand
	prof profile
	// events is the log, in position order.
	events []event
	// firstUnacked indexes the first event without a terminal outcome.
	firstUnacked int
	// final is T: every event at or below it is in events, and no event at
	// or below it will ever be appended.
	final int64
	// session increases on expiry; cursors of older sessions expire.
	session int64
	nonce   uint64
	visits  map[int64]int // fetches per next position
	stall   int           // evidence-free empty pages still to serve
	// streak counts the malformed answers (garbage included) in a row per
	// (reader, next position).
	streak map[streakKey]int
	// broken: the persistent fault: once the partition has answered
	// brokenAfter fetches, every answer is malformed (it must park).
	broken      bool
	brokenAfter int
	// regress: the probability that a page with events certifies a
	// watermark below the one the page before certified (a contract
	// violation: the monitors must report it, withdraw the scalar and
	// recover; nothing may be lost). Set in a few schedules only.
	regress float64
	// offsetURLs: the provider pages by offset though the contract does
	// not say so (pagination token, the default): its successors are
	// offset URLs (cursor.offsetURL) whose offset is all that changes from
	// page to page. The monitors must report offset_shaped_successor and
	// refuse the page: no successor of a page read by such a URL may be
	// promoted (oracle.offsetPromotion). Set in a few schedules only.
	offsetURLs bool
	fetches    int
	sealed     bool
	// beyondShown counts the events shown beyond the re-read window
	// (event.beyond); lateNamed the late arrivals near the window's edge
	// a lane reported (chain.LateArrival).
	beyondShown, lateNamed int
	// created is the first position the partition can hold (its coverage
	// starts there).
	created int64
	// appeared: the partition exists at the provider (discoverable).
	appeared bool
	// parents: the partitions this one was split from (the provider lists
	// it with them); split: this one was split (sealed, with children).
	parents []string
	split   bool
	// inc numbers the source's incarnations (op recreate); retired keeps
	// the logs of the earlier ones (retired[i] is incarnation i), whose
	// events the oracle still holds checkpoints and frontiers of earlier
	// incarnations to.
	inc     int
	retired []*part
}

// incarnationValue is what the provider's incarnation check answers.
func (p *part) incarnationValue() string { return p.name + "#" + strconv.Itoa(p.inc) }

// recreate deletes the source and creates it again under the same name: a
// new, empty log whose positions start again at created. Cursors of the
// old incarnation still answer (as a recreated CouchDB database answers
// the stored since), from the new log: the hazard an incarnation check
// exists for. A sealed source recreated is open again.
func (p *part) recreate() {
	old := *p
	old.retired = nil
	p.retired = append(p.retired, &old)
	p.inc++
	p.sealed = false // the new source is open
	p.events = nil
	p.firstUnacked = 0
	p.final = p.created - 1
	p.visits = map[int64]int{}
	p.streak = map[streakKey]int{}
	p.stall = 0
}

// incarnation returns the log of the incarnation whose hash is h (the
// current one for h empty or unknown).
func (p *part) incarnation(h string) *part {
	for i, r := range p.retired {
		if reconcile.IncarnationHash(p.name+"#"+strconv.Itoa(i)) == h {
			return r
		}
	}
	return p
}

// logs returns every incarnation's log, the current one last.
func (p *part) logs() []*part { return append(slices.Clone(p.retired), p) }

// completes reports whether a sealed partition of this profile reaches a
// durable completion with a watermark however its pages fell: its
// responses carry complete-through watermarks and its empty pages carry
// evidence (the watermark under empty_page: final_through_watermark, a
// snapshot marker, or the end-of-data contract) or its last page ends the
// traversal. A shard of a stream completes this way (a sealed empty page
// with its watermark); only such partitions split in the model, so that
// their children are not held for ever by a parent that cannot complete,
// and the parent can leave with a proof of sealing (a coordinate it is
// sealed through).
func (pr profile) completes() bool {
	c := pr.contract
	return pr.ct && (c.EmptyPage == provider.EmptyFinalThroughWatermark || (c.SnapshotMarker && pr.marker) ||
		c.EmptyPage == provider.EmptyEndOfData || pr.eot)
}

func newPart(name string, rng *rand.Rand, prof profile, created int64) *part {
	if prof.contract.EmptyPage == provider.EmptyEndOfData && !prof.hasMore {
		panic("sim: profile " + prof.name + " would serve empty pages that claim the end of data while events follow")
	}
	return &part{name: name, rng: rng, log: rng, prof: prof, final: created - 1, created: created, visits: map[int64]int{}, streak: map[streakKey]int{}}
}

func (p *part) chance(x float64) bool { return logChance(p.rng, x) }

func logChance(r *rand.Rand, x float64) bool { return x > 0 && r.Float64() < x }

// appendEvents adds n events above the finality clock.
func (p *part) appendEvents(n int) (int64, int64) {
	if p.sealed || n <= 0 {
		return 0, 0
	}
	p.show() // the keys written before are visible now
	var first int64
	for i := 0; i < n; i++ {
		pos := p.final + 1
		if p.prof.gap > 0 {
			pos += int64(p.log.IntN(p.prof.gap + 1))
		}
		id := p.name + "-" + strconv.FormatInt(pos, 10)
		if p.inc > 0 {
			// Another incarnation's events are other events.
			id = p.name + "-i" + strconv.Itoa(p.inc) + "-" + strconv.FormatInt(pos, 10)
		}
		if i > 0 && logChance(p.log, p.prof.ties) {
			// Tied with the previous event of this append (two keys written
			// in one transaction); never with an event already visible,
			// which would appear at or below T.
			pos = p.final
			id = p.name + "-" + strconv.FormatInt(pos, 10) + "-" + strconv.Itoa(len(p.events))
			if p.inc > 0 {
				id = p.name + "-i" + strconv.Itoa(p.inc) + "-" + strconv.FormatInt(pos, 10) + "-" + strconv.Itoa(len(p.events))
			}
		}
		payload := []byte(fmt.Sprintf(`{"p":%q,"pos":%d,"r":%d}`, p.name, pos, p.log.IntN(1000)))
		hide := logChance(p.log, p.prof.hidden)
		p.events = append(p.events, event{pos: pos, id: id, payload: payload, idHash: reconcile.HashID(id), digest: reconcile.HashPayload(payload), hidden: hide, late: hide})
		p.final = pos
		if i == 0 {
			first = pos
		}
	}
	return first, p.final
}

// show makes every hidden event visible, noting how far below the
// greatest visible position each appears (event.above, event.beyond).
func (p *part) show() {
	top, any := p.topVisible()
	w := p.prof.contract.RereadWindow
	for i := range p.events {
		e := &p.events[i]
		if !e.hidden {
			continue
		}
		e.hidden = false
		if any && top > e.pos {
			e.above = top
			if w > 0 && top-e.pos >= w {
				e.beyond = true
				p.beyondShown++
			}
		}
	}
}

// tick moves the finality clock without events (time passes); dense
// positions leave no room for it.
func (p *part) tick(n int) {
	if p.sealed || p.prof.contract.DensePositions || n <= 0 {
		return
	}
	p.final += int64(n)
}

// index returns the index of the first event at or after pos.
func (p *part) index(pos int64) int {
	lo, hi := 0, len(p.events)
	for lo < hi {
		m := (lo + hi) / 2
		if p.events[m].pos < pos {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// find returns the index of the event at e's position with e's identity
// (several events may share a position), or -1.
func (p *part) find(e reconcile.EventWitness) int {
	n, ok := p.ord(e.Position.AsWatermark())
	if !ok {
		return -1
	}
	for k := p.index(n); k < len(p.events) && p.events[k].pos == n; k++ {
		if p.events[k].idHash == e.IDHash {
			return k
		}
	}
	return -1
}

// ackedBelow reports whether every event at a position below pos has a
// terminal outcome, and otherwise the first one that does not.
// ackedBelowOnTime is ackedBelow for the cursor and applied-boundary
// rules: late events (profile.hidden) are exempt, a listing that is not a
// snapshot never shows them below its progress.
func (p *part) ackedBelowOnTime(pos int64) (event, bool) {
	e, ok := p.ackedBelow(pos)
	if ok || !e.late {
		return e, ok
	}
	for i := p.firstUnacked; i < len(p.events) && p.events[i].pos < pos; i++ {
		if !p.events[i].acked && !p.events[i].late {
			return p.events[i], false
		}
	}
	return event{}, true
}

// ackedBelowInWindow is ackedBelow for what a re-read window promises:
// an event for which the source broke the bound the window declares is
// exempt: shown beyond the window (event.beyond), or still hidden while
// an event at or above its position + the window is visible.
func (p *part) ackedBelowInWindow(pos int64) (event, bool) {
	e, ok := p.ackedBelow(pos)
	if ok {
		return e, ok
	}
	top, any := p.topVisible()
	w := p.prof.contract.RereadWindow
	broke := func(e event) bool { return e.beyond || (e.hidden && any && w > 0 && top-e.pos >= w) }
	for i := p.firstUnacked; i < len(p.events) && p.events[i].pos < pos; i++ {
		if !p.events[i].acked && !broke(p.events[i]) {
			return p.events[i], false
		}
	}
	return event{}, true
}

// topVisible is the greatest position of a visible event.
func (p *part) topVisible() (int64, bool) {
	for i := len(p.events) - 1; i >= 0; i-- {
		if !p.events[i].hidden {
			return p.events[i].pos, true
		}
	}
	return 0, false
}

func (p *part) ackedBelow(pos int64) (event, bool) {
	for p.firstUnacked < len(p.events) && p.events[p.firstUnacked].acked {
		p.firstUnacked++
	}
	if p.firstUnacked < len(p.events) && p.events[p.firstUnacked].pos < pos {
		return p.events[p.firstUnacked], false
	}
	return event{}, true
}

// fetchError is a fetch that returned no response.
type fetchError struct {
	expired   bool
	malformed bool
	reason    string
}

// streakKey is one reader's fetches of one position.
type streakKey struct {
	reader string
	next   int64
}

// maxMalformedStreak bounds the transient malformed answers one reader
// gets in a row for one position: the workers' fetch retries (simFetchRetries),
// so a malformed run never exhausts them.
const maxMalformedStreak = simFetchRetries

// brokenActive reports whether the persistent fault has begun.
func (p *part) brokenActive() bool { return p.broken && p.fetches > p.brokenAfter }

func (e *fetchError) Error() string { return e.reason }

// fetchNote says which fault shaped a response (for traces and stats).
type fetchNote string

// fetch answers one request of reader for cursor cur, with the "more
// pages" flag as the profile maps it.
func (p *part) fetch(reader string, cur []byte) (provider.Response, fetchNote, error) {
	p.fetches++
	r, note, err := p.answer(reader, cur)
	if c, derr := decodeCursor(cur); derr == nil {
		k := streakKey{reader, c.next}
		var fe *fetchError
		switch {
		case note == "malformed" || note == "garbage" || note == "torn":
			p.streak[k]++
		case errors.As(err, &fe):
			// A transient error or an expired cursor neither counts nor
			// ends a run of malformed answers.
		default:
			delete(p.streak, k)
		}
	}
	if err == nil && p.offsetURLs && len(r.Successor) > 0 {
		if c, derr := decodeCursor(r.Successor); derr == nil {
			r.Successor = c.offsetURL(p.name)
		}
	}
	if err == nil {
		if p.prof.hasMore {
			r.HasMoreKnown = true
		} else {
			r.HasMore = false // unmapped: nothing says whether more follows
		}
	}
	return r, note, err
}

// answer is the response to cur before the "more pages" flag is mapped.
func (p *part) answer(reader string, cur []byte) (provider.Response, fetchNote, error) {
	c, err := decodeCursor(cur)
	if err != nil {
		return provider.Response{}, "", &fetchError{expired: true, reason: err.Error()}
	}
	if p.chance(p.prof.transient) {
		return provider.Response{}, "", &fetchError{reason: "transient provider error"}
	}
	if c.session >= 0 && c.session < p.session {
		return provider.Response{}, "", &fetchError{expired: true, reason: fmt.Sprintf("cursor of session %d expired (now %d)", c.session, p.session)}
	}
	streak := p.streak[streakKey{reader, c.next}]
	switch {
	case p.brokenActive():
		return provider.Response{}, "malformed", &fetchError{malformed: true, reason: "persistently malformed body (injected)"}
	case streak < maxMalformedStreak && p.chance(p.prof.malformed):
		return provider.Response{}, "malformed", &fetchError{malformed: true, reason: "truncated body (injected)"}
	}
	p.visits[c.next]++
	retry := p.visits[c.next] > 1
	rotated := func() uint64 {
		if p.prof.rotate || p.chance(p.prof.rogue) {
			p.nonce++
			return p.nonce
		}
		return c.nonce
	}
	glitch := func() provider.Response {
		// An empty page without evidence whose successor skips ahead: if
		// it were promoted, events in the skipped range would be lost.
		p.nonce++
		next := c.next + 1 + int64(p.rng.IntN(2*p.prof.pageSize+1))
		return provider.Response{Successor: cursor{next: next, session: p.session, nonce: p.nonce}.bytes(), HasMore: true}
	}
	quiet := func() provider.Response {
		return provider.Response{Successor: cursor{next: c.next, session: c.session, nonce: rotated()}.bytes(), HasMore: true}
	}
	if p.stall > 0 {
		p.stall--
		if p.prof.contract.EmptyPage != provider.EmptyEndOfData && p.rng.IntN(2) == 0 {
			return glitch(), "stall-glitch", nil
		}
		return quiet(), "stall", nil
	}
	if p.prof.contract.EmptyPage != provider.EmptyEndOfData && p.chance(p.prof.glitch) {
		return glitch(), "glitch", nil
	}
	if p.chance(p.prof.quiet) {
		return quiet(), "quiet", nil
	}
	size := p.prof.pageSize
	rev := int64(len(p.events))
	var note fetchNote
	switch {
	case p.prof.marker:
		// The same revision gives the same page.
		size += int(uint64(c.next*31+rev*17) % 3)
		size--
	case retry && p.chance(p.prof.shift):
		size += p.rng.IntN(5) - 2
		note = "shift"
	}
	size = max(size, 1)
	i := p.index(c.next)
	j := min(i+size, len(p.events))
	for j > i && j < len(p.events) && p.events[j].pos == p.events[j-1].pos {
		j++ // a page never splits a group of tied events
	}
	if i == 0 && len(p.events) >= 2 && p.chance(p.prof.cutFirst) {
		// The first page of a traversal begins above the origin.
		k := 1 + p.rng.IntN(min(size, len(p.events)-1))
		i, j = k, min(k+size, len(p.events))
		note = "cut-first"
	}
	overlap := false
	if retry && i > 0 && i < len(p.events) && p.chance(p.prof.overlap) && p.events[i-1].pos == c.next-1 {
		i-- // repeat the boundary event
		overlap = true
	}
	var offsetNote fetchNote
	if p.prof.contract.OffsetOverlap {
		i, j, offsetNote = p.offsetPage(i, j)
	}
	session := p.session
	r := provider.Response{}
	if p.prof.marker {
		r.Marker = []byte("rev" + strconv.FormatInt(rev, 10))
	}
	if i == j {
		// Nothing at or after next: an honest empty page, complete through
		// T; its successor points past T.
		next := max(c.next, p.final+1)
		r.Successor = cursor{next: next, session: session, nonce: rotated()}.bytes()
		r.Sealed = p.sealed
		if p.prof.ct || p.prof.selfCT {
			r.CompleteThrough = sdkcoord.SDKWatermark(p.wm(p.final))
		}
		return r, "empty", nil
	}
	evs := p.events[i:j]
	exhausted := j == len(p.events)
	last := evs[len(evs)-1].pos
	r.Events = make([]provider.Event, 0, len(evs))
	drop := -1
	lagging := false
	switch {
	case !p.prof.ct && p.prof.contract.DensePositions && len(evs) >= 3 && p.chance(p.prof.omit):
		drop = 1 + p.rng.IntN(len(evs)-2)
		note = "omit"
	case p.prof.ct && p.prof.contract.DensePositions && retry && c.next > 1 && len(evs) >= 3 && p.chance(p.prof.lag):
		drop = 1 + p.rng.IntN(len(evs)-2)
		note, lagging = "lag", true
	}
	for k, e := range evs {
		if k == drop || e.hidden {
			continue
		}
		r.Events = append(r.Events, provider.Event{ID: e.id, Position: sdkcoord.SDKPosition(p.at(e.pos)), Payload: e.payload})
	}
	if overlap && note == "" {
		note = "overlap"
	}
	if offsetNote != "" && note == "" {
		note = offsetNote
	}
	if note == "" {
		for k := 1; k < len(r.Events); k++ {
			if r.Events[k].Position == r.Events[k-1].Position {
				note = "tie"
				break
			}
		}
	}
	if len(r.Events) > 0 && streak < maxMalformedStreak && p.chance(p.prof.garbage) {
		e := r.Events[len(r.Events)-1]
		r.Events = append(r.Events, e)
		note = "garbage"
	}
	r.Successor = cursor{next: last + 1, session: session, nonce: rotated()}.bytes()
	r.HasMore = !exhausted
	r.Sealed = p.sealed && exhausted
	switch {
	case exhausted && p.prof.eot && p.sealed:
		// The last page of a finite traversal: no successor.
		r.Successor, r.Sealed = nil, false
		if note == "" {
			note = "nosucc"
		}
	case exhausted && !p.prof.eot && p.chance(p.prof.nosucc):
		// The head of the feed: nothing after this page yet.
		r.Successor = nil
		if note == "" {
			note = "nosucc"
		}
	case !exhausted && p.prof.hasMore && note != "garbage" && streak < maxMalformedStreak && p.chance(p.prof.torn):
		// More follows and the page says so, but its successor is lost:
		// malformed, never the last page.
		r.Successor = nil
		note = "torn"
	}
	if p.prof.ct || p.prof.selfCT {
		switch {
		case !lagging && c.next > 2 && p.chance(p.regress):
			// Still true (complete through a lower point), but below what
			// the page before certified.
			r.CompleteThrough = sdkcoord.SDKWatermark(p.wm(c.next - 2))
			note = "regress"
		case lagging:
			r.CompleteThrough = sdkcoord.SDKWatermark(p.wm(min(c.next-1, p.final)))
		case exhausted:
			r.CompleteThrough = sdkcoord.SDKWatermark(p.wm(p.final))
		default:
			r.CompleteThrough = sdkcoord.SDKWatermark(p.wm(last))
		}
	}
	return r, note, nil
}

// restartCursor is the provider-supported stable boundary: just after the
// durable complete-through watermark, or the partition's start. Under a
// re-read window it is just after the applied position the machine names
// (the window's start), as a keyset source's `after` filter would be.
func (p *part) restartCursor(durable coord.Watermark, applied coord.Position, hasApplied bool) []byte {
	next := int64(1)
	if n, ok := p.ord(durable); ok {
		next = n + 1
	}
	if p.prof.contract.Rereads() {
		next = 1
		if n, ok := p.ord(applied.AsWatermark()); ok && hasApplied {
			next = n + 1
		} else if hasApplied && applied.Kind == coord.KindInteger && applied.Int > 0 {
			next = applied.Int + 1 // between two issued positions
		}
		next = max(next, 1) // a window reaching below the first position
	}
	return cursor{next: next, session: p.session}.bytes()
}
