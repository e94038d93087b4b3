// Package store is the port between tidemark's pure core and durable
// storage: per-partition checkpoints, response witnesses with their receipts,
// the membership record and the published frontier. DynamoDB (package
// internal/dynamostore) and the in-memory twin (package memstore)
// implement it, and both must pass the contract suite in package
// storetest. It imports no core package but the types it stores (coord,
// witness); internal/frontierrec converts its records to the frontier
// core's values.
//
// Invariants every implementation keeps:
//   - Fencing. Every write of progress is conditional on the state the writer
//     read: Promote requires the stored cursor, generation and scope (and the
//     lease, when one is given); a lost race returns *FenceError carrying the
//     winner, read back with a consistent read. Nothing here writes progress
//     unconditionally, on any path.
//   - One item. A promotion is one conditional write on one record: the
//     checkpoint. The promoted witness id is written with it; a witness's own
//     Disposition is only a hint that may lag the checkpoint.
//   - Monotone. Generation strictly increases on every promotion; a
//     partition's complete-through watermark never decreases; the published
//     frontier never decreases within a membership epoch.
//   - Idempotent witnesses. PutWitness of the same (scope, partition,
//     generation, attempt) twice stores one witness.
//   - Lost responses are resolved by reading, never by writing again.
//
// These are invariants 2 and 3 of docs/design.md#invariants; the DynamoDB
// layout and the condition of every write are in
// docs/design.md#dynamodb-layout.
package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/reconcile"
)

// Key names one partition's checkpoint within one query scope.
type Key struct {
	Scope     string
	Partition string
}

func (k Key) String() string { return k.Scope + "/" + k.Partition }

// Validate rejects keys that cannot be stored: each name must be non-empty
// valid UTF-8 of at most MaxNameBytes bytes (CheckName).
func (k Key) Validate() error {
	if err := CheckName("scope", k.Scope); err != nil {
		return err
	}
	return CheckName("partition", k.Partition)
}

// MaxCursorBytes is the largest opaque cursor a store accepts. Cursors are
// stored whole and never truncated; a larger one is refused with ErrInvalid.
const MaxCursorBytes = 64 << 10

// MaxAppliedIDBytes is the longest event id a checkpoint records as its
// AppliedID; the partition machine records no id for a longer one.
const MaxAppliedIDBytes = 1 << 10

// ListReadsInFlight bounds the batch reads one ListCheckpoints keeps in
// flight (DynamoDB: BatchGetItem requests of 100 checkpoints). A lease
// read lists every checkpoint of its scope under one store call's
// deadline: one batch after the other, 100,000 partitions are a
// thousand sequential round trips, past any deadline the leases allow
// (the scale simulation, docs/scale.md); eight at a time divide that
// time by eight at the same read units.
const ListReadsInFlight = 8

// Lease identifies the writer that currently owns a partition (scale-out).
// The zero Lease means "no lease": single-instance operation.
type Lease struct {
	Owner   string
	Counter uint64
}

// IsZero reports whether l is the absent lease.
func (l Lease) IsZero() bool { return l.Owner == "" && l.Counter == 0 }

