package instance

import (
	"fmt"
	"strings"
	"time"

	"github.com/tidemark/tidemark/internal/lease"
	"github.com/tidemark/tidemark/internal/store"
)

// Input is one thing that happened to the instance: a reading of the
// clock, the answer of an action the driver performed, a worker's news, a
// membership read. Answers echo the Owner of the action they answer (the
// incarnation that asked): an answer to a gone incarnation changes nothing.
type Input interface {
	isInput()
	String() string
}

// Action is one thing the machine decided; the driver performs it (in the
// order returned) and reports its outcome with the matching Input.
type Action interface {
	isAction()
	String() string
}

// ---------------------------------------------------------------------------
// Inputs.

// Start is the first input: the membership the instance starts with (read
// and reconciled by the driver) and, with leases, the owner name of its
// first incarnation ("<instance_id>#<incarnation>", random per process).
type Start struct {
	Now        time.Time
	Self       string
	Membership Membership
}

// Membership is one epoch of the scope's membership.
type Membership struct {
	Epoch      uint64
	Partitions []string
	// Parents names members' parents (a split's lineage): unless
	// Config.UnorderedLineage, a member with parents starts only once
	// every parent that is still a member is complete.
	Parents map[string][]string
}

// Tick is a reading of the driver's monotonic clock: due timers fire (the
// driver ticks at the Wake instants the machine asks for, and may tick
// more often).
type Tick struct{ Now time.Time }

// Adopt is a membership read (discovery, the epoch check, the frontier
// publisher): adopted when its epoch is newer than the instance's.
// Record is the record read, handed back by EpochChanged.
type Adopt struct {
	Now        time.Time
	Membership Membership
	Source     string
	Record     store.Membership
}

// MembershipRead answers ReadMembership: the membership record read,
// the scope's discovery request counter (RequestsRead: it could be read),
// and whether a source incarnation awaits its proof.
type MembershipRead struct {
	Now          time.Time
	Membership   Membership
	Record       store.Membership
	Requests     uint64
	RequestsRead bool
	Incarnations bool
	Err          error
}

// Discovered answers Discover: the membership the round wrote or found.
type Discovered struct {
	Now        time.Time
	Why        string
	Membership Membership
	Record     store.Membership
	Err        error
}

// ParentsRead answers ReadParents: the checkpoints of the partition's
// parents found (a parent without one is not complete).
type ParentsRead struct {
	Now         time.Time
	Partition   string
	Checkpoints []store.Checkpoint
	Err         error
}

// Pruned answers Prune.
type Pruned struct {
	Partition string
	Below     uint64
	Err       error
}

// Incarnation answers NewIncarnation: the owner name of the new
// incarnation.
type Incarnation struct {
	Now  time.Time
	Self string
}

// Renewed answers RenewHeartbeat (Start: the clock reading when the write
// was sent).
type Renewed struct {
	Owner     string
	Start     time.Time
	Heartbeat store.Heartbeat
	Err       error
}

// HeartbeatsRead answers ReadHeartbeats (Now: a reading taken after the
// read returned).
type HeartbeatsRead struct {
	Owner      string
	Now        time.Time
	Heartbeats []store.Heartbeat
	Err        error
}

// TookOver answers TakeOver.
type TookOver struct {
	Owner string
	Seen  store.Heartbeat
	Err   error
}

// LeasesRead answers ReadLeases: every checkpoint of the scope (after the
// driver created the missing ones it was asked to).
type LeasesRead struct {
	Owner       string
	Now         time.Time
	Checkpoints []store.Checkpoint
	Err         error
}

// Claimed answers ClaimLease.
type Claimed struct {
	Owner     string
	Partition string
	Lease     store.Lease
	Err       error
}

// Released answers ReleaseLease.
type Released struct {
	Owner     string
	Partition string
	Err       error
}

// WorkerLost reports a worker that found its lease gone (a fenced write:
// chain.LeaseGone).
type WorkerLost struct {
	Partition, Reason string
}

// WorkerStopped reports that a worker returned (told to stop, or ended on
// its own).
type WorkerStopped struct{ Partition string }

// Completed reports that a partition's worker found it complete (durably:
// its traversal ended).
type Completed struct{ Partition string }

