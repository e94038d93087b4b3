package input

// Test harness for the stream tests (stream_test.go): a Benthos stream built
// with service.NewStreamBuilder around the real paginated_partitions
// component, the simulated provider and a checkpoint backend (the in-memory
// twin or DynamoDB on dynalite), plus the instruments the oracles need:
//
//   - spyStore wraps the store each input builds and records every
//     successful promotion and every witness that became durable, so a test
//     can check the promoted chain exactly (docs/design.md#invariants,
//     invariants 1 Binding, 2 Fencing, 3 Monotone, 4 Witness first, 9 No loss);
//   - testMetrics is a metrics exporter whose counters a test reads, to show
//     that an injected fault was actually exercised;
//   - holdOutput is an output that holds writes and releases them in an
//     order the test chooses (out-of-order acks), or never (a hung output).
//
// The component is registered under its real name in a per-test clone of
// the global environment: the YAML is the user's YAML, the constructor is
// FromParsed; only the store is wrapped (before Connect), and Close is
// observed so a test knows when an input has stopped touching the store.

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	// The pure bundle provides the stream's defaults (the none tracer,
	// buffer and so on) and the outputs the tests use.
	_ "github.com/redpanda-data/benthos/v4/public/components/pure"
	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/dynalitetest"
	"github.com/tidemark/tidemark/internal/dynamostore"
	"github.com/tidemark/tidemark/internal/e2etest"
	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/storeconfig"
	"github.com/tidemark/tidemark/provider/simulated"
)

// backend is a checkpoint backend under test.
type backend string

const (
	memoryBackend backend = "memory"
	dynamoBackend backend = "dynamodb"
)

var backends = []backend{memoryBackend, dynamoBackend}

// forEachBackend runs fn as one subtest per backend.
func forEachBackend(t *testing.T, fn func(t *testing.T, b backend)) {
	t.Helper()
	for _, b := range backends {
		t.Run(string(b), func(t *testing.T) { fn(t, b) })
	}
}

var scopeSeq atomic.Int64

var unsafeScope = regexp.MustCompile(`[^a-zA-Z0-9_-]+`)

// harness is one test's source, backend and instruments. Several streams may
// run one after the other on one harness (a restart): they share the store,
// the recorder and the delivered set.
type harness struct {
	t       *testing.T
	backend backend
	scope   string
	parts   []string
	n       int64 // events per partition
	ckYAML  string
	st      store.Store // the test's own view of the checkpoint store
	rec     *recorder
	metrics *testMetrics
	logs    *e2etest.SyncBuffer

	closed atomic.Int64 // inputs closed

	mu        sync.Mutex
	delivered map[string]int // event id -> acknowledged deliveries
	perRun    []map[string]int
}

// newHarness prepares a fresh scope (memory) or a fresh table (dynamodb).
func newHarness(t *testing.T, b backend, parts []string, n int64) *harness {
	t.Helper()
	h := &harness{
		t: t, backend: b, parts: parts, n: n,
		scope:     fmt.Sprintf("s%d-%s", scopeSeq.Add(1), unsafeScope.ReplaceAllString(t.Name(), "_")),
		rec:       newRecorder(),
		metrics:   newTestMetrics(),
		logs:      &e2etest.SyncBuffer{},
		delivered: map[string]int{},
	}
	if len(h.scope) > 200 {
		h.scope = h.scope[:200]
	}
	switch b {
	case memoryBackend:
		h.ckYAML = "backend: memory"
		h.st = storeconfig.SharedMemStore()
	case dynamoBackend:
		tb := dynalitetest.NewTable(t)
		h.ckYAML = fmt.Sprintf("backend: dynamodb\ndynamodb:\n  table: %s\n  endpoint: %s\n  create: true", tb.Name, tb.Endpoint)
		ds, err := dynamostore.NewDynamoStore(t.Context(), dynamostore.DynamoConfig{Table: tb.Name, Endpoint: tb.Endpoint, Create: true})
		if err != nil {
			t.Fatalf("dynamodb store: %v", err)
		}
		h.st = ds
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last log lines of the streams:\n%s", h.logs.Tail(80))
		}
	})
	return h
}

