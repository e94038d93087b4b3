package input

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/chain"
	"github.com/tidemark/tidemark/internal/chain/chainstore"
	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/store"
)

// failingStore answers every call with err.
type failingStore struct {
	store.Store
	err error
}

// The store calls of a partition worker count in tidemark_store_errors
// under their op when they fail, and not when they lose a condition
// (contention), find nothing, or succeed.
func TestStoreErrorsCountFailedCallsByOp(t *testing.T) {
	transport := errors.New("dynamodb: RequestError: connection reset")
	key := store.Key{Scope: "s", Partition: "p"}
	for _, tc := range []struct {
		action chain.Action
		answer chain.Input
		want   string
	}{
		{chain.Promote{}, chain.Promoted{Err: transport}, "promote"},
		{chain.Promote{}, chain.Promoted{Err: &store.FenceError{Key: key, Op: "promote"}}, ""},
		{chain.Promote{}, chain.Promoted{}, ""},
		{chain.Load{}, chain.Loaded{Err: transport}, "load"},
		{chain.Load{}, chain.Loaded{Err: fmt.Errorf("checkpoint: %w", store.ErrNotFound)}, ""},
		{chain.PutWitness{}, chain.WitnessStored{Err: transport}, "put_witness"},
		{chain.PutWitness{}, chain.WitnessStored{Err: store.ErrInvalid}, ""},
		{chain.RecordReceipt{}, chain.ReceiptStored{Err: transport}, "record_receipt"},
		{chain.Abandon{}, chain.Abandoned{Err: transport}, "abandon"},
		{chain.Resolve{}, chain.Resolved{Err: transport}, "resolve"},
		{chain.Park{}, chain.Parked{Err: transport}, "park"},
		{chain.NoteFailure{}, chain.FailureNoted{Err: transport}, "note_failure"},
		{chain.Reincarnate{}, chain.Reincarnated{Err: transport}, "reincarnate"},
		{chain.WaitUnparked{}, chain.ParkChecked{Err: transport}, "wait_unparked"},
		{chain.LoadReceipts{}, chain.ReceiptsLoaded{Err: transport}, "load_receipts"},
		{chain.PutReceipts{}, chain.ReceiptsStored{Err: transport}, "put_receipts"},
		{chain.PruneReceipts{}, chain.ReceiptsPruned{Err: transport}, "prune_receipts"},
		{chain.Withdraw{}, chain.Withdrawn{Err: transport}, "withdraw"},
		// A fetch is no store call.
		{chain.Fetch{}, chain.Fetched{Err: transport}, ""},
	} {
		t.Run(fmt.Sprintf("%T/%v", tc.answer, tc.want), func(t *testing.T) {
			assert.Equal(t, tc.want, storeFailureOp(tc.action, tc.answer))
			if tc.want != "" {
				assert.Contains(t, storeErrorOps, tc.want, "the op is pre-registered at 0")
			}
		})
	}
}

// Every action chainstore.Do performs against the store (its switch's
// cases, read from its source) is named by storeCall, and the error of its
// answer is read: a store call added to chainstore without an op here
// would go uncounted.
func TestStoreErrorsCoverEveryChainstoreCall(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.Join("..", "internal", "chain", "chainstore", "chainstore.go"), nil, 0)
	require.NoError(t, err)
	var cases []string
	ast.Inspect(f, func(n ast.Node) bool {
		if fd, ok := n.(*ast.FuncDecl); ok && fd.Name.Name != "Do" {
			return false
		}
		if cc, ok := n.(*ast.CaseClause); ok {
			for _, e := range cc.List {
				if sel, ok := e.(*ast.SelectorExpr); ok {
					cases = append(cases, sel.Sel.Name)
				}
			}
		}
		return true
	})
	require.NotEmpty(t, cases)
	for _, name := range cases {
		assert.Contains(t, storeCallOps, name, "chainstore.Do handles chain.%s: name its op in storeCallOps", name)
	}
	assert.Len(t, storeCallOps, len(cases), "storeCallOps names no action chainstore.Do lacks")

	transport := errors.New("store down")
	st := failingStore{err: transport}
	for _, a := range []chain.Action{
		chain.Load{}, chain.PutWitness{}, chain.RecordReceipt{}, chain.Abandon{}, chain.Promote{}, chain.Resolve{},
		chain.Park{}, chain.NoteFailure{}, chain.Reincarnate{}, chain.WaitUnparked{}, chain.LoadReceipts{}, chain.PutReceipts{},
		chain.PruneReceipts{}, chain.Withdraw{},
	} {
		t.Run(fmt.Sprintf("%T", a), func(t *testing.T) {
			op := storeCall(a)
			require.NotEmpty(t, op)
			assert.True(t, slices.Contains(storeErrorOps, op))
			in, ok := chainstore.Do(context.Background(), st, a)
			require.True(t, ok)
			assert.ErrorIs(t, storeResultErr(in), transport, "the answer's error is read")
		})
	}
}

func (s failingStore) LoadCheckpoint(context.Context, store.Key) (store.Checkpoint, error) {
	return store.Checkpoint{}, s.err
}

func (s failingStore) CreateCheckpoint(context.Context, store.Checkpoint) (store.Checkpoint, error) {
	return store.Checkpoint{}, s.err
}

func (s failingStore) Promote(context.Context, store.Promotion) (store.Checkpoint, error) {
	return store.Checkpoint{}, s.err
}

func (s failingStore) SetParked(context.Context, store.Key, []byte, uint64, store.Lease, string) (store.Checkpoint, error) {
	return store.Checkpoint{}, s.err
}

func (s failingStore) PutWitness(context.Context, reconcile.Witness) error { return s.err }

func (s failingStore) RecordReceipt(context.Context, store.Key, uint64, string, int) error {
	return s.err
}

func (s failingStore) SetDisposition(context.Context, store.Key, uint64, string, reconcile.Disposition) error {
	return s.err
}

func (s failingStore) PutReceipts(context.Context, store.ReceiptChunk) error { return s.err }

func (s failingStore) Receipts(context.Context, store.Key, coord.Position, bool) ([]store.Receipt, error) {
	return nil, s.err
}

func (s failingStore) PruneReceipts(context.Context, store.Key, coord.Position) (int, error) {
	return 0, s.err
}

func (s failingStore) LoadMembership(context.Context, string) (store.Membership, error) {
	return store.Membership{}, s.err
}

func (s failingStore) NoteFailure(context.Context, store.Key, []byte, uint64, store.Lease, string) (store.Checkpoint, error) {
	return store.Checkpoint{}, s.err
}