// Parked reports a partition's park reason as its worker loaded or
// promoted its checkpoint ("" once unparked).
type Parked struct{ Partition, Reason string }

// Promoted reports a durable checkpoint of a partition this process runs
// (loaded or promoted: what the worker hands the in-process feed): the
// frontier may have moved, so a publication round is due, and the
// witnesses below its generation may be deleted (Config.PruneEvery).
type Promoted struct {
	Now        time.Time
	Partition  string
	Generation uint64
}

// Published answers Publish: Start is the clock reading when the round
// began and Now one after it ended; Active whether it found anything
// changed (it wrote a record, read a record or an epoch another instance
// changed, or failed); Fenced whether another publisher won its write
// (what this process knows is still to be published); Epoch the
// membership epoch the publisher read.
type Published struct {
	Now, Start     time.Time
	Active, Fenced bool
	Epoch          uint64
}

// Shutdown asks the instance to stop: every worker stops, every held
// lease is released, then the heartbeat is deleted.
type Shutdown struct{ Now time.Time }

func (Start) isInput()          {}
func (Tick) isInput()           {}
func (Adopt) isInput()          {}
func (Incarnation) isInput()    {}
func (Renewed) isInput()        {}
func (HeartbeatsRead) isInput() {}
func (TookOver) isInput()       {}
func (LeasesRead) isInput()     {}
func (Claimed) isInput()        {}
func (Released) isInput()       {}
func (WorkerLost) isInput()     {}
func (WorkerStopped) isInput()  {}
func (Completed) isInput()      {}
func (Parked) isInput()         {}
func (Promoted) isInput()       {}
func (MembershipRead) isInput() {}
func (Discovered) isInput()     {}
func (ParentsRead) isInput()    {}
func (Pruned) isInput()         {}
func (Published) isInput()      {}
func (Shutdown) isInput()       {}

func (m Membership) String() string {
	return fmt.Sprintf("epoch %d %v", m.Epoch, m.Partitions)
}

func (s Start) String() string       { return fmt.Sprintf("start %s %s", s.Self, s.Membership) }
func (t Tick) String() string        { return "tick" }
func (a Adopt) String() string       { return fmt.Sprintf("adopt %s (%s)", a.Membership, a.Source) }
func (i Incarnation) String() string { return "incarnation " + i.Self }
func (r Renewed) String() string {
	if r.Err != nil {
		return fmt.Sprintf("renewed %s: %v", r.Owner, r.Err)
	}
	return "renewed " + r.Heartbeat.String()
}
func (r HeartbeatsRead) String() string {
	return fmt.Sprintf("heartbeats %v err %v", r.Heartbeats, r.Err)
}
func (r TookOver) String() string { return fmt.Sprintf("took over %s: %v", r.Seen, r.Err) }
func (r LeasesRead) String() string {
	return fmt.Sprintf("leases read (%d checkpoints) err %v", len(r.Checkpoints), r.Err)
}
func (r Claimed) String() string {
	return fmt.Sprintf("claimed %s %s err %v", r.Partition, r.Lease, r.Err)
}
func (r Released) String() string      { return fmt.Sprintf("released %s err %v", r.Partition, r.Err) }
func (r WorkerLost) String() string    { return fmt.Sprintf("worker %s lost: %s", r.Partition, r.Reason) }
func (r WorkerStopped) String() string { return "worker stopped " + r.Partition }
func (r Completed) String() string     { return "partition complete " + r.Partition }
func (r Parked) String() string        { return fmt.Sprintf("partition %s parked %q", r.Partition, r.Reason) }
func (r Promoted) String() string {
	return fmt.Sprintf("promoted %s g%d", r.Partition, r.Generation)
}
func (r MembershipRead) String() string {
	return fmt.Sprintf("membership read %s requests %d err %v", r.Membership, r.Requests, r.Err)
}
func (r Discovered) String() string {
	return fmt.Sprintf("discovered (%s) %s err %v", r.Why, r.Membership, r.Err)
}
func (r ParentsRead) String() string {
	return fmt.Sprintf("parents of %s read (%d checkpoints) err %v", r.Partition, len(r.Checkpoints), r.Err)
}
func (r Pruned) String() string {
	return fmt.Sprintf("pruned %s below g%d err %v", r.Partition, r.Below, r.Err)
}
func (r Published) String() string {
	return fmt.Sprintf("published (active %v, fenced %v, epoch %d)", r.Active, r.Fenced, r.Epoch)
}
func (Shutdown) String() string { return "shutdown" }

