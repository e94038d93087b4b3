package input

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/chain"
	"github.com/tidemark/tidemark/internal/e2etest"
	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/store/memstore"
	"github.com/tidemark/tidemark/provider"
)

// bigPages serves endless pages of bigPageEvents events of bigPayload
// bytes each, at once: a source much faster than its output.
type bigPages struct{ fetches atomic.Int64 }

const (
	bigPageEvents = 64
	bigPayload    = 4 << 10
)

func (b *bigPages) Fetch(_ context.Context, req provider.Request) (provider.Response, error) {
	b.fetches.Add(1)
	n := int64(0)
	if len(req.Cursor) > 0 {
		n, _ = strconv.ParseInt(string(req.Cursor), 10, 64)
	}
	evs := make([]provider.Event, bigPageEvents)
	for i := range evs {
		pos := n*bigPageEvents + int64(i) + 1
		payload := make([]byte, bigPayload)
		for j := range payload {
			payload[j] = byte('a' + (int(pos)+j)%26)
		}
		evs[i] = provider.Event{ID: fmt.Sprintf("%s-%d", req.Partition, pos), Position: provider.IntPosition(pos), Payload: payload}
	}
	return provider.Response{Events: evs, Successor: []byte(strconv.FormatInt(n+1, 10))}, nil
}

func (b *bigPages) Contract() provider.Contract {
	return provider.Contract{EmptyPage: provider.EmptyNoEvidence, OrderedPositions: true, Recovery: provider.RecoveryPark}
}

func (b *bigPages) Close(context.Context) error { return nil }

// With max_pages_in_flight far above its ceiling and an output much
// slower than the source, the pages in flight stay within
// max_bytes_in_flight plus one page per partition, and the live heap
// (sampled after a collection) grows by a few times that at most. (With a
// budget of 1 GiB instead, the same run held 53 MB of pages and grew the
// live heap by 107 MiB.)
func TestPagesInFlightBoundedByBytes(t *testing.T) {
	const (
		parts   = 4
		budget  = 4 << 20
		fetches = 400 // pages the source serves before the test stops
	)
	prov := &bigPages{}
	page := chain.PageBytes(reconcile.FromProvider(must(prov.Fetch(t.Context(), provider.Request{Partition: "p0"}))))
	prov.fetches.Store(0)
	bound := budget + parts*page
	names := make([]string, parts)
	for i := range names {
		names[i] = fmt.Sprintf("p%d", i)
	}
	cfg := Config{
		Scope: newChainScope(t), Partitions: names, MaxBytesInFlight: budget,
		Config: chain.Config{
			MaxPagesInFlight: 100_000_000, CoalescePromotions: true,
			PollInterval: 2 * time.Millisecond, ParkCheckInterval: 5 * time.Millisecond,
			StoreBackoff: 5 * time.Millisecond, FetchBackoff: time.Millisecond,
		},
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc

	in, err := New(cfg, prov, memstore.New(), nil, service.MockResources())
	require.NoError(t, err)
	require.NoError(t, in.Connect(t.Context()))
	pi := in.(*paginatedInput)
	require.Equal(t, MaxPagesInFlightCeiling, pi.cfg.MaxPagesInFlight, "lowered to the ceiling")

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var peakHeap atomic.Uint64
	wg.Add(2)
	go func() { // the live heap sampler: collect, then read
		defer wg.Done()
		var ms runtime.MemStats
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			runtime.GC()
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > base && ms.HeapAlloc-base > peakHeap.Load() {
				peakHeap.Store(ms.HeapAlloc - base)
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	go func() { // the slow output: one batch every 2ms
		defer wg.Done()
		for ctx.Err() == nil {
			_, ack, err := in.ReadBatch(ctx)
			if err != nil {
				return
			}
			time.Sleep(2 * time.Millisecond)
			_ = ack(ctx, nil)
		}
	}()
	e2etest.WaitFor(t, e2etest.Patience, "the source to serve pages", func() (bool, string) {
		n := prov.fetches.Load()
		return n >= fetches, fmt.Sprintf("%d fetches", n)
	})
	cancel()
	cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer ccancel()
	require.NoError(t, in.Close(cctx))
	wg.Wait()

	_, peak := pi.budget.usage()
	t.Logf("page %d bytes; budget %d; peak held by pages %d (bound %d); peak live heap growth %d bytes (%.1f MiB) over %d fetches",
		page, budget, peak, bound, peakHeap.Load(), float64(peakHeap.Load())/(1<<20), prov.fetches.Load())
	require.LessOrEqual(t, peak, bound, "pages in flight hold at most the budget plus one page per partition")
	// A page's payloads are live twice at most (the page and the messages
	// made of it), plus a fixed overhead (witnesses, metrics, goroutines).
	require.Less(t, peakHeap.Load(), uint64(4*bound+8<<20), "the live heap grows by at most a few times the bound")
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
