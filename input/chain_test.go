package input

// Tests of the input's driving of a partition's chain through the real
// input (New, Connect, ReadBatch, acks) against a scripted provider and the
// in-memory store: what crosses the input's ports (the requests the
// provider sees, the boundary a restart asks for, what a restart after
// completion fetches, the configured restart bound, exit_when_complete)
// and the seeds' reasoned example end to end. The chain's own decisions
// are pinned by the machine's golden scenarios (internal/chain/testdata),
// not again here. docs/design.md (#completion-and-promotion,
// #retry-classification) states the rules.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/chain"
	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/e2etest"
	"github.com/tidemark/tidemark/internal/runstatus"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/store/memstore"
	"github.com/tidemark/tidemark/provider"
	"github.com/tidemark/tidemark/provider/simulated"
)

// script is a provider whose answers are scripted per cursor: the n-th
// fetch of a cursor returns answers[cursor][min(n, len-1)]. It records
// every request.
type script struct {
	contract provider.Contract
	restart  []byte // RestartCursor's answer

	mu         sync.Mutex
	answers    map[string][]answer
	fetches    map[string]int
	requests   []provider.Request
	boundaries []provider.Boundary
}

type answer struct {
	resp provider.Response
	err  error
	// gate, when set, holds this answer back (the previous one is given
	// again) until it reports true: an answer that must come only once the
	// store reaches a state, whatever the machine's timing.
	gate func() bool
}

func newScript(c provider.Contract, answers map[string][]answer) *script {
	return &script{contract: c, answers: answers, fetches: map[string]int{}}
}

func (s *script) Fetch(_ context.Context, req provider.Request) (provider.Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, req)
	as, ok := s.answers[string(req.Cursor)]
	if !ok {
		return provider.Response{}, &provider.MalformedError{Partition: req.Partition, Reason: fmt.Sprintf("the script has no answer for cursor %q", req.Cursor)}
	}
	n := s.fetches[string(req.Cursor)]
	a := as[min(n, len(as)-1)]
	if a.gate != nil && n > 0 && !a.gate() {
		a = as[min(n, len(as)-1)-1]
		return a.resp, a.err
	}
	s.fetches[string(req.Cursor)]++
	return a.resp, a.err
}

func (s *script) Contract() provider.Contract { return s.contract }

func (s *script) Close(context.Context) error { return nil }

func (s *script) RestartCursor(_ context.Context, b provider.Boundary) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.boundaries = append(s.boundaries, b)
	return s.restart, nil
}

func (s *script) boundariesSeen() []provider.Boundary {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]provider.Boundary(nil), s.boundaries...)
}

func (s *script) fetchesOf(cursor string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fetches[cursor]
}

func (s *script) requestsSeen() []provider.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]provider.Request(nil), s.requests...)
}

func resp(successor string, evs ...provider.Event) provider.Response {
	return provider.Response{Events: evs, Successor: []byte(successor)}
}

func event(id string, pos int64) provider.Event {
	return provider.Event{ID: id, Position: provider.IntPosition(pos), Payload: []byte(`{"id":"` + id + `"}`)}
}

// chainRun is one input over a script; reader goroutine acks per the
// policy and counts deliveries.
type chainRun struct {
	t     *testing.T
	in    service.BatchInput
	st    store.Store
	key   store.Key
	ended chan error

	mu        sync.Mutex
	delivered map[string]int // acknowledged deliveries by event id
}

// nackOnce, when it returns true for a message, nacks its batch (once per
// event id and run).
type ackPolicy func(id string) (nack bool)

func startChain(t *testing.T, st store.Store, scope string, prov provider.Provider, exit bool, policy ackPolicy) *chainRun {
	t.Helper()
	return startChainWith(t, st, scope, prov, exit, policy, nil)
}

