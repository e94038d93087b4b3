package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/redpanda-data/benthos/v4/public/service"

	_ "github.com/redpanda-data/benthos/v4/public/components/pure"

	"github.com/tidemark/tidemark/input"
	"github.com/tidemark/tidemark/internal/chain"
	"github.com/tidemark/tidemark/internal/dynalitetest"
	"github.com/tidemark/tidemark/internal/dynamostore"
	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/store/memstore"
	"github.com/tidemark/tidemark/provider"
	"github.com/tidemark/tidemark/provider/simulated"
)

// runSpec is one pipeline run: simulated source -> paginated_partitions ->
// an output that acknowledges every batch at once (optionally nacking
// some).
type runSpec struct {
	Partitions int
	Pages      int // full pages per partition
	PageSize   int
	Latency    time.Duration
	Store      string // "memory" or "dynamodb"
	InFlight   int    // max_pages_in_flight; 0 = the input's default (4)
	// MinPages is promotion_min_pages; 0 = the input's default (2).
	MinPages int
	// WitnessGroup is witness_group_pages; 0 = the input's default (2).
	WitnessGroup int
	// Compact is compact_witness (4 bytes an event).
	Compact bool
	// ConstantSemantic: every event's semantic projection is empty (the
	// http provider's `event_semantic: root = ""`: payload changes do not
	// matter), so a page's events share one digest.
	ConstantSemantic bool
	// Faults (the retry scenario).
	RotateTokens bool
	ShiftRate    float64
	NackEvery    int // nack every n-th delivered batch; 0 = never
	Timeout      time.Duration
	// Incarnation: the source declares an incarnation (checked by a
	// request of Latency, counted in runResult.Incarnation).
	Incarnation bool
	// EmitBeforeCheck: the previous release's order (a page emitted at
	// once, checked before its promotion): the bracket's baseline.
	EmitBeforeCheck bool
}

// defaultInFlight is the input's default max_pages_in_flight.
const defaultInFlight = 4

type runResult struct {
	Events     int64 // distinct events of the source (what the limit counts)
	Delivered  int64 // events handed to the output (acked or nacked)
	Batches    int64
	Nacks      int64
	Wall       time.Duration // stream start -> last batch delivered
	FirstEvent time.Duration // stream start -> first batch delivered
	// DynamoDB only: requests in the steady-state window (see runPipeline),
	// before it, and in all.
	Costs, Startup, Total *costs
	// Incarnation (runSpec.Incarnation): the incarnation requests.
	Incarnation *incarnationCounts
}

func partitionNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("p%03d", i)
	}
	return out
}

// limit is the physical limit of a spec in events per second: one fetch in
// flight per partition at every moment (docs/design.md#performance-model).
func (s runSpec) limit() float64 {
	return float64(s.Partitions*s.PageSize) / s.Latency.Seconds()
}

func inputConfig(s runSpec, names []string) input.Config {
	inFlight := s.InFlight
	if inFlight == 0 {
		inFlight = defaultInFlight
	}
	minPages := s.MinPages
	if minPages == 0 {
		minPages = chain.PromoteMinPages
	}
	witnessGroup := s.WitnessGroup
	if witnessGroup == 0 {
		witnessGroup = chain.WitnessGroupPages
	}
	// The spec's defaults (input/spec.go), except poll_interval: a held
	// page (a nack, an end of data) is polled again after 20 ms, not 1 s.
	return input.Config{
		Scope:      "bench",
		Partitions: names,
		Config: chain.Config{
			MaxPagesInFlight:   inFlight,
			PollInterval:       20 * time.Millisecond,
			ParkCheckInterval:  10 * time.Second,
			StoreBackoff:       time.Second,
			FetchRetries:       5,
			FetchBackoff:       100 * time.Millisecond,
			ExitWhenComplete:   true,
			CoalescePromotions: true,
			PromoteMinPages:    minPages,
			PromoteLinger:      chain.PromoteLinger,
			WitnessGroupPages:  witnessGroup,
			CompactWitness:     s.Compact,
			EmitBeforeCheck:    s.EmitBeforeCheck,
		},
		FrontierPublishInterval: 50 * time.Millisecond,
	}
}

// newStore returns the store of a spec, with a meter on DynamoDB.
func newStore(tb testing.TB, ctx context.Context, kind string) (store.Store, *meter, func()) {
	if d, ok := strings.CutPrefix(kind, "memory+"); ok {
		lat, err := time.ParseDuration(d)
		if err != nil {
			tb.Fatal(err)
		}
		return &slowStore{Store: memstore.New(), d: lat}, nil, func() {}
	}
	switch kind {
	case "memory":
		return memstore.New(), nil, func() {}
	case "dynamodb":
		tbl := dynalitetest.NewTable(tb)
		m := newMeter()
		ds, err := dynamostore.NewDynamoStore(ctx, dynamostore.DynamoConfig{Table: tbl.Name, Endpoint: tbl.Endpoint, Create: true, ClientOptions: m.options()})
		if err != nil {
			tb.Fatal(err)
		}
		drop := func() {
			dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, _ = ds.Client().DeleteTable(dctx, &dynamodb.DeleteTableInput{TableName: aws.String(tbl.Name)})
		}
		m.reset() // table creation is not the pipeline's cost
		return ds, m, drop
	}
	tb.Fatalf("unknown store %q", kind)
	return nil, nil, nil
}

