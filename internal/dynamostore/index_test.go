package dynamostore

import (
	"fmt"
	"hash/fnv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/dynalitetest"
	"github.com/tidemark/tidemark/internal/store"
)

// An index entry is its keys alone: DynamoDB's size of it is the two key
// attributes' names and values (the scale simulation bills the same
// bytes, internal/clustersim scIndexEntryBytes), one write unit for a
// 36-byte name; its pk is one of the store.PartitionIndexKeys keys of the
// scope and never a checkpoint's.
func TestPartitionIndexEntryIsItsKeysAlone(t *testing.T) {
	for _, k := range []store.Key{
		{Scope: "scale", Partition: "9e3779b9-0000-4000-8000-000000000001"},
		{Scope: "a#b", Partition: "c"},
		{Scope: "x", Partition: "cache"},
	} {
		it := indexEntry(k)
		require.Len(t, it, 2, "keys only")
		pk := it[attrPK].(*types.AttributeValueMemberS).Value
		sk := it[attrSK].(*types.AttributeValueMemberS).Value
		require.Equal(t, fmt.Sprintf("%s##partitions#%02d", escapeName(k.Scope), store.PartitionIndexKey(k.Partition)), pk)
		require.Equal(t, "p#"+k.Partition, sk, "never the cache entries' sk")
		require.Equal(t, len("pk")+len(pk)+len("sk")+len(sk), ItemSize(it))
		_, err := parseCheckpointPK(pk)
		require.Error(t, err, "an index key never parses as a checkpoint key")
	}
	require.Equal(t, 62, ItemSize(indexEntry(store.Key{Scope: "scale", Partition: "9e3779b9-0000-4000-8000-000000000001"})))
}

// legacyIndexShard is a partition-index shard as releases before issue 35
// wrote it: the names whose FNV-1a mod 64 is n, as a string set, under the
// scope's one key <scope>##partitions.
func legacyIndexShard(scope string, n int, names []string) item {
	return item{attrPK: avS(recordPK(scope, recPartitions)), attrSK: avS(fmt.Sprintf("shard#%02d", n)), attrParts: &types.AttributeValueMemberSS{Value: names}}
}

func legacyShardOf(name string) int {
	h := fnv.New32a()
	h.Write([]byte(name))
	return int(h.Sum32() % 64)
}

// A scope whose partition index earlier releases wrote (the 64 string-set
// shards under one key, and the single record before them) is listed
// whole: its partitions and those this release creates (in the new
// entries) come back together, and nothing is written under the old key
// again. A partition of the old index keeps its checkpoint: creating it
// again is refused as existing.
func TestPartitionIndexOfEarlierReleasesIsRead(t *testing.T) {
	dynalitetest.Endpoint(t)
	s := newTestStore(t)
	ctx := t.Context()
	const scope = "migrated"
	put := func(it item) {
		_, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: it})
		require.NoError(t, err)
	}
	var sharded []string
	for i := range 150 {
		sharded = append(sharded, fmt.Sprintf("sharded-%03d", i))
	}
	byShard := map[int][]string{}
	for _, p := range sharded {
		byShard[legacyShardOf(p)] = append(byShard[legacyShardOf(p)], p)
	}
	for n, ps := range byShard {
		put(legacyIndexShard(scope, n, ps))
	}
	record := []string{"record-a", "record-b", "sharded-000"}
	rec := recordKey(scope, recPartitions)
	rec[attrParts] = &types.AttributeValueMemberSS{Value: record}
	put(rec)
	var want []string
	for _, p := range append(sharded, record[:2]...) {
		put(checkpointItem(store.Checkpoint{Key: store.Key{Scope: scope, Partition: p}, Cursor: []byte("c-" + p), Generation: 1}))
		want = append(want, p)
	}
	oldItems, err := s.queryPrefix(ctx, recordPK(scope, recPartitions), "")
	require.NoError(t, err)

	for i := range 40 {
		p := fmt.Sprintf("new-%02d", i)
		createAt(t, s, store.Key{Scope: scope, Partition: p}, "c-"+p)
		want = append(want, p)
	}
	_, err = s.CreateCheckpoint(ctx, store.Checkpoint{Key: store.Key{Scope: scope, Partition: "sharded-007"}, Cursor: []byte("again"), Generation: 1})
	require.ErrorIs(t, err, store.ErrFenced, "a partition of the old index keeps its checkpoint")

	list, err := s.ListCheckpoints(ctx, scope)
	require.NoError(t, err)
	got := make([]string, len(list))
	for i, cp := range list {
		got[i] = cp.Partition
		require.Equal(t, "c-"+cp.Partition, string(cp.Cursor))
	}
	require.ElementsMatch(t, want, got, "every partition, old index and new")
	require.IsIncreasing(t, got, "in partition order, once each")

	after, err := s.queryPrefix(ctx, recordPK(scope, recPartitions), "")
	require.NoError(t, err)
	require.Equal(t, oldItems, after, "the old key is read, never written")
}

// A checkpoint is never put when its index entry could not be written: a
// listing would miss it. The creation fails, nothing is created, and the
// next creation writes both.
func TestCheckpointIsNotPutWithoutItsIndexEntry(t *testing.T) {
	s, f := newFaultyStore(t, -1) // no retry
	ctx := t.Context()
	k := store.Key{Scope: "idx", Partition: "p"}
	f.script("PutItem", serverError) // the first PutItem of a creation: the index entry
	_, err := s.CreateCheckpoint(ctx, store.Checkpoint{Key: k, Cursor: []byte("c0"), Generation: 1})
	require.Error(t, err)
	require.Equal(t, 1, f.sent("PutItem"), "the checkpoint was not put after the index entry failed")
	_, err = s.LoadCheckpoint(ctx, k)
	require.ErrorIs(t, err, store.ErrNotFound)

	createAt(t, s, k, "c0")
	list, err := s.ListCheckpoints(ctx, k.Scope)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, "p", list[0].Partition)
}
