package reconcile

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/tidemark/tidemark/provider"
)

// The offset_shaped_successor monitor (docs/design.md#contract-monitors).
//
// A cursor is opaque everywhere else: it is stored, hashed and handed back
// to the provider, never ordered or computed. This monitor is the one
// place that parses it, and only to detect: it reads the query of a cursor
// that is a URL (absolute or relative) or a `Link` header value, to see
// whether a successor differs from its request only by a growing offset
// or page number. The answer is a yes or no with a parameter name; nothing
// parsed is ordered, compared with a position, stored or promoted, and the
// evidence names the parameter and the step, never a value or a cursor
// (cursors only as CursorHash).

// OffsetParams are the query parameters (compared without regard to case)
// the monitor reads as an offset or a page number: offset, page, page
// number and index, skip (OData's $skip too), start and its index, from.
// A parameter not in the list is never read as one (Okta's after, Graph's
// $skiptoken, a cursor= token).
var OffsetParams = []string{"offset", "page", "page_number", "pagenumber", "page_index", "pageindex", "skip", "$skip", "start", "start_index", "startindex", "from"}

// maxShapeBytes bounds the cursors the monitor parses: longer ones are
// not read (no URL a REST API pages with is that long).
const maxShapeBytes = 8 << 10

// maxOffsetDigits bounds an offset or page number (a longer run of
// digits is an id or a time, not a row count).
const maxOffsetDigits = 12

// OffsetShape is what OffsetShaped found.
type OffsetShape struct {
	// Param is the parameter's name as the successor spells it.
	Param string
	// Step is how much it grew from the request's value (Added: the
	// request had no such parameter, Step is zero).
	Step  int64
	Added bool
	// FromBoundary: the request cursor is no URL (the start, a restart
	// cursor): there was nothing to compare with, and the successor's
	// value is where a walk from the start stands after this page.
	FromBoundary bool
	// Link: the successor is a Link header value (its rel="next" target).
	Link bool
}

// String describes the shape without a value: the parameter, the step.
func (s OffsetShape) String() string {
	where := "the successor URL"
	if s.Link {
		where = "the successor's Link rel=\"next\" target"
	}
	switch {
	case s.FromBoundary:
		return fmt.Sprintf("%s sets query parameter %q to where a walk by offset or page number from the start stands after this page (the request was a boundary, no URL to compare with)", where, s.Param)
	case s.Added:
		return fmt.Sprintf("%s differs from its request only by query parameter %q, which the request did not have", where, s.Param)
	}
	return fmt.Sprintf("%s differs from its request only by query parameter %q, advanced by %d", where, s.Param, s.Step)
}

// OffsetShaped reports whether successor, returned for a page of events
// events fetched with request, looks like an offset or page-number
// successor:
//
//   - request and successor are both URLs (a successor relative to the
//     request is resolved against it; parameters in any order) with the
//     same scheme, host and path and the same query parameters but one,
//     named in OffsetParams, whose value is a small non-negative integer
//     that grew (or that the successor adds);
//   - or request is no URL (the empty start cursor, a restart cursor) and
//     the successor URL has a parameter of OffsetParams whose value is
//     where a walk from the start stands after this page: the page's
//     event count (an offset from 0) or one more (from 1), or 2 (the
//     second page number) after a page of more than one event.
//
// A cursor that is a Link header value (`<url>; rel="next", ...`) stands
// for its rel="next" target. An opaque token (anything that is not a URL
// with a query) is never offset-shaped.
func OffsetShaped(request, successor []byte, events int) (OffsetShape, bool) {
	su, sLink, ok := cursorURL(successor)
	if !ok {
		return OffsetShape{}, false
	}
	sq, err := url.ParseQuery(su.RawQuery)
	if err != nil {
		return OffsetShape{}, false
	}
	ru, _, ok := cursorURL(request)
	if !ok {
		return fromBoundary(sq, events, sLink)
	}
	rq, err := url.ParseQuery(ru.RawQuery)
	if err != nil {
		return OffsetShape{}, false
	}
	su = ru.ResolveReference(su)
	if !strings.EqualFold(su.Scheme, ru.Scheme) || !strings.EqualFold(su.Host, ru.Host) || su.EscapedPath() != ru.EscapedPath() {
		return OffsetShape{}, false
	}
	var shape OffsetShape
	found := false
	for _, k := range unionKeys(rq, sq) {
		rv, sv := rq[k], sq[k]
		if slices.Equal(rv, sv) {
			continue
		}
		if found || !isOffsetParam(k) || len(sv) != 1 || len(rv) > 1 {
			return OffsetShape{}, false
		}
		b, ok := smallCount(sv[0])
		if !ok {
			return OffsetShape{}, false
		}
		if len(rv) == 0 {
			if b == 0 {
				return OffsetShape{}, false
			}
			shape, found = OffsetShape{Param: k, Added: true, Link: sLink}, true
			continue
		}
		a, ok := smallCount(rv[0])
		if !ok || b <= a {
			return OffsetShape{}, false
		}
		shape, found = OffsetShape{Param: k, Step: b - a, Link: sLink}, true
	}
	return shape, found
}