// Checkpoint is one partition's durable progress in one scope.
type Checkpoint struct {
	Key
	// Cursor is the exact opaque resume token (never truncated, never
	// parsed).
	Cursor []byte
	// Generation strictly increases on every promotion; creation writes 1.
	Generation uint64
	// Watermark is the complete-through watermark: zero when none is proven.
	Watermark coord.Watermark
	// Finality is what Watermark's finality rests on, as the contract
	// declared it when Watermark was written (provider.Contract.Basis: its
	// text "source", "append_only_writer assertion", "lag 5m0s" is what
	// stores keep). Zero when unknown (no watermark, or one written before
	// finality was recorded).
	Finality reconcile.Basis
	// Applied is the source position of the last event with a durable
	// terminal outcome at or before Cursor: the durable applied boundary.
	// HasApplied is false until some event was applied.
	Applied    coord.Position
	HasApplied bool
	// AppliedID is the stable id of the event at Applied (the last event
	// at that position of the page that set it), for sources that resume
	// after an event id. Empty when unknown: nothing applied yet, a
	// boundary set without one (a configured start), or an id longer than
	// MaxAppliedIDBytes.
	AppliedID string
	// Epoch is the membership epoch the checkpoint was last written under.
	Epoch uint64
	// PromotedWitness is the attempt id of the witness whose successor is
	// Cursor ("" for the configured start).
	PromotedWitness string
	// Parked, when not empty, is the reason the partition stopped advancing.
	Parked string
	// Failing, when not empty, says why the partition's fetches keep
	// failing transiently (it is retried for ever, never parked): the
	// worker's note (NoteFailure), rewritten at most once a
	// chain.FailureNoteInterval while the failures last. Any promotion
	// clears it.
	Failing string
	// Complete is set by a promotion that completed the partition: the
	// provider sealed it, or a finite traversal ended (a last page without
	// a successor under missing_successor: end_of_traversal). It survives
	// restarts: a complete partition is never read again, and it is the
	// proof of sealing a membership removal needs. Any later promotion (an
	// operator's restart) clears it.
	Complete bool
	// Lease is the current owner of the partition, if leases are used
	// ({"", n} once released: unowned, counter n).
	Lease Lease
	// Violations counts the contract violations the partition's workers
	// observed, by kind (reconcile.ViolationKind.String), as of the last
	// promotion that wrote them (docs/design.md#contract-monitors). nil:
	// none recorded.
	Violations map[string]uint64
	// Incarnation is the hash of the source incarnation the checkpoint's
	// progress belongs to (reconcile.IncarnationHash of the value the
	// provider's incarnation check gave; docs/design.md#source-incarnations).
	// Empty when none was recorded: the provider declares none and no
	// response showed positions going back, or the partition has not been
	// checked yet.
	Incarnation string
	// IncarnationEpoch is the membership epoch whose change moved the
	// checkpoint into its current incarnation (a Reset promotion); 0 when
	// the checkpoint began in it. membership.Decide reads it as the proof
	// of the new incarnation's coverage: reset to its start, read since.
	IncarnationEpoch uint64
	// Repairs is the audit log of the operator repairs written to this
	// checkpoint, oldest first, at most MaxRepairs (RepairEntry). Only a
	// repair's own conditional write changes it (Promotion.Repairs,
	// Unpark); every other write keeps it.
	Repairs []RepairEntry
	// Reread is the state of the partition's re-read window, written only
	// by the promotion that starts a pass (Promotion.Reread) and cleared by
	// a Reset; every other write keeps it.
	Reread RereadState
}

// Promotion asks the store to replace From (cursor and generation) by the
// successor of one witness, in one conditional write.
type Promotion struct {
	Key
	// FromCursor and FromGeneration must equal the stored checkpoint.
	FromCursor     []byte
	FromGeneration uint64
	// To is the successor cursor of witness WitnessID.
	To        []byte
	WitnessID string
	// Watermark, when not zero, is the new complete-through watermark. The
	// store refuses a watermark lower than the stored one (ErrFenced) and
	// keeps the stored one when Watermark is zero.
	Watermark coord.Watermark
	// Finality, only with a Watermark, is written with it (a basis a
	// contract gives); without a Watermark the stored one is kept.
	Finality reconcile.Basis
	// Applied, when HasApplied, is the new durable applied boundary.
	Applied    coord.Position
	HasApplied bool
	// AppliedID, written with Applied (only when HasApplied), is the id of
	// the event at Applied; empty removes the stored one. Without
	// HasApplied the stored applied boundary and its id are kept.
	AppliedID string
	// Epoch is written to the checkpoint.
	Epoch uint64
	// Complete marks the partition complete (Checkpoint.Complete); false
	// clears the mark.
	Complete bool
	// Lease, when it names an owner, must equal the stored lease (owner
	// and counter); a lease without an owner imposes no condition
	// (Lease.Fence). Every instance of a scope must use leases, or none.
	Lease Lease
	// Pages is how many consecutive pages this one write promotes (0 and
	// 1: one). Coalescing: pages fetched ahead, each bound to its own
	// witness at its own generation (FromGeneration, FromGeneration+1, …),
	// all delivered; To and WitnessID are the last page's successor and
	// witness, Watermark, Applied and Complete its state. The new
	// generation is ToGeneration().
	Pages uint64
	// Violations, when not nil, replaces the checkpoint's contract
	// violation counts (the writer's totals: the stored counts it read
	// plus what it observed since); nil keeps the stored ones. The write's
	// condition makes the totals exact.
	Violations map[string]uint64
	// Incarnation, when not empty, is written to the checkpoint. The
	// condition then also requires the stored incarnation to be absent or
	// equal (IncarnationConflict), unless Reset.
	Incarnation string
	// Reset moves the checkpoint into a new source incarnation
	// (docs/design.md#source-incarnations): the coordinates restart, so the
	// write clears the watermark, the applied boundary (and its id) and the
	// complete mark instead of keeping them, and records Incarnation. It
	// stays fenced by the stored cursor, generation, scope and lease, and
	// it never lowers a durable watermark within one membership epoch: a
	// stored watermark is cleared only by a write of a greater Epoch than
	// the stored checkpoint's.
	Reset bool
	// Repairs, when not nil, replaces the checkpoint's repair log: an
	// operator's restart writes the log it read plus its own entry
	// (AppendRepair), in this same conditional write. nil keeps the
	// stored log.
	Repairs []RepairEntry
	// Reread, when not nil, replaces the checkpoint's re-read state: the
	// restart promotion that starts a re-read pass writes it. nil keeps
	// the stored one.
	Reread *RereadState
}

