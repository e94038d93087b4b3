// Package frontier derives the combined safe frontier of a partitioned event
// source from the complete-through watermarks of its partitions, and plans
// membership changes between epochs: the arithmetic of
// docs/design.md#frontier-and-membership-epochs (invariants 7 and 8 of
// docs/design.md#invariants). The caller reads checkpoints and writes the
// published record.
//
// The package is pure and deterministic: it imports only the standard
// library and internal/coord, keeps no clock, does no I/O, and its results
// never depend on map iteration order. A Tracker is not safe for concurrent
// use; wrap it if several goroutines feed it.
//
// # Invariants
//
//   - Minimum, per epoch. The combined safe frontier is the minimum of the
//     complete-through watermarks of every partition in one membership epoch.
//     A fast partition cannot carry the combined frontier past a slower one.
//   - Evidence only. A watermark is a coordinate through which the provider
//     guarantees complete enumeration and finality and the consumer has
//     completed the corresponding work. The frontier is never manufactured
//     from token strings, page counts or event maxima: nothing here sees a
//     token, and the largest event merely observed in a sparse partition is
//     not a watermark.
//   - No comparable coordinate, no scalar. When any partition lacks a
//     comparable complete-through coordinate (the zero watermark, i.e. no
//     evidence yet, or a watermark of another coord.Kind than the others),
//     there is no scalar: the Snapshot exposes the checkpoint vector only,
//     HeldBy names the partitions lacking evidence and Reason says why. A
//     quiet or empty page without finality semantics carries no watermark,
//     so the quiet partition continues to hold the combined frontier.
//   - Published with its epoch. Every Snapshot carries the membership epoch
//     it was computed in, so readers can detect a topology change.
//   - Never lower a partition. A late retry may leave a partition unchanged
//     or advance it; it must never reduce its watermark. Tracker.Update with
//     a lower value is ignored and reported (Outcome Stale, Tracker.Ignored),
//     and a watermark of another kind than the partition's own is refused
//     with coord.ErrIncomparable.
//   - Never decrease within an epoch. NextPublication never publishes a
//     scalar lower than the one already published in the same epoch, never
//     retracts a published scalar within that epoch, and never goes back to
//     an older epoch.
//   - Membership changes are proven or withheld. Adding a partition needs
//     proof of complete coverage from the previous published frontier (or a
//     replay of its earlier range); removing one needs proof that it is
//     sealed through the cutover coordinate. Each change is a new epoch. If
//     either proof is unavailable the new epoch is unproven: its Tracker
//     withholds the scalar and publishes the vector, with a Reason naming the
//     partitions and the missing proof. The gap stays open (Membership.
//     Unproven) in later epochs until the proof is supplied.
//
// These rules are justified only by complete-through evidence for every
// included partition; they do not establish exactly-once effects at a sink.
//
// # Usage
//
// The caller's duties, in order:
//
//  1. Fix the membership: a Membership for the epoch, from the store or from
//     PlanChange(current, lastPublished.Scalar, adds, removes) when
//     discovery or configuration changes the partition set. Persist it with
//     a compare-and-swap on the epoch (including Unproven) before using it.
//  2. Build NewTrackerFor(membership). It withholds the scalar when the
//     membership is unproven.
//  3. Feed it one durable checkpoint per partition of that epoch:
//     Update(partition, checkpoint.Watermark). Feed durable, promoted
//     checkpoints only, never a watermark from a response that has not won
//     its compare-and-swap. Repeat whenever a checkpoint changes; each
//     Update costs O(log P) and does not allocate.
//  4. Read Frontier() (O(P): it copies the vector) or the O(1) accessors
//     Scalar and MinHolder.
//  5. Decide with NextPublication(lastPublished, snapshot) and, when it says
//     publish, write the result with a compare-and-swap on the published
//     record. ScalarAdvanced tells a pipeline that the scalar moved forward.
package frontier
