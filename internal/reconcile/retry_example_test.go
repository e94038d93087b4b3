package reconcile

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/provider"
)

// The worked examples of docs/design.md#retry-example and
// docs/design.md#empty-page-example, executed. Positions are dense in the
// first two examples: 501, 502, 503 are consecutive.

// docs/design.md#retry-example, first part. Checkpoint generation 9 holds
// C41; the first response has 501 and 502 with successor N7; 501 becomes
// durable, then the worker crashes. The retry returns 501, 502 and 503 with
// N8: 501 matches its receipt, 502 and 503 are handled, N8 is promoted from
// C41 at generation 9, and N7 is never promoted with evidence from the
// second response.
func TestRetryExample_C41_RetryAddsPosition503_PromotesN8NotN7(t *testing.T) {
	cp := checkpoint("C41", 9, 500, true)

	first := build(t, dense, "C41", 9, "a1", resp("N7", ev("e501", 501), ev("e502", 502)))
	v1 := classify(t, dense, cp, first)
	require.Equal(t, FirstResponse, v1.Class)
	first = acked(first, 1) // 501 durable, then the crash

	assert.Equal(t, Hold, decide(dense, cp, first, v1, first).Action, "N7 waits for 502")

	retry := build(t, dense, "C41", 9, "a2", resp("N8", ev("e501", 501), ev("e502", 502), ev("e503", 503)))
	v2 := classify(t, dense, cp, retry, first)
	require.Equal(t, ShiftedPage, v2.Class, v2.Reason)
	assert.Equal(t, "a2", v2.Attempt)
	assert.Equal(t, 1, v2.Satisfied, "501 matches its durable receipt")
	assert.Equal(t, []string{"a1"}, v2.Against)

	retry = acked(retry, v2.Satisfied)
	assert.Equal(t, Hold, decide(dense, cp, retry, v2, first, retry).Action, "502 and 503 not handled yet")
	retry = acked(retry, 3) // 502 and 503 durably handled

	d := decide(dense, cp, retry, v2, first, retry)
	require.Equal(t, Promote, d.Action, d.Reason)
	assert.Equal(t, Promotion{
		Scope: scope, Partition: part,
		FromCursor: []byte("C41"), FromGeneration: 9,
		To: []byte("N8"), WitnessID: "a2",
		Applied: coord.IntPosition(503), HasApplied: true,
	}, d.Promotion)

	// N7 is not promoted with evidence from the second response: the
	// second verdict binds a2, and a1's own receipts stop at 501.
	mixed := decide(dense, cp, first, v2, first, retry)
	assert.Equal(t, Refuse, mixed.Action)
	assert.Contains(t, mixed.Reason, "exact response that issued it")
	assert.Equal(t, Hold, decide(dense, cp, first, v1, first, retry).Action)

	// The compare-and-swap wins; the losing witness is abandoned and can
	// never publish N7, even if its receipts were completed later.
	winner := Checkpoint{Scope: scope, Partition: part, Cursor: []byte("N8"), Generation: 10, Applied: coord.IntPosition(503), HasApplied: true, PromotedWitness: "a2"}
	assert.Equal(t, []string{"a1"}, Abandon(winner, []Witness{first, retry}))
	assert.False(t, CanPublish(winner, first))
	late := decide(dense, winner, acked(first, 2), v1, first, retry)
	assert.Equal(t, Refuse, late.Action)
	assert.Contains(t, late.Reason, "losing retry never publishes")
}

// docs/design.md#retry-example, second part: when the retry omits 502 and
// the provider offers no snapshot or coverage rule proving that 502 is no
// longer required, neither successor advances.
func TestRetryExample_RetryOmits502_StopsAdvancing(t *testing.T) {
	for _, tc := range []struct {
		name     string
		contract Contract
		retry    Response
		reason   string
	}{
		{"dense positions: 503 follows 501", dense, resp("N8", ev("e501", 501), ev("e503", 503)), "502"},
		{"sparse positions, no coverage marker", sparse, resp("N8", ev("e501", 501), ev("e503", 503)), "502"},
		{"another id at 502", dense, resp("N8", ev("e501", 501), ev("x502", 502), ev("e503", 503)), "position 502"},
		{"marker the contract does not declare", sparse, marked(resp("N8", ev("e501", 501), ev("e503", 503)), "rv-2"), "502"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cp := checkpoint("C41", 9, 500, true)
			first := build(t, tc.contract, "C41", 9, "a1", resp("N7", ev("e501", 501), ev("e502", 502)))
			v1 := classify(t, tc.contract, cp, first)
			first = acked(first, 1)

			retry := build(t, tc.contract, "C41", 9, "a2", tc.retry)
			v2 := classify(t, tc.contract, cp, retry, first)
			require.Equal(t, UnprovableDivergence, v2.Class)
			assert.Contains(t, v2.Reason, tc.reason)
			assert.Equal(t, tc.contract.Recovery, v2.Recovery)
			assert.False(t, v2.Advances())

			// Neither successor advances: N8's verdict stops it even with
			// every receipt; N7 lacks its own receipt for 502 (or a later
			// fetch contradicts its range).
			assert.Equal(t, Refuse, decide(tc.contract, cp, acked(retry, len(retry.Events)), v2, first, retry).Action)
			assert.NotEqual(t, Promote, decide(tc.contract, cp, first, v1, first, retry).Action)

			// The consumer stops: once the partition is parked with the
			// verdict's reason, not even a fully acknowledged N7 advances.
			parked := cp
			parked.Parked = v2.Reason
			d := decide(tc.contract, parked, acked(first, 2), v1, first, retry)
			assert.Equal(t, Refuse, d.Action)
			assert.Contains(t, d.Reason, "parked")
		})
	}
}

