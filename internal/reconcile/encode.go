package reconcile

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/tidemark/tidemark/internal/coord"
)

// Stored forms of an event witness. Each starts with one format byte and the
// event count (uvarint). In formats 1 to 3 every event then carries its
// IDHash and Digest as 8 bytes each, big-endian. Formats 4 to 6 are the
// same three position layouts for a page whose events all carry one Digest
// (a constant semantic projection: payload changes do not matter to the
// source's contract): that digest is written once, 8 bytes big-endian,
// right after the count, and every event carries its IDHash alone. Readers
// read every format; EncodeEvents picks 4 to 6 only when they hold the same
// values, so the choice never changes what is compared. Formats 7 to 9 are
// the three layouts again for a page of compact witnesses
// (EventOfCompact, the opt-in compact_witness): every event's IDHash
// equals its Digest and is below 2^32, and it is written once, 4 bytes
// big-endian. EncodeEvents picks them only for such pages (so they too
// round-trip exactly); a 64-bit witness is never cut to them.
const (
	// formatDelta: integer positions, each as a zigzag varint, the first
	// absolute and every other the (wrapping) difference from the previous
	// one.
	formatDelta byte = 1
	// formatConsecutive: integer positions, the first as a zigzag varint;
	// event i is at first+i. Chosen when the positions are consecutive.
	formatConsecutive byte = 2
	// formatKinded: positions of any kind. Each event's position is its
	// kind byte, its Int as a zigzag varint difference from the previous
	// event's Int, and its Str prefix-compressed against the previous
	// event's Str (uvarint length of the shared prefix, uvarint length of
	// the rest, the rest). Object keys and long decimal sequence numbers of
	// one page share long prefixes, so they cost a few bytes each.
	formatKinded byte = 3
	// sharedDigest is added to a format (formatDelta, formatConsecutive,
	// formatKinded) when its events share one Digest, written once.
	sharedDigest byte = 3
	// compactEvents is added to a format (formats 7 to 9) when every event
	// is a compact witness (EventOfCompact: IDHash equal to Digest, below
	// 2^32): each then carries that fingerprint alone, 4 bytes big-endian.
	compactEvents byte = 6
)

// eventBytes is the fixed part of an encoded event: IDHash and Digest;
// idBytes the part of one whose Digest is shared.
const (
	eventBytes   = 16
	idBytes      = 8
	compactBytes = 4
)

// EncodeEvents returns the compact stored form of an event witness, never
// empty. Consecutive integer positions cost nothing per event (100 events:
// 1,604 bytes when the first position fits 2 varint bytes); other integer
// positions cost their varint delta (1 byte for a delta below 64: ~1.7 KB
// for 100 events); positions of other kinds cost a kind byte, a varint and
// their prefix-compressed string. A page whose events share one Digest (a
// constant semantic projection) writes it once: 8 bytes an event instead
// of 16 (100 consecutive events: 813 bytes). The form round-trips every
// []EventWitness exactly.
func EncodeEvents(events []EventWitness) []byte {
	integers, consecutive := true, len(events) > 0
	// shared: two events or more, all with one Digest (a constant semantic
	// projection); it is then written once.
	shared := len(events) > 1
	for i, e := range events {
		integers = integers && e.Position.Kind == coord.KindInteger && e.Position.Str == ""
		if i > 0 {
			p := events[i-1].Position.Int
			consecutive = consecutive && p != math.MaxInt64 && e.Position.Int == p+1
			shared = shared && e.Digest == events[0].Digest
		}
	}
	// compact: every event a compact witness (EventOfCompact); its
	// fingerprint is written alone, 4 bytes.
	compact := len(events) > 0
	for _, e := range events {
		compact = compact && e.IDHash == e.Digest && e.IDHash <= math.MaxUint32
	}
	var add byte
	appendHashes := appendHashes
	switch {
	case compact:
		add, appendHashes, shared = compactEvents, appendFingerprint, false
	case shared:
		add, appendHashes = sharedDigest, appendIDHash
	}
	head := func(format byte) []byte {
		out := make([]byte, 0, 2+2*binary.MaxVarintLen64+8+len(events)*(eventBytes+1))
		out = append(out, format+add)
		out = binary.AppendUvarint(out, uint64(len(events)))
		if shared {
			out = binary.BigEndian.AppendUint64(out, events[0].Digest)
		}
		return out
	}
	var out []byte
	switch {
	case integers && consecutive:
		out = head(formatConsecutive)
		out = binary.AppendVarint(out, events[0].Position.Int)
		for _, e := range events {
			out = appendHashes(out, e)
		}
	case integers:
		out = head(formatDelta)
		var prev int64
		for _, e := range events {
			out = binary.AppendVarint(out, int64(uint64(e.Position.Int)-uint64(prev)))
			prev = e.Position.Int
			out = appendHashes(out, e)
		}
	default:
		out = head(formatKinded)
		var prev coord.Position
		for _, e := range events {
			p := e.Position
			out = append(out, byte(p.Kind))
			out = binary.AppendVarint(out, int64(uint64(p.Int)-uint64(prev.Int)))
			shared := sharedPrefix(prev.Str, p.Str)
			out = binary.AppendUvarint(out, uint64(shared))
			out = binary.AppendUvarint(out, uint64(len(p.Str)-shared))
			out = append(out, p.Str[shared:]...)
			prev = p
			out = appendHashes(out, e)
		}
	}
	return out
}

