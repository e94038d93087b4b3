package witness

import (
	"fmt"

	"github.com/tidemark/tidemark/internal/coord"
)

// Disposition is the lifecycle state of a response witness. The zero value is
// invalid on purpose.
type Disposition uint8

const (
	// Pending: recorded, its successor not (yet) promoted.
	Pending Disposition = 1 + iota
	// Promoted: its successor was written to the checkpoint by a winning
	// compare-and-swap.
	Promoted
	// Abandoned: another response for the same (cursor, generation) won, or
	// the partition was restarted from another boundary. Its successor must
	// never be promoted.
	Abandoned
)

func (d Disposition) String() string {
	switch d {
	case Pending:
		return "pending"
	case Promoted:
		return "promoted"
	case Abandoned:
		return "abandoned"
	}
	return fmt.Sprintf("disposition(%d)", uint8(d))
}

// EventWitness is the compact, durable identity of one event of a response:
// a 64-bit hash of its stable id, its source position, and a 64-bit payload
// digest (the first 8 bytes of a SHA-256, or of a semantic projection).
type EventWitness struct {
	IDHash   uint64
	Position coord.Position
	Digest   uint64
}

// Witness is the durable record of one successful fetch (see "response
// witness" in docs/design.md#vocabulary).
type Witness struct {
	Scope     string
	Partition string
	// Generation and InputCursor are the checkpoint state the request was
	// made from.
	Generation  uint64
	InputCursor []byte
	// AttemptID is a locally generated response-attempt identifier, supplied
	// by the caller so the core stays deterministic.
	AttemptID string
	// Events is the ordered event witness.
	Events []EventWitness
	// Successor is the exact opaque successor cursor the response returned.
	// Empty means the provider returned none.
	Successor []byte
	// Marker is the provider's snapshot or coverage marker, if any, kept
	// opaque.
	Marker []byte
	// CompleteThrough is the complete-through watermark the response
	// certifies (zero when it certifies none).
	CompleteThrough coord.Watermark
	// Sealed is set when the provider says the partition ends with this
	// response.
	Sealed bool
	// Disposition is pending, promoted or abandoned.
	Disposition Disposition
	// AckedThrough counts the leading events of Events that have a durable
	// terminal outcome downstream: the receipts of this response, written
	// once per acknowledged batch.
	AckedThrough int
}

// Event is one event as a provider returned it.
type Event struct {
	// ID is the stable event identity. Empty is malformed.
	ID string
	// Position is the event's source position within its partition, in the
	// contract's position kind (Contract.PositionKind).
	Position coord.Position
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
	CompleteThrough coord.Watermark
	// Sealed: the provider says the partition has ended.
	Sealed bool
}

// EmptyPage is what a provider's contract says an empty response means.
type EmptyPage uint8

const (
	// EmptyNoEvidence: an empty page proves nothing (polling APIs such as
	// Okta's System Log, Kinesis). Its successor is never promoted on
	// emptiness alone; only a snapshot marker bound to the response (under
	// SnapshotMarker) can advance it. A CompleteThrough on an empty page
	// counts only under EmptyFinalThroughWatermark.
	EmptyNoEvidence EmptyPage = 1 + iota
	// EmptyEndOfData: an empty page means the partition is complete up to
	// the successor (Slack, S3 listing without token).
	EmptyEndOfData
	// EmptyFinalThroughWatermark: an empty page is final through the
	// response's CompleteThrough watermark (CouchDB last_seq); without one
	// it proves nothing. Requires FinalitySource.
	EmptyFinalThroughWatermark
	// EmptyFollowsSuccessor: an empty page is neither the end of the data
	// nor evidence of completeness, but the source documents that its
	// successor continues the traversal right after the range the page read
	// (Kinesis GetRecords: "It might take multiple calls to get to a portion
	// of the shard that contains records"). Its successor is promoted so the
	// traversal moves on, with no watermark (a CompleteThrough on it is not
	// written), no change of the applied boundary, and it never says the
	// partition is caught up. A successor equal to the page's own cursor is
	// no progress and proves nothing. A sealed empty page without successor
	// ends the partition: the source documents that a closed partition
	// answers so (Kinesis: "If the shard has been closed ... GetRecords
	// returns null in NextShardIterator").
	EmptyFollowsSuccessor
)

func (e EmptyPage) String() string {
	switch e {
	case EmptyNoEvidence:
		return "no_evidence"
	case EmptyEndOfData:
		return "end_of_data"
	case EmptyFinalThroughWatermark:
		return "final_through_watermark"
	case EmptyFollowsSuccessor:
		return "follow_successor"
	}
	return fmt.Sprintf("empty_page(%d)", uint8(e))
}

// MissingSuccessor is what a response without a successor cursor means for
// a source. The zero value is MissingSuccessorPoll.
type MissingSuccessor uint8

const (
	// MissingSuccessorPoll: the source has nothing after this page yet; fetch
	// the same cursor again later (a change feed's head). The page is held:
	// its receipts are recorded so its acknowledged events are never emitted
	// again, and its cursor is polled every poll interval.
	MissingSuccessorPoll MissingSuccessor = iota
	// MissingSuccessorEndsTraversal: a page without a successor is the last
	// page of a finite traversal (an object listing, a Kubernetes list, a
	// key range): once all its events have a durable outcome it is promoted
	// with the partition marked complete, durably; the partition is never
	// read again.
	MissingSuccessorEndsTraversal
)

