package probe

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/sdkcoord"
	"github.com/tidemark/tidemark/provider"
)

// Check judges one declared field.
type Check struct {
	// Field is the contract field, mapping or request judged, as the
	// config spells it.
	Field string
	// Declared renders the declared value.
	Declared func(Declared) string
	// Applies, when not nil, says whether the check runs for d.
	Applies func(Declared) bool
	// Judge gives the verdict and its evidence.
	Judge func(Declared, *Facts) (Verdict, string)
}

// Checks are the checks Evaluate runs, in the order findings are printed.
// A check for a new contract field is one more entry.
var Checks = []Check{
	{Field: "response", Declared: func(Declared) string { return "the mappings" }, Judge: judgeResponse},
	{Field: "position_type", Declared: func(d Declared) string { return positionKind(d).String() }, Judge: judgePositionType},
	{Field: "positions", Declared: positionsValue, Judge: judgePositions},
	{Field: "first_position", Declared: firstPositionValue,
		Applies: func(d Declared) bool { return d.Contract.DensePositions }, Judge: judgeFirstPosition},
	{Field: "coordinate", Declared: func(d Declared) string { return d.Coordinate.String() },
		Applies: func(d Declared) bool { return d.CompleteThrough }, Judge: judgeCoordinate},
	{Field: "complete_through", Declared: completeThroughValue, Judge: judgeCompleteThrough},
	{Field: "finality", Declared: finalityValue, Judge: judgeFinality},
	{Field: "watermark_covers_positions", Declared: func(d Declared) string { return fmt.Sprint(d.Contract.WatermarkCoversPositions) }, Judge: judgeCoverage},
	{Field: "empty_page", Declared: func(d Declared) string { return d.Contract.EmptyPage.String() }, Judge: judgeEmptyPage},
	{Field: "missing_successor", Declared: func(d Declared) string { return d.Contract.MissingSuccessor.String() }, Judge: judgeMissingSuccessor},
	{Field: "has_more", Declared: func(Declared) string { return "mapped" },
		Applies: func(d Declared) bool { return d.HasMore }, Judge: judgeHasMore},
	{Field: "tokens_may_rotate", Declared: func(d Declared) string { return fmt.Sprint(d.Contract.TokensMayRotate) }, Judge: judgeRotation},
	{Field: "snapshot_marker", Declared: func(d Declared) string { return fmt.Sprint(d.Contract.SnapshotMarker) }, Judge: judgeSnapshot},
	{Field: "exclusive_boundary", Declared: func(d Declared) string { return fmt.Sprint(d.Contract.ExclusiveBoundary) }, Judge: judgeExclusive},
	{Field: "pagination", Declared: paginationValue, Judge: judgePagination},
	{Field: "retries", Declared: func(d Declared) string { return "recovery " + recovery(d).String() }, Judge: judgeRetries},
	{Field: "restart_cursor", Declared: func(d Declared) string { return "recovery " + recovery(d).String() }, Judge: judgeRestart},
	{Field: "validate", Declared: func(d Declared) string { return configured(d.Validate) }, Judge: judgeValidate},
	{Field: "incarnation", Declared: incarnationValue, Judge: judgeIncarnation},
}

func configured(b bool) string {
	if b {
		return "configured"
	}
	return "not configured"
}

func positionKind(d Declared) coord.Kind { return reconcile.PositionKind(d.Contract) }

func recovery(d Declared) provider.Recovery {
	if d.Contract.Recovery == 0 {
		return provider.RecoveryPark
	}
	return d.Contract.Recovery
}

func positionsValue(d Declared) string {
	switch {
	case d.Contract.DensePositions:
		return "dense"
	case d.Contract.OrderedPositions:
		return "ordered"
	}
	return "unordered"
}

func completeThroughValue(d Declared) string {
	if d.CompleteThrough {
		return "mapped"
	}
	return "not mapped"
}

func finality(d Declared) provider.Finality {
	if d.Contract.Finality == 0 {
		return provider.FinalityNone
	}
	return d.Contract.Finality
}

func finalityValue(d Declared) string {
	if f := finality(d); f == provider.FinalityLag {
		return f.String() + " (" + d.Contract.Basis(sdkcoord.SDKKind(d.Coordinate)).String() + ")"
	}
	return finality(d).String()
}

func paginationValue(d Declared) string {
	c := d.Contract
	s := c.Pagination.String()
	if c.Pagination == provider.PaginationOffset {
		switch {
		case c.OffsetOverlap:
			s += ", offset_overlap"
		case c.OffsetUnproven:
			s += ", offset_unproven"
		case c.DensePositions:
			s += " over dense positions"
		}
	}
	return s
}

func incarnationValue(d Declared) string {
	switch {
	case d.IncarnationCreate:
		return "configured, with create"
	case d.Incarnation:
		return "configured"
	}
	return "not configured"
}

// finalityAsserted: the contract asserts a watermark's finality (an
// append-only writer, a lag) instead of having the source certify it.
func finalityAsserted(d Declared) bool {
	f := finality(d)
	return f == provider.FinalityAppendOnlyWriter || f == provider.FinalityLag
}

func hash(b []byte) string { return reconcile.CursorHash(b) }

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

