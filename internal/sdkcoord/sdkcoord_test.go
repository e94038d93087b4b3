package sdkcoord

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/provider"
)

// The SDK's coordinates are the core's, value for value: every kind has
// the same name, every text parses to the same value in both (so a
// provider's position means what the core compares), String renders the
// same text, and a conversion round trip returns the value it started
// from.
func TestTheSDKsCoordinatesAreTheCores(t *testing.T) {
	for k := coord.KindNone; k <= coord.LastKind; k++ {
		require.Equal(t, k.String(), SDKKind(k).String())
		back, err := provider.ParseKind(k.String())
		require.NoError(t, err)
		require.Equal(t, k, Kind(back))
		require.Equal(t, coord.HasSuccessorArithmetic(k), provider.HasSuccessorArithmetic(SDKKind(k)))
	}
	require.Equal(t, (coord.LastKind + 1).String(), SDKKind(coord.LastKind+1).String(), "an unknown kind reads the same")
	for _, tc := range []struct {
		k    coord.Kind
		text string
	}{
		{coord.KindInteger, "42"}, {coord.KindInteger, " -7 "}, {coord.KindInteger, "x"},
		{coord.KindTimestamp, "2026-12-03T06:00:00.5Z"}, {coord.KindTimestamp, "1700000000.25"}, {coord.KindTimestamp, "yesterday"},
		{coord.KindString, "p3/e000300.json"}, {coord.KindString, ""},
		{coord.KindDecimal, "000123456789012345678901234567890"}, {coord.KindDecimal, "0"}, {coord.KindDecimal, "00"}, {coord.KindDecimal, "12a"}, {coord.KindDecimal, ""},
		{coord.KindNone, "1"},
	} {
		cw, cerr := coord.Parse(tc.k, tc.text)
		sw, serr := provider.ParseWatermark(SDKKind(tc.k), tc.text)
		require.Equal(t, cerr == nil, serr == nil, "%s %q: core %v, SDK %v", tc.k, tc.text, cerr, serr)
		require.Equal(t, cw, Watermark(sw), "%s %q", tc.k, tc.text)
		require.Equal(t, sw, SDKWatermark(cw))
		require.Equal(t, cw.String(), sw.String())
		cp, _ := coord.ParsePosition(tc.k, tc.text)
		sp, _ := provider.ParsePosition(SDKKind(tc.k), tc.text)
		require.Equal(t, cp, Position(sp), "%s %q", tc.k, tc.text)
		require.Equal(t, sp, SDKPosition(cp))
		require.Equal(t, cp.String(), sp.String())
	}
	ts := time.Date(2026, 12, 3, 6, 0, 0, 7, time.UTC)
	require.Equal(t, coord.TimestampPosition(ts), Position(provider.TimestampPosition(ts)))
	require.Equal(t, coord.Timestamp(ts), Watermark(provider.TimestampWatermark(ts)))
	require.Equal(t, coord.IntPosition(9), Position(provider.IntPosition(9)))
	require.Equal(t, coord.Integer(9), Watermark(provider.IntegerWatermark(9)))
	require.Equal(t, coord.StringPosition("k"), Position(provider.StringPosition("k")))
	require.Equal(t, coord.String("k"), Watermark(provider.StringWatermark("k")))
	cd, _ := coord.DecimalPosition("0042")
	sd, err := provider.DecimalPosition("0042")
	require.NoError(t, err)
	require.Equal(t, cd, Position(sd))
}