// ---------------------------------------------------------------------------
// Actions.

// StartWorker starts the partition's worker (its chain machine) under
// Lease (zero without leases) in membership epoch Epoch.
type StartWorker struct {
	Partition string
	Lease     store.Lease
	Epoch     uint64
}

// StopWorker stops the partition's worker at once: its lease is lost,
// released, the incarnation is gone, the partition left the membership or
// the instance shuts down. The driver marks it stopped before performing
// any later action (a worker told to stop makes no store call after it);
// WorkerStopped reports when it returned.
type StopWorker struct {
	Partition, Reason string
}

// EpochChanged tells the running workers (and the messages' metadata) the
// membership epoch the instance adopted (Previous: the one before), read
// from Source; Record is the Adopt's.
type EpochChanged struct {
	Epoch, Previous uint64
	Partitions      []string
	Source          string
	Record          store.Membership
}

// ReadMembership reads the membership record (the epoch first, the record
// when it changed) and, with discovery, the scope's discovery request
// counter; answer with MembershipRead. One membership call at a time.
type ReadMembership struct{}

// Discover runs one discovery round (list the provider's partitions,
// decide, write the membership by compare-and-swap); answer with
// Discovered. Why: at a discovery_interval, requested by an operator, or
// to offer a source incarnation its proof.
type Discover struct{ Why string }

// ReadParents loads the checkpoint of each of Partition's parents; answer
// with ParentsRead. The partition starts once they are complete.
type ReadParents struct {
	Partition string
	Parents   []string
}

// LineageWait: Partition waits for its parents Waiting to be complete
// (sealed and drained) before it is read; an empty Waiting: they are, it
// starts (the driver logs both).
type LineageWait struct {
	Partition string
	Waiting   []string
}

// Prune deletes Partition's witnesses below generation Below
// (store.WitnessStore.PruneWitnesses); answer with Pruned. One deletion of
// a partition at a time (chain.Pruning).
type Prune struct {
	Partition string
	Below     uint64
}

// RenewHeartbeat is one conditional heartbeat write (store.RenewHeartbeat
// of Heartbeat with Held); answer with Renewed, Start being the clock
// reading when it was sent.
type RenewHeartbeat struct {
	Heartbeat store.Heartbeat
	Held      int
}

// ReadHeartbeats reads every heartbeat of the scope; answer with
// HeartbeatsRead.
type ReadHeartbeats struct{ Owner string }

// TakeOver takes Seen's heartbeat over (conditional on its counter);
// answer with TookOver.
type TakeOver struct {
	Owner string
	Seen  store.Heartbeat
}

// ReadLeases creates up to CreateBudget of the missing checkpoints of
// Partitions (in the owner's rendezvous order: lease.Rendezvous), then
// reads every checkpoint of the scope; answer with LeasesRead.
type ReadLeases struct {
	Owner        string
	Partitions   []string
	CreateBudget int
}

// ClaimLease is one conditional claim (store.ClaimLease of Claim.Expect);
// answer with Claimed. The driver bounds the claims in flight.
type ClaimLease struct {
	Owner string
	Claim lease.Claim
}

// ReleaseLease hands the partition's lease off (store.ReleaseLease of
// Lease), after the worker's fenced write in flight, if any; answer with
// Released. Its StopWorker was returned before it.
type ReleaseLease struct {
	Owner     string
	Partition string
	Lease     store.Lease
	Why       string
}

// DeleteHeartbeat removes a heartbeat (a taken-over owner holding nothing,
// or this instance's own at shutdown); no answer.
type DeleteHeartbeat struct{ Heartbeat store.Heartbeat }

// NewIncarnation: the incarnation is gone (Reason; every worker was
// stopped first): answer with Incarnation, the owner name of a new one.
type NewIncarnation struct{ Reason string }

