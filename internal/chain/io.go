package chain

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/store"
)

// Input is what a driver steps the machine with: a start or stop, the
// time, the answer to the machine's one outstanding call, a fetch result,
// or the outcome of emitted batches.
type Input interface{ isInput() }

// Action is what the machine asks its driver to do. Calls (Load,
// PutWitness, RecordReceipt, Abandon, Promote, Resolve, Park,
// WaitUnparked, RestartCursor) need an answer before the machine goes on;
// a batch of actions holds at most one call, always last. Fetch is
// answered by Fetched whenever the fetch ends. The others need no answer.
type Action interface {
	fmt.Stringer
	isAction()
}

// ---------------------------------------------------------------------------
// Inputs.

// Start starts the machine: its first action is Load.
type Start struct{}

// Stop ends the machine (the partition's worker stops). It answers with
// the bookkeeping a stop needs (the parked gauge of a parked partition);
// afterwards every input is ignored.
type Stop struct{}

// Tick tells the machine the time. Time only moves forward; an earlier Now
// is ignored. The machine asks for a Tick at a given time with Wait.
type Tick struct{ Now time.Time }

// LeaseLost tells a leased machine that its partition's lease is gone
// (taken over, released, or the holder's heartbeat lost): the machine
// stops (StateLeaseLost) with Reason and asks nothing more. Like Stop it
// answers with the bookkeeping a stop needs.
type LeaseLost struct{ Reason string }

// EpochChanged tells the machine the membership epoch its writes state
// from now on (Config.Epoch: the checkpoint it creates, every promotion).
type EpochChanged struct{ Epoch uint64 }

// Loaded answers Load: the checkpoint (read, created or the winner of a
// racing create) and every witness at or above Load.From of it, or the
// error of the first store call that failed.
type Loaded struct {
	Checkpoint store.Checkpoint
	Witnesses  []reconcile.Witness
	Err        error
}

// FetchFailure classifies a failed fetch. The zero value is
// FetchTransient.
type FetchFailure uint8

const (
	// FetchTransient: the provider may answer later (already retried by
	// the driver, if it retries): poll the cursor again.
	FetchTransient FetchFailure = iota
	// FetchExpired: the cursor can no longer be fetched: recover as the
	// contract says. Detail is the provider's reason.
	FetchExpired
	// FetchMalformed: a 2xx answer that cannot be read: fetch the same
	// cursor again after a back-off, FetchRetries times in a row, then park
	// (Config.FetchRetries).
	FetchMalformed
	// FetchPermanent: the request can never succeed: park.
	FetchPermanent
)

var failureNames = [...]string{"transient", "expired", "malformed", "permanent"}

func (f FetchFailure) String() string {
	if int(f) < len(failureNames) {
		return failureNames[f]
	}
	return fmt.Sprintf("fetch_failure(%d)", uint8(f))
}

// Fetched answers Fetch number Fetch (Fetch.ID): the response with the
// fresh attempt id its witness gets, or the error with its class.
type Fetched struct {
	Fetch    uint64
	Attempt  string
	Response reconcile.Response
	Err      error
	Failure  FetchFailure
	// Detail is the provider's reason for an expired cursor.
	Detail string
}

// WitnessStored answers PutWitness.
type WitnessStored struct{ Err error }

// ReceiptStored answers RecordReceipt.
type ReceiptStored struct{ Err error }

// ReceiptsLoaded answers LoadReceipts.
type ReceiptsLoaded struct {
	Receipts []store.Receipt
	Err      error
}

// ReceiptsStored answers PutReceipts.
type ReceiptsStored struct{ Err error }

// ReceiptsPruned answers PruneReceipts.
type ReceiptsPruned struct {
	N   int
	Err error
}

// Abandoned answers Abandon.
type Abandoned struct{ Err error }

// Promoted answers Promote: the new checkpoint, or the error
// (*store.FenceError with the winner when the condition failed; any other
// error is an unknown outcome).
type Promoted struct {
	Checkpoint store.Checkpoint
	Err        error
}

