package bench

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/chain"
	"github.com/tidemark/tidemark/internal/chain/chainstore"
	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/store/memstore"
	"github.com/tidemark/tidemark/provider"
)

// rereadPageSize is the keyset page size of the re-read benchmark.
const rereadPageSize = 100

// countingStore counts the store calls of a re-read run by kind, and the
// bytes of the receipt records written.
type countingStore struct {
	*memstore.Store
	mu           sync.Mutex
	calls        map[string]int
	receiptBytes int
	receiptWCU   int
}

func (s *countingStore) count(k string) {
	s.mu.Lock()
	s.calls[k]++
	s.mu.Unlock()
}

func (s *countingStore) Promote(ctx context.Context, p store.Promotion) (store.Checkpoint, error) {
	s.count("promote")
	return s.Store.Promote(ctx, p)
}

func (s *countingStore) PutWitness(ctx context.Context, w reconcile.Witness) error {
	s.count("witness-put")
	return s.Store.PutWitness(ctx, w)
}

func (s *countingStore) RecordReceipt(ctx context.Context, k store.Key, g uint64, a string, n int) error {
	s.count("witness-receipt")
	return s.Store.RecordReceipt(ctx, k, g, a, n)
}

func (s *countingStore) PutReceipts(ctx context.Context, c store.ReceiptChunk) error {
	s.count("receipts-put")
	// The DynamoDB record: keys (~90 bytes with a short scope and
	// partition), the kind and 24 bytes a receipt.
	n := 90 + 4 + 24*len(c.Receipts)
	s.mu.Lock()
	s.receiptBytes += n
	s.receiptWCU += (n + 1023) / 1024
	s.mu.Unlock()
	return s.Store.PutReceipts(ctx, c)
}

func (s *countingStore) Receipts(ctx context.Context, k store.Key, from coord.Position, has bool) ([]store.Receipt, error) {
	s.count("receipts-query")
	return s.Store.Receipts(ctx, k, from, has)
}

func (s *countingStore) PruneReceipts(ctx context.Context, k store.Key, through coord.Position) (int, error) {
	s.count("receipts-prune")
	n, err := s.Store.PruneReceipts(ctx, k, through)
	s.mu.Lock()
	s.calls["receipt-records-deleted"] += n
	s.mu.Unlock()
	return n, err
}

// keysetSource is a keyset collection of integer ids served after an id.
type keysetSource struct{ ids []int64 }

func (k *keysetSource) page(cursor []byte) provider.Response {
	after := int64(0)
	if len(cursor) > 0 {
		after, _ = strconv.ParseInt(string(cursor), 10, 64)
	}
	i, _ := slices.BinarySearch(k.ids, after+1)
	var r provider.Response
	for ; i < len(k.ids) && len(r.Events) < rereadPageSize; i++ {
		id := k.ids[i]
		r.Events = append(r.Events, provider.Event{ID: strconv.FormatInt(id, 10), Position: provider.IntPosition(id), Payload: []byte(`{"id":` + strconv.FormatInt(id, 10) + `}`)})
	}
	if len(r.Events) > 0 {
		r.Successor = []byte(r.Events[len(r.Events)-1].ID)
	}
	return r
}

// listingSource is an object listing: keys in key order, each with a
// modification time (its position), served rereadPageSize at a time after
// an index token; the last page has no successor.
type listingSource struct {
	keys  []string
	mtime map[string]int64
}

func (l *listingSource) page(cursor []byte) provider.Response {
	i := 0
	if len(cursor) > 0 {
		i, _ = strconv.Atoi(string(cursor))
	}
	var r provider.Response
	for ; i < len(l.keys) && len(r.Events) < rereadPageSize; i++ {
		k := l.keys[i]
		r.Events = append(r.Events, provider.Event{ID: k, Position: provider.IntPosition(l.mtime[k]), Payload: []byte(`{"key":"` + k + `"}`)})
	}
	if i < len(l.keys) {
		r.Successor = []byte(strconv.Itoa(i))
	}
	return r
}

// put writes key at time t (a new object, or a rewrite).
func (l *listingSource) put(key string, t int64) {
	if _, ok := l.mtime[key]; !ok {
		at, _ := slices.BinarySearch(l.keys, key)
		l.keys = slices.Insert(l.keys, at, key)
	}
	l.mtime[key] = t
}

// pager serves a partition's pages.
type pager interface {
	page(cursor []byte) provider.Response
}

// rereadRun drives one partition's machine synchronously: fetches answered
// from src, every batch acknowledged at once, time moved to each Wait.
type rereadRun struct {
	m       *chain.Machine
	st      *countingStore
	src     pager
	listing bool // restart cursors are the start (a relist)
	now     time.Time
	wake    time.Time
	fetches int
	emitted int
	passes  int
	passAt  []int // the fetches made when each pass started
	pending []chain.Ack
	fetch   *chain.Fetch
}

