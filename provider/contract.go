package provider

import (
	"errors"
	"fmt"
	"time"
)

// The contract a provider declares: what its responses prove. The
// reconciliation core (internal/reconcile) trusts nothing else. These types
// are defined here, in the public SDK, and the core uses them as they are;
// docs/design.md#provider-contract says what each field promises and what
// the input does with it.

// ErrInvalidContract reports a contract the core cannot use (Validate,
// ValidPositionKind, ParseFinality).
var ErrInvalidContract = errors.New("invalid provider contract")

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
	// (KindInteger when zero). A response with a position of another
	// kind is a bad response. DensePositions needs a kind with successor
	// arithmetic (integer or decimal).
	PositionKind Kind
	// DensePositions: positions are consecutive integers (each event's
	// position is the previous one + 1), so "the next required position" is
	// known. Implies OrderedPositions.
	DensePositions bool
	// FirstPosition, under DensePositions, is the declared origin: the
	// position of the first event of every incarnation of the source (a
	// feed whose ids start at 1 declares 1). Zero: no origin is declared,
	// and the first page of a traversal (a fresh start, a new incarnation
	// after a reset: no applied boundary) has nothing to be checked
	// against. Declared, that page must begin at it: a first event above
	// it (retention dropped the oldest events, a limit kept the newest) or
	// below it is a gap, handled per Recovery like any coverage rule (b)
	// gap (docs/design.md#contract-fields). Of the kind
	// EffectivePositionKind (integer or decimal).
	FirstPosition Position
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
	// see reconcile.CheckContinuity (internal) and docs/pagination.md.
	Pagination Pagination
	// OffsetOverlap (offset pagination): every page after the first of a
	// traversal is requested one event early and must begin with the
	// previous page's last event; otherwise it shifted (reconcile.CheckContinuity).
	OffsetOverlap bool
	// OffsetUnproven (offset pagination): the contract declares that
	// nothing proves a page continues the previous one. The partition reads
	// on, says so in its log, and claims no completeness: no watermark is
	// written and no traversal ends complete.
	OffsetUnproven bool
	// RereadWindow, when positive, is the re-read window behind the
	// partition's applied boundary, in the positions' units (nanoseconds
	// for timestamp positions, units for integer ones): each pass re-reads
	// it and emits only the events no durable receipt shows (reread.go,
	// docs/design.md#re-read-windows).
	RereadWindow int64
	// RereadInterval is the least time between the starts of two passes
	// (0: a pass each time the partition reaches its head).
	RereadInterval time.Duration
}

// Pagination is how a source's pages follow one another
// (docs/pagination.md). The zero value is PaginationToken.
type Pagination uint8

const (
	// PaginationToken: the successor is a token or position the source
	// issues with the page (a continuation token, a change feed's sequence,
	// a deltaLink). Nothing a later write does to earlier pages moves it.
	PaginationToken Pagination = iota
	// PaginationKeyset: the successor is built from the page's last
	// position ("after id X", "id >= X"); positions are ordered. A delete
	// or an insert below it moves nothing.
	PaginationKeyset
	// PaginationOffset: the successor counts rows to skip (an offset, a
	// page number, a `Link: rel="next"` built from one). A delete on an
	// earlier page slides an event onto a page already read; an insert
	// slides one onto the next page again. Only dense positions or the
	// overlap check (Contract.OffsetOverlap) prove a page continues the
	// previous one; otherwise the contract must say so (OffsetUnproven).
	PaginationOffset
)

func (p Pagination) String() string {
	switch p {
	case PaginationToken:
		return "token"
	case PaginationKeyset:
		return "keyset"
	case PaginationOffset:
		return "offset"
	}
	return fmt.Sprintf("pagination(%d)", uint8(p))
}

