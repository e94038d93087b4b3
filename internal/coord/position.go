package coord

import (
	"cmp"
	"math"
	"strings"
	"time"
)

// Position is an event's position within its partition, in the partition's
// declared position kind: an int64 (KindInteger), an unsigned decimal of
// any length (KindDecimal), a timestamp (KindTimestamp, Unix nanoseconds) or
// a byte-ordered string (KindString). It has the shape of a Watermark, so a
// watermark and a position of one kind compare (AsWatermark).
//
// Invariants:
//   - All positions of one partition share one kind; the witness builder
//     refuses a response that mixes kinds, so ordering is never asked across
//     kinds. Compare still orders every pair (by kind first) so that sorting
//     is total; that order across kinds means nothing.
//   - Decimal positions are held canonical (no leading zero), so == and map
//     keys agree with Compare.
//   - The zero Position (KindNone) is "no position".
type Position Watermark

// IntPosition returns an integer position.
func IntPosition(n int64) Position { return Position{Kind: KindInteger, Int: n} }

// TimestampPosition returns a timestamp position (nanosecond precision).
func TimestampPosition(t time.Time) Position {
	return Position{Kind: KindTimestamp, Int: t.UnixNano()}
}

// StringPosition returns a byte-ordered string position.
func StringPosition(s string) Position { return Position{Kind: KindString, Str: s} }

// DecimalPosition returns a decimal position from decimal digits (leading
// zeros allowed), or an error naming what is not a digit.
func DecimalPosition(s string) (Position, error) {
	w, err := Decimal(s)
	return Position(w), err
}

// ParsePosition reads a position of kind k from its String form (as Parse
// reads a watermark).
func ParsePosition(k Kind, s string) (Position, error) {
	w, err := Parse(k, s)
	return Position(w), err
}

// IsZero reports whether p is "no position".
func (p Position) IsZero() bool { return p.Kind == KindNone }

// AsWatermark returns p as a watermark of its kind, for comparing a position
// with a complete-through watermark.
func (p Position) AsWatermark() Watermark { return Watermark(p) }

// Compare returns -1, 0 or +1 as p is before, equal to or after o. Positions
// of different kinds are ordered by kind (a total order without meaning;
// see the type's invariants).
func (p Position) Compare(o Position) int {
	if p.Kind != o.Kind {
		return cmp.Compare(p.Kind, o.Kind)
	}
	switch p.Kind {
	case KindString:
		return strings.Compare(p.Str, o.Str)
	case KindDecimal:
		return compareDecimal(p.Str, o.Str)
	}
	return cmp.Compare(p.Int, o.Int)
}

// Less reports whether p is strictly before o.
func (p Position) Less(o Position) bool { return p.Compare(o) < 0 }

// Next returns the position right after p when the kind has one (integer
// below MaxInt64, decimal); ok is false otherwise (timestamp, string).
func (p Position) Next() (next Position, ok bool) {
	switch p.Kind {
	case KindInteger:
		if p.Int == math.MaxInt64 {
			return Position{}, false
		}
		return IntPosition(p.Int + 1), true
	case KindDecimal:
		return Position{Kind: KindDecimal, Str: incDecimal(p.Str)}, true
	}
	return Position{}, false
}

// Prev returns the position right before p when the kind has one (integer
// above MinInt64, decimal above 0); ok is false otherwise.
func (p Position) Prev() (prev Position, ok bool) {
	switch p.Kind {
	case KindInteger:
		if p.Int == math.MinInt64 {
			return Position{}, false
		}
		return IntPosition(p.Int - 1), true
	case KindDecimal:
		if p.Str == "0" {
			return Position{}, false
		}
		return Position{Kind: KindDecimal, Str: decDecimal(p.Str)}, true
	}
	return Position{}, false
}

// String renders p as Watermark.String does: "90", a decimal's digits, an
// RFC 3339 timestamp, the string itself, or "none".
func (p Position) String() string { return Watermark(p).String() }

// HasSuccessorArithmetic reports whether positions of kind k have Next and
// Prev (so dense positions can be declared in it).
func HasSuccessorArithmetic(k Kind) bool { return k == KindInteger || k == KindDecimal }

// MaxPosition returns the later of a and b.
func MaxPosition(a, b Position) Position {
	if a.Compare(b) >= 0 {
		return a
	}
	return b
}