// Resolved answers Resolve (store.ResolvePromotion).
type Resolved struct {
	Checkpoint store.Checkpoint
	Applied    bool
	Err        error
}

// FailureNoted answers NoteFailure (store.NoteFailure).
type FailureNoted struct {
	Checkpoint store.Checkpoint
	Err        error
}

// Parked answers Park (store.SetParked).
type Parked struct {
	Checkpoint store.Checkpoint
	Err        error
}

// ParkChecked answers WaitUnparked: the checkpoint read.
type ParkChecked struct {
	Checkpoint store.Checkpoint
	Err        error
}

// RestartCursorFound answers RestartCursor: the provider's boundary
// cursor.
type RestartCursorFound struct {
	Cursor []byte
	Err    error
}

// IncarnationFound answers CheckIncarnation: the provider's incarnation
// value of the partition's source (the machine keeps only its hash), or
// the error of the request.
type IncarnationFound struct {
	Value string
	Err   error
}

// Reincarnated answers Reincarnate: the checkpoint the reset wrote (or the
// error: *store.FenceError when it lost), and the membership epoch that
// recorded the change (zero when it could not be recorded).
type Reincarnated struct {
	Checkpoint store.Checkpoint
	Epoch      uint64
	// Membership is the record of that epoch, for the driver to adopt
	// before the new incarnation's events leave.
	Membership store.Membership
	Err        error
}

// Ack is the outcome of one emitted batch: nil Err is a terminal outcome
// downstream, any other a failed delivery.
type Ack struct {
	Batch uint64
	Err   error
}

// Acked: batch Batch has a terminal outcome.
type Acked struct{ Batch uint64 }

// Nacked: the delivery of batch Batch failed.
type Nacked struct {
	Batch uint64
	Err   error
}

// Delivered is several outcomes at once: the head page is decided once,
// after all of them.
type Delivered struct{ Acks []Ack }

// Withdrawn answers Withdraw: Changed when this call wrote the new epoch
// Epoch (false: the scalar was already withheld on the partition's
// account, or the scope has no membership record).
type Withdrawn struct {
	Changed bool
	Epoch   uint64
	Err     error
}

func (Start) isInput()              {}
func (Stop) isInput()               {}
func (Tick) isInput()               {}
func (LeaseLost) isInput()          {}
func (EpochChanged) isInput()       {}
func (Loaded) isInput()             {}
func (Fetched) isInput()            {}
func (WitnessStored) isInput()      {}
func (ReceiptStored) isInput()      {}
func (Abandoned) isInput()          {}
func (Promoted) isInput()           {}
func (Resolved) isInput()           {}
func (Parked) isInput()             {}
func (FailureNoted) isInput()       {}
func (ParkChecked) isInput()        {}
func (RestartCursorFound) isInput() {}
func (IncarnationFound) isInput()   {}
func (Reincarnated) isInput()       {}
func (Acked) isInput()              {}
func (Nacked) isInput()             {}
func (Delivered) isInput()          {}
func (Withdrawn) isInput()          {}
func (ReceiptsLoaded) isInput()     {}
func (ReceiptsStored) isInput()     {}
func (ReceiptsPruned) isInput()     {}

// ---------------------------------------------------------------------------
// Actions.

// Load: read the checkpoint with a consistent read; when there is none,
// create Create (conditional on none existing; a *store.FenceError's
// winner is the checkpoint); then read every witness at or above
// From(checkpoint). Answer: Loaded.
type Load struct {
	Key    store.Key
	Create store.Checkpoint
}

// From is the first generation whose witnesses a load reads: the one
// before the durable generation, whose promoted witness's events are the
// receipts a retry of the durable cursor is checked against, and whose
// other pending witnesses lost.
func (Load) From(cp store.Checkpoint) uint64 { return max(cp.Generation, 2) - 1 }

