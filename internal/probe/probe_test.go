package probe

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/provider"
)

// Contracts of the tests.
var (
	ordered = provider.Contract{EmptyPage: provider.EmptyNoEvidence, OrderedPositions: true, Recovery: provider.RecoveryRestartFromBoundary}
	dense   = with(ordered, func(c *provider.Contract) { c.DensePositions = true })
	overlap = with(ordered, func(c *provider.Contract) { c.Pagination, c.OffsetOverlap = provider.PaginationOffset, true })
)

func with(c provider.Contract, f func(*provider.Contract)) provider.Contract { f(&c); return c }

func declared(c provider.Contract, f ...func(*Declared)) Declared {
	d := Declared{Contract: c, Coordinate: coord.KindInteger}
	for _, g := range f {
		g(&d)
	}
	return d
}

func ev(pos int64) reconcile.Event {
	return reconcile.Event{ID: fmt.Sprintf("e%d", pos), Position: coord.IntPosition(pos), Payload: []byte(fmt.Sprintf("payload %d", pos))}
}

// pg is a page fetched with cursor, answering successor and events.
func pg(cursor, successor string, events ...reconcile.Event) Page {
	var s []byte
	if successor != "" {
		s = []byte(successor)
	}
	return Page{Cursor: []byte(cursor), Token: s, Response: reconcile.Response{Successor: s, Events: events}}
}

// ct sets a page's complete_through.
func ct(p Page, w int64) Page { p.Response.CompleteThrough = coord.Integer(w); return p }

func marker(p Page, m string) Page { p.Response.Marker = []byte(m); return p }

func hasMore(p Page, more bool) Page {
	p.Response.HasMore, p.Response.HasMoreKnown = more, true
	return p
}

func evs(from, to int64) []reconcile.Event {
	var out []reconcile.Event
	for i := from; i <= to; i++ {
		out = append(out, ev(i))
	}
	return out
}

// walkOf ends the way its last page says: no successor, its own cursor, or
// the limit.
func walkOf(pages ...Page) Walk {
	w := Walk{Pages: pages, End: EndLimit}
	if n := len(pages); n > 0 {
		last := pages[n-1]
		switch {
		case len(last.Response.Successor) == 0:
			w.End = EndNoSuccessor
		case bytes.Equal(last.Response.Successor, last.Cursor):
			w.End = EndHead
		}
	}
	return w
}

func obs(first Walk, retries ...Retry) Observation {
	return Observation{Partition: "p", Limit: 5, First: first, Retries: retries}
}

// withRestart is a walk of positions 1..3 then 4..6 and the restart r
// after its first page.
func withRestart(r Restart) Observation {
	o := obs(walkOf(pg("", "c1", evs(1, 3)...), pg("c1", "c2", evs(4, 6)...)))
	o.Restart = &r
	return o
}

func withIncarnation(create bool) func(*Declared) {
	return func(d *Declared) { d.Incarnation, d.IncarnationCreate = true, create }
}

// incarnations is a one-page walk with the incarnation read before and
// after it.
func incarnations(before, after IncarnationRead) Observation {
	o := obs(walkOf(pg("", "c1", ev(1))))
	o.Incarnation, o.IncarnationAfter = before, after
	return o
}

func finding(t *testing.T, fs []Finding, field string) Finding {
	t.Helper()
	for _, f := range fs {
		if f.Field == field {
			return f
		}
	}
	t.Fatalf("no finding for %s in %v", field, fs)
	return Finding{}
}

// A listing: keys as positions, each page's complete_through its own last
// key, as http_s3_listing.yaml maps it.
func listing() Observation {
	key := func(k string) reconcile.Event {
		return reconcile.Event{ID: k, Position: coord.StringPosition(k), Payload: []byte(k)}
	}
	p1 := pg("", "t1", key("a"), key("b"))
	p1.Response.CompleteThrough = coord.String("b")
	p2 := pg("t1", "", key("c"), key("d"))
	p2.Response.CompleteThrough = coord.String("d")
	return obs(walkOf(p1, p2))
}

func listingDeclared(f ...func(*Declared)) Declared {
	c := with(ordered, func(c *provider.Contract) {
		c.PositionKind, c.WatermarkCoversPositions, c.MissingSuccessor = provider.KindString, true, provider.MissingSuccessorEndsTraversal
		c.Finality = provider.FinalitySource
	})
	d := Declared{Contract: c, Coordinate: coord.KindString, CompleteThrough: true}
	for _, g := range f {
		g(&d)
	}
	return d
}

