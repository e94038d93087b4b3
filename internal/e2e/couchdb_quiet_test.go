//go:build unix

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/dynalitetest"
	"github.com/tidemark/tidemark/internal/dynamostore"
	"github.com/tidemark/tidemark/internal/e2etest"
	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/store"
)

// TestExampleCouchDBQuietFeedGrowsAtTheHead runs http_couchdb_changes.yaml
// against pouchdb-server on a database that goes quiet: its empty head page
// ({"results":[],"last_seq":N}, successor N, the cursor itself) is recorded
// and held, and the cursor polled. Documents then arrive one at a time,
// each after the quiet page is durable again. Each answer that grows the
// quiet page is a retry of the held cursor that only grew at the head
// (docs/design.md#retry-classification, head_growth): delivered and
// promoted as its own response. No divergence and no restart is logged,
// every change is printed, and the checkpoint ends at the last sequence
// with no restart promotion ever written.
func TestExampleCouchDBQuietFeedGrowsAtTheHead(t *testing.T) {
	tb := dynalitetest.NewTable(t)
	srv := startPouchDB(t)
	const db = "quiet"
	couch(t, http.MethodPut, srv.URL+"/"+db, "")
	couch(t, http.MethodPut, srv.URL+"/"+db+"/doc-0", `{"n":0}`)

	env := e2etest.Env(
		"COUCHDB_URL="+srv.URL, "COUCHDB_DATABASES="+db, "COUCHDB_PAGE_SIZE=3",
		"COUCHDB_POLL_INTERVAL=50ms", "COUCHDB_SCOPE=quiet-scope",
		"TIDEMARK_TABLE="+tb.Name, "TIDEMARK_CREATE_TABLE=true", "TIDEMARK_DYNAMODB_ENDPOINT="+tb.Endpoint,
	)
	stdout := &e2etest.SyncBuffer{}
	cmd := exec.Command(e2etest.Connect(t), "run", "--log.level", "info", examplePath(t, "http_couchdb_changes"))
	cmd.Env = env
	cmd.Stdout = stdout
	proc := e2etest.Start(t, "connect", cmd)

	st, err := dynamostore.NewDynamoStore(context.Background(), dynamostore.DynamoConfig{Table: tb.Name, Endpoint: tb.Endpoint})
	if err != nil {
		t.Fatal(err)
	}
	key := store.Key{Scope: "quiet-scope", Partition: db}
	printed := func() map[string]int {
		got := map[string]int{}
		for _, m := range jsonLines(t, stdout.String()) {
			got[fmt.Sprint(m["id"])]++
		}
		return got
	}
	// quietAt waits until the checkpoint's cursor is seq and the held empty
	// page of that cursor is durable: the feed is quiet at seq.
	quietAt := func(seq int) {
		t.Helper()
		e2etest.WaitFor(t, e2etest.Patience, fmt.Sprintf("the feed quiet at %d with its empty page recorded", seq), func() (bool, string) {
			cp, err := st.LoadCheckpoint(context.Background(), key)
			if err != nil {
				return false, err.Error()
			}
			if string(cp.Cursor) != fmt.Sprint(seq) {
				return false, fmt.Sprintf("checkpoint at cursor %s generation %d", reconcile.CursorHash(cp.Cursor), cp.Generation)
			}
			ws, err := st.Witnesses(context.Background(), key, cp.Generation)
			if err != nil {
				return false, err.Error()
			}
			for _, w := range ws {
				if len(w.Events) == 0 && w.Disposition == reconcile.Pending {
					return true, ""
				}
			}
			return false, fmt.Sprintf("%d witnesses of generation %d, none an empty pending page", len(ws), cp.Generation)
		}, proc.Running)
	}

	quietAt(1)
	const appends = 5
	for i := 1; i <= appends; i++ {
		couch(t, http.MethodPut, fmt.Sprintf("%s/%s/doc-%d", srv.URL, db, i), fmt.Sprintf(`{"n":%d}`, i))
		id := fmt.Sprintf("doc-%d", i)
		e2etest.WaitFor(t, e2etest.Patience, id+" printed", func() (bool, string) {
			return printed()[id] > 0, fmt.Sprintf("%d changes printed", len(printed()))
		}, proc.Running)
		quietAt(i + 1)
	}

	got := printed()
	for i := 0; i <= appends; i++ {
		if id := fmt.Sprintf("doc-%d", i); got[id] != 1 {
			t.Errorf("%s printed %d times, want once", id, got[id])
		}
	}
	cp, err := st.LoadCheckpoint(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if cp.Watermark != coord.Integer(appends+1) || cp.Parked != "" || strings.HasPrefix(cp.PromotedWitness, "restart:") {
		t.Errorf("checkpoint watermark %s parked %q promoted witness %q; want last_seq %d, not parked, no restart", cp.Watermark, cp.Parked, cp.PromotedWitness, appends+1)
	}
	// Each append was answered to a cursor whose quiet page was durable: a
	// generation holds both that empty page and the grown page promoted
	// from it.
	ws, err := st.WitnessesFrom(context.Background(), key, 0)
	if err != nil {
		t.Fatal(err)
	}
	type req struct {
		gen    uint64
		cursor string
	}
	empty, grown := map[req]bool{}, map[req]bool{}
	for _, w := range ws {
		r := req{w.Generation, string(w.InputCursor)}
		if len(w.Events) == 0 {
			empty[r] = true
		} else {
			grown[r] = true
		}
	}
	heads := 0
	for r := range grown {
		if empty[r] {
			heads++
		}
	}
	if heads < appends {
		t.Errorf("%d requests answered first quiet, then with events; want one per append (%d)", heads, appends)
	}
	logs := proc.Out.String()
	for _, bad := range []string{"divergence", "restart", "shifted"} {
		if n := strings.Count(strings.ToLower(logs), bad); n > 0 {
			t.Errorf("the log mentions %q %d times on appends to a quiet feed:\n%s", bad, n, e2etest.Tail(logs, 20))
		}
	}
}
