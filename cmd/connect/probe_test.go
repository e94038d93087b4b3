package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"
)

// pagedSource is an httptest source of one partition: 6 events in pages of
// 2, cursor "" then the successor of each page. rotate: every answer's
// successor carries a fresh suffix (tokens rotate on a retry); gapAt: the
// event at that position is missing (positions are not dense).
type pagedSource struct {
	rotate bool
	gapAt  int

	mu      sync.Mutex
	served  int
	methods map[string]int
}

func (s *pagedSource) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.served++
	n := s.served
	if s.methods == nil {
		s.methods = map[string]int{}
	}
	s.methods[r.Method]++
	s.mu.Unlock()
	page := 0
	if c := r.URL.Query().Get("cursor"); c != "" {
		p, _, _ := strings.Cut(c, "-")
		page, _ = strconv.Atoi(strings.TrimPrefix(p, "page"))
	}
	type event struct {
		ID  string `json:"id"`
		Pos int    `json:"pos"`
	}
	body := struct {
		Events []event `json:"events"`
		Next   string  `json:"next,omitempty"`
	}{Events: []event{}}
	for pos := 2*page + 1; pos <= 2*page+2; pos++ {
		if pos != s.gapAt {
			body.Events = append(body.Events, event{ID: fmt.Sprintf("e%d", pos), Pos: pos})
		}
	}
	if page < 2 {
		body.Next = fmt.Sprintf("page%d", page+1)
		if s.rotate {
			body.Next += fmt.Sprintf("-%d", n)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(body)
}

// probeConfig writes a config reading url with the contract's positions
// and tokens_may_rotate; its checkpoint store is a DynamoDB endpoint
// nothing listens on (the probe never opens it).
func probeConfig(t *testing.T, url, positions string, rotate bool) string {
	t.Helper()
	cfg := fmt.Sprintf(`
input:
  paginated_partitions:
    scope: probe-test
    partitions: [ p0 ]
    checkpoint:
      backend: dynamodb
      dynamodb:
        table: never-opened
        endpoint: http://127.0.0.1:1
    http:
      url: '%s/events?partition=${! @partition }&cursor=${! @cursor }'
      max_retries: 0
      events: root = this.events
      event_id: root = this.id
      event_position: root = this.pos
      successor: root = this.next | deleted()
      contract:
        empty_page: no_evidence
        positions: %s
        tokens_may_rotate: %t
        missing_successor: end_of_traversal
        recovery: park
output:
  drop: {}
`, url, positions, rotate)
	path := filepath.Join(t.TempDir(), "probe.yaml")
	require.NoError(t, os.WriteFile(path, []byte(cfg), 0o600))
	return path
}

// runProbe runs `connect tidemark probe args...` in-process and returns its
// output and exit code.
func runProbe(t *testing.T, args ...string) (string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	app := &cli.App{
		Name:           "connect",
		Commands:       []*cli.Command{tidemarkCommand()},
		Writer:         &out,
		ErrWriter:      &errOut,
		ExitErrHandler: func(*cli.Context, error) {},
	}
	err := app.Run(append([]string{"connect", "tidemark", "probe"}, args...))
	code := 0
	var ec cli.ExitCoder
	switch {
	case errors.As(err, &ec):
		code = ec.ExitCode()
		t.Logf("exit %d: %v", code, err)
	case err != nil:
		t.Fatalf("probe: %v\n%s", err, errOut.String())
	}
	return out.String(), code
}

func TestProbeCommand(t *testing.T) {
	tests := []struct {
		name      string
		src       *pagedSource
		positions string
		rotate    bool
		wantCode  int
		want      []string
	}{
		{
			name: "tokens that rotate under tokens_may_rotate false are a contradiction",
			src:  &pagedSource{rotate: true}, positions: "dense", rotate: false, wantCode: probeExitContradicted,
			want: []string{"contradicted  tokens_may_rotate: false", "the same 2 events, successor sha256:"},
		},
		{
			name: "positions with a gap under positions dense are a contradiction",
			src:  &pagedSource{gapAt: 4}, positions: "dense", rotate: false, wantCode: probeExitContradicted,
			want: []string{"contradicted  positions: dense", "position 4 is missing"},
		},
		{
			name: "a source that keeps its contract exits 0",
			src:  &pagedSource{rotate: true}, positions: "dense", rotate: true, wantCode: 0,
			want: []string{"supported     tokens_may_rotate: true", "supported     positions: dense", "partition p0: 0 contradicted"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.src)
			defer srv.Close()
			out, code := runProbe(t, probeConfig(t, srv.URL, tc.positions, tc.rotate), "--pages", "5")
			assert.Equal(t, tc.wantCode, code, out)
			for _, w := range tc.want {
				assert.Contains(t, out, w)
			}
			tc.src.mu.Lock()
			defer tc.src.mu.Unlock()
			assert.Equal(t, map[string]int{http.MethodGet: tc.src.served}, tc.src.methods, "the probe only reads")
			// Two walks of 3 pages and 2 cursors fetched again.
			assert.Equal(t, 8, tc.src.served)
			assert.NotContains(t, out, "page1-", "cursors appear only as hashes")
		})
	}
}

// TestProbeCommandFailures: a config the probe cannot use, or a source
// that answers no page, exits 2.
func TestProbeCommandFailures(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusForbidden)
	}))
	defer srv.Close()
	out, code := runProbe(t, probeConfig(t, srv.URL, "dense", false))
	assert.Equal(t, probeExitFailed, code)
	assert.Contains(t, out, "walk 1 failed")
	assert.Contains(t, out, "HTTP 403")

	_, code = runProbe(t, filepath.Join(t.TempDir(), "missing.yaml"))
	assert.Equal(t, probeExitFailed, code)
	_, code = runProbe(t)
	assert.Equal(t, probeExitFailed, code)
}

// TestProbeOutputHidesURLUserInfo: a config whose URL carries credentials
// in its user info (http://user:pass@host/), against a source that echoes
// the Authorization header net/http derives from them, raw and decoded, in
// its 401 answers: the probe's output quotes the refusal, redacted, and
// shows neither the password, nor user:password, nor the Basic value.
func TestProbeOutputHidesURLUserInfo(t *testing.T) {
	const user, pass = "probe-user", "pr0be p@ss/word"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, _ := r.BasicAuth()
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, "denied %s (user %s, password %s)", r.Header.Get("Authorization"), u, p)
	}))
	defer srv.Close()
	withUser := strings.Replace(srv.URL, "http://", "http://"+url.UserPassword(user, pass).String()+"@", 1)
	out, code := runProbe(t, probeConfig(t, withUser, "dense", false))
	assert.Equal(t, probeExitFailed, code)
	assert.Contains(t, out, "HTTP 401")
	assert.Contains(t, out, "[redacted]", "the echo is quoted, redacted")
	basic := base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
	for _, secret := range []string{pass, user + ":" + pass, basic, url.QueryEscape(pass)} {
		assert.NotContains(t, out, secret)
	}
}
