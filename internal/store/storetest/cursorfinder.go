package storetest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/store"
)

// RunCursorFinder checks store.CursorFinder: a stored cursor is found in
// every scope but the excluded one, as a checkpoint's cursor, a witness's
// input cursor and a witness's successor; the limit and the order hold; a
// cursor stored encrypted (another scope's cursor_encryption) is not found.
func RunCursorFinder(t *testing.T, newStore func(t *testing.T) store.Store) {
	ctx := context.Background()
	s := newStore(t)
	f := store.FindCursorFinder(s)
	require.NotNil(t, f, "the store implements store.CursorFinder")

	mk := func(scope, part, cursor string) store.Key {
		k := store.Key{Scope: scope, Partition: part}
		_, err := s.CreateCheckpoint(ctx, store.Checkpoint{Key: k, Cursor: []byte(cursor), Generation: 1, Epoch: 1})
		require.NoError(t, err)
		return k
	}
	a := mk("scope-a", "p1", "shared-cursor")
	b := mk("scope-b", "p#2", "b-start")
	mk("scope-c", "p3", "c-start")
	require.NoError(t, s.PutWitness(ctx, reconcile.Witness{Scope: "scope-b", Partition: "p#2", Generation: 1, AttemptID: "0001-x",
		InputCursor: []byte("b-start"), Successor: []byte("shared-cursor"), Disposition: reconcile.Pending}))
	require.NoError(t, s.PutWitness(ctx, reconcile.Witness{Scope: "scope-c", Partition: "p3", Generation: 1, AttemptID: "0001-y",
		InputCursor: []byte("c-start"), Successor: []byte("c-next"), Disposition: reconcile.Pending}))

	tests := []struct {
		name   string
		cursor string
		except string
		limit  int
		want   []store.Key
	}{
		{name: "a checkpoint's cursor and a witness's successor", cursor: "shared-cursor", want: []store.Key{a, b}},
		{name: "the excluded scope is not searched", cursor: "shared-cursor", except: "scope-a", want: []store.Key{b}},
		{name: "limit", cursor: "shared-cursor", limit: 1, want: []store.Key{a}},
		{name: "a witness's input cursor", cursor: "c-start", want: []store.Key{{Scope: "scope-c", Partition: "p3"}}},
		{name: "unknown cursor", cursor: "nowhere", want: []store.Key{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := f.KeysHoldingCursor(ctx, []byte(tc.cursor), tc.except, tc.limit)
			require.NoError(t, err)
			if len(tc.want) == 0 {
				assert.Empty(t, got)
				return
			}
			assert.Equal(t, tc.want, got)
		})
	}

	t.Run("encrypted cursors are not matched", func(t *testing.T) {
		enc, err := store.Encrypted(s, []store.CursorKey{{ID: "k", Key: make([]byte, 32)}}, "k")
		require.NoError(t, err)
		_, err = enc.CreateCheckpoint(ctx, store.Checkpoint{Key: store.Key{Scope: "scope-e", Partition: "p"}, Cursor: []byte("secret-cursor"), Generation: 1, Epoch: 1})
		require.NoError(t, err)
		got, err := store.FindCursorFinder(enc).KeysHoldingCursor(ctx, []byte("secret-cursor"), "", 0)
		require.NoError(t, err)
		assert.Empty(t, got)
	})
}