// startChainWith is startChain with a change to the input's Config.
func startChainWith(t *testing.T, st store.Store, scope string, prov provider.Provider, exit bool, policy ackPolicy, change func(*Config)) *chainRun {
	t.Helper()
	cfg := Config{
		Scope: scope, Partitions: []string{"p"},
		Config: chain.Config{
			MaxPagesInFlight: 4, MaxBatchSize: 1, CoalescePromotions: true,
			PollInterval: 2 * time.Millisecond, ParkCheckInterval: 5 * time.Millisecond,
			StoreBackoff: 5 * time.Millisecond, FetchRetries: 0, FetchBackoff: time.Millisecond,
			ExitWhenComplete: exit,
		},
	}
	if change != nil {
		change(&cfg)
	}
	in, err := New(cfg, prov, st, nil, service.MockResources())
	require.NoError(t, err)
	require.NoError(t, in.Connect(t.Context()))
	r := &chainRun{t: t, in: in, st: st, key: store.Key{Scope: scope, Partition: "p"}, ended: make(chan error, 1), delivered: map[string]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for {
			b, ack, err := in.ReadBatch(ctx)
			if err != nil {
				r.ended <- err
				return
			}
			var nack error
			for _, m := range b {
				id, _ := m.MetaGet(MetaEventID)
				if policy != nil && policy(id) {
					nack = errors.New("injected delivery failure")
				}
			}
			if nack == nil {
				r.mu.Lock()
				for _, m := range b {
					id, _ := m.MetaGet(MetaEventID)
					r.delivered[id]++
				}
				r.mu.Unlock()
			}
			_ = ack(ctx, nack)
		}
	}()
	t.Cleanup(func() {
		cancel()
		cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer ccancel()
		_ = in.Close(cctx)
	})
	return r
}

func (r *chainRun) deliveries() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int, len(r.delivered))
	for k, v := range r.delivered {
		out[k] = v
	}
	return out
}

func (r *chainRun) checkpoint() store.Checkpoint {
	cp, err := r.st.LoadCheckpoint(context.Background(), r.key)
	if err != nil {
		return store.Checkpoint{}
	}
	return cp
}

// waitEnd waits for the input to end (exit_when_complete).
func (r *chainRun) waitEnd() {
	r.t.Helper()
	select {
	case err := <-r.ended:
		require.ErrorIs(r.t, err, service.ErrEndOfInput)
	case <-time.After(e2etest.Patience):
		cp := r.checkpoint()
		r.t.Fatalf("the input did not end; checkpoint generation %d complete %v parked %q", cp.Generation, cp.Complete, cp.Parked)
	}
}

var chainScope int

func newChainScope(t *testing.T) string {
	chainScope++
	return fmt.Sprintf("chain%d-%s", chainScope, t.Name())
}

// Under missing_successor: end_of_traversal, the last page's promotion
// completes the partition durably: the input ends, and a restarted input
// reads nothing at all.
func TestFiniteTraversalCompletesDurably(t *testing.T) {
	c := provider.Contract{EmptyPage: provider.EmptyNoEvidence, OrderedPositions: true, MissingSuccessor: provider.MissingSuccessorEndsTraversal, Recovery: provider.RecoveryPark}
	answers := map[string][]answer{
		"":   {{resp: resp("c1", event("e1", 1), event("e2", 2))}},
		"c1": {{resp: resp("", event("e3", 3))}},
	}
	st := memstore.New()
	scope := newChainScope(t)
	prov := newScript(c, answers)
	r := startChain(t, st, scope, prov, true, nil)
	r.waitEnd()
	assert.Equal(t, map[string]int{"e1": 1, "e2": 1, "e3": 1}, r.deliveries())
	cp := r.checkpoint()
	require.True(t, cp.Complete, "completion is stored with the checkpoint")
	assert.Equal(t, []byte("c1"), cp.Cursor, "a complete partition keeps its last cursor, not the start")
	assert.Equal(t, coord.IntPosition(3), cp.Applied)

	again := newScript(c, answers)
	r2 := startChain(t, st, scope, again, true, nil)
	r2.waitEnd()
	assert.Empty(t, again.requestsSeen(), "a restart after completion fetches nothing")
	assert.Empty(t, r2.deliveries(), "and re-delivers nothing")
}