func (r *rereadRun) step(in chain.Input) {
	queue := r.m.Step(in)
	for len(queue) > 0 {
		a := queue[0]
		queue = queue[1:]
		switch a := a.(type) {
		case chain.Fetch:
			f := a
			r.fetch = &f
		case chain.Emit:
			r.emitted += a.To - a.From
			r.pending = append(r.pending, chain.Ack{Batch: a.Batch})
		case chain.Wait:
			r.wake = a.Until
		case chain.RestartCursor:
			c := []byte(nil)
			if a.HasApplied && !r.listing {
				c = []byte(a.Applied.String())
			}
			queue = append(queue, r.m.Step(chain.RestartCursorFound{Cursor: c})...)
		case chain.Count:
			if a.Metric == chain.MetricRereadPasses {
				r.passes++
				r.passAt = append(r.passAt, r.fetches)
			}
		default:
			if in, ok := chainstore.Do(context.Background(), r.st, a); ok {
				queue = append(queue, r.m.Step(in)...)
			}
		}
	}
}

// settle answers fetches and acknowledges batches until the machine waits
// at its head with nothing in flight (an empty answer polled later).
func (r *rereadRun) settle(b *testing.B) {
	for i := 0; ; i++ {
		if i > 50_000_000 {
			b.Fatal("the partition never settled")
		}
		switch {
		case len(r.pending) > 0:
			acks := r.pending
			r.pending = nil
			r.step(chain.Delivered{Acks: acks})
		case r.fetch != nil:
			f := r.fetch
			r.fetch = nil
			r.fetches++
			r.step(chain.Fetched{Fetch: f.ID, Attempt: fmt.Sprintf("a%d", r.fetches), Response: reconcile.FromProvider(r.src.page(f.Cursor))})
		default:
			return
		}
	}
}

// tick moves time to the machine's wake-up (a poll, or the next pass).
func (r *rereadRun) tick() {
	if r.wake.After(r.now) {
		r.now = r.wake
	} else {
		r.now = r.now.Add(time.Second)
	}
	r.step(chain.Tick{Now: r.now})
}

// BenchmarkRereadPass measures what one pass of a keyset re-read window
// costs (docs/design.md#re-read-windows): a partition of N ids (10,000 and
// 1,000,000, 100 a page) is read, and read again by its first pass (from
// the start); then, per measured pass, 100 ids arrive at the head and one
// below the progress within the window of 1,000 ids, and the partition
// walks to its head and makes one pass. Reported per pass: requests
// (fetches), store writes (promotions, witness puts, witness receipts,
// receipt records), the receipt records' write units (24 bytes a
// receipt), events emitted, and the receipt state (records and receipts)
// after the pass; and the requests of the first pass, which re-reads the
// whole partition. The memory store stands for DynamoDB; the write units
// of the receipt records are computed from their size.
func BenchmarkRereadPass(b *testing.B) {
	for _, n := range []int{10_000, 1_000_000} {
		b.Run(fmt.Sprintf("objects=%d", n), func(b *testing.B) {
			const window, arrivals = 1000, 100
			src := &keysetSource{}
			for i := 1; i <= n; i++ {
				src.ids = append(src.ids, int64(i*10))
			}
			st := &countingStore{Store: memstore.New(), calls: map[string]int{}}
			key := store.Key{Scope: "bench", Partition: "p"}
			contract := provider.Contract{
				EmptyPage: provider.EmptyNoEvidence, OrderedPositions: true, ExclusiveBoundary: true,
				Pagination: provider.PaginationKeyset, MissingSuccessor: provider.MissingSuccessorPoll,
				Recovery: provider.RecoveryRestartFromBoundary, RereadWindow: window * 10,
			}
			r := &rereadRun{st: st, src: src, now: time.Unix(0, 0)}
			r.m = chain.New(chain.Config{Key: key, Contract: contract, Restarter: true, PollInterval: time.Second, ParkCheckInterval: time.Second, StoreBackoff: time.Second, MaxPagesInFlight: 1, MaxBatchSize: rereadPageSize})
			r.step(chain.Start{})
			// The first walk, then the first pass from the start.
			for r.passes < 2 {
				r.settle(b)
				r.tick()
			}
			r.settle(b)
			firstPass := r.passAt[1] - r.passAt[0]
			next := int64(n*10 + 10)
			type totals struct {
				fetches, emitted, writes, recWCU, recBytes int
			}
			snap := func() totals {
				st.mu.Lock()
				defer st.mu.Unlock()
				w := st.calls["promote"] + st.calls["witness-put"] + st.calls["witness-receipt"] + st.calls["receipts-put"] + st.calls["receipt-records-deleted"]
				return totals{r.fetches, r.emitted, w, st.receiptWCU, st.receiptBytes}
			}
			before := snap()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for j := 0; j < arrivals; j++ {
					src.ids = append(src.ids, next)
					next += 10
				}
				// One late row below the progress, within the window.
				late := next - 10*window/2 - 5
				if at, found := slices.BinarySearch(src.ids, late); !found {
					src.ids = slices.Insert(src.ids, at, late)
				}
				passes := r.passes
				for r.passes == passes {
					r.tick()
					r.settle(b)
				}
			}
			b.StopTimer()
			after := snap()
			per := func(x, y int) float64 { return float64(y-x) / float64(b.N) }
			b.ReportMetric(float64(firstPass), "first-pass-requests")
			b.ReportMetric(per(before.fetches, after.fetches), "requests/pass")
			b.ReportMetric(per(before.writes, after.writes), "store-writes/pass")
			b.ReportMetric(per(before.recWCU, after.recWCU), "receipt-WCU/pass")
			b.ReportMetric(per(before.emitted, after.emitted), "emitted/pass")
			chunks, receipts := st.ReceiptChunks(key)
			b.ReportMetric(float64(chunks), "receipt-records")
			b.ReportMetric(float64(receipts), "receipts")
			b.ReportMetric(float64(receipts*24), "receipt-bytes")
		})
	}
}