// httpEventsYAML is a paginated_partitions input of the harness's scope over
// one partition, p, of an http source that answers
// {"events":[{"id":…,"pos":…}],"next":…} at <url>/events?cursor=<cursor>,
// with dense positions and empty pages that prove nothing; settings are
// further input fields and contract further contract fields, each line
// indented as it stands in the YAML (two and six spaces).
func (h *harness) httpEventsYAML(url, settings, contract string) string {
	return fmt.Sprintf(`paginated_partitions:
  scope: %s
  partitions: [ p ]
%s  checkpoint:
%s
  http:
    url: '%s/events?cursor=${! @cursor.escape_url_query() }'
    events: root = this.events
    event_position: root = this.pos
    successor: root = this.next
    contract:
      positions: dense
      empty_page: no_evidence
%s`, h.scope, settings, indent(h.ckYAML, "    "), url, contract)
}

// simConfig is the simulated source and the input's knobs for one stream.
type simConfig struct {
	pageSize         int
	maxBatch         int
	maxPagesInFlight int
	seed             uint64
	latency          time.Duration
	faults           string // extra YAML lines of the simulated object
	exitWhenComplete bool
}

func (h *harness) inputYAML(c simConfig) string {
	if c.pageSize == 0 {
		c.pageSize = 10
	}
	if c.maxPagesInFlight == 0 {
		c.maxPagesInFlight = 4
	}
	if c.seed == 0 {
		c.seed = 1
	}
	var b strings.Builder
	fmt.Fprintf(&b, "paginated_partitions:\n")
	fmt.Fprintf(&b, "  scope: %s\n", h.scope)
	fmt.Fprintf(&b, "  partitions: [ %s ]\n", strings.Join(h.parts, ", "))
	fmt.Fprintf(&b, "  exit_when_complete: %v\n", c.exitWhenComplete)
	fmt.Fprintf(&b, "  max_pages_in_flight: %d\n", c.maxPagesInFlight)
	fmt.Fprintf(&b, "  max_batch_size: %d\n", c.maxBatch)
	fmt.Fprintf(&b, "  poll_interval: 5ms\n  park_check_interval: 20ms\n  store_backoff: 10ms\n")
	fmt.Fprintf(&b, "  fetch_retries: 2\n  fetch_backoff: 1ms\n  frontier_publish_interval: 50ms\n")
	fmt.Fprintf(&b, "  checkpoint:\n%s\n", indent(h.ckYAML, "    "))
	fmt.Fprintf(&b, "  simulated:\n")
	fmt.Fprintf(&b, "    events_per_partition: %d\n    page_size: %d\n    seed: %d\n    latency: %s\n", h.n, c.pageSize, c.seed, c.latency)
	if c.faults != "" {
		fmt.Fprintf(&b, "%s\n", indent(strings.TrimSpace(c.faults), "    "))
	}
	return b.String()
}

func indent(s, prefix string) string {
	lines := strings.Split(s, "\n")
	for i := range lines {
		lines[i] = prefix + lines[i]
	}
	return strings.Join(lines, "\n")
}

// env returns a clone of the global environment in which
// paginated_partitions is the real component with its store wrapped by the
// recorder, and the test's metrics exporter and hold output exist.
func (h *harness) env(hold *holdOutput) *service.Environment {
	h.t.Helper()
	env := service.NewEnvironment()
	err := env.RegisterBatchInput("paginated_partitions", Spec(), func(conf *service.ParsedConfig, mgr *service.Resources) (service.BatchInput, error) {
		bi, err := FromParsed(conf, mgr)
		if err != nil {
			return nil, err
		}
		in := bi.(*paginatedInput)
		in.store = &spyStore{Store: in.store, rec: h.rec}

		return &closeWatch{BatchInput: in, h: h}, nil
	})
	if err != nil {
		h.t.Fatal(err)
	}
	if err := env.RegisterMetricsExporter("test_metrics", service.NewConfigSpec(), func(*service.ParsedConfig, *service.Logger) (service.MetricsExporter, error) {
		return h.metrics, nil
	}); err != nil {
		h.t.Fatal(err)
	}
	if err := env.RegisterBatchOutput("test_collect", service.NewConfigSpec(), func(*service.ParsedConfig, *service.Resources) (service.BatchOutput, service.BatchPolicy, int, error) {
		h.mu.Lock()
		run := len(h.perRun) - 1
		h.mu.Unlock()
		return &collectOutput{h: h, run: run}, service.BatchPolicy{}, 4, nil
	}); err != nil {
		h.t.Fatal(err)
	}
	if hold != nil {
		if err := env.RegisterBatchOutput("test_hold", service.NewConfigSpec(), func(*service.ParsedConfig, *service.Resources) (service.BatchOutput, service.BatchPolicy, int, error) {
			return hold, service.BatchPolicy{}, hold.maxInFlight, nil
		}); err != nil {
			h.t.Fatal(err)
		}
	}
	return env
}

