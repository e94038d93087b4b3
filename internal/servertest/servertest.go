// Package servertest starts real servers (npm packages, Debian binaries) for
// integration tests: bound to 127.0.0.1 on free ports, ready when an HTTP
// probe says so, and killed (with their whole process group) when the test
// ends.
//
// Usage:
//
//  1. Locate the program: NodeScript for an npm package installed under the
//     module's node_modules, Binary for an executable on PATH. Both skip the
//     test when it is missing, or fail it when the environment requires the
//     servers (CI or TIDEMARK_REQUIRE_SERVERS set); the message says how to
//     install it (./scripts/install-deps). Under -short both skip the test
//     unless the servers are required.
//  2. Start it with a Config whose Command builds the argv from the ports
//     Start allocated, and whose Ready probe returns nil once the server
//     really serves (not merely listens).
//  3. Use Server.URL; nothing else is needed: t.Cleanup kills the process
//     group and prints the server's output tail when the test failed.
//
// Start also dials every allocated port on the machine's non-loopback
// addresses and fails the test when the server answers there: test servers
// must never be reachable from outside the host.
package servertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// InstallHint is how to install every test server.
const InstallHint = "./scripts/install-deps"

// Required reports whether missing servers fail the tests instead of
// skipping them: when CI or TIDEMARK_REQUIRE_SERVERS is set.
func Required() bool {
	return os.Getenv("CI") != "" || os.Getenv("TIDEMARK_REQUIRE_SERVERS") != ""
}

// Unavailable skips the test because a server cannot be run, or fails it
// when Required.
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...) + "; install the test servers with " + InstallHint
	if Required() {
		t.Fatalf("%s (required: CI or TIDEMARK_REQUIRE_SERVERS is set)", msg)
		return
	}
	t.Skip(msg)
}

// ModuleRoot returns the directory of the go.mod enclosing the working
// directory (a test runs in its package directory).
func ModuleRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatalf("servertest: %v", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatalf("servertest: no go.mod above the working directory")
		}
		dir = parent
	}
}

// SkipUnderShort skips the test under -short unless Required: a test that
// runs a real server is not a short test.
func SkipUnderShort(t testing.TB, server string) {
	t.Helper()
	if testing.Short() && !Required() {
		t.Skip("-short: this test runs " + server + " (set TIDEMARK_REQUIRE_SERVERS to run it anyway)")
	}
}

// NodeScript returns the node executable and the path of script inside the
// npm package pkg installed under <module root>/node_modules. It calls
// Unavailable when either is missing, and SkipUnderShort.
func NodeScript(t testing.TB, pkg, script string) (node, path string) {
	t.Helper()
	SkipUnderShort(t, pkg)
	node, err := exec.LookPath("node")
	if err != nil {
		Unavailable(t, "node is not on PATH")
	}
	path = filepath.Join(ModuleRoot(t), "node_modules", pkg, script)
	if _, err := os.Stat(path); err != nil {
		Unavailable(t, "npm package %s is not installed (%s missing)", pkg, path)
	}
	return node, path
}

// Binary returns the path of the executable name on PATH, or calls
// Unavailable; it calls SkipUnderShort.
func Binary(t testing.TB, name string) string {
	t.Helper()
	SkipUnderShort(t, name)
	path, err := exec.LookPath(name)
	if err != nil {
		Unavailable(t, "%s is not on PATH", name)
	}
	return path
}

