// Package coord defines the typed coordinate in which a provider states
// complete-through watermarks.
//
// Invariants:
//   - A Watermark is a point in one ordering, named by its Kind. Two
//     watermarks compare only when they share a Kind; Compare returns
//     ErrIncomparable otherwise. Nothing in tidemark orders cursors or tokens:
//     they are not watermarks and have no Kind.
//   - The zero Watermark (KindNone) means "no complete-through evidence". It
//     is never less or greater than anything; callers must treat it as
//     "unproven", never as minus infinity.
//
// The package imports only the standard library.
package coord

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"
)

// Kind names the ordering a Watermark lives in. The zero value, KindNone,
// means "no coordinate".
type Kind uint8

const (
	// KindNone is the zero value: no complete-through coordinate.
	KindNone Kind = iota
	// KindInteger orders by a signed 64-bit integer (sequence numbers,
	// revisions, offsets).
	KindInteger
	// KindTimestamp orders by time, stored as Unix nanoseconds.
	KindTimestamp
	// KindString orders by byte-wise string comparison (object keys,
	// resource names, ISO-8601 strings). Only use it when the provider
	// documents that its strings sort in stream order.
	KindString
	// KindDecimal orders unsigned integers of any length written in decimal
	// (Kinesis and DynamoDB Streams sequence numbers), held in Str in
	// canonical form: digits only, no leading zero (zero is "0").
	KindDecimal
)

// LastKind is the greatest Kind value: Kinds run from KindNone to it.
const LastKind = KindDecimal

// Kind values are stored (DynamoDB attributes); append, never renumber.
var kindNames = [...]string{"none", "integer", "timestamp", "string", "decimal"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// ParseKind parses the names printed by Kind.String.
func ParseKind(s string) (Kind, error) {
	for i, n := range kindNames {
		if n == s {
			return Kind(i), nil
		}
	}
	return KindNone, fmt.Errorf("coord: unknown coordinate type %q (want integer, decimal, timestamp or string)", s)
}

// ErrIncomparable is returned by Compare when the two watermarks do not share
// one ordering (different kinds, or either is the zero Watermark).
var ErrIncomparable = errors.New("coord: watermarks are not comparable")

// Watermark is a complete-through coordinate. It is a value type; copy freely.
type Watermark struct {
	Kind Kind
	// Int holds KindInteger values and KindTimestamp values (Unix nanoseconds).
	Int int64
	// Str holds KindString values.
	Str string
}

// Integer returns an integer watermark.
func Integer(n int64) Watermark { return Watermark{Kind: KindInteger, Int: n} }

// Timestamp returns a timestamp watermark with nanosecond precision.
func Timestamp(t time.Time) Watermark { return Watermark{Kind: KindTimestamp, Int: t.UnixNano()} }

// String returns a string watermark.
func String(s string) Watermark { return Watermark{Kind: KindString, Str: s} }

// Decimal returns a decimal watermark from decimal digits (leading zeros
// allowed), or an error naming what is not a digit.
func Decimal(s string) (Watermark, error) {
	d, err := canonicalDecimal(s)
	if err != nil {
		return Watermark{}, err
	}
	return Watermark{Kind: KindDecimal, Str: d}, nil
}

// IsZero reports whether w carries no coordinate.
func (w Watermark) IsZero() bool { return w.Kind == KindNone }

// Compare returns -1, 0 or +1 as w is before, equal to or after o. It returns
// ErrIncomparable when the two do not share one ordering.
func (w Watermark) Compare(o Watermark) (int, error) {
	if w.Kind == KindNone || w.Kind != o.Kind {
		return 0, fmt.Errorf("%w: %s vs %s", ErrIncomparable, w, o)
	}
	switch w.Kind {
	case KindString:
		return strings.Compare(w.Str, o.Str), nil
	case KindDecimal:
		return compareDecimal(w.Str, o.Str), nil
	default:
		switch {
		case w.Int < o.Int:
			return -1, nil
		case w.Int > o.Int:
			return 1, nil
		}
		return 0, nil
	}
}

// Less reports whether w is strictly before o; incomparable pairs are not
// less.
func (w Watermark) Less(o Watermark) bool {
	c, err := w.Compare(o)
	return err == nil && c < 0
}

// String renders w for logs and metadata: "90", "2026-12-03T06:00:00Z",
// the string itself, or "none".
func (w Watermark) String() string {
	switch w.Kind {
	case KindNone:
		return "none"
	case KindInteger:
		return strconv.FormatInt(w.Int, 10)
	case KindTimestamp:
		return time.Unix(0, w.Int).UTC().Format(time.RFC3339Nano)
	case KindString, KindDecimal:
		return w.Str
	}
	return fmt.Sprintf("%s(%d,%q)", w.Kind, w.Int, w.Str)
}

// Parse reads a watermark of kind k from its String form. Integers and
// decimals are decimal digits (decimals of any length); timestamps are RFC 3339 or decimal Unix seconds (fractions
// allowed).
func Parse(k Kind, s string) (Watermark, error) {
	switch k {
	case KindInteger:
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return Watermark{}, fmt.Errorf("coord: integer watermark %q: %w", s, err)
		}
		return Integer(n), nil
	case KindTimestamp:
		s = strings.TrimSpace(s)
		if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
			return Timestamp(t), nil
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return Watermark{}, fmt.Errorf("coord: timestamp watermark %q is neither RFC 3339 nor Unix seconds", s)
		}
		return Watermark{Kind: KindTimestamp, Int: int64(f * 1e9)}, nil
	case KindString:
		return String(s), nil
	case KindDecimal:
		return Decimal(s)
	}
	return Watermark{}, fmt.Errorf("coord: cannot parse a watermark of kind %s", k)
}

// Minus returns w lowered by n (n >= 0): an integer or decimal watermark by
// n units, a timestamp by n nanoseconds. It returns false when w has no
// arithmetic (string, none), n is negative, or the result would fall below
// the kind's range (an integer underflow, a decimal below zero).
func (w Watermark) Minus(n int64) (Watermark, bool) {
	if n < 0 {
		return Watermark{}, false
	}
	switch w.Kind {
	case KindInteger, KindTimestamp:
		if w.Int < math.MinInt64+n {
			return Watermark{}, false
		}
		return Watermark{Kind: w.Kind, Int: w.Int - n}, true
	case KindDecimal:
		d, ok := new(big.Int).SetString(w.Str, 10)
		if !ok {
			return Watermark{}, false
		}
		d.Sub(d, big.NewInt(n))
		if d.Sign() < 0 {
			return Watermark{}, false
		}
		return Watermark{Kind: KindDecimal, Str: d.String()}, true
	}
	return Watermark{}, false
}
