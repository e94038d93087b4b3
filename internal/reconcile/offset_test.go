package reconcile

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/provider"
)

var (
	// overlap: offset pages over sparse ids, each requested one event early.
	overlap = with(sparse, func(c *Contract) { c.Pagination, c.OffsetOverlap = provider.PaginationOffset, true })
	// unproven: offset pages over sparse ids, nothing proving continuity.
	unproven = with(sparse, func(c *Contract) { c.Pagination, c.OffsetUnproven = provider.PaginationOffset, true })
	// offsetDense: offset pages over dense positions.
	offsetDense = with(dense, func(c *Contract) { c.Pagination = provider.PaginationOffset })
)

func TestCheckContinuity(t *testing.T) {
	page := func(c Contract, events ...Event) Witness { return build(t, c, "O2", 2, "a2", resp("O4", events...)) }
	last := EventOf(ev("r-30", 30))
	for _, tc := range []struct {
		name      string
		in        ContinuityInput
		continues bool
		overlap   int
		unproven  bool
		reason    string
	}{
		{"token pagination continues", ContinuityInput{Contract: sparse, Witness: page(sparse, ev("r-50", 50))},
			true, 0, false, "token pagination"},
		{"keyset pagination continues", ContinuityInput{Contract: with(sparse, func(c *Contract) { c.Pagination = provider.PaginationKeyset }), Witness: page(sparse, ev("r-50", 50))},
			true, 0, false, "keyset pagination"},
		{"overlap: a page that begins with the previous last event continues it",
			ContinuityInput{Contract: overlap, Previous: last, HasPrevious: true, Witness: page(overlap, ev("r-30", 30), ev("r-40", 40))},
			true, 1, false, "begins with the previous page's last event"},
		{"overlap: a delete on an earlier page shifts the page (first event is another)",
			ContinuityInput{Contract: overlap, Previous: last, HasPrevious: true, Witness: page(overlap, ev("r-40", 40), ev("r-50", 50))},
			false, 0, false, "the page shifted: it begins with id#"},
		{"overlap: the previous last event changed its payload",
			ContinuityInput{Contract: overlap, Previous: last, HasPrevious: true, Witness: page(overlap, evp("r-30", 30, "edited"), ev("r-40", 40))},
			false, 0, false, "the page shifted"},
		{"overlap: only the applied id is known, payload not compared",
			ContinuityInput{Contract: overlap, Previous: EventWitness{IDHash: HashID("r-30"), Position: last.Position}, HasPrevious: true, PreviousIDOnly: true, Witness: page(overlap, evp("r-30", 30, "edited"), ev("r-40", 40))},
			true, 1, false, "continues right after it"},
		{"overlap: an empty page where the overlap event must be",
			ContinuityInput{Contract: overlap, Previous: last, HasPrevious: true, Witness: page(overlap)},
			false, 0, false, "the page is empty"},
		{"overlap: the page before is unknown",
			ContinuityInput{Contract: overlap, Witness: page(overlap, ev("r-30", 30))},
			false, 0, false, "is unknown"},
		{"overlap: a boundary cursor begins a traversal",
			ContinuityInput{Contract: overlap, Boundary: true, Witness: page(overlap, ev("r-10", 10))},
			true, 0, false, "first page of a traversal"},
		{"dense positions leave it to coverage rule (b)",
			ContinuityInput{Contract: offsetDense, Previous: last, HasPrevious: true, Witness: page(offsetDense, ev("r-32", 32))},
			true, 0, false, "coverage rule (b)"},
		{"unproven continues and says it cannot prove completeness",
			ContinuityInput{Contract: unproven, Previous: last, HasPrevious: true, Witness: page(unproven, ev("r-50", 50))},
			true, 0, true, "claims no completeness"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := CheckContinuity(tc.in)
			assert.Equal(t, tc.continues, got.Continues, got.Reason)
			assert.Equal(t, tc.overlap, got.Overlap)
			assert.Equal(t, tc.unproven, got.Unproven)
			assert.Contains(t, got.Reason, tc.reason)
		})
	}
}

// Under offset_unproven no watermark is recorded or promoted: the
// partition claims no completeness even where a page carries one.
func TestOffsetUnprovenRecordsNoWatermark(t *testing.T) {
	r := resp("P2", ev("r-10", 10), ev("r-20", 20))
	r.CompleteThrough = coordInt(20)
	w := build(t, unproven, "", 1, "a1", r)
	assert.True(t, w.CompleteThrough.IsZero(), "no watermark in the witness")
	w.CompleteThrough = coordInt(20) // a witness not made by Build
	comp := CanPromote(unproven, acked(w, 2))
	assert.True(t, comp.Complete)
	assert.True(t, comp.Watermark.IsZero(), "no watermark promoted")
}

func coordInt(v int64) coord.Watermark { return coord.Integer(v) }
