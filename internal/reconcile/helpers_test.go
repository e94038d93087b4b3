package reconcile

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/provider"
)

const (
	scope = "s"
	part  = "p1"
)

// Contracts used throughout the tests.
var (
	// dense: consecutive positions, no snapshot markers, tokens fixed.
	dense = Contract{EmptyPage: provider.EmptyNoEvidence, OrderedPositions: true, DensePositions: true, Recovery: provider.RecoveryRestartFromBoundary, Finality: provider.FinalitySource}
	// sparse: ordered positions with gaps, nothing else.
	sparse = Contract{EmptyPage: provider.EmptyNoEvidence, OrderedPositions: true, Recovery: provider.RecoveryFreshSnapshot, Finality: provider.FinalitySource}
	// snap: sparse positions and stable snapshot markers.
	snap = Contract{EmptyPage: provider.EmptyNoEvidence, OrderedPositions: true, SnapshotMarker: true, Recovery: provider.RecoveryFreshSnapshot, Finality: provider.FinalitySource}
)

func with(c Contract, f func(*Contract)) Contract { f(&c); return c }

func ev(id string, pos int64) Event {
	return Event{ID: id, Position: coord.IntPosition(pos), Payload: []byte("payload of " + id)}
}

func evp(id string, pos int64, payload string) Event {
	return Event{ID: id, Position: coord.IntPosition(pos), Payload: []byte(payload)}
}

func resp(successor string, events ...Event) Response {
	return Response{Successor: []byte(successor), Events: events}
}

func marked(r Response, marker string) Response { r.Marker = []byte(marker); return r }

// build makes the witness of a fetch of cursor at generation gen.
func build(t testing.TB, c Contract, cursor string, gen uint64, attempt string, r Response) Witness {
	t.Helper()
	w, err := Build(BuildInput{Scope: scope, Partition: part, Generation: gen, InputCursor: []byte(cursor), AttemptID: attempt, Response: r, Contract: c})
	require.NoError(t, err)
	return w
}

func acked(w Witness, n int) Witness { w.AckedThrough = n; return w }

func disposed(w Witness, d Disposition) Witness { w.Disposition = d; return w }

func checkpoint(cursor string, gen uint64, applied int64, has bool) Checkpoint {
	return Checkpoint{Scope: scope, Partition: part, Cursor: []byte(cursor), Generation: gen, Applied: coord.IntPosition(applied), HasApplied: has}
}

// classify classifies w against prior from checkpoint cp and fails on error.
func classify(t testing.TB, c Contract, cp Checkpoint, w Witness, prior ...Witness) Verdict {
	t.Helper()
	v, err := Classify(ClassifyInput{Contract: c, Applied: cp.Applied, HasApplied: cp.HasApplied, Prior: prior, Witness: w})
	require.NoError(t, err)
	return v
}

func decide(c Contract, cp Checkpoint, w Witness, v Verdict, all ...Witness) Decision {
	return DecidePromotion(PromotionInput{Contract: c, Checkpoint: cp, Witness: w, Verdict: v, Witnesses: all})
}