// Fetch: fetch Cursor, the cursor of generation Generation, requested with
// Watermark (the watermark the checkpoint holds when Generation is
// durable) and Attempt (how many witnesses the generation has). Ahead:
// pages are still in flight before it. Answer: Fetched{Fetch: ID}, at any
// time.
type Fetch struct {
	ID         uint64
	Cursor     []byte
	Generation uint64
	Watermark  coord.Watermark
	Attempt    int
	Ahead      bool
}

// PutWitness: make Witness durable (idempotent). Answer: WitnessStored.
type PutWitness struct{ Witness reconcile.Witness }

// PutWitnesses: make every witness of a group durable in one write
// (store.PutWitnesses; idempotent), before any event of their pages is
// emitted. Answer: WitnessStored.
type PutWitnesses struct{ Witnesses []reconcile.Witness }

// Emit: hand events From..To-1 of a page downstream as batch Batch, and
// report its outcome with Acked/Nacked/Delivered. Events are the
// response's events (ids, payloads), Witnessed their event witnesses.
type Emit struct {
	Batch      uint64
	Chain      uint64
	Cursor     []byte
	Generation uint64
	Attempt    string
	Class      RetryClass
	From, To   int
	Events     []reconcile.Event
	Witnessed  []reconcile.EventWitness
}

// EndChain: the chain Chain ended: its emissions not yet handed downstream
// are dropped, and the outcomes of its batches are ignored.
type EndChain struct{ Chain uint64 }

// RecordReceipt: raise the receipts of witness (Generation, Attempt) to
// AckedThrough. Answer: ReceiptStored.
type RecordReceipt struct {
	Key          store.Key
	Generation   uint64
	Attempt      string
	AckedThrough int
}

// Abandon: mark witness (Generation, Attempt) abandoned
// (store.SetDisposition). Answer: Abandoned.
type Abandon struct {
	Key        store.Key
	Generation uint64
	Attempt    string
}

// Promote: the one conditional write of Promotion. Restart: it is a
// restart from a stable boundary, not a page's promotion. Answer:
// Promoted.
type Promote struct {
	Promotion store.Promotion
	Restart   bool
}

// Resolve: decide Promotion's unknown outcome by reading only
// (store.ResolvePromotion). Answer: Resolved.
type Resolve struct{ Promotion store.Promotion }

// Park: record Reason (its String) on the checkpoint, conditional on
// Cursor, Generation and Lease (store.SetParked). Answer: Parked.
type Park struct {
	Key        store.Key
	Cursor     []byte
	Generation uint64
	Lease      store.Lease
	Reason     ParkReason
}

// NoteFailure: record Note, why the partition's fetches keep failing
// transiently, on the checkpoint (its Failing), conditional on Cursor,
// Generation and Lease (store.NoteFailure). It is not progress. Answer:
// FailureNoted.
type NoteFailure struct {
	Key        store.Key
	Cursor     []byte
	Generation uint64
	Lease      store.Lease
	Note       string
}

// WaitUnparked: read the checkpoint of a parked partition (a consistent
// read) to see whether its park reason was cleared. Answer: ParkChecked.
type WaitUnparked struct{ Key store.Key }

// RestartCursor: ask the provider for its stable boundary cursor of
// Partition, given the durable Watermark. Answer: RestartCursorFound.
type RestartCursor struct {
	Partition string
	Watermark coord.Watermark
	// Applied, when HasApplied, is the durable applied boundary, and
	// AppliedID the id of the event there (empty: unknown).
	Applied    coord.Position
	HasApplied bool
	AppliedID  string
	// Expired: the restart follows an expired cursor (otherwise unprovable
	// divergence or a refused promotion).
	Expired bool
}

// Withdraw: withdraw the scalar frontier of Key's scope because Key's
// partition broke a claim it may have published (Reason names the kind
// and the evidence): a new, unproven membership epoch naming the
// partition (membership.Withdraw). Answer: Withdrawn.
type Withdraw struct {
	Key    store.Key
	Reason string
}

