//go:build unix

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestMain removes the binary built for the package's tests.
func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// moduleRoot is the repository root (this file is internal/e2e/helpers_test.go).
func moduleRoot(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate the test source")
	}
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
)

// buildConnect builds cmd/connect once per test binary (go build, no race
// detector: the process under test is the product, not the test).
func buildConnect(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "tidemark-e2e-")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "connect")
		start := time.Now()
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/connect")
		cmd.Dir = moduleRoot(t)
		cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local")
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build ./cmd/connect: %v\n%s", err, out)
			return
		}
		t.Logf("built %s in %s", binPath, time.Since(start).Round(time.Millisecond))
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// connectEnv is the environment of a child connect process: the test's
// own, dummy AWS credentials when none are set, and extra.
func connectEnv(extra ...string) []string {
	env := os.Environ()
	for _, kv := range []string{"AWS_ACCESS_KEY_ID=local", "AWS_SECRET_ACCESS_KEY=local", "AWS_REGION=us-east-1"} {
		if k, _, _ := strings.Cut(kv, "="); os.Getenv(k) == "" {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// runConnect runs the binary with args to its end (or timeout) and returns
// its stdout and stderr.
func runConnect(t *testing.T, timeout time.Duration, env []string, args ...string) (stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(buildConnect(t), args...)
	cmd.Env = env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("connect %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, tail(out.String(), 30), tail(errb.String(), 40))
		}
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("connect %s did not end within %s\nstderr:\n%s", strings.Join(args, " "), timeout, tail(errb.String(), 40))
	}
	return out.String(), errb.String()
}

func tail(s string, n int) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(ls[max(0, len(ls)-n):], "\n")
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
	t.Helper()
	target, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	transport := &http.Transport{MaxIdleConnsPerHost: 16}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return // the client died mid-request: forward nothing
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
	t.Cleanup(func() {
		srv.Close()
		transport.CloseIdleConnections()
	})
	return srv.URL
}
