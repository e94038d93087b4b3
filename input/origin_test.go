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

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/e2etest"
	"github.com/tidemark/tidemark/internal/store"
)

// originFeed is a dense feed whose events of the current incarnation are
// at positions floor..n (floor > 1: retention dropped the oldest), served
// in pages of 10 after ?after=X. A request without ?after (the
// partition's start) answers the newest page when newestFirst is set (a
// `limit` that keeps the newest N), else the page from the floor. Event
// ids name the incarnation: "<inc>-<pos>". GET /incarnation names it.
type originFeed struct {
	mu          sync.Mutex
	inc         string
	floor, n    int64
	newestFirst bool
}

const originPage = 10

func (f *originFeed) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Path == "/incarnation" {
		_ = json.NewEncoder(w).Encode(map[string]string{"id": f.inc})
		return
	}
	lo, next := f.floor, ""
	if s := r.URL.Query().Get("after"); s != "" || r.URL.Query().Has("after") {
		after, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			http.Error(w, "bad after", http.StatusBadRequest)
			return
		}
		lo, next = max(after+1, f.floor), s
	} else if f.newestFirst {
		lo = max(f.floor, f.n-originPage+1)
	}
	type event struct {
		ID  string `json:"id"`
		Pos int64  `json:"pos"`
	}
	evs := []event{}
	for pos := lo; pos <= f.n && len(evs) < originPage; pos++ {
		evs = append(evs, event{ID: fmt.Sprintf("%s-%d", f.inc, pos), Pos: pos})
		next = strconv.FormatInt(pos, 10)
	}
	if next == "" {
		next = strconv.FormatInt(lo-1, 10)
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"events": evs, "next": next})
}

func (f *originFeed) recreate(inc string, floor, n int64, newestFirst bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inc, f.floor, f.n, f.newestFirst = inc, floor, n, newestFirst
}

// originYAML is a paginated_partitions input over an originFeed: dense
// positions from first_position 1, the incarnation read from the feed,
// and the given recovery (restarting from ?after=0, the origin).
func originYAML(h *harness, url, recovery string, maxRestarts int) string {
	return originYAMLFrom(h, url, recovery, maxRestarts, "      first_position: 1\n")
}

// originYAMLFrom is originYAML with the origin line given ("": none).
func originYAMLFrom(h *harness, url, recovery string, maxRestarts int, origin string) string {
	return fmt.Sprintf(`paginated_partitions:
  scope: %s
  partitions: [ p0 ]
  poll_interval: 5ms
  park_check_interval: 20ms
  store_backoff: 10ms
  max_restarts: %d
  checkpoint:
%s
  http:
    url: '%s/events${! if @cursor == "" { "" } else { "?after=" + @cursor } }'
    events: root = this.events
    event_position: root = this.pos
    successor: root = this.next
    incarnation:
      url: '%s/incarnation'
      value: root = this.id
    validate_interval: 20ms
    contract:
      positions: dense
%s      recovery: %s
      restart_cursor: "0"
`, h.scope, maxRestarts, indent(h.ckYAML, "    "), url, url, origin, recovery)
}

// deliveredOf lists the delivered event ids with the prefix, counted.
func (h *harness) deliveredOf(prefix string) map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]int{}
	for id, n := range h.delivered {
		if strings.HasPrefix(id, prefix) {
			out[id] = n
		}
	}
	return out
}

// waitParked waits until p0's checkpoint is parked and returns it.
func (h *harness) waitParked(t *testing.T, what string) store.Checkpoint {
	t.Helper()
	var cp store.Checkpoint
	e2etest.WaitFor(t, e2etest.Patience, what, func() (bool, string) {
		var err error
		cp, err = h.st.LoadCheckpoint(context.Background(), store.Key{Scope: h.scope, Partition: "p0"})
		if err != nil {
			return false, err.Error()
		}
		return cp.Parked != "", fmt.Sprintf("generation %d, applied %s (%v)", cp.Generation, cp.Applied, cp.HasApplied)
	})
	return cp
}

