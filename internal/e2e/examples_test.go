//go:build unix

package e2e

// The pipelines of config/examples/ run for real with the built binary:
// lint-clean, their config unit tests pass, and each one does what its
// comments say against the services it names (dynalite, pouchdb-server,
// s3rver, the fakes of internal/fakeapi), started by the test on
// 127.0.0.1: config/examples/ holds working pipelines.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/dynalitetest"
	"github.com/tidemark/tidemark/internal/dynamostore"
	"github.com/tidemark/tidemark/internal/e2etest"
	"github.com/tidemark/tidemark/internal/servertest"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/provider/simulated"
)

// The examples this package owns and runs (the real-API ones against the
// fakes of internal/fakeapi, in fakeapi_test.go). (Other examples in the
// directory are linted and tested by `make lint-configs`.)
var ownExamples = []string{"simulated_to_stdout", "http_couchdb_changes", "http_s3_listing", "http_etcd_range", "http_kinesis_shard", "http_kubernetes_list", "idempotent_sink", "frontier_trigger",
	"okta_system_log", "graph_mail_delta", "zendesk_incremental_tickets", "stripe_events", "http_s3_listing_once"}

func examplePath(t *testing.T, name string) string {
	return filepath.Join(e2etest.ModuleRoot(t), "config", "examples", name+".yaml")
}

// TestExamplesLintAndConfigTests: `connect lint` accepts each example and
// `connect test` passes its _benthos_test.yaml.
func TestExamplesLintAndConfigTests(t *testing.T) {
	env := e2etest.Env()
	for _, name := range ownExamples {
		cfg := examplePath(t, name)
		if _, err := os.Stat(filepath.Join(filepath.Dir(cfg), name+"_benthos_test.yaml")); err != nil {
			t.Errorf("%s has no config test: %v", name, err)
		}
		runConnect(t, e2etest.Patience, env, "lint", cfg)
		out, _ := runConnect(t, e2etest.Patience, env, "test", cfg)
		if !strings.Contains(out, "succeeded") {
			t.Errorf("connect test %s: %s", name, out)
		}
	}
}