// CheckIncarnation: ask the provider for the current incarnation of
// Partition's source (docs/design.md#source-incarnations). Answer:
// IncarnationFound. The request begins when the driver performs the call,
// and the driver steps no Fetched between beginning it and stepping its
// answer: so every fetch result the machine holds when the answer comes
// (stepped before, or while the call waited to be performed) arrived
// before the request began, and the check covers it (a page is emitted
// only after a check that began after its answer arrived). A driver may
// step the answers it already has just before performing the call, to
// let the check cover them.
type CheckIncarnation struct {
	Key store.Key
	// Why says what prompted the check (start, interval, evidence).
	Why string
}

// Reincarnate: the partition's source is a new incarnation. First record
// the change as a membership change (membership.RecordIncarnation: a new,
// unproven epoch in which the old incarnation leaves and the new one
// joins, From and To being the hashes and Why the reason), then perform
// Reset with that epoch as its Epoch: the one conditional write that moves
// the checkpoint to the partition's start in the new incarnation. Answer:
// Reincarnated.
type Reincarnate struct {
	Key      store.Key
	From, To string
	Why      string
	Reset    store.Promotion
}

// LoadReceipts: read the receipts of Key's re-read window above From
// (every one when not HasFrom; store.ReceiptStore.Receipts). Answer:
// ReceiptsLoaded.
type LoadReceipts struct {
	Key     store.Key
	From    coord.Position
	HasFrom bool
}

// PutReceipts: store the receipts of one delivered page
// (store.ReceiptStore.PutReceipts). Answer: ReceiptsStored.
type PutReceipts struct{ Chunk store.ReceiptChunk }

// PruneReceipts: delete Key's receipt chunks at or below Through
// (store.ReceiptStore.PruneReceipts). Answer: ReceiptsPruned.
type PruneReceipts struct {
	Key     store.Key
	Through coord.Position
}

func (a LoadReceipts) String() string {
	if !a.HasFrom {
		return "load receipts of " + a.Key.Partition + " from the start"
	}
	return fmt.Sprintf("load receipts of %s above %s", a.Key.Partition, a.From)
}

func (a PutReceipts) String() string {
	return fmt.Sprintf("put receipts %s g%d: %d events", a.Chunk.Attempt, a.Chunk.Generation, len(a.Chunk.Receipts))
}

func (a PruneReceipts) String() string {
	return fmt.Sprintf("prune receipts of %s through %s", a.Key.Partition, a.Through)
}

func (r ReceiptsLoaded) String() string {
	if r.Err != nil {
		return "receipts loaded: " + errText(r.Err)
	}
	return fmt.Sprintf("receipts loaded: %d", len(r.Receipts))
}

func (r ReceiptsStored) String() string { return stored("receipts stored", r.Err) }

func (r ReceiptsPruned) String() string {
	if r.Err != nil {
		return "receipts pruned: " + errText(r.Err)
	}
	return fmt.Sprintf("receipts pruned: %d chunks", r.N)
}

// Wait: step Tick at Until (or later). The latest Wait replaces the
// earlier ones: it is the machine's earliest deadline.
type Wait struct{ Until time.Time }

// Level is the severity of a Log.
type Level uint8

const (
	Debug Level = iota
	Info
	Warn
	Error
)

var levelNames = [...]string{"debug", "info", "warn", "error"}

func (l Level) String() string {
	if int(l) < len(levelNames) {
		return levelNames[l]
	}
	return fmt.Sprintf("level(%d)", uint8(l))
}

// Log: write Text to the log at Level. Late, when set, is what Text says
// about a late arrival near a re-read window's edge, as a value (reread.go).
type Log struct {
	Level Level
	Text  string
	Late  *LateArrival
}

