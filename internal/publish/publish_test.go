package publish

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/store/memstore"
)

// countingStore counts the items a publisher reads, by operation.
type countingStore struct {
	*memstore.Store
	mu    sync.Mutex
	reads map[string]int
}

func newCountingStore() *countingStore {
	return &countingStore{Store: memstore.New(), reads: map[string]int{}}
}

func (c *countingStore) count(op string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reads[op] += n
}

func (c *countingStore) take() (map[string]int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out, total := c.reads, 0
	for _, n := range out {
		total += n
	}
	c.reads = map[string]int{}
	return out, total
}

func (c *countingStore) LoadCheckpoint(ctx context.Context, k store.Key) (store.Checkpoint, error) {
	c.count("LoadCheckpoint", 1)
	return c.Store.LoadCheckpoint(ctx, k)
}

func (c *countingStore) ListCheckpoints(ctx context.Context, scope string) ([]store.Checkpoint, error) {
	cps, err := c.Store.ListCheckpoints(ctx, scope)
	c.count("ListCheckpoints", len(cps)+1)
	return cps, err
}

func (c *countingStore) LoadMembership(ctx context.Context, scope string) (store.Membership, error) {
	c.count("LoadMembership", 1)
	return c.Store.LoadMembership(ctx, scope)
}

func (c *countingStore) MembershipEpoch(ctx context.Context, scope string) (uint64, error) {
	c.count("MembershipEpoch", 1)
	return c.Store.MembershipEpoch(ctx, scope)
}

func (c *countingStore) LoadFrontier(ctx context.Context, scope string) (store.Frontier, error) {
	c.count("LoadFrontier", 1)
	return c.Store.LoadFrontier(ctx, scope)
}

func (c *countingStore) LoadFrontierHead(ctx context.Context, scope string) (store.FrontierHead, error) {
	c.count("LoadFrontierHead", 1)
	return c.Store.LoadFrontierHead(ctx, scope)
}

func (c *countingStore) LoadFrontierShards(ctx context.Context, scope string, epoch uint64, shards []int) ([]store.FrontierShard, error) {
	c.count("LoadFrontierShards", len(shards))
	return c.Store.LoadFrontierShards(ctx, scope, epoch, shards)
}

// scopeOf creates n partitions with watermarks and their membership.
func scopeOf(t *testing.T, st store.Store, scope string, n int) []string {
	t.Helper()
	ctx := context.Background()
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("p%05d", i)
		cp, err := st.CreateCheckpoint(ctx, store.Checkpoint{Key: store.Key{Scope: scope, Partition: names[i]}, Cursor: []byte("c"), Generation: 1, Epoch: 1})
		require.NoError(t, err)
		_, err = st.Promote(ctx, store.Promotion{Key: cp.Key, FromCursor: cp.Cursor, FromGeneration: 1, To: []byte("d"), WitnessID: "w", Watermark: coord.Integer(int64(100 + i)), Epoch: 1})
		require.NoError(t, err)
	}
	_, err := st.SwapMembership(ctx, 0, store.Membership{Scope: scope, Epoch: 1, Partitions: names, Proven: true})
	require.NoError(t, err)
	return names
}

// An idle publisher reads the same small number of items per round
// whatever the number of partitions: the membership epoch and the
// published record's root.
func TestIdlePublicationReadsAreIndependentOfPartitions(t *testing.T) {
	perRound := map[int]int{}
	for _, n := range []int{10, 5000} {
		st := newCountingStore()
		scopeOf(t, st, "idle", n)
		pub := NewPublisher(st, "idle")
		_, f, _, err := pub.Round(context.Background())
		require.NoError(t, err)
		require.Equal(t, coord.Integer(100), f.Scalar)
		_, err = pub.Prepare(context.Background()) // reads back its own shards
		require.NoError(t, err)
		st.take()
		const rounds = 5
		for range rounds {
			r, _, _, err := pub.Round(context.Background())
			require.NoError(t, err)
			require.Nil(t, r.Next, "nothing changed: nothing to publish")
		}
		ops, total := st.take()
		require.Zero(t, total%rounds, "%d partitions: %v", n, ops)
		perRound[n] = total / rounds
		require.Equal(t, map[string]int{"MembershipEpoch": rounds, "LoadFrontierHead": rounds}, ops, "%d partitions", n)
	}
	require.Equal(t, perRound[10], perRound[5000], "reads per idle round at 10 and 5,000 partitions")
	require.Equal(t, 2, perRound[10])
}

