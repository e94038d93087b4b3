package provider

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Positions and watermarks: the SDK's own coordinate types, so that a
// provider in another module builds them with this package alone and the
// core's coordinates (internal/coord) can change without changing the SDK.
// The input converts them at its boundary (internal/sdkcoord), value for
// value: a Position or Watermark means the same in both. The values a
// provider returns (response.go) and the contract it declares (contract.go)
// use them; docs/providers.md walks through them.

// Kind is the ordering a Position or Watermark lives in.
type Kind uint8

// Kinds of positions and watermarks. Their numbering is stored by the
// core; append, never renumber.
const (
	// KindNone: no value (the zero Watermark, the zero Position).
	KindNone Kind = iota
	// KindInteger: a signed 64-bit integer (sequence numbers, offsets).
	KindInteger
	// KindTimestamp: a time, as Unix nanoseconds.
	KindTimestamp
	// KindString: byte-wise string order. Only when the source documents
	// that its strings sort in stream order.
	KindString
	// KindDecimal: an unsigned integer of any length written in decimal
	// (Kinesis sequence numbers), held in canonical form: digits only, no
	// leading zero (zero is "0").
	KindDecimal
)

var kindNames = [...]string{"none", "integer", "timestamp", "string", "decimal"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// ParseKind reads a Kind from its String form.
func ParseKind(s string) (Kind, error) {
	for i, n := range kindNames {
		if n == s {
			return Kind(i), nil
		}
	}
	return KindNone, fmt.Errorf("provider: unknown coordinate type %q (want integer, decimal, timestamp or string)", s)
}

// HasSuccessorArithmetic reports whether positions of kind k have a next
// and a previous position (integer and decimal).
func HasSuccessorArithmetic(k Kind) bool { return k == KindInteger || k == KindDecimal }

// Watermark is a complete-through value (the zero Watermark: none).
type Watermark struct {
	Kind Kind
	// Int holds integer values and timestamps (Unix nanoseconds).
	Int int64
	// Str holds string values and canonical decimals.
	Str string
}

// Position is an event's source position in its partition (the zero
// Position: none).
type Position struct {
	Kind Kind
	// Int holds integer values and timestamps (Unix nanoseconds).
	Int int64
	// Str holds string values and canonical decimals.
	Str string
}

// IsZero reports whether w is none.
func (w Watermark) IsZero() bool { return w.Kind == KindNone }

// IsZero reports whether p is none.
func (p Position) IsZero() bool { return p.Kind == KindNone }

// String renders w: "90", "2026-12-03T06:00:00Z", the string itself, or
// "none".
func (w Watermark) String() string { return text(w.Kind, w.Int, w.Str) }

// String renders p as Watermark.String does.
func (p Position) String() string { return text(p.Kind, p.Int, p.Str) }

func text(k Kind, n int64, s string) string {
	switch k {
	case KindNone:
		return "none"
	case KindInteger:
		return strconv.FormatInt(n, 10)
	case KindTimestamp:
		return time.Unix(0, n).UTC().Format(time.RFC3339Nano)
	case KindString, KindDecimal:
		return s
	}
	return fmt.Sprintf("%s(%d,%q)", k, n, s)
}

// IntPosition returns an integer position.
func IntPosition(n int64) Position { return Position{Kind: KindInteger, Int: n} }

// TimestampPosition returns a timestamp position (nanosecond precision).
func TimestampPosition(t time.Time) Position {
	return Position{Kind: KindTimestamp, Int: t.UnixNano()}
}

// StringPosition returns a string position.
func StringPosition(s string) Position { return Position{Kind: KindString, Str: s} }

// DecimalPosition returns a decimal position (an error when s is not an
// unsigned decimal integer; leading zeros and surrounding spaces are
// allowed).
func DecimalPosition(s string) (Position, error) {
	d, err := canonicalDecimal(s)
	if err != nil {
		return Position{}, err
	}
	return Position{Kind: KindDecimal, Str: d}, nil
}

// ParsePosition reads a position of kind k from its text (as
// ParseWatermark).
func ParsePosition(k Kind, s string) (Position, error) {
	w, err := ParseWatermark(k, s)
	return Position(w), err
}

// IntegerWatermark returns an integer watermark.
func IntegerWatermark(n int64) Watermark { return Watermark{Kind: KindInteger, Int: n} }

// TimestampWatermark returns a timestamp watermark.
func TimestampWatermark(t time.Time) Watermark {
	return Watermark{Kind: KindTimestamp, Int: t.UnixNano()}
}

// StringWatermark returns a string watermark.
func StringWatermark(s string) Watermark { return Watermark{Kind: KindString, Str: s} }

// DecimalWatermark returns a decimal watermark (an error when s is not an
// unsigned decimal integer).
func DecimalWatermark(s string) (Watermark, error) {
	p, err := DecimalPosition(s)
	return Watermark(p), err
}

// ParseWatermark reads a watermark of kind k from its text: integers and
// decimals are decimal digits (decimals of any length); timestamps are RFC
// 3339 or decimal Unix seconds (fractions allowed); a string is itself.
func ParseWatermark(k Kind, s string) (Watermark, error) {
	switch k {
	case KindInteger:
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return Watermark{}, fmt.Errorf("provider: integer watermark %q: %w", s, err)
		}
		return IntegerWatermark(n), nil
	case KindTimestamp:
		s = strings.TrimSpace(s)
		if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
			return TimestampWatermark(t), nil
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return Watermark{}, fmt.Errorf("provider: timestamp watermark %q is neither RFC 3339 nor Unix seconds", s)
		}
		return Watermark{Kind: KindTimestamp, Int: int64(f * 1e9)}, nil
	case KindString:
		return StringWatermark(s), nil
	case KindDecimal:
		return DecimalWatermark(s)
	}
	return Watermark{}, fmt.Errorf("provider: cannot parse a watermark of kind %s", k)
}

// canonicalDecimal checks that s is an unsigned decimal integer
// (surrounding spaces allowed) and returns it without leading zeros.
func canonicalDecimal(s string) (string, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return "", fmt.Errorf("provider: decimal %q has no digits", s)
	}
	for i := 0; i < len(t); i++ {
		if t[i] < '0' || t[i] > '9' {
			return "", fmt.Errorf("provider: decimal %q: %q is not a digit (want an unsigned integer of any length)", s, t[i])
		}
	}
	if t = strings.TrimLeft(t, "0"); t == "" {
		return "0", nil
	}
	return t, nil
}