// LateArrival: a re-read pass emitted an event, at Position, that no
// receipt showed delivered and that lies within the lowest quarter of the
// window above the pass's range start: it appeared at least Depth below
// what the partition had delivered, against a window of Window (units of
// the position's kind: nanoseconds for timestamps). A source that shows
// events that late may show some later still, beyond the window, and
// those are not read (docs/design.md#re-read-windows).
type LateArrival struct {
	Position      coord.Position
	Depth, Window int64
}

// Count: add N to Metric (observe.go). Class is the retry class of
// MetricRetries, Violation the kind of MetricViolations.
type Count struct {
	Metric    Metric
	Class     RetryClass
	Violation reconcile.ViolationKind
	N         int64
}

// Label is the count's label value: its class or violation kind, empty
// for the unlabelled metrics.
func (a Count) Label() string {
	switch {
	case a.Class != 0:
		return a.Class.String()
	case a.Violation != 0:
		return a.Violation.String()
	}
	return ""
}

// Observe: Checkpoint is durable (loaded or promoted): for gauges and the
// in-process feed of watermarks.
type Observe struct{ Checkpoint store.Checkpoint }

// Completed: the partition is complete (durably, or caught up under
// exit_when_complete); the machine does nothing more.
type Completed struct{}

// LeaseGone: a leased machine found its lease gone (a load, a park check
// or a read-back found another lease stored, or a write was fenced by
// another lease): it stopped (StateLeaseLost) and asks nothing more. The
// driver gives the partition up (the input tells its lease manager, which
// counts and logs the loss and stops the worker).
type LeaseGone struct{ Reason string }

func (Load) isAction()             {}
func (Fetch) isAction()            {}
func (PutWitness) isAction()       {}
func (PutWitnesses) isAction()     {}
func (Emit) isAction()             {}
func (EndChain) isAction()         {}
func (RecordReceipt) isAction()    {}
func (Abandon) isAction()          {}
func (Promote) isAction()          {}
func (Resolve) isAction()          {}
func (Park) isAction()             {}
func (NoteFailure) isAction()      {}
func (WaitUnparked) isAction()     {}
func (RestartCursor) isAction()    {}
func (Wait) isAction()             {}
func (Log) isAction()              {}
func (Count) isAction()            {}
func (Observe) isAction()          {}
func (Completed) isAction()        {}
func (LeaseGone) isAction()        {}
func (Withdraw) isAction()         {}
func (CheckIncarnation) isAction() {}
func (Reincarnate) isAction()      {}
func (LoadReceipts) isAction()     {}
func (PutReceipts) isAction()      {}
func (PruneReceipts) isAction()    {}

// ---------------------------------------------------------------------------
// Descriptions, for traces and golden tests.

// Cursor renders a cursor for descriptions: quoted, "start" when empty,
// shortened past 40 bytes.
func Cursor(c []byte) string {
	if len(c) == 0 {
		return "start"
	}
	if len(c) > 40 {
		return strconv.Quote(string(c[:32])) + "…"
	}
	return strconv.Quote(string(c))
}

func wm(w coord.Watermark) string {
	if w.IsZero() {
		return "none"
	}
	return w.String()
}

func positions(evs []reconcile.EventWitness) string {
	var b strings.Builder
	b.WriteString("[")
	for i, e := range evs {
		if i > 0 {
			b.WriteString(" ")
		}
		b.WriteString(e.Position.String())
	}
	b.WriteString("]")
	return b.String()
}

// basisNote renders a watermark's finality basis when it is not the
// source's own certification (the common case, left unsaid): " (lag 1)".
func basisNote(f reconcile.Basis) string {
	if f.IsZero() || f.Certified() {
		return ""
	}
	return " (" + f.String() + ")"
}

