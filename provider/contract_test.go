package provider

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Contracts the tests start from.
var (
	// dense: consecutive positions, no snapshot markers, tokens fixed.
	dense = Contract{EmptyPage: EmptyNoEvidence, OrderedPositions: true, DensePositions: true, Recovery: RecoveryRestartFromBoundary, Finality: FinalitySource}
	// sparse: ordered positions with gaps, nothing else.
	sparse = Contract{EmptyPage: EmptyNoEvidence, OrderedPositions: true, Recovery: RecoveryFreshSnapshot, Finality: FinalitySource}
	// overlap: offset pages over sparse ids, each requested one event early.
	overlap = with(sparse, func(c *Contract) { c.Pagination, c.OffsetOverlap = PaginationOffset, true })
	// unproven: offset pages over sparse ids, nothing proving continuity.
	unproven = with(sparse, func(c *Contract) { c.Pagination, c.OffsetUnproven = PaginationOffset, true })
	// offsetDense: offset pages over dense positions.
	offsetDense = with(dense, func(c *Contract) { c.Pagination = PaginationOffset })
)

func with(c Contract, f func(*Contract)) Contract { f(&c); return c }

func TestContractEnumStrings(t *testing.T) {
	assert.Equal(t, "no_evidence", EmptyNoEvidence.String())
	assert.Equal(t, "end_of_data", EmptyEndOfData.String())
	assert.Equal(t, "final_through_watermark", EmptyFinalThroughWatermark.String())
	assert.Equal(t, "follow_successor", EmptyFollowsSuccessor.String())
	assert.Equal(t, "empty_page(9)", EmptyPage(9).String())
	assert.Equal(t, "park", RecoveryPark.String())
	assert.Equal(t, "restart_from_boundary", RecoveryRestartFromBoundary.String())
	assert.Equal(t, "fresh_snapshot", RecoveryFreshSnapshot.String())
	assert.Equal(t, "poll", MissingSuccessorPoll.String())
	assert.Equal(t, "end_of_traversal", MissingSuccessorEndsTraversal.String())
	assert.Equal(t, "offset", PaginationOffset.String())
}

func TestContract_Validate(t *testing.T) {
	assert.NoError(t, dense.Validate())
	assert.NoError(t, with(dense, func(c *Contract) { c.Recovery = 0 }).Validate(), "zero recovery means park")
	assert.ErrorIs(t, with(dense, func(c *Contract) { c.EmptyPage = EmptyFollowsSuccessor + 1 }).Validate(), ErrInvalidContract)
	assert.NoError(t, with(dense, func(c *Contract) { c.EmptyPage = EmptyFollowsSuccessor }).Validate())
	assert.Equal(t, RecoveryPark, Contract{}.EffectiveRecovery())
}

func TestValidateRefusesCoverageWithoutSourceFinality(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    Contract
		err  string
	}{
		{"covers positions under none", with(sparse, func(c *Contract) { c.Finality, c.WatermarkCoversPositions = 0, true }), "watermark covers positions needs finality source, not none"},
		{"covers positions under an append-only assertion", with(sparse, func(c *Contract) { c.Finality, c.WatermarkCoversPositions = FinalityAppendOnlyWriter, true }), "not append_only_writer"},
		{"final-through empty pages under a lag", with(sparse, func(c *Contract) {
			c.Finality, c.FinalityLag, c.EmptyPage = FinalityLag, 5, EmptyFinalThroughWatermark
		}), "empty page final through watermark needs finality source, not lag"},
		{"a lag that is not positive", with(sparse, func(c *Contract) { c.Finality = FinalityLag }), "positive lag"},
		{"a lag without lag finality", with(sparse, func(c *Contract) { c.FinalityLag = 5 }), "not lag"},
		{"unknown finality", with(sparse, func(c *Contract) { c.Finality = 9 }), "finality(9)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.c.Validate()
			require.ErrorIs(t, err, ErrInvalidContract)
			assert.Contains(t, err.Error(), tc.err)
		})
	}
	ok := with(sparse, func(c *Contract) { c.WatermarkCoversPositions, c.EmptyPage = true, EmptyFinalThroughWatermark })
	require.NoError(t, ok.Validate())
}

