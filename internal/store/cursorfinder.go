package store

import (
	"cmp"
	"context"
	"slices"
)

// CursorFinder is implemented by stores that can search every scope they
// hold for a stored cursor (a checkpoint's cursor, a witness's input cursor
// or successor). The operator's restart uses it to refuse a cursor copied
// from another scope; no progress path uses it (it reads the whole table).
//
// Only values stored as given match: a cursor another scope stores
// encrypted (cursor_encryption binds each ciphertext to its scope and
// partition) is not found.
type CursorFinder interface {
	// KeysHoldingCursor returns, sorted, up to limit partitions of scopes
	// other than except that store cursor.
	KeysHoldingCursor(ctx context.Context, cursor []byte, except string, limit int) ([]Key, error)
}

// SortedKeys returns the keys of found, sorted by scope then partition,
// at most limit of them (0: all).
func SortedKeys(found map[Key]bool, limit int) []Key {
	out := make([]Key, 0, len(found))
	for k := range found {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b Key) int {
		return cmp.Or(cmp.Compare(a.Scope, b.Scope), cmp.Compare(a.Partition, b.Partition))
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out
}

// FindCursorFinder returns the CursorFinder s is or wraps (nil when none).
func FindCursorFinder(s any) CursorFinder {
	for s != nil {
		if f, ok := s.(CursorFinder); ok {
			return f
		}
		u, ok := s.(interface{ Unwrap() Store })
		if !ok {
			return nil
		}
		s = u.Unwrap()
	}
	return nil
}