// Membership is the record naming the partitions of one membership epoch.
type Membership struct {
	Scope      string
	Epoch      uint64
	Partitions []string
	// Cutover is the coordinate at which this epoch took over from the
	// previous one (zero for the first epoch).
	Cutover coord.Watermark
	// Proven is false when a change could not be proven (coverage of an
	// added partition, sealing of a removed one); no scalar frontier may be
	// published in such an epoch.
	Proven bool
	// Reason explains an unproven change.
	Reason string
	// Unproven lists the partitions whose membership change still lacks
	// proof; it is carried into later epochs until the proof arrives.
	Unproven []string
	// Parents is the lineage of members that have parents (a split or
	// merge reported by the provider): member -> its parents, sorted. A
	// member with parents is not read before each parent is complete
	// (sealed and drained), unless the input reads lineage unordered.
	// Parents need not be members any more (a sealed parent leaves).
	Parents map[string][]string
	// Incarnations names the members of Unproven whose source was
	// recreated under the same name, with the epoch that recorded the
	// change (the epoch their checkpoint's reset writes as its
	// IncarnationEpoch). Such a member settles when its checkpoint, reset
	// into the new incarnation by that epoch and read from its start,
	// certifies a watermark or completes (docs/design.md#source-incarnations).
	Incarnations map[string]uint64
	// Repairs is the audit log of operator repairs that wrote this epoch
	// (advance-epoch), at most MaxRepairs; a later epoch keeps it only
	// when its writer copies it.
	Repairs []RepairEntry
}

// Frontier is the published combined frontier of one scope.
type Frontier struct {
	Scope string
	Epoch uint64
	// Scalar is the combined safe frontier; zero when withheld.
	Scalar coord.Watermark
	// Vector is every partition's complete-through watermark in the epoch.
	Vector map[string]coord.Watermark
	// HeldBy lists the partitions whose watermark equals the frontier (or is
	// missing), i.e. those holding it back.
	HeldBy []string
	// Reason explains a withheld scalar.
	Reason string
	// Version counts the record's publications: PublishFrontier writes
	// prev.Version+1, conditional on the stored record still carrying
	// prev.Version, so a publisher working from a stale record is fenced
	// whatever it would write. Records written before versions read as 0.
	Version uint64
}

// Store is the durable state of tidemark: the five roles below, each a
// port of its own so that a component can ask for only the role it uses.
// Implementations are safe for concurrent use. Errors other than the
// sentinels below are transport failures after bounded retries; the caller
// must treat the outcome of a failed write as unknown and resolve it by
// reading. DynamoDB (internal/dynamostore) and the in-memory twin
// (memstore.Store) implement every role and pass the contract suite (storetest).
type Store interface {
	CheckpointStore
	LeaseStore
	WitnessStore
	ScopeStore
	ReceiptStore
}

// ScopeProgress is the part of the store that reads a scope's progress and
// writes its records: every checkpoint and the scope's records
// (membership, published frontier). The membership decisions and the
// frontier publisher need no more.
type ScopeProgress interface {
	CheckpointStore
	ScopeStore
}