// A page fetched ahead is requested with the watermark the checkpoint will
// hold when its cursor is durable, not the one durable at the time of the
// fetch: every fetch of one (cursor, generation) sees one watermark.
func TestFetchAheadCarriesTheWatermarkOfItsGeneration(t *testing.T) {
	c := provider.Contract{EmptyPage: provider.EmptyFinalThroughWatermark, OrderedPositions: true, DensePositions: true, WatermarkCoversPositions: true, MissingSuccessor: provider.MissingSuccessorEndsTraversal, Recovery: provider.RecoveryPark, Finality: provider.FinalitySource}
	answers := map[string][]answer{}
	want := map[string]provider.Watermark{"": {}}
	for i := int64(0); i < 6; i++ {
		cur, next := fmt.Sprintf("c%d", i), fmt.Sprintf("c%d", i+1)
		if i == 0 {
			cur = ""
		}
		if i == 5 {
			next = ""
		}
		r := resp(next, event(fmt.Sprintf("e%d", 2*i+1), 2*i+1), event(fmt.Sprintf("e%d", 2*i+2), 2*i+2))
		r.CompleteThrough = provider.IntegerWatermark(2*i + 2)
		answers[cur] = []answer{{resp: r}}
		if next != "" {
			want[next] = provider.IntegerWatermark(2*i + 2)
		}
	}
	prov := newScript(c, answers)
	r := startChain(t, memstore.New(), newChainScope(t), prov, true, nil)
	r.waitEnd()
	for _, req := range prov.requestsSeen() {
		assert.Equal(t, want[string(req.Cursor)], req.Watermark, "fetch of cursor %q", req.Cursor)
	}
	assert.Len(t, r.deliveries(), 12)
}

// The seeds' reasoned example, end to end: C0 first answers 501, 502, 503
// (successor N7); 501 is delivered, 502's delivery fails; the retry of C0
// answers 501, 503 (successor N8) with a complete-through watermark of 500,
// which covers nothing above 500. The partition parks: N8 is never
// promoted, so 502 is never skipped.
func TestOmittedEventRetryWithLaggingWatermarkParks(t *testing.T) {
	c := provider.Contract{EmptyPage: provider.EmptyFinalThroughWatermark, OrderedPositions: true, DensePositions: true, WatermarkCoversPositions: true, Recovery: provider.RecoveryPark, Finality: provider.FinalitySource}
	retry := resp("N8", event("e501", 501), event("e503", 503))
	retry.CompleteThrough = provider.IntegerWatermark(500)
	first := resp("N7", event("e501", 501), event("e502", 502), event("e503", 503))
	st := memstore.New()
	scope := newChainScope(t)
	key := store.Key{Scope: scope, Partition: "p"}
	// The checkpoint holds C0 with 500 applied.
	_, err := st.CreateCheckpoint(context.Background(), store.Checkpoint{Key: key, Cursor: []byte("C0"), Generation: 1, Epoch: 1, Applied: coord.IntPosition(500), HasApplied: true, Watermark: coord.Integer(500)})
	require.NoError(t, err)
	prov := newScript(c, map[string][]answer{
		"C0": {{resp: first}, {resp: retry}},
		"N7": {{resp: resp("N7")}},
		"N8": {{resp: resp("N8")}},
	})
	var once sync.Once
	r := startChain(t, st, scope, prov, false, func(id string) bool {
		nack := false
		if id == "e502" {
			once.Do(func() { nack = true })
		}
		return nack
	})
	e2etest.WaitFor(t, e2etest.Patience, "the partition parked", func() (bool, string) {
		cp := r.checkpoint()
		return cp.Parked != "", fmt.Sprintf("generation %d cursor %q", cp.Generation, cp.Cursor)
	})
	cp := r.checkpoint()
	assert.Contains(t, cp.Parked, "showed position 502")
	assert.Equal(t, []byte("C0"), cp.Cursor, "neither N7 nor N8 was promoted")
	assert.Equal(t, uint64(1), cp.Generation)
}