func judgeResponse(_ Declared, fx *Facts) (Verdict, string) {
	for _, b := range fx.Bad {
		var ke *reconcile.KindError
		if errors.As(b.Err, &ke) || errors.Is(b.Err, reconcile.ErrOutOfOrder) {
			continue // judged by position_type and positions
		}
		return Contradicted, fmt.Sprintf("%s: %v (the input fetches a malformed page fetch_retries more times, then parks the partition)", b.Label, b.Err)
	}
	if fx.Fetched == 0 {
		return CannotTell, "no page was answered: " + walkEnd(fx.Obs.First)
	}
	return Supported, fmt.Sprintf("%s mapped to events and evidence", plural(fx.Fetched, "answer", "answers"))
}

func walkEnd(w Walk) string {
	if w.End == EndError && w.Err != nil {
		return w.Err.Error()
	}
	return "walk 1 ended at " + w.End.String()
}

func countEvents(fx *Facts) int {
	n := 0
	for _, p := range fx.allPages() {
		n += len(p.Response.Events)
	}
	return n
}

func judgePositionType(d Declared, fx *Facts) (Verdict, string) {
	for _, b := range fx.Bad {
		var ke *reconcile.KindError
		if errors.As(b.Err, &ke) {
			return Contradicted, fmt.Sprintf("%s: %v", b.Label, b.Err)
		}
	}
	n := countEvents(fx)
	if n == 0 {
		return CannotTell, "no event was answered"
	}
	return Supported, fmt.Sprintf("%s read as %s", plural(n, "position", "positions"), positionKind(d))
}

func judgeCoordinate(d Declared, fx *Facts) (Verdict, string) {
	n, example := 0, ""
	for _, p := range fx.allPages() {
		if !p.Response.CompleteThrough.IsZero() {
			if n == 0 {
				example = fmt.Sprintf("%s: %s", p.Label, p.Response.CompleteThrough)
			}
			n++
		}
	}
	if n == 0 {
		return CannotTell, "no page carried a complete_through"
	}
	return Supported, fmt.Sprintf("complete_through read as %s on %s (%s)", d.Coordinate, plural(n, "page", "pages"), example)
}

// judgePositions checks the declared order and density along each walk:
// within a page (reconcile.Build) and across its pages.
func judgePositions(d Declared, fx *Facts) (Verdict, string) {
	for _, b := range fx.Bad {
		if errors.Is(b.Err, reconcile.ErrOutOfOrder) {
			return Contradicted, fmt.Sprintf("%s: %v", b.Label, b.Err)
		}
	}
	c := d.Contract
	events, gaps, increasing := 0, 0, true
	largest := ""
	for wi := range fx.Walks {
		var prev coord.Position
		var prevLabel string
		started := false
		for _, p := range fx.Walks[wi] {
			for _, e := range p.newEvents() {
				events++
				if started {
					if e.Position.Compare(prev) <= 0 {
						increasing = false
						if c.OrderedPositions || c.DensePositions {
							return Contradicted, fmt.Sprintf("%s has position %s after position %s of %s: positions do not strictly increase along the partition", p.Label, e.Position, prev, prevLabel)
						}
					} else if next, ok := prev.Next(); ok && next != e.Position {
						gaps++
						largest = fmt.Sprintf("%s after %s", e.Position, prev)
						if c.DensePositions && !coveredGap(c, p, e.Position) {
							return Contradicted, fmt.Sprintf("%s has position %s after %s (%s): position %s is missing, and no complete_through of the page covers it", p.Label, e.Position, prev, prevLabel, next)
						}
					}
				}
				prev, prevLabel, started = e.Position, p.Label, true
			}
		}
	}
	if events == 0 {
		return CannotTell, "no event was answered"
	}
	density := ""
	if coord.HasSuccessorArithmetic(positionKind(d)) && increasing {
		density = fmt.Sprintf("; %s between consecutive positions", plural(gaps, "gap", "gaps"))
		if gaps > 0 {
			density += " (e.g. " + largest + ")"
		}
	}
	switch {
	case c.OrderedPositions || c.DensePositions:
		return Supported, fmt.Sprintf("%s strictly increasing along each walk%s", plural(events, "position", "positions"), density)
	case increasing:
		return Supported, fmt.Sprintf("claims no order (%s happened to increase along each walk%s)", plural(events, "position", "positions"), density)
	}
	return Supported, fmt.Sprintf("claims no order (%s, not increasing along the walks)", plural(events, "position", "positions"))
}

func firstPositionValue(d Declared) string {
	if d.Contract.HasFirstPosition() {
		return d.Contract.FirstPosition.String()
	}
	return "not declared"
}

// judgeFirstPosition checks the declared origin of dense positions: each
// walk is a traversal from the start, so its first event must be at the
// origin, or the input finds a first-page gap (coverage rule (b)) and
// recovers as declared. The gap the page's own complete_through covers is
// accepted, as the input accepts it.
func judgeFirstPosition(d Declared, fx *Facts) (Verdict, string) {
	c := d.Contract
	var seen []string
	for wi := range fx.Walks {
		for _, p := range fx.Walks[wi] {
			if p.Empty() {
				continue
			}
			first := p.Response.Events[0].Position
			switch {
			case !c.HasFirstPosition():
				return CannotTell, fmt.Sprintf("no first_position is declared, so the first page of a traversal is not checked: %s begins at position %s (events the source dropped before the first read would be skipped without a word; declare first_position where the source documents where its positions start)", p.Label, first)
			case first == reconcile.FirstPosition(c):
				seen = append(seen, fmt.Sprintf("%s begins at position %s", p.Label, first))
			case first.Kind == reconcile.FirstPosition(c).Kind && reconcile.FirstPosition(c).Less(first) && coveredGap(c, p, first):
				seen = append(seen, fmt.Sprintf("%s begins at position %s, its complete_through covering the positions before it", p.Label, first))
			default:
				return Contradicted, fmt.Sprintf("%s, the first page of a traversal from the start, begins at position %s, not at the declared first position %s: the input would find a first-page gap and %s (the source's retention dropped its oldest events, or its page keeps the newest)",
					p.Label, first, c.FirstPosition, recoveryDoes(recovery(d)))
			}
			break
		}
	}
	if len(seen) == 0 {
		return CannotTell, "no walk answered an event"
	}
	return Supported, strings.Join(seen, "; ")
}