// jsonLines parses one JSON object per line.
func jsonLines(t *testing.T, s string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("not a JSON line: %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

// TestExampleSimulatedToStdout: every event of every partition is printed,
// annotated with its origin, and the run ends by itself.
func TestExampleSimulatedToStdout(t *testing.T) {
	const n = 120
	out, _ := runConnect(t, e2etest.Patience, e2etest.Env("EVENTS_PER_PARTITION="+strconv.Itoa(n)),
		"run", "--log.level", "warn", examplePath(t, "simulated_to_stdout"))
	seen := map[string]bool{}
	for _, m := range jsonLines(t, out) {
		id, _ := m["id"].(string)
		payload, _ := m["payload"].(map[string]any)
		if payload["id"] != id || m["partition"] != payload["partition"] || m["retry_class"] == "" {
			t.Fatalf("line %v does not describe its event", m)
		}
		seen[id] = true
	}
	for _, p := range []string{"p0", "p1", "p2"} {
		for pos := int64(1); pos <= n; pos++ {
			if !seen[simulated.EventID(p, pos)] {
				t.Fatalf("event %s was not printed", simulated.EventID(p, pos))
			}
		}
	}
}

func startPouchDB(t *testing.T) *servertest.Server {
	node, script := servertest.NodeScript(t, "pouchdb-server", "bin/pouchdb-server")
	return servertest.Start(t, servertest.Config{
		Name: "pouchdb-server",
		Command: func(ports []int) []string {
			return []string{node, script, "--host", "127.0.0.1", "--port", strconv.Itoa(ports[0]), "--in-memory", "--no-color"}
		},
		Ready: servertest.HTTPProbe(http.MethodGet, "/", "", http.StatusOK),
	})
}

func couch(t *testing.T, method, url, body string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("%s %s: HTTP %d", method, url, resp.StatusCode)
	}
}

// TestExampleCouchDBChanges runs http_couchdb_changes.yaml against
// pouchdb-server with two databases and checkpoints in dynalite: every
// change once; the checkpoints end at each database's last_seq; a second
// run after more changes prints only the new ones (it resumes from the
// durable cursor), including a deletion.
func TestExampleCouchDBChanges(t *testing.T) {
	tb := dynalitetest.NewTable(t)
	srv := startPouchDB(t)
	dbs := []string{"orders", "invoices"}
	for _, db := range dbs {
		couch(t, http.MethodPut, srv.URL+"/"+db, "")
		var docs []string
		for i := 1; i <= 8; i++ {
			docs = append(docs, fmt.Sprintf(`{"_id":"%s-%d","n":%d}`, db, i, i))
		}
		couch(t, http.MethodPost, srv.URL+"/"+db+"/_bulk_docs", `{"docs":[`+strings.Join(docs, ",")+`]}`)
	}
	env := e2etest.Env(
		"COUCHDB_URL="+srv.URL, "COUCHDB_DATABASES="+strings.Join(dbs, ", "), "COUCHDB_PAGE_SIZE=3",
		"COUCHDB_POLL_INTERVAL=50ms", "EXIT_WHEN_COMPLETE=true",
		"TIDEMARK_TABLE="+tb.Name, "TIDEMARK_CREATE_TABLE=true",
	)
	run := func() map[string][]map[string]any {
		out, _ := runConnect(t, e2etest.Patience, env, "run", "--log.level", "warn", examplePath(t, "http_couchdb_changes"))
		byDB := map[string][]map[string]any{}
		for _, m := range jsonLines(t, out) {
			db, _ := m["database"].(string)
			byDB[db] = append(byDB[db], m)
		}
		return byDB
	}
	ids := func(ms []map[string]any) []string {
		var out []string
		for _, m := range ms {
			out = append(out, fmt.Sprint(m["id"]))
		}
		slices.Sort(out)
		return out
	}

	first := run()
	for _, db := range dbs {
		var want []string
		for i := 1; i <= 8; i++ {
			want = append(want, fmt.Sprintf("%s-%d", db, i))
		}
		slices.Sort(want)
		if got := ids(first[db]); !slices.Equal(got, want) {
			t.Fatalf("run 1, %s: changes %v, want each of %v once", db, got, want)
		}
	}
	st, err := dynamostore.NewDynamoStore(context.Background(), dynamostore.DynamoConfig{Table: tb.Name, Endpoint: tb.Endpoint})
	if err != nil {
		t.Fatal(err)
	}
	for _, db := range dbs {
		cp, err := st.LoadCheckpoint(context.Background(), store.Key{Scope: "couchdb-changes", Partition: db})
		if err != nil {
			t.Fatal(err)
		}
		if cp.Watermark != coord.Integer(8) || string(cp.Cursor) != "8" {
			t.Fatalf("%s: checkpoint cursor %q watermark %s, want last_seq 8", db, cp.Cursor, cp.Watermark)
		}
	}

	// More changes in one database, including a deletion.
	couch(t, http.MethodPut, srv.URL+"/orders/orders-9", `{"n":9}`)
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/orders/orders-1", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Rev string `json:"_rev"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&doc)
	resp.Body.Close()
	couch(t, http.MethodDelete, srv.URL+"/orders/orders-1?rev="+doc.Rev, "")

	second := run()
	if len(second["invoices"]) != 0 {
		t.Fatalf("run 2 printed invoices changes again: %v", ids(second["invoices"]))
	}
	got := ids(second["orders"])
	if !slices.Equal(got, []string{"orders-1", "orders-9"}) {
		t.Fatalf("run 2, orders: changes %v, want only orders-9 and the deletion of orders-1", got)
	}
	for _, m := range second["orders"] {
		if m["id"] == "orders-1" && (m["deleted"] != true || m["doc"] != nil) {
			t.Fatalf("the deletion is printed as %v", m)
		}
	}
}

// TestExampleIdempotentSink runs idempotent_sink.yaml twice against
// dynalite, the second time under another scope so that every event is
// delivered again: the events table holds each event once, under its id,
// with the same value.
func TestExampleIdempotentSink(t *testing.T) {
	const n = 100
	ckpt, events := dynalitetest.NewTable(t), dynalitetest.NewTable(t)
	base := e2etest.Env("TIDEMARK_TABLE="+ckpt.Name, "EVENTS_TABLE="+events.Name, "EVENTS_PER_PARTITION="+strconv.Itoa(n))
	runConnect(t, e2etest.Patience, append(base, "TIDEMARK_SCOPE=sink-a"), "run", "--log.level", "warn", examplePath(t, "idempotent_sink"))

	ctx := context.Background()
	c, err := dynamostore.NewKV(ctx, dynamostore.KVConfig{DynamoConfig: dynamostore.DynamoConfig{Table: events.Name, Endpoint: events.Endpoint}})
	if err != nil {
		t.Fatal(err)
	}
	parts := []string{"p0", "p1", "p2", "p3"}
	stored := map[string]string{}
	for _, p := range parts {
		for pos := int64(1); pos <= n; pos++ {
			id := simulated.EventID(p, pos)
			v, err := c.Get(ctx, id)
			if err != nil {
				t.Fatalf("event %s is not in the sink: %v", id, err)
			}
			var m map[string]any
			if err := json.Unmarshal(v, &m); err != nil || m["id"] != id {
				t.Fatalf("event %s stored as %s (%v)", id, v, err)
			}
			stored[id] = string(v)
		}
	}
	count := func() int {
		client, err := dynalitetest.Client(ctx, events.Endpoint)
		if err != nil {
			t.Fatal(err)
		}
		out, err := client.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(events.Name), Select: "COUNT"})
		if err != nil {
			t.Fatal(err)
		}
		return int(out.Count)
	}
	if got := count(); got != len(parts)*n {
		t.Fatalf("the sink holds %d items after run 1, want %d", got, len(parts)*n)
	}

	// Replay everything (a new scope starts from the beginning): same keys,
	// same values, no new items. The scope is not in the stored value.
	runConnect(t, e2etest.Patience, append(base, "TIDEMARK_SCOPE=sink-b"), "run", "--log.level", "warn", examplePath(t, "idempotent_sink"))
	if got := count(); got != len(parts)*n {
		t.Fatalf("the sink holds %d items after the replay, want %d", got, len(parts)*n)
	}
	for id, v := range stored {
		got, err := c.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		var a, b map[string]any
		_ = json.Unmarshal([]byte(v), &a)
		_ = json.Unmarshal(got, &b)
		delete(a, "scope")
		delete(b, "scope")
		if fmt.Sprint(a) != fmt.Sprint(b) {
			t.Fatalf("event %s changed on replay: %s -> %s", id, v, got)
		}
	}
}

