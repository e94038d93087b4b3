package storetest

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/store"
)

// itemSizer is implemented by stores that report the largest item they
// wrote (the DynamoDB store: DynamoDB's sizing rule).
type itemSizer interface{ LargestItemWritten() int }

// maxTestItemBytes is the bound the 100,000-partition test asserts: well
// under DynamoDB's 400 KB item limit.
const maxTestItemBytes = 350 << 10

// names36 returns n distinct partition names of 36 characters (the length
// of a UUID).
func names36(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%08x-0000-4000-8000-%012d", i*2654435761%(1<<32), i)
	}
	return out
}

// shardedVector skips the test unless s keeps the frontier in shards, and
// returns a vector of 2,500 partitions (three shards) and their names.
func shardedVector(t *testing.T, s store.Store) (store.ShardedFrontier, []string, map[string]coord.Watermark) {
	sf, ok := s.(store.ShardedFrontier)
	if !ok {
		t.Skip("the store keeps the frontier in one record")
	}
	names := names36(2500)
	vec := make(map[string]coord.Watermark, len(names))
	for i, p := range names {
		vec[p] = integer(int64(100 + i))
	}
	return sf, names, vec
}

// A frontier published over a vector of many partitions is stored in
// shards: a change of one entry raises the version of its shard only, the
// root carries every shard's version, and a reader following the record
// (store.FrontierCache) reads only the changed shard.
func testFrontierShardsFollowChange(t *testing.T, s store.Store) {
	sf, names, vec := shardedVector(t, s)
	const scope = "tenants"
	f1, err := s.PublishFrontier(ctx(t), store.Frontier{}, store.Frontier{Scope: scope, Epoch: 1, Scalar: integer(100), Vector: vec, HeldBy: names[:200]})
	require.NoError(t, err)
	require.Len(t, f1.HeldBy, store.MaxPublishedHeldBy, "the root keeps a bounded held-by list")
	h1, err := sf.LoadFrontierHead(ctx(t), scope)
	require.NoError(t, err)
	require.Len(t, h1.Shards, store.ShardCount(len(names)))
	require.Nil(t, h1.Vector)

	cache := store.NewFrontierCache(s, scope)
	got, changed, err := cache.Refresh(ctx(t))
	require.NoError(t, err)
	require.True(t, changed)
	require.Equal(t, vec, got.Vector)

	next := f1
	next.Vector = make(map[string]coord.Watermark, len(vec))
	for p, w := range vec {
		next.Vector[p] = w
	}
	next.Vector[names[7]] = integer(5000)
	f2, err := s.PublishFrontier(ctx(t), f1, next)
	require.NoError(t, err)
	h2, err := sf.LoadFrontierHead(ctx(t), scope)
	require.NoError(t, err)
	moved := store.ShardOf(names[7], len(h2.Shards))
	for i := range h2.Shards {
		if i == moved {
			require.Greater(t, h2.Shards[i], h1.Shards[i], "the changed shard's version grows")
		} else {
			require.Equal(t, h1.Shards[i], h2.Shards[i], "shard %d did not change", i)
		}
	}
	got, changed, err = cache.Refresh(ctx(t))
	require.NoError(t, err)
	require.True(t, changed)
	require.Equal(t, f2.Vector, got.Vector)
	require.Equal(t, integer(5000), got.Vector[names[7]])
	_, changed, err = cache.Refresh(ctx(t))
	require.NoError(t, err)
	require.False(t, changed, "nothing changed since the last refresh")

	loaded, err := s.LoadFrontier(ctx(t), scope)
	require.NoError(t, err)
	require.Equal(t, f2, loaded)
}

// replacingStore publishes replace, once, between a reader's read of the
// frontier's root and its read of the shards that root names.
type replacingStore struct {
	store.Store
	sf            store.ShardedFrontier
	prev, replace store.Frontier
	done          bool
	published     store.Frontier
}

func (r *replacingStore) LoadFrontierHead(ctx context.Context, scope string) (store.FrontierHead, error) {
	return r.sf.LoadFrontierHead(ctx, scope)
}

