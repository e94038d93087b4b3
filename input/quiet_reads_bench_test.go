package input

// What quiet partitions cost the store in reads: several instances sharing
// idle partitions through leases, at the spec's defaults, over the memory
// store counting the items each read returns (docs/design.md "Performance
// model", issue 36's target ≤ 5 items a second for 1,000 partitions × 3
// instances).
//
//	go test -run '^$' -bench BenchmarkQuietStoreReads -benchtime 1x -timeout 30m ./input/

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/store/memstore"
	"github.com/tidemark/tidemark/provider/simulated"
)

// readMeter is the memory store counting, by operation, the items its reads
// return (a point read counts one item, found or not; a list or query its
// items, at least one) and the read requests.
type readMeter struct {
	*memstore.Store
	mu       sync.Mutex
	items    map[string]int64
	requests int64
}

func newReadMeter() *readMeter { return &readMeter{Store: memstore.New(), items: map[string]int64{}} }

func (m *readMeter) count(op string, n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.items[op] += int64(max(n, 1))
	m.requests++
}

// take returns the counts since the last take and resets them.
func (m *readMeter) take() (map[string]int64, int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	items, reqs := m.items, m.requests
	m.items, m.requests = map[string]int64{}, 0
	return items, reqs
}

func (m *readMeter) LoadCheckpoint(ctx context.Context, k store.Key) (store.Checkpoint, error) {
	m.count("LoadCheckpoint", 1)
	return m.Store.LoadCheckpoint(ctx, k)
}

func (m *readMeter) ListCheckpoints(ctx context.Context, scope string) ([]store.Checkpoint, error) {
	cps, err := m.Store.ListCheckpoints(ctx, scope)
	m.count("ListCheckpoints", len(cps))
	return cps, err
}

func (m *readMeter) Witnesses(ctx context.Context, k store.Key, generation uint64) ([]reconcile.Witness, error) {
	ws, err := m.Store.Witnesses(ctx, k, generation)
	m.count("Witnesses", len(ws))
	return ws, err
}

func (m *readMeter) WitnessesFrom(ctx context.Context, k store.Key, from uint64) ([]reconcile.Witness, error) {
	ws, err := m.Store.WitnessesFrom(ctx, k, from)
	m.count("WitnessesFrom", len(ws))
	return ws, err
}

func (m *readMeter) Receipts(ctx context.Context, k store.Key, from coord.Position, hasFrom bool) ([]store.Receipt, error) {
	rs, err := m.Store.Receipts(ctx, k, from, hasFrom)
	m.count("Receipts", len(rs))
	return rs, err
}

func (m *readMeter) LoadMembership(ctx context.Context, scope string) (store.Membership, error) {
	m.count("LoadMembership", 1)
	return m.Store.LoadMembership(ctx, scope)
}

func (m *readMeter) MembershipEpoch(ctx context.Context, scope string) (uint64, error) {
	m.count("MembershipEpoch", 1)
	return m.Store.MembershipEpoch(ctx, scope)
}

func (m *readMeter) DiscoveryRequests(ctx context.Context, scope string) (uint64, error) {
	m.count("DiscoveryRequests", 1)
	return m.Store.DiscoveryRequests(ctx, scope)
}

func (m *readMeter) LoadFrontier(ctx context.Context, scope string) (store.Frontier, error) {
	m.count("LoadFrontier", 1)
	return m.Store.LoadFrontier(ctx, scope)
}

func (m *readMeter) LoadFrontierHead(ctx context.Context, scope string) (store.FrontierHead, error) {
	m.count("LoadFrontierHead", 1)
	return m.Store.LoadFrontierHead(ctx, scope)
}

func (m *readMeter) LoadFrontierShards(ctx context.Context, scope string, epoch uint64, shards []int) ([]store.FrontierShard, error) {
	m.count("LoadFrontierShards", len(shards))
	return m.Store.LoadFrontierShards(ctx, scope, epoch, shards)
}

func (m *readMeter) ListHeartbeats(ctx context.Context, scope string) ([]store.Heartbeat, error) {
	hbs, err := m.Store.ListHeartbeats(ctx, scope)
	m.count("ListHeartbeats", len(hbs))
	return hbs, err
}

// BenchmarkQuietStoreReads: 1,000 partitions shared by 3 instances (leases
// and every other setting at the spec's defaults), each partition caught up
// and polling an empty source. Once idle and settled (the publishers'
// idle reads have slowed to their slowest pace), the store reads of a
// window are reported per second: items (the figure the target counts),
// requests, and items by operation.
func BenchmarkQuietStoreReads(b *testing.B) {
	const parts, instances, events = 1000, 3, 5
	settle, window := 90*time.Second, 60*time.Second
	for range b.N {
		names := make([]string, parts)
		for i := range names {
			names[i] = fmt.Sprintf("partition-%04d", i)
		}
		st := newReadMeter()
		conf, err := Spec().ParseYAML("scope: quiet\npartitions: [ p ]\nsimulated: { events_per_partition: 1 }\n", nil)
		if err != nil {
			b.Fatal(err)
		}
		defaults, err := readConfig(conf)
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		var ins []*paginatedInput
		for i := range instances {
			prov, err := simulated.New(simulated.Config{Partitions: names, EventsPerPartition: events})
			if err != nil {
				b.Fatal(err)
			}
			cfg := defaults
			cfg.Scope, cfg.Partitions = "quiet", names
			lc := DefaultLeaseConfig()
			lc.InstanceID = fmt.Sprintf("instance-%d", i)
			cfg.Leases = &lc
			bi, err := New(cfg, prov, st, nil, service.MockResources())
			if err != nil {
				b.Fatal(err)
			}
			in := bi.(*paginatedInput)
			if err := in.Connect(ctx); err != nil {
				b.Fatal(err)
			}
			ins = append(ins, in)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					_, ack, err := in.ReadBatch(ctx)
					if err != nil {
						return
					}
					_ = ack(ctx, nil)
				}
			}()
		}
		deadline := time.Now().Add(10 * time.Minute)
		for !promotedThrough(b, st, "quiet", parts, events) {
			if time.Now().After(deadline) {
				b.Fatal("not idle after 10 minutes")
			}
			time.Sleep(time.Second)
		}
		time.Sleep(settle)
		st.take()
		b.ResetTimer()
		time.Sleep(window)
		b.StopTimer()
		items, reqs := st.take()
		var total int64
		for _, n := range items {
			total += n
		}
		sec := window.Seconds()
		b.ReportMetric(float64(total)/sec, "items-read/s")
		b.ReportMetric(float64(reqs)/sec, "read-requests/s")
		for _, op := range slices.Sorted(maps.Keys(items)) {
			b.Logf("%s: %.2f items/s", op, float64(items[op])/sec)
		}
		cancel()
		for _, in := range ins {
			cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
			if err := in.Close(cctx); err != nil {
				b.Error(err)
			}
			ccancel()
		}
		wg.Wait()
	}
}
