package input

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/e2etest"
	"github.com/tidemark/tidemark/internal/ops"
	"github.com/tidemark/tidemark/internal/redact"
	"github.com/tidemark/tidemark/internal/redact/redacttest"
)

// The secrets of TestNoSecretLeavesTheInput.
const (
	leakClientSecret = "cl1ent-s3cret/+=zz"
	leakAccessToken  = "acc3ss-t0ken-q9w8e7"
	leakAPIKey       = "ap1-k3y-0123456789"
)

// leakSuccessor is partition part's secret successor (its second page's
// cursor), with characters every encoding changes.
func leakSuccessor(part string) string { return "succ/" + part + "+secret=cursor?&1" }

// echoIn is how each partition's server quotes the request it refuses.
var echoIn = map[string]func(string) string{
	"raw":    func(s string) string { return s },
	"query":  url.QueryEscape,
	"path":   url.PathEscape,
	"base64": func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) },
	"b64url": func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) },
	"json":   func(s string) string { b, _ := json.Marshal(s); return string(b[1 : len(b)-1]) },
}

// A source that echoes every refused request (its credentials, cursor,
// path and body) in 401 and 403 answers, each partition in another
// encoding, and a token endpoint: after the input has parked every
// partition, no credential and no cursor appears, in any encoding, in the
// logs, the park reasons and checkpoints stored (cursors encrypted with
// checkpoint.cursor_encryption), the witnesses, the counters' labels, or `status` (text and
// JSON).
func TestNoSecretLeavesTheInput(t *testing.T) {
	t.Setenv("TEST_TIDEMARK_CURSOR_KEY", base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32)))
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access_token":%q,"token_type":"bearer","expires_in":3600}`, leakAccessToken)
	}))
	t.Cleanup(tokens.Close)
	// Permanent refusals, so that every partition parks (500s are retried
	// and quoted in WARN lines on the way, see the provider's tests).
	status := map[string]int{"raw": 401, "query": 403, "path": 401, "base64": 403, "b64url": 401, "json": 403}
	src := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		part := strings.TrimPrefix(r.URL.Path, "/events/")
		cursor := r.URL.Query().Get("cursor")
		if cursor == "" {
			fmt.Fprintf(w, `{"events":[{"id":"%s-1","pos":1}],"next":%q}`, part, leakSuccessor(part))
			return
		}
		enc := echoIn[part]
		body, _ := io.ReadAll(r.Body)
		w.WriteHeader(status[part])
		fmt.Fprintf(w, "auth=%s key=%s cursor=%s uri=%s body=%s",
			enc(r.Header.Get("Authorization")), enc(r.Header.Get("X-Api-Key")), enc(cursor), enc(r.URL.RequestURI()), enc(string(body)))
	}))
	t.Cleanup(src.Close)
	parts := []string{"raw", "query", "path", "base64", "b64url", "json"}

	forEachBackend(t, func(t *testing.T, b backend) {
		h := newHarness(t, b, parts, 1)
		yaml := fmt.Sprintf(`paginated_partitions:
  scope: %s
  partitions: [ %s ]
  poll_interval: 5ms
  park_check_interval: 20ms
  store_backoff: 10ms
  fetch_retries: 1
  fetch_backoff: 1ms
  # Each witness written at once: the first page's witness (its successor,
  # encrypted) is stored before the second page's refused request parks
  # the partition (a witness waiting for its group would be dropped
  # unwritten with the chain, nothing of it emitted).
  witness_group_pages: 1
  checkpoint:
%s
    cursor_encryption:
      keys: [ { id: k1, env: TEST_TIDEMARK_CURSOR_KEY } ]
  http:
    url: '%s/events/${! @partition }?cursor=${! @cursor.escape_url_query() }'
    headers:
      X-Api-Key: %s
    max_retries: 1
    backoff: { initial_interval: 1ms, max_interval: 2ms }
    oauth2:
      enabled: true
      client_key: cid
      client_secret: %q
      token_url: %s/token
    events: root = this.events
    event_position: root = this.pos
    successor: root = this.next
    contract:
      empty_page: no_evidence
      recovery: park
`, h.scope, strings.Join(parts, ", "), indent(h.ckYAML, "    "), src.URL, leakAPIKey, leakClientSecret, tokens.URL)
		r := h.start(h.buildYAML(yaml, nil, nil, ""))
		allParked := func() bool {
			cps, err := h.st.ListCheckpoints(t.Context(), h.scope)
			if err != nil || len(cps) < len(parts) {
				return false
			}
			for _, cp := range cps {
				if cp.Parked == "" {
					return false
				}
			}
			return true
		}
		e2etest.WaitUntil(t, streamTimeout, "every partition to park on the refused request", allParked)
		require.NoError(t, r.strm.Stop(t.Context()))

		var text strings.Builder
		text.WriteString(h.logs.String())
		cps, err := h.st.ListCheckpoints(t.Context(), h.scope)
		require.NoError(t, err)
		storedSuccessors := 0
		for _, cp := range cps {
			fmt.Fprintf(&text, "\ncheckpoint %s: cursor %q parked %q", cp.Partition, cp.Cursor, cp.Parked)
			if len(cp.Cursor) > 0 {
				storedSuccessors++
			}
			assert.Contains(t, cp.Parked, redact.Mask, "%s: the echo was quoted in the park reason, redacted", cp.Partition)
			ws, err := h.st.WitnessesFrom(t.Context(), cp.Key, 0)
			require.NoError(t, err)
			for _, w := range ws {
				if len(w.Successor) > 0 {
					storedSuccessors++
				}
				fmt.Fprintf(&text, "\nwitness %s: %q -> %q", w.AttemptID, w.InputCursor, w.Successor)
			}
		}
		h.metrics.mu.Lock()
		for k := range h.metrics.counts {
			fmt.Fprintf(&text, "\nmetric %s", k) // every counter's labels
		}
		h.metrics.mu.Unlock()
		s, err := ops.ReadStatus(t.Context(), h.st, h.scope)
		require.NoError(t, err)
		require.NoError(t, ops.WriteTable(&text, s))
		require.NoError(t, ops.WriteJSON(&text, s))

		secrets := map[string]string{
			"client secret": leakClientSecret, "access token": leakAccessToken, "api key": leakAPIKey,
			"token request basic": base64.StdEncoding.EncodeToString([]byte("cid:" + url.QueryEscape(leakClientSecret))),
		}
		for _, p := range parts {
			secrets["successor of "+p] = leakSuccessor(p)
		}
		assert.Empty(t, redacttest.Leaks(text.String(), secrets), "%s", text.String())
		for _, p := range parts {
			twice := url.PathEscape(url.QueryEscape(leakSuccessor(p)))
			assert.NotContains(t, text.String(), twice, "URL escaping applied twice")
		}
		assert.Positive(t, storedSuccessors, "the checkpoints or the witnesses hold the successors, encrypted")
	})
}

