// Package storetest is the contract suite every store.Store implementation
// must pass: the in-memory twin (memstore.Store) and the DynamoDB store
// (internal/dynamostore, against dynalite) run the same tests, so the twin that
// unit tests and the simulator use cannot drift from the real store.
//
// Usage:
//
//	func TestContract(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store { return newEmptyStore(t) })
//	}
//
// newStore is called once per subtest and must return an empty store.
// Test names point back to the invariants of docs/design.md#invariants
// (the numbers in the comments below are that list's) and to the store
// package documentation.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/store"
	"math/rand/v2"
)

// Run runs the contract suite, one subtest per property, each on a fresh
// store from newStore.
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		// Checkpoints (invariants 2 and 3).
		{"LoadMissing", testLoadMissing},
		{"CreateAndLoad", testCreateAndLoad},
		{"CreateRequiresGenerationOne", testCreateRequiresGenerationOne},
		{"CreateRace", testCreateRace},
		{"PromoteCAS", testPromoteCAS},
		{"StaleRetryLoses", testStaleRetryLoses},
		{"LowerWatermarkRefused", testLowerWatermarkRefused},
		{"WatermarkKeptWithoutNew", testWatermarkKeptWithoutNew},
		{"StringWatermarkByteOrder", testStringWatermarkByteOrder},
		{"DecimalWatermarkAndAppliedPosition", testDecimalWatermarkAndAppliedPosition},
		{"AppliedIDTravelsWithTheAppliedPosition", testAppliedIDTravelsWithTheAppliedPosition},
		{"FinalityTravelsWithTheWatermark", testFinalityTravelsWithTheWatermark},
		{"ViolationCountsTravelWithPromotions", testViolationCountsTravelWithPromotions},
		{"ReplayedPromotion", testReplayedPromotion},
		{"CoalescedPromotion", testCoalescedPromotion},
		{"CompletionIsDurable", testCompletionIsDurable},
		{"IncarnationRecordedAndFenced", testIncarnationRecordedAndFenced},
		{"IncarnationReset", testIncarnationReset},
		{"SetParkedConditional", testSetParkedConditional},
		{"FailureNoteIsNotProgress", testFailureNoteIsNotProgress},
		{"RepairLogTravelsWithRepairs", testRepairLogTravelsWithRepairs},
		{"LeaseFencing", testLeaseFencing},
		{"LostResponse", testLostResponse},
		{"RacingPromotions16", testRacingPromotions16},
		{"Invalid", testInvalid},
		{"CursorBytesExact", testCursorBytesExact},
		{"ListCheckpoints", testListCheckpoints},
		{"KeysDoNotCollide", testKeysDoNotCollide},
		{"DeepCopies", testDeepCopies},
		// Witnesses and receipts (invariants 1, 4, 5, 9).
		{"WitnessRoundTrip", testWitnessRoundTrip},
		{"WitnessEventFormats", testWitnessEventFormats},
		{"WitnessIdempotent", testWitnessIdempotent},
		{"WitnessGenerationIsolation", testWitnessGenerationIsolation},
		{"ReceiptMonotone", testReceiptMonotone},
		{"Disposition", testDisposition},
		{"WitnessTooLarge", testWitnessTooLarge},
		{"WitnessesFrom", testWitnessesFrom},
		{"PruneWitnessesBelowAGeneration", testPruneWitnessesBelowAGeneration},
		// Group commit of witnesses (docs/design.md#write-units-per-page).
		{"WitnessGroups", testWitnessGroups},
		{"WitnessGroupReceiptsAndDispositions", testWitnessGroupReceiptsAndDispositions},
		{"PruneKeepsTheWitnessesOfAGroupAboveTheGeneration", testPruneKeepsTheWitnessesOfAGroupAboveTheGeneration},
		// The receipts of a re-read window (docs/design.md#re-read-windows).
		{"ReceiptsRoundTripAboveAPosition", testReceiptsRoundTripAboveAPosition},
		{"ReceiptChunkIdempotent", testReceiptChunkIdempotent},
		{"PruneReceiptsThroughAPosition", testPruneReceiptsThroughAPosition},
		{"ReceiptsOfTimestampPositions", testReceiptsOfTimestampPositions},
		{"RereadStateTravelsWithItsPromotion", testRereadStateTravelsWithItsPromotion},
		// Membership and frontier (invariants 3, 7, 8).
		{"MembershipCAS", testMembershipCAS},
		{"MembershipLineageRoundTrip", testMembershipLineageRoundTrip},
		{"MembershipIncarnationsRoundTrip", testMembershipIncarnationsRoundTrip},
		{"MembershipRepairLogRoundTrip", testMembershipRepairLogRoundTrip},
		{"DiscoveryRequestsCount", testDiscoveryRequestsCount},
		{"FrontierMonotone", testFrontierMonotone},
		{"FrontierRoundTrip", testFrontierRoundTrip},
		{"FrontierVersionFencesAStalePublisher", testFrontierVersionFencesAStalePublisher},
		{"FrontierShardsFollowChange", testFrontierShardsFollowChange},
		{"FrontierReaderRereadsTheRootWhenANewEpochReplacesItsShards", testFrontierReaderRereadsReplacedShards},
		{"RecordsAt100kPartitions", testRecordsAt100kPartitions},
		{"ListCheckpointsAcrossMoreBatchesThanInFlight", testListCheckpointsAcrossBatches},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newStore(t))
		})
	}
}

