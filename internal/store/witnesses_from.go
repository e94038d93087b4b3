package store

import (
	"cmp"
	"slices"
	"strings"

	"github.com/tidemark/tidemark/internal/reconcile"
)

// SortByGenerationAttempt orders witnesses by generation, then attempt id.
func SortByGenerationAttempt(ws []reconcile.Witness) {
	slices.SortStableFunc(ws, func(a, b reconcile.Witness) int {
		if c := cmp.Compare(a.Generation, b.Generation); c != 0 {
			return c
		}
		return strings.Compare(a.AttemptID, b.AttemptID)
	})
}