// fromBoundary judges the successor of a page read from a cursor that is
// no URL (OffsetShaped).
func fromBoundary(sq url.Values, events int, link bool) (OffsetShape, bool) {
	if events < 1 {
		return OffsetShape{}, false
	}
	n := int64(events)
	for _, k := range sortedKeys(sq) {
		if !isOffsetParam(k) || len(sq[k]) != 1 {
			continue
		}
		v, ok := smallCount(sq[k][0])
		if ok && (v == n || v == n+1 || (v == 2 && n > 1)) {
			return OffsetShape{Param: k, FromBoundary: true, Link: link}, true
		}
	}
	return OffsetShape{}, false
}

// cursorURL reads a cursor as a URL with a query: the URL itself
// (absolute, or a reference with a path or starting with "?"), or the
// rel="next" target of a Link header value (link). ok is false for
// anything else, and for cursors longer than maxShapeBytes.
func cursorURL(c []byte) (u *url.URL, link, ok bool) {
	if len(c) == 0 || len(c) > maxShapeBytes {
		return nil, false, false
	}
	s := strings.TrimSpace(string(c))
	if strings.HasPrefix(s, "<") {
		if s, ok = nextLink(s); !ok {
			return nil, false, false
		}
		link = true
	}
	if s == "" || strings.ContainsAny(s, " \t\r\n<>\"") {
		return nil, false, false
	}
	u, err := url.Parse(s)
	if err != nil || u.RawQuery == "" || u.Opaque != "" {
		return nil, false, false
	}
	if (u.Scheme == "") != (u.Host == "") {
		return nil, false, false
	}
	return u, link, true
}

// nextLink returns the target of the link whose rel names "next" in a Link
// header value (RFC 8288: `<target>; rel="next", <other>; rel="last"`), or
// the target of a lone link without rel.
func nextLink(s string) (string, bool) {
	var lone string
	links := 0
	for rest := s; ; {
		rest = strings.TrimLeft(rest, " \t,")
		if rest == "" {
			break
		}
		if rest[0] != '<' {
			return "", false
		}
		end := strings.IndexByte(rest, '>')
		if end < 0 {
			return "", false
		}
		target := rest[1:end]
		rest = rest[end+1:]
		params := rest
		if i := nextLinkStart(rest); i >= 0 {
			params, rest = rest[:i], rest[i:]
		} else {
			rest = ""
		}
		links++
		rel, hasRel := linkRel(params)
		if !hasRel {
			lone = target
			continue
		}
		if slices.Contains(strings.Fields(strings.ToLower(rel)), "next") {
			return target, true
		}
	}
	if links == 1 && lone != "" {
		return lone, true
	}
	return "", false
}

// nextLinkStart returns the index of the comma that starts the next link
// in the parameters after a link's target (outside quotes), or -1.
func nextLinkStart(s string) int {
	quoted := false
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"':
			quoted = !quoted
		case ',':
			if !quoted {
				return i
			}
		}
	}
	return -1
}

// linkRel returns the rel parameter of a link's parameters (`; rel="next"`).
func linkRel(params string) (string, bool) {
	for p := range strings.SplitSeq(params, ";") {
		k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
		if ok && strings.EqualFold(strings.TrimSpace(k), "rel") {
			return strings.Trim(strings.TrimSpace(v), `"`), true
		}
	}
	return "", false
}

func isOffsetParam(k string) bool {
	return slices.ContainsFunc(OffsetParams, func(p string) bool { return strings.EqualFold(p, k) })
}

// smallCount reads a non-negative decimal integer of at most
// maxOffsetDigits digits.
func smallCount(s string) (int64, bool) {
	if s == "" || len(s) > maxOffsetDigits || strings.TrimLeft(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

func unionKeys(a, b url.Values) []string {
	keys := sortedKeys(a)
	for _, k := range sortedKeys(b) {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	return keys
}

func sortedKeys(v url.Values) []string {
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// offsetShapedSuccessor returns the OffsetShapedSuccessor violation w
// shows under c: its successor is offset-shaped (OffsetShaped) and the
// contract declares neither offset pagination (whose checks then run) nor
// keyset pagination (a successor built from the page's last key grows
// too: the declaration says it is a key).
func offsetShapedSuccessor(c Contract, w Witness) (Violation, bool) {
	if c.Pagination != provider.PaginationToken || len(w.Successor) == 0 {
		return Violation{}, false
	}
	s, ok := OffsetShaped(w.InputCursor, w.Successor, len(w.Events))
	if !ok {
		return Violation{}, false
	}
	return Violation{Kind: OffsetShapedSuccessor, Partition: w.Partition, Evidence: fmt.Sprintf(
		"generation %d cursor %s: attempt %s: %s (successor %s): an offset or page number, which a delete on an earlier page shifts so that the next page skips an event unseen, and the contract does not declare pagination: offset; the page is refused (not emitted, its successor not promoted). Declare pagination: offset with offset_overlap (or dense positions, or offset_unproven) and restart the partition from its start, or pagination: keyset if the parameter carries the page's last key (see docs/pagination.md)",
		w.Generation, CursorHash(w.InputCursor), w.AttemptID, s, CursorHash(w.Successor))}, true
}
