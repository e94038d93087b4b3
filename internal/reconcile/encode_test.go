package reconcile

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidemark/tidemark/internal/coord"
)

func eventPage(first int64, n int, step func(i int) int64) []EventWitness {
	out := make([]EventWitness, n)
	pos := first
	for i := range out {
		if i > 0 {
			pos += step(i)
		}
		id := fmt.Sprintf("evt-%d", i)
		out[i] = EventWitness{IDHash: HashID(id), Position: coord.IntPosition(pos), Digest: HashPayload([]byte(id))}
	}
	return out
}

// The DynamoDB store keeps the event witness as one binary attribute; the
// target is at most two write units (2 KB) for a 100-event page's witness,
// so the blob must stay near 1.7 KB.
func TestEncodeEvents_SizeOfA100EventPage(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		name   string
		events []EventWitness
		max    int
	}{
		{"100 dense events", eventPage(1_000_501, 100, func(int) int64 { return 1 }), 1610},
		{"100 sparse events, gaps below 64", eventPage(1_000_501, 100, func(int) int64 { return 1 + rng.Int64N(63) }), 1710},
		{"100 sparse events, timestamp-like gaps", eventPage(1_733_000_000_000, 100, func(int) int64 { return 1000 + rng.Int64N(7000) }), 1920},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := EncodeEvents(tc.events)
			t.Logf("%s: %d bytes", tc.name, len(b))
			assert.LessOrEqual(t, len(b), tc.max)
			got, err := DecodeEvents(b)
			require.NoError(t, err)
			assert.Equal(t, tc.events, got)
		})
	}
}