// closeWatch counts the inputs whose Close has returned: after it, no
// goroutine of that input touches the store.
type closeWatch struct {
	service.BatchInput
	h *harness
}

func (c *closeWatch) Close(ctx context.Context) error {
	err := c.BatchInput.Close(ctx)
	c.h.closed.Add(1)
	return err
}

// collectOutput acknowledges and records every batch it is given.
type collectOutput struct {
	h   *harness
	run int
}

func (o *collectOutput) Connect(context.Context) error { return nil }
func (o *collectOutput) Close(context.Context) error   { return nil }
func (o *collectOutput) WriteBatch(_ context.Context, batch service.MessageBatch) error {
	o.h.checkWitnessFirst(batch)
	o.h.record(o.run, batch)
	return nil
}

// consumer decides the outcome of one batch: nil acks it, an error nacks it.
type consumer func(batch service.MessageBatch) error

// build builds one stream: the input, and either the consumer (through
// AddBatchConsumerFunc) or the hold output.
func (h *harness) build(c simConfig, consume consumer, hold *holdOutput) *service.Stream {
	return h.buildWith(c, consume, hold, "")
}

// buildWith is build with an output YAML (which may use test_collect)
// instead of a consumer when outputYAML is not empty.
func (h *harness) buildWith(c simConfig, consume consumer, hold *holdOutput, outputYAML string) *service.Stream {
	return h.buildYAML(h.inputYAML(c), consume, hold, outputYAML)
}

// buildYAML is buildWith with the input's YAML given whole.
func (h *harness) buildYAML(inputYAML string, consume consumer, hold *holdOutput, outputYAML string) *service.Stream {
	h.t.Helper()
	h.mu.Lock()
	h.perRun = append(h.perRun, map[string]int{})
	run := len(h.perRun) - 1
	h.mu.Unlock()

	b := h.env(hold).NewStreamBuilder()
	b.SetLogger(slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err := b.SetMetricsYAML("test_metrics: {}"); err != nil {
		h.t.Fatal(err)
	}
	if err := b.AddInputYAML(inputYAML); err != nil {
		h.t.Fatalf("input YAML: %v\n%s", err, inputYAML)
	}
	switch {
	case outputYAML != "":
		if err := b.AddOutputYAML(outputYAML); err != nil {
			h.t.Fatalf("output YAML: %v\n%s", err, outputYAML)
		}
	case hold != nil:
		hold.onWrite = func(batch service.MessageBatch) { h.checkWitnessFirst(batch) }
		hold.onAck = func(batch service.MessageBatch) { h.record(run, batch) }
		if err := b.AddOutputYAML("test_hold: {}"); err != nil {
			h.t.Fatal(err)
		}
	default:
		if consume == nil {
			consume = func(service.MessageBatch) error { return nil }
		}
		if err := b.AddBatchConsumerFunc(func(_ context.Context, batch service.MessageBatch) error {
			h.checkWitnessFirst(batch)
			if err := consume(batch); err != nil {
				return err
			}
			h.record(run, batch)
			return nil
		}); err != nil {
			h.t.Fatal(err)
		}
	}
	strm, err := b.Build()
	if err != nil {
		h.t.Fatal(err)
	}
	return strm
}

// runToCompletion builds a stream with exit_when_complete and runs it until
// it ends by itself.
func (h *harness) runToCompletion(c simConfig, consume consumer, hold *holdOutput, timeout time.Duration) {
	h.t.Helper()
	c.exitWhenComplete = true
	h.wait(h.start(h.build(c, consume, hold)), timeout)
}

// running is a stream running in the background.
type running struct {
	strm  *service.Stream
	done  chan error
	began time.Time
}

// start runs strm in the background.
func (h *harness) start(strm *service.Stream) *running {
	r := &running{strm: strm, done: make(chan error, 1), began: time.Now()}
	go func() { r.done <- strm.Run(context.Background()) }()
	h.t.Cleanup(func() {
		select {
		case <-r.done:
		default:
			_ = strm.StopWithin(time.Second)
		}
	})
	return r
}

// wait waits until the stream ends by itself (exit_when_complete).
func (h *harness) wait(r *running, timeout time.Duration) {
	h.t.Helper()
	select {
	case err := <-r.done:
		r.done <- err // for Cleanup
		if err != nil {
			h.t.Fatalf("stream ended with %v\n%s", err, h.progress())
		}
		h.t.Logf("stream completed in %s", time.Since(r.began).Round(time.Millisecond))
	case <-time.After(timeout):
		h.t.Fatalf("stream did not complete within %s\n%s", timeout, h.progress())
	}
}

// finished reports whether the stream has ended.
func (r *running) finished() bool {
	select {
	case err := <-r.done:
		r.done <- err
		return true
	default:
		return false
	}
}

// record counts the events of an acknowledged batch as delivered.
func (h *harness) record(run int, batch service.MessageBatch) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range batch {
		id, _ := m.MetaGet(MetaEventID)
		h.delivered[id]++
		h.perRun[run][id]++
	}
}