// The converse of the example above: 502 may be missing from the retry
// only when the contract lets events be withdrawn and the retry proves its
// position covered (a complete-through watermark at or above 502 in the
// positions' coordinate).
func TestRetryExample_RetryOmits502_WithdrawalCoveredByWatermark_Advances(t *testing.T) {
	withdrawable := with(sparse, func(c *Contract) { c.WatermarkCoversPositions, c.EventsMayBeWithdrawn = true, true })
	cp := checkpoint("C41", 9, 500, true)
	first := acked(build(t, withdrawable, "C41", 9, "a1", resp("N7", ev("e501", 501), ev("e502", 502))), 1)
	r := resp("N8", ev("e501", 501), ev("e503", 503))
	r.CompleteThrough = coord.Integer(503)
	retry := build(t, withdrawable, "C41", 9, "a2", r)
	v := classify(t, withdrawable, cp, retry, first)
	require.Equal(t, ShiftedPage, v.Class, v.Reason)
	assert.Contains(t, v.Reason, "complete-through watermark 503 covers its whole range")
	d := decide(withdrawable, cp, acked(retry, 2), v, first, retry)
	require.Equal(t, Promote, d.Action, d.Reason)
	assert.Equal(t, []byte("N8"), d.Promotion.To)
}

// A watermark is evidence only for positions at or below its value. The
// checkpoint holds C41 at generation 9 with 500 applied; the first response
// was 501, 502, 503 (successor N7) and only 501 was acknowledged; the retry
// returns 501, 503 (successor N8) with a complete-through watermark that
// lags behind 502. Promoting N8 would never deliver 502: the retry must
// diverge, whatever the contract says about withdrawals, and so must a
// retry whose only evidence is a new snapshot marker.
func TestRetryOmittingAWitnessedEventWithALaggingWatermarkDiverges(t *testing.T) {
	cp := checkpoint("C41", 9, 500, true)
	for _, tc := range []struct {
		name     string
		contract Contract
		ct       int64
		marker   string
	}{
		{name: "watermark 500, positions in its coordinate", contract: with(dense, func(c *Contract) { c.WatermarkCoversPositions = true }), ct: 500},
		{name: "watermark 400, positions in its coordinate", contract: with(dense, func(c *Contract) { c.WatermarkCoversPositions = true }), ct: 400},
		{name: "watermark 500, events may be withdrawn", contract: with(dense, func(c *Contract) { c.WatermarkCoversPositions, c.EventsMayBeWithdrawn = true, true }), ct: 500},
		{name: "watermark 503, events may not be withdrawn", contract: with(dense, func(c *Contract) { c.WatermarkCoversPositions = true }), ct: 503},
		{name: "watermark 503 not in the positions' coordinate", contract: with(sparse, func(c *Contract) { c.EventsMayBeWithdrawn = true }), ct: 503},
		{name: "a new snapshot marker", contract: snap, marker: "rv-2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first := resp("N7", ev("e501", 501), ev("e502", 502), ev("e503", 503))
			if tc.marker != "" {
				first = marked(first, "rv-1")
			}
			w1 := acked(build(t, tc.contract, "C41", 9, "a1", first), 1)
			r := resp("N8", ev("e501", 501), ev("e503", 503))
			if tc.ct != 0 {
				r.CompleteThrough = coord.Integer(tc.ct)
			}
			if tc.marker != "" {
				r = marked(r, tc.marker)
			}
			retry := build(t, tc.contract, "C41", 9, "a2", r)
			v := classify(t, tc.contract, cp, retry, w1)
			require.Equal(t, UnprovableDivergence, v.Class, v.Reason)
			assert.Contains(t, v.Reason, "showed position 502")
			assert.Equal(t, Refuse, decide(tc.contract, cp, acked(retry, 2), v, w1, retry).Action)
		})
	}
}