// validatePagination reports a pagination contract that cannot keep its
// promise: offset pagination without a proof of continuity (dense
// positions or the overlap check) and without the explicit OffsetUnproven;
// OffsetUnproven with anything that would claim completeness; the offset
// fields without offset pagination; keyset pagination over unordered
// positions.
func (c Contract) validatePagination() error {
	switch c.Pagination {
	case PaginationToken:
	case PaginationKeyset:
		if !c.Ordered() {
			return fmt.Errorf("%w: keyset pagination needs ordered (or dense) positions: the successor is built from the last position", ErrInvalidContract)
		}
	case PaginationOffset:
		if !c.DensePositions && !c.OffsetOverlap && !c.OffsetUnproven {
			return fmt.Errorf("%w: offset pagination over positions that are not dense cannot prove that a page continues the previous one "+
				"(a delete on an earlier page slides an event onto a page already read): page by keyset, request each page one event early "+
				"(offset_overlap), or declare offset_unproven and claim no completeness", ErrInvalidContract)
		}
	default:
		return fmt.Errorf("%w: contract pagination %s", ErrInvalidContract, c.Pagination)
	}
	if c.Pagination != PaginationOffset && (c.OffsetOverlap || c.OffsetUnproven) {
		return fmt.Errorf("%w: offset_overlap and offset_unproven need pagination offset, not %s", ErrInvalidContract, c.Pagination)
	}
	if c.OffsetOverlap && c.OffsetUnproven {
		return fmt.Errorf("%w: offset_overlap proves continuity; offset_unproven says nothing does: declare one", ErrInvalidContract)
	}
	if c.OffsetUnproven {
		switch {
		case c.MissingSuccessor == MissingSuccessorEndsTraversal:
			return fmt.Errorf("%w: offset_unproven claims no completeness, so a traversal cannot end complete: missing_successor must be poll", ErrInvalidContract)
		case c.EmptyPage == EmptyFinalThroughWatermark || c.WatermarkCoversPositions:
			return fmt.Errorf("%w: offset_unproven claims no completeness: no complete-through watermark can be final (empty_page final_through_watermark, watermark_covers_positions)", ErrInvalidContract)
		}
	}
	return nil
}

// Finality is where the finality of a response's CompleteThrough comes
// from: why nothing can later appear at or below it in the frontier's
// coordinate. A watermark computed from the page's own events (its last
// position or key) or from the request's time has none of these bases; see
// docs/design.md#what-may-justify-a-complete-through. The zero value means
// FinalityNone.
type Finality uint8

const (
	// FinalityNone: the response's CompleteThrough is recorded in its
	// witness but never becomes the partition's durable watermark, never
	// advances the frontier and is never coverage evidence.
	FinalityNone Finality = 1 + iota
	// FinalitySource: the source certifies the watermark with finality (a
	// provider watermark or coverage marker, a snapshot's own revision). The
	// only basis that may also serve as coverage evidence (a shifted page,
	// a withdrawn event, an empty page under EmptyFinalThroughWatermark).
	FinalitySource
	// FinalityAppendOnlyWriter: the user asserts that positions are only
	// ever created above every existing one (one writer with time-ordered
	// keys, a log). The watermark advances the frontier, named as that
	// assertion, but never covers a gap.
	FinalityAppendOnlyWriter
	// FinalityLag: the source documents a bound on late arrival; the
	// durable watermark is CompleteThrough minus Contract.FinalityLag. It
	// advances the frontier, named with its lag, but never covers a gap.
	FinalityLag
)

var finalityNames = [...]string{"", "none", "source", "append_only_writer", "lag"}

func (f Finality) String() string {
	if f >= FinalityNone && f <= FinalityLag {
		return finalityNames[f]
	}
	if f == 0 {
		return "none"
	}
	return fmt.Sprintf("finality(%d)", uint8(f))
}

// ParseFinality reads a Finality from its String form.
func ParseFinality(s string) (Finality, error) { return parseEnum("finality", s, Finalities()) }

// EffectiveFinality is the declared finality (FinalityNone when unset).
func (c Contract) EffectiveFinality() Finality {
	if c.Finality == 0 {
		return FinalityNone
	}
	return c.Finality
}

// Certifies reports whether c's complete-through watermarks are certified
// by the source (FinalitySource), and so may serve as coverage evidence.
func (c Contract) Certifies() bool { return c.EffectiveFinality() == FinalitySource }

// validateFinality reports a finality the core cannot use: an unknown one,
// a lag that is not positive or declared without FinalityLag, and coverage
// fields that need source finality (WatermarkCoversPositions,
// EmptyFinalThroughWatermark) declared without it.
func (c Contract) validateFinality() error {
	f := c.EffectiveFinality()
	switch {
	case f > FinalityLag:
		return fmt.Errorf("%w: contract %s", ErrInvalidContract, f)
	case f == FinalityLag && c.FinalityLag <= 0:
		return fmt.Errorf("%w: finality lag needs a positive lag (a zero lag is the source's own claim: declare finality source)", ErrInvalidContract)
	case f != FinalityLag && c.FinalityLag != 0:
		return fmt.Errorf("%w: a finality lag is declared with finality %s, not lag", ErrInvalidContract, f)
	case c.WatermarkCoversPositions && f != FinalitySource:
		return fmt.Errorf("%w: watermark covers positions needs finality source, not %s: only a watermark the source certifies can prove that no event of a page's range was skipped", ErrInvalidContract, f)
	case c.EmptyPage == EmptyFinalThroughWatermark && f != FinalitySource:
		return fmt.Errorf("%w: empty page final through watermark needs finality source, not %s: only a watermark the source certifies makes an empty page evidence", ErrInvalidContract, f)
	}
	return nil
}