// recoveryDoes says what the input does on unprovable divergence under r.
func recoveryDoes(r provider.Recovery) string {
	if r == provider.RecoveryPark {
		return "park the partition"
	}
	return "restart it from restart_cursor (" + r.String() + "), parking after max_restarts if every restart answers so"
}

// coveredGap: the page's own complete_through, in the positions'
// coordinate, covers every position before pos (the input accepts such a
// gap under dense positions).
func coveredGap(c provider.Contract, p PageFacts, pos coord.Position) bool {
	prev, ok := pos.Prev()
	ct := p.Response.CompleteThrough
	return ok && c.WatermarkCoversPositions && !ct.IsZero() && ct.Kind == prev.Kind && prev.Compare(coord.Position(ct)) <= 0
}

// selfCertified reports whether every page that carried a complete_through
// had events and a complete_through equal to its own last (or greatest)
// position, with the number of such pages and one example; independent
// names a page whose watermark is not its own last position.
func selfCertified(fx *Facts) (self bool, n int, example, independent string) {
	for _, p := range fx.allPages() {
		ct := p.Response.CompleteThrough
		if ct.IsZero() {
			continue
		}
		n++
		last, ok := p.Last()
		hi, _ := p.Max()
		switch {
		case !ok:
			independent = fmt.Sprintf("%s had no events and carried complete_through %s", p.Label, ct)
		case coord.Position(ct) != last && coord.Position(ct) != hi:
			independent = fmt.Sprintf("%s carried complete_through %s, not its last position %s", p.Label, ct, last)
		case example == "":
			example = fmt.Sprintf("%s: %s", p.Label, ct)
		}
		if independent != "" {
			return false, n, example, independent
		}
	}
	return n > 0, n, example, ""
}

const selfCertifiedNote = "a page's own last position certifies nothing: an event written later below it sits behind the watermark and is never read"