func (r *replacingStore) LoadFrontierShards(ctx context.Context, scope string, epoch uint64, shards []int) ([]store.FrontierShard, error) {
	if !r.done {
		r.done = true
		f, err := r.Store.PublishFrontier(ctx, r.prev, r.replace)
		if err != nil {
			return nil, err
		}
		r.published = f
	}
	return r.sf.LoadFrontierShards(ctx, scope, epoch, shards)
}

// A reader of a sharded frontier that read the root of one epoch and then
// finds that root replaced by a newer epoch's before it read the shards
// (whose publisher may delete the older epoch's shards) never returns the
// older root with entries missing: it reads the root again and returns
// the newer record whole.
func testFrontierReaderRereadsReplacedShards(t *testing.T, s store.Store) {
	sf, names, vec := shardedVector(t, s)
	const scope = "tenants"
	f1, err := s.PublishFrontier(ctx(t), store.Frontier{}, store.Frontier{Scope: scope, Epoch: 1, Scalar: integer(100), Vector: vec})
	require.NoError(t, err)
	// Epoch 2: 1,200 of the partitions, each further on.
	vec2 := make(map[string]coord.Watermark, 1200)
	for i, p := range names[:1200] {
		vec2[p] = integer(int64(10_000 + i))
	}
	r := &replacingStore{Store: s, sf: sf, prev: f1, replace: store.Frontier{Scope: scope, Epoch: 2, Scalar: integer(10_000), Vector: vec2}}

	got, changed, err := store.NewFrontierCache(r, scope).Refresh(ctx(t))
	require.NoError(t, err)
	require.True(t, r.done, "the new epoch was published between the two reads")
	require.True(t, changed)
	require.Equal(t, uint64(2), got.Epoch, "the reader read the root again")
	require.Equal(t, vec2, got.Vector, "and returned the new epoch's record whole")
	require.Equal(t, r.published.Version, got.Version)

	loaded, err := s.LoadFrontier(ctx(t), scope)
	require.NoError(t, err)
	require.Equal(t, got, loaded)
}

// No item approaches DynamoDB's item limit at 100,000 partitions with
// 36-character names: the membership record (paged) and the published
// frontier (sharded) round-trip, and every item written is under 350 KB.
func testRecordsAt100kPartitions(t *testing.T, s store.Store) {
	const scope = "audit"
	names := names36(100_000)
	m := store.Membership{Scope: scope, Epoch: 1, Partitions: names, Proven: true}
	_, err := s.SwapMembership(ctx(t), 0, m)
	require.NoError(t, err)
	m2 := m
	m2.Epoch, m2.Proven, m2.Reason, m2.Unproven = 2, false, "joined without proof", names[:50_000]
	stored, err := s.SwapMembership(ctx(t), 1, m2)
	require.NoError(t, err)
	require.Equal(t, m2, stored)
	loaded, err := s.LoadMembership(ctx(t), scope)
	require.NoError(t, err)
	require.Equal(t, m2, loaded)
	if r, ok := s.(store.MembershipEpochReader); ok {
		e, err := r.MembershipEpoch(ctx(t), scope)
		require.NoError(t, err)
		require.Equal(t, uint64(2), e)
	}

	vec := make(map[string]coord.Watermark, len(names))
	for i, p := range names {
		vec[p] = integer(int64(1_000_000 + i))
	}
	f := store.Frontier{Scope: scope, Epoch: 2, Vector: vec, HeldBy: names, Reason: "unproven membership change"}
	f, err = s.PublishFrontier(ctx(t), store.Frontier{}, f)
	require.NoError(t, err)
	got, err := s.LoadFrontier(context.Background(), scope)
	require.NoError(t, err)
	require.Equal(t, f, got)
	require.Len(t, got.Vector, len(names))

	if sz, ok := s.(itemSizer); ok {
		require.Positive(t, sz.LargestItemWritten())
		require.Less(t, sz.LargestItemWritten(), maxTestItemBytes, "largest item written")
	}
}
