package live

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/redpanda-data/benthos/v4/public/components/pure"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/probe"
)

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "c.yaml")
	require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
	return p
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// source answers /list with the partitions and /events with 2 pages of 2
// events (positions 1..4), the last without successor and with a
// watermark apart from its events.
func source(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/list" {
			_, _ = io.WriteString(w, `["a","b"]`)
			return
		}
		page := map[string]any{"events": []any{map[string]any{"id": "e1", "pos": 1}, map[string]any{"id": "e2", "pos": 2}}, "next": "2", "wm": 2}
		if r.URL.Query().Get("cursor") == "2" {
			page = map[string]any{"events": []any{map[string]any{"id": "e3", "pos": 3}, map[string]any{"id": "e4", "pos": 4}}, "wm": 9}
		}
		_ = json.NewEncoder(w).Encode(page)
	}))
	t.Cleanup(srv.Close)
	return srv
}

const sourceConfig = `
input:
  paginated_partitions:
    scope: ${PROBE_TEST_SCOPE:probe-scope}
    partitions: [ ${PROBE_TEST_PARTITIONS:a, b} ]
    checkpoint:
      backend: dynamodb
      dynamodb: { table: never-opened, endpoint: "http://127.0.0.1:1" }
    http:
      url: '${PROBE_TEST_URL}/events?cursor=${! @cursor }'
      rate_limit: reads
      events: root = this.events
      event_id: root = this.id
      event_position: root = this.pos
      successor: root = this.next | deleted()
      has_more: root = this.exists("next")
      complete_through: root = this.wm
      contract:
        empty_page: no_evidence
        positions: dense
        coordinate: integer
        finality: source
        missing_successor: end_of_traversal
        recovery: park
rate_limit_resources:
  - label: reads
    local: { count: 100, interval: 1s }
output:
  drop: {}
`

// TestLoadReadsTheConfigAsTheInputDoes: environment variables interpolated
// as `connect run` does, the rate limit resource built, the contract and
// the configured evidence read.
func TestLoadReadsTheConfigAsTheInputDoes(t *testing.T) {
	srv := source(t)
	t.Setenv("PROBE_TEST_URL", srv.URL)
	tg, err := Load(writeConfig(t, sourceConfig), quiet)
	require.NoError(t, err)
	defer func() { require.NoError(t, tg.Close(context.Background())) }()

	assert.Equal(t, "probe-scope", tg.Scope)
	assert.Equal(t, []string{"a", "b"}, tg.Partitions)
	d := tg.Declared
	assert.True(t, d.Contract.DensePositions && d.Contract.OrderedPositions)
	assert.Equal(t, coord.KindInteger, d.Coordinate)
	assert.True(t, d.CompleteThrough)
	assert.True(t, d.HasMore)
	assert.False(t, d.Marker)
	assert.False(t, d.Validate)

	o := tg.Probe(context.Background(), "a", 5)
	require.Len(t, o.First.Pages, 2)
	assert.Equal(t, probe.EndNoSuccessor, o.First.End)
	assert.Len(t, o.Second.Pages, 2)
	assert.Len(t, o.Retries, 2)
	assert.Nil(t, o.Restart, "recovery park: no restart is probed")
	assert.False(t, probe.AnyContradicted(probe.Evaluate(d, o)))
}

func TestLoadRefusesWhatItCannotProbe(t *testing.T) {
	for name, cfg := range map[string]string{
		"another input": "input:\n  generate:\n    mapping: root = {}\noutput:\n  drop: {}\n",
		"the simulated provider": `
input:
  paginated_partitions:
    scope: s
    partitions: [ p ]
    checkpoint: { backend: memory }
    simulated: { events_per_partition: 10 }
output:
  drop: {}
`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Load(writeConfig(t, cfg), quiet)
			require.Error(t, err)
		})
	}
}

// TestPartitionsToProbe: named partitions first, else the config's, else
// the discovered ones.
func TestPartitionsToProbe(t *testing.T) {
	srv := source(t)
	t.Setenv("PROBE_TEST_URL", srv.URL)
	ctx := context.Background()
	listed, err := Load(writeConfig(t, sourceConfig), quiet)
	require.NoError(t, err)
	defer func() { _ = listed.Close(ctx) }()
	got, err := listed.PartitionsToProbe(ctx, []string{"x"})
	require.NoError(t, err)
	assert.Equal(t, []string{"x"}, got)

	cfg := strings.Replace(sourceConfig, "partitions: [ ${PROBE_TEST_PARTITIONS:a, b} ]", "partitions: []\n    discover: true", 1)
	cfg = strings.Replace(cfg, "      rate_limit: reads\n", "      rate_limit: reads\n      partitions_url: '${PROBE_TEST_URL}/list'\n", 1)
	discovered, err := Load(writeConfig(t, cfg), quiet)
	require.NoError(t, err)
	defer func() { _ = discovered.Close(ctx) }()
	got, err = discovered.PartitionsToProbe(ctx, nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b"}, got)
}