// BenchmarkRelistPass measures a continuous listing's pass
// (docs/design.md#re-read-windows: a listing read continuously): N
// objects (10,000 and 1,000,000) listed 100 a page, positions their
// modification times; per measured pass 100 new objects (keys spread over
// the key space) and one rewritten object, then one relist from the start.
// Reported per pass: requests, store writes, the receipt records' write
// units, events emitted, and the receipt state after the pass (only the
// objects modified within the window keep receipts).
func BenchmarkRelistPass(b *testing.B) {
	for _, n := range []int{10_000, 1_000_000} {
		b.Run(fmt.Sprintf("objects=%d", n), func(b *testing.B) {
			const window, arrivals = 1000, 100
			src := &listingSource{mtime: make(map[string]int64, n)}
			for i := 0; i < n; i++ {
				k := fmt.Sprintf("obj/%09d", i*10)
				src.keys = append(src.keys, k)
				src.mtime[k] = int64(i % 1000)
			}
			clock := int64(10_000)
			st := &countingStore{Store: memstore.New(), calls: map[string]int{}}
			key := store.Key{Scope: "bench", Partition: "bucket"}
			contract := provider.Contract{
				EmptyPage: provider.EmptyNoEvidence, MissingSuccessor: provider.MissingSuccessorPoll,
				TokensMayRotate: true, Recovery: provider.RecoveryRestartFromBoundary, RereadWindow: window,
			}
			r := &rereadRun{st: st, src: src, listing: true, now: time.Unix(0, 0)}
			r.m = chain.New(chain.Config{Key: key, Contract: contract, Restarter: true, PollInterval: time.Second, ParkCheckInterval: time.Second, StoreBackoff: time.Second, MaxPagesInFlight: 1, MaxBatchSize: rereadPageSize})
			r.step(chain.Start{})
			for r.passes < 3 {
				r.settle(b)
				r.tick()
			}
			r.settle(b)
			type totals struct {
				fetches, emitted, writes, recWCU int
			}
			snap := func() totals {
				st.mu.Lock()
				defer st.mu.Unlock()
				w := st.calls["promote"] + st.calls["witness-put"] + st.calls["witness-receipt"] + st.calls["receipts-put"] + st.calls["receipt-records-deleted"]
				return totals{r.fetches, r.emitted, w, st.receiptWCU}
			}
			before := snap()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				clock += 100
				for j := 0; j < arrivals; j++ {
					src.put(fmt.Sprintf("obj/%09d", (i*arrivals+j)*977%(n*10)+1), clock)
				}
				src.put(src.keys[(i*31)%len(src.keys)], clock) // a rewrite
				passes := r.passes
				for r.passes == passes {
					r.tick()
					r.settle(b)
				}
			}
			b.StopTimer()
			after := snap()
			per := func(x, y int) float64 { return float64(y-x) / float64(b.N) }
			b.ReportMetric(per(before.fetches, after.fetches), "requests/pass")
			b.ReportMetric(per(before.writes, after.writes), "store-writes/pass")
			b.ReportMetric(per(before.recWCU, after.recWCU), "receipt-WCU/pass")
			b.ReportMetric(per(before.emitted, after.emitted), "emitted/pass")
			chunks, receipts := st.ReceiptChunks(key)
			b.ReportMetric(float64(chunks), "receipt-records")
			b.ReportMetric(float64(receipts), "receipts")
		})
	}
}
