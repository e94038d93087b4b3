package storetest

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/store"
)

// testWitnessesFrom: one read returns every witness at or above a
// generation, ordered by generation then attempt, and nothing below it.
func testWitnessesFrom(t *testing.T, s store.Store) {
	k := store.Key{Scope: "from", Partition: "p"}
	put := func(gen uint64, attempt string) {
		w := reconcile.Witness{
			Scope: k.Scope, Partition: k.Partition, Generation: gen, InputCursor: []byte("c"),
			AttemptID: attempt, Successor: []byte("n"), Disposition: reconcile.Pending,
			Events: []reconcile.EventWitness{{IDHash: 1, Position: coord.IntPosition(int64(gen)), Digest: 2}},
		}
		require.NoError(t, s.PutWitness(ctx(t), w))
	}
	put(9, "a")
	put(10, "b")
	put(10, "a")
	put(11, "a")
	put(100, "a")
	got, err := s.WitnessesFrom(ctx(t), k, 10)
	require.NoError(t, err)
	var order []string
	for _, w := range got {
		order = append(order, fmt.Sprint(w.Generation, "/", w.AttemptID))
	}
	require.Equal(t, []string{"10/a", "10/b", "11/a", "100/a"}, order)
	none, err := s.WitnessesFrom(ctx(t), k, 101)
	require.NoError(t, err)
	require.Empty(t, none)
	other, err := s.WitnessesFrom(ctx(t), store.Key{Scope: "from", Partition: "q"}, 0)
	require.NoError(t, err)
	require.Empty(t, other)
}
