package provider

// Event is one event as a provider returned it.
type Event struct {
	// ID is the stable event identity. Empty is malformed.
	ID string
	// Position is the event's source position within its partition, in the
	// contract's position kind (Contract.PositionKind).
	Position Position
	// NoPosition marks an event whose response carried no position
	// (malformed).
	NoPosition bool
	// Payload is the event's bytes, emitted downstream.
	Payload []byte
	// Semantic, when not nil, is the projection of the payload whose digest
	// is witnessed instead of Payload (for sources whose payload carries
	// fields that change on every read).
	Semantic []byte
}

// Response is one successful fetch of (partition, input cursor).
type Response struct {
	Events []Event
	// Successor is the exact opaque cursor for the next fetch.
	Successor []byte
	// HasMore is the provider's own "more pages" flag, when it has one.
	HasMore bool
	// HasMoreKnown: the provider states HasMore (the http provider: has_more
	// is mapped). Without it a false HasMore says nothing.
	HasMoreKnown bool
	// Marker is the provider's snapshot or coverage marker, opaque.
	Marker []byte
	// CompleteThrough is the watermark the provider certifies for this
	// response (zero when none).
	CompleteThrough Watermark
	// Sealed: the provider says the partition has ended.
	Sealed bool
}