// checkWitnessFirst: every message names a witness that was durable before
// the message left the input (invariant 4, Witness first).
func (h *harness) checkWitnessFirst(batch service.MessageBatch) {
	for _, m := range batch {
		wid, _ := m.MetaGet(MetaWitness)
		if !h.rec.durable(wid) {
			id, _ := m.MetaGet(MetaEventID)
			h.rec.violate("event %s left the input with witness %q that is not durable", id, wid)
		}
	}
}

// eventIDs returns the event ids of a batch.
func eventIDs(batch service.MessageBatch) []string {
	out := make([]string, len(batch))
	for i, m := range batch {
		out[i], _ = m.MetaGet(MetaEventID)
	}
	return out
}

// missing returns the generated event ids never acknowledged downstream.
func (h *harness) missing(delivered map[string]int) []string {
	var out []string
	for _, p := range h.parts {
		for pos := int64(1); pos <= h.n; pos++ {
			if id := simulated.EventID(p, pos); delivered[id] == 0 {
				out = append(out, id)
			}
		}
	}
	return out
}

// requireAllDelivered: every generated event id reached the output at least
// once (invariant 9, No loss).
func (h *harness) requireAllDelivered() {
	h.t.Helper()
	h.mu.Lock()
	miss := h.missing(h.delivered)
	total, dups := 0, 0
	for _, c := range h.delivered {
		total += c
		if c > 1 {
			dups += c - 1
		}
	}
	h.mu.Unlock()
	if len(miss) > 0 {
		h.t.Fatalf("%d of %d events never reached the output, e.g. %v", len(miss), int64(len(h.parts))*h.n, miss[:min(10, len(miss))])
	}
	h.t.Logf("all %d events delivered (%d deliveries, %d duplicates)", int64(len(h.parts))*h.n, total, dups)
}

// requireCompleteCheckpoints: every durable checkpoint is at generation > 1,
// watermark N and applied boundary N, not parked, and the promoted chain the
// recorder saw is consistent.
func (h *harness) requireCompleteCheckpoints() {
	h.t.Helper()
	for _, p := range h.parts {
		cp, err := h.st.LoadCheckpoint(context.Background(), store.Key{Scope: h.scope, Partition: p})
		if err != nil {
			h.t.Fatalf("checkpoint of %s: %v", p, err)
		}
		if cp.Generation <= 1 || cp.Watermark != coord.Integer(h.n) || !cp.HasApplied || cp.Applied.Int != h.n || cp.Parked != "" {
			h.t.Fatalf("checkpoint of %s is not complete: generation %d, watermark %s, applied %d (%v), parked %q; want generation > 1, watermark %d",
				p, cp.Generation, cp.Watermark, cp.Applied.Int, cp.HasApplied, cp.Parked, h.n)
		}
	}
	h.rec.requireChain(h.t, h.scope, h.parts, h.n)
}

