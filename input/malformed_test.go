package input

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/e2etest"
	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/provider/simulated"
)

// flakyPages is an HTTP event source on 127.0.0.1 (httptest) whose
// partitions hold dense events 1..n with the simulated provider's ids, and
// whose chosen pages answer their first requests with a 200 that cannot be
// read (a truncated JSON body, an HTML page a proxy sends with status 200)
// before answering well.
type flakyPages struct {
	n, page int
	// bad lists, per "partition/after", the bodies of its first answers.
	bad map[string][]string

	mu       sync.Mutex
	requests map[string]int // per "partition/after"
	served   int            // malformed bodies served
}

type flakyEvent struct {
	ID  string `json:"id"`
	Pos int64  `json:"pos"`
	V   string `json:"v"`
}

func (f *flakyPages) event(part string, pos int64) flakyEvent {
	return flakyEvent{ID: simulated.EventID(part, pos), Pos: pos, V: fmt.Sprintf("value of %s at %d", part, pos)}
}

func (f *flakyPages) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	part := strings.TrimPrefix(r.URL.Path, "/events/")
	after, err := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
	if err != nil || after < 0 {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	k := fmt.Sprintf("%s/%d", part, after)
	f.mu.Lock()
	i := f.requests[k]
	f.requests[k]++
	var bad string
	if i < len(f.bad[k]) {
		bad = f.bad[k][i]
		f.served++
	}
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if bad != "" {
		_, _ = w.Write([]byte(bad))
		return
	}
	evs := []flakyEvent{}
	for pos := after + 1; pos <= int64(f.n) && len(evs) < f.page; pos++ {
		evs = append(evs, f.event(part, pos))
	}
	top := after
	if len(evs) > 0 {
		top = evs[len(evs)-1].Pos
	}
	b, _ := json.Marshal(map[string]any{"events": evs, "next": strconv.FormatInt(top, 10), "through": top})
	_, _ = w.Write(b)
}

func (f *flakyPages) requestsOf(k string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests[k]
}

// TestStreamMalformedAnswersRetriedThenGood: the http provider against a
// source whose first answers to some pages are a truncated JSON body or an
// HTML page with status 200, then good. Each malformed answer is counted,
// logged at warn with its partition and fetched again on the same cursor;
// the good answer is classified as usual: no partition parks, every event
// reaches the output exactly as the server's good answer had it and as
// its promoted witness recorded it (id, position, payload digest).
func TestStreamMalformedAnswersRetriedThenGood(t *testing.T) {
	const n, page = 60, 10
	truncated := `{"events":[{"id":"p0-1","pos":1,"v":"val`
	html := "<html><body><h1>502 Bad Gateway</h1></body></html>"
	src := &flakyPages{n: n, page: page, requests: map[string]int{}, bad: map[string][]string{
		"p0/0":  {truncated},       // the very first page
		"p1/20": {truncated, html}, // a page in the middle, fetched ahead: as many as fetch_retries allows
		"p2/50": {html, html},      // the last page
		"p2/10": {html},
	}}
	srv := httptest.NewServer(src)
	t.Cleanup(srv.Close)
	require.True(t, strings.HasPrefix(srv.Listener.Addr().String(), "127.0.0.1:"), "the source listens on the loopback: %s", srv.Listener.Addr())

	forEachBackend(t, func(t *testing.T, b backend) {
		src.mu.Lock()
		src.requests, src.served = map[string]int{}, 0
		src.mu.Unlock()
		h := newHarness(t, b, threeParts, n)
		type got struct {
			pos     string
			payload []byte
		}
		var mu sync.Mutex
		delivered := map[string][]got{}
		consume := func(batch service.MessageBatch) error {
			mu.Lock()
			defer mu.Unlock()
			for _, m := range batch {
				id, _ := m.MetaGet(MetaEventID)
				pos, _ := m.MetaGet(MetaPosition)
				payload, err := m.AsBytes()
				require.NoError(t, err)
				delivered[id] = append(delivered[id], got{pos, payload})
			}
			return nil
		}
		yaml := fmt.Sprintf(`paginated_partitions:
  scope: %s
  partitions: [ %s ]
  exit_when_complete: true
  poll_interval: 5ms
  park_check_interval: 20ms
  store_backoff: 10ms
  fetch_retries: 2
  fetch_backoff: 1ms
  checkpoint:
%s
  http:
    url: '%s/events/${! @partition }?after=${! if @cursor == "" { "0" } else { @cursor } }'
    max_retries: 3
    backoff: { initial_interval: 1ms, max_interval: 5ms }
    events: root = this.events
    event_position: root = this.pos
    successor: root = this.next
    complete_through: root = this.through
    contract:
      empty_page: final_through_watermark
      positions: dense
      watermark_covers_positions: true
      finality: source
      recovery: park
`, h.scope, strings.Join(h.parts, ", "), indent(h.ckYAML, "    "), srv.URL)
		r := h.start(h.buildYAML(yaml, consume, nil, ""))
		e2etest.WaitUntil(t, streamTimeout, "the stream to complete", r.finished, h.noParks)
		h.wait(r, streamTimeout)

		h.requireAllDelivered()
		h.requireCompleteCheckpoints() // none parked, each at watermark n
		assert.Zero(t, h.metrics.get("tidemark_parks"))
		src.mu.Lock()
		served := src.served
		src.mu.Unlock()
		want := 0
		for k, bodies := range src.bad {
			want += len(bodies)
			assert.Equal(t, len(bodies)+1, src.requestsOf(k), "%s: every malformed answer was followed by a request of the same cursor, and the good answer was kept", k)
		}
		require.Equal(t, want, served, "every malformed body was served")
		assert.Equal(t, int64(served), h.metrics.get("tidemark_malformed_responses"), "every malformed answer is counted")
		for _, part := range h.parts {
			line := fmt.Sprintf("Partition %s: malformed answer ", part)
			wantLines := 0
			for k, bodies := range src.bad {
				if strings.HasPrefix(k, part+"/") {
					wantLines += len(bodies)
				}
			}
			assert.Equal(t, wantLines, countWarn(h.logs.String(), line), "%s: one warn line per retry", part)
		}

		// Delivered exactly as the good answers had them, and as their
		// promoted witnesses recorded them.
		mu.Lock()
		defer mu.Unlock()
		for _, part := range h.parts {
			for _, pr := range h.rec.promotionsOf(store.Key{Scope: h.scope, Partition: part}) {
				w, ok := h.witnessOf(pr.p.WitnessID)
				require.True(t, ok, "promoted witness %s is durable", pr.p.WitnessID)
				for _, ew := range w.Events {
					pos := ew.Position.Int
					want := src.event(part, pos)
					gs := delivered[want.ID]
					require.NotEmpty(t, gs, "event %s delivered", want.ID)
					require.Equal(t, reconcile.HashID(want.ID), ew.IDHash, "witness of %s records its id", want.ID)
					for _, g := range gs {
						assert.Equal(t, strconv.FormatInt(pos, 10), g.pos, "%s delivered at its position", want.ID)
						var ev flakyEvent
						require.NoError(t, json.Unmarshal(g.payload, &ev), "%s: payload %q", want.ID, g.payload)
						assert.Equal(t, want, ev, "%s delivered as the good answer had it", want.ID)
						assert.Equal(t, ew.Digest, reconcile.HashPayload(g.payload), "%s delivered as its witness recorded it", want.ID)
					}
				}
			}
		}
	})
}