// FreePorts returns n distinct TCP ports that were free on 127.0.0.1 a
// moment ago. Another process can take one before the server binds it;
// Start retries with new ports when the server exits before it is ready.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, 0, n)
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for len(ports) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("servertest: finding a free port: %v", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// Probe reports whether the server at baseURL (http://127.0.0.1:port)
// serves: nil when ready.
type Probe func(ctx context.Context, baseURL string) error

// HTTPProbe is ready when method path (with body, sent as JSON) answers
// want.
func HTTPProbe(method, path, body string, want int) Probe {
	return func(ctx context.Context, baseURL string) error {
		req, err := http.NewRequestWithContext(ctx, method, baseURL+path, strings.NewReader(body))
		if err != nil {
			return err
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != want {
			return fmt.Errorf("%s %s: HTTP %d, want %d", method, path, resp.StatusCode, want)
		}
		return nil
	}
}

// Config describes one server process.
type Config struct {
	// Name labels messages ("etcd", "pouchdb-server").
	Name string
	// Command returns the argv (argv[0] is the executable) for the ports
	// Start allocated. Every address in it must be 127.0.0.1.
	Command func(ports []int) []string
	// Ports is how many free ports to allocate (zero: 1). Ports[0] is the
	// one URL and Ready use.
	Ports int
	// At, when set, are the ports to use instead of allocating them (a
	// server recreated at the address of an earlier one); Start then tries
	// once.
	At []int
	// Dir is the working directory (zero: a fresh t.TempDir()). Servers that
	// write files next to themselves (pouchdb-server's log.txt and
	// config.json) write them there.
	Dir string
	// Env is appended to the test's environment.
	Env []string
	// Ready probes readiness (zero: GET / answers 200).
	Ready Probe
	// StartTimeout bounds the wait for readiness (zero: 30s).
	StartTimeout time.Duration
}

// Server is a running server process.
type Server struct {
	Name  string
	Ports []int
	// URL is http://127.0.0.1:Ports[0].
	URL string
	Dir string

	cmd  *exec.Cmd
	out  *tail
	done chan struct{}
	once sync.Once
}

// startAttempts is how often Start tries with fresh ports when the server
// exits before it is ready (a port taken in between, most likely).
const startAttempts = 3

// Start starts the server and waits until it is ready; t.Cleanup stops it.
func Start(t testing.TB, cfg Config) *Server {
	t.Helper()
	if cfg.Ports == 0 {
		cfg.Ports = 1
	}
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	if cfg.Ready == nil {
		cfg.Ready = HTTPProbe(http.MethodGet, "/", "", http.StatusOK)
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 30 * time.Second
	}
	var lastErr error
	for attempt := 0; attempt < startAttempts; attempt++ {
		s, err := start(t, cfg)
		if err == nil {
			checkLoopbackOnly(t, s)
			return s
		}
		lastErr = err
		if !errors.Is(err, errExited) || attempt == startAttempts-1 || cfg.At != nil {
			break
		}
		t.Logf("servertest: %s exited before it was ready, retrying with new ports: %v", cfg.Name, err)
	}
	t.Fatalf("servertest: starting %s: %v", cfg.Name, lastErr)
	return nil
}

var errExited = errors.New("server exited")

func start(t testing.TB, cfg Config) (*Server, error) {
	ports := cfg.At
	if ports == nil {
		ports = FreePorts(t, cfg.Ports)
	}
	argv := cfg.Command(ports)
	s := &Server{
		Name:  cfg.Name,
		Ports: ports,
		URL:   "http://127.0.0.1:" + strconv.Itoa(ports[0]),
		Dir:   cfg.Dir,
		out:   &tail{max: 64 << 10},
		done:  make(chan struct{}),
	}
	s.cmd = exec.Command(argv[0], argv[1:]...)
	s.cmd.Dir = cfg.Dir
	s.cmd.Env = append(os.Environ(), cfg.Env...)
	s.cmd.Stdout = s.out
	s.cmd.Stderr = s.out
	s.cmd.SysProcAttr = sysProcAttr()
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", argv[0], err)
	}
	go func() {
		_ = s.cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			t.Logf("servertest: %s (pid %d) output tail:\n%s", s.Name, s.cmd.Process.Pid, s.Output())
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), cfg.StartTimeout)
	defer cancel()
	var probeErr error
	for {
		select {
		case <-s.done:
			s.Stop()
			return nil, fmt.Errorf("%w (%s) before it was ready; output:\n%s", errExited, s.cmd.ProcessState, s.Output())
		default:
		}
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		probeErr = cfg.Ready(pctx, s.URL)
		pcancel()
		if probeErr == nil {
			return s, nil
		}
		select {
		case <-ctx.Done():
			s.Stop()
			return nil, fmt.Errorf("not ready after %s: %v; output:\n%s", cfg.StartTimeout, probeErr, s.Output())
		case <-s.done:
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Stop kills the server's process group and waits for it. It is idempotent
// and also runs in t.Cleanup.
func (s *Server) Stop() {
	s.once.Do(func() {
		killGroup(s.cmd)
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
		}
	})
}

// Signal sends sig to the server process (a test hook some servers offer,
// such as kinesalite-server.js's SIGUSR2).
func (s *Server) Signal(sig os.Signal) error { return s.cmd.Process.Signal(sig) }

// Output returns the tail of the server's stdout and stderr.
func (s *Server) Output() string { return s.out.String() }

// checkLoopbackOnly fails the test when any of the server's ports answers
// on a non-loopback address of this machine.
func checkLoopbackOnly(t testing.TB, s *Server) {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Logf("servertest: cannot list interface addresses, not checking %s's binding: %v", s.Name, err)
		return
	}
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok || ipn.IP.IsLoopback() || ipn.IP.IsLinkLocalUnicast() {
			continue
		}
		for _, port := range s.Ports {
			addr := net.JoinHostPort(ipn.IP.String(), strconv.Itoa(port))
			c, err := net.DialTimeout("tcp", addr, 300*time.Millisecond)
			if err == nil {
				c.Close()
				t.Fatalf("servertest: %s answers on %s: it must bind 127.0.0.1 only", s.Name, addr)
			}
		}
	}
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	buf bytes.Buffer
}

func (w *tail) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if over := w.buf.Len() - w.max; over > 0 {
		w.buf.Next(over)
	}
	return len(p), nil
}

func (w *tail) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}
