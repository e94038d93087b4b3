package provider

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestValidateRefusesAReReadWindowItCannotKeep(t *testing.T) {
	// keysetWindow: keyset pages over ordered integer ids, a window of 100.
	keysetWindow := Contract{EmptyPage: EmptyNoEvidence, OrderedPositions: true, Pagination: PaginationKeyset, Recovery: RecoveryRestartFromBoundary, RereadWindow: 100}
	for _, tc := range []struct {
		name    string
		c       Contract
		invalid string // a substring of the error; "" = valid
	}{
		{"keyset over integers, no claim", keysetWindow, ""},
		{"with an interval", with(keysetWindow, func(c *Contract) { c.RereadInterval = time.Minute }), ""},
		{"fresh_snapshot restarts too", with(keysetWindow, func(c *Contract) { c.Recovery = RecoveryFreshSnapshot }), ""},
		{"a lag within the window", with(keysetWindow, func(c *Contract) { c.Finality, c.FinalityLag = FinalityLag, 60 }), ""},
		{"timestamps under token pagination", with(keysetWindow, func(c *Contract) {
			c.Pagination, c.PositionKind, c.OrderedPositions, c.RereadWindow = PaginationToken, KindTimestamp, false, int64(5*time.Minute)
		}), ""},
		{"a lag beyond the window", with(keysetWindow, func(c *Contract) { c.Finality, c.FinalityLag = FinalityLag, 101 }), "greater than the re-read window"},
		{"a certified watermark", with(keysetWindow, func(c *Contract) { c.Finality = FinalitySource }), "not source"},
		{"parking cannot start a pass", with(keysetWindow, func(c *Contract) { c.Recovery = RecoveryPark }), "needs recovery restart_from_boundary"},
		{"offset pages", with(keysetWindow, func(c *Contract) { c.Pagination, c.DensePositions = PaginationOffset, true }), "keyset or token pagination"},
		{"string positions", with(keysetWindow, func(c *Contract) { c.PositionKind = KindString }), "integer or timestamp positions"},
		{"decimal positions", with(keysetWindow, func(c *Contract) { c.PositionKind = KindDecimal }), "integer or timestamp positions"},
		{"a negative window", with(keysetWindow, func(c *Contract) { c.RereadWindow = -1 }), "negative re-read window"},
		{"an interval without a window", with(keysetWindow, func(c *Contract) { c.RereadWindow, c.RereadInterval = 0, time.Second }), "without a re-read window"},
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

// The basis of a re-read window's watermark names the window, in the
// positions' units.
func TestRereadBasisNamesTheWindow(t *testing.T) {
	c := Contract{Finality: FinalityLag, FinalityLag: 60, RereadWindow: 100}
	assert.Equal(t, "reread lag 100", c.Basis(KindInteger).String())
	c = Contract{Finality: FinalityLag, FinalityLag: int64(time.Minute), RereadWindow: int64(5 * time.Minute)}
	assert.Equal(t, "reread lag 5m0s", c.Basis(KindTimestamp).String())
	c.RereadWindow = 0
	assert.Equal(t, "lag 1m0s", c.Basis(KindTimestamp).String())
}
