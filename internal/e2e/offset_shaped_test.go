//go:build unix

package e2e

import (
	"context"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/dynalitetest"
	"github.com/tidemark/tidemark/internal/dynamostore"
	"github.com/tidemark/tidemark/internal/e2etest"
	"github.com/tidemark/tidemark/internal/fakeapi"
	"github.com/tidemark/tidemark/internal/runstatus"
	"github.com/tidemark/tidemark/internal/store"
)

// previousReleaseOffsetConfig is a pipeline as the previous release
// accepted it: a collection paged by offset through the server's
// `Link: <...>; rel="next"` header (the cursor is the next URL), ordered
// sparse positions, and no `pagination` declared. It ran, skipped the row
// a delete on an earlier page slid past the next offset, and exited 0.
const previousReleaseOffsetConfig = `
http:
  enabled: false
logger:
  level: info
input:
  paginated_partitions:
    scope: ${ITEMS_SCOPE}
    partitions: [ items ]
    exit_when_complete: true
    exit_when_parked_grace: 500ms
    poll_interval: 50ms
    max_restarts: 2
    checkpoint:
      backend: dynamodb
      dynamodb:
        table: ${TIDEMARK_TABLE}
        endpoint: ${TIDEMARK_DYNAMODB_ENDPOINT}
        create: true
    http:
      url: '${! if @cursor == "" { "${ITEMS_API_URL}/" + @partition + "?offset=0&limit=${ITEMS_PAGE_SIZE}" } else { @cursor } }'
      events: root = this
      event_id: root = this.id.string()
      event_position: root = this.id
      successor: |
        let next = @link.or("").re_find_all_submatch("<([^>]*)>; *rel=\"next\"")
        root = if $next.length() > 0 { $next.index(0).index(1) } else { deleted() }
      contract:
        positions: ordered
        empty_page: end_of_data
        missing_successor: end_of_traversal
        recovery: RECOVERY
        restart_cursor: ""
output:
  file:
    path: ${ITEMS_OUTPUT}
    codec: lines
`

// A previous-release offset config against the Offset fake, 100 rows of
// 10 per page, with 20 (page 1) deleted as soon as a second request
// arrives: read by offset, page 2 would start at 120 and 110 would never
// be delivered. The first page's successor sets offset to where a walk by
// offset stands after it: offset_shaped_successor. The page is refused
// before it is emitted or its successor promoted, so no page is ever
// requested by an offset past the start. Under recovery park the
// partition parks at once; under restart_from_boundary it re-reads the
// first page from the start and is refused again, until it parks after
// max_restarts (2) restarts: no loop, no row promoted past. Either way the
// run exits with the failure code, naming the parameter, and never shows
// a cursor in clear.
func TestPreviousReleaseOffsetConfigParksNamingTheParameter(t *testing.T) {
	for _, tc := range []struct {
		recovery string
		requests int    // requests the fake serves, all for offset 0
		also     string // more the park reason says
	}{
		{recovery: "park", requests: 1},
		{recovery: "restart_from_boundary", requests: 3, also: "this worker refused 3 pages for it; a restart from a stable boundary reads the same offsets again (max_restarts 2)"},
	} {
		t.Run(tc.recovery, func(t *testing.T) {
			fake := fakeapi.NewOffset(t, 10)
			fake.Append(offsetRows)
			var mu sync.Mutex
			var offsets []string
			fake.OnRequest(func(r *http.Request) {
				mu.Lock()
				defer mu.Unlock()
				offsets = append(offsets, r.URL.Query().Get("offset"))
				if len(offsets) == 2 {
					fake.Delete(20)
				}
			})
			table := dynalitetest.NewTable(t)
			scope := "items-previous-release-" + tc.recovery
			out := t.TempDir() + "/out.jsonl"
			cmd := exec.Command(e2etest.Connect(t), "run", writeConfig(t, strings.Replace(previousReleaseOffsetConfig, "RECOVERY", tc.recovery, 1)))
			cmd.Env = e2etest.Env(
				"ITEMS_API_URL="+fake.URL(), "ITEMS_PAGE_SIZE="+strconv.Itoa(offsetPageSize), "ITEMS_SCOPE="+scope, "ITEMS_OUTPUT="+out,
				"TIDEMARK_TABLE="+table.Name, "TIDEMARK_DYNAMODB_ENDPOINT="+table.Endpoint,
			)
			res := e2etest.Run(t, e2etest.Patience, cmd)
			require.Equal(t, runstatus.ExitCode, res.Code, "the run fails instead of exiting 0; output:\n%s", e2etest.Tail(res.Output, 30))

			want := `tidemark: partition items of scope ` + scope + ` is parked: contract violation offset_shaped_successor: partition items: generation `
			assert.Contains(t, res.Stderr, want, "the failure names the kind")
			assert.Contains(t, res.Stderr, `sets query parameter "offset" to where a walk by offset or page number from the start stands after this page`, "and the parameter")
			assert.Contains(t, res.Stderr, "declare pagination: offset")
			if tc.also != "" {
				assert.Contains(t, res.Stderr, tc.also)
			}
			assert.Equal(t, 1, strings.Count(res.Output, "(logged once per partition and kind;"), "the observation is logged once per partition")
			assert.NotContains(t, res.Output, fake.URL(), "no cursor (the server's next URL) in clear")
			assert.NotContains(t, res.Output, "offset=10", "no parameter value in clear")

			mu.Lock()
			assert.Equal(t, slices.Repeat([]string{"0"}, tc.requests), offsets, "no page was requested by an offset past the start")
			mu.Unlock()
			seen := (&offsetRun{out: out}).delivered(t)
			assert.Empty(t, seen, "nothing of a refused page is emitted")

			st, err := dynamostore.NewDynamoStore(context.Background(), dynamostore.DynamoConfig{Table: table.Name, Endpoint: table.Endpoint})
			require.NoError(t, err)
			cp, err := st.LoadCheckpoint(context.Background(), store.Key{Scope: scope, Partition: "items"})
			require.NoError(t, err)
			assert.Empty(t, cp.Cursor, "the checkpoint stays at the start: no offset-shaped successor was promoted")
			assert.False(t, cp.Complete)
			assert.Contains(t, cp.Parked, "contract violation offset_shaped_successor")
			if tc.recovery != "park" {
				assert.GreaterOrEqual(t, cp.Violations["offset_shaped_successor"], uint64(2), "the restarts carried the counts")
			}
		})
	}
}