// DescribeCheckpoint renders a checkpoint on one line.
func DescribeCheckpoint(cp store.Checkpoint) string {
	var b strings.Builder
	fmt.Fprintf(&b, "g%d %s", cp.Generation, Cursor(cp.Cursor))
	if cp.HasApplied {
		fmt.Fprintf(&b, " applied %s", cp.Applied)
	}
	if !cp.Watermark.IsZero() {
		fmt.Fprintf(&b, " watermark %s%s", cp.Watermark, basisNote(cp.Finality))
	}
	if cp.PromotedWitness != "" {
		fmt.Fprintf(&b, " wid %s", cp.PromotedWitness)
	}
	b.WriteString(describeReread(cp.Reread))
	if cp.Complete {
		b.WriteString(" complete")
	}
	if cp.Incarnation != "" {
		fmt.Fprintf(&b, " incarnation %s", cp.Incarnation)
		if cp.IncarnationEpoch != 0 {
			fmt.Fprintf(&b, " since epoch %d", cp.IncarnationEpoch)
		}
	}
	if cp.Parked != "" {
		fmt.Fprintf(&b, " parked %q", cp.Parked)
	}
	if cp.Failing != "" {
		fmt.Fprintf(&b, " failing %q", cp.Failing)
	}
	if cp.Lease.Owner != "" || cp.Lease.Counter != 0 {
		fmt.Fprintf(&b, " lease %s/%d", cp.Lease.Owner, cp.Lease.Counter)
	}
	if len(cp.Violations) > 0 {
		b.WriteString(" violations")
		for _, k := range slices.Sorted(maps.Keys(cp.Violations)) {
			fmt.Fprintf(&b, " %s=%d", k, cp.Violations[k])
		}
	}
	return b.String()
}

// DescribeWitness renders a witness on one line.
func DescribeWitness(w reconcile.Witness) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s g%d %s -> %s events %s", w.AttemptID, w.Generation, Cursor(w.InputCursor), Cursor(w.Successor), positions(w.Events))
	if !w.CompleteThrough.IsZero() {
		fmt.Fprintf(&b, " ct %s", w.CompleteThrough)
	}
	if len(w.Marker) > 0 {
		fmt.Fprintf(&b, " marker %q", w.Marker)
	}
	if w.Sealed {
		b.WriteString(" sealed")
	}
	fmt.Fprintf(&b, " acked %d %s", w.AckedThrough, w.Disposition)
	return b.String()
}

func (a Load) String() string {
	return fmt.Sprintf("load %s (none: create at %s, generation %d)", a.Key.Partition, Cursor(a.Create.Cursor), a.Create.Generation)
}

func (a Fetch) String() string {
	s := fmt.Sprintf("fetch #%d %s g%d watermark %s attempt %d", a.ID, Cursor(a.Cursor), a.Generation, wm(a.Watermark), a.Attempt)
	if a.Ahead {
		s += " (ahead)"
	}
	return s
}

func (a PutWitness) String() string { return "put witness " + DescribeWitness(a.Witness) }
func (a PutWitnesses) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "put witnesses (%d) in one write", len(a.Witnesses))
	for _, w := range a.Witnesses {
		b.WriteString("; ")
		b.WriteString(DescribeWitness(w))
	}
	return b.String()
}

func (a Emit) String() string {
	return fmt.Sprintf("emit batch %d: %s g%d %s events %d-%d %s", a.Batch, a.Attempt, a.Generation, a.Class, a.From, a.To-1, positions(a.Witnessed))
}

func (a EndChain) String() string { return fmt.Sprintf("end chain %d", a.Chain) }

func (a RecordReceipt) String() string {
	return fmt.Sprintf("record receipt %s g%d through %d", a.Attempt, a.Generation, a.AckedThrough)
}

func (a Abandon) String() string { return fmt.Sprintf("abandon %s g%d", a.Attempt, a.Generation) }

func describePromotion(p store.Promotion) string {
	var b strings.Builder
	fmt.Fprintf(&b, "g%d %s -> %s witness %s", p.FromGeneration, Cursor(p.FromCursor), Cursor(p.To), p.WitnessID)
	if !p.Watermark.IsZero() {
		fmt.Fprintf(&b, " watermark %s%s", p.Watermark, basisNote(p.Finality))
	}
	if p.HasApplied {
		fmt.Fprintf(&b, " applied %s", p.Applied)
	}
	if p.Complete {
		b.WriteString(" complete")
	}
	if p.Pages > 1 {
		fmt.Fprintf(&b, " (%d pages, to g%d)", p.Pages, p.ToGeneration())
	}
	if p.Lease.Held() {
		fmt.Fprintf(&b, " lease %s", p.Lease)
	}
	return b.String()
}