// judgeCompleteThrough judges the mapping: a watermark that goes back
// along a walk contradicts any finality; whether its values may be final
// is judged by judgeFinality.
func judgeCompleteThrough(d Declared, fx *Facts) (Verdict, string) {
	if !d.CompleteThrough {
		return Supported, "not mapped: the partition publishes no scalar watermark (the frontier is the vector)"
	}
	for wi := range fx.Walks {
		var prev coord.Watermark
		prevLabel := ""
		for _, p := range fx.Walks[wi] {
			ct := p.Response.CompleteThrough
			if ct.IsZero() {
				continue
			}
			if ct.Less(prev) && finality(d) != provider.FinalityNone {
				return Contradicted, fmt.Sprintf("%s carried complete_through %s, below %s of %s: a final watermark never goes back", p.Label, ct, prev, prevLabel)
			}
			prev, prevLabel = ct, p.Label
		}
	}
	self, _, example, independent := selfCertified(fx)
	n := 0
	for _, p := range fx.allPages() {
		if !p.Response.CompleteThrough.IsZero() {
			n++
		}
	}
	switch {
	case n == 0:
		return CannotTell, "no page carried a complete_through"
	case finality(d) == provider.FinalityNone:
		return Supported, fmt.Sprintf("%s carried one (%s); under finality none it stays in the witness and never becomes a watermark", plural(n, "page", "pages"), firstNonEmpty(example, independent))
	case self:
		return Supported, fmt.Sprintf("%s carried one, never going back; it was each page's own last position (%s): finality judges what that certifies", plural(n, "page", "pages"), example)
	}
	return Supported, fmt.Sprintf("%s carried one, never going back (%s)", plural(n, "page", "pages"), independent)
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// judgeFinality: under finality source, a complete_through that was each
// page's own last position certifies nothing (contradicted); an asserted
// finality (append-only writer, lag) is a claim no answer can show.
func judgeFinality(d Declared, fx *Facts) (Verdict, string) {
	f := finality(d)
	if f == provider.FinalityNone {
		if !d.CompleteThrough {
			return Supported, "none (claims nothing): complete_through is not mapped; no watermark is written"
		}
		return Supported, "none (claims nothing): complete_through is recorded in each witness but never becomes the partition's watermark and never advances the frontier"
	}
	if !d.CompleteThrough {
		return CannotTell, "complete_through is not mapped: there is no watermark to be final"
	}
	self, n, example, independent := selfCertified(fx)
	selfNote := ""
	if self {
		selfNote = fmt.Sprintf("; complete_through was each page's own last position on the %s that carried one (%s), so it rests on this assertion alone", plural(n, "page", "pages"), example)
	}
	switch f {
	case provider.FinalityAppendOnlyWriter:
		return CannotTell, "append_only_writer asserts that positions are only ever created above every existing one (one writer, time-ordered keys, a log): no answer can show it; if it is wrong, an event created later below the watermark is never read while the frontier claims it" + selfNote
	case provider.FinalityLag:
		return CannotTell, fmt.Sprintf("lag asserts the source's documented bound on late arrival (the durable watermark is complete_through less %s): no answer can show it; an event arriving later than that below the watermark is never read while the frontier claims it%s", d.Contract.Basis(sdkcoord.SDKKind(d.Coordinate)), selfNote)
	}
	switch {
	case n == 0:
		return CannotTell, "no page carried a complete_through"
	case !self:
		return Supported, independent + ": not the page's own last position (that the source certifies it complete and final is for its documentation to say)"
	}
	return Contradicted, fmt.Sprintf("complete_through was the page's own last position on each of the %s that carried one (%s): %s", plural(n, "page", "pages"), example, selfCertifiedNote)
}

// judgeCoverage: under watermark_covers_positions, no later answer shows an
// event at or below a complete_through an earlier answer gave, unless it
// was shown before.
func judgeCoverage(d Declared, fx *Facts) (Verdict, string) {
	if !d.Contract.WatermarkCoversPositions {
		return Supported, "false: a watermark proves nothing about positions"
	}
	type certified struct {
		label string
		wm    coord.Watermark
	}
	n := 0
	// Along each walk, and from walk 1 to walk 2 and the retries.
	var walk1 []certified
	seen1 := map[uint64]bool{}
	for wi := range fx.Walks {
		var certs []certified
		seen := map[uint64]bool{}
		for _, p := range fx.Walks[wi] {
			for _, e := range p.Witness.Events {
				if seen[e.IDHash] || (wi == 1 && seen1[e.IDHash]) {
					continue
				}
				against := certs
				if wi == 1 {
					against = append(append([]certified(nil), walk1...), certs...)
				}
				for _, c := range against {
					if c.wm.Kind == e.Position.Kind && e.Position.Compare(coord.Position(c.wm)) <= 0 {
						return Contradicted, fmt.Sprintf("%s has an event at position %s, at or below complete_through %s of %s, which had not shown it", p.Label, e.Position, c.wm, c.label)
					}
				}
			}
			for _, e := range p.Witness.Events {
				seen[e.IDHash] = true
			}
			if ct := p.Response.CompleteThrough; !ct.IsZero() {
				certs = append(certs, certified{p.Label, ct})
				n++
			}
		}
		if wi == 0 {
			walk1, seen1 = certs, seen
		}
	}
	for _, pr := range fx.Pairs {
		ct := pr.First.Response.CompleteThrough
		if ct.IsZero() {
			continue
		}
		known := map[uint64]bool{}
		for _, e := range pr.First.Witness.Events {
			known[e.IDHash] = true
		}
		for _, e := range pr.Second.Witness.Events {
			if !known[e.IDHash] && !seen1[e.IDHash] && ct.Kind == e.Position.Kind && e.Position.Compare(coord.Position(ct)) <= 0 {
				return Contradicted, fmt.Sprintf("%s has an event at position %s, at or below the complete_through %s the first answer gave", pr.Label, e.Position, ct)
			}
		}
	}
	if n == 0 {
		return CannotTell, "no page carried a complete_through"
	}
	if self, _, example, _ := selfCertified(fx); self && !finalityAsserted(d) {
		return Contradicted, fmt.Sprintf("the coverage it claims rests on complete_through, which was each page's own last position (%s): %s", example, selfCertifiedNote)
	}
	return Supported, fmt.Sprintf("%s carried a complete_through; no later answer showed an event at or below one", plural(n, "page", "pages"))
}

// nextInWalk is the page after p in its walk (ok false when p is last).
func nextInWalk(fx *Facts, p PageFacts) (PageFacts, bool) {
	for wi := range fx.Walks {
		for i, q := range fx.Walks[wi] {
			if q.Label == p.Label && i+1 < len(fx.Walks[wi]) {
				return fx.Walks[wi][i+1], true
			}
		}
	}
	return PageFacts{}, false
}

func judgeEmptyPage(d Declared, fx *Facts) (Verdict, string) {
	var empty []PageFacts
	for _, p := range fx.allPages() {
		if p.Empty() {
			empty = append(empty, p)
		}
	}
	if len(empty) == 0 {
		return CannotTell, "no answer was empty; " + walkEnd(fx.Obs.First)
	}
	switch d.Contract.EmptyPage {
	case provider.EmptyNoEvidence:
		return Supported, fmt.Sprintf("claims nothing for an empty page (%s seen, e.g. %s)", plural(len(empty), "empty answer", "empty answers"), empty[0].Label)
	case provider.EmptyFollowsSuccessor:
		// Followed, claiming nothing: no watermark, no end. Nothing an
		// answer shows can contradict that; the claim is the vendor's
		// that the successor continues the traversal.
		return Supported, fmt.Sprintf("claims nothing for an empty page and follows its successor (%s seen, e.g. %s, successor %s)", plural(len(empty), "empty answer", "empty answers"), empty[0].Label, hash(empty[0].Response.Successor))
	case provider.EmptyEndOfData:
		for _, p := range empty {
			if p.Response.HasMoreKnown && p.Response.HasMore {
				return Contradicted, fmt.Sprintf("%s was empty and its has_more is true: an empty page was not the end of the data", p.Label)
			}
			if next, ok := nextInWalk(fx, p); ok && !next.Empty() {
				return Contradicted, fmt.Sprintf("%s was empty, and its successor's page (%s) had %s: an empty page was not the end of the data", p.Label, next.Label, plural(len(next.Response.Events), "event", "events"))
			}
		}
		return Supported, fmt.Sprintf("%s, none followed by more events (e.g. %s, successor %s)", plural(len(empty), "empty answer", "empty answers"), empty[0].Label, hash(empty[0].Response.Successor))
	default:
		for _, p := range empty {
			if ct := p.Response.CompleteThrough; !ct.IsZero() {
				return Supported, fmt.Sprintf("%s was empty and carried complete_through %s", p.Label, ct)
			}
		}
		return CannotTell, fmt.Sprintf("%s, none with a complete_through (an empty page without one proves nothing, e.g. %s)", plural(len(empty), "empty answer", "empty answers"), empty[0].Label)
	}
}

func judgeMissingSuccessor(d Declared, fx *Facts) (Verdict, string) {
	var last []PageFacts
	for _, p := range fx.allPages() {
		if len(p.Response.Successor) == 0 {
			last = append(last, p)
		}
	}
	for _, pr := range fx.Pairs {
		if len(pr.First.Response.Successor) == 0 && len(pr.Second.Response.Successor) > 0 && d.Contract.MissingSuccessor == provider.MissingSuccessorEndsTraversal {
			return Contradicted, fmt.Sprintf("%s: the same cursor answered without a successor, then with one (%s): the traversal had not ended", pr.Label, hash(pr.Second.Response.Successor))
		}
	}
	if len(last) == 0 {
		return CannotTell, "every answer had a successor; " + walkEnd(fx.Obs.First)
	}
	if d.Contract.MissingSuccessor == provider.MissingSuccessorEndsTraversal {
		for _, p := range last {
			if p.Response.HasMoreKnown && p.Response.HasMore {
				return Contradicted, fmt.Sprintf("%s has no successor but its has_more is true: the traversal had not ended", p.Label)
			}
		}
		return Supported, fmt.Sprintf("%s without a successor ended the traversal (%s)", plural(len(last), "answer", "answers"), last[0].Label)
	}
	return Supported, fmt.Sprintf("%s without a successor: the input polls that cursor again (%s)", plural(len(last), "answer", "answers"), last[0].Label)
}

func judgeHasMore(_ Declared, fx *Facts) (Verdict, string) {
	n := 0
	for _, p := range fx.allPages() {
		r := p.Response
		if !r.HasMoreKnown {
			continue
		}
		n++
		if r.HasMore && len(r.Successor) == 0 {
			return Contradicted, fmt.Sprintf("%s: has_more is true but the page has no successor", p.Label)
		}
		if next, ok := nextInWalk(fx, p); ok && !r.HasMore && !next.Empty() {
			return Contradicted, fmt.Sprintf("%s: has_more is false, yet its successor's page (%s) had %s", p.Label, next.Label, plural(len(next.Response.Events), "event", "events"))
		}
	}
	if n == 0 {
		return CannotTell, "no page stated has_more"
	}
	return Supported, fmt.Sprintf("%s: has_more agreed with the successor and the next page", plural(n, "page", "pages"))
}

// usable are the pairs whose two answers were both classified or compared.
func usable(fx *Facts) []Pair {
	var out []Pair
	for _, p := range fx.Pairs {
		if !p.Idle && p.Err == nil {
			out = append(out, p)
		}
	}
	return out
}

func judgeRotation(d Declared, fx *Facts) (Verdict, string) {
	pairs := usable(fx)
	same, rotated := 0, 0
	for _, p := range pairs {
		switch {
		case p.Rotated():
			if !d.Contract.TokensMayRotate {
				return Contradicted, fmt.Sprintf("%s: the same %s, successor %s then %s (the input parks or restarts on such a retry: %s)",
					p.Label, plural(len(p.First.Witness.Events), "event", "events"), hash(p.First.Response.Successor), hash(p.Second.Response.Successor), p.Verdict.Class)
			}
			rotated++
		case p.SameEvents():
			same++
		}
	}
	switch {
	case rotated > 0:
		return Supported, fmt.Sprintf("%s to the same cursor returned the same events with another successor", plural(rotated, "second answer", "second answers"))
	case same > 0 && d.Contract.TokensMayRotate:
		return Supported, fmt.Sprintf("%s to the same cursor returned the same successor (the permission was not needed)", plural(same, "second answer", "second answers"))
	case same > 0:
		return Supported, fmt.Sprintf("%s to the same cursor returned the same events and the same successor", plural(same, "second answer", "second answers"))
	}
	return CannotTell, "no cursor was answered twice with the same events"
}

func judgeSnapshot(d Declared, fx *Facts) (Verdict, string) {
	if !d.Contract.SnapshotMarker {
		return Supported, "false: a marker proves nothing"
	}
	marked := 0
	for _, p := range fx.allPages() {
		if len(p.Response.Marker) > 0 {
			marked++
		}
	}
	stable := 0
	for _, p := range usable(fx) {
		m1, m2 := p.First.Response.Marker, p.Second.Response.Marker
		if len(m1) == 0 || !bytes.Equal(m1, m2) {
			continue
		}
		if !p.SameEvents() {
			return Contradicted, fmt.Sprintf("%s: both answers carried marker %s, yet their events differ (%d then %d events): the snapshot is not stable",
				p.Label, hash(m1), len(p.First.Witness.Events), len(p.Second.Witness.Events))
		}
		stable++
	}
	switch {
	case marked == 0:
		return CannotTell, "no page carried a marker: the claim has no evidence to stand on"
	case stable == 0:
		return CannotTell, fmt.Sprintf("%s carried a marker, but no cursor was answered twice under one marker", plural(marked, "page", "pages"))
	}
	return Supported, fmt.Sprintf("%s to the same cursor under the same marker had the same events (%s carried a marker)", plural(stable, "second answer", "second answers"), plural(marked, "page", "pages"))
}

// judgeExclusive: a page fetched from its predecessor's successor repeats
// no event at or below the applied boundary (under ordered positions), or
// no event of an earlier page (otherwise).
func judgeExclusive(d Declared, fx *Facts) (Verdict, string) {
	ordered := d.Contract.OrderedPositions || d.Contract.DensePositions
	checked, repeat := 0, ""
	for wi := range fx.Walks {
		seen := map[uint64]string{}
		for _, p := range fx.Walks[wi] {
			if p.HasApplied && !p.Empty() {
				checked++
			}
			for _, e := range p.newWitnessEvents() {
				switch {
				case repeat != "":
				case ordered && p.HasApplied && e.Position.Compare(p.Applied) <= 0:
					repeat = fmt.Sprintf("%s repeats position %s, at or below the applied boundary %s of the pages before it", p.Label, e.Position, p.Applied)
				case !ordered && seen[e.IDHash] != "":
					repeat = fmt.Sprintf("%s repeats the event at position %s that %s showed", p.Label, e.Position, seen[e.IDHash])
				}
			}
			for _, e := range p.Witness.Events {
				if seen[e.IDHash] == "" {
					seen[e.IDHash] = p.Label
				}
			}
		}
	}
	switch {
	case repeat != "" && d.Contract.ExclusiveBoundary:
		return Contradicted, repeat + ": the source resumes at its boundary, not strictly after it"
	case repeat != "":
		return Supported, "false: " + repeat + " (an inclusive boundary, as declared)"
	case checked == 0:
		return CannotTell, "no walk reached a second page with events"
	case d.Contract.ExclusiveBoundary:
		return Supported, fmt.Sprintf("%s after the first: none repeated an event at or below the boundary", plural(checked, "page", "pages"))
	}
	return Supported, fmt.Sprintf("false (claims nothing); %s after the first repeated no earlier event", plural(checked, "page", "pages"))
}

// offsetParams are query parameters that carry an offset or page number.
var offsetParams = []string{"offset", "page", "skip", "start", "from", "page_number", "pagenumber", "pageindex", "startindex"}

// offsetValue reads a token as a small non-negative integer: the token
// itself, or an offset-like query parameter of a URL token.
func offsetValue(tok []byte) (int64, bool) {
	s := string(tok)
	if n, ok := smallInt(s); ok {
		return n, true
	}
	_, query, found := strings.Cut(s, "?")
	if !found {
		return 0, false
	}
	for _, kv := range strings.Split(query, "&") {
		k, v, _ := strings.Cut(kv, "=")
		for _, name := range offsetParams {
			if strings.EqualFold(k, name) {
				if n, ok := smallInt(v); ok {
					return n, true
				}
			}
		}
	}
	return 0, false
}

func smallInt(s string) (int64, bool) {
	if s == "" || len(s) > 12 {
		return 0, false
	}
	var n int64
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// keyset reports whether the page's successor token names its own last
// position or last event id.
func keyset(p PageFacts) bool {
	evs := p.Response.Events
	if len(evs) == 0 || len(p.Token) == 0 {
		return false
	}
	last := evs[len(evs)-1]
	t := string(p.Token)
	return t == last.Position.String() || t == last.ID
}

// offsetShape looks for offset or page-number successors along walk 1:
// integers (or URLs with an offset-like parameter) that grow by each
// page's event count (less one under the overlap check), or by one per
// page, and do not name the page's last position. like is false when the
// successors do not look so; shape describes them; withToken and keysetN
// count the pages with events that had a successor, and those whose
// successor named their last position or id.
func offsetShape(d Declared, fx *Facts) (like bool, shape string, withToken, keysetN int) {
	pages := fx.Walks[0]
	var deltas []string
	offsets, numbers, pairs := true, true, 0
	for i, p := range pages {
		if len(p.Token) == 0 {
			continue
		}
		if !p.Empty() {
			withToken++
		}
		if keyset(p) {
			keysetN++
		}
		if i+1 >= len(pages) || len(pages[i+1].Token) == 0 || pages[i+1].Empty() {
			continue
		}
		a, ok1 := offsetValue(p.Token)
		b, ok2 := offsetValue(pages[i+1].Token)
		if !ok1 || !ok2 {
			offsets, numbers = false, false
			continue
		}
		pairs++
		n := int64(len(pages[i+1].Response.Events))
		deltas = append(deltas, fmt.Sprint(b-a))
		offsets = offsets && (b-a == n || (d.Contract.OffsetOverlap && b-a == n-1 && n > 1))
		numbers = numbers && b-a == 1 && n > 1
	}
	like = pairs > 0 && keysetN == 0 && (offsets || numbers)
	style := "offsets (each grew by the next page's event count"
	if !offsets {
		style = "page numbers (each grew by one"
	}
	return like, fmt.Sprintf("successors look like %s: %s)", style, strings.Join(deltas, ", ")), withToken, keysetN
}

// judgePagination: under token or keyset pagination, successors shaped
// like offsets or page numbers contradict the declaration; under offset
// pagination, the overlap check runs as the input runs it, dense positions
// are judged by positions, and offset_unproven claims no completeness.
func judgePagination(d Declared, fx *Facts) (Verdict, string) {
	c := d.Contract
	like, shape, withToken, keysetN := offsetShape(d, fx)
	if c.Pagination == provider.PaginationOffset {
		switch {
		case c.OffsetOverlap:
			return judgeOverlap(fx)
		case c.DensePositions:
			return Supported, "offset over dense positions: an event that slides onto a page already read leaves a gap in the positions, which the input refuses (positions judges the gaps)" + shapeNote(like, shape)
		case c.OffsetUnproven:
			return Supported, "offset_unproven claims no completeness: an event that slides onto a page already read when an earlier one is deleted is skipped unseen; no watermark is written and no traversal ends complete" + shapeNote(like, shape)
		}
		return Contradicted, "offset pagination without dense positions, offset_overlap or offset_unproven: an invalid contract"
	}
	switch {
	case like:
		slide := "a delete on an earlier page slides an event onto a page already read, and nothing in the next answer shows it"
		if c.DensePositions {
			slide = "dense positions would show an event that slides onto a page already read as a gap, but the successor is not a token the source issues"
		}
		return Contradicted, fmt.Sprintf("%s, not %s successors: %s; declare pagination: offset (with offset_overlap, or offset_unproven)", shape, c.Pagination, slide)
	case withToken == 0:
		return CannotTell, "no page with events had a successor"
	case keysetN == withToken:
		return Supported, fmt.Sprintf("each of the %s names its page's last position or id (keyset)", plural(withToken, "successor", "successors"))
	case c.Pagination == provider.PaginationKeyset:
		return CannotTell, fmt.Sprintf("%s: not the page's last position or id as the probe reads them, nor offsets", plural(withToken-keysetN, "successor", "successors"))
	}
	return Supported, fmt.Sprintf("%s: opaque tokens, not offsets or page numbers", plural(withToken, "successor", "successors"))
}

func shapeNote(like bool, shape string) string {
	if like {
		return " (" + shape + ")"
	}
	return ""
}

// judgeOverlap reports the overlap check the input runs
// (reconcile.CheckContinuity) on every page after the first of each walk. A
// page that fails it in every walk that reached a second page contradicts
// the declaration (the successor is not one event early: the input would
// find every traversal shifted and restart it for ever); a failure in one
// walk only is the source changing during the probe, which the check is
// there to catch.
func judgeOverlap(fx *Facts) (Verdict, string) {
	checked, walks, failedWalks := 0, 0, 0
	first := ""
	for wi := range fx.Walks {
		reached, failed := false, false
		for i, p := range fx.Walks[wi] {
			if i == 0 || p.Continuity == nil {
				continue
			}
			reached = true
			if !p.Continuity.Continues {
				if !failed && first == "" {
					first = p.Label + ": " + p.Continuity.Reason
				}
				failed = true
				continue
			}
			checked++
		}
		if reached {
			walks++
		}
		if failed {
			failedWalks++
		}
	}
	switch {
	case walks == 0:
		return CannotTell, "no walk reached a second page: the overlap check had nothing to check"
	case failedWalks == walks:
		return Contradicted, fmt.Sprintf("%s; it failed in every walk, so the successor is not one event early or the pages do not overlap: the input would find every traversal shifted and restart it (recovery) without end", first)
	case failedWalks > 0:
		return Supported, fmt.Sprintf("the overlap check passed on %s after the first, and caught a shift once (%s): the source changed during the probe, and the input would restart the partition rather than skip", plural(checked, "page", "pages"), first)
	}
	return Supported, fmt.Sprintf("the overlap check passed on %s after the first: each began with the previous page's last event", plural(checked, "page", "pages"))
}

// judgeRetries reports how the input classifies a second answer to the
// same cursor. Divergence for a token rotation or an unstable snapshot is
// judged by tokens_may_rotate and snapshot_marker.
func judgeRetries(d Declared, fx *Facts) (Verdict, string) {
	classes := map[reconcile.RetryClass]int{}
	var order []reconcile.RetryClass
	idle := 0
	for _, p := range fx.Pairs {
		switch {
		case p.Idle:
			idle++
			continue
		case p.Err != nil && p.classified:
			return Contradicted, fmt.Sprintf("%s: the input cannot reconcile the two answers: %v", p.Label, p.Err)
		case p.Err != nil:
			continue // an answer the input cannot use: judged by response, positions, position_type
		}
		c := p.Verdict.Class
		if c == reconcile.UnprovableDivergence {
			rotation := p.Rotated() && !d.Contract.TokensMayRotate
			unstable := d.Contract.SnapshotMarker && len(p.First.Response.Marker) > 0 && bytes.Equal(p.First.Response.Marker, p.Second.Response.Marker) && !p.SameEvents()
			if !rotation && !unstable {
				return Contradicted, fmt.Sprintf("%s: %s: the input would %s on such a retry", p.Label, p.Verdict.Reason, recovery(d))
			}
		}
		if classes[c] == 0 {
			order = append(order, c)
		}
		classes[c]++
	}
	if len(order) == 0 && idle == 0 {
		return CannotTell, "no cursor was answered twice"
	}
	var parts []string
	for _, c := range order {
		parts = append(parts, fmt.Sprintf("%s ×%d", c, classes[c]))
	}
	if idle > 0 {
		parts = append(parts, fmt.Sprintf("empty without evidence (polled again) ×%d", idle))
	}
	return Supported, "second answers to the same cursor: " + strings.Join(parts, ", ")
}

func judgeValidate(d Declared, fx *Facts) (Verdict, string) {
	v := fx.Obs.Validation
	switch {
	case !d.Validate:
		return CannotTell, "no validate request: a stored cursor is fetched without checking that the source is the one that issued it"
	case !v.Ran:
		return CannotTell, "no cursor to validate (the first page had no successor)"
	case v.Err == nil:
		return Supported, fmt.Sprintf("accepted cursor %s, issued moments before; whether it rejects a recreated source cannot be told without recreating one", hash(v.Cursor))
	case errors.Is(v.Err, provider.ErrExpired):
		return Contradicted, fmt.Sprintf("declared cursor %s, issued moments before, invalid: every start-up would treat its stored cursor as expired and %s", hash(v.Cursor), recovery(d))
	}
	return CannotTell, fmt.Sprintf("the validate request failed: %v", v.Err)
}

// judgeRestart: a restart from the boundary after the first walk's first
// page skips nothing the first walk showed after that boundary (under
// ordered positions: every such event up to the restart page's greatest
// position is on the restart page).
func judgeRestart(d Declared, fx *Facts) (Verdict, string) {
	r := fx.Obs.Restart
	switch {
	case recovery(d) == provider.RecoveryPark:
		return Supported, "recovery park: a partition that cannot advance waits for an operator; no restart cursor is used"
	case r == nil:
		return CannotTell, "no restart was probed (it needs a first walk of two pages or more, the first with events)"
	case r.Err != nil && (errors.Is(r.Err, provider.ErrExpired) || errors.Is(r.Err, provider.ErrMalformed)):
		return Contradicted, fmt.Sprintf("the restart cursor after walk 1 page %d (applied position %s) was refused: %v: a restart would fail the same way", r.After+1, r.Applied, r.Err)
	case r.Err != nil:
		return CannotTell, fmt.Sprintf("the restart after walk 1 page %d failed: %v", r.After+1, r.Err)
	case len(r.Cursor) == 0:
		return Supported, "the restart cursor is the partition's start: a restart replays it whole (duplicates, never a gap)"
	}
	page := buildPage(d, fx.Obs.Partition, "the restart page", r.Page, attempt1)
	if page.BuildErr != nil {
		return Contradicted, fmt.Sprintf("the restart page cannot be used: %v", page.BuildErr)
	}
	hi, ok := page.Max()
	if !ok {
		return CannotTell, fmt.Sprintf("the page of restart cursor %s (after walk 1 page %d, applied position %s) was empty", hash(r.Cursor), r.After+1, r.Applied)
	}
	if !d.Contract.OrderedPositions && !d.Contract.DensePositions {
		return CannotTell, "positions are unordered: the restart page cannot be lined up with the first walk"
	}
	on := map[uint64]bool{}
	for _, e := range page.Witness.Events {
		on[e.IDHash] = true
	}
	compared := 0
	first := fx.Walks[0]
	for _, p := range first[min(r.After+1, len(first)):] {
		for _, e := range p.Witness.Events {
			if e.Position.Compare(r.Applied) <= 0 || e.Position.Compare(hi) > 0 {
				continue
			}
			if !on[e.IDHash] {
				return Contradicted, fmt.Sprintf("restart cursor %s (after walk 1 page %d: applied position %s, watermark %s) answered positions %s..%s without position %s that %s showed: a restart would skip it",
					hash(r.Cursor), r.After+1, r.Applied, r.Watermark, page.Response.Events[0].Position, hi, e.Position, p.Label)
			}
			compared++
		}
	}
	if compared == 0 {
		return CannotTell, fmt.Sprintf("the restart page (positions %s..%s) shares no position with what walk 1 showed after its boundary %s", page.Response.Events[0].Position, hi, r.Applied)
	}
	return Supported, fmt.Sprintf("restart cursor %s (after walk 1 page %d, applied position %s) answered from position %s: none of the %s walk 1 showed after the boundary up to %s was skipped",
		hash(r.Cursor), r.After+1, r.Applied, page.Response.Events[0].Position, plural(compared, "event", "events"), hi)
}

// judgeIncarnation runs nothing itself: it reads the incarnation request's
// two answers (before walk 1, after everything else). The create request
// is never run by the probe (it writes).
func judgeIncarnation(d Declared, fx *Facts) (Verdict, string) {
	a, b := fx.Obs.Incarnation, fx.Obs.IncarnationAfter
	switch {
	case !d.Incarnation:
		return CannotTell, "no incarnation request: a source deleted and created again under the same name is not recognised by a changed incarnation (docs/design.md#source-incarnations)"
	case !a.Ran:
		return CannotTell, "the incarnation request was not run"
	case a.Err != nil && errors.Is(a.Err, provider.ErrMalformed):
		return Contradicted, fmt.Sprintf("the incarnation request's answer cannot be used: %v: the partition does not read until its incarnation is known", a.Err)
	case a.Err != nil:
		return CannotTell, fmt.Sprintf("the incarnation request failed: %v", a.Err)
	case !a.Found && d.IncarnationCreate:
		return CannotTell, "no marker yet; the input creates it at start (incarnation.create, which the probe does not run: it writes)"
	case !a.Found:
		return Contradicted, "the incarnation request names no incarnation and no incarnation.create request is configured: the partition would never read (the input retries the request)"
	case b.Ran && b.Err == nil && b.Found && b.Hash != a.Hash:
		return Contradicted, fmt.Sprintf("incarnation %s before walk 1, %s after the probe: unless the source was recreated meanwhile, the value is not an incarnation, and every check would reset the partition to its start", a.Hash, b.Hash)
	case b.Ran && b.Err == nil && b.Found:
		return Supported, fmt.Sprintf("incarnation %s, the same before walk 1 and after the probe; whether it changes when the source is recreated cannot be told without recreating one", a.Hash)
	}
	return Supported, fmt.Sprintf("incarnation %s; whether it changes when the source is recreated cannot be told without recreating one", a.Hash)
}
