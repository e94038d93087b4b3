package memstore

import (
	"context"

	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/store"
)

// WitnessesFrom implements Store.
func (s *Store) WitnessesFrom(_ context.Context, k store.Key, fromGeneration uint64) ([]reconcile.Witness, error) {
	return s.witnessesOf(k, func(g uint64) bool { return g >= fromGeneration })
}

// witnessesOf returns copies of k's witnesses whose generation keep
// accepts, in generation order and, within one, byte-wise AttemptID order.
func (s *Store) witnessesOf(k store.Key, keep func(generation uint64) bool) ([]reconcile.Witness, error) {
	if err := k.Validate(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []reconcile.Witness
	for ref, w := range s.witnesses {
		if ref.key == k && keep(ref.generation) {
			out = append(out, cloneWitness(w))
		}
	}
	store.SortByGenerationAttempt(out)
	return out, nil
}

// PruneWitnesses implements Store.
func (s *Store) PruneWitnesses(_ context.Context, k store.Key, below uint64) (int, error) {
	if err := k.Validate(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for ref := range s.witnesses {
		if ref.key == k && ref.generation < below {
			delete(s.witnesses, ref)
			n++
		}
	}
	return n, nil
}
