package coord

import (
	"math"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func dec(t *testing.T, s string) Position {
	t.Helper()
	p, err := DecimalPosition(s)
	require.NoError(t, err)
	return p
}

func TestDecimalPositionIsCanonical(t *testing.T) {
	for in, want := range map[string]string{"0": "0", "000": "0", "007": "7", " 42 ": "42",
		"49590338271490256608559692538361571095921575989136588898": "49590338271490256608559692538361571095921575989136588898"} {
		assert.Equal(t, want, dec(t, in).Str, in)
	}
	for _, bad := range []string{"", " ", "-1", "1.5", "1e9", "0x10", "12a"} {
		_, err := DecimalPosition(bad)
		assert.Error(t, err, bad)
	}
	assert.Equal(t, dec(t, "0042"), dec(t, "42"), "equal decimals are == (map keys agree)")
}

func TestPositionCompareWithinEachKind(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b Position
		want int
	}{
		{"integers", IntPosition(-3), IntPosition(2), -1},
		{"decimal length wins over bytes", dec(t, "999"), dec(t, "1000"), -1},
		{"decimal same length", dec(t, "49590338271490256608559692538361571095921575989136588899"), dec(t, "49590338271490256608559692538361571095921575989136588898"), 1},
		{"decimal equal", dec(t, "12"), dec(t, "012"), 0},
		{"strings byte order", StringPosition("a/10"), StringPosition("a/9"), -1},
		{"strings prefix", StringPosition("a"), StringPosition("a/"), -1},
		{"timestamps", Position{Kind: KindTimestamp, Int: 5}, Position{Kind: KindTimestamp, Int: 4}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.a.Compare(tc.b))
			assert.Equal(t, -tc.want, tc.b.Compare(tc.a))
			c, err := tc.a.AsWatermark().Compare(tc.b.AsWatermark())
			require.NoError(t, err)
			assert.Equal(t, tc.want, c, "a position and a watermark of one kind order alike")
		})
	}
}

func TestPositionNextAndPrev(t *testing.T) {
	for _, tc := range []struct {
		p, next Position
	}{
		{IntPosition(41), IntPosition(42)},
		{dec(t, "0"), dec(t, "1")},
		{dec(t, "9"), dec(t, "10")},
		{dec(t, "1999"), dec(t, "2000")},
		{dec(t, "49590338271490256608559692538361571095921575989136588899"), dec(t, "49590338271490256608559692538361571095921575989136588900")},
		{dec(t, strings.Repeat("9", 60)), dec(t, "1"+strings.Repeat("0", 60))},
	} {
		n, ok := tc.p.Next()
		require.True(t, ok, tc.p.String())
		assert.Equal(t, tc.next, n, "next of %s", tc.p)
		prev, ok := tc.next.Prev()
		require.True(t, ok)
		assert.Equal(t, tc.p, prev, "prev of %s", tc.next)
	}
	for _, p := range []Position{IntPosition(math.MaxInt64), StringPosition("a"), {Kind: KindTimestamp, Int: 1}} {
		_, ok := p.Next()
		assert.False(t, ok, "%s has no next", p)
	}
	for _, p := range []Position{IntPosition(math.MinInt64), dec(t, "0"), StringPosition("a")} {
		_, ok := p.Prev()
		assert.False(t, ok, "%s has no prev", p)
	}
}

// Property: decimal order and successor arithmetic agree with big.Int.
func TestDecimalPositionsAgreeWithBigInt(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	random := func() *big.Int {
		n := new(big.Int)
		for i := r.IntN(4); i >= 0; i-- {
			n.Lsh(n, 64).Or(n, new(big.Int).SetUint64(r.Uint64()>>r.IntN(64)))
		}
		return n
	}
	for range 5000 {
		a, b := random(), random()
		pa, pb := dec(t, a.String()), dec(t, b.String())
		require.Equal(t, a.Cmp(b), pa.Compare(pb), "%s vs %s", a, b)
		next, ok := pa.Next()
		require.True(t, ok)
		require.Equal(t, new(big.Int).Add(a, big.NewInt(1)).String(), next.Str)
		if a.Sign() > 0 {
			prev, ok := pa.Prev()
			require.True(t, ok)
			require.Equal(t, new(big.Int).Sub(a, big.NewInt(1)).String(), prev.Str)
		}
	}
}

func TestDecimalWatermarkParseAndString(t *testing.T) {
	w, err := Parse(KindDecimal, "00049590338271490256608559692538361571095921575989136588898")
	require.NoError(t, err)
	assert.Equal(t, "49590338271490256608559692538361571095921575989136588898", w.String())
	k, err := ParseKind("decimal")
	require.NoError(t, err)
	assert.Equal(t, KindDecimal, k)
	_, err = Parse(KindDecimal, "4.5")
	assert.Error(t, err)
	d7, _ := Decimal("7")
	_, err = d7.Compare(Integer(7))
	assert.ErrorIs(t, err, ErrIncomparable, "a decimal and an integer watermark never compare")
}

func TestWatermarkMinusLowersByTheLagOrRefuses(t *testing.T) {
	ts := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	big, err := Decimal("49590338271490256608559692538361571095921575989136588898")
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		w    Watermark
		n    int64
		want Watermark
		ok   bool
	}{
		{"integer", Integer(300), 10, Integer(290), true},
		{"integer below zero is still an integer", Integer(3), 10, Integer(-7), true},
		{"integer underflow", Integer(math.MinInt64 + 5), 10, Watermark{}, false},
		{"timestamp by nanoseconds", Timestamp(ts), int64(5 * time.Minute), Timestamp(ts.Add(-5 * time.Minute)), true},
		{"decimal borrows across digits", Watermark{Kind: KindDecimal, Str: "1000"}, 1, Watermark{Kind: KindDecimal, Str: "999"}, true},
		{"long decimal", big, 98, Watermark{Kind: KindDecimal, Str: "49590338271490256608559692538361571095921575989136588800"}, true},
		{"decimal below zero", Watermark{Kind: KindDecimal, Str: "5"}, 6, Watermark{}, false},
		{"string has no arithmetic", String("k"), 1, Watermark{}, false},
		{"none", Watermark{}, 1, Watermark{}, false},
		{"negative lag", Integer(5), -1, Watermark{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := tc.w.Minus(tc.n)
			require.Equal(t, tc.ok, ok)
			require.Equal(t, tc.want, got)
		})
	}
}