func (h *harness) progress() string {
	var b strings.Builder
	for _, p := range h.parts {
		cp, err := h.st.LoadCheckpoint(context.Background(), store.Key{Scope: h.scope, Partition: p})
		fmt.Fprintf(&b, "  %s: generation %d watermark %s applied %d parked %q err %v\n", p, cp.Generation, cp.Watermark, cp.Applied.Int, cp.Parked, err)
	}
	h.mu.Lock()
	fmt.Fprintf(&b, "  %d distinct events delivered, %d missing\n", len(h.delivered), len(h.missing(h.delivered)))
	h.mu.Unlock()
	return b.String()
}

// unparkAll plays the operator: it clears the reason of every parked
// partition (the documented recovery) and returns how many it unparked.
func (h *harness) unparkAll() int {
	n := 0
	for _, p := range h.parts {
		k := store.Key{Scope: h.scope, Partition: p}
		cp, err := h.st.LoadCheckpoint(context.Background(), k)
		if err != nil || cp.Parked == "" {
			continue
		}
		if _, err := h.st.SetParked(context.Background(), k, cp.Cursor, cp.Generation, cp.Lease, ""); err == nil {
			n++
		}
	}
	return n
}

// ---------------------------------------------------------------------------
// Recorder: every durable witness and every successful promotion.

type promotionRecord struct {
	p     store.Promotion
	after store.Checkpoint
}

type recorder struct {
	mu         sync.Mutex
	loads      map[store.Key]int            // LoadCheckpoint calls
	witnesses  map[string]reconcile.Witness // by attempt id, once durable
	promotions map[store.Key][]promotionRecord
	created    map[store.Key]store.Checkpoint
	violations []string
}

func newRecorder() *recorder {
	return &recorder{loads: map[store.Key]int{}, witnesses: map[string]reconcile.Witness{}, promotions: map[store.Key][]promotionRecord{}, created: map[store.Key]store.Checkpoint{}}
}

// loadsOf is the number of LoadCheckpoint calls the inputs made for k (a
// parked worker makes one per park check).
func (r *recorder) loadsOf(k store.Key) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.loads[k]
}

func (r *recorder) durable(attempt string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.witnesses[attempt]
	return ok
}

func (r *recorder) violate(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.violations = append(r.violations, fmt.Sprintf(format, args...))
}

func (r *recorder) promotionsOf(k store.Key) []promotionRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.promotions[k])
}

