// Package publish keeps a scope's published frontier record up to date
// from durable state: the Publisher that the paginated_partitions input
// runs once per instance and the simulator steps in two halves. It has no
// Benthos or AWS imports and reads and writes only through store.ScopeProgress (the checkpoints and
// the scope's records).
//
// Invariants:
//
//   - The published record is computed from every checkpoint of the scope
//     in the current membership epoch (not from one instance's view: the
//     others' entries come from the record itself) and written by one
//     compare-and-swap on the record's version (store.PublishFrontier).
//   - No scalar and no vector entry ever goes down within an epoch: a
//     publisher whose reads are behind the record publishes nothing
//     (frontier.NextPublication) or loses the compare-and-swap.
//   - An idle round costs two small reads (the membership epoch and the
//     record's root), whatever the number of partitions; the whole
//     membership and every checkpoint are read only when the epoch changes.
//   - When a round runs is the driver's, paced by Pacer: a change of this
//     process at once, at most one round per minimum gap; idle rounds
//     slower and slower while nothing changes. Pacing is timing only: any
//     schedule of rounds keeps the invariants above (the simulator runs
//     rounds at arbitrary steps).
package publish
