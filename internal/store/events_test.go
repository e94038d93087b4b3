package store

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/witness"
)

func TestEventsRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	cases := [][]witness.EventWitness{
		nil,
		{{IDHash: 0, Position: 0, Digest: 0}},
		{{IDHash: math.MaxUint64, Position: math.MinInt64, Digest: 1}, {IDHash: 2, Position: math.MaxInt64, Digest: 3}, {Position: math.MinInt64}},
	}
	for n := range 50 {
		evs := make([]witness.EventWitness, n)
		pos := r.Int64()
		for i := range evs {
			pos += r.Int64N(2000) - 100
			evs[i] = witness.EventWitness{IDHash: r.Uint64(), Position: pos, Digest: r.Uint64()}
		}
		cases = append(cases, evs)
	}
	for _, evs := range cases {
		b := EncodeEvents(evs)
		require.Len(t, b, EncodedEventsLen(evs))
		got, err := DecodeEvents(b)
		require.NoError(t, err)
		if len(evs) == 0 {
			require.Nil(t, got)
			continue
		}
		require.Equal(t, evs, got)
	}
}

// A 100-event page with consecutive positions takes 17 bytes an event.
func TestEventsCompact(t *testing.T) {
	evs := make([]witness.EventWitness, 100)
	for i := range evs {
		evs[i] = witness.EventWitness{IDHash: uint64(i), Position: 1_000_000 + int64(i), Digest: uint64(i)}
	}
	require.Equal(t, 1+1+(3+16)+99*17, EncodedEventsLen(evs)) // first delta 1e6: 3 bytes
}

func TestDecodeEventsRejectsGarbage(t *testing.T) {
	good := EncodeEvents([]witness.EventWitness{{IDHash: 1, Position: 2, Digest: 3}})
	for _, b := range [][]byte{nil, {}, {2}, {1}, good[:len(good)-1], append(append([]byte{}, good...), 0), {1, 0xff, 0xff, 0xff, 0xff, 0x0f}} {
		_, err := DecodeEvents(b)
		require.Error(t, err, "%x", b)
	}
}

func TestCleanReason(t *testing.T) {
	require.Equal(t, "ok", CleanReason("ok"))
	require.Equal(t, "a\uFFFDb", CleanReason("a\xffb"))
	long := CleanReason(strings.Repeat("é", MaxReasonBytes))
	require.LessOrEqual(t, len(long), MaxReasonBytes)
	require.True(t, strings.HasSuffix(long, "…"))
	require.Equal(t, long, CleanReason(long), "cleaning is idempotent")
}