// An OAuth2 token endpoint that accepts and does not answer: the input logs
// a WARN line per timed-out token request (naming the token URL's host),
// no partition parks, and once the endpoint answers every event is
// delivered and every partition completes.
func TestStreamHungTokenEndpointRecovers(t *testing.T) {
	const n, page = 30, 10
	var hang atomic.Bool
	hang.Store(true)
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body) // the server notices a closed connection only after the body
		if hang.Load() {
			<-r.Context().Done()
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access_token":%q,"token_type":"bearer","expires_in":3600}`, leakAccessToken)
	}))
	t.Cleanup(tokens.Close)
	pages := &flakyPages{n: n, page: page, requests: map[string]int{}, bad: map[string][]string{}}
	src := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+leakAccessToken {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		pages.ServeHTTP(w, r)
	}))
	t.Cleanup(src.Close)
	h := newHarness(t, memoryBackend, threeParts, n)
	yaml := fmt.Sprintf(`paginated_partitions:
  scope: %s
  partitions: [ %s ]
  exit_when_complete: true
  poll_interval: 5ms
  park_check_interval: 20ms
  store_backoff: 10ms
  fetch_retries: 1000
  fetch_backoff: 1ms
  checkpoint:
%s
  http:
    url: '%s/events/${! @partition }?after=${! if @cursor == "" { "0" } else { @cursor } }'
    timeout: 200ms
    max_retries: 1
    backoff: { initial_interval: 1ms, max_interval: 5ms }
    oauth2:
      enabled: true
      client_key: cid
      client_secret: %q
      token_url: %s/token
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
`, h.scope, strings.Join(h.parts, ", "), indent(h.ckYAML, "    "), src.URL, leakClientSecret, tokens.URL)
	r := h.start(h.buildYAML(yaml, nil, nil, ""))
	warn := "token request to " + tokens.URL + " failed"
	e2etest.WaitUntil(t, streamTimeout, "WARN lines for the timed-out token requests",
		func() bool { return strings.Count(h.logs.String(), warn) >= 4 }, h.noParks)
	hang.Store(false)
	e2etest.WaitUntil(t, streamTimeout, "the stream to complete once the token endpoint answers", r.finished, h.noParks)
	h.wait(r, streamTimeout)
	h.requireAllDelivered()
	h.requireCompleteCheckpoints()
	assert.Contains(t, h.logs.String(), "timed out after 200ms")
	assert.Empty(t, redacttest.Leaks(h.logs.String(), map[string]string{"client secret": leakClientSecret, "access token": leakAccessToken}))
}