// With exclusive_boundary and a restart boundary that replays events at or
// below the applied boundary, every replay diverges (a permanent hole). The
// restarts back off and, after max_restarts (the default, or the
// configured bound) without progress, the partition parks with a reason
// saying the restarts never got past the boundary instead of looping for
// ever.
func TestRestartLoopParksAtTheConfiguredBound(t *testing.T) {
	for _, tc := range []struct {
		name        string
		maxRestarts int
		want        int
	}{
		{"default", 0, chain.MaxRestarts},
		{"configured", 3, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := provider.Contract{EmptyPage: provider.EmptyNoEvidence, OrderedPositions: true, DensePositions: true, ExclusiveBoundary: true, Recovery: provider.RecoveryRestartFromBoundary}
			st := memstore.New()
			scope := newChainScope(t)
			key := store.Key{Scope: scope, Partition: "p"}
			_, err := st.CreateCheckpoint(context.Background(), store.Checkpoint{Key: key, Cursor: []byte("C5"), Generation: 1, Epoch: 1, Applied: coord.IntPosition(5), HasApplied: true})
			require.NoError(t, err)
			// C5 first answers with a conflicting boundary event; the restart
			// cursor "" replays from 1, which the exclusive boundary forbids.
			prov := newScript(c, map[string][]answer{
				"C5": {{resp: resp("C9", event("e5", 5), event("e6", 6))}},
				"":   {{resp: resp("C3", event("e1", 1), event("e2", 2))}},
			})
			prov.restart = nil
			r := startChainWith(t, st, scope, prov, false, nil, func(cfg *Config) { cfg.MaxRestarts = tc.maxRestarts })
			e2etest.WaitFor(t, e2etest.Patience, "the partition parked", func() (bool, string) {
				cp := r.checkpoint()
				return cp.Parked != "", fmt.Sprintf("generation %d, %d restarts fetched", cp.Generation, prov.fetchesOf(""))
			})
			cp := r.checkpoint()
			assert.Contains(t, cp.Parked, fmt.Sprintf("%d restarts from a stable boundary never got the partition past where the first of them found it (applied boundary 5, complete-through none; max_restarts %d)", tc.want, tc.want))
			assert.Equal(t, tc.want, prov.fetchesOf(""), "one fetch per restart, and no more after parking")
			assert.Empty(t, r.deliveries(), "nothing diverging was emitted")
		})
	}
}

// With exit_when_complete, a parked partition ends the input after
// exit_when_parked_grace, and the run is recorded as failed with the park
// reason (the binary exits non-zero with it).
func TestExitWhenCompleteEndsWithParkedPartition(t *testing.T) {
	c := provider.Contract{EmptyPage: provider.EmptyNoEvidence, Recovery: provider.RecoveryPark}
	st := memstore.New()
	scope := newChainScope(t)
	prov := newScript(c, map[string][]answer{
		"": {{err: fmt.Errorf("%w: 403 forbidden", provider.ErrPermanent)}},
	})
	r := startChainWith(t, st, scope, prov, true, nil, func(cfg *Config) { cfg.ExitWhenParkedGrace = 20 * time.Millisecond })
	select {
	case err := <-r.ended:
		require.ErrorIs(t, err, service.ErrEndOfInput)
	case <-time.After(e2etest.Patience):
		t.Fatal("the input did not end with its only partition parked")
	}
	cp := r.checkpoint()
	require.NotEmpty(t, cp.Parked)
	require.Contains(t, runstatus.Failures(), fmt.Sprintf("partition p of scope %s is parked: %s", scope, cp.Parked))
}

