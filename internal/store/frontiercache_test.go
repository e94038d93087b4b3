package store_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/store/memstore"
)

// laggingRoot is a store whose root stays as it was first read: what a
// reader sees when a publisher wrote a shard and then lost the root's
// compare-and-swap (the shard is ahead of the root).
type laggingRoot struct {
	*memstore.Store
	head *store.FrontierHead
}

func (l *laggingRoot) LoadFrontierHead(ctx context.Context, scope string) (store.FrontierHead, error) {
	if l.head == nil {
		h, err := l.Store.LoadFrontierHead(ctx, scope)
		if err != nil {
			return h, err
		}
		l.head = &h
	}
	h := *l.head
	h.Shards = append([]uint64(nil), l.head.Shards...)
	return h, nil
}

func TestFrontierCacheRereadShardsSeesAShardWrittenAheadOfItsRoot(t *testing.T) {
	ctx := context.Background()
	mem := memstore.New()
	const scope = "s"
	vec := map[string]coord.Watermark{}
	for i := range 2 * store.MaxShardNames {
		vec[fmt.Sprintf("p%04d", i)] = coord.Integer(10)
	}
	f1, err := mem.PublishFrontier(ctx, store.Frontier{}, store.Frontier{Scope: scope, Epoch: 1, Vector: vec})
	require.NoError(t, err)
	st := &laggingRoot{Store: mem}
	cache := store.NewFrontierCache(st, scope)
	got, _, err := cache.Refresh(ctx)
	require.NoError(t, err)
	require.Equal(t, coord.Integer(10), got.Vector["p0007"])

	next := f1
	next.Vector = map[string]coord.Watermark{}
	for p, w := range vec {
		next.Vector[p] = w
	}
	next.Vector["p0007"] = coord.Integer(20)
	_, err = mem.PublishFrontier(ctx, f1, next) // its shard is read; the root this reader sees is not
	require.NoError(t, err)

	got, changed, err := cache.Refresh(ctx)
	require.NoError(t, err)
	require.False(t, changed, "the root did not move: nothing is read again")
	require.Equal(t, coord.Integer(10), got.Vector["p0007"])

	cache.RereadShards(1) // more shards than that: no full read
	got, _, err = cache.Refresh(ctx)
	require.NoError(t, err)
	require.Equal(t, coord.Integer(10), got.Vector["p0007"])

	cache.RereadShards(8)
	got, changed, err = cache.Refresh(ctx)
	require.NoError(t, err)
	require.True(t, changed)
	require.Equal(t, coord.Integer(20), got.Vector["p0007"], "a full read sees the shard written ahead of the root")
}
