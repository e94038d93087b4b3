package provider

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A Basis is typed from the contract to the stores: every basis a contract
// gives reads back from its text as the same value (stores keep the text),
// and a text no contract gives is refused.
func TestBasisTextReadsBackAsTheSameValue(t *testing.T) {
	for _, tc := range []struct {
		c    Contract
		k    Kind
		text string
	}{
		{Contract{Finality: FinalityNone}, KindInteger, ""},
		{Contract{}, KindInteger, ""},
		{Contract{Finality: FinalitySource}, KindInteger, "source"},
		{Contract{Finality: FinalityAppendOnlyWriter}, KindString, "append_only_writer assertion"},
		{Contract{Finality: FinalityLag, FinalityLag: 5}, KindInteger, "lag 5"},
		{Contract{Finality: FinalityLag, FinalityLag: 5}, KindDecimal, "lag 5"},
		{Contract{Finality: FinalityLag, FinalityLag: int64(5 * time.Minute)}, KindTimestamp, "lag 5m0s"},
		{Contract{Finality: FinalityLag, FinalityLag: 7}, KindTimestamp, "lag 7ns"},
		{Contract{Finality: FinalityLag, FinalityLag: 1, RereadWindow: 100}, KindInteger, "reread lag 100"},
		{Contract{Finality: FinalityLag, FinalityLag: 1, RereadWindow: int64(time.Hour)}, KindTimestamp, "reread lag 1h0m0s"},
	} {
		t.Run(tc.text, func(t *testing.T) {
			b := tc.c.Basis(tc.k)
			require.Equal(t, tc.text, b.String())
			require.NoError(t, b.Validate())
			back, err := ParseBasis(b.String())
			require.NoError(t, err)
			require.Equal(t, b, back)
			require.Equal(t, tc.c.EffectiveFinality() == FinalitySource, b.Certified())
		})
	}
	for _, bad := range []string{"none", "lag", "lag 0", "lag -5", "lag 5x", "lag 05", "lag 60s", "reread source", "Source", "lag 5m0s extra"} {
		_, err := ParseBasis(bad)
		assert.ErrorIs(t, err, ErrInvalidContract, "%q", bad)
	}
	for _, bad := range []Basis{{Finality: FinalityNone}, {Finality: FinalityLag}, {Finality: FinalitySource, Lag: 3}, {Finality: FinalityLag + 1}} {
		assert.ErrorIs(t, bad.Validate(), ErrInvalidContract, "%+v", bad)
	}
}