func (a Promote) String() string {
	if a.Restart {
		return "restart " + describePromotion(a.Promotion)
	}
	return "promote " + describePromotion(a.Promotion)
}

func (a Resolve) String() string { return "resolve " + describePromotion(a.Promotion) }

func (a Park) String() string {
	if a.Lease.Held() {
		return fmt.Sprintf("park g%d %s lease %s: %s", a.Generation, Cursor(a.Cursor), a.Lease, a.Reason)
	}
	return fmt.Sprintf("park g%d %s: %s", a.Generation, Cursor(a.Cursor), a.Reason)
}

func (a NoteFailure) String() string {
	if a.Lease.Held() {
		return fmt.Sprintf("note failure g%d %s lease %s: %s", a.Generation, Cursor(a.Cursor), a.Lease, a.Note)
	}
	return fmt.Sprintf("note failure g%d %s: %s", a.Generation, Cursor(a.Cursor), a.Note)
}

func (a WaitUnparked) String() string { return "check unparked " + a.Key.Partition }

func (a RestartCursor) String() string {
	s := fmt.Sprintf("restart cursor of %s after watermark %s", a.Partition, wm(a.Watermark))
	if a.HasApplied {
		s += fmt.Sprintf(" applied %s", a.Applied)
		if a.AppliedID != "" {
			s += fmt.Sprintf(" (id %s)", a.AppliedID)
		}
	}
	if a.Expired {
		s += " (expired)"
	}
	return s
}

func (a Withdraw) String() string { return "withdraw the frontier of " + a.Key.Scope + ": " + a.Reason }

func (w Withdrawn) String() string {
	switch {
	case w.Err != nil:
		return "withdrawn: " + errText(w.Err)
	case w.Changed:
		return fmt.Sprintf("withdrawn: epoch %d", w.Epoch)
	}
	return "withdrawn: already withheld"
}

func (a CheckIncarnation) String() string {
	return fmt.Sprintf("check incarnation of %s (%s)", a.Key.Partition, a.Why)
}

func (a Reincarnate) String() string {
	return fmt.Sprintf("reincarnate %s from %s to %s: reset %s", a.Key.Partition, a.From, a.To, describePromotion(a.Reset))
}

func (r IncarnationFound) String() string {
	if r.Err != nil {
		return "incarnation: " + errText(r.Err)
	}
	return "incarnation " + reconcile.IncarnationHash(r.Value)
}

func (r Reincarnated) String() string {
	if r.Err != nil {
		return "reincarnated: " + errText(r.Err)
	}
	return fmt.Sprintf("reincarnated in epoch %d: %s", r.Epoch, DescribeCheckpoint(r.Checkpoint))
}

func (a Wait) String() string { return "wait until " + a.Until.UTC().Format("15:04:05.000") }

func (a Log) String() string {
	if l := a.Late; l != nil {
		return fmt.Sprintf("log %s [late arrival at %s: depth %d, window %d]: %s", a.Level, l.Position, l.Depth, l.Window, a.Text)
	}
	return fmt.Sprintf("log %s: %s", a.Level, a.Text)
}

func (a Count) String() string {
	s := "count " + a.Metric.String()
	if l := a.Label(); l != "" {
		s += "{" + l + "}"
	}
	if a.N != 1 {
		s += fmt.Sprintf(" %+d", a.N)
	}
	return s
}

func (a Observe) String() string { return "observe " + DescribeCheckpoint(a.Checkpoint) }

func (Completed) String() string { return "completed" }

func (a LeaseGone) String() string { return "lease gone: " + a.Reason }