// With a provider whose empty pages prove nothing (empty_page: no_evidence,
// the Stripe and Okta examples) but whose has_more is mapped,
// exit_when_complete ends the input once every event was delivered and an
// empty page says has_more: false, whether that page has no successor
// ("nosucc") or loops to its own cursor ("loop").
func TestExitWhenCompleteEndsOnAStatedHasMoreFalse(t *testing.T) {
	type page struct {
		Events []map[string]any `json:"events"`
		Next   *string          `json:"next,omitempty"`
		More   bool             `json:"more"`
	}
	str := func(s string) *string { return &s }
	ev := func(p string, pos int) map[string]any {
		return map[string]any{"id": simulated.EventID(p, int64(pos)), "position": pos}
	}
	// Partition "nosucc" ends with an empty page without a successor;
	// "loop" ends with an empty page whose successor is its own cursor.
	pages := map[string]map[string]page{
		"nosucc": {
			"":   {Events: []map[string]any{ev("nosucc", 1), ev("nosucc", 2)}, Next: str("c2"), More: true},
			"c2": {Events: []map[string]any{ev("nosucc", 3)}, Next: str("c3"), More: true},
			"c3": {More: false},
		},
		"loop": {
			"":   {Events: []map[string]any{ev("loop", 1), ev("loop", 2)}, Next: str("c2"), More: true},
			"c2": {Events: []map[string]any{ev("loop", 3)}, Next: str("c3"), More: true},
			"c3": {Next: str("c3"), More: false},
		},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pg, ok := pages[strings.TrimPrefix(r.URL.Path, "/")][r.URL.Query().Get("cursor")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		if pg.Events == nil {
			pg.Events = []map[string]any{}
		}
		_ = json.NewEncoder(w).Encode(pg)
	}))
	defer srv.Close()
	for _, part := range []string{"nosucc", "loop"} {
		t.Run(part, func(t *testing.T) {
			h := newHarness(t, memoryBackend, []string{part}, 3)
			in := fmt.Sprintf(`
paginated_partitions:
  scope: %s
  partitions: [ %s ]
  exit_when_complete: true
  poll_interval: 5ms
  checkpoint:
    backend: memory
  http:
    url: '%s/${! @partition }?cursor=${! @cursor.escape_url_query() }'
    events: root = this.events
    event_id: root = this.id
    event_position: root = this.position
    successor: root = this.next | deleted()
    has_more: root = this.more
    contract:
      empty_page: no_evidence
      positions: ordered
`, h.scope, part, srv.URL)
			r := h.start(h.buildYAML(in, nil, nil, ""))
			e2etest.WaitUntil(t, e2etest.Patience, "every event delivered", func() bool {
				h.mu.Lock()
				defer h.mu.Unlock()
				return len(h.missing(h.delivered)) == 0
			})
			select {
			case <-r.done:
				r.done <- nil
			case <-time.After(e2etest.Patience):
				cp, _ := h.st.LoadCheckpoint(context.Background(), store.Key{Scope: h.scope, Partition: part})
				t.Fatalf("every event delivered and promoted (checkpoint generation %d cursor %q applied %d), the provider said has_more: false, yet exit_when_complete did not end the input",
					cp.Generation, cp.Cursor, cp.Applied.Int)
			}
		})
	}
}