// CheckpointStore holds one checkpoint per partition: its durable cursor,
// generation, watermark, applied boundary, park state and repair log.
// Every write of progress is one conditional write on the checkpoint
// record, conditional on the cursor, generation and scope the writer read
// (and the lease, when one is given): conditions.go states each condition
// as a pure function that both implementations use.
type CheckpointStore interface {
	// LoadCheckpoint returns the checkpoint with a consistent read, or
	// ErrNotFound.
	LoadCheckpoint(ctx context.Context, k Key) (Checkpoint, error)
	// CreateCheckpoint writes the first checkpoint of a partition (its
	// Generation must be 1) only if none exists. When one exists it returns
	// *FenceError with the winner.
	CreateCheckpoint(ctx context.Context, c Checkpoint) (Checkpoint, error)
	// Promote performs the one conditional write of a promotion and returns
	// the new checkpoint (generation ToGeneration(): FromGeneration+1, or
	// +Pages for a coalesced promotion). A failed condition
	// returns *FenceError with the winner (PromotionConflict says which
	// part failed); a parked checkpoint refuses every promotion. A repeat of
	// a promotion that is already applied (PromotionApplied: same WitnessID,
	// generation and cursor) returns the stored checkpoint instead.
	Promote(ctx context.Context, p Promotion) (Checkpoint, error)
	// SetParked sets (reason != "") or clears (reason == "") the parked
	// reason, conditional on the stored cursor and generation (and lease,
	// when it names an owner).
	// It never changes cursor, generation or watermark.
	SetParked(ctx context.Context, k Key, cursor []byte, generation uint64, lease Lease, reason string) (Checkpoint, error)
	// NoteFailure sets (note != "") or clears (note == "") the failure
	// note (Checkpoint.Failing), conditional on the stored cursor and
	// generation (and lease, when it names an owner), as SetParked. It is
	// not progress: it never changes cursor, generation, watermark, park
	// or lease.
	NoteFailure(ctx context.Context, k Key, cursor []byte, generation uint64, lease Lease, note string) (Checkpoint, error)
	// Unpark is an operator's unpark: in one write conditional on the
	// stored cursor, generation (and lease, when it names an owner) and on
	// the checkpoint being parked, it clears the park reason and replaces
	// the repair log with repairs (the log read plus the repair's entry,
	// at most MaxRepairs). It never changes cursor, generation or
	// watermark. A lost condition returns *FenceError with the winner; the
	// repeat of an applied Unpark returns the stored checkpoint.
	Unpark(ctx context.Context, k Key, cursor []byte, generation uint64, lease Lease, repairs []RepairEntry) (Checkpoint, error)
	// ListCheckpoints returns every checkpoint of a scope. A store that
	// reads them in batches keeps at most ListReadsInFlight batch reads in
	// flight.
	ListCheckpoints(ctx context.Context, scope string) ([]Checkpoint, error)
}

// LeaseStore is the scale-out role: partition leases that live on the
// checkpoint record (claims, renewals and releases, each one conditional
// write that strictly increases the lease counter) and one heartbeat
// record per instance. A lease is never a condition of its own item only:
// CheckpointStore's writes carry it.
type LeaseStore interface {
	// Leases (scale-out; see lease.go for the state diagram). Each is ONE
	// conditional write on the checkpoint record that changes only its
	// lease, and strictly increases the lease counter. A lost condition
	// returns *FenceError with the winner; a missing checkpoint returns
	// ErrNotFound (the lease lives on the checkpoint: create it
	// first). When the stored lease already is the write's exact result
	// (the repeat of an applied write whose response was lost), the stored
	// checkpoint is returned instead of a fence.

	// ClaimLease makes owner the holder, conditional on the stored lease
	// being exactly expect: the zero Lease or {"", n} for an unowned
	// partition, another owner's lease for a steal or the take-over of a
	// lease seen expired. It writes Lease{owner, expect.Counter+1}.
	ClaimLease(ctx context.Context, k Key, expect Lease, owner string) (Checkpoint, error)
	// ReleaseLease hands the partition off (graceful shutdown): conditional
	// on the stored lease being held, it writes Lease{"", held.Counter+1},
	// so the next claimant starts from a known, unowned state.
	ReleaseLease(ctx context.Context, k Key, held Lease) (Checkpoint, error)

	// Heartbeats: one liveness record per instance (heartbeat.go).
	HeartbeatStore
}

