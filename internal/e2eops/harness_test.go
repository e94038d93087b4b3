// Package e2eops holds end-to-end tests of the operator experience: the
// real `connect` binary, built from ./cmd/connect, run against dynalite
// (scripts/with-dynalite) with the simulated provider, and driven through
// its pipeline output, its `connect tidemark` commands and its /metrics
// endpoint.
//
// Run: ./scripts/with-dynalite go test -count=1 ./internal/e2eops/
//
// Without TIDEMARK_DYNAMODB_ENDPOINT, or under -short, the tests skip; they
// fail instead when CI or TIDEMARK_REQUIRE_DYNALITE is set
// (dynalitetest.Endpoint). Every process is started in its own process
// group, bound to 127.0.0.1 only, and killed with its group in t.Cleanup
// (internal/e2etest).
package e2eops

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/dynalitetest"
	"github.com/tidemark/tidemark/internal/dynamostore"
	"github.com/tidemark/tidemark/internal/e2etest"
	"github.com/tidemark/tidemark/internal/ops"
	"github.com/tidemark/tidemark/internal/store"
)

func TestMain(m *testing.M) {
	// The binary and the test talk to dynalite with dummy credentials when
	// the environment has none (scripts/with-dynalite sets them).
	e2etest.SetDummyAWS()
	e2etest.Main(m)
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
	e := &env{t: t, bin: e2etest.Connect(t), endpoint: tb.Endpoint, table: tb.Name, dir: t.TempDir()}
	ctx, cancel := context.WithTimeout(context.Background(), e2etest.Patience)
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

// run writes config to a file and starts `connect run` on it, in its own
// process group. t.Cleanup stops it gracefully (SIGTERM, then SIGKILL after
// stopGrace): it talks to the shared dynalite directly, and dynalite 4.0.0
// exits when a client hangs up in the middle of a request.
func (e *env) run(name, config string) *e2etest.Proc {
	t := e.t
	t.Helper()
	path := filepath.Join(e.dir, name+".yaml")
	require.NoError(t, os.WriteFile(path, []byte(config), 0o600))
	cmd := exec.Command(e.bin, "run", path)
	cmd.Dir = e.dir
	p := e2etest.Start(t, "connect run "+name, cmd)
	// Cleanups run last registered first: this one before Start's kill.
	t.Cleanup(func() { p.Stop(stopGrace) })
	return p
}

// stopGrace is how long a `connect run` gets to shut down after SIGTERM
// before it is killed.
const stopGrace = 30 * time.Second

// cli runs `connect tidemark args...` against the test's table, with stdin,
// and returns its combined output and exit code.
func (e *env) cli(stdin string, args ...string) (string, int) {
	e.t.Helper()
	return e.cliEnv(nil, stdin, args...)
}

// cliEnv is cli with these variables ("NAME=value") added to the
// command's environment.
func (e *env) cliEnv(extra []string, stdin string, args ...string) (string, int) {
	t := e.t
	t.Helper()
	full := append([]string{"tidemark"}, args...)
	full = append(full, "--table", e.table, "--endpoint", e.endpoint)
	cmd := exec.Command(e.bin, full...)
	cmd.Dir = e.dir
	if extra != nil {
		cmd.Env = e2etest.Env(extra...)
	}
	cmd.Stdin = strings.NewReader(stdin)
	res := e2etest.Run(t, e2etest.Patience, cmd)
	return res.Output, res.Code
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

// waitFor polls cond until it holds, for up to e2etest.Patience; the wait
// fails at once when p (if any) has exited.
func waitFor(t *testing.T, p *e2etest.Proc, what string, cond func() (bool, string)) {
	t.Helper()
	var guards []func() error
	if p != nil {
		guards = append(guards, p.Running)
	}
	e2etest.WaitFor(t, e2etest.Patience, what, cond, guards...)
}

// scrape reads and parses a /metrics endpoint.
func scrape(url string) (string, e2etest.Metrics, error) {
	body, err := e2etest.Scrape(url)
	if err != nil {
		return "", nil, err
	}
	ms, err := e2etest.ParseMetrics(body)
	return body, ms, err
}
