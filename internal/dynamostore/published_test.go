package dynamostore

import (
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/store"
)

// At 100,000 partitions with 36-character names, the partition index's
// shards, the published frontier's shards and root, and the membership
// pages and root are each under 350 KB (DynamoDB's limit is 400 KB).
func TestItemsAt100kPartitionsStayUnderTheItemLimit(t *testing.T) {
	const scope, n = "audit", 100_000
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%08x-0000-4000-8000-%012d", i*2654435761%(1<<32), i)
	}
	const limit = 350 << 10

	index := map[string][]string{}
	for _, p := range names {
		sk := indexShardKey(scope, p)[attrSK].(*types.AttributeValueMemberS).Value
		index[sk] = append(index[sk], p)
	}
	require.Len(t, index, indexShards)
	largest := map[string]int{}
	note := func(kind string, it item) {
		largest[kind] = max(largest[kind], ItemSize(it))
		require.Less(t, ItemSize(it), limit, kind)
	}
	for sk, ps := range index {
		note("index shard", item{attrPK: avS(recordPK(scope, recPartitions)), attrSK: avS(sk), attrParts: &types.AttributeValueMemberSS{Value: ps}})
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
