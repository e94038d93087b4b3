package reconcile

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/sdkcoord"
	"github.com/tidemark/tidemark/provider"
)

// The first page of a traversal (no applied boundary: a fresh start, a new
// incarnation after a reset) is checked against the declared origin of
// dense positions (Contract.FirstPosition): it must begin there, or it is a
// gap handled per the contract's recovery, like any coverage rule (b) gap.
func TestClassifyChecksTheFirstPageAgainstTheDeclaredFirstPosition(t *testing.T) {
	from := func(c Contract, origin int64) Contract {
		return with(c, func(c *Contract) { c.FirstPosition = provider.IntPosition(origin) })
	}
	parking := with(dense, func(c *Contract) { c.Recovery = provider.RecoveryPark })
	covering := with(dense, func(c *Contract) { c.WatermarkCoversPositions = true })
	withCT := func(r Response, ct int64) Response { r.CompleteThrough = coord.Integer(ct); return r }
	retained := resp("N7", ev("e295", 295), ev("e296", 296))
	for _, tc := range []struct {
		name     string
		contract Contract
		applied  int64 // -1: nothing applied
		prior    []Response
		retry    Response
		class    RetryClass
		reason   []string
	}{
		{name: "first page at the origin", contract: from(dense, 1), applied: -1, retry: resp("N3", ev("e1", 1), ev("e2", 2)), class: FirstResponse},
		{name: "first page at origin zero", contract: from(dense, 0), applied: -1, retry: resp("N2", ev("e0", 0), ev("e1", 1)), class: FirstResponse},
		{name: "no origin declared: the first page is not checked", contract: dense, applied: -1, retry: retained, class: FirstResponse},
		{name: "first page above the origin (retention dropped the oldest events)", contract: from(dense, 1), applied: -1, retry: retained, class: UnprovableDivergence,
			reason: []string{"coverage rule (b), first page: partition p1", "first event is at position 295, not at the declared first position 1", "positions 1 through 294 were never delivered"}},
		{name: "first page one above the origin", contract: from(dense, 1), applied: -1, retry: resp("N3", ev("e2", 2)), class: UnprovableDivergence,
			reason: []string{"position 2, not at the declared first position 1", "position 1 was never delivered"}},
		{name: "first page one above origin zero", contract: from(dense, 0), applied: -1, retry: resp("N2", ev("e1", 1)), class: UnprovableDivergence,
			reason: []string{"not at the declared first position 0"}},
		{name: "first page below the origin", contract: from(dense, 1), applied: -1, retry: resp("N2", ev("e0", 0), ev("e1", 1)), class: UnprovableDivergence,
			reason: []string{"position 0, below the declared first position 1", "does not start where the contract says"}},
		{name: "under park the gap parks", contract: from(parking, 1), applied: -1, retry: retained, class: UnprovableDivergence, reason: []string{"295"}},
		{name: "a certified watermark over positions covers the gap", contract: from(covering, 1), applied: -1, retry: withCT(retained, 294), class: FirstResponse},
		{name: "a certified watermark short of the gap covers nothing", contract: from(covering, 1), applied: -1, retry: withCT(retained, 200), class: UnprovableDivergence,
			reason: []string{"positions 1 through 294 were never delivered"}},
		{name: "a watermark not over positions covers nothing", contract: from(dense, 1), applied: -1, retry: withCT(retained, 294), class: UnprovableDivergence,
			reason: []string{"positions 1 through 294"}},
		{name: "an empty first page proves nothing and is no gap", contract: from(dense, 1), applied: -1, retry: resp("N1"), class: FirstResponse},
		{name: "with an applied boundary the page continues it, not the origin", contract: from(dense, 1), applied: 500, retry: resp("N7", ev("e501", 501)), class: FirstResponse},
		{name: "with an applied boundary the boundary rule decides", contract: from(dense, 1), applied: 500, retry: resp("N7", ev("e502", 502)), class: UnprovableDivergence,
			reason: []string{"not at the next required position 501"}},
		{name: "an exact replay of a first page above the origin is still a gap", contract: from(dense, 1), applied: -1, prior: []Response{retained}, retry: retained, class: UnprovableDivergence,
			reason: []string{"first event is at position 295"}},
		{name: "a page that grew at the head from an empty first answer is checked too", contract: from(with(dense, func(c *Contract) { c.EmptyPage = provider.EmptyEndOfData }), 1), applied: -1,
			prior: []Response{resp("")}, retry: resp("", ev("e5", 5)), class: UnprovableDivergence, reason: []string{"positions 1 through 4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, tc.contract.Validate())
			var prior []Witness
			for i, r := range tc.prior {
				prior = append(prior, build(t, tc.contract, "", 1, "a"+string(rune('1'+i)), r))
			}
			w := build(t, tc.contract, "", 1, "b1", tc.retry)
			v, err := Classify(ClassifyInput{Contract: tc.contract, Applied: coord.IntPosition(tc.applied), HasApplied: tc.applied >= 0, Prior: prior, Witness: w})
			require.NoError(t, err)
			assert.Equal(t, tc.class, v.Class, v.Reason)
			for _, want := range tc.reason {
				assert.Contains(t, v.Reason, want)
			}
			if tc.class == UnprovableDivergence {
				assert.False(t, v.Advances())
				assert.Equal(t, tc.contract.EffectiveRecovery(), v.Recovery)
			} else {
				assert.True(t, v.Advances())
			}
		})
	}
}

func TestClassifyChecksADecimalFirstPosition(t *testing.T) {
	pos := func(s string) coord.Position {
		p, err := coord.DecimalPosition(s)
		require.NoError(t, err)
		return p
	}
	c := with(dense, func(c *Contract) {
		c.PositionKind, c.FirstPosition = provider.KindDecimal, sdkcoord.SDKPosition(pos("49590338271490256608559692538361571095921575989136588800"))
	})
	require.NoError(t, c.Validate())
	page := func(first string) Response {
		return Response{Successor: []byte("N"), Events: []Event{{ID: "e", Position: pos(first), Payload: []byte("x")}}}
	}
	at := classify(t, c, Checkpoint{}, build(t, c, "", 1, "a1", page("49590338271490256608559692538361571095921575989136588800")))
	assert.Equal(t, FirstResponse, at.Class, at.Reason)
	above := classify(t, c, Checkpoint{}, build(t, c, "", 1, "a2", page("49590338271490256608559692538361571095921575989136588802")))
	assert.Equal(t, UnprovableDivergence, above.Class)
	assert.Contains(t, above.Reason, "positions 49590338271490256608559692538361571095921575989136588800 through 49590338271490256608559692538361571095921575989136588801 were never delivered")
}
