package dynamostore

import (
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/dynalitetest"
	"github.com/tidemark/tidemark/internal/store"
)

// At 100,000 partitions with 36-character names, the published frontier's
// shards and root, and the membership pages and root are each under 350
// KB (DynamoDB's limit is 400 KB); each partition-index entry is one write
// unit, every one of the index's keys is used, and the entries under each
// key are read by one Query page (1 MB).
func TestItemsAt100kPartitionsStayUnderTheItemLimit(t *testing.T) {
	const scope, n = "audit", 100_000
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%08x-0000-4000-8000-%012d", i*2654435761%(1<<32), i)
	}
	const limit = 350 << 10

	largest := map[string]int{}
	note := func(kind string, it item) {
		largest[kind] = max(largest[kind], ItemSize(it))
		require.Less(t, ItemSize(it), limit, kind)
	}
	// The partition index: an entry of one write unit per partition, and
	// what a listing's Query of each key reads.
	perKey := map[string]int{}
	for _, p := range names {
		it := indexEntry(store.Key{Scope: scope, Partition: p})
		note("index entry", it)
		require.LessOrEqual(t, ItemSize(it), 1024, "an index entry is one write unit")
		perKey[it[attrPK].(*types.AttributeValueMemberS).Value] += ItemSize(it)
	}
	require.Len(t, perKey, store.PartitionIndexKeys, "every index key is used")
	for pk, bytes := range perKey {
		largest["index key (bytes a listing reads)"] = max(largest["index key (bytes a listing reads)"], bytes)
		require.Less(t, bytes, 1<<20, "the entries of %s are one Query page", pk)
	}

	vec := make(map[string]coord.Watermark, n)
	for i, p := range names {
		vec[p] = coord.Watermark{Kind: coord.KindTimestamp, Int: int64(1_764_741_600_000_000_000 + i)}
	}
	shards := store.SplitVector(vec, store.ShardCount(n))
	versions := make([]uint64, len(shards))
	for i, sh := range shards {
		note("frontier shard", frontierShardItem(store.FrontierShard{Scope: scope, Epoch: 1 << 40, Index: i, Version: 1 << 40, Vector: sh}))
		versions[i] = 1 << 40
	}
	root := frontierRootItem(store.Frontier{Scope: scope, Epoch: 1, Version: 1, HeldBy: names, Reason: "x"}, versions)
	note("frontier root", root)

	m := store.Membership{Scope: scope, Epoch: 1, Partitions: names, Unproven: names, Proven: false, Reason: "y"}
	mroot, pages, err := membershipItems(m)
	require.NoError(t, err)
	require.NotEmpty(t, pages)
	note("membership root", mroot)
	for _, p := range pages {
		note("membership page", p)
	}
	t.Logf("largest items at %d partitions (bytes): %v; %d frontier shards, %d membership pages", n, largest, len(shards), len(pages))
}

// legacyFrontierItem is a frontier record as it was written before shards:
// one item with the whole vector.
func legacyFrontierItem(f store.Frontier) item {
	it := recordKey(f.Scope, recFrontier)
	it[attrEpoch] = avU(f.Epoch)
	if f.Version > 0 {
		it[attrVersion] = avU(f.Version)
	}
	putWatermark(it, attrWMKind, attrWM, f.Scalar)
	if len(f.Vector) > 0 {
		vec := make(map[string]types.AttributeValue, len(f.Vector))
		for p, w := range f.Vector {
			e := item{attrEntryKind: avU(uint64(w.Kind))}
			if !w.IsZero() {
				e[attrEntryValue] = watermarkValue(w)
			}
			vec[p] = &types.AttributeValueMemberM{Value: e}
		}
		it[attrVector] = &types.AttributeValueMemberM{Value: vec}
	}
	if len(f.HeldBy) > 0 {
		it[attrHeldBy] = avStrings(f.HeldBy)
	}
	if r := store.CleanReason(f.Reason); r != "" {
		it[attrReason] = avS(r)
	}
	return it
}

