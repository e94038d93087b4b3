// Package e2eops holds end-to-end tests of the operator experience (the
// frontier held by a stalled partition, status, repairs and /metrics; see
// docs/design.md#frontier-and-membership-epochs and
// docs/design.md#operator-repairs): the real `connect` binary, built from
// ./cmd/connect, run against dynalite (scripts/with-dynalite) with the
// simulated provider, and driven through its pipeline output, its `connect
// tidemark` commands and its /metrics endpoint.
//
// Run: ./scripts/with-dynalite go test -count=1 ./internal/e2eops/
//
// Without TIDEMARK_DYNAMODB_ENDPOINT the tests skip, or fail when CI or
// TIDEMARK_REQUIRE_DYNALITE is set (dynalitetest.Endpoint). Every process
// is started in its own process group, bound to 127.0.0.1 only, and killed
// with its group in t.Cleanup.
package e2eops

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/dynamostore"
	"github.com/tidemark/tidemark/internal/dynalitetest"
	"github.com/tidemark/tidemark/internal/ops"
	"github.com/tidemark/tidemark/internal/servertest"
	"github.com/tidemark/tidemark/internal/store"
)

var (
	buildOnce sync.Once
	buildDir  string
	buildPath string
	buildErr  error
)

func TestMain(m *testing.M) {
	// The binary and the test talk to dynalite with dummy credentials when
	// the environment has none (scripts/with-dynalite sets them).
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local", "AWS_REGION": "us-east-1"} {
		if os.Getenv(k) == "" {
			os.Setenv(k, v)
		}
	}
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// connectBinary builds ./cmd/connect once per test run.
func connectBinary(t *testing.T) string {
	t.Helper()
	root := servertest.ModuleRoot(t)
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "tidemark-e2eops-")
		if buildErr != nil {
			return
		}
		buildPath = filepath.Join(buildDir, "connect")
		cmd := exec.Command("go", "build", "-o", buildPath, "./cmd/connect")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local")
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build ./cmd/connect: %v\n%s", err, out)
		}
	})
	require.NoError(t, buildErr)
	return buildPath
}

// env is one test's dynalite table and binary.
type env struct {
	t        *testing.T
	bin      string
	endpoint string
	table    string
	dir      string
	st       store.Store
}

// newEnv reserves a table (created now) on the local DynamoDB and builds
// the binary. It fails, not skips, without dynalite when
// TIDEMARK_REQUIRE_DYNALITE is set.
func newEnv(t *testing.T) *env {
	t.Helper()
	tb := dynalitetest.NewTable(t)
	e := &env{t: t, bin: connectBinary(t), endpoint: tb.Endpoint, table: tb.Name, dir: t.TempDir()}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := dynamostore.NewDynamoStore(ctx, dynamostore.DynamoConfig{Table: tb.Name, Endpoint: tb.Endpoint, Create: true})
	require.NoError(t, err)
	e.st = st
	return e
}

// checkpointYAML is the checkpoint object of the test's table.
func (e *env) checkpointYAML() string {
	return fmt.Sprintf(`{ backend: dynamodb, dynamodb: { table: %q, endpoint: %q } }`, e.table, e.endpoint)
}

// proc is a running `connect run`.
type proc struct {
	t    *testing.T
	cmd  *exec.Cmd
	out  *lockedBuffer
	done chan struct{}
	once sync.Once
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// run writes config to a file and starts `connect run` on it, in its own
// process group; t.Cleanup kills the group.
func (e *env) run(name, config string) *proc {
	t := e.t
	t.Helper()
	path := filepath.Join(e.dir, name+".yaml")
	require.NoError(t, os.WriteFile(path, []byte(config), 0o600))
	p := &proc{t: t, out: &lockedBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(e.bin, "run", path)
	p.cmd.Dir = e.dir
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	require.NoError(t, p.cmd.Start())
	go func() {
		_ = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("connect run %s (pid %d) output tail:\n%s", name, p.cmd.Process.Pid, tailOf(p.out.String(), 6000))
		}
	})
	return p
}