func appendHashes(out []byte, e EventWitness) []byte {
	out = binary.BigEndian.AppendUint64(out, e.IDHash)
	return binary.BigEndian.AppendUint64(out, e.Digest)
}

func appendFingerprint(out []byte, e EventWitness) []byte {
	return binary.BigEndian.AppendUint32(out, uint32(e.IDHash))
}

func appendIDHash(out []byte, e EventWitness) []byte {
	return binary.BigEndian.AppendUint64(out, e.IDHash)
}

func sharedPrefix(a, b string) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// DecodeEvents reads what EncodeEvents wrote. Anything else (an empty blob,
// an unknown format, a truncated or overlong blob, a consecutive run that
// overflows int64, a prefix longer than the previous string) returns an
// error wrapping ErrInvalid. Decoding an empty event list returns a nil
// slice.
func DecodeEvents(b []byte) ([]EventWitness, error) {
	bad := func(why string) error { return fmt.Errorf("%w: event witness blob: %s", ErrInvalid, why) }
	if len(b) == 0 {
		return nil, bad("empty")
	}
	format, rest := b[0], b[1:]
	compact := format > compactEvents
	if compact {
		format -= compactEvents
	}
	shared := !compact && format > sharedDigest
	if shared {
		format -= sharedDigest
	}
	if format != formatDelta && format != formatConsecutive && format != formatKinded {
		return nil, bad(fmt.Sprintf("unknown format %d", b[0]))
	}
	n, k := binary.Uvarint(rest)
	if k <= 0 {
		return nil, bad("bad event count")
	}
	rest = rest[k:]
	per := eventBytes
	if compact {
		per = compactBytes
	}
	var digest uint64
	if shared {
		if n < 2 || len(rest) < 8 {
			return nil, bad("a shared digest needs two events and 8 bytes")
		}
		digest, rest, per = binary.BigEndian.Uint64(rest[:8]), rest[8:], idBytes
	}
	if n > uint64(len(rest)/per) {
		return nil, bad(fmt.Sprintf("%d events do not fit %d bytes", n, len(rest)))
	}
	if n == 0 {
		if len(rest) != 0 || format != formatDelta {
			return nil, bad("trailing bytes")
		}
		return nil, nil
	}
	events := make([]EventWitness, n)
	var pos coord.Position
	if format != formatKinded {
		pos.Kind = coord.KindInteger
	}
	if format == formatConsecutive {
		first, k := binary.Varint(rest)
		if k <= 0 {
			return nil, bad("bad first position")
		}
		rest = rest[k:]
		if first > math.MaxInt64-int64(n-1) {
			return nil, bad("consecutive positions overflow")
		}
		pos.Int = first
	}
	for i := range events {
		switch {
		case format == formatDelta:
			d, k := binary.Varint(rest)
			if k <= 0 {
				return nil, bad(fmt.Sprintf("bad position of event %d", i))
			}
			rest = rest[k:]
			pos.Int = int64(uint64(pos.Int) + uint64(d))
		case format == formatConsecutive:
			if i > 0 {
				pos.Int++
			}
		default:
			var err error
			if pos, rest, err = decodeKinded(pos, rest); err != nil {
				return nil, bad(fmt.Sprintf("event %d: %v", i, err))
			}
		}
		if len(rest) < per {
			return nil, bad(fmt.Sprintf("event %d truncated", i))
		}
		switch {
		case compact:
			fp := uint64(binary.BigEndian.Uint32(rest[:4]))
			events[i] = EventWitness{IDHash: fp, Position: pos, Digest: fp}
		case shared:
			events[i] = EventWitness{IDHash: binary.BigEndian.Uint64(rest[:8]), Position: pos, Digest: digest}
		default:
			events[i] = EventWitness{IDHash: binary.BigEndian.Uint64(rest[:8]), Position: pos, Digest: binary.BigEndian.Uint64(rest[8:16])}
		}
		rest = rest[per:]
	}
	if len(rest) != 0 {
		return nil, bad(fmt.Sprintf("%d trailing bytes", len(rest)))
	}
	return events, nil
}

// decodeKinded reads one formatKinded position following prev.
func decodeKinded(prev coord.Position, b []byte) (coord.Position, []byte, error) {
	if len(b) == 0 {
		return prev, b, fmt.Errorf("no position kind")
	}
	var p coord.Position
	p.Kind, b = coord.Kind(b[0]), b[1:]
	d, k := binary.Varint(b)
	if k <= 0 {
		return prev, b, fmt.Errorf("bad position integer")
	}
	b = b[k:]
	p.Int = int64(uint64(prev.Int) + uint64(d))
	shared, k := binary.Uvarint(b)
	if k <= 0 || shared > uint64(len(prev.Str)) {
		return prev, b, fmt.Errorf("bad shared prefix")
	}
	b = b[k:]
	suffix, k := binary.Uvarint(b)
	if k <= 0 || suffix > uint64(len(b)-k) {
		return prev, b, fmt.Errorf("bad position string")
	}
	b = b[k:]
	p.Str = prev.Str[:shared] + string(b[:suffix])
	return p, b[suffix:], nil
}