// TestHasMoreTrueWithoutSuccessorParksNeverCompletes: the http provider
// against a finite list (missing_successor: end_of_traversal, empty_page:
// end_of_data, exit_when_complete) whose second page says has_more: true
// but carries no successor, on every answer. A page without successor
// would end the traversal and mark the partition complete; its own
// has_more says more pages follow, so it is malformed: fetched again
// (fetch_retries 1: two requests), then the partition parks with a reason
// naming the partition and the contradiction. The first page is delivered
// and promoted; the torn page's event is never emitted; the checkpoint is
// never complete, and the input does not end as if the list were done
// (exit_when_parked_grace 0s: a park alone never ends it).
func TestHasMoreTrueWithoutSuccessorParksNeverCompletes(t *testing.T) {
	type page struct {
		Events []map[string]any `json:"events"`
		Next   *string          `json:"next,omitempty"`
		More   bool             `json:"more"`
	}
	str := func(s string) *string { return &s }
	ev := func(pos int) map[string]any {
		return map[string]any{"id": simulated.EventID("torn", int64(pos)), "position": pos}
	}
	pages := map[string]page{
		"":   {Events: []map[string]any{ev(1), ev(2)}, Next: str("c2"), More: true},
		"c2": {Events: []map[string]any{ev(3)}, More: true},
	}
	var mu sync.Mutex
	requests := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cur := r.URL.Query().Get("cursor")
		pg, ok := pages[cur]
		if !ok || strings.TrimPrefix(r.URL.Path, "/") != "torn" {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		requests[cur]++
		mu.Unlock()
		_ = json.NewEncoder(w).Encode(pg)
	}))
	defer srv.Close()
	h := newHarness(t, memoryBackend, []string{"torn"}, 3)
	in := fmt.Sprintf(`
paginated_partitions:
  scope: %s
  partitions: [ torn ]
  exit_when_complete: true
  exit_when_parked_grace: 0s
  poll_interval: 5ms
  fetch_retries: 1
  fetch_backoff: 5ms
  checkpoint:
    backend: memory
  http:
    url: '%s/${! @partition }?cursor=${! @cursor.escape_url_query() }'
    events: root = this.events
    event_id: root = this.id
    event_position: root = this.position
    successor: root = this.next | deleted()
    has_more: root = this.more
    contract:
      empty_page: end_of_data
      positions: ordered
      missing_successor: end_of_traversal
      recovery: park
`, h.scope, srv.URL)
	r := h.start(h.buildYAML(in, nil, nil, ""))
	k := store.Key{Scope: h.scope, Partition: "torn"}
	var cp store.Checkpoint
	e2etest.WaitFor(t, e2etest.Patience, "the partition to park", func() (bool, string) {
		cp, _ = h.st.LoadCheckpoint(context.Background(), k)
		return cp.Parked != "", fmt.Sprintf("checkpoint generation %d complete %v parked %q", cp.Generation, cp.Complete, cp.Parked)
	}, func() error {
		if r.finished() {
			return errors.New("the input ended as if the list were complete")
		}
		return nil
	})
	assert.False(t, cp.Complete, "a page whose has_more is true never completes the partition")
	assert.Contains(t, cp.Parked, "malformed page after 2 attempts")
	assert.Contains(t, cp.Parked, "partition torn")
	assert.Contains(t, cp.Parked, "has_more true without a successor")
	assert.Equal(t, []byte("c2"), cp.Cursor, "parked at the torn page's cursor, the page before it promoted")
	mu.Lock()
	assert.Equal(t, 2, requests["c2"], "the torn page is fetched fetch_retries+1 times")
	mu.Unlock()
	h.mu.Lock()
	assert.Equal(t, map[string]int{simulated.EventID("torn", 1): 1, simulated.EventID("torn", 2): 1}, h.delivered,
		"the first page is delivered once; nothing of the torn page is emitted")
	h.mu.Unlock()
	assert.False(t, r.finished(), "the input does not end as if the list were complete")
}

// A restart asks the provider for its boundary with the durable state: the
// applied position, the id of the event there (the last event of the page
// that applied it) and whether the cursor expired. Here C2, fetched ahead,
// first answers an empty page that proves nothing, then expires once it is
// the durable cursor; the restart cursor R resumes after the applied event.
func TestRestartBoundaryCarriesTheAppliedEventID(t *testing.T) {
	c := provider.Contract{EmptyPage: provider.EmptyNoEvidence, OrderedPositions: true, Recovery: provider.RecoveryRestartFromBoundary}
	st := memstore.New()
	scope := newChainScope(t)
	c2Durable := func() bool {
		cp, err := st.LoadCheckpoint(context.Background(), store.Key{Scope: scope, Partition: "p"})
		return err == nil && string(cp.Cursor) == "C2"
	}
	prov := newScript(c, map[string][]answer{
		"":   {{resp: resp("C2", event("order-1", 1), event("order-2", 2))}},
		"C2": {{resp: resp("C2")}, {err: &provider.ExpiredError{Partition: "p", Reason: "iterator expired"}, gate: c2Durable}},
		"R":  {{resp: resp("", event("order-3", 3))}},
	})
	prov.restart = []byte("R")
	r := startChain(t, st, scope, prov, false, nil)
	e2etest.WaitFor(t, e2etest.Patience, "the restart cursor was fetched", func() (bool, string) {
		return prov.fetchesOf("R") > 0 && r.deliveries()["order-3"] > 0, fmt.Sprintf("boundaries %+v, deliveries %v", prov.boundariesSeen(), r.deliveries())
	})
	bs := prov.boundariesSeen()
	require.Len(t, bs, 1)
	assert.Equal(t, provider.Boundary{Partition: "p", Applied: provider.IntPosition(2), HasApplied: true, AppliedID: "order-2", Expired: true}, bs[0])
	cp := r.checkpoint()
	assert.Equal(t, "order-2", cp.AppliedID, "the restart keeps the applied position and its id")
}
