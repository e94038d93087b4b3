package input

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/store/memstore"
)

// fullFrontierReads counts the reads of a whole published frontier record
// (every shard) and of a whole membership record.
type fullFrontierReads struct {
	*memstore.Store
	frontiers, memberships atomic.Int64
}

func (s *fullFrontierReads) LoadFrontier(ctx context.Context, scope string) (store.Frontier, error) {
	s.frontiers.Add(1)
	return s.Store.LoadFrontier(ctx, scope)
}

func (s *fullFrontierReads) LoadMembership(ctx context.Context, scope string) (store.Membership, error) {
	s.memberships.Add(1)
	return s.Store.LoadMembership(ctx, scope)
}

// The input's store decorator (the redacting one) leaves the published frontier's and the
// membership's cheap reads reachable: an idle publisher behind them reads
// the root and the epoch, not every shard and page every round (with
// leases on, every instance read the whole vector every second).
func TestStoreDecoratorsKeepTheCheapRecordReads(t *testing.T) {
	ctx := context.Background()
	for name, wrap := range map[string]func(store.Store) store.Store{
		"redactingStore": func(st store.Store) store.Store { return redactingStore{Store: st} },
	} {
		t.Run(name, func(t *testing.T) {
			inner := &fullFrontierReads{Store: memstore.New()}
			m, err := inner.SwapMembership(ctx, 0, store.Membership{Scope: "s", Epoch: 1, Partitions: []string{"a", "b"}, Proven: true})
			require.NoError(t, err)
			_, err = inner.PublishFrontier(ctx, store.Frontier{}, store.Frontier{Scope: "s", Epoch: m.Epoch, Scalar: coord.Integer(3), Vector: map[string]coord.Watermark{"a": coord.Integer(3), "b": coord.Integer(4)}})
			require.NoError(t, err)

			st := wrap(inner)
			frontiers := store.NewFrontierCache(st, "s")
			members := store.NewMembershipCache(st, "s")
			for range 3 {
				f, _, err := frontiers.Refresh(ctx)
				require.NoError(t, err)
				require.Equal(t, coord.Integer(3), f.Scalar)
				got, err := members.Load(ctx)
				require.NoError(t, err)
				require.Equal(t, uint64(1), got.Epoch)
			}
			require.Zero(t, inner.frontiers.Load(), "the whole published record was read through %s", name)
			require.Equal(t, int64(1), inner.memberships.Load(), "the whole membership is read once, then only its epoch")
		})
	}
}
