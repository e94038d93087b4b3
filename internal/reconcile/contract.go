package reconcile

import (
	"fmt"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/sdkcoord"
	"github.com/tidemark/tidemark/provider"
)

// The provider contract is defined in the public SDK (package provider);
// the core names it here so that its code reads in its own vocabulary.
// These are aliases: nothing is converted.
type (
	// Contract is what the source guarantees; classification trusts
	// nothing else.
	Contract = provider.Contract
	// EmptyPage is what an empty response proves.
	EmptyPage = provider.EmptyPage
	// MissingSuccessor is what a response without a successor means.
	MissingSuccessor = provider.MissingSuccessor
	// Recovery is what the input may do when a partition cannot advance.
	Recovery = provider.Recovery
	// Finality is where a CompleteThrough's finality comes from.
	Finality = provider.Finality
	// Pagination is how pages follow one another.
	Pagination = provider.Pagination
	// Basis is what a durable watermark's finality rests on.
	Basis = provider.Basis
)

// The values a provider returns are the SDK's, in the SDK's coordinates
// (provider.Position, provider.Watermark); the core reads them in its own
// (internal/coord), converted once where a response enters it
// (FromProvider).

// Event is one event of a Response.
type Event struct {
	// ID is the stable event identity. Empty is malformed.
	ID string
	// Position is the event's source position within its partition.
	Position coord.Position
	// NoPosition marks an event whose response carried no position
	// (malformed).
	NoPosition bool
	// Payload is the event's bytes, emitted downstream.
	Payload []byte
	// Semantic, when not nil, is the projection of the payload whose
	// digest is witnessed instead of Payload.
	Semantic []byte
}

// Response is one successful fetch of (partition, cursor), as
// provider.Response says it.
type Response struct {
	Events []Event
	// Successor is the exact opaque cursor for the next fetch.
	Successor []byte
	// HasMore is the provider's own "more pages" flag; HasMoreKnown says
	// the provider states it.
	HasMore      bool
	HasMoreKnown bool
	// Marker is the provider's snapshot or coverage marker, opaque.
	Marker []byte
	// CompleteThrough is the watermark the provider certifies for this
	// response (zero when none).
	CompleteThrough coord.Watermark
	// Sealed: the provider says the partition has ended.
	Sealed bool
}

// FromProvider is r in the core's coordinates (its byte slices are
// shared, not copied).
func FromProvider(r provider.Response) Response {
	out := Response{
		Successor: r.Successor, HasMore: r.HasMore, HasMoreKnown: r.HasMoreKnown,
		Marker: r.Marker, CompleteThrough: sdkcoord.Watermark(r.CompleteThrough), Sealed: r.Sealed,
	}
	if r.Events != nil {
		out.Events = make([]Event, len(r.Events))
		for i, e := range r.Events {
			out.Events[i] = Event{ID: e.ID, Position: sdkcoord.Position(e.Position), NoPosition: e.NoPosition, Payload: e.Payload, Semantic: e.Semantic}
		}
	}
	return out
}

// PositionKind is the kind of c's positions (Contract.EffectivePositionKind)
// in the core's coordinates.
func PositionKind(c Contract) coord.Kind { return sdkcoord.Kind(c.EffectivePositionKind()) }

// FirstPosition is c's declared origin (Contract.FirstPosition; zero: none)
// in the core's coordinates.
func FirstPosition(c Contract) coord.Position { return sdkcoord.Position(c.FirstPosition) }

// Final is what a response's CompleteThrough may become under a contract's
// finality.
type Final struct {
	// Watermark is what a promotion may write as the partition's durable
	// watermark (zero: nothing).
	Watermark coord.Watermark
	// Basis is the finality it rests on (Contract.Basis); zero when
	// Watermark is zero.
	Basis Basis
	// Reason says why the complete-through is not final ("" when it is,
	// or when there is none).
	Reason string
}

// FinalOf turns a response's CompleteThrough ct into the watermark a
// promotion may write: ct itself under FinalitySource and
// FinalityAppendOnlyWriter, ct minus the lag under FinalityLag (nothing when
// the watermark's kind has no arithmetic or the lag falls below its range),
// and nothing under FinalityNone: the complete-through stays in the witness
// only.
func FinalOf(c Contract, ct coord.Watermark) Final {
	if ct.IsZero() {
		return Final{}
	}
	switch f := c.EffectiveFinality(); f {
	case provider.FinalitySource, provider.FinalityAppendOnlyWriter:
		return Final{Watermark: ct, Basis: c.Basis(sdkcoord.SDKKind(ct.Kind))}
	case provider.FinalityLag:
		if w, ok := ct.Minus(c.FinalityLag); ok {
			return Final{Watermark: w, Basis: c.Basis(sdkcoord.SDKKind(ct.Kind))}
		}
		return Final{Reason: fmt.Sprintf("complete-through %s less the finality %s is not a %s watermark: nothing is final", ct, c.Basis(sdkcoord.SDKKind(ct.Kind)), ct.Kind)}
	default:
		return Final{Reason: fmt.Sprintf("complete-through %s is recorded but not final: the contract declares no finality (finality %s)", ct, f)}
	}
}
