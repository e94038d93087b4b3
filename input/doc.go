// Package input is the paginated_partitions Benthos input: it reads every
// partition of an event source page by page through a provider (the public
// package provider: the input's provider objects come from its registry,
// and the input imports no concrete provider; the http and simulated
// providers live below this package and register themselves),
// records a durable response witness for every page before any of its
// events leaves the input, classifies retries of the same cursor with the
// pure core (internal/reconcile), and moves a partition's checkpoint to a
// page's successor with one conditional write (internal/store) only after
// the outputs acknowledged every event of that exact page. It also keeps the
// scope's membership record and publishes the combined frontier
// (internal/frontier), and, with a `leases` object, shares the partitions
// of a scope between instances (internal/leasing).
//
// The sequencing of one partition (fetch, classify, witness, emit,
// receipts, promotion, recovery) is the state machine of internal/chain;
// this package drives it (partition.go) and performs its actions. The
// design, its vocabulary and the tests that guard each rule are in
// docs/design.md; the numbers below are that document's invariants
// (docs/design.md#invariants).
//
// # Invariants
//
//   - Binding (invariant 1). A page's successor is promoted only by the
//     core's decision for that page's own witness and verdict
//     (reconcile.DecidePromotion, asked by the chain machine), with completion read from that page's own receipts
//     or evidence; pages fetched ahead from a successor that is not durable
//     are dropped when the chain restarts or holds.
//   - Fencing (invariant 2). Every progress write is conditional:
//     CreateCheckpoint on absence, Promote on the cursor, generation (and
//     lease) read, SetParked likewise, SwapMembership on the epoch,
//     PublishFrontier on the record last read. A lost write re-reads the
//     winner and restarts the chain from it; a write with an unknown outcome
//     is resolved by reading (store.ResolvePromotion), never by a blind
//     rewrite. With leases the worker's chain machine is given its lease
//     (chain.Config.Lease; chain.LeaseLost when the lease manager loses
//     it), every Promote and SetParked it asks for carries that lease, and
//     a worker whose load or write finds another lease stops
//     (chain.LeaseGone; docs/design.md#leases-and-fencing).
//   - Monotone (invariant 3). The core never proposes a lower watermark;
//     promotions happen strictly in page order, one generation at a time.
//   - Witness first (invariant 4). The machine asks for a new witness's
//     write before it emits any of its events; an exact replay resumes a witness
//     that is already durable.
//   - Classification (invariant 5). A response that cannot be proven safe
//     is never emitted: unprovable divergence, an expired cursor and a
//     refused promotion go to the contract's recovery (a restart promotion
//     to a provider boundary, or parking); a response that contradicts
//     durable evidence (a receipt conflict, a moved event) and a permanent
//     fetch error park the partition with a reason in the log, the
//     tidemark_parks metric and the checkpoint. A malformed answer is
//     witnessed nowhere and is fetched again on the same cursor
//     (fetch_retries times in a row, with back-off) before it parks. The
//     other partitions go on.
//   - Empty pages (invariant 6). An empty response without evidence bound
//     to it is no answer: nothing is recorded, the cursor is polled again.
//   - No loss (invariant 9). Nothing is promoted before every event of the
//     page has a terminal outcome downstream (an ack); nacks, lost acks at a
//     hard stop and crashes lead to replays, never to gaps. Delivery is at
//     least once.
//
// # Structure
//
// input.go holds the component (Connect starts the instance, ReadBatch
// hands out the batches the workers queue, message sets the tidemark_*
// metadata); instance.go performs the actions of the instance machine
// (internal/instance) without leases: which partitions' workers run, the
// exit when complete or parked; and in both modes (performIO) its
// membership reads and discovery, the parents' reads of the lineage gate,
// the witness deletions, the publication rounds and its epoch changes;
// partition.go the per-partition worker that drives the
// partition's chain machine (internal/chain,
// docs/design.md#partition-lifecycle), performing its store calls
// (internal/chain/chainstore), fetches, emissions and waits, on a goroutine
// only while it has work (runner.go: one scheduler and one bounded pool
// per input; a complete partition's worker ends); membership.go the membership
// calls and the frontier publisher's rounds, which the instance machine
// times (docs/design.md#frontier-and-membership-epochs); lease.go the hook of
// scale-out (internal/leasing); spec.go the config spec; metrics.go the tidemark_* metrics
// (docs/design.md#metadata-and-metrics).
//
// Where the input falls short of the design (completion not recorded on
// the checkpoint, a last page without successor held, the membership and
// the other instances' checkpoints read once per Connect) is listed in
// docs/design.md#known-gaps.
package input
