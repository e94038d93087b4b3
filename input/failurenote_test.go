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
	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/store"
)

// A source that serves page 0 and then answers every request for page 1's
// cursor with a 503 quoting the cursor: the partition is retried for ever
// and never parks, and its checkpoint says why it does not advance (the
// failure note `status` shows), naming the cursor by its hash only and the
// answer redacted. The note is written at the first failure of the run and
// not rewritten for the failures that follow within
// chain.FailureNoteInterval: it still counts one failure after many.
func TestTransientlyFailingPartitionNotesWhyOnItsCheckpoint(t *testing.T) {
	const cursor = "page-1-cursor/with+secret=bits"
	var failures atomic.Int64
	src := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch c := r.URL.Query().Get("cursor"); c {
		case "":
			fmt.Fprintf(w, `{"events":[{"id":"e1","pos":1},{"id":"e2","pos":2}],"next":%q}`, cursor)
		default:
			failures.Add(1)
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "overloaded while serving cursor %s", c)
		}
	}))
	t.Cleanup(src.Close)

	forEachBackend(t, func(t *testing.T, b backend) {
		failures.Store(0)
		h := newHarness(t, b, []string{"p"}, 2)
		r := h.start(h.buildYAML(h.httpEventsYAML(src.URL,
			"  poll_interval: 5ms\n  store_backoff: 10ms\n  fetch_retries: 0\n  max_pages_in_flight: 1\n",
			"    max_retries: 0\n"), nil, nil, ""))
		k := store.Key{Scope: h.scope, Partition: "p"}
		e2etest.WaitUntil(t, streamTimeout, "page 1's cursor to fail 10 times", func() bool { return failures.Load() >= 10 })
		cp, err := h.st.LoadCheckpoint(t.Context(), k)
		require.NoError(t, err)
		require.NoError(t, r.strm.Stop(t.Context()))
		assert.Empty(t, cp.Parked, "transient failures never park")
		assert.Equal(t, uint64(2), cp.Generation, "page 0 was promoted, page 1 never")
		note := cp.Failing
		assert.True(t, strings.HasPrefix(note, "1 fetch(es) of cursor "+reconcile.CursorHash([]byte(cursor))+" at generation 2 failed in a row (retried for ever, not parked) since "), note)
		assert.Contains(t, note, "503")
		assert.Contains(t, note, "overloaded while serving cursor", "the answer is quoted")
		assert.NotContains(t, note, cursor, "the cursor appears only as its hash")
	})
}