// Basis is the finality a watermark of kind k written under c rests on
// (its text, as status and the frontier's reason show it: "source",
// "append_only_writer assertion", "lag 5m0s", a duration for timestamps and
// units otherwise, "reread lag 5m0s" under a re-read window); the zero
// Basis under FinalityNone.
func (c Contract) Basis(k Kind) Basis {
	switch f := c.EffectiveFinality(); f {
	case FinalitySource, FinalityAppendOnlyWriter:
		return Basis{Finality: f}
	case FinalityLag:
		if c.RereadWindow > 0 {
			return Basis{Finality: f, Lag: c.RereadWindow, Timestamp: k == KindTimestamp, Reread: true}
		}
		return Basis{Finality: f, Lag: c.FinalityLag, Timestamp: k == KindTimestamp}
	}
	return Basis{}
}

// Validate reports a contract the core cannot use: an EmptyPage that is not
// one of the declared values (the zero value included), an unknown
// Recovery, a finality the core cannot use (see validateFinality), a first
// position it cannot check (see validateFirstPosition), or a
// pagination contract that cannot keep its promise (see
// validatePagination). A zero Recovery is allowed and means RecoveryPark; a
// zero Finality means FinalityNone.
func (c Contract) Validate() error {
	if c.EmptyPage < EmptyNoEvidence || c.EmptyPage > EmptyFollowsSuccessor {
		return fmt.Errorf("%w: contract empty page %s", ErrInvalidContract, c.EmptyPage)
	}
	if c.Recovery > RecoveryFreshSnapshot {
		return fmt.Errorf("%w: contract recovery %s", ErrInvalidContract, c.Recovery)
	}
	if err := c.validateFinality(); err != nil {
		return err
	}
	if err := c.validateFirstPosition(); err != nil {
		return err
	}
	if err := c.validateReread(); err != nil {
		return err
	}
	return c.validatePagination()
}

// validateFirstPosition reports a declared origin (FirstPosition) the core
// cannot check: one without dense positions (only dense positions say
// which position comes next), or one of another kind than the positions'
// (EffectivePositionKind, integer or decimal).
func (c Contract) validateFirstPosition() error {
	p := c.FirstPosition
	switch {
	case p.IsZero():
		return nil
	case !c.DensePositions:
		return fmt.Errorf("%w: a first position (origin %s) needs dense positions: only they say that nothing lies between the origin and the first event", ErrInvalidContract, p)
	case p.Kind != c.EffectivePositionKind():
		return fmt.Errorf("%w: the first position (origin %s) is a %s position, the positions are %s", ErrInvalidContract, p, p.Kind, c.EffectivePositionKind())
	case !HasSuccessorArithmetic(p.Kind):
		return fmt.Errorf("%w: a first position needs integer or decimal positions, not %s", ErrInvalidContract, p.Kind)
	}
	return nil
}

// HasFirstPosition reports whether c declares an origin for its dense
// positions (FirstPosition).
func (c Contract) HasFirstPosition() bool { return !c.FirstPosition.IsZero() }

// Ordered reports whether positions strictly increase (OrderedPositions, or
// DensePositions, which implies it).
func (c Contract) Ordered() bool { return c.OrderedPositions || c.DensePositions }

// EffectivePositionKind is the declared kind of positions (integer when
// unset).
func (c Contract) EffectivePositionKind() Kind {
	if c.PositionKind == KindNone {
		return KindInteger
	}
	return c.PositionKind
}

// ValidPositionKind reports why c's position kind cannot be used, or nil.
func (c Contract) ValidPositionKind() error {
	k := c.EffectivePositionKind()
	switch k {
	case KindInteger, KindDecimal, KindTimestamp, KindString:
	default:
		return fmt.Errorf("%w: unknown position kind %s", ErrInvalidContract, k)
	}
	if c.DensePositions && !HasSuccessorArithmetic(k) {
		return fmt.Errorf("%w: dense positions need integer or decimal positions, not %s", ErrInvalidContract, k)
	}
	return nil
}

// EffectiveRecovery is the declared recovery (RecoveryPark when unset).
func (c Contract) EffectiveRecovery() Recovery {
	if c.Recovery == 0 {
		return RecoveryPark
	}
	return c.Recovery
}