// waitApplied waits until p0's durable applied position is at least n in
// incarnation inc (its hash on the checkpoint).
func (h *harness) waitApplied(t *testing.T, n int64, what string) store.Checkpoint {
	t.Helper()
	var cp store.Checkpoint
	e2etest.WaitFor(t, e2etest.Patience, what, func() (bool, string) {
		var err error
		cp, err = h.st.LoadCheckpoint(context.Background(), store.Key{Scope: h.scope, Partition: "p0"})
		if err != nil {
			return false, err.Error()
		}
		return cp.HasApplied && cp.Applied.Int >= n && cp.Parked == "", fmt.Sprintf("generation %d, applied %s (%v), parked %q", cp.Generation, cp.Applied, cp.HasApplied, cp.Parked)
	})
	return cp
}

// TestStreamFirstPageAboveTheDeclaredOriginIsAGap: a dense feed declaring
// first_position 1 whose first page of a traversal starts above 1 is
// reported, never read on as if nothing came before it, at a fresh start
// and after an incarnation reset (which clears the applied boundary):
//
//   - under recovery: park the partition parks, the reason names the
//     partition, the origin and the first position seen, and nothing of
//     the first page is delivered;
//   - under restart_from_boundary it restarts from the restart cursor
//     (?after=0, the origin) and delivers every event;
//   - a source that answers above the origin from every restart (its
//     retention dropped the oldest events) parks after max_restarts;
//   - without a declared origin (the default) the first page is read on,
//     events below it skipped, and the input says at start that the first
//     page is not checked.
func TestStreamFirstPageAboveTheDeclaredOriginIsAGap(t *testing.T) {
	const n = 20
	firstPageGap := func(first int64) string {
		return fmt.Sprintf("coverage rule (b), first page: partition p0: nothing is applied yet (a fresh start or a new incarnation) and the first event is at position %d, not at the declared first position 1 (contract first_position): positions 1 through %d were never delivered", first, first-1)
	}
	forEachBackend(t, func(t *testing.T, b backend) {
		t.Run("fresh start, park", func(t *testing.T) {
			feed := &originFeed{inc: "db0", floor: 1, n: n, newestFirst: true}
			srv := httptest.NewServer(feed)
			t.Cleanup(srv.Close)
			h := newHarness(t, b, []string{"p0"}, n)
			h.start(h.buildYAML(originYAML(h, srv.URL, "park", 8), nil, nil, ""))
			cp := h.waitParked(t, "p0 parked on the first-page gap")
			assert.Contains(t, cp.Parked, firstPageGap(11))
			assert.False(t, cp.HasApplied, "nothing promoted")
			assert.Empty(t, h.deliveredOf("db0-"), "nothing of the page above the origin is delivered")
			assert.NotContains(t, h.logs.String(), "after=", "cursors appear only as hashes")
			assert.NotContains(t, h.logs.String(), "no first_position is declared")
		})
		t.Run("no origin declared: the first page is read on, and the start says so", func(t *testing.T) {
			feed := &originFeed{inc: "db0", floor: 1, n: n, newestFirst: true}
			srv := httptest.NewServer(feed)
			t.Cleanup(srv.Close)
			h := newHarness(t, b, []string{"p0"}, n)
			h.start(h.buildYAML(originYAMLFrom(h, srv.URL, "park", 8, ""), nil, nil, ""))
			h.waitApplied(t, n, "p0 read from its newest page")
			got := h.deliveredOf("db0-")
			assert.Len(t, got, 10, "only the newest page is delivered: %v", got)
			assert.Zero(t, got["db0-1"], "events 1-10 are skipped: nothing checks the first page")
			assert.Equal(t, 1, strings.Count(h.logs.String(), "positions are dense but no first_position is declared, so the first page of a traversal"), "said once, at start")
		})
		t.Run("fresh start, restart_from_boundary", func(t *testing.T) {
			feed := &originFeed{inc: "db0", floor: 1, n: n, newestFirst: true}
			srv := httptest.NewServer(feed)
			t.Cleanup(srv.Close)
			h := newHarness(t, b, []string{"p0"}, n)
			h.start(h.buildYAML(originYAML(h, srv.URL, "restart_from_boundary", 8), nil, nil, ""))
			h.waitApplied(t, n, "p0 read whole from the origin")
			got := h.deliveredOf("db0-")
			for pos := 1; pos <= n; pos++ {
				assert.Positive(t, got[fmt.Sprintf("db0-%d", pos)], "event %d delivered", pos)
			}
			assert.Positive(t, h.metrics.get("tidemark_restarts"), "the gap restarted the partition")
			assert.Equal(t, 1, countWarn(h.logs.String(), firstPageGap(11)), "the gap is logged at warn with the restart")
		})
		t.Run("fresh start, retention dropped the oldest: restarts are bounded", func(t *testing.T) {
			feed := &originFeed{inc: "db0", floor: 6, n: n}
			srv := httptest.NewServer(feed)
			t.Cleanup(srv.Close)
			h := newHarness(t, b, []string{"p0"}, n)
			h.start(h.buildYAML(originYAML(h, srv.URL, "restart_from_boundary", 2), nil, nil, ""))
			cp := h.waitParked(t, "p0 parked after max_restarts")
			assert.Contains(t, cp.Parked, firstPageGap(6))
			assert.Contains(t, cp.Parked, "2 restarts from a stable boundary never got the partition past where the first of them found it (applied boundary none, complete-through none; max_restarts 2)")
			assert.Equal(t, int64(2), h.metrics.get("tidemark_restarts"))
			assert.Empty(t, h.deliveredOf("db0-"))
		})
		for _, recovery := range []string{"park", "restart_from_boundary"} {
			t.Run("after an incarnation reset, "+recovery, func(t *testing.T) {
				feed := &originFeed{inc: "db0", floor: 1, n: n}
				srv := httptest.NewServer(feed)
				t.Cleanup(srv.Close)
				h := newHarness(t, b, []string{"p0"}, n)
				h.start(h.buildYAML(originYAML(h, srv.URL, recovery, 8), nil, nil, ""))
				old := h.waitApplied(t, n, "db0 read whole")
				require.NotEmpty(t, old.Incarnation)
				assert.Len(t, h.deliveredOf("db0-"), n)

				// Recreated with as many events: nothing new after the
				// old cursor, and the new incarnation's start answers its
				// newest page (11..20).
				feed.recreate("db1", 1, n, true)
				switch recovery {
				case "park":
					cp := h.waitParked(t, "p0 parked on the new incarnation's first-page gap")
					assert.NotEqual(t, old.Incarnation, cp.Incarnation, "reset into the new incarnation")
					assert.Contains(t, cp.Parked, firstPageGap(11))
					assert.False(t, cp.HasApplied, "nothing of the new incarnation promoted")
					assert.Empty(t, h.deliveredOf("db1-"), "nothing of the new incarnation delivered")
				default:
					e2etest.WaitFor(t, e2etest.Patience, "db1 read whole from its origin", func() (bool, string) {
						got := h.deliveredOf("db1-")
						return len(got) == n, fmt.Sprintf("%d of %d delivered", len(got), n)
					})
					cp := h.waitApplied(t, n, "db1 promoted through 20")
					assert.NotEqual(t, old.Incarnation, cp.Incarnation)
					assert.Equal(t, 1, countWarn(h.logs.String(), firstPageGap(11)), "the gap is logged at warn with the restart")
				}
				assert.Equal(t, int64(1), h.metrics.get("tidemark_incarnation_changes"))
			})
		}
	})
}
