// Package membership decides how a scope's membership changes, from what
// the provider lists and the durable checkpoints. It is the one
// implementation that the paginated_partitions input and the simulator run;
// it has no Benthos or AWS imports and reads and writes only through
// store.Store. The frontier is published from the membership it writes by
// package publish.
//
// Invariants:
//
//   - Every change is a new epoch written by one compare-and-swap on the
//     membership record's epoch (store.SwapMembership); a planner that lost
//     the race re-reads and plans again.
//   - A partition joins with proof of coverage (it is read from the
//     provider's start: no checkpoint, or one never promoted past the
//     provider's start) or the new epoch is unproven; a partition leaves
//     with proof of sealing (its durable Complete state, sealed through the
//     cutover) or the new epoch is unproven. An unproven epoch withholds the
//     scalar frontier and publishes the vector, with the reason naming the
//     partitions and the missing proofs (frontier.PlanChange). A proof that
//     arrives later (the partition completes) settles the change in a new,
//     proven epoch.
//   - Lineage: a member may have parents (a split or merge). A complete
//     parent of a member leaves the membership even while the provider
//     still lists it (closed shards stay listed), and is never added back.
//     A child is not read while a parent that is still a member is not
//     complete (Waiting), so its coordinates cannot enter the frontier
//     before its parents' are final.
package membership