func errText(err error) string { return "error: " + err.Error() }

func (Start) String() string  { return "start" }
func (Stop) String() string   { return "stop" }
func (t Tick) String() string { return "tick " + t.Now.UTC().Format("15:04:05.000") }

func (l LeaseLost) String() string    { return "lease lost: " + l.Reason }
func (e EpochChanged) String() string { return fmt.Sprintf("epoch changed: %d", e.Epoch) }

func (l Loaded) String() string {
	if l.Err != nil {
		return "loaded: " + errText(l.Err)
	}
	return fmt.Sprintf("loaded %s, %d witnesses", DescribeCheckpoint(l.Checkpoint), len(l.Witnesses))
}

// DescribeResponse renders a response on one line.
func DescribeResponse(r reconcile.Response) string {
	var b strings.Builder
	b.WriteString("[")
	for i, e := range r.Events {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s@%s", e.ID, e.Position)
	}
	fmt.Fprintf(&b, "] succ %s", Cursor(r.Successor))
	if !r.CompleteThrough.IsZero() {
		fmt.Fprintf(&b, " ct %s", r.CompleteThrough)
	}
	if len(r.Marker) > 0 {
		fmt.Fprintf(&b, " marker %q", r.Marker)
	}
	if r.Sealed {
		b.WriteString(" sealed")
	}
	if r.HasMore {
		b.WriteString(" has_more")
	}
	return b.String()
}

func (f Fetched) String() string {
	if f.Err != nil {
		return fmt.Sprintf("fetched #%d: %s %s", f.Fetch, f.Failure, errText(f.Err))
	}
	return fmt.Sprintf("fetched #%d %s: %s", f.Fetch, f.Attempt, DescribeResponse(f.Response))
}

func stored(what string, err error) string {
	if err != nil {
		return what + ": " + errText(err)
	}
	return what
}

func (w WitnessStored) String() string { return stored("witness stored", w.Err) }
func (r ReceiptStored) String() string { return stored("receipt stored", r.Err) }
func (a Abandoned) String() string     { return stored("abandoned", a.Err) }

func (p Promoted) String() string {
	if p.Err != nil {
		return "promoted: " + errText(p.Err)
	}
	return "promoted " + DescribeCheckpoint(p.Checkpoint)
}

func (r Resolved) String() string {
	switch {
	case r.Err != nil:
		return "resolved: " + errText(r.Err)
	case r.Applied:
		return "resolved: applied, " + DescribeCheckpoint(r.Checkpoint)
	}
	return "resolved: not applied, " + DescribeCheckpoint(r.Checkpoint)
}

func (f FailureNoted) String() string {
	if f.Err != nil {
		return "failure noted: " + errText(f.Err)
	}
	return "failure noted " + DescribeCheckpoint(f.Checkpoint)
}

func (p Parked) String() string {
	if p.Err != nil {
		return "parked: " + errText(p.Err)
	}
	return "parked " + DescribeCheckpoint(p.Checkpoint)
}

func (p ParkChecked) String() string {
	if p.Err != nil {
		return "park checked: " + errText(p.Err)
	}
	return "park checked " + DescribeCheckpoint(p.Checkpoint)
}

func (r RestartCursorFound) String() string {
	if r.Err != nil {
		return "restart cursor: " + errText(r.Err)
	}
	return "restart cursor " + Cursor(r.Cursor)
}

func (a Acked) String() string { return fmt.Sprintf("acked batch %d", a.Batch) }
func (n Nacked) String() string {
	return fmt.Sprintf("nacked batch %d", n.Batch)
}

func (d Delivered) String() string {
	var b strings.Builder
	b.WriteString("delivered")
	for _, a := range d.Acks {
		if a.Err != nil {
			fmt.Fprintf(&b, " nack %d", a.Batch)
		} else {
			fmt.Fprintf(&b, " ack %d", a.Batch)
		}
	}
	return b.String()
}