// Publish runs one round of the frontier publisher (answer with
// Published); Final is the last one, before Exit (its answer changes
// nothing: it may run beside a round asked before it, so a driver keeps
// room for two).
type Publish struct{ Final bool }

// Exit ends the instance: every partition is complete (exit_when_complete),
// or (Failed) every partition is complete or parked, and the parked ones
// stayed parked for the grace (Reasons lists them), or the instance shut
// down.
type Exit struct {
	Failed  bool
	Reasons []string
}

// ParkedWait: every partition is complete or parked, Parked of them
// parked: the instance ends as a failed run at At unless one is unparked
// (the driver warns).
type ParkedWait struct {
	Parked int
	At     time.Time
}

// Wake asks the driver to Tick at At (the earliest timer due).
type Wake struct{ At time.Time }

func (StartWorker) isAction()     {}
func (StopWorker) isAction()      {}
func (EpochChanged) isAction()    {}
func (RenewHeartbeat) isAction()  {}
func (ReadHeartbeats) isAction()  {}
func (TakeOver) isAction()        {}
func (ReadLeases) isAction()      {}
func (ClaimLease) isAction()      {}
func (ReleaseLease) isAction()    {}
func (DeleteHeartbeat) isAction() {}
func (NewIncarnation) isAction()  {}
func (Publish) isAction()         {}
func (ReadMembership) isAction()  {}
func (Discover) isAction()        {}
func (ReadParents) isAction()     {}
func (LineageWait) isAction()     {}
func (Prune) isAction()           {}
func (Exit) isAction()            {}
func (ParkedWait) isAction()      {}
func (Wake) isAction()            {}

func (a StartWorker) String() string {
	if a.Lease.IsZero() {
		return fmt.Sprintf("start worker %s epoch %d", a.Partition, a.Epoch)
	}
	return fmt.Sprintf("start worker %s lease %s epoch %d", a.Partition, a.Lease, a.Epoch)
}
func (a StopWorker) String() string { return fmt.Sprintf("stop worker %s: %s", a.Partition, a.Reason) }
func (a EpochChanged) String() string {
	return fmt.Sprintf("epoch changed to %d %v", a.Epoch, a.Partitions)
}
func (ReadMembership) String() string { return "read membership" }
func (a Discover) String() string     { return "discover (" + a.Why + ")" }
func (a ReadParents) String() string {
	return fmt.Sprintf("read parents of %s %v", a.Partition, a.Parents)
}
func (a LineageWait) String() string {
	if len(a.Waiting) == 0 {
		return fmt.Sprintf("%s: parents complete", a.Partition)
	}
	return fmt.Sprintf("%s waits for parents %v", a.Partition, a.Waiting)
}
func (a Prune) String() string { return fmt.Sprintf("prune %s below g%d", a.Partition, a.Below) }
func (a RenewHeartbeat) String() string {
	return fmt.Sprintf("renew heartbeat %s/%d holding %d", a.Heartbeat.Owner, a.Heartbeat.Counter, a.Held)
}
func (a ReadHeartbeats) String() string { return "read heartbeats" }
func (a TakeOver) String() string       { return "take over " + a.Seen.String() }
func (a ReadLeases) String() string {
	return fmt.Sprintf("read leases (create up to %d missing)", a.CreateBudget)
}
func (a ClaimLease) String() string { return a.Claim.String() }
func (a ReleaseLease) String() string {
	return fmt.Sprintf("release %s %s: %s", a.Partition, a.Lease, a.Why)
}
func (a DeleteHeartbeat) String() string { return "delete heartbeat " + a.Heartbeat.String() }
func (a NewIncarnation) String() string  { return "new incarnation: " + a.Reason }
func (a Publish) String() string {
	if a.Final {
		return "publish (final)"
	}
	return "publish"
}
func (a Exit) String() string {
	if !a.Failed {
		return "exit"
	}
	return "exit failed: " + strings.Join(a.Reasons, "; ")
}
func (a ParkedWait) String() string {
	return fmt.Sprintf("%d parked: exit as failed at %s unless unparked", a.Parked, a.At.Format("15:04:05.000"))
}
func (a Wake) String() string { return "wake at " + a.At.Format("15:04:05.000") }
