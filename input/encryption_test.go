package input

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/e2etest"
	"github.com/tidemark/tidemark/internal/runstatus"
	"github.com/tidemark/tidemark/internal/store"
)

// A scope whose cursors were stored encrypted, read by a config without
// cursor_encryption (the block removed by accident, or one instance
// deployed without it): the partition does not start, the log names the
// key id and the scope, the checkpoint stays where it was, and the source
// never receives the stored ciphertext as a cursor (an API that treats an
// unknown cursor as "latest" would skip events silently). Under
// exit_when_complete the run ends as a failure after
// exit_when_parked_grace instead of retrying for ever.
func TestEncryptedScopeWithoutTheKeyNeverSendsCiphertext(t *testing.T) {
	t.Setenv("TEST_TIDEMARK_SEALED_KEY", base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{9}, 32)))
	var mu sync.Mutex
	var received [][]byte
	src := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cursor := r.URL.Query().Get("cursor")
		mu.Lock()
		received = append(received, []byte(cursor))
		mu.Unlock()
		switch cursor {
		case "":
			fmt.Fprint(w, `{"events":[{"id":"e1","pos":1},{"id":"e2","pos":2}],"next":"page-2-cursor"}`)
		case "page-2-cursor":
			fmt.Fprint(w, `{"events":[{"id":"e3","pos":3}],"next":"page-3-cursor"}`)
		default: // the head: nothing new yet
			fmt.Fprintf(w, `{"events":[],"next":%q}`, cursor)
		}
	}))
	t.Cleanup(src.Close)

	forEachBackend(t, func(t *testing.T, b backend) {
		h := newHarness(t, b, []string{"p"}, 3)
		// Run 1 has the key; run 2, without it, is a batch job
		// (exit_when_complete).
		yaml := func(withKey bool) string {
			settings := fmt.Sprintf("  exit_when_complete: %t\n  exit_when_parked_grace: 300ms\n  poll_interval: 10ms\n  store_backoff: 10ms\n", !withKey)
			y := h.httpEventsYAML(src.URL, settings, "      recovery: park\n")
			if withKey {
				y = strings.Replace(y, "  http:\n", "    cursor_encryption:\n      keys: [ { id: k-sealed, env: TEST_TIDEMARK_SEALED_KEY } ]\n  http:\n", 1)
			}
			return y
		}
		k := store.Key{Scope: h.scope, Partition: "p"}
		r := h.start(h.buildYAML(yaml(true), nil, nil, ""))
		e2etest.WaitUntil(t, streamTimeout, "the checkpoint to hold the third page's cursor, encrypted", func() bool {
			cp, err := h.st.LoadCheckpoint(t.Context(), k)
			return err == nil && cp.Generation >= 3 && store.IsSealedCursor(cp.Cursor)
		})
		require.NoError(t, r.strm.Stop(t.Context()))
		before, err := h.st.LoadCheckpoint(t.Context(), k)
		require.NoError(t, err)
		mu.Lock()
		sentBefore := len(received)
		mu.Unlock()

		r = h.start(h.buildYAML(yaml(false), nil, nil, ""))
		sentSealed := func() bool {
			mu.Lock()
			defer mu.Unlock()
			for _, c := range received[sentBefore:] {
				if store.IsSealedCursor(c) {
					return true
				}
			}
			return false
		}
		e2etest.WaitUntil(t, streamTimeout, "the input to say why the partition does not start (or to send the ciphertext)", func() bool {
			logs := h.logs.String()
			return strings.Contains(logs, "k-sealed") && strings.Contains(logs, "does not start") || sentSealed()
		})
		// With exit_when_complete, a batch job ends: once Connect has
		// failed for exit_when_parked_grace, the run ends as a failure
		// (exit code 3 in the binary) with the reason.
		h.wait(r, streamTimeout)
		var failure string
		for _, f := range runstatus.Failures() {
			if strings.Contains(f, h.scope) {
				failure = f
			}
		}
		assert.Contains(t, failure, "could not start for exit_when_parked_grace (300ms)")
		assert.Contains(t, failure, "k-sealed")

		logs := h.logs.String()
		var refusal string
		for _, line := range strings.Split(logs, "\n") {
			if strings.Contains(line, "k-sealed") {
				refusal = line
				break
			}
		}
		assert.Contains(t, refusal, "scope \\\""+h.scope, "the refusal names the scope")
		assert.Contains(t, refusal, "cursor_encryption", "the refusal names the missing block")
		assert.False(t, sentSealed(), "the source received the stored ciphertext as a cursor")
		after, err := h.st.LoadCheckpoint(t.Context(), k)
		require.NoError(t, err)
		assert.Equal(t, before.Generation, after.Generation, "the partition did not advance")
		assert.Equal(t, before.Cursor, after.Cursor, "the stored cursor is left encrypted")
	})
}