var key = store.Key{Scope: "orders", Partition: "p0"}

func ctx(t *testing.T) context.Context { return t.Context() }

// create writes a first checkpoint with cursor c and returns it.
func create(t *testing.T, s store.Store, k store.Key, c string) store.Checkpoint {
	t.Helper()
	cp, err := s.CreateCheckpoint(ctx(t), store.Checkpoint{Key: k, Cursor: []byte(c), Generation: 1, Epoch: 1})
	require.NoError(t, err)
	return cp
}

// promotion builds the promotion of cp to cursor to, by witness id.
func promotion(cp store.Checkpoint, to, id string) store.Promotion {
	return store.Promotion{
		Key:            cp.Key,
		FromCursor:     cp.Cursor,
		FromGeneration: cp.Generation,
		To:             []byte(to),
		WitnessID:      id,
		Epoch:          cp.Epoch,
	}
}

// promote performs p and requires it to win.
func promote(t *testing.T, s store.Store, p store.Promotion) store.Checkpoint {
	t.Helper()
	cp, err := s.Promote(ctx(t), p)
	require.NoError(t, err)
	require.Equal(t, p.ToGeneration(), cp.Generation)
	return cp
}

// requireFence requires err to be a *store.FenceError (and ErrFenced) and
// returns it.
func requireFence(t *testing.T, err error) *store.FenceError {
	t.Helper()
	require.Error(t, err)
	require.ErrorIs(t, err, store.ErrFenced)
	var fe *store.FenceError
	require.ErrorAs(t, err, &fe)
	return fe
}

// requireWinner requires err to be a fence whose winner equals want.
func requireWinner(t *testing.T, err error, want store.Checkpoint) *store.FenceError {
	t.Helper()
	fe := requireFence(t, err)
	require.NotNil(t, fe.Winner, "a fenced checkpoint write must carry the winner")
	require.Equal(t, want, *fe.Winner)
	return fe
}

// requireStored requires the stored checkpoint to equal want.
func requireStored(t *testing.T, s store.Store, want store.Checkpoint) {
	t.Helper()
	got, err := s.LoadCheckpoint(ctx(t), want.Key)
	require.NoError(t, err)
	require.Equal(t, want, got)
}

// randomBytes returns n deterministic pseudo-random bytes (all 256 values,
// zero bytes and invalid UTF-8 included).
func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func integer(n int64) coord.Watermark { return coord.Integer(n) }

// errLostResponse simulates a transport failure after the write.
var errLostResponse = errors.New("storetest: response lost (connection reset after the request was sent)")

// lossy wraps a store so that Promote loses its response: when apply is
// set the write happens and the caller still sees errLostResponse; when it
// is not set the request never reaches the store.
type lossy struct {
	store.Store
	apply bool
}

func (l lossy) Promote(ctx context.Context, p store.Promotion) (store.Checkpoint, error) {
	if l.apply {
		if _, err := l.Store.Promote(ctx, p); err != nil {
			return store.Checkpoint{}, fmt.Errorf("storetest: the write behind the lost response failed: %w", err)
		}
	}
	return store.Checkpoint{}, errLostResponse
}