var envSeq atomic.Int64

// runPipeline runs one spec to completion (exit_when_complete) and returns
// what it measured.
func runPipeline(tb testing.TB, s runSpec) runResult {
	tb.Helper()
	if s.Timeout == 0 {
		s.Timeout = 5 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.Timeout)
	defer cancel()
	names := partitionNames(s.Partitions)
	prov, err := simulated.New(simulated.Config{
		Partitions: names, EventsPerPartition: int64(s.Pages * s.PageSize), PageSize: s.PageSize,
		Latency: s.Latency, Seed: 1, RotateTokens: s.RotateTokens, ShiftRate: s.ShiftRate,
	})
	if err != nil {
		tb.Fatal(err)
	}
	st, m, drop := newStore(tb, ctx, s.Store)
	defer drop()

	// The steady-state window of the store's requests opens when every
	// partition has made its first fetch (membership, checkpoint creation,
	// the witness query at load and the frontier publisher's first listing
	// are start-up) and closes at the first fetch past the end of the data
	// (a partition's last witness is for its end-of-data page).
	var opened, closed *costs
	var cprov provider.Provider = prov
	if m != nil {
		cprov = newWindowProvider(prov, names, int64(s.Pages*s.PageSize), func() {
			c := m.snapshot()
			opened = &c
		}, func() {
			c := m.snapshot()
			closed = &c
		})
	}

	if s.ConstantSemantic {
		cprov = constantSemantic{cprov}
	}
	var inc *incarnationProvider
	if s.Incarnation {
		inc = newIncarnationProvider(cprov, s.Latency)
		cprov = inc
	}

	env := service.NewEnvironment()
	name := fmt.Sprintf("tidemark_bench_%d", envSeq.Add(1))
	cfg := inputConfig(s, names)
	err = env.RegisterBatchInput(name, service.NewConfigSpec(), func(_ *service.ParsedConfig, res *service.Resources) (service.BatchInput, error) {
		return input.New(cfg, cprov, st, nil, res)
	})
	if err != nil {
		tb.Fatal(err)
	}
	sb := env.NewStreamBuilder()
	if err := sb.SetLoggerYAML("level: error"); err != nil {
		tb.Fatal(err)
	}
	if err := sb.AddInputYAML(name + ": {}"); err != nil {
		tb.Fatal(err)
	}
	var (
		delivered, batches, nacks atomic.Int64
		first, last               atomic.Int64 // ns since start
		start                     time.Time
	)
	err = sb.AddBatchConsumerFunc(func(_ context.Context, b service.MessageBatch) error {
		now := int64(time.Since(start))
		first.CompareAndSwap(0, now)
		last.Store(now)
		delivered.Add(int64(len(b)))
		n := batches.Add(1)
		if s.NackEvery > 0 && n%int64(s.NackEvery) == 0 {
			nacks.Add(1)
			return errors.New("bench: injected nack")
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	stream, err := sb.Build()
	if err != nil {
		tb.Fatal(err)
	}
	start = time.Now()
	if err := stream.Run(ctx); err != nil {
		tb.Fatalf("stream: %v (delivered %d events in %d batches)", err, delivered.Load(), batches.Load())
	}
	res := runResult{
		Events:     int64(s.Partitions * s.Pages * s.PageSize),
		Delivered:  delivered.Load(),
		Batches:    batches.Load(),
		Nacks:      nacks.Load(),
		Wall:       time.Duration(last.Load()),
		FirstEvent: time.Duration(first.Load()),
	}
	if res.Delivered < res.Events {
		tb.Fatalf("only %d of %d events delivered", res.Delivered, res.Events)
	}
	if inc != nil {
		c := inc.counts()
		res.Incarnation = &c
	}
	if m != nil {
		total := m.snapshot()
		if opened == nil || closed == nil {
			tb.Fatal("the steady-state window never opened or closed")
		}
		steady := closed.sub(*opened)
		res.Costs, res.Startup, res.Total = &steady, opened, &total
	}
	return res
}

// windowProvider calls open once every partition has been fetched from,
// and close at the first fetch past the end of the data of any partition.
// (It reads the simulated source's cursors, "sim1:<next position>:<nonce>":
// the bench's own source, not the input, looks inside them.)
type windowProvider struct {
	provider.Provider
	end         int64
	open, close func()

	mu               sync.Mutex
	unseen           map[string]bool
	isOpen, isClosed bool
}

func newWindowProvider(p provider.Provider, names []string, end int64, open, close func()) *windowProvider {
	w := &windowProvider{Provider: p, end: end, open: open, close: close, unseen: map[string]bool{}}
	for _, n := range names {
		w.unseen[n] = true
	}
	return w
}

func (w *windowProvider) Fetch(ctx context.Context, req provider.Request) (provider.Response, error) {
	w.mu.Lock()
	delete(w.unseen, req.Partition)
	if !w.isOpen && len(w.unseen) == 0 {
		w.isOpen = true
		w.open()
	}
	if w.isOpen && !w.isClosed && simPosition(req.Cursor) > w.end {
		w.isClosed = true
		w.close()
	}
	w.mu.Unlock()
	return w.Provider.Fetch(ctx, req)
}

// constantSemantic gives every event of its provider's pages the same,
// empty, semantic projection.
type constantSemantic struct{ provider.Provider }

func (c constantSemantic) Fetch(ctx context.Context, req provider.Request) (provider.Response, error) {
	r, err := c.Provider.Fetch(ctx, req)
	for i := range r.Events {
		r.Events[i].Semantic = []byte{}
	}
	return r, err
}

func simPosition(c []byte) int64 {
	f := strings.Split(string(c), ":")
	if len(f) != 3 {
		return 0
	}
	n, _ := strconv.ParseInt(f[1], 10, 64)
	return n
}

// plainRead is the physical reference: one goroutine per partition fetching
// sequentially from the simulated source and discarding the pages, no
// checkpoint, no witness, no pipeline.
func plainRead(tb testing.TB, s runSpec) runResult {
	tb.Helper()
	names := partitionNames(s.Partitions)
	prov, err := simulated.New(simulated.Config{
		Partitions: names, EventsPerPartition: int64(s.Pages * s.PageSize), PageSize: s.PageSize, Latency: s.Latency, Seed: 1,
	})
	if err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	var events atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Value
	start := time.Now()
	for _, p := range names {
		wg.Go(func() {
			var cur []byte
			for {
				r, err := prov.Fetch(ctx, provider.Request{Scope: "bench", Partition: p, Cursor: cur})
				if err != nil {
					failed.Store(err)
					return
				}
				events.Add(int64(len(r.Events)))
				if !r.HasMore {
					return
				}
				cur = r.Successor
			}
		})
	}
	wg.Wait()
	wall := time.Since(start)
	if err, _ := failed.Load().(error); err != nil {
		tb.Fatal(err)
	}
	return runResult{Events: events.Load(), Delivered: events.Load(), Wall: wall}
}

// load1 is the one-minute load average (0 when unknown).
func load1() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f, _ := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	return f
}

// slowStore is the in-memory store with a fixed latency on every
// checkpoint and witness request: a store with DynamoDB's latency (a few
// milliseconds) but no throughput ceiling, to see how the input's
// per-partition chain copes with the latency alone.
type slowStore struct {
	store.Store
	d time.Duration
}

func (s *slowStore) wait(ctx context.Context) {
	t := time.NewTimer(s.d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func (s *slowStore) LoadCheckpoint(ctx context.Context, k store.Key) (store.Checkpoint, error) {
	s.wait(ctx)
	return s.Store.LoadCheckpoint(ctx, k)
}

func (s *slowStore) CreateCheckpoint(ctx context.Context, c store.Checkpoint) (store.Checkpoint, error) {
	s.wait(ctx)
	return s.Store.CreateCheckpoint(ctx, c)
}

func (s *slowStore) Promote(ctx context.Context, p store.Promotion) (store.Checkpoint, error) {
	s.wait(ctx)
	return s.Store.Promote(ctx, p)
}

func (s *slowStore) PutWitness(ctx context.Context, w reconcile.Witness) error {
	s.wait(ctx)
	return s.Store.PutWitness(ctx, w)
}

func (s *slowStore) PutWitnesses(ctx context.Context, ws []reconcile.Witness) error {
	s.wait(ctx)
	return store.PutWitnesses(ctx, s.Store, ws)
}

func (s *slowStore) WitnessesFrom(ctx context.Context, k store.Key, from uint64) ([]reconcile.Witness, error) {
	s.wait(ctx)
	return s.Store.WitnessesFrom(ctx, k, from)
}

func (s *slowStore) RecordReceipt(ctx context.Context, k store.Key, gen uint64, attempt string, acked int) error {
	s.wait(ctx)
	return s.Store.RecordReceipt(ctx, k, gen, attempt, acked)
}

func (s *slowStore) SetDisposition(ctx context.Context, k store.Key, gen uint64, attempt string, d reconcile.Disposition) error {
	s.wait(ctx)
	return s.Store.SetDisposition(ctx, k, gen, attempt, d)
}