func TestFindings(t *testing.T) {
	withCT := func(d *Declared) { d.CompleteThrough = true }
	tests := []struct {
		name     string
		d        Declared
		o        Observation
		field    string
		want     Verdict
		evidence string
	}{
		{
			name: "tokens that rotate contradict tokens_may_rotate false",
			d:    declared(ordered), field: "tokens_may_rotate", want: Contradicted, evidence: "the same 2 events, successor",
			o: obs(walkOf(pg("", "c1", ev(1), ev(2))), Retry{Of: 0, Page: pg("", "c1-rotated", ev(1), ev(2))}),
		},
		{
			name: "tokens that rotate support tokens_may_rotate true",
			d:    declared(with(ordered, func(c *provider.Contract) { c.TokensMayRotate = true })), field: "tokens_may_rotate", want: Supported, evidence: "another successor",
			o: obs(walkOf(pg("", "c1", ev(1), ev(2))), Retry{Of: 0, Page: pg("", "c1-rotated", ev(1), ev(2))}),
		},
		{
			name: "the same successor twice supports tokens_may_rotate false",
			d:    declared(ordered), field: "tokens_may_rotate", want: Supported, evidence: "the same successor",
			o: obs(walkOf(pg("", "c1", ev(1), ev(2))), Retry{Of: 0, Page: pg("", "c1", ev(1), ev(2))}),
		},
		{
			name: "no cursor answered twice cannot tell tokens_may_rotate",
			d:    declared(ordered), field: "tokens_may_rotate", want: CannotTell,
			o: obs(walkOf(pg("", "c1", ev(1), ev(2)))),
		},
		{
			name: "a gap between pages contradicts dense positions",
			d:    declared(dense), field: "positions", want: Contradicted, evidence: "position 4 is missing",
			o: obs(walkOf(pg("", "c1", ev(1), ev(2), ev(3)), pg("c1", "c2", ev(5), ev(6)))),
		},
		{
			name: "a gap within a page contradicts dense positions",
			d:    declared(dense), field: "positions", want: Contradicted, evidence: "position 2 is missing",
			o: obs(walkOf(pg("", "c1", ev(1), ev(3)))),
		},
		{
			name: "a gap the page's own watermark covers is accepted under dense positions",
			d:    declared(with(dense, func(c *provider.Contract) { c.WatermarkCoversPositions = true; c.Finality = provider.FinalitySource }), withCT), field: "positions", want: Supported,
			o: obs(walkOf(ct(pg("", "c1", ev(1), ev(3)), 3))),
		},
		{
			name: "consecutive positions support dense",
			d:    declared(dense), field: "positions", want: Supported, evidence: "0 gaps",
			o: obs(walkOf(pg("", "c1", evs(1, 3)...), pg("c1", "c2", evs(4, 6)...))),
		},
		{
			name: "ordered positions with gaps are supported and their density reported",
			d:    declared(ordered), field: "positions", want: Supported, evidence: "1 gap",
			o: obs(walkOf(pg("", "c1", ev(1), ev(2)), pg("c1", "c2", ev(7)))),
		},
		{
			name: "a page starting below the previous one contradicts ordered positions",
			d:    declared(ordered), field: "positions", want: Contradicted, evidence: "position 2 after position 3",
			o: obs(walkOf(pg("", "c1", ev(1), ev(3)), pg("c1", "c2", ev(2)))),
		},
		{
			name: "positions out of order within a page contradict ordered positions",
			d:    declared(ordered), field: "positions", want: Contradicted, evidence: "does not follow position 2",
			o: obs(walkOf(pg("", "c1", ev(2), ev(1)))),
		},
		{
			name: "a position of another kind contradicts position_type",
			d:    declared(ordered), field: "position_type", want: Contradicted, evidence: "walk 1 page 1",
			o: obs(walkOf(pg("", "c1", reconcile.Event{ID: "k", Position: coord.StringPosition("k"), Payload: []byte("k")}))),
		},
		{
			name: "a page's own last position as complete_through contradicts finality source",
			d:    listingDeclared(), o: listing(), field: "finality", want: Contradicted, evidence: "a page's own last position certifies nothing",
		},
		{
			name: "a page's own last position as complete_through is reported, not judged, by complete_through",
			d:    listingDeclared(), o: listing(), field: "complete_through", want: Supported, evidence: "finality judges",
		},
		{
			name: "a page's own last position as complete_through contradicts watermark_covers_positions",
			d:    listingDeclared(), o: listing(), field: "watermark_covers_positions", want: Contradicted, evidence: "a page's own last position certifies nothing",
		},
		{
			name: "a self-computed watermark under finality append_only_writer cannot be told",
			d: listingDeclared(func(d *Declared) {
				d.Contract.Finality, d.Contract.WatermarkCoversPositions = provider.FinalityAppendOnlyWriter, false
			}), o: listing(), field: "finality", want: CannotTell, evidence: "rests on this assertion alone",
		},
		{
			name: "finality lag cannot be told and names its lag",
			d:    declared(with(ordered, func(c *provider.Contract) { c.Finality, c.FinalityLag = provider.FinalityLag, 5 }), withCT),
			o:    obs(walkOf(ct(pg("", "c1", evs(1, 3)...), 9))), field: "finality", want: CannotTell, evidence: "complete_through less lag 5",
		},
		{
			name: "finality none claims nothing, even for a page's own last position",
			d: listingDeclared(func(d *Declared) {
				d.Contract.Finality, d.Contract.WatermarkCoversPositions = provider.FinalityNone, false
			}), o: listing(), field: "finality", want: Supported, evidence: "never becomes the partition's watermark",
		},
		{
			name: "finality none without complete_through claims nothing",
			d:    declared(ordered), o: obs(walkOf(pg("", "c1", evs(1, 3)...))), field: "finality", want: Supported, evidence: "not mapped",
		},
		{
			name: "a complete_through apart from the page's last position supports finality source",
			d:    declared(with(ordered, func(c *provider.Contract) { c.Finality = provider.FinalitySource }), withCT), field: "finality", want: Supported, evidence: "not its last position 3",
			o: obs(walkOf(ct(pg("", "c1", evs(1, 3)...), 9))),
		},
		{
			name: "finality source with no complete_through seen cannot tell",
			d:    declared(with(ordered, func(c *provider.Contract) { c.Finality = provider.FinalitySource }), withCT), field: "finality", want: CannotTell, evidence: "no page carried",
			o: obs(walkOf(pg("", "c1", evs(1, 3)...))),
		},
		{
			name: "a complete_through on an empty page is the source's own",
			d:    declared(with(ordered, func(c *provider.Contract) { c.Finality = provider.FinalitySource }), withCT), field: "finality", want: Supported, evidence: "walk 1 page 2 had no events and carried complete_through 8",
			o: obs(walkOf(ct(pg("", "3", evs(1, 3)...), 3), ct(pg("3", "3"), 8))),
		},
		{
			name: "a complete_through apart from the page's last position is the source's own",
			d:    declared(ordered, withCT), field: "complete_through", want: Supported, evidence: "not its last position 3",
			o: obs(walkOf(ct(pg("", "c1", evs(1, 3)...), 9))),
		},
		{
			name: "a complete_through that goes back contradicts it",
			d:    declared(with(ordered, func(c *provider.Contract) { c.Finality = provider.FinalitySource }), withCT), field: "complete_through", want: Contradicted, evidence: "below 9",
			o: obs(walkOf(ct(pg("", "c1", evs(1, 3)...), 9), ct(pg("c1", "c2", evs(4, 5)...), 7))),
		},
		{
			name: "an unmapped complete_through claims nothing",
			d:    declared(ordered), field: "complete_through", want: Supported, evidence: "not mapped",
			o: obs(walkOf(pg("", "c1", evs(1, 3)...))),
		},
		{
			name: "a later event at or below a certified watermark contradicts watermark_covers_positions",
			d:    declared(with(ordered, func(c *provider.Contract) { c.WatermarkCoversPositions = true; c.Finality = provider.FinalitySource }), withCT), field: "watermark_covers_positions", want: Contradicted, evidence: "position 4, at or below complete_through 6",
			o: obs(walkOf(ct(pg("", "c1", evs(1, 3)...), 6), pg("c1", "c2", ev(4), ev(7)))),
		},
		{
			name: "an event below a watermark in the second walk contradicts watermark_covers_positions",
			d:    declared(with(ordered, func(c *provider.Contract) { c.WatermarkCoversPositions = true; c.Finality = provider.FinalitySource }), withCT), field: "watermark_covers_positions", want: Contradicted, evidence: "walk 2 page 1 has an event at position 2",
			o: func() Observation {
				o := obs(walkOf(ct(pg("", "c1", ev(1), ev(3)), 9)))
				o.Second = walkOf(ct(pg("", "c1", evs(1, 3)...), 9))
				return o
			}(),
		},
		{
			name: "an empty page followed by events contradicts end_of_data",
			d:    declared(with(ordered, func(c *provider.Contract) { c.EmptyPage = provider.EmptyEndOfData })), field: "empty_page", want: Contradicted, evidence: "not the end of the data",
			o: obs(walkOf(pg("", "c1", ev(1)), pg("c1", "c2"), pg("c2", "c3", ev(2)))),
		},
		{
			name: "an empty page with has_more contradicts end_of_data",
			d:    declared(with(ordered, func(c *provider.Contract) { c.EmptyPage = provider.EmptyEndOfData })), field: "empty_page", want: Contradicted, evidence: "has_more is true",
			o: obs(walkOf(hasMore(pg("", "c1"), true))),
		},
		{
			name: "an empty last page supports end_of_data",
			d:    declared(with(ordered, func(c *provider.Contract) { c.EmptyPage = provider.EmptyEndOfData })), field: "empty_page", want: Supported,
			o: obs(walkOf(pg("", "c1", ev(1)), pg("c1", ""))),
		},
		{
			name: "an empty page with a watermark supports final_through_watermark",
			d:    declared(with(ordered, func(c *provider.Contract) { c.EmptyPage = provider.EmptyFinalThroughWatermark }), withCT), field: "empty_page", want: Supported, evidence: "carried complete_through 1",
			o: obs(walkOf(ct(pg("", "1", ev(1)), 1), ct(pg("1", "1"), 1))),
		},
		{
			name: "an empty page without a watermark cannot tell final_through_watermark",
			d:    declared(with(ordered, func(c *provider.Contract) { c.EmptyPage = provider.EmptyFinalThroughWatermark }), withCT), field: "empty_page", want: CannotTell,
			o: obs(walkOf(pg("", "1", ev(1)), pg("1", "1"))),
		},
		{
			name: "an empty page under follow_successor claims nothing",
			d:    declared(with(ordered, func(c *provider.Contract) { c.EmptyPage = provider.EmptyFollowsSuccessor })), field: "empty_page", want: Supported, evidence: "follows its successor",
			o: obs(walkOf(pg("", "c1", ev(1)), pg("c1", "c2"), pg("c2", "c3", ev(2)))),
		},
		{
			name: "no empty page cannot tell empty_page",
			d:    declared(ordered), field: "empty_page", want: CannotTell, evidence: "no answer was empty",
			o: obs(walkOf(pg("", "c1", ev(1)))),
		},
		{
			name: "a page without successor but with has_more contradicts end_of_traversal",
			d:    declared(with(ordered, func(c *provider.Contract) { c.MissingSuccessor = provider.MissingSuccessorEndsTraversal })), field: "missing_successor", want: Contradicted, evidence: "has_more is true",
			o: obs(walkOf(hasMore(pg("", "", ev(1)), true))),
		},
		{
			name: "a cursor answered without and then with a successor contradicts end_of_traversal",
			d:    declared(with(ordered, func(c *provider.Contract) { c.MissingSuccessor = provider.MissingSuccessorEndsTraversal })), field: "missing_successor", want: Contradicted, evidence: "had not ended",
			o: obs(walkOf(pg("", "", ev(1))), Retry{Of: 0, Page: pg("", "c2", ev(1), ev(2))}),
		},
		{
			name: "has_more false before a page of events contradicts has_more",
			d:    declared(ordered, func(d *Declared) { d.HasMore = true }), field: "has_more", want: Contradicted, evidence: "has_more is false",
			o: obs(walkOf(hasMore(pg("", "c1", ev(1)), false), hasMore(pg("c1", "", ev(2)), false))),
		},
		{
			name: "has_more true without a successor contradicts has_more",
			d:    declared(ordered, func(d *Declared) { d.HasMore = true }), field: "has_more", want: Contradicted, evidence: "no successor",
			o: obs(walkOf(hasMore(pg("", "", ev(1)), true))),
		},
		{
			name: "a page repeating the boundary contradicts exclusive_boundary",
			d:    declared(with(ordered, func(c *provider.Contract) { c.ExclusiveBoundary = true })), field: "exclusive_boundary", want: Contradicted, evidence: "repeats position 2",
			o: obs(walkOf(pg("", "c1", ev(1), ev(2)), pg("c1", "c2", ev(2), ev(3)))),
		},
		{
			name: "a page repeating the boundary is inclusive, as declared",
			d:    declared(ordered), field: "exclusive_boundary", want: Supported, evidence: "inclusive boundary",
			o: obs(walkOf(pg("", "c1", ev(1), ev(2)), pg("c1", "c2", ev(2), ev(3)))),
		},
		{
			name: "pages starting after the boundary support exclusive_boundary",
			d:    declared(with(ordered, func(c *provider.Contract) { c.ExclusiveBoundary = true })), field: "exclusive_boundary", want: Supported,
			o: obs(walkOf(pg("", "c1", ev(1), ev(2)), pg("c1", "c2", ev(3)))),
		},
		{
			name: "the same marker with other events contradicts snapshot_marker",
			d:    declared(with(ordered, func(c *provider.Contract) { c.SnapshotMarker = true })), field: "snapshot_marker", want: Contradicted, evidence: "not stable",
			o: obs(walkOf(marker(pg("", "c1", ev(1), ev(3)), "r7")), Retry{Of: 0, Page: marker(pg("", "c1", ev(1), ev(2), ev(3)), "r7")}),
		},
		{
			name: "the same marker with the same events supports snapshot_marker",
			d:    declared(with(ordered, func(c *provider.Contract) { c.SnapshotMarker = true })), field: "snapshot_marker", want: Supported,
			o: obs(walkOf(marker(pg("", "c1", ev(1)), "r7")), Retry{Of: 0, Page: marker(pg("", "c1", ev(1)), "r7")}),
		},
		{
			name: "no marker cannot tell snapshot_marker",
			d:    declared(with(ordered, func(c *provider.Contract) { c.SnapshotMarker = true })), field: "snapshot_marker", want: CannotTell, evidence: "no page carried a marker",
			o: obs(walkOf(pg("", "c1", ev(1)))),
		},
		{
			name: "successors growing by the page size contradict pagination token",
			d:    declared(ordered), field: "pagination", want: Contradicted, evidence: "offsets",
			o: obs(walkOf(pg("", "2", ev(10), ev(20)), pg("2", "4", ev(30), ev(40)), pg("4", "6", ev(50), ev(60)))),
		},
		{
			name: "URL successors with a growing page parameter contradict pagination token",
			d:    declared(ordered), field: "pagination", want: Contradicted, evidence: "page numbers",
			o: obs(walkOf(pg("", "https://api/x?page=2", ev(10), ev(20)), pg("https://api/x?page=2", "https://api/x?page=3", ev(30), ev(40)), pg("https://api/x?page=3", "https://api/x?page=4", ev(50), ev(60)))),
		},
		{
			name: "offset successors contradict pagination keyset",
			d:    declared(with(ordered, func(c *provider.Contract) { c.Pagination = provider.PaginationKeyset })), field: "pagination", want: Contradicted, evidence: "not keyset successors",
			o: obs(walkOf(pg("", "2", ev(10), ev(20)), pg("2", "4", ev(30), ev(40)), pg("4", "6", ev(50), ev(60)))),
		},
		{
			name: "offset successors declared token over dense positions still contradict token",
			d:    declared(dense), field: "pagination", want: Contradicted, evidence: "not a token the source issues",
			o: obs(walkOf(pg("", "2", ev(10), ev(11)), pg("2", "4", ev(12), ev(13)), pg("4", "6", ev(14), ev(15)))),
		},
		{
			name: "offset pagination over dense positions is supported",
			d:    declared(with(dense, func(c *provider.Contract) { c.Pagination = provider.PaginationOffset })), field: "pagination", want: Supported, evidence: "offsets (each grew",
			o: obs(walkOf(pg("", "2", ev(10), ev(11)), pg("2", "4", ev(12), ev(13)), pg("4", "6", ev(14), ev(15)))),
		},
		{
			name: "offset_unproven claims no completeness",
			d:    declared(with(ordered, func(c *provider.Contract) { c.Pagination, c.OffsetUnproven = provider.PaginationOffset, true })), field: "pagination", want: Supported, evidence: "claims no completeness",
			o: obs(walkOf(pg("", "2", ev(10), ev(20)), pg("2", "4", ev(30), ev(40)))),
		},
		{
			name: "pages that begin with the previous page's last event pass the overlap check",
			d:    declared(overlap), field: "pagination", want: Supported, evidence: "passed on 2 pages",
			o: obs(walkOf(pg("", "2", ev(10), ev(20), ev(30)), pg("2", "4", ev(30), ev(40), ev(50)), pg("4", "", ev(50), ev(60)))),
		},
		{
			name: "a page that does not begin with the previous page's last event fails the overlap check",
			d:    declared(overlap), field: "pagination", want: Contradicted, evidence: "the page shifted",
			o: obs(walkOf(pg("", "2", ev(10), ev(20), ev(30)), pg("2", "4", ev(40), ev(50), ev(60)))),
		},
		{
			name: "a shift in one walk only is the source changing, caught by the overlap check",
			d:    declared(overlap), field: "pagination", want: Supported, evidence: "caught a shift once",
			o: func() Observation {
				o := obs(walkOf(pg("", "2", ev(10), ev(20), ev(30)), pg("2", "4", ev(40), ev(50), ev(60))))
				o.Second = walkOf(pg("", "2", ev(10), ev(30), ev(40)), pg("2", "4", ev(40), ev(50), ev(60)))
				return o
			}(),
		},
		{
			name: "the overlap check with one page cannot tell",
			d:    declared(overlap), field: "pagination", want: CannotTell, evidence: "nothing to check",
			o: obs(walkOf(pg("", "", ev(10), ev(20)))),
		},
		{
			name: "the overlap event is not a repeat under exclusive_boundary",
			d:    declared(with(overlap, func(c *provider.Contract) { c.ExclusiveBoundary = true })), field: "exclusive_boundary", want: Supported, evidence: "none repeated",
			o: obs(walkOf(pg("", "2", ev(10), ev(20), ev(30)), pg("2", "4", ev(30), ev(40), ev(50)))),
		},
		{
			name: "the overlap event is not out of order under ordered positions",
			d:    declared(overlap), field: "positions", want: Supported, evidence: "5 positions strictly increasing",
			o: obs(walkOf(pg("", "2", ev(10), ev(20), ev(30)), pg("2", "4", ev(30), ev(40), ev(50)))),
		},
		{
			name: "successors naming the page's last position are keyset",
			d:    declared(ordered), field: "pagination", want: Supported, evidence: "keyset",
			o: obs(walkOf(pg("", "2", ev(1), ev(2)), pg("2", "4", ev(3), ev(4)))),
		},
		{
			name: "opaque successors support pagination token",
			d:    declared(ordered), field: "pagination", want: Supported, evidence: "opaque",
			o: obs(walkOf(pg("", "tokA", ev(1), ev(2)), pg("tokA", "tokB", ev(3), ev(4)))),
		},
		{
			name: "a retry omitting an event is divergence the contract cannot explain",
			d:    declared(ordered), field: "retries", want: Contradicted, evidence: "omits it",
			o: obs(walkOf(pg("", "c1", ev(1), ev(2), ev(3)), pg("c1", "c2", ev(4))), Retry{Of: 1, Page: pg("c1", "c2b", ev(5))}),
		},
		{
			name: "an empty head page fetched again is no answer, not divergence",
			d:    declared(ordered), field: "retries", want: Supported, evidence: "empty without evidence (polled again) ×1",
			o: obs(walkOf(pg("", "c1", ev(1)), pg("c1", "c1")), Retry{Of: 1, Page: pg("c1", "c1")}),
		},
		{
			name: "a retry that moves an event is an answer the input cannot reconcile",
			d:    declared(ordered), field: "retries", want: Contradicted, evidence: "cannot reconcile",
			o: obs(walkOf(pg("", "c1", ev(1), ev(2))), Retry{Of: 0, Page: pg("", "c1", ev(1), reconcile.Event{ID: "e2", Position: coord.IntPosition(3), Payload: []byte("payload 2")})}),
		},
		{
			name: "a malformed retry is judged by positions, not retries",
			d:    declared(ordered), field: "positions", want: Contradicted, evidence: "walk 1 page 1 fetched again",
			o: obs(walkOf(pg("", "c1", ev(1), ev(2))), Retry{Of: 0, Page: pg("", "c1", ev(2), ev(1))}),
		},
		{
			name: "exact replays are supported retries",
			d:    declared(ordered), field: "retries", want: Supported, evidence: "exact_replay ×1",
			o: obs(walkOf(pg("", "c1", ev(1))), Retry{Of: 0, Page: pg("", "c1", ev(1))}),
		},
		{
			name: "a rotation under tokens_may_rotate false is judged by tokens_may_rotate, not retries",
			d:    declared(ordered), field: "retries", want: Supported,
			o: obs(walkOf(pg("", "c1", ev(1))), Retry{Of: 0, Page: pg("", "c2", ev(1))}),
		},
		{
			name: "a restart cursor that skips an event the walk showed contradicts restart_cursor",
			d:    declared(ordered), field: "restart_cursor", want: Contradicted, evidence: "without position 4 that walk 1 page 2 showed",
			o: withRestart(Restart{Applied: coord.IntPosition(3), Cursor: []byte("r"), Page: pg("r", "x", ev(5), ev(6))}),
		},
		{
			name: "a restart cursor that resumes right after the boundary supports restart_cursor",
			d:    declared(ordered), field: "restart_cursor", want: Supported, evidence: "answered from position 4",
			o: withRestart(Restart{Applied: coord.IntPosition(3), Cursor: []byte("r"), Page: pg("r", "x", ev(4), ev(5))}),
		},
		{
			name: "a restart cursor that replays from before the boundary supports restart_cursor",
			d:    declared(ordered), field: "restart_cursor", want: Supported, evidence: "none of the 3 events",
			o: withRestart(Restart{Applied: coord.IntPosition(3), Cursor: []byte("r"), Page: pg("r", "x", evs(2, 6)...)}),
		},
		{
			name: "a restart from the partition's start skips nothing",
			d:    declared(ordered), field: "restart_cursor", want: Supported, evidence: "partition's start",
			o: withRestart(Restart{Applied: coord.IntPosition(3)}),
		},
		{
			name: "a restart cursor the source refuses contradicts restart_cursor",
			d:    declared(ordered), field: "restart_cursor", want: Contradicted, evidence: "was refused",
			o: withRestart(Restart{Applied: coord.IntPosition(3), Cursor: []byte("r"), Err: &provider.ExpiredError{Partition: "p", Reason: "HTTP 400"}}),
		},
		{
			name: "recovery park uses no restart cursor",
			d:    declared(with(ordered, func(c *provider.Contract) { c.Recovery = provider.RecoveryPark })), field: "restart_cursor", want: Supported, evidence: "recovery park",
			o: obs(walkOf(pg("", "c1", ev(1)))),
		},
		{
			name: "a validate request refusing a fresh cursor contradicts it",
			d:    declared(ordered, func(d *Declared) { d.Validate = true }), field: "validate", want: Contradicted, evidence: "invalid",
			o: func() Observation {
				o := obs(walkOf(pg("", "c1", ev(1))))
				o.Validation = Validation{Ran: true, Cursor: []byte("c1"), Err: &provider.ExpiredError{Partition: "p", Reason: "validate.valid is false"}}
				return o
			}(),
		},
		{
			name: "a validate request accepting a fresh cursor is supported",
			d:    declared(ordered, func(d *Declared) { d.Validate = true }), field: "validate", want: Supported, evidence: "cannot be told without recreating one",
			o: func() Observation {
				o := obs(walkOf(pg("", "c1", ev(1))))
				o.Validation = Validation{Ran: true, Cursor: []byte("c1")}
				return o
			}(),
		},
		{
			name: "no validate request cannot tell",
			d:    declared(ordered), field: "validate", want: CannotTell, evidence: "no validate request",
			o: obs(walkOf(pg("", "c1", ev(1)))),
		},
		{
			name: "a malformed page contradicts the mappings",
			d:    declared(ordered), field: "response", want: Contradicted, evidence: "no events array",
			o: obs(Walk{End: EndError, Err: &provider.MalformedError{Partition: "p", Reason: "no events array"}}),
		},
		{
			name: "an incarnation read twice alike is supported, as its hash",
			d:    declared(ordered, withIncarnation(false)), field: "incarnation", want: Supported, evidence: "incarnation sha256:",
			o: incarnations(IncarnationRead{Ran: true, Found: true, Hash: reconcile.IncarnationHash("uuid-1")}, IncarnationRead{Ran: true, Found: true, Hash: reconcile.IncarnationHash("uuid-1")}),
		},
		{
			name: "an incarnation that changes during the probe contradicts it",
			d:    declared(ordered, withIncarnation(false)), field: "incarnation", want: Contradicted, evidence: "not an incarnation",
			o: incarnations(IncarnationRead{Ran: true, Found: true, Hash: reconcile.IncarnationHash("t1")}, IncarnationRead{Ran: true, Found: true, Hash: reconcile.IncarnationHash("t2")}),
		},
		{
			name: "no marker yet with a create request cannot tell, and the probe creates nothing",
			d:    declared(ordered, withIncarnation(true)), field: "incarnation", want: CannotTell, evidence: "no marker yet; the input creates it at start",
			o: incarnations(IncarnationRead{Ran: true}, IncarnationRead{Ran: true}),
		},
		{
			name: "no incarnation and no create request contradicts it",
			d:    declared(ordered, withIncarnation(false)), field: "incarnation", want: Contradicted, evidence: "would never read",
			o: incarnations(IncarnationRead{Ran: true}, IncarnationRead{Ran: true}),
		},
		{
			name: "a malformed incarnation answer contradicts it",
			d:    declared(ordered, withIncarnation(false)), field: "incarnation", want: Contradicted, evidence: "cannot be used",
			o: incarnations(IncarnationRead{Ran: true, Err: &provider.MalformedError{Partition: "p", Reason: "incarnation.value returned an object"}}, IncarnationRead{}),
		},
		{
			name: "no incarnation request cannot tell",
			d:    declared(ordered), field: "incarnation", want: CannotTell, evidence: "no incarnation request",
			o: obs(walkOf(pg("", "c1", ev(1)))),
		},
		{
			name: "a transport failure cannot tell the mappings",
			d:    declared(ordered), field: "response", want: CannotTell, evidence: "connection refused",
			o: obs(Walk{End: EndError, Err: errors.New("connection refused")}),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := finding(t, Evaluate(tc.d, tc.o), tc.field)
			assert.Equal(t, tc.want, f.Verdict, "evidence: %s", f.Evidence)
			assert.Contains(t, f.Evidence, tc.evidence)
		})
	}
}

