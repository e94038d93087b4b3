package input

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/e2etest"
	"github.com/tidemark/tidemark/internal/store"
)

// A source that serves page 0 from the partition's start and answers 410
// to page 1's cursor, under restart_from_boundary with restart_cursor ""
// (the start): each restart reads page 0 again and promotes it, which is
// not progress past the restart point. The partition parks after
// max_restarts, with a reason naming the expired answer and the restarts,
// and the requests the source received are bounded by the restarts. One
// page in flight, so that page 1's cursor is fetched only after page 0 is
// promoted and every restart starts from the same applied boundary.
func TestRestartLoopWithTransientProgressParks(t *testing.T) {
	const maxRestarts = 3
	var pages, expired atomic.Int64
	src := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Query().Get("cursor") {
		case "":
			pages.Add(1)
			fmt.Fprint(w, `{"events":[{"id":"e1","pos":1},{"id":"e2","pos":2}],"next":"page-1-cursor"}`)
		default:
			expired.Add(1)
			w.WriteHeader(http.StatusGone)
			fmt.Fprint(w, `{"error":"cursor expired"}`)
		}
	}))
	t.Cleanup(src.Close)

	forEachBackend(t, func(t *testing.T, b backend) {
		pages.Store(0)
		expired.Store(0)
		h := newHarness(t, b, []string{"p"}, 2)
		r := h.start(h.buildYAML(h.httpEventsYAML(src.URL,
			fmt.Sprintf("  poll_interval: 5ms\n  store_backoff: 10ms\n  max_restarts: %d\n  max_pages_in_flight: 1\n", maxRestarts),
			"      recovery: restart_from_boundary\n      restart_cursor: \"\"\n"), nil, nil, ""))
		k := store.Key{Scope: h.scope, Partition: "p"}
		var parked string
		e2etest.WaitUntil(t, streamTimeout, "the partition to park after max_restarts", func() bool {
			cp, err := h.st.LoadCheckpoint(t.Context(), k)
			parked = cp.Parked
			return err == nil && cp.Parked != ""
		})
		require.NoError(t, r.strm.Stop(t.Context()))
		assert.True(t, strings.HasPrefix(parked, "expired cursor"), parked)
		assert.Contains(t, parked, "HTTP 410")
		assert.Contains(t, parked, fmt.Sprintf("%d restarts from a stable boundary never got the partition past", maxRestarts))
		assert.NotContains(t, parked, "page-1-cursor", "the cursor appears only as its hash")
		// Page 0 once, then once after each restart; page 1's cursor once
		// before each restart and once more before the park.
		assert.Equal(t, int64(maxRestarts+1), pages.Load(), "page 0 requests")
		assert.Equal(t, int64(maxRestarts+1), expired.Load(), "page 1 requests")
	})
}