// WitnessStore holds the response witnesses of every page fetched, with
// their receipts (how far delivery is durable) and dispositions. A
// witness's contents never change once stored; its receipt only rises and
// its disposition moves once, from pending to promoted or abandoned.
type WitnessStore interface {
	// PutWitness stores a witness; storing the same (key, generation,
	// attempt) again is a no-op that returns nil. Events, Successor and
	// Marker are stored whole; a witness the store cannot hold whole is
	// refused with ErrInvalid, never cut.
	PutWitness(ctx context.Context, w reconcile.Witness) error
	// Witnesses returns every witness recorded for (key, generation), in
	// byte-wise AttemptID order (callers make attempt ids sort in creation
	// order, e.g. zero-padded counters or ULIDs).
	Witnesses(ctx context.Context, k Key, generation uint64) ([]reconcile.Witness, error)
	// WitnessesFrom returns every witness recorded for generations at or
	// above fromGeneration, ordered by generation then attempt: one query
	// when a partition (re)starts, so that later pages need no reads.
	WitnessesFrom(ctx context.Context, k Key, fromGeneration uint64) ([]reconcile.Witness, error)
	// RecordReceipt raises a witness's AckedThrough to ackedThrough (never
	// lowers it). One write per acknowledged batch.
	RecordReceipt(ctx context.Context, k Key, generation uint64, attempt string, ackedThrough int) error
	// SetDisposition moves a witness from Pending to Promoted or Abandoned.
	// Promoted and Abandoned are final: any other transition returns
	// ErrFenced; setting the state the witness already has returns nil.
	// A missing witness returns ErrNotFound.
	SetDisposition(ctx context.Context, k Key, generation uint64, attempt string, d reconcile.Disposition) error
	// PruneWitnesses deletes the witnesses of k at generations below
	// below and returns how many it deleted. Callers pass at most the
	// generation before a durable checkpoint's (chain.Pruning): a load
	// reads the promoted witness of that generation (its events are the
	// receipts and previous page of a retry), and nothing below it
	// (generations never go back), so nothing pruned can be needed again.
	PruneWitnesses(ctx context.Context, k Key, below uint64) (int, error)
}

// ScopeStore holds the records of a whole scope: the membership record
// (written by compare-and-swap on its epoch), the discovery request
// counter, and the published frontier (written by compare-and-swap on its
// version; no scalar or vector entry goes down within an epoch).
type ScopeStore interface {
	// LoadMembership returns the membership record, or ErrNotFound.
	LoadMembership(ctx context.Context, scope string) (Membership, error)
	// SwapMembership writes next if the stored epoch equals prevEpoch (0:
	// none stored). next.Epoch must be greater than prevEpoch.
	SwapMembership(ctx context.Context, prevEpoch uint64, next Membership) (Membership, error)
	// RequestDiscovery asks the running inputs of scope to discover their
	// partitions now: it increments the scope's discovery request counter
	// (creating it at 1) and returns the new value. It is a request, not
	// progress: running inputs compare the counter with the last value
	// they saw.
	RequestDiscovery(ctx context.Context, scope string) (uint64, error)
	// DiscoveryRequests returns the scope's discovery request counter (0
	// when none was ever requested).
	DiscoveryRequests(ctx context.Context, scope string) (uint64, error)

	// LoadFrontier returns the published frontier, or ErrNotFound.
	LoadFrontier(ctx context.Context, scope string) (Frontier, error)
	// PublishFrontier writes next, with Version prev.Version+1, if the
	// stored record is still prev (same version, epoch and scalar; zero
	// Frontier: none stored) and next does not go back to an older epoch nor,
	// within an epoch, lower the scalar or any vector entry. It returns the
	// record written.
	PublishFrontier(ctx context.Context, prev, next Frontier) (Frontier, error)
}

var (
	// ErrNotFound is the one "absent" error of every store: no checkpoint,
	// no witness, no membership record, no published frontier. The error
	// wrapping it says which record of which key or scope was absent.
	ErrNotFound = errors.New("store: not found")
	// ErrFenced is the sentinel every *FenceError unwraps to: a conditional
	// write lost to another writer or refused a regression.
	ErrFenced = errors.New("store: fenced")
	// ErrInvalid is returned for arguments that can never be stored (empty
	// scope, oversized cursor or witness).
	ErrInvalid = errors.New("store: invalid argument")
)

// FenceError reports a conditional write that lost. Winner is the state read
// back after the loss (a consistent read) when it could be read.
type FenceError struct {
	Key    Key
	Op     string
	Reason string
	// Want describes what the writer expected.
	WantGeneration uint64
	// Winner is the stored checkpoint after the loss, if any.
	Winner *Checkpoint
}

func (e *FenceError) Error() string {
	got := "unknown"
	if e.Winner != nil {
		got = fmt.Sprintf("generation %d", e.Winner.Generation)
	}
	if e.WantGeneration == 0 {
		// Lease, membership and frontier writes do not name a generation.
		return fmt.Sprintf("store: %s on %s fenced: %s (stored %s)", e.Op, e.Key, e.Reason, got)
	}
	return fmt.Sprintf("store: %s on %s fenced: %s (wanted generation %d, stored %s)", e.Op, e.Key, e.Reason, e.WantGeneration, got)
}

// Unwrap makes errors.Is(err, ErrFenced) hold.
func (e *FenceError) Unwrap() error { return ErrFenced }
