// Package probe judges a source's declared contract against what the source
// answered: `connect tidemark probe` fetches a bounded battery of pages with
// the config's own requests (internal/probe/live) and this package, pure,
// turns those responses into one finding per contract field: supported,
// contradicted (with the evidence) or cannot tell.
//
// Usage:
//
//  1. Fill an Observation per partition: the first walk from the start
//     cursor (at most a few pages), the same cursors fetched again (Retries),
//     a second walk of the first pages, the outcome of the validate
//     request, and the incarnation request's read before and after.
//  2. Call Evaluate with the Declared contract: it runs every Check of
//     Checks and returns their findings, in table order.
//  3. Render them (Write); a contradicted finding makes the command exit
//     non-zero.
//
// Two responses of one cursor are compared with the core's own code
// (reconcile.Build and reconcile.Classify with the contract), so "identical",
// "rotated", "shifted" and "divergent" mean what the input would decide.
// Nothing here fetches, reads a clock or writes anywhere. Cursors appear in
// evidence only as reconcile.CursorHash; positions and watermarks appear as
// they are (status shows them too).
//
// A check for a new contract field is one entry of Checks: its field name,
// the declared value it shows, and a Judge over the Facts derived from the
// observation.
package probe