// A change observed by this process's publisher writes the shard of its
// partition only; another instance's publisher reads that one shard, and
// each instance's own partitions reach the record through its own
// publisher: the scalar is the minimum over both instances' partitions.
func TestPublishersOfTwoInstancesFollowEachOthersChanges(t *testing.T) {
	ctx := context.Background()
	st := newCountingStore()
	names := scopeOf(t, st, "two", 3000)
	a, b := NewPublisher(st, "two"), NewPublisher(st, "two")
	_, _, _, err := a.Round(ctx)
	require.NoError(t, err)
	_, _, _, err = b.Round(ctx)
	require.NoError(t, err)

	// a holds names[0] (the minimum), b names[1]: each promotes.
	ctxPromote := func(name string, wm int64) {
		cp, err := st.LoadCheckpoint(ctx, store.Key{Scope: "two", Partition: name})
		require.NoError(t, err)
		_, err = st.Promote(ctx, store.Promotion{Key: cp.Key, FromCursor: cp.Cursor, FromGeneration: cp.Generation, To: []byte(fmt.Sprint(wm)), WitnessID: fmt.Sprint(wm), Watermark: coord.Integer(wm), Epoch: 1})
		require.NoError(t, err)
	}
	ctxPromote(names[0], 10_000)
	a.Observe(names[0], coord.Integer(10_000))
	ctxPromote(names[1], 10_001)
	b.Observe(names[1], coord.Integer(10_001))
	st.take()
	_, f, _, err := a.Round(ctx)
	require.NoError(t, err)
	require.Equal(t, coord.Integer(10_000), f.Vector[names[0]])
	require.Equal(t, coord.Integer(101), f.Scalar, "b's partition is not published yet")
	ops, _ := st.take()
	require.Zero(t, ops["ListCheckpoints"], "no checkpoint is read again")

	_, f, _, err = b.Round(ctx)
	require.NoError(t, err)
	ops, _ = st.take()
	require.Equal(t, 1, ops["LoadFrontierShards"], "b reads the one shard a changed")
	require.Equal(t, coord.Integer(10_000), f.Vector[names[0]], "a's change reached b's publication")
	require.Equal(t, coord.Integer(10_001), f.Vector[names[1]])
	require.Equal(t, coord.Integer(102), f.Scalar)

	loaded, err := st.LoadFrontier(ctx, "two")
	require.NoError(t, err)
	require.Equal(t, f, loaded)
}

// Publishers of several instances that know the same durable checkpoints
// stop writing once the record holds what they know: idle publication
// writes nothing, whoever published last. With every partition at the
// same watermark (complete partitions, say) more partitions hold the
// frontier than the record's held-by list keeps (store.MaxPublishedHeldBy):
// the computed snapshot is compared in its stored form, or every round
// of every instance would write the record again.
func TestIdlePublishersOfSeveralInstancesStopWriting(t *testing.T) {
	for _, same := range []bool{false, true} {
		t.Run(fmt.Sprintf("same_watermark=%v", same), func(t *testing.T) {
			testIdlePublishersStopWriting(t, same)
		})
	}
}

func testIdlePublishersStopWriting(t *testing.T, sameWatermark bool) {
	ctx := context.Background()
	st := newCountingStore()
	names := scopeOf(t, st, "many", 3*store.MaxPublishedHeldBy)
	if sameWatermark {
		for _, name := range names {
			cp, err := st.LoadCheckpoint(ctx, store.Key{Scope: "many", Partition: name})
			require.NoError(t, err)
			_, err = st.Promote(ctx, store.Promotion{Key: cp.Key, FromCursor: cp.Cursor, FromGeneration: cp.Generation, To: []byte("e"), WitnessID: "w2", Watermark: coord.Integer(1_000_000), Epoch: 1})
			require.NoError(t, err)
		}
	}
	pubs := []*Publisher{NewPublisher(st, "many"), NewPublisher(st, "many"), NewPublisher(st, "many")}
	writes := func() int {
		n := 0
		for _, p := range pubs {
			r, _, _, err := p.Round(ctx)
			if err != nil {
				require.ErrorIs(t, err, store.ErrFenced)
			}
			if r.Next != nil {
				n++
			}
		}
		return n
	}
	for range 3 {
		writes()
	}
	for round := range 5 {
		require.Zero(t, writes(), "idle round %d: a publisher wrote", round)
	}
}