// requireChain checks, per partition, the promotions the inputs made:
// generations 1, 2, 3... each exactly once; each promotion starts from the
// cursor the previous one wrote (Fencing, in page order); each promoted
// witness was durable, was fetched from that cursor at that generation and
// issued exactly that successor (Binding); its events start right after the
// previous applied boundary with no gap (No loss); watermarks never
// decrease (Monotone); a restart promotion restarts right after the durable
// watermark. The chain ends at watermark n.
func (r *recorder) requireChain(t *testing.T, scope string, parts []string, n int64) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.violations) > 0 {
		t.Fatalf("%d invariant violations, first: %s", len(r.violations), strings.Join(r.violations[:min(5, len(r.violations))], "\n"))
	}
	for _, part := range parts {
		k := store.Key{Scope: scope, Partition: part}
		proms := slices.Clone(r.promotions[k])
		sort.SliceStable(proms, func(i, j int) bool { return proms[i].p.FromGeneration < proms[j].p.FromGeneration })
		cur, gen := []byte(nil), uint64(1)
		if c, ok := r.created[k]; ok {
			cur = c.Cursor
		}
		var wm coord.Watermark
		applied, hasApplied := int64(0), false
		for i, pr := range proms {
			p := pr.p
			if i > 0 && p.FromGeneration == proms[i-1].p.FromGeneration {
				if p.WitnessID == proms[i-1].p.WitnessID && bytes.Equal(p.To, proms[i-1].p.To) {
					continue // a repeat resolved as already applied
				}
				t.Fatalf("%s: two promotions from generation %d: %s and %s", part, p.FromGeneration, proms[i-1].p.WitnessID, p.WitnessID)
			}
			if p.FromGeneration != gen || !bytes.Equal(p.FromCursor, cur) {
				t.Fatalf("%s: promotion %d (%s) from generation %d cursor %q, but the chain is at generation %d cursor %q: a skipped or out-of-order promotion",
					part, i, p.WitnessID, p.FromGeneration, p.FromCursor, gen, cur)
			}
			pages := max(p.Pages, 1)
			if pr.after.Generation != gen+pages || !bytes.Equal(pr.after.Cursor, p.To) {
				t.Fatalf("%s: promotion from generation %d returned generation %d cursor %q, want %d %q", part, gen, pr.after.Generation, pr.after.Cursor, gen+pages, p.To)
			}
			if strings.HasPrefix(p.WitnessID, "restart:") {
				next := int64(1)
				if wm.Kind == coord.KindInteger {
					next = wm.Int + 1
				}
				if want := fmt.Sprintf("sim1:%d:0", next); string(p.To) != want {
					t.Fatalf("%s: restart at generation %d to %q, want %q (right after the durable watermark %s)", part, gen, p.To, want, wm)
				}
				if hasApplied && applied != next-1 {
					t.Fatalf("%s: restart at generation %d after watermark %s but applied boundary %d", part, gen, wm, applied)
				}
			} else {
				var ws []reconcile.Witness
				if pages == 1 {
					w, ok := r.witnesses[p.WitnessID]
					if !ok {
						t.Fatalf("%s: promotion from generation %d names witness %s that never became durable", part, gen, p.WitnessID)
					}
					if w.Generation != gen || !bytes.Equal(w.InputCursor, cur) || !bytes.Equal(w.Successor, p.To) {
						t.Fatalf("%s: promotion from generation %d cursor %q to %q uses witness %s of generation %d cursor %q successor %q (binding)",
							part, gen, cur, p.To, w.AttemptID, w.Generation, w.InputCursor, w.Successor)
					}
					ws = []reconcile.Witness{w}
				} else if ws = r.chainOf(k, gen, cur, pages, p.WitnessID, p.To); ws == nil {
					t.Fatalf("%s: promotion of %d pages from generation %d cursor %q to %q (witness %s): no chain of durable witnesses, each fetched from its predecessor's successor, leads there (binding)",
						part, pages, gen, cur, p.To, p.WitnessID)
				}
				for _, w := range ws {
					for j, e := range w.Events {
						want := applied + 1 + int64(j)
						if !hasApplied {
							want = 1 + int64(j)
						}
						if e.Position.Int != want {
							t.Fatalf("%s: promoted witness %s of generation %d has position %d at index %d, want %d: a gap after the applied boundary %d",
								part, w.AttemptID, w.Generation, e.Position.Int, j, want, applied)
						}
					}
					if len(w.Events) > 0 {
						applied, hasApplied = w.Events[len(w.Events)-1].Position.Int, true
					}
				}
			}
			if pr.after.HasApplied != hasApplied || (hasApplied && pr.after.Applied.Int != applied) {
				t.Fatalf("%s: after generation %d the checkpoint's applied boundary is %d (%v), the promoted events end at %d", part, gen, pr.after.Applied.Int, pr.after.HasApplied, applied)
			}
			if !wm.IsZero() {
				if c, err := pr.after.Watermark.Compare(wm); err != nil || c < 0 {
					t.Fatalf("%s: watermark went from %s to %s at generation %d", part, wm, pr.after.Watermark, gen)
				}
			}
			wm = pr.after.Watermark
			cur, gen = p.To, gen+pages
		}
		if wm != coord.Integer(n) || applied != n {
			t.Fatalf("%s: the recorded chain ends at generation %d, watermark %s, applied %d; want %d", part, gen, wm, applied, n)
		}
	}
}

// chainOf finds the durable witnesses a coalesced promotion of pages pages
// from (gen, cur) to "to" stands for: one per generation, each fetched from
// its predecessor's successor, the last one last with successor to. nil
// when there is none. Requires r.mu.
func (r *recorder) chainOf(k store.Key, gen uint64, cur []byte, pages uint64, last string, to []byte) []reconcile.Witness {
	for _, w := range r.witnesses {
		if w.Scope != k.Scope || w.Partition != k.Partition || w.Generation != gen || !bytes.Equal(w.InputCursor, cur) {
			continue
		}
		if pages == 1 {
			if w.AttemptID == last && bytes.Equal(w.Successor, to) {
				return []reconcile.Witness{w}
			}
			continue
		}
		if rest := r.chainOf(k, gen+1, w.Successor, pages-1, last, to); rest != nil {
			return append([]reconcile.Witness{w}, rest...)
		}
	}
	return nil
}

