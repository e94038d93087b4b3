package memstore

import (
	"bytes"
	"context"

	"github.com/tidemark/tidemark/internal/store"
)

// KeysHoldingCursor implements CursorFinder.
func (s *Store) KeysHoldingCursor(ctx context.Context, cursor []byte, except string, limit int) ([]store.Key, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	found := map[store.Key]bool{}
	for k, c := range s.checkpoints {
		if k.Scope != except && bytes.Equal(c.Cursor, cursor) {
			found[k] = true
		}
	}
	for ref, w := range s.witnesses {
		if ref.key.Scope != except && (bytes.Equal(w.InputCursor, cursor) || bytes.Equal(w.Successor, cursor)) {
			found[ref.key] = true
		}
	}
	return store.SortedKeys(found, limit), nil
}
