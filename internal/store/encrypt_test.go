package store_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/store/memstore"
	"github.com/tidemark/tidemark/internal/store/storetest"
)

func testKeys(ids ...string) []store.CursorKey {
	var out []store.CursorKey
	for i, id := range ids {
		out = append(out, store.CursorKey{ID: id, Key: bytes.Repeat([]byte{byte(i + 1)}, 32)})
	}
	return out
}

// The contract suite holds with cursors encrypted at rest.
func TestEncryptedMemStoreContract(t *testing.T) {
	newStore := func(*testing.T) store.Store {
		s, err := store.Encrypted(memstore.New(), testKeys("k1"), "")
		require.NoError(t, err)
		return s
	}
	storetest.Run(t, newStore)
	storetest.RunLease(t, newStore)
}

// The cursor-encryption properties (no plaintext at rest, rotation,
// fencing, plaintext written before encryption) on the in-memory store.
func TestEncryptedMemStore(t *testing.T) {
	storetest.RunEncrypted(t, func(*testing.T) store.Store { return memstore.New() })
}

func TestEncryptedRefusesBadKeys(t *testing.T) {
	for name, tc := range map[string]struct {
		keys   []store.CursorKey
		active string
	}{
		"no keys":           {nil, ""},
		"short key":         {[]store.CursorKey{{ID: "a", Key: []byte("short")}}, "a"},
		"unknown active":    {testKeys("a", "b"), "c"},
		"two keys, no pick": {testKeys("a", "b"), ""},
		"duplicate id":      {append(testKeys("a"), testKeys("a")...), "a"},
		"empty id":          {testKeys(""), ""},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := store.Encrypted(memstore.New(), tc.keys, tc.active)
			assert.Error(t, err)
		})
	}
	_ = context.Background
	_ = reconcile.Pending
}
