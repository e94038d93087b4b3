//go:build unix

package e2e

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/e2etest"
)

// TestMain removes the binary built for the package's tests.
func TestMain(m *testing.M) { e2etest.Main(m) }

// runConnect runs the binary with args to its end (or timeout) and returns
// its stdout and stderr; a failure fails t.
func runConnect(t *testing.T, timeout time.Duration, env []string, args ...string) (stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(e2etest.Connect(t), args...)
	cmd.Env = env
	res := e2etest.Run(t, timeout, cmd)
	if res.Code != 0 {
		t.Fatalf("connect %s: exit code %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), res.Code, e2etest.Tail(res.Stdout, 30), e2etest.Tail(res.Stderr, 40))
	}
	return res.Stdout, res.Stderr
}

// dynaliteShield returns the URL of an HTTP proxy to the DynamoDB endpoint
// for processes the test kills with SIGKILL. dynalite 4.0.0 exits on any
// connection that closes before its response is finished
// (node_modules/dynalite/index.js:212, `req.on('error', function (err) {
// throw err })`: "Error: aborted", ECONNRESET), which takes the shared
// dynalite down for every test using it. The proxy reads each request
// whole, then performs the upstream exchange to its end (the whole
// response read) whether or not its client is still there, and only then
// answers; so dynalite never sees an aborted connection. For the killed
// process nothing changes: a request it had sent completely may still be
// applied with its response lost, as with the real DynamoDB.
func dynaliteShield(t testing.TB, endpoint string) string {
	return newShield(t, endpoint).url
}

// shield is the proxy of dynaliteShield. delayUpdates(d) delays every
// UpdateItem (promotions, receipts) by d, and drops those whose client
// dies meanwhile: a process killed while its promotion waits has not
// promoted.
type shield struct {
	url   string
	mu    sync.Mutex
	delay time.Duration
	// gate, when not nil, holds every request until it is closed (hang,
	// release); held counts the requests it has held.
	gate chan struct{}
	held int
}

// hang makes the store look hung: every request from now on is read whole
// and held, unanswered, until release. A held request is still performed
// after release even when its client has given up meanwhile (a write
// applied late, with nobody waiting for its answer).
func (s *shield) hang() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gate == nil {
		s.gate = make(chan struct{})
	}
}

// release ends a hang: the held requests go on, new ones pass.
func (s *shield) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gate != nil {
		close(s.gate)
		s.gate = nil
	}
}

// heldRequests is how many requests a hang has held so far.
func (s *shield) heldRequests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held
}

func (s *shield) delayUpdates(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.delay = d
}

func newShield(t testing.TB, endpoint string) *shield {
	t.Helper()
	return newShieldAt(t, endpoint, "")
}

// newShieldAt is newShield listening on addr ("": a free port of
// 127.0.0.1).
func newShieldAt(t testing.TB, endpoint, addr string) *shield {
	t.Helper()
	target, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	sh := &shield{}
	transport := &http.Transport{MaxIdleConnsPerHost: 16}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return // the client died mid-request: forward nothing
		}
		sh.mu.Lock()
		gate := sh.gate
		if gate != nil {
			sh.held++
		}
		sh.mu.Unlock()
		if gate != nil {
			<-gate
		}
		if strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".UpdateItem") {
			sh.mu.Lock()
			delay := sh.delay
			sh.mu.Unlock()
			if delay > 0 {
				select {
				case <-time.After(delay):
				case <-r.Context().Done():
					return // killed while it waited: never applied
				}
			}
		}
		u := *target
		u.Path, u.RawQuery = r.URL.Path, r.URL.RawQuery
		out, err := http.NewRequestWithContext(context.Background(), r.Method, u.String(), bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		out.Header = r.Header.Clone()
		out.Host = r.Host // as signed by the client
		resp, err := transport.RoundTrip(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		respBody, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		for k, vs := range resp.Header {
			w.Header()[k] = vs
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(respBody) // the client may be gone: fine
	}))
	if addr != "" {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("shield: listening on %s: %v", addr, err)
		}
		srv.Listener.Close()
		srv.Listener = ln
	}
	srv.Start()
	t.Cleanup(func() {
		sh.release()
		srv.Close()
		transport.CloseIdleConnections()
	})
	sh.url = srv.URL
	return sh
}
