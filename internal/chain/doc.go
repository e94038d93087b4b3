// Package chain is one partition's chain as a single-threaded,
// deterministic state machine, in the manner of etcd raft's RawNode: the
// driver steps it with Inputs (Start, the time, the answer to its one
// outstanding call, fetch results, the outcomes of emitted batches) and
// performs the Actions it returns (store calls, fetches, emissions, waits,
// logs, metrics). Both the paginated_partitions input (package input: a
// worker per partition, one scheduler for the waits, the emission channel,
// acks) and the
// simulator (internal/clustersim: one step at a time against the in-memory store
// with its faults and the model provider) drive this one machine, so the
// sequencing they exercise is the same. It imports only internal/reconcile,
// internal/store (types and pure functions) and internal/coord: no
// goroutines, no clock (time comes in Tick), no I/O (package chainstore
// performs its store calls).
//
// The machine keeps, by construction:
//
//   - Fencing (docs/design.md#invariants, invariant 2): every progress
//     write it asks for (Promote, Park) is conditional on the (cursor,
//     generation, lease) it last read; a lost condition reloads, an unknown
//     outcome is resolved by reading (Resolve), never by writing blindly.
//   - Binding (invariant 1): a page's successor is promoted only with the
//     verdict of its own witness (reconcile.DecidePromotion); pages are
//     promoted strictly in chain order.
//   - Witness first (invariant 4): a fresh witness is made durable
//     (PutWitness answered without error) before any Emit of its events;
//     only an exact replay resumes a witness that already is.
//   - Classification (invariant 5, docs/design.md#retry-classification):
//     every response is classified against every earlier witness of its
//     (cursor, generation) and the receipts of the witness promoted into
//     it; divergence, expiry and refused promotions recover as the contract
//     says (a restart from a boundary, backing off and parking after
//     MaxRestarts without a promotion; or a park).
//   - Empty pages (invariant 6): an empty response without evidence bound
//     to it is no answer: nothing recorded, the cursor polled again.
//   - Malformed answers (malformed.go): an answer that cannot be read, or
//     that is wrong on its own (no id or position, a duplicate id,
//     positions out of order), is witnessed nowhere, so the same cursor is
//     fetched again after an exponential, bounded back-off, FetchRetries
//     times in a row; the next one parks with a "malformed page after N
//     attempts" reason. A response that contradicts durable evidence (a
//     receipt conflict, a moved event) parks at once. Every park reason
//     starts with its class (reasons.go).
//   - Completion (docs/design.md#completion-and-promotion): a checkpoint
//     loaded complete reads nothing; a held page (no successor, poll)
//     records its receipts so it is never emitted again; a promotion that
//     completes the partition ends the machine (Completed).
//   - Contract monitors (monitor.go, docs/design.md#contract-monitors):
//     every response is also held against the contract (reconcile.Monitor):
//     each observation is counted (MetricViolations, and the checkpoint's
//     counts with the next promotion) and the first of a kind logged; one
//     that breaks a published claim withdraws the scope's scalar frontier
//     (Withdraw: a new, unproven membership epoch), its page is delivered
//     and promoted, and then the partition recovers as the contract says.
//   - One call at a time: a batch of actions holds at most one call, last;
//     until it is answered the machine queues fetch results and delivery
//     outcomes. At most one fetch is in flight; a fetch of an ended chain
//     is ignored when it ends.
//
// The partition lifecycle (docs/design.md#partition-lifecycle): Load →
// (parked: wait, WaitUnparked, Load) | (complete: Completed) | chain. A
// chain fetches from its tail (the durable cursor, or the successor of the
// last page that may be fetched past, with the watermark and applied
// boundary that generation will have), reconciles each response
// (Build, Classify), writes its witness, emits its events in batches,
// records receipts of a partly acknowledged head and promotes complete
// heads in order; a nack of the head, a lost compare-and-swap, a restart or
// a park ends the chain (EndChain) and loads again.
package chain
