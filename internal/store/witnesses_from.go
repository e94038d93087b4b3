package store

import (
	"cmp"
	"context"
	"slices"
	"strings"

	"github.com/tidemark/tidemark/internal/witness"
)

// SortByGenerationAttempt orders witnesses by generation, then attempt id.
func SortByGenerationAttempt(ws []witness.Witness) {
	slices.SortStableFunc(ws, func(a, b witness.Witness) int {
		if c := cmp.Compare(a.Generation, b.Generation); c != 0 {
			return c
		}
		return strings.Compare(a.AttemptID, b.AttemptID)
	})
}

// WitnessesFrom implements Store.
func (s *MemStore) WitnessesFrom(_ context.Context, k Key, fromGeneration uint64) ([]witness.Witness, error) {
	if err := k.Validate(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []witness.Witness
	for ref, w := range s.witnesses {
		if ref.key == k && ref.generation >= fromGeneration {
			out = append(out, cloneWitness(w))
		}
	}
	SortByGenerationAttempt(out)
	return out, nil
}

// PruneWitnesses implements Store.
func (s *MemStore) PruneWitnesses(_ context.Context, k Key, below uint64) (int, error) {
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
