package clustersim

import (
	"github.com/tidemark/tidemark/provider"
)

// denseOrigin is a dense feed that declares where its positions start
// (contract first_position; lane.config sets it to the partition's own
// first position) and whose first page of a traversal is sometimes cut
// above it (cutFirst): the events below the cut are in no answer, and with
// nothing applied yet only the origin shows the gap (coverage rule (b),
// docs/design.md#contract-fields). Its restarts go to the start, which may
// answer whole. It is a change feed without watermarks, like denseOmit.
// A quarter of the schedules read one partition with it (sim.go, from
// its own hash, so the other choices of a seed stay).
var denseOrigin = profile{name: "dense-origin",
	contract: provider.Contract{EmptyPage: provider.EmptyNoEvidence, OrderedPositions: true, DensePositions: true, FirstPosition: provider.IntPosition(1),
		Recovery: provider.RecoveryRestartFromBoundary},
	cutFirst: .3, glitch: .04, quiet: .05, shift: .2, transient: .04, garbage: .003, malformed: .02, pageSize: 3}
