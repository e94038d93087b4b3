// Package frontiermeta is the one place the frontier becomes message
// metadata: the keys partition_frontier and frontier_advances set, and how a
// snapshot is written into them.
//
// Invariant: tidemark_frontier is present exactly when the snapshot proves a
// scalar; tidemark_frontier_epoch, tidemark_frontier_vector and
// tidemark_frontier_held_by are always set, so a consumer can tell a withheld
// scalar from a missing processor.
package frontiermeta

import (
	"strconv"
	"strings"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/tidemark/tidemark/internal/frontier"
)

// Metadata keys of the frontier.
const (
	Frontier       = "tidemark_frontier"
	FrontierEpoch  = "tidemark_frontier_epoch"
	FrontierVector = "tidemark_frontier_vector"
	FrontierHeldBy = "tidemark_frontier_held_by"
	FrontierReason = "tidemark_frontier_reason"
	// FrontierFinality names the members whose watermark rests on an
	// append-only writer assertion or a lag (frontier.FinalityNote), when
	// the scalar is proven and some member's does.
	FrontierFinality = "tidemark_frontier_finality"
)

// Set writes snap into msg's metadata (and deletes the keys snap leaves
// empty).
func Set(msg *service.Message, snap frontier.Snapshot) {
	if snap.Proven && !snap.Scalar.IsZero() {
		msg.MetaSetMut(Frontier, snap.Scalar.String())
	} else {
		msg.MetaDelete(Frontier)
	}
	msg.MetaSetMut(FrontierEpoch, strconv.FormatUint(snap.Epoch, 10))
	msg.MetaSetMut(FrontierVector, frontier.VectorJSON(snap.Vector))
	msg.MetaSetMut(FrontierHeldBy, strings.Join(snap.HeldBy, ","))
	if snap.Reason != "" {
		msg.MetaSetMut(FrontierReason, snap.Reason)
	} else {
		msg.MetaDelete(FrontierReason)
	}
}

// SetFinality writes the frontier's finality note (frontier.FinalityNote)
// into msg's metadata, or deletes the key when note is empty.
func SetFinality(msg *service.Message, note string) {
	if note != "" {
		msg.MetaSetMut(FrontierFinality, note)
	} else {
		msg.MetaDelete(FrontierFinality)
	}
}