// spyStore records what its Store made durable.
type spyStore struct {
	store.Store
	rec *recorder
}

func (s *spyStore) CreateCheckpoint(ctx context.Context, c store.Checkpoint) (store.Checkpoint, error) {
	cp, err := s.Store.CreateCheckpoint(ctx, c)
	if err == nil {
		s.rec.mu.Lock()
		s.rec.created[c.Key] = cp
		s.rec.mu.Unlock()
	}
	return cp, err
}

func (s *spyStore) LoadCheckpoint(ctx context.Context, k store.Key) (store.Checkpoint, error) {
	s.rec.mu.Lock()
	s.rec.loads[k]++
	s.rec.mu.Unlock()
	return s.Store.LoadCheckpoint(ctx, k)
}

func (s *spyStore) PutWitness(ctx context.Context, w reconcile.Witness) error {
	err := s.Store.PutWitness(ctx, w)
	if err == nil {
		s.rec.mu.Lock()
		s.rec.witnesses[w.AttemptID] = w.Clone()
		s.rec.mu.Unlock()
	}
	return err
}

func (s *spyStore) Witnesses(ctx context.Context, k store.Key, generation uint64) ([]reconcile.Witness, error) {
	ws, err := s.Store.Witnesses(ctx, k, generation)
	s.loaded(ws, err)
	return ws, err
}

func (s *spyStore) WitnessesFrom(ctx context.Context, k store.Key, fromGeneration uint64) ([]reconcile.Witness, error) {
	ws, err := s.Store.WitnessesFrom(ctx, k, fromGeneration)
	s.loaded(ws, err)
	return ws, err
}

// loaded records witnesses read back from the store: an earlier process
// made them durable.
func (s *spyStore) loaded(ws []reconcile.Witness, err error) {
	if err != nil {
		return
	}
	s.rec.mu.Lock()
	defer s.rec.mu.Unlock()
	for _, w := range ws {
		if _, ok := s.rec.witnesses[w.AttemptID]; !ok {
			s.rec.witnesses[w.AttemptID] = w.Clone()
		}
	}
}

func (s *spyStore) Promote(ctx context.Context, p store.Promotion) (store.Checkpoint, error) {
	cp, err := s.Store.Promote(ctx, p)
	if err == nil {
		s.rec.mu.Lock()
		s.rec.promotions[p.Key] = append(s.rec.promotions[p.Key], promotionRecord{p: p, after: cp})
		s.rec.mu.Unlock()
	}
	return cp, err
}

// ---------------------------------------------------------------------------
// Metrics the test can read.

type testMetrics struct {
	mu     sync.Mutex
	counts map[string]int64 // "name" or "name{v1,v2}" -> value
}

func newTestMetrics() *testMetrics { return &testMetrics{counts: map[string]int64{}} }

func metricKey(name string, keys, values []string) string {
	var labels []string
	for i, k := range keys {
		// Benthos adds label and path labels; the test reads only the
		// component's own.
		if k == "label" || k == "path" || i >= len(values) {
			continue
		}
		labels = append(labels, values[i])
	}
	if len(labels) == 0 {
		return name
	}
	return name + "{" + strings.Join(labels, ",") + "}"
}

// get returns the sum of a metric over the label sets that start with key.
func (m *testMetrics) get(key string) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var sum int64
	for k, v := range m.counts {
		if k == key || strings.HasPrefix(k, key+"{") {
			sum += v
		}
	}
	return sum
}

type metricFunc func(int64)

func (f metricFunc) Incr(n int64)   { f(n) }
func (f metricFunc) Timing(n int64) {}
func (f metricFunc) Set(n int64)    {}

func (m *testMetrics) NewCounterCtor(name string, keys ...string) service.MetricsExporterCounterCtor {
	return func(values ...string) service.MetricsExporterCounter {
		k := metricKey(name, keys, values)
		return metricFunc(func(n int64) {
			m.mu.Lock()
			m.counts[k] += n
			m.mu.Unlock()
		})
	}
}

func (m *testMetrics) NewTimerCtor(string, ...string) service.MetricsExporterTimerCtor {
	return func(...string) service.MetricsExporterTimer { return metricFunc(nil) }
}

