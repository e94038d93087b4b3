//go:build unix

package e2e

// The real binary, a local page server and dynalite: a finite list whose
// last page has no successor is read once and completes durably; a restart
// after completion reads nothing; a retry that omits an event an earlier
// answer showed, with a watermark below it, parks the partition instead of
// skipping the event (docs/design.md#completion-and-promotion,
// #retry-classification).

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/dynalitetest"
	"github.com/tidemark/tidemark/internal/dynamostore"
	"github.com/tidemark/tidemark/internal/e2etest"
	"github.com/tidemark/tidemark/internal/store"
)

// pageServer answers GET /<partition>?cursor=<c> from a script: the n-th
// request of a cursor gets answers[partition][cursor][min(n, len-1)]. It
// counts requests.
type pageServer struct {
	*httptest.Server
	mu       sync.Mutex
	answers  map[string]map[string][]map[string]any
	requests map[string]int // "partition/cursor" -> requests
	total    int
}

func newPageServer(t *testing.T, answers map[string]map[string][]map[string]any) *pageServer {
	s := &pageServer{answers: answers, requests: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		part, cursor := strings.TrimPrefix(r.URL.Path, "/"), r.URL.Query().Get("cursor")
		s.mu.Lock()
		as, ok := s.answers[part][cursor]
		n := s.requests[part+"/"+cursor]
		s.requests[part+"/"+cursor]++
		s.total++
		s.mu.Unlock()
		if !ok {
			http.Error(w, "no such cursor", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(as[min(n, len(as)-1)])
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *pageServer) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

func items(ids ...string) []map[string]any {
	out := make([]map[string]any, 0, len(ids))
	for _, id := range ids {
		var pos int
		_, _ = fmt.Sscanf(id[strings.LastIndex(id, "-")+1:], "%d", &pos)
		out = append(out, map[string]any{"id": id, "pos": pos})
	}
	return out
}

// listConfig is a pipeline that reads the page server's partitions into
// stdout lines of {"id", "partition"}; extraOutput, when set, replaces the
// output.
func listConfig(scope, table, endpoint, server string, parts []string, contract, output string, exit bool) string {
	return fmt.Sprintf(`
input:
  paginated_partitions:
    scope: %s
    partitions: [ %s ]
    exit_when_complete: %v
    poll_interval: 10ms
    max_batch_size: 1
    checkpoint:
      backend: dynamodb
      dynamodb: { table: %s, endpoint: %s, create: true }
    http:
      url: '%s/${! @partition }?cursor=${! @cursor.escape_url_query() }'
      events: root = this.items
      event_id: root = this.id
      event_position: root = this.pos
      successor: root = this.next | deleted()
      complete_through: root = this.complete_through | deleted()
      contract:
        finality: source
%s
pipeline:
  processors:
    - mapping: 'root = {"id": this.id, "partition": @tidemark_partition}'
%s
`, scope, strings.Join(parts, ", "), exit, table, endpoint, server, contract, output)
}

const stdoutOutput = `output:
  stdout: {}`

func loadCheckpoint(t *testing.T, table, endpoint string, k store.Key) store.Checkpoint {
	t.Helper()
	st, err := dynamostore.NewDynamoStore(context.Background(), dynamostore.DynamoConfig{Table: table, Endpoint: endpoint})
	require.NoError(t, err)
	cp, err := st.LoadCheckpoint(context.Background(), k)
	require.NoError(t, err)
	return cp
}

func writeConfig(t *testing.T, cfg string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "pipeline.yaml")
	require.NoError(t, os.WriteFile(path, []byte(cfg), 0o600))
	return path
}

// A finite list (an object listing, a Kubernetes list) whose last page has
// no successor: each event is delivered once, the partition completes
// durably and the binary exits; run again, it reads nothing.
func TestFiniteListCompletesOnceAndARestartReadsNothing(t *testing.T) {
	tb := dynalitetest.NewTable(t)
	srv := newPageServer(t, map[string]map[string][]map[string]any{
		"a": {
			"":     {{"items": items("a-1", "a-2"), "next": "a-p2"}},
			"a-p2": {{"items": items("a-3", "a-4"), "next": "a-p3"}},
			"a-p3": {{"items": items("a-5")}},
		},
		"b": {
			"": {{"items": items("b-1", "b-2", "b-3")}},
		},
	})
	contract := `        empty_page: end_of_data
        positions: dense
        missing_successor: end_of_traversal`
	cfg := writeConfig(t, listConfig("finite", tb.Name, tb.Endpoint, srv.URL, []string{"a", "b"}, contract, stdoutOutput, true))
	out, _ := runConnect(t, e2etest.Patience, e2etest.Env(), "run", "--log.level", "warn", cfg)
	seen := map[string]int{}
	for _, m := range jsonLines(t, out) {
		seen[m["id"].(string)]++
	}
	assert.Equal(t, map[string]int{"a-1": 1, "a-2": 1, "a-3": 1, "a-4": 1, "a-5": 1, "b-1": 1, "b-2": 1, "b-3": 1}, seen, "each event once per traversal")
	for _, p := range []string{"a", "b"} {
		cp := loadCheckpoint(t, tb.Name, tb.Endpoint, store.Key{Scope: "finite", Partition: p})
		assert.True(t, cp.Complete, "partition %s is durably complete", p)
	}
	status, _ := runConnect(t, e2etest.Patience, e2etest.Env(), "tidemark", "status", "--scope", "finite", "--table", tb.Name, "--endpoint", tb.Endpoint)
	assert.Contains(t, status, "a (complete)")
	assert.Contains(t, status, "b (complete)")

	before := srv.count()
	out, _ = runConnect(t, e2etest.Patience, e2etest.Env(), "run", "--log.level", "warn", cfg)
	assert.Empty(t, jsonLines(t, out), "a restart after completion re-delivers nothing")
	assert.Equal(t, before, srv.count(), "and fetches nothing")
}

// The seeds' reasoned example with a lagging watermark: the checkpoint is at
// the start; the first answer is 501, 502, 503 (successor N7); 502's
// delivery fails once; the retry answers 501, 503 (successor N8) with a
// complete-through watermark of 500. The partition parks and neither
// successor is promoted, so 502 is never skipped.
func TestOmittedEventRetryWithALaggingWatermarkParks(t *testing.T) {
	tb := dynalitetest.NewTable(t)
	srv := newPageServer(t, map[string]map[string][]map[string]any{
		"p": {
			"": {
				{"items": items("e-501", "e-502", "e-503"), "next": "N7"},
				{"items": items("e-501", "e-503"), "next": "N8", "complete_through": 500},
			},
			"N7": {{"items": []any{}, "next": "N7"}},
			"N8": {{"items": []any{}, "next": "N8"}},
		},
	})
	contract := `        empty_page: no_evidence
        positions: ordered
        watermark_covers_positions: true
        recovery: park`
	// The first delivery of e-502 is rejected (a failed write downstream);
	// everything else is printed.
	output := `output:
  switch:
    cases:
      - check: 'this.id == "e-502" && count("fail-e-502") == 1'
        output:
          reject: "injected delivery failure"
      - output:
          stdout: {}`
	cfg := writeConfig(t, listConfig("omit", tb.Name, tb.Endpoint, srv.URL, []string{"p"}, contract, output, false))
	cmd := exec.Command(e2etest.Connect(t), "run", "--log.level", "info", cfg)
	cmd.Env = e2etest.Env()
	proc := e2etest.Start(t, "connect", cmd)
	key := store.Key{Scope: "omit", Partition: "p"}
	e2etest.WaitFor(t, e2etest.Patience, "the partition parked", func() (bool, string) {
		st, err := dynamostore.NewDynamoStore(context.Background(), dynamostore.DynamoConfig{Table: tb.Name, Endpoint: tb.Endpoint})
		if err != nil {
			return false, err.Error()
		}
		cp, err := st.LoadCheckpoint(context.Background(), key)
		if err != nil {
			return false, err.Error()
		}
		return cp.Parked != "", fmt.Sprintf("generation %d cursor %q", cp.Generation, cp.Cursor)
	}, proc.Running)
	cp := loadCheckpoint(t, tb.Name, tb.Endpoint, key)
	assert.Contains(t, cp.Parked, "showed position 502")
	assert.Empty(t, cp.Cursor, "neither N7 nor N8 was promoted")
	assert.Equal(t, uint64(1), cp.Generation)
	e2etest.WaitUntil(t, e2etest.Patience, "the park is logged", func() bool {
		return strings.Contains(proc.Out.String(), "parked")
	}, proc.Running)
	proc.Stop(e2etest.Patience)
}