// TestCursorsOnlyAsHashes: no finding quotes a cursor or successor; they
// appear as reconcile.CursorHash.
func TestCursorsOnlyAsHashes(t *testing.T) {
	secret := "SECRET-token-"
	o := obs(walkOf(pg("", secret+"1", ev(1), ev(2))), Retry{Of: 0, Page: pg("", secret+"2", ev(1), ev(2))})
	o.Validation = Validation{Ran: true, Cursor: []byte(secret + "1")}
	fs := Evaluate(declared(ordered, func(d *Declared) { d.Validate = true }), o)
	var b strings.Builder
	require.NoError(t, Write(&b, o, fs))
	assert.NotContains(t, b.String(), secret)
	assert.Contains(t, b.String(), reconcile.CursorHash([]byte(secret+"1")))
}

// TestEvaluateRunsEveryApplicableCheckOnce: one finding per check whose
// field the config declares, in table order, each field once.
func TestEvaluateRunsEveryApplicableCheckOnce(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range Checks {
		require.False(t, seen[c.Field], "two checks for %s", c.Field)
		seen[c.Field] = true
	}
	fs := Evaluate(declared(ordered), obs(walkOf(pg("", "c1", ev(1)))))
	var fields []string
	for _, f := range fs {
		fields = append(fields, f.Field)
		require.NotZero(t, f.Verdict, f.Field)
	}
	assert.NotContains(t, fields, "has_more")
	assert.NotContains(t, fields, "coordinate")
	assert.NotContains(t, fields, "first_position", "only dense positions have an origin")
	all := Evaluate(declared(dense, func(d *Declared) { d.HasMore, d.CompleteThrough = true, true }), obs(walkOf(pg("", "c1", ev(1)))))
	assert.Len(t, all, len(Checks))
	assert.False(t, AnyContradicted(fs))
}

