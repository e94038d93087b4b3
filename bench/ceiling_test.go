package bench

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/provider/simulated"
)

// simWitness is the witness of page gen of a simulated partition: 100
// events, the simulated source's cursors (the same item sizes as the
// pipeline writes).
func simWitness(k store.Key, gen uint64) reconcile.Witness {
	first := int64(gen-1)*benchPageSize + 1
	evs := make([]reconcile.EventWitness, benchPageSize)
	for i := range evs {
		pos := first + int64(i)
		h := fnv.New64a()
		h.Write([]byte(simulated.EventID(k.Partition, pos)))
		d := sha256.Sum256(simulated.Payload(k.Partition, pos))
		evs[i] = reconcile.EventWitness{IDHash: h.Sum64(), Position: coord.IntPosition(pos), Digest: binary.BigEndian.Uint64(d[:8])}
	}
	return reconcile.Witness{
		Scope: k.Scope, Partition: k.Partition, Generation: gen,
		InputCursor: simCursor(first), Successor: simCursor(first + benchPageSize),
		AttemptID:       fmt.Sprintf("%012x-0badcafe-%08x", time.Now().UnixMilli(), gen),
		Events:          evs,
		CompleteThrough: coord.Integer(first + benchPageSize - 1),
		Disposition:     reconcile.Pending,
	}
}

func simCursor(next int64) []byte {
	if next == 1 {
		return nil
	}
	return fmt.Appendf(nil, "sim1:%d:0", next)
}

// BenchmarkStoreCeiling measures the checkpoint store alone: P goroutines,
// each owning one partition, write a page's two requests (the witness
// PutItem, then the promotion UpdateItem) back to back, as fast as the
// store answers. pages/s is the most pages per second the store can
// checkpoint on this machine; max-ratio is what that allows against the
// limit of P partitions at 20 ms per 100-event page (min(1, pages/s /
// (P*50))).
func BenchmarkStoreCeiling(b *testing.B) {
	for _, p := range []int{16, 64} {
		b.Run(fmt.Sprintf("store=dynamodb/P=%d", p), func(b *testing.B) {
			const pagesEach = 60
			var pages int64
			var wall time.Duration
			loop(b, func() runResult {
				ctx := context.Background()
				st, m, drop := newStore(b, ctx, "dynamodb")
				defer drop()
				keys := make([]store.Key, p)
				cps := make([]store.Checkpoint, p)
				for i := range keys {
					keys[i] = store.Key{Scope: "ceiling", Partition: fmt.Sprintf("p%03d", i)}
					cp, err := st.CreateCheckpoint(ctx, store.Checkpoint{Key: keys[i], Generation: 1, Epoch: 1})
					if err != nil {
						b.Fatal(err)
					}
					cps[i] = cp
				}
				// Witnesses are built up front: only the store is measured.
				ws := make([][]reconcile.Witness, p)
				for i := range ws {
					for g := range pagesEach {
						ws[i] = append(ws[i], simWitness(keys[i], uint64(g+1)))
					}
				}
				m.reset()
				var done atomic.Int64
				var wg sync.WaitGroup
				var fail atomic.Value
				start := time.Now()
				for i := range p {
					wg.Go(func() {
						cp := cps[i]
						for _, w := range ws[i] {
							if err := st.PutWitness(ctx, w); err != nil {
								fail.Store(err)
								return
							}
							next, err := st.Promote(ctx, store.Promotion{
								Key: cp.Key, FromCursor: cp.Cursor, FromGeneration: cp.Generation, To: w.Successor,
								WitnessID: w.AttemptID, Watermark: w.CompleteThrough, Applied: coord.IntPosition(w.CompleteThrough.Int), HasApplied: true, Epoch: 1,
							})
							if err != nil {
								fail.Store(err)
								return
							}
							cp = next
							done.Add(1)
						}
					})
				}
				wg.Wait()
				wall = time.Since(start)
				if err, _ := fail.Load().(error); err != nil {
					b.Fatal(err)
				}
				pages = done.Load()
				return runResult{}
			})
			rate := float64(pages) / wall.Seconds()
			b.ReportMetric(rate, "pages/s")
			b.ReportMetric(min(1, rate/(float64(p)/benchLatency.Seconds())), "max-ratio")
		})
	}
}