// Reference: seed 001, "Empty-response promotion boundary": the durable
// applied boundary is 700; retrying C41 returns no events, successor N9 and
// a provider-defined coverage marker. After the marker is durably recorded
// in the N9 witness, N9 may be promoted with the usual compare-and-swap.
func TestRetryExample_EmptyResponseAtBoundary700_WithCoverageMarker_Promotes(t *testing.T) {
	final := with(sparse, func(c *Contract) { c.EmptyPage = provider.EmptyFinalThroughWatermark })
	for _, tc := range []struct {
		name     string
		contract Contract
		retry    Response
		prior    []Response // earlier responses to C41 at this generation
		class    RetryClass
		mark     coord.Watermark
	}{
		{"snapshot marker, the earlier fetch failed before its witness", snap, marked(resp("N9"), "rv-700"), nil, FirstResponse, coord.Watermark{}},
		{"snapshot marker, after an empty response without one", snap, marked(resp("N9"), "rv-700"), []Response{resp("N9")}, ShiftedPage, coord.Watermark{}},
		{"coverage watermark under final-through-watermark", final, Response{Successor: []byte("N9"), CompleteThrough: coord.Integer(700)}, nil, FirstResponse, coord.Integer(700)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cp := checkpoint("C41", 4, 700, true)
			var prior []Witness
			for i, r := range tc.prior {
				prior = append(prior, build(t, tc.contract, "C41", 4, "a"+string(rune('1'+i)), r))
			}
			w := build(t, tc.contract, "C41", 4, "b1", tc.retry)
			v := classify(t, tc.contract, cp, w, prior...)
			require.Equal(t, tc.class, v.Class, v.Reason)

			comp := CanPromote(tc.contract, w)
			require.True(t, comp.Complete, comp.Reason)
			d := decide(tc.contract, cp, w, v, append(prior, w)...)
			require.Equal(t, Promote, d.Action, d.Reason)
			var basis Basis
			if !tc.mark.IsZero() {
				basis = Basis{Finality: provider.FinalitySource}
			}
			assert.Equal(t, Promotion{
				Scope: scope, Partition: part, FromCursor: []byte("C41"), FromGeneration: 4,
				To: []byte("N9"), WitnessID: "b1", Watermark: tc.mark, Finality: basis,
			}, d.Promotion, "the applied boundary stays at 700: HasApplied is false")

			// "A later retry of C41 could still return position 701": once
			// one does, N9 may no longer be promoted from C41.
			later := build(t, tc.contract, "C41", 4, "c1", resp("N10", ev("e701", 701)))
			d = decide(tc.contract, cp, w, v, append(prior, w, later)...)
			assert.Equal(t, Refuse, d.Action)
			assert.Contains(t, d.Reason, "701")
		})
	}
}

// docs/design.md#empty-page-example, second part: when the same empty
// response carries only N9, with no coverage marker and no documented
// completeness rule, its witness stays pending and nothing advances.
func TestRetryExample_EmptyResponseAtBoundary700_WithoutMarker_StaysPending(t *testing.T) {
	for _, tc := range []struct {
		name     string
		contract Contract
		retry    Response
	}{
		{"only N9", snap, resp("N9")},
		{"marker the contract does not declare", sparse, marked(resp("N9"), "rv-700")},
		{"watermark without final-through-watermark semantics", sparse, Response{Successor: []byte("N9"), CompleteThrough: coord.Integer(800)}},
		{"final-through-watermark contract without a watermark", with(sparse, func(c *Contract) { c.EmptyPage = provider.EmptyFinalThroughWatermark }), resp("N9")},
		{"undocumented end-of-stream flag", snap, Response{Successor: []byte("N9"), Sealed: true}},
		{"has-more flag cleared", snap, Response{Successor: []byte("N9"), HasMore: false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cp := checkpoint("C41", 4, 700, true)
			w := build(t, tc.contract, "C41", 4, "a1", tc.retry)
			v := classify(t, tc.contract, cp, w)
			require.True(t, v.Advances(), v.Reason)
			assert.False(t, CanPromote(tc.contract, w).Complete)
			d := decide(tc.contract, cp, w, v, w)
			assert.Equal(t, Hold, d.Action)
			assert.Contains(t, d.Reason, "stays pending")

			// Retrying C41 and getting the same empty page resumes the same
			// pending witness; it still may not advance.
			again := build(t, tc.contract, "C41", 4, "a2", tc.retry)
			v2 := classify(t, tc.contract, cp, again, w)
			require.Equal(t, ExactReplay, v2.Class)
			require.NotNil(t, v2.Resume)
			assert.Equal(t, Hold, decide(tc.contract, cp, *v2.Resume, v2, w).Action)
		})
	}
}