// TestExampleFrontierTrigger runs frontier_trigger.yaml: every event
// reaches the event file; triggers name distinct, proven frontiers, never
// past the last event of any partition, and one fires at least.
func TestExampleFrontierTrigger(t *testing.T) {
	const n = 200
	dir := t.TempDir()
	evPath, trPath := filepath.Join(dir, "events.jsonl"), filepath.Join(dir, "triggers.jsonl")
	runConnect(t, e2etest.Patience, e2etest.Env("EVENTS_PATH="+evPath, "TRIGGERS_PATH="+trPath, "EVENTS_PER_PARTITION="+strconv.Itoa(n)),
		"run", "--log.level", "warn", examplePath(t, "frontier_trigger"))
	read := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	seen := map[string]bool{}
	for _, m := range jsonLines(t, read(evPath)) {
		seen[fmt.Sprint(m["id"])] = true
		if f, ok := m["frontier"].(float64); ok && f > n {
			t.Fatalf("event %v carries a frontier past the data", m)
		}
	}
	for _, p := range []string{"p0", "p1", "p2", "p3"} {
		for pos := int64(1); pos <= n; pos++ {
			if !seen[simulated.EventID(p, pos)] {
				t.Fatalf("event %s missing from the event file", simulated.EventID(p, pos))
			}
		}
	}
	triggers := jsonLines(t, read(trPath))
	if len(triggers) == 0 {
		t.Fatal("no trigger fired")
	}
	fired := map[float64]bool{}
	for _, tr := range triggers {
		f, _ := tr["complete_through"].(float64)
		if tr["trigger"] != "frontier_advanced" || f < 1 || f > n || fired[f] {
			t.Fatalf("bad or repeated trigger %v", tr)
		}
		fired[f] = true
	}
	t.Logf("%d triggers, frontiers %v", len(triggers), keys(fired))
}

func keys(m map[float64]bool) []float64 {
	var out []float64
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
