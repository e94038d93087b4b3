package provider

import (
	"time"

	"github.com/tidemark/tidemark/internal/coord"
)

// Positions and watermarks: the typed coordinates of internal/coord under
// public names (aliases: no conversion), so a provider in another module
// builds them with this package alone. The values a provider returns
// (response.go) and the contract it declares (contract.go) are defined in
// this package; docs/providers.md walks through them.

// Position is an event's source position in its partition.
type Position = coord.Position

// Watermark is a complete-through value (the zero Watermark: none).
type Watermark = coord.Watermark

// Kind is the ordering a Position or Watermark lives in.
type Kind = coord.Kind

// Kinds of positions and watermarks.
const (
	// KindNone: no value (the zero Watermark).
	KindNone = coord.KindNone
	// KindInteger: a signed 64-bit integer (sequence numbers, offsets).
	KindInteger = coord.KindInteger
	// KindTimestamp: a time, as Unix nanoseconds.
	KindTimestamp = coord.KindTimestamp
	// KindString: byte-wise string order.
	KindString = coord.KindString
	// KindDecimal: an unsigned integer of any length written in decimal.
	KindDecimal = coord.KindDecimal
)

// IntPosition returns an integer position.
func IntPosition(n int64) Position { return coord.IntPosition(n) }

// TimestampPosition returns a timestamp position.
func TimestampPosition(t time.Time) Position { return coord.TimestampPosition(t) }

// StringPosition returns a string position.
func StringPosition(s string) Position { return coord.StringPosition(s) }

// DecimalPosition returns a decimal position (an error when s is not an
// unsigned decimal integer).
func DecimalPosition(s string) (Position, error) { return coord.DecimalPosition(s) }

// ParsePosition reads a position of kind k from its text.
func ParsePosition(k Kind, s string) (Position, error) { return coord.ParsePosition(k, s) }

// IntegerWatermark returns an integer watermark.
func IntegerWatermark(n int64) Watermark { return coord.Integer(n) }

// TimestampWatermark returns a timestamp watermark.
func TimestampWatermark(t time.Time) Watermark { return coord.Timestamp(t) }

// StringWatermark returns a string watermark.
func StringWatermark(s string) Watermark { return coord.String(s) }

// DecimalWatermark returns a decimal watermark.
func DecimalWatermark(s string) (Watermark, error) { return coord.Decimal(s) }

// ParseWatermark reads a watermark of kind k from its text.
func ParseWatermark(k Kind, s string) (Watermark, error) { return coord.Parse(k, s) }