func (m MissingSuccessor) String() string {
	switch m {
	case MissingSuccessorPoll:
		return "poll"
	case MissingSuccessorEndsTraversal:
		return "end_of_traversal"
	}
	return fmt.Sprintf("missing_successor(%d)", uint8(m))
}

// Recovery is what the provider contract allows when a partition cannot
// advance (unprovable divergence, expired cursor).
type Recovery uint8

const (
	// RecoveryPark: stop the partition and wait for an operator.
	RecoveryPark Recovery = 1 + iota
	// RecoveryRestartFromBoundary: restart from a provider-supported stable
	// boundary (for example the configured start cursor, replaying events
	// after the durable applied boundary; replays are deduplicated
	// downstream).
	RecoveryRestartFromBoundary
	// RecoveryFreshSnapshot: take a fresh snapshot (for example a new etcd
	// revision) and replay the partition from its start in that snapshot.
	RecoveryFreshSnapshot
)

func (r Recovery) String() string {
	switch r {
	case RecoveryPark:
		return "park"
	case RecoveryRestartFromBoundary:
		return "restart_from_boundary"
	case RecoveryFreshSnapshot:
		return "fresh_snapshot"
	}
	return fmt.Sprintf("recovery(%d)", uint8(r))
}

// Contract is the provider's declared pagination contract. Classification
// trusts only what the contract declares.
type Contract struct {
	// EmptyPage says what an empty response proves.
	EmptyPage EmptyPage
	// TokensMayRotate: a retry of the same cursor may return the same events
	// with another successor, and that successor is valid.
	TokensMayRotate bool
	// OrderedPositions: positions strictly increase within a response and
	// across a partition's pages.
	OrderedPositions bool
	// PositionKind is the kind every event position of the partition has
	// (coord.KindInteger when zero). A response with a position of another
	// kind is a bad response. DensePositions needs a kind with successor
	// arithmetic (integer or decimal).
	PositionKind coord.Kind
	// DensePositions: positions are consecutive integers (each event's
	// position is the previous one + 1), so "the next required position" is
	// known. Implies OrderedPositions.
	DensePositions bool
	// ExclusiveBoundary: the provider resumes strictly after the durable
	// applied boundary. Omissions at or below the boundary are never a gap
	// either way; with ExclusiveBoundary an event at or below it that a
	// response repeats must match a known receipt, or the response is
	// unprovable divergence (coverage rule (a); see
	// docs/design.md#provider-contract).
	ExclusiveBoundary bool
	// SnapshotMarker: a response's Marker names a stable snapshot; two
	// responses with the same marker enumerate the same stream, and a marker
	// proves coverage of an empty response's range. A marker proves coverage
	// only within one snapshot: a retry whose marker differs from the earlier
	// response's is another snapshot, not a proof that what it omits is no
	// longer required.
	SnapshotMarker bool
	// WatermarkCoversPositions: event positions are in the coordinate of the
	// complete-through watermark (integer positions under an integer
	// watermark, Unix-nanosecond positions under a timestamp watermark), so
	// a response's CompleteThrough W proves coverage of the positions at or
	// below W, and never of a position above it. Without it a watermark
	// proves nothing about positions.
	WatermarkCoversPositions bool
	// EventsMayBeWithdrawn: an event one response showed may legitimately be
	// absent from a later response to the same cursor (deleted or compacted
	// at the source). Even then an omission is accepted only when the later
	// response proves coverage of the omitted position
	// (WatermarkCoversPositions and a CompleteThrough at or above it);
	// without this field an omitted event is always divergence.
	EventsMayBeWithdrawn bool
	// MissingSuccessor says what a response without a successor means.
	MissingSuccessor MissingSuccessor
	// Recovery is what to do on unprovable divergence or an expired cursor.
	Recovery Recovery
	// Finality says where the finality of a response's CompleteThrough
	// comes from (FinalityNone when zero: the watermark is recorded in the
	// witness only). Only FinalitySource makes it coverage evidence, so
	// WatermarkCoversPositions and EmptyFinalThroughWatermark require it.
	Finality Finality
	// FinalityLag, under FinalityLag only, is subtracted from every
	// CompleteThrough before it becomes durable: nanoseconds for a timestamp
	// watermark, units for an integer or decimal one (a string watermark has
	// no arithmetic and never becomes durable under a lag). Positive.
	FinalityLag int64
	// Pagination is how pages follow one another (token, keyset, offset);
	// see CheckContinuity and docs/pagination.md.
	Pagination Pagination
	// OffsetOverlap (offset pagination): every page after the first of a
	// traversal is requested one event early and must begin with the
	// previous page's last event; otherwise it shifted (CheckContinuity).
	OffsetOverlap bool
	// OffsetUnproven (offset pagination): the contract declares that
	// nothing proves a page continues the previous one. The partition reads
	// on, says so in its log, and claims no completeness: no watermark is
	// written and no traversal ends complete.
	OffsetUnproven bool
}
