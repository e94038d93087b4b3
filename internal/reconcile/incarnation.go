package reconcile

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/tidemark/tidemark/internal/coord"
)

// IncarnationHash is how an incarnation value (a database uuid, a creation
// time, a marker document's id) is stored on a checkpoint and shown in logs
// and status: "sha256:" and 16 hex digits of its SHA-256, like a cursor's
// hash, so a value that names something private never appears in clear.
// The empty value hashes to "".
func IncarnationHash(value string) string {
	if value == "" {
		return ""
	}
	s := sha256.Sum256([]byte(value))
	return "sha256:" + hex.EncodeToString(s[:8])
}

// RecreationInput is what Recreated reads: one response and the durable
// state of the partition it was fetched from.
type RecreationInput struct {
	Contract Contract
	// Applied, when HasApplied, is the durable applied boundary the fetch
	// was made from (for a page fetched ahead: the boundary its
	// predecessor leaves); Watermark the durable complete-through
	// watermark (zero: none).
	Applied    coord.Position
	HasApplied bool
	Watermark  coord.Watermark
	// AfterPage is set when the cursor fetched is the successor of a page
	// (promoted, or in the chain): the source was asked for what follows
	// the applied boundary. A configured start, a restart, a repair or a
	// reset cursor may legitimately point before it.
	AfterPage bool
	Response  Response
}

// Recreated reports whether a response is evidence that the source was
// recreated under the same name (a new incarnation whose positions start
// again) and why. It never decides from a contract that lets positions go
// back (docs/design.md#source-incarnations):
//
//   - under ordered positions whose coordinate is the watermark's
//     (watermark_covers_positions), a complete-through below the durable
//     complete-through the source certified before: a source's certified
//     sequence does not go back (CouchDB's last_seq below the stored since);
//   - under ordered positions, a page fetched from the successor of a page
//     whose events all lie strictly below the durable applied boundary:
//     positions increase across pages by declaration, so what follows the
//     boundary cannot be older than it.
//
// An empty page or one that reaches the boundary is no evidence; neither
// is anything under positions: unordered.
func Recreated(in RecreationInput) (string, bool) {
	c := in.Contract
	if !c.OrderedPositions && !c.DensePositions {
		return "", false
	}
	r := in.Response
	if ct := r.CompleteThrough; c.WatermarkCoversPositions && !ct.IsZero() && !in.Watermark.IsZero() && ct.Kind == in.Watermark.Kind && ct.Less(in.Watermark) {
		return fmt.Sprintf("the source certifies complete through %s, below the complete-through %s it certified before (positions never go back under positions: ordered)", ct, in.Watermark), true
	}
	if !in.AfterPage || !in.HasApplied || len(r.Events) == 0 {
		return "", false
	}
	top := r.Events[0].Position
	for _, e := range r.Events[1:] {
		if e.Position.Kind != top.Kind {
			return "", false // another kind: a malformed page, not evidence
		}
		top = coord.MaxPosition(top, e.Position)
	}
	if top.Kind != in.Applied.Kind || !top.Less(in.Applied) {
		return "", false
	}
	return fmt.Sprintf("the page after the applied position %s holds only positions up to %s, below it (positions never go back under positions: ordered)", in.Applied, top), true
}
