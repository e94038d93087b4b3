// Package instance is the pure machine of one paginated_partitions
// instance over its scope: which partitions run, their start, stop,
// lease-lost and epoch-changed transitions, the heartbeat lease lifecycle
// (it owns the incarnation's lease.Machine), publication timing (it keeps
// the publish.Pacer that decides when the frontier publisher runs), and exit
// when complete or parked (docs/design.md, "The instance machine").
//
// It performs no I/O, starts no goroutine, reads no clock and takes no
// lock: the driver (the input; internal/clustersim's lease simulation)
// feeds it Inputs and performs the Actions Step returns, in order, as
// raft's RawNode is driven. Each partition's worker drives its own
// internal/chain machine.
//
// Usage, by the driver:
//  1. Step(Start{Now, Self, Membership}) once (Self: the first
//     incarnation's owner "<instance_id>#<incarnation>", with leases).
//  2. Perform every action in order. StopWorker first marks the worker
//     stopped (it makes no store call afterwards), then cancels it; a
//     ReleaseLease follows its StopWorker and waits for the worker's
//     fenced write in flight. Answer each call with the matching Input,
//     echoing its Owner: RenewHeartbeat with Renewed (Start: the clock
//     reading when it was sent), ReadHeartbeats with HeartbeatsRead,
//     TakeOver with TookOver, ReadLeases with LeasesRead (after creating
//     up to CreateBudget missing checkpoints), ClaimLease with Claimed,
//     ReleaseLease with Released, NewIncarnation with Incarnation (a new
//     random owner), Publish with Published (Start: the clock reading when
//     the round began). Every call has a deadline, so
//     every call is answered; the driver bounds the calls in flight.
//  3. Step(Tick{Now}) at the instant of the last Wake (or more often).
//  4. Report the workers: WorkerLost (a fenced write), WorkerStopped (it
//     returned), Completed and Parked (every checkpoint loaded or
//     promoted), Promoted (a durable promotion: a publication round is
//     due); and the memberships read (Adopt).
//  5. Stop when Exit is returned; Shutdown asks for one.
//
// Invariants (pinned by the goldens in testdata/):
//   - A partition whose lease is lost (a read shows another lease, a
//     worker's write was fenced, the incarnation is gone) gets StopWorker
//     before any other action of that step; a gone incarnation stops every
//     worker before NewIncarnation, and answers to it change nothing.
//   - Exit as complete only when every member is complete and none is
//     parked; a parked one ends the instance only as a failed run, after
//     the grace.
package instance