func (m *testMetrics) NewGaugeCtor(string, ...string) service.MetricsExporterGaugeCtor {
	return func(...string) service.MetricsExporterGauge { return metricFunc(nil) }
}

func (m *testMetrics) Close(context.Context) error { return nil }

// ---------------------------------------------------------------------------
// holdOutput: writes wait until the test releases them.

type heldWrite struct {
	seq       int
	partition string
	batch     service.MessageBatch
	done      chan error
}

// holdOutput is a BatchOutput with maxInFlight concurrent writes. Every
// write waits in pending until release picks it. With hang set, writes
// after the first ackFirst are never released (a hung output).
type holdOutput struct {
	maxInFlight int
	onWrite     func(service.MessageBatch)
	onAck       func(service.MessageBatch)

	mu       sync.Mutex
	pending  []*heldWrite
	seq      int
	released []*heldWrite // in ack order
	stopped  chan struct{}
}

func newHoldOutput(maxInFlight int) *holdOutput {
	o := &holdOutput{maxInFlight: maxInFlight, stopped: make(chan struct{})}
	return o
}

func (o *holdOutput) Connect(context.Context) error { return nil }
func (o *holdOutput) Close(context.Context) error   { return nil }

// WriteBatch ignores its context on purpose: a held write ends only when
// the test releases it (or the test ends), like an output that hangs.
func (o *holdOutput) WriteBatch(_ context.Context, batch service.MessageBatch) error {
	if o.onWrite != nil {
		o.onWrite(batch)
	}
	o.mu.Lock()
	o.seq++
	w := &heldWrite{seq: o.seq, batch: batch.Copy(), done: make(chan error, 1)}
	w.partition, _ = batch[0].MetaGet(MetaPartition)
	o.pending = append(o.pending, w)
	o.mu.Unlock()
	select {
	case err := <-w.done:
		if err == nil && o.onAck != nil {
			o.onAck(w.batch)
		}
		return err
	case <-o.stopped:
		return fmt.Errorf("test over")
	}
}

// stop ends every held write (with an error) at the end of the test.
func (o *holdOutput) stop() { close(o.stopped) }

// waitPending waits until at least n writes are pending or d passes, and
// returns the number pending.
func (o *holdOutput) waitPending(n int, d time.Duration) int {
	deadline := time.Now().Add(d)
	o.mu.Lock()
	defer o.mu.Unlock()
	for len(o.pending) < n && time.Now().Before(deadline) {
		o.mu.Unlock()
		time.Sleep(time.Millisecond)
		o.mu.Lock()
	}
	return len(o.pending)
}

// pendingCount is the number of writes waiting for release.
func (o *holdOutput) pendingCount() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.pending)
}

// releaseAll acks (err nil) or nacks every pending write, in the order
// order picks, with a short pause between two so that the input sees them
// in that order.
func (o *holdOutput) releaseAll(order func([]*heldWrite), outcome func(*heldWrite) error) int {
	o.mu.Lock()
	ws := o.pending
	o.pending = nil
	o.mu.Unlock()
	order(ws)
	for _, w := range ws {
		err := outcome(w)
		o.mu.Lock()
		if err == nil {
			o.released = append(o.released, w)
		}
		o.mu.Unlock()
		w.done <- err
		time.Sleep(200 * time.Microsecond)
	}
	return len(ws)
}

// inversions counts pairs of acknowledged batches of one partition whose
// acks came in the opposite order of their writes.
func (o *holdOutput) inversions() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for i, a := range o.released {
		for _, b := range o.released[i+1:] {
			if a.seq > b.seq && a.partition == b.partition {
				n++
			}
		}
	}
	return n
}

// ---------------------------------------------------------------------------

// nackFirst returns a consumer that nacks the first delivery of every k-th
// batch (counted per harness) and acks everything else.
func nackFirst(k int) consumer {
	var mu sync.Mutex
	seen := map[string]bool{}
	count := 0
	return func(batch service.MessageBatch) error {
		mu.Lock()
		defer mu.Unlock()
		key := strings.Join(eventIDs(batch), ",")
		count++
		if count%k == 0 && !seen[key] {
			seen[key] = true
			return fmt.Errorf("injected nack of %d events", len(batch))
		}
		return nil
	}
}
