package provider

import (
	"time"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/witness"
)

// The values a provider returns. They are the reconciliation core's own
// types under public names (aliases: no conversion, and the core stays as
// it is), so a provider in another module builds them with this package
// alone. docs/providers.md walks through them; docs/design.md#provider-contract
// says what each field promises and what the input does with it.

// Response is one successful fetch of (partition, cursor): its events in
// source order, the exact successor cursor, and the completeness evidence
// the source gave (HasMore/HasMoreKnown, Marker, CompleteThrough, Sealed).
type Response = witness.Response

// Event is one event of a Response: a stable ID (never empty), its
// Position in the contract's position kind, the Payload emitted
// downstream, and optionally a Semantic projection witnessed instead of
// the payload. NoPosition marks an event the source gave no position
// (malformed).
type Event = witness.Event

// Contract is what the source guarantees; classification trusts nothing
// else.
type Contract = witness.Contract

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

// EmptyPage is what an empty response proves (Contract.EmptyPage).
type EmptyPage = witness.EmptyPage

// What an empty page proves.
const (
	EmptyNoEvidence            = witness.EmptyNoEvidence
	EmptyEndOfData             = witness.EmptyEndOfData
	EmptyFinalThroughWatermark = witness.EmptyFinalThroughWatermark
	EmptyFollowsSuccessor      = witness.EmptyFollowsSuccessor
)

// MissingSuccessor is what a response without a successor means
// (Contract.MissingSuccessor).
type MissingSuccessor = witness.MissingSuccessor

// What a response without a successor means.
const (
	MissingSuccessorPoll          = witness.MissingSuccessorPoll
	MissingSuccessorEndsTraversal = witness.MissingSuccessorEndsTraversal
)

// Recovery is what the input may do when a partition cannot advance
// (Contract.Recovery).
type Recovery = witness.Recovery

// Recoveries.
const (
	RecoveryPark                = witness.RecoveryPark
	RecoveryRestartFromBoundary = witness.RecoveryRestartFromBoundary
	RecoveryFreshSnapshot       = witness.RecoveryFreshSnapshot
)

// Finality is where the finality of a response's CompleteThrough comes
// from (Contract.Finality).
type Finality = witness.Finality

// Finalities.
const (
	FinalityNone             = witness.FinalityNone
	FinalitySource           = witness.FinalitySource
	FinalityAppendOnlyWriter = witness.FinalityAppendOnlyWriter
	FinalityLag              = witness.FinalityLag
)

// Pagination is how pages follow one another (Contract.Pagination).
type Pagination = witness.Pagination

// Paginations.
const (
	PaginationToken  = witness.PaginationToken
	PaginationKeyset = witness.PaginationKeyset
	PaginationOffset = witness.PaginationOffset
)