// stop asks the process to shut down (SIGTERM to its group), then kills the
// group if it has not exited within a few seconds.
func (p *proc) stop() {
	p.once.Do(func() {
		pid := p.cmd.Process.Pid
		_ = syscall.Kill(-pid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(8 * time.Second):
		}
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			p.t.Errorf("connect run (pid %d) did not exit after SIGKILL", pid)
		}
	})
}

// exited reports whether the process ended (with its state).
func (p *proc) exited() (bool, string) {
	select {
	case <-p.done:
		return true, p.cmd.ProcessState.String()
	default:
		return false, ""
	}
}

func tailOf(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// cli runs `connect tidemark args...` against the test's table, with stdin,
// and returns its combined output and exit code.
func (e *env) cli(stdin string, args ...string) (string, int) {
	t := e.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	full := append([]string{"tidemark"}, args...)
	full = append(full, "--table", e.table, "--endpoint", e.endpoint)
	cmd := exec.CommandContext(ctx, e.bin, full...)
	cmd.Dir = e.dir
	cmd.Stdin = strings.NewReader(stdin)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	out, err := cmd.CombinedOutput()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		require.True(t, ok, "connect %s: %v\n%s", strings.Join(full, " "), err, out)
		code = ee.ExitCode()
	}
	return string(out), code
}

// status runs `connect tidemark status --json` and decodes it.
func (e *env) status(scope string) ops.Status {
	t := e.t
	t.Helper()
	out, code := e.cli("", "status", "--scope", scope, "--json")
	require.Equal(t, 0, code, "status failed:\n%s", out)
	var s ops.Status
	require.NoError(t, json.Unmarshal([]byte(jsonPart(out)), &s), "status output:\n%s", out)
	return s
}

// jsonPart drops any log lines before the JSON object.
func jsonPart(out string) string {
	if i := strings.Index(out, "{"); i > 0 {
		return out[i:]
	}
	return out
}

func partitionOf(t *testing.T, s ops.Status, name string) ops.PartitionStatus {
	t.Helper()
	for _, p := range s.Partitions {
		if p.Partition == name {
			return p
		}
	}
	t.Fatalf("partition %s not in status %+v", name, s)
	return ops.PartitionStatus{}
}

// waitFor polls cond until it holds or timeout passes; cond returns a
// description of the last state for the failure message.
func waitFor(t *testing.T, p *proc, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		ok, desc := cond()
		if ok {
			return
		}
		last = desc
		if p != nil {
			if gone, state := p.exited(); gone {
				t.Fatalf("waiting for %s: connect run exited (%s); last state: %s", what, state, last)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: not reached after %s; last state: %s", what, timeout, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// freePort returns a port free on 127.0.0.1 a moment ago.
func freePort(t *testing.T) int { return servertest.FreePorts(t, 1)[0] }

// --- Prometheus text format -----------------------------------------------------

type sample struct {
	Labels map[string]string
	Value  float64
}

var (
	sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)`)
	labelPair  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)
)

// parseMetrics returns every sample of body by metric name.
func parseMetrics(t *testing.T, body string) map[string][]sample {
	t.Helper()
	out := map[string][]sample{}
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		m := sampleLine.FindStringSubmatch(line)
		require.NotNil(t, m, "unparsable metrics line %q", line)
		v, err := strconv.ParseFloat(m[3], 64)
		require.NoError(t, err, "line %q", line)
		s := sample{Labels: map[string]string{}, Value: v}
		for _, lp := range labelPair.FindAllStringSubmatch(m[2], -1) {
			s.Labels[lp[1]] = lp[2]
		}
		out[m[1]] = append(out[m[1]], s)
	}
	return out
}

// find returns the samples of name whose labels include want.
func find(ms map[string][]sample, name string, want map[string]string) []sample {
	var out []sample
next:
	for _, s := range ms[name] {
		for k, v := range want {
			if s.Labels[k] != v {
				continue next
			}
		}
		out = append(out, s)
	}
	return out
}

func scrape(t *testing.T, url string) (string, error) {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: HTTP %d: %s", url, resp.StatusCode, b)
	}
	return string(b), nil
}
