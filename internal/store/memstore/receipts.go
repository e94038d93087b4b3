package memstore

import (
	"context"
	"slices"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/store"
)

// PutReceipts implements store.ReceiptStore.
func (s *Store) PutReceipts(_ context.Context, c store.ReceiptChunk) error {
	if err := c.Validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ref := witnessRef{key: c.Key, generation: c.Generation, attempt: c.Attempt}
	if _, ok := s.receipts[ref]; ok {
		return nil
	}
	c.Receipts = slices.Clone(c.Receipts)
	s.receipts[ref] = c
	return nil
}

// Receipts implements store.ReceiptStore.
func (s *Store) Receipts(_ context.Context, k store.Key, from coord.Position, hasFrom bool) ([]store.Receipt, error) {
	if err := k.Validate(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []store.Receipt
	for ref, c := range s.receipts {
		if ref.key != k {
			continue
		}
		for _, r := range c.Receipts {
			if store.ReceiptAbove(r, from, hasFrom) {
				out = append(out, r)
			}
		}
	}
	store.SortReceipts(out)
	return out, nil
}

// PruneReceipts implements store.ReceiptStore.
func (s *Store) PruneReceipts(_ context.Context, k store.Key, through coord.Position) (int, error) {
	if err := k.Validate(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for ref, c := range s.receipts {
		if ref.key == k && c.Top().Kind == through.Kind && c.Top().Compare(through) <= 0 {
			delete(s.receipts, ref)
			n++
		}
	}
	return n, nil
}

// ReceiptChunks returns how many receipt chunks the store holds for k and
// their receipts in all (benchmarks and tests measure the window's state).
func (s *Store) ReceiptChunks(k store.Key) (chunks, receipts int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ref, c := range s.receipts {
		if ref.key == k {
			chunks++
			receipts += len(c.Receipts)
		}
	}
	return chunks, receipts
}