func TestFinalityNamesRoundTrip(t *testing.T) {
	for f := FinalityNone; f <= FinalityLag; f++ {
		got, err := ParseFinality(f.String())
		require.NoError(t, err)
		assert.Equal(t, f, got)
	}
	_, err := ParseFinality("self")
	require.ErrorIs(t, err, ErrInvalidContract)
	assert.Equal(t, "none", Finality(0).String())
}

func TestValidateRefusesOffsetPaginationThatCannotProveContinuity(t *testing.T) {
	for _, tc := range []struct {
		name    string
		c       Contract
		invalid string // a substring of the error; "" = valid
	}{
		{"token is the default", sparse, ""},
		{"keyset over ordered positions", with(sparse, func(c *Contract) { c.Pagination = PaginationKeyset }), ""},
		{"keyset over unordered positions", with(sparse, func(c *Contract) { c.Pagination, c.OrderedPositions = PaginationKeyset, false }), "keyset pagination needs ordered"},
		{"offset over sparse positions alone", with(sparse, func(c *Contract) { c.Pagination = PaginationOffset }), "cannot prove that a page continues"},
		{"offset over dense positions", offsetDense, ""},
		{"offset with the overlap check", overlap, ""},
		{"offset declared unproven", unproven, ""},
		{"overlap and unproven at once", with(overlap, func(c *Contract) { c.OffsetUnproven = true }), "declare one"},
		{"overlap without offset pagination", with(sparse, func(c *Contract) { c.OffsetOverlap = true }), "need pagination offset"},
		{"unproven ending a traversal complete", with(unproven, func(c *Contract) { c.MissingSuccessor = MissingSuccessorEndsTraversal }), "missing_successor must be poll"},
		{"unproven with a final watermark", with(unproven, func(c *Contract) { c.EmptyPage = EmptyFinalThroughWatermark }), "no complete-through watermark can be final"},
		{"unproven with a covering watermark", with(unproven, func(c *Contract) { c.WatermarkCoversPositions = true }), "no complete-through watermark can be final"},
		{"unknown pagination", with(sparse, func(c *Contract) { c.Pagination = 9 }), "pagination(9)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.c.Validate()
			if tc.invalid == "" {
				assert.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrInvalidContract)
			assert.Contains(t, err.Error(), tc.invalid)
		})
	}
}

func TestContractRefusesDensePositionsWithoutSuccessorArithmetic(t *testing.T) {
	for k, ok := range map[Kind]bool{KindInteger: true, KindDecimal: true, KindTimestamp: false, KindString: false} {
		err := with(dense, func(c *Contract) { c.PositionKind = k }).ValidPositionKind()
		assert.Equal(t, ok, err == nil, "%s: %v", k, err)
		assert.NoError(t, with(sparse, func(c *Contract) { c.PositionKind = k }).ValidPositionKind(), "ordered %s", k)
	}
}

func TestValidateRefusesAFirstPositionItCannotCheck(t *testing.T) {
	dec, err := DecimalPosition("49590338271490256608559692538361571095921575989136588898")
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		c    Contract
		want string // "" when valid
	}{
		{"none declared", dense, ""},
		{"integer origin over dense integer positions", with(dense, func(c *Contract) { c.FirstPosition = IntPosition(1) }), ""},
		{"origin zero is an origin", with(dense, func(c *Contract) { c.FirstPosition = IntPosition(0) }), ""},
		{"decimal origin over dense decimal positions", with(dense, func(c *Contract) { c.PositionKind, c.FirstPosition = KindDecimal, dec }), ""},
		{"without dense positions", with(sparse, func(c *Contract) { c.FirstPosition = IntPosition(1) }), "needs dense positions"},
		{"another kind than the positions", with(dense, func(c *Contract) { c.FirstPosition = dec }), "is a decimal position, the positions are integer"},
		{"a string origin", with(dense, func(c *Contract) { c.PositionKind, c.FirstPosition = KindString, StringPosition("a") }), "integer or decimal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.c.Validate()
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrInvalidContract)
			require.ErrorContains(t, err, tc.want)
		})
	}
	assert.False(t, dense.HasFirstPosition())
	assert.True(t, with(dense, func(c *Contract) { c.FirstPosition = IntPosition(0) }).HasFirstPosition())
}