// TestDocsDescribeEveryCheck: docs/probe.md has a row of its checks table
// for every check of Checks.
func TestDocsDescribeEveryCheck(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "probe.md"))
	require.NoError(t, err)
	for _, c := range Checks {
		assert.Contains(t, string(b), "\n| `"+c.Field+"`", "docs/probe.md has no row for the %s check", c.Field)
	}
}

// TestFirstPositionFindings: under dense positions the first event of each
// walk (a traversal from the start) is judged against the declared origin
// (contract first_position).
func TestFirstPositionFindings(t *testing.T) {
	from := func(origin int64, f ...func(*provider.Contract)) provider.Contract {
		return with(dense, func(c *provider.Contract) {
			c.FirstPosition = provider.IntPosition(origin)
			for _, g := range f {
				g(c)
			}
		})
	}
	covering := func(c *provider.Contract) { c.WatermarkCoversPositions, c.Finality = true, provider.FinalitySource }
	parking := func(c *provider.Contract) { c.Recovery = provider.RecoveryPark }
	for _, tc := range []struct {
		name     string
		d        Declared
		o        Observation
		want     Verdict
		evidence []string
	}{
		{name: "both walks begin at the origin", d: declared(from(1)), want: Supported,
			o:        Observation{Partition: "p", Limit: 5, First: walkOf(pg("", "c1", evs(1, 3)...), pg("c1", "c2", evs(4, 5)...)), Second: walkOf(pg("", "c1", evs(1, 3)...))},
			evidence: []string{"walk 1 page 1 begins at position 1", "walk 2 page 1 begins at position 1"}},
		{name: "an empty first page is passed over", d: declared(from(1)), want: Supported,
			o: obs(walkOf(pg("", "c1"), pg("c1", "c2", evs(1, 2)...))), evidence: []string{"walk 1 page 2 begins at position 1"}},
		{name: "a first page above the origin contradicts it", d: declared(from(1)), want: Contradicted,
			o:        obs(walkOf(pg("", "c1", evs(295, 297)...))),
			evidence: []string{"walk 1 page 1, the first page of a traversal from the start, begins at position 295, not at the declared first position 1", "restart it from restart_cursor (restart_from_boundary)"}},
		{name: "under park it says the partition parks", d: declared(from(1, parking)), want: Contradicted,
			o: obs(walkOf(pg("", "c1", evs(2, 3)...))), evidence: []string{"begins at position 2, not at the declared first position 1", "park the partition"}},
		{name: "a first page below the origin contradicts it", d: declared(from(1)), want: Contradicted,
			o: obs(walkOf(pg("", "c1", evs(0, 2)...))), evidence: []string{"begins at position 0, not at the declared first position 1"}},
		{name: "a second walk above the origin contradicts it", d: declared(from(1)), want: Contradicted,
			o:        Observation{Partition: "p", Limit: 5, First: walkOf(pg("", "c1", evs(1, 3)...)), Second: walkOf(pg("", "c1", evs(4, 6)...))},
			evidence: []string{"walk 2 page 1"}},
		{name: "a gap the page's own watermark covers is accepted", d: declared(from(1, covering), func(d *Declared) { d.CompleteThrough = true }), want: Supported,
			o: obs(walkOf(ct(pg("", "c1", evs(5, 6)...), 6))), evidence: []string{"its complete_through covering the positions before it"}},
		{name: "no origin declared cannot tell and says what is unchecked", d: declared(dense), want: CannotTell,
			o: obs(walkOf(pg("", "c1", evs(295, 297)...))), evidence: []string{"no first_position is declared", "begins at position 295"}},
		{name: "no event cannot tell", d: declared(from(1)), want: CannotTell,
			o: obs(walkOf(pg("", "c1"))), evidence: []string{"no walk answered an event"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := finding(t, Evaluate(tc.d, tc.o), "first_position")
			assert.Equal(t, tc.want, f.Verdict, f.Evidence)
			for _, e := range tc.evidence {
				assert.Contains(t, f.Evidence, e)
			}
		})
	}
	assert.Equal(t, "1", finding(t, Evaluate(declared(from(1)), obs(walkOf(pg("", "c1", ev(1))))), "first_position").Declared)
	assert.Equal(t, "not declared", finding(t, Evaluate(declared(dense), obs(walkOf(pg("", "c1", ev(1))))), "first_position").Declared)
}