// noParks is a wait guard: it fails the wait as soon as a partition of
// the harness is parked.
func (h *harness) noParks() error {
	for _, p := range h.parts {
		cp, err := h.st.LoadCheckpoint(context.Background(), store.Key{Scope: h.scope, Partition: p})
		if err == nil && cp.Parked != "" {
			return fmt.Errorf("partition %s parked: %s", p, cp.Parked)
		}
	}
	return nil
}

// witnessOf returns the durable witness with attempt id id.
func (h *harness) witnessOf(id string) (reconcile.Witness, bool) {
	h.rec.mu.Lock()
	defer h.rec.mu.Unlock()
	w, ok := h.rec.witnesses[id]
	return w, ok
}

// TestStreamMalformedBackoffInterruptedByShutdown: a partition whose
// answers are malformed waits fetch_backoff (here an hour) before it fetches
// its page again; stopping the stream meanwhile interrupts that wait: the
// stream stops well within the test's patience, before any retry.
func TestStreamMalformedBackoffInterruptedByShutdown(t *testing.T) {
	h := newHarness(t, memoryBackend, []string{"p0"}, 20)
	yaml := strings.Replace(h.inputYAML(simConfig{faults: "malformed: [ p0 ]"}), "fetch_backoff: 1ms", "fetch_backoff: 1h", 1)
	require.Contains(t, yaml, "fetch_backoff: 1h")
	r := h.start(h.buildYAML(yaml, nil, nil, ""))
	e2etest.WaitFor(t, e2etest.Patience, "the first malformed answer and its back-off", func() (bool, string) {
		n := countWarn(h.logs.String(), "Partition p0: malformed answer 1 of at most 3")
		return n == 1, fmt.Sprintf("%d warn lines", n)
	})
	require.NoError(t, r.strm.StopWithin(e2etest.Patience), "the stream stops without waiting out the back-off")
	e2etest.WaitUntil(t, e2etest.Patience, "the stream's Run to return", r.finished)
	assert.Equal(t, int64(1), h.metrics.get("tidemark_malformed_responses"), "no retry before the stop")
	assert.Zero(t, h.metrics.get("tidemark_parks"))
}
