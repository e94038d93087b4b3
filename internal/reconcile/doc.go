// Package reconcile is tidemark's pure reconciliation core: it builds response
// witnesses, classifies a retried fetch against the earlier responses to the
// same cursor, and decides which successor may be promoted
// (docs/design.md#retry-classification and
// docs/design.md#completion-and-promotion describe the rules; this package
// makes them executable). The provider contract it trusts and the
// responses it reads are defined in the public SDK (package provider) and
// named here by alias (contract.go). It imports only the standard library,
// internal/coord and those types; it reads no clock, draws no random number
// and performs no I/O: inputs in, decisions out, as values the caller acts
// on.
//
// # Invariants
//
// The core invariant (docs/design.md#invariants, invariant 1, binding):
//
//	A successor cursor may advance the checkpoint only with durable
//	completion evidence for the exact response that issued that successor.
//
// The package keeps it, and the rules that follow from it, this way:
//
//   - Binding. Events observed in one response are never combined with a
//     successor taken from another response, not even when both were
//     fetched from the same input cursor. A Verdict binds one attempt;
//     DecidePromotion refuses a verdict for any other witness, reads
//     completion only from the candidate's own AckedThrough or its own
//     evidence, and promotes only that witness's successor.
//   - Response witness. Every successful fetch has a witness (Build): the
//     checkpoint generation and input cursor used for the request, a locally
//     generated response-attempt identifier, the ordered event witness
//     (stable event identity, source position, semantic payload digest), the
//     exact returned successor cursor stored as opaque data, the provider
//     snapshot or coverage marker, and a pending, promoted or abandoned
//     disposition. Cursor bytes are copied, never aliased, and appear in
//     logs only as CursorHash.
//   - Classification (Classify; invariant 5). Exact replay: the ordered
//     event witness and the successor are identical, and the existing
//     witness is resumed. Token rotation: identical events, another
//     successor; a distinct response, promotable only when the provider
//     contract permits token rotation. Shifted page: the events differ;
//     every overlap must match the durable receipts, a conflicting identity
//     or payload at the same immutable position is rejected, and the new
//     response must prove it covers the next required portion of the
//     stream. Unprovable divergence: advancement stops and the partition
//     recovers from a provider-supported stable boundary or a fresh snapshot
//     (Verdict.Recovery names what the contract allows).
//   - Coverage rule. A changed retry response may continue only when every
//     event at or below the durable applied boundary is absent under a
//     declared exclusive boundary or matches its durable receipt, and the
//     unseen suffix begins at the next required source position or the
//     response carries an equivalent coverage proof (a stable snapshot
//     marker, a complete-through watermark). Monotonic positions alone
//     prove no completeness: with sparse positions and no coverage proof, a
//     shifted page is unprovable divergence. An event an earlier fetch of
//     the same cursor showed inside the new response's range, and which the
//     new response omits, stops advancement unless a coverage proof bound
//     to the new response says it is no longer required; one a later fetch
//     showed stops the older response's promotion, proof or not.
//   - Empty-response boundary (invariant 6). A response without events is
//     not complete merely because no event outcome is left to record: its
//     successor advances only when evidence bound to that exact response
//     proves that no required event lies between the durable applied
//     boundary and the successor. A transient empty page or an undocumented
//     end-of-stream flag is no such proof (CanPromote).
//   - Fencing (invariant 2). Promotion is one compare-and-swap, as a value:
//     it requires that the durable checkpoint still holds C and G, writes
//     the selected successor and the next generation, and names the
//     promoted witness on the checkpoint. A losing retry never publishes its
//     candidate successor: the chain reloads the winner and disposes of
//     the loser's witness (Abandon).
//   - Watermarks come only from a response's own CompleteThrough, never from
//     the largest position seen, and a promotion never lowers the durable
//     one (invariant 3). The applied boundary only rises.
//   - Finality is declared, never inferred: a CompleteThrough becomes a
//     durable watermark only as the contract's Finality makes it final
//     (Contract.Final: source, an append-only writer assertion, or less a
//     declared lag; under provider.FinalityNone it stays in the witness), and only
//     provider.FinalitySource makes it coverage evidence (a gap, a shifted page, a
//     withdrawn event, an empty page).
//   - Bad input is an error naming the partition and the positions: a
//     missing id or position, a duplicate id in one response, positions out
//     of order under an ordered contract, the same id at two positions, a
//     receipt conflict (all ErrBadResponse), and an empty response without
//     evidence that loops to its own input cursor (ErrLoop).
//
// # Hashes and their collision bound
//
// An event witness stores 64-bit truncations of SHA-256: IDHash of the
// stable id (HashID) and Digest of the semantic projection when one is given,
// else of the payload (HashPayload). Comparisons happen within one
// comparison set: the events of the witnesses and receipts of one (cursor,
// generation). For n distinct ids in a set the probability that two share
// an IDHash is at most n²/2^65 (the birthday bound): about 2^-45 for 1,000
// events, 2^-39 for 8,000. A payload change goes unnoticed with probability
// 2^-64 per comparison. A collision can only make two different events look
// alike (a false duplicate error, a missed payload change); it never makes a
// missing event look present unless its id hash collides with an event of
// the same set. EncodeEvents stores an event witness compactly (about 1.6 KB
// for 100 consecutive positions) so a witness fits two DynamoDB write units;
// when every event of a page has one digest (a constant semantic
// projection: payload changes do not matter) the digest is stored once,
// about 0.8 KB, one write unit.
//
// # Usage
//
// The caller owns all I/O. For each partition, one fetch at a time, from the
// durable checkpoint (C, G):
//
//  1. Fetch C. Build the witness with a fresh attempt id (ids that sort in
//     fetch order keep the store's attempt order the fetch order). On
//     ErrLoop, back off and fetch C again; on ErrBadResponse, park.
//  2. Persist the witness before, or transactionally with, the first
//     durable event outcome attributed to the response (invariant 4,
//     witness first).
//  3. Under offset pagination (Contract.Pagination), first ask
//     CheckContinuity whether the response continues the page before it
//     (the overlap check); when it does not, treat it as unprovable
//     divergence and recover as Contract.Recovery says.
//     Load every witness for (C, G) and Classify the new one against the
//     others, with the checkpoint's applied boundary (and, optionally, the
//     receipts of the witness promoted into the checkpoint). On an error or
//     UnprovableDivergence, stop: park the partition with the error or
//     Verdict.Reason (a parked Checkpoint makes DecidePromotion refuse
//     every witness) and recover as Verdict.Recovery says. On ExactReplay,
//     continue with Verdict.Resume instead of the new witness.
//  4. Emit the selected response's events in source order. Its first
//     Verdict.Satisfied events already have matching durable receipts and
//     may be recorded without emitting them again.
//  5. Record receipts as outcomes become durable: raise the witness's
//     AckedThrough over the contiguous acknowledged prefix.
//  6. Call DecidePromotion with the checkpoint, the witness, its verdict and
//     the witnesses now recorded for (C, G). Hold: wait for more receipts
//     (an empty response without evidence stays pending). Refuse: never
//     promote this witness; fetch again or park. Promote: go on.
//  7. Perform Decision.Promotion as one compare-and-swap in the store. Win
//     or lose, read the winning checkpoint.
//  8. Abandon the witnesses Abandon(winner, witnesses) names and mark the
//     winner promoted. A loser never publishes its successor: nothing reads it
//     again (the property tests check it with CanPublish).
//
// # Error text
//
// Its errors begin "witness:", not with the package's name: they are about
// a response witness, and their text reaches park reasons stored in
// checkpoints and the logs operators search, which keep the words they had
// before the package was named for the reconciliation it holds.
package reconcile