// A record written before shards is read whole; the next publication over
// it writes shards and a root, and nothing goes back.
func TestFrontierRecordOfOneItemIsReadAndRepublishedInShards(t *testing.T) {
	dynalitetest.Endpoint(t)
	s := newTestStore(t)
	ctx := t.Context()
	old := store.Frontier{Scope: "legacy", Epoch: 3, Version: 7, Scalar: coord.Integer(90), Vector: map[string]coord.Watermark{"a": coord.Integer(90), "b": coord.Integer(120)}, HeldBy: []string{"a"}}
	_, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: legacyFrontierItem(old)})
	require.NoError(t, err)
	got, err := s.LoadFrontier(ctx, "legacy")
	require.NoError(t, err)
	require.Equal(t, old, got)
	h, err := s.LoadFrontierHead(ctx, "legacy")
	require.NoError(t, err)
	require.Nil(t, h.Shards, "a record of one item has no shards")

	lower := got
	lower.Vector = map[string]coord.Watermark{"a": coord.Integer(95), "b": coord.Integer(110)}
	lower.Scalar = coord.Integer(95)
	_, err = s.PublishFrontier(ctx, got, lower)
	require.ErrorIs(t, err, store.ErrFenced, "b's published 120 cannot go back")

	next := got
	next.Vector = map[string]coord.Watermark{"a": coord.Integer(100), "b": coord.Integer(120)}
	next.Scalar = coord.Integer(100)
	pub, err := s.PublishFrontier(ctx, got, next)
	require.NoError(t, err)
	require.Equal(t, uint64(8), pub.Version)
	h, err = s.LoadFrontierHead(ctx, "legacy")
	require.NoError(t, err)
	require.Len(t, h.Shards, 1)
	loaded, err := s.LoadFrontier(ctx, "legacy")
	require.NoError(t, err)
	require.Equal(t, pub, loaded)
}

// shardKeys lists the sort keys of scope's frontier shards in the table.
func shardKeys(t *testing.T, s *DynamoStore, scope string) []string {
	t.Helper()
	items, err := s.queryPrefix(t.Context(), recordPK(scope, recFrontier), skShardPrefix)
	require.NoError(t, err)
	var out []string
	for _, it := range items {
		sk, err := getS(it, attrSK)
		require.NoError(t, err)
		out = append(out, sk)
	}
	return out
}

func shardSKs(epoch uint64, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%020d#%06d", skShardPrefix, epoch, i)
	}
	return out
}

// The publisher of a new epoch deletes the shards the new root no longer
// names: every shard of older epochs (a shard a losing publisher left
// behind included), none of the new epoch's; a publication within an
// epoch deletes nothing.
func TestFrontierShardsOfSupersededEpochsAreDeleted(t *testing.T) {
	dynalitetest.Endpoint(t)
	s := newTestStore(t)
	ctx := t.Context()
	const scope = "tenants"
	vector := func(n int, base int64) map[string]coord.Watermark {
		v := make(map[string]coord.Watermark, n)
		for i := range n {
			v[fmt.Sprintf("tenant-%05d", i)] = coord.Integer(base + int64(i))
		}
		return v
	}
	f1, err := s.PublishFrontier(ctx, store.Frontier{}, store.Frontier{Scope: scope, Epoch: 1, Scalar: coord.Integer(100), Vector: vector(2500, 100)})
	require.NoError(t, err)
	require.Equal(t, shardSKs(1, 3), shardKeys(t, s, scope))

	next := f1
	next.Vector = vector(2500, 101)
	next.Scalar = coord.Integer(101)
	f1, err = s.PublishFrontier(ctx, f1, next)
	require.NoError(t, err)
	require.Equal(t, shardSKs(1, 3), shardKeys(t, s, scope), "a publication within the epoch keeps its shards")

	// A shard of epoch 1 that no root of it names: left behind by a
	// publisher that lost a race.
	_, err = s.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: frontierShardItem(store.FrontierShard{Scope: scope, Epoch: 1, Index: 7, Version: 1})})
	require.NoError(t, err)

	f2, err := s.PublishFrontier(ctx, f1, store.Frontier{Scope: scope, Epoch: 2, Scalar: coord.Integer(500), Vector: vector(1200, 500)})
	require.NoError(t, err)
	require.Equal(t, shardSKs(2, 2), shardKeys(t, s, scope), "epoch 1's shards are gone, the left-behind one too")
	got, err := s.LoadFrontier(ctx, scope)
	require.NoError(t, err)
	require.Equal(t, f2, got)

	_, err = s.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: frontierShardItem(store.FrontierShard{Scope: scope, Epoch: 9, Index: 0, Version: 1})})
	require.NoError(t, err)
	f3, err := s.PublishFrontier(ctx, f2, store.Frontier{Scope: scope, Epoch: 3, Scalar: coord.Integer(900), Vector: vector(900, 900)})
	require.NoError(t, err)
	require.Equal(t, append(shardSKs(3, 1), shardSKs(9, 1)...), shardKeys(t, s, scope), "a newer epoch's shard is not the publisher's to delete")
	got, err = s.LoadFrontier(ctx, scope)
	require.NoError(t, err)
	require.Equal(t, f3, got)
}
