package dynamostore

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/store"
)

// The success path of a promotion is exactly one UpdateItem and no read; a
// witness is one PutItem; a receipt and a disposition one UpdateItem each
// (docs/design.md#performance-model: at most two writes per page, no reads
// in steady state).
func TestRequestsPerOperation(t *testing.T) {
	rc := NewRequestCounter()
	s := newTestStore(t, func(c *DynamoConfig) { c.ClientOptions = append(c.ClientOptions, rc.Option()) })
	ctx := t.Context()
	cp := createAt(t, s, faultKey, "C0")

	w := pageWitness(faultKey, 1, "attempt-1", 100)
	rc.Reset()
	require.NoError(t, s.PutWitness(ctx, w))
	require.Equal(t, map[string]int64{"PutItem": 1}, rc.Snapshot(), "witness put")

	rc.Reset()
	require.NoError(t, s.RecordReceipt(ctx, faultKey, 1, "attempt-1", 100))
	require.Equal(t, map[string]int64{"UpdateItem": 1}, rc.Snapshot(), "receipt")

	rc.Reset()
	_, err := s.Promote(ctx, store.Promotion{Key: faultKey, FromCursor: cp.Cursor, FromGeneration: 1, To: w.Successor, WitnessID: w.AttemptID, Watermark: coord.Integer(1100), Applied: coord.IntPosition(1099), HasApplied: true})
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"UpdateItem": 1}, rc.Snapshot(), "promotion: one UpdateItem, zero reads")

	rc.Reset()
	require.NoError(t, s.SetDisposition(ctx, faultKey, 1, "attempt-1", reconcile.Promoted))
	require.Equal(t, map[string]int64{"UpdateItem": 1}, rc.Snapshot(), "disposition")
}

// pageWitness is a realistic witness of n events: a 64-byte opaque cursor
// and successor (a typical base64 page token), a ULID-sized attempt id,
// dense positions, a 16-byte snapshot marker and a watermark.
func pageWitness(k store.Key, gen uint64, attempt string, n int) reconcile.Witness {
	evs := make([]reconcile.EventWitness, n)
	for i := range evs {
		evs[i] = reconcile.EventWitness{IDHash: 0x9e3779b97f4a7c15 * uint64(i+1), Position: coord.IntPosition(1_000 + int64(i)), Digest: ^uint64(i) * 0x2545f4914f6cdd1d}
	}
	return reconcile.Witness{
		Scope: k.Scope, Partition: k.Partition, Generation: gen,
		InputCursor:     []byte(fmt.Sprintf("%064d", 41)),
		AttemptID:       attempt,
		Events:          evs,
		Successor:       []byte(fmt.Sprintf("%064d", 42)),
		Marker:          []byte("snapshot-0000042"),
		CompleteThrough: coord.Integer(1_000 + int64(n)),
		Disposition:     reconcile.Pending,
	}
}

// The measured size of a 100-event witness item (cache/doc.go quotes it):
// at most 2 write units, also by dynalite's own count.
func TestWitnessItemSize(t *testing.T) {
	k := store.Key{Scope: "orders", Partition: "shard-0007"}
	w := pageWitness(k, 123456, "01JF3Z9K7Q8X2M4N6P0R5T7V9W", 100)
	it := witnessItem(w)
	size := ItemSize(it)
	t.Logf("100-event witness item: %d bytes (events %d bytes), %d write units", size, len(reconcile.EncodeEvents(w.Events)), (size+1023)/1024)
	require.LessOrEqual(t, size, 2048, "a 100-event page must fit in 2 write units")

	cp := ItemSize(checkpointItem(store.Checkpoint{Key: k, Cursor: w.Successor, Generation: 123457, Watermark: coord.Integer(1100), Applied: coord.IntPosition(1099), HasApplied: true, Epoch: 3, PromotedWitness: w.AttemptID}))
	t.Logf("checkpoint item with a 64-byte cursor: %d bytes", cp)
	require.LessOrEqual(t, cp, 1024)

	s := newTestStore(t)
	out, err := s.client.PutItem(t.Context(), &dynamodb.PutItemInput{
		TableName: aws.String(s.table), Item: it, ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
	})
	require.NoError(t, err)
	require.NotNil(t, out.ConsumedCapacity)
	t.Logf("dynalite: %v write units for the witness put", aws.ToFloat64(out.ConsumedCapacity.CapacityUnits))
	require.LessOrEqual(t, aws.ToFloat64(out.ConsumedCapacity.CapacityUnits), 2.0)
}

// BenchmarkPromoteDynalite measures sequential conditional promotions of one
// partition (the latency of the single write on the success path).
func BenchmarkPromoteDynalite(b *testing.B) {
	rc := NewRequestCounter()
	s := newTestStore(b, func(c *DynamoConfig) { c.ClientOptions = append(c.ClientOptions, rc.Option()) })
	ctx := b.Context()
	cp := createAt(b, s, faultKey, "C0")
	rc.Reset()
	for i := 0; b.Loop(); i++ {
		next, err := s.Promote(ctx, store.Promotion{Key: faultKey, FromCursor: cp.Cursor, FromGeneration: cp.Generation, To: fmt.Appendf(nil, "cursor-%d", i), WitnessID: fmt.Sprintf("w%d", i), Watermark: coord.Integer(int64(i))})
		if err != nil {
			b.Fatal(err)
		}
		cp = next
	}
	b.ReportMetric(float64(rc.Total())/float64(b.N), "requests/op")
}

// BenchmarkPromoteParallel16 measures 16 goroutines, each promoting its own
// partition (one fetch in flight per partition,
// docs/design.md#performance-model): ns/op
// is wall time per promotion across all of them.
func BenchmarkPromoteParallel16(b *testing.B) {
	rc := NewRequestCounter()
	s := newTestStore(b, func(c *DynamoConfig) { c.ClientOptions = append(c.ClientOptions, rc.Option()) })
	ctx := b.Context()
	const workers = 16
	cps := make([]store.Checkpoint, workers)
	for i := range cps {
		cps[i] = createAt(b, s, store.Key{Scope: "bench", Partition: fmt.Sprintf("p%02d", i)}, "C0")
	}
	rc.Reset()
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		fails atomic.Int64
	)
	b.ResetTimer()
	for w := range workers {
		wg.Go(func() {
			cp := cps[w]
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				n, err := s.Promote(ctx, store.Promotion{Key: cp.Key, FromCursor: cp.Cursor, FromGeneration: cp.Generation, To: fmt.Appendf(nil, "cursor-%d", i), WitnessID: fmt.Sprintf("w%d", i), Watermark: coord.Integer(i)})
				if err != nil {
					fails.Add(1)
					return
				}
				cp = n
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if f := fails.Load(); f > 0 {
		b.Fatalf("%d promotions failed", f)
	}
	b.ReportMetric(float64(rc.Total())/float64(b.N), "requests/op")
}