func TestEncodeEvents_RoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name   string
		events []EventWitness
	}{
		{"none", nil},
		{"one", []EventWitness{{IDHash: 1, Position: coord.IntPosition(7), Digest: 2}}},
		{"negative positions", eventPage(-10, 5, func(int) int64 { return 1 })},
		{"decreasing (unordered contract)", eventPage(100, 5, func(int) int64 { return -7 })},
		{"repeated positions", eventPage(5, 3, func(int) int64 { return 0 })},
		{"extremes", []EventWitness{{Position: coord.IntPosition(math.MinInt64)}, {Position: coord.IntPosition(math.MaxInt64), IDHash: math.MaxUint64, Digest: math.MaxUint64}, {Position: coord.IntPosition(0)}}},
		{"consecutive up to MaxInt64", eventPage(math.MaxInt64-2, 3, func(int) int64 { return 1 })},
		{"MaxInt64 then MinInt64 is not consecutive", []EventWitness{{Position: coord.IntPosition(math.MaxInt64)}, {Position: coord.IntPosition(math.MinInt64)}}},
		{"decimal sequence numbers", decimalPage(t, "49590338271490256608559692538361571095921575989136588890", 5)},
		{"object keys", []EventWitness{{IDHash: 1, Position: coord.StringPosition("a/b/1.json")}, {IDHash: 2, Position: coord.StringPosition("a/b/10.json")}, {IDHash: 3, Position: coord.StringPosition("a/c")}, {IDHash: 4, Position: coord.StringPosition("")}}},
		{"timestamps", []EventWitness{{Position: coord.Position{Kind: coord.KindTimestamp, Int: 1764745200000000000}}, {Position: coord.Position{Kind: coord.KindTimestamp, Int: 1764745200000000001}}}},
		{"mixed kinds and no position", []EventWitness{{Position: coord.IntPosition(4)}, {Position: coord.StringPosition("x")}, {}, {Position: coord.Position{Kind: coord.KindDecimal, Str: "12"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := EncodeEvents(tc.events)
			require.NotEmpty(t, b, "DynamoDB binary attributes may not be empty")
			got, err := DecodeEvents(b)
			require.NoError(t, err)
			assert.Equal(t, len(tc.events), len(got))
			if len(tc.events) > 0 {
				assert.Equal(t, tc.events, got)
			}
		})
	}
	assert.Equal(t, []byte{formatDelta, 0}, EncodeEvents(nil))
	assert.Equal(t, formatConsecutive, EncodeEvents(eventPage(1, 2, func(int) int64 { return 1 }))[0])
	assert.Equal(t, formatDelta, EncodeEvents(eventPage(1, 2, func(int) int64 { return 2 }))[0])
}

func TestDecodeEvents_Errors(t *testing.T) {
	valid := EncodeEvents(eventPage(500, 2, func(int) int64 { return 3 }))
	consecutive := EncodeEvents(eventPage(500, 2, func(int) int64 { return 1 }))
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "empty"},
		{"unknown format", []byte{10, 0}, "unknown format 10"},
		{"no count", []byte{formatDelta}, "bad event count"},
		{"count too large", []byte{formatDelta, 5, 0}, "do not fit"},
		{"empty with trailing bytes", []byte{formatDelta, 0, 1}, "trailing"},
		{"empty consecutive", []byte{formatConsecutive, 0}, "trailing"},
		{"truncated", valid[:len(valid)-1], "event 1"},
		{"trailing bytes", append(append([]byte{}, valid...), make([]byte, 17)...), "trailing"},
		{"bad delta", append([]byte{formatDelta, 1}, bytesOf(0x80, 17)...), "bad position of event 0"},
		{"consecutive, too short", append([]byte{formatConsecutive, 1}, make([]byte, 16)...)[:3], "do not fit"},
		{"consecutive overflow", overflowing(), "overflow"},
		{"consecutive with trailing bytes", append(append([]byte{}, consecutive...), 0), "trailing"},
		{"consecutive, varint runs out", append([]byte{formatConsecutive, 1}, append(bytesOf(0x80, 17), 0x80)...), "bad first position"},
		{"unknown compact format", []byte{formatKinded + compactEvents + 1, 2}, "unknown format 10"},
		{"compact, count too large", append([]byte{formatConsecutive + compactEvents, 3, 2}, make([]byte, 2*compactBytes)...), "do not fit"},
		{"compact, event cut short", []byte{formatDelta + compactEvents, 1, 2, 0, 0, 0}, "truncated"},
		{"shared digest of one event", append([]byte{formatConsecutive + sharedDigest, 1}, make([]byte, 8+1+8)...), "two events"},
		{"shared digest cut short", []byte{formatDelta + sharedDigest, 2, 0, 0, 0}, "two events and 8 bytes"},
		{"shared, count too large", append([]byte{formatDelta + sharedDigest, 3}, make([]byte, 8+2*9)...), "do not fit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeEvents(tc.b)
			assert.Nil(t, got)
			require.ErrorIs(t, err, ErrInvalid)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func bytesOf(b byte, n int) []byte {
	out := make([]byte, n)
	for i := range out {
		out[i] = b
	}
	return out
}

// decimalPage is n events at consecutive decimal positions from first.
func decimalPage(t *testing.T, first string, n int) []EventWitness {
	p, err := coord.DecimalPosition(first)
	require.NoError(t, err)
	out := make([]EventWitness, n)
	for i := range out {
		out[i] = EventWitness{IDHash: uint64(i) + 1, Position: p, Digest: ^uint64(i)}
		p, _ = p.Next()
	}
	return out
}

// Positions of one page share their prefix: a page of 100 Kinesis sequence
// numbers (56 digits each) costs about as much as integer positions.
func TestEncodeEvents_KindedPositionsArePrefixCompressed(t *testing.T) {
	b := EncodeEvents(decimalPage(t, "49590338271490256608559692538361571095921575989136588800", 100))
	assert.Equal(t, formatKinded, b[0])
	assert.Less(t, len(b), 100*(eventBytes+8), "about 5 bytes per 56-digit position, not 56")
}

func overflowing() []byte {
	b := EncodeEvents(eventPage(math.MaxInt64-1, 2, func(int) int64 { return 1 }))
	// Re-encode three events from MaxInt64-1: positions would wrap.
	b = append([]byte{formatConsecutive, 3}, b[2:]...)
	return append(b, make([]byte, 16)...)
}

// FuzzDecodeEvents: decoding arbitrary bytes never panics, and whatever
// decodes re-encodes to the same events.
func FuzzDecodeEvents(f *testing.F) {
	f.Add(EncodeEvents(nil))
	f.Add(EncodeEvents(eventPage(500, 3, func(int) int64 { return 1 })))
	f.Add(EncodeEvents(eventPage(-5, 4, func(int) int64 { return 9 })))
	f.Add([]byte{formatConsecutive, 1, 0xff})
	f.Add(EncodeEvents([]EventWitness{{Position: coord.StringPosition("k/1")}, {Position: coord.StringPosition("k/20")}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		events, err := DecodeEvents(b)
		if err != nil {
			require.ErrorIs(t, err, ErrInvalid)
			return
		}
		again, err := DecodeEvents(EncodeEvents(events))
		require.NoError(t, err)
		require.Equal(t, events, again)
	})
}

// sharedPage is eventPage with one digest for every event: what a constant
// semantic projection (payload changes do not matter) gives.
func sharedPage(first int64, n int, step func(i int) int64) []EventWitness {
	out := eventPage(first, n, step)
	for i := range out {
		out[i].Digest = HashPayload(nil)
	}
	return out
}

// A page whose events share one digest writes it once: 8 bytes an event, so
// the witness of a 100-event page fits one DynamoDB write unit; every
// position layout round-trips; one event, or digests that differ, keep the
// per-event form.
func TestEncodeEvents_SharedDigestIsWrittenOnce(t *testing.T) {
	for _, tc := range []struct {
		name   string
		events []EventWitness
		format byte
		max    int
	}{
		{"100 dense events", sharedPage(1_000_501, 100, func(int) int64 { return 1 }), formatConsecutive + sharedDigest, 813},
		{"100 sparse events", sharedPage(1_000_501, 100, func(i int) int64 { return 1 + int64(i%60) }), formatDelta + sharedDigest, 912},
		{"decimal sequence numbers", func() []EventWitness {
			ev := decimalPage(t, "49590338271490256608559692538361571095921575989136588800", 100)
			for i := range ev {
				ev[i].Digest = 7
			}
			return ev
		}(), formatKinded + sharedDigest, 100 * (idBytes + 8)},
		{"all digests zero", []EventWitness{{IDHash: 1, Position: coord.IntPosition(3)}, {IDHash: 2, Position: coord.IntPosition(9)}}, formatDelta + sharedDigest, 30},
		{"one event", sharedPage(5, 1, nil), formatConsecutive, 20},
		{"one digest differs", func() []EventWitness { ev := sharedPage(5, 3, func(int) int64 { return 1 }); ev[2].Digest++; return ev }(), formatConsecutive, 2 + 1 + 3*eventBytes},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := EncodeEvents(tc.events)
			t.Logf("%s: %d bytes", tc.name, len(b))
			assert.Equal(t, tc.format, b[0])
			assert.LessOrEqual(t, len(b), tc.max)
			got, err := DecodeEvents(b)
			require.NoError(t, err)
			assert.Equal(t, tc.events, got)
		})
	}
}

// Witnesses written by the previous release (formats 1 to 3, 16 bytes an
// event, also when every event has the same digest) are still read, to
// the same events the current form of the page reads.
func TestDecodeEvents_ReadsThePreviousFormats(t *testing.T) {
	be := func(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }
	cat := func(parts ...[]byte) []byte {
		var out []byte
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	two := []EventWitness{
		{IDHash: 0x0102030405060708, Position: coord.IntPosition(5), Digest: 0xaa},
		{IDHash: 0x1112131415161718, Position: coord.IntPosition(6), Digest: 0xaa},
	}
	kinded := []EventWitness{
		{IDHash: 1, Position: coord.StringPosition("a/b/1.json"), Digest: 0xaa},
		{IDHash: 2, Position: coord.StringPosition("a/b/10.json"), Digest: 0xaa},
	}
	for _, tc := range []struct {
		name string
		old  []byte
		want []EventWitness
	}{
		// format, count, first position (zigzag 5 = 10), then id hash and
		// digest of each event.
		{"consecutive (2)", cat([]byte{2, 2, 10}, be(two[0].IDHash), be(0xaa), be(two[1].IDHash), be(0xaa)), two},
		// format, count, then each position's zigzag delta (5: 10, 1: 2)
		// before its hashes.
		{"delta (1)", cat([]byte{1, 2, 10}, be(two[0].IDHash), be(0xaa), []byte{2}, be(two[1].IDHash), be(0xaa)), two},
		// format, count, then per event: kind, zigzag Int delta, shared
		// prefix length, suffix length, suffix, hashes.
		{"kinded (3)", cat([]byte{3, 2},
			[]byte{byte(coord.KindString), 0, 0, 10}, []byte("a/b/1.json"), be(1), be(0xaa),
			[]byte{byte(coord.KindString), 0, 5, 6}, []byte("0.json"), be(2), be(0xaa)), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.want
			if want == nil {
				want = kinded
			}
			got, err := DecodeEvents(tc.old)
			require.NoError(t, err)
			assert.Equal(t, want, got)
			now := EncodeEvents(want)
			assert.Greater(t, now[0], sharedDigest, "the current form shares the digest")
			again, err := DecodeEvents(now)
			require.NoError(t, err)
			assert.Equal(t, got, again)
		})
	}
}

// compactPage is n compact event witnesses (EventOfCompact) of ids e<first+i>
// at positions first+step(0), ...
func compactPage(first int64, n int, step func(i int) int64) []EventWitness {
	ev := make([]EventWitness, n)
	pos := first
	for i := range ev {
		if i > 0 {
			pos += step(i)
		}
		ev[i] = EventOfCompact(Event{ID: fmt.Sprintf("e%d", pos), Position: coord.IntPosition(pos), Payload: []byte(fmt.Sprint(i))})
	}
	return ev
}

// A page of compact witnesses (the opt-in compact_witness) stores one
// 4-byte fingerprint an event in each position layout (a 100-event page:
// 404 bytes, where the 64-bit form is 1,604 and the shared digest's 813)
// and round-trips exactly; a page with one 64-bit event keeps the 64-bit
// form, so no witness is ever cut to 32 bits by the encoding.
func TestEncodeEvents_CompactWitnessIsFourBytesAnEvent(t *testing.T) {
	for _, tc := range []struct {
		name   string
		events []EventWitness
		format byte
		max    int
	}{
		{"100 dense events", compactPage(1_000_501, 100, func(int) int64 { return 1 }), formatConsecutive + compactEvents, 1 + 1 + 4 + 100*compactBytes},
		{"100 sparse events", compactPage(1_000_501, 100, func(i int) int64 { return 1 + int64(i%60) }), formatDelta + compactEvents, 1 + 1 + 4 + 100*(compactBytes+1)},
		{"decimal sequence numbers", func() []EventWitness {
			ev := decimalPage(t, "49590338271490256608559692538361571095921575989136588800", 100)
			for i := range ev {
				ev[i].IDHash = uint64(uint32(ev[i].IDHash))
				ev[i].Digest = ev[i].IDHash
			}
			return ev
		}(), formatKinded + compactEvents, 100 * (compactBytes + 8)},
		{"one event", compactPage(5, 1, nil), formatConsecutive + compactEvents, 1 + 1 + 1 + compactBytes},
		{"one 64-bit event", func() []EventWitness {
			ev := compactPage(5, 3, func(int) int64 { return 1 })
			ev[1].IDHash |= 1 << 40
			return ev
		}(), formatConsecutive, 2 + 1 + 3*eventBytes},
		{"one event whose digest is not its fingerprint", func() []EventWitness {
			ev := compactPage(5, 3, func(int) int64 { return 1 })
			ev[2].Digest++
			return ev
		}(), formatConsecutive, 2 + 1 + 3*eventBytes},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := EncodeEvents(tc.events)
			t.Logf("%s: %d bytes", tc.name, len(b))
			assert.Equal(t, tc.format, b[0])
			assert.LessOrEqual(t, len(b), tc.max)
			got, err := DecodeEvents(b)
			require.NoError(t, err)
			assert.Equal(t, tc.events, got)
		})
	}
}
