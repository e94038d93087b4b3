package store

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/tidemark/tidemark/internal/witness"
)

// The compact event-witness encoding stored with every witness. It is
// interim: when witness.EncodeEvents lands, the stores switch to it (the
// version byte tells the two apart).
//
//	version  1 byte, eventsV1 = 0x01
//	count    uvarint
//	per event, in order:
//	  position  zig-zag varint of (position - previous position); the first
//	            event's previous position is 0. Deltas wrap in two's
//	            complement, so every int64 round-trips exactly.
//	  id hash   8 bytes, big endian
//	  digest    8 bytes, big endian
//
// A 100-event page with small position gaps takes 1 + 1 + 100*17 = 1,702
// bytes.
const eventsV1 = 0x01

// errEvents reports a stored event encoding that cannot be decoded.
var errEvents = errors.New("store: malformed event-witness encoding")

// EncodedEventsLen is len(EncodeEvents(events)), computed without
// allocating.
func EncodedEventsLen(events []witness.EventWitness) int {
	n := 1 + uvarintLen(uint64(len(events)))
	var prev int64
	for _, e := range events {
		n += uvarintLen(zigzag(e.Position-prev)) + 16
		prev = e.Position
	}
	return n
}

// EncodeEvents encodes an ordered event witness compactly (see the format
// above). The result is never empty.
func EncodeEvents(events []witness.EventWitness) []byte {
	b := make([]byte, 0, EncodedEventsLen(events))
	b = append(b, eventsV1)
	b = binary.AppendUvarint(b, uint64(len(events)))
	var prev int64
	for _, e := range events {
		b = binary.AppendUvarint(b, zigzag(e.Position-prev))
		b = binary.BigEndian.AppendUint64(b, e.IDHash)
		b = binary.BigEndian.AppendUint64(b, e.Digest)
		prev = e.Position
	}
	return b
}

// DecodeEvents decodes EncodeEvents's output. An encoding of zero events
// decodes to nil.
func DecodeEvents(b []byte) ([]witness.EventWitness, error) {
	if len(b) == 0 || b[0] != eventsV1 {
		return nil, fmt.Errorf("%w: unknown version", errEvents)
	}
	b = b[1:]
	count, n := binary.Uvarint(b)
	if n <= 0 || count > uint64(len(b))/17+1 {
		return nil, fmt.Errorf("%w: bad count", errEvents)
	}
	b = b[n:]
	if count == 0 {
		if len(b) != 0 {
			return nil, fmt.Errorf("%w: trailing bytes", errEvents)
		}
		return nil, nil
	}
	out := make([]witness.EventWitness, 0, count)
	var prev int64
	for i := uint64(0); i < count; i++ {
		d, n := binary.Uvarint(b)
		if n <= 0 || len(b) < n+16 {
			return nil, fmt.Errorf("%w: event %d truncated", errEvents, i)
		}
		prev += unzigzag(d)
		out = append(out, witness.EventWitness{
			Position: prev,
			IDHash:   binary.BigEndian.Uint64(b[n:]),
			Digest:   binary.BigEndian.Uint64(b[n+8:]),
		})
		b = b[n+16:]
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: trailing bytes", errEvents)
	}
	return out, nil
}

func zigzag(v int64) uint64   { return uint64(v<<1) ^ uint64(v>>63) }
func unzigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

func uvarintLen(u uint64) int {
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}
