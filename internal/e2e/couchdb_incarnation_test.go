package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/dynalitetest"
	"github.com/tidemark/tidemark/internal/dynamostore"
	"github.com/tidemark/tidemark/internal/e2etest"
	"github.com/tidemark/tidemark/internal/ops"
	"github.com/tidemark/tidemark/internal/store"
)

// couchGate is a reverse proxy in front of pouchdb-server that can hold
// requests: every request while the test deletes and recreates a database
// (so no request sees the database missing), or only `_changes` requests
// (so the test sees the state between the incarnation change and the first
// page of the new incarnation, a state and not a moment).
type couchGate struct {
	url      string
	mu       sync.Mutex
	cond     *sync.Cond
	all      bool
	changes  bool
	inflight int
	// local holds the requests of local documents (the incarnation
	// marker's); changesServed counts the _changes answers served.
	local         bool
	changesServed int
}

func newCouchGate(t *testing.T, upstream string) *couchGate {
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	g := &couchGate{}
	g.cond = sync.NewCond(&g.mu)
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		isChanges := strings.HasSuffix(r.URL.Path, "/_changes")
		isLocal := strings.Contains(r.URL.Path, "/_local/")
		g.mu.Lock()
		for g.all || (isChanges && g.changes) || (isLocal && g.local) {
			g.cond.Wait()
		}
		g.inflight++
		g.mu.Unlock()
		defer func() {
			g.mu.Lock()
			g.inflight--
			if isChanges {
				g.changesServed++
			}
			g.cond.Broadcast()
			g.mu.Unlock()
		}()
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		g.holdLocal(false)
		g.set(false, false)
		srv.Close()
	})
	g.url = srv.URL
	return g
}

// set holds every request (all) or only _changes requests (changes); when
// all, it returns once no request is in flight.
func (g *couchGate) set(all, changes bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.all, g.changes = all, changes
	g.cond.Broadcast()
	for all && g.inflight > 0 {
		g.cond.Wait()
	}
}

// holdLocal holds the requests of local documents (the incarnation
// check) while on.
func (g *couchGate) holdLocal(on bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.local = on
	g.cond.Broadcast()
}

// served returns how many _changes answers were served.
func (g *couchGate) served() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.changesServed
}

// couchLine is one message the test pipeline writes.
type couchLine struct {
	ID            string `json:"id"`
	Seq           int64  `json:"seq"`
	Epoch         uint64 `json:"epoch"`
	Frontier      *int64 `json:"frontier"`
	FrontierEpoch uint64 `json:"frontier_epoch"`
}

// couchTestConfig is the shipped example's input section, verbatim, with a
// pipeline that attaches the frontier (partition_frontier) and records each
// message's epoch and frontier, and a file output.
func couchTestConfig(t *testing.T, dir, scope, table, endpoint, out string) string {
	b, err := os.ReadFile(examplePath(t, "http_couchdb_changes"))
	if err != nil {
		t.Fatal(err)
	}
	input, _, ok := strings.Cut(string(b), "\npipeline:")
	if !ok {
		t.Fatal("http_couchdb_changes.yaml has no pipeline section")
	}
	cfg := input + fmt.Sprintf(`
pipeline:
  threads: 1
  processors:
    - partition_frontier:
        scope: %[1]s
        refresh_interval: 200ms
        checkpoint:
          backend: dynamodb
          dynamodb:
            table: %[2]s
            endpoint: %[3]s
            region: us-east-1
    - mapping: |
        root.id = this.id
        root.seq = this.seq
        root.epoch = @tidemark_epoch.int64()
        root.frontier = @tidemark_frontier.int64().catch(null)
        root.frontier_epoch = @tidemark_frontier_epoch.int64().catch(0)
output:
  file:
    path: %[4]s
    codec: lines
`, scope, table, endpoint, out)
	path := filepath.Join(dir, "couchdb_incarnation.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func readCouchLines(t *testing.T, path string) []couchLine {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []couchLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l couchLine
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.ID != "" {
			out = append(out, l)
		}
	}
	return out
}

func couchDocs(t *testing.T, base, db, prefix string, n int) {
	var docs []string
	for i := 1; i <= n; i++ {
		docs = append(docs, fmt.Sprintf(`{"_id":"%s-%d","n":%d}`, prefix, i, i))
	}
	couch(t, http.MethodPost, base+"/"+db+"/_bulk_docs", `{"docs":[`+strings.Join(docs, ",")+`]}`)
}

// TestExampleCouchDBRecreatedDatabase runs the shipped
// http_couchdb_changes.yaml against pouchdb-server with dynalite, and
// deletes and recreates the database mid-run, (a) with new documents
// written before the next poll and (b) with none until after. A recreated
// database restarts its sequence at 1, and the stored since=30 answers
// {"results":[],"last_seq":30}: without the incarnation marker the new
// documents would never be read. With it: the change is a new, unproven
// membership epoch whose reason says why the frontier is withheld (status
// shows it while the new incarnation has certified nothing), the partition
// is read again from since=0, every document of the new incarnation is
// delivered, and no message carries a frontier of the new epoch above what
// was delivered of the new incarnation before it.
//
// (c) The new database has more changes than the stored since before the
// next poll, and the poll comes before any incarnation check: the stored
// since=30 answers the new database's changes 31-40, positions the old
// database had.
// The check before their emission finds the new incarnation: they never
// leave under the old epoch or with the old incarnation's frontier, and
// changes 1-40 are read from the start under the new epoch.
func TestExampleCouchDBRecreatedDatabase(t *testing.T) {
	for _, tc := range []struct {
		name          string
		docsBeforeYet bool
		pollFirst     bool
	}{
		{"new documents before the next poll", true, false},
		{"no documents until after", false, false},
		{"more changes than the stored since, polled before any check", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testCouchRecreated(t, tc.docsBeforeYet, tc.pollFirst)
		})
	}
}

func testCouchRecreated(t *testing.T, docsBefore, pollFirst bool) {
	const oldDocs = 30
	newDocs := 12
	if pollFirst {
		newDocs = oldDocs + 10
	}
	tb := dynalitetest.NewTable(t)
	srv := startPouchDB(t)
	gate := newCouchGate(t, srv.URL)
	const db, scope = "events", "couch-recreated"
	couch(t, http.MethodPut, srv.URL+"/"+db, "")
	couchDocs(t, srv.URL, db, "old", oldDocs)

	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	cfg := couchTestConfig(t, dir, scope, tb.Name, tb.Endpoint, out)
	cmd := exec.Command(e2etest.Connect(t), "run", "--log.level", "info", cfg)
	cmd.Env = e2etest.Env("COUCHDB_URL="+gate.url, "COUCHDB_DATABASES="+db, "COUCHDB_SCOPE="+scope,
		"COUCHDB_PAGE_SIZE=10", "COUCHDB_POLL_INTERVAL=100ms", "COUCHDB_VALIDATE_INTERVAL=300ms",
		"TIDEMARK_TABLE="+tb.Name, "TIDEMARK_DYNAMODB_ENDPOINT="+tb.Endpoint, "TIDEMARK_CREATE_TABLE=true")
	proc := e2etest.Start(t, "connect", cmd)
	logs := proc.Out

	st, err := dynamostore.NewDynamoStore(context.Background(), dynamostore.DynamoConfig{Table: tb.Name, Endpoint: tb.Endpoint})
	if err != nil {
		t.Fatal(err)
	}
	key := store.Key{Scope: scope, Partition: db}
	checkpoint := func() store.Checkpoint {
		cp, _ := st.LoadCheckpoint(context.Background(), key)
		return cp
	}
	delivered := func(prefix string, n int) (bool, string) {
		seen := map[string]bool{}
		for _, l := range readCouchLines(t, out) {
			seen[l.ID] = true
		}
		var miss []string
		for i := 1; i <= n; i++ {
			if id := fmt.Sprintf("%s-%d", prefix, i); !seen[id] {
				miss = append(miss, id)
			}
		}
		return len(miss) == 0, fmt.Sprintf("missing %v", miss)
	}
	e2etest.WaitFor(t, e2etest.Patience, "the old incarnation delivered, complete through 30, its incarnation recorded", func() (bool, string) {
		ok, why := delivered("old", oldDocs)
		cp := checkpoint()
		return ok && cp.Watermark == coord.Integer(oldDocs) && cp.Incarnation != "", fmt.Sprintf("%s; checkpoint %+v", why, cp)
	}, proc.Running)
	before := checkpoint()
	m0, err := st.LoadMembership(context.Background(), scope)
	if err != nil {
		t.Fatal(err)
	}

	// Delete and recreate the database with no request in between, then
	// hold the changes feed: only the incarnation check reaches the server.
	// (pollFirst: hold the incarnation check instead, until the stored
	// since has been answered from the new database.)
	gate.set(true, true)
	couch(t, http.MethodDelete, srv.URL+"/"+db, "")
	couch(t, http.MethodPut, srv.URL+"/"+db, "")
	if docsBefore {
		couchDocs(t, srv.URL, db, "new", newDocs)
	}
	if pollFirst {
		gate.holdLocal(true)
		n := gate.served()
		gate.set(false, false)
		e2etest.WaitFor(t, e2etest.Patience, "the stored since answered from the new database before any incarnation check", func() (bool, string) {
			return gate.served() > n, fmt.Sprintf("%d _changes answers served", gate.served()-n)
		}, proc.Running)
		gate.set(false, true)
		gate.holdLocal(false)
	} else {
		gate.set(false, true)
	}

	var status ops.Status
	e2etest.WaitFor(t, e2etest.Patience, "the incarnation change recorded: checkpoint reset, epoch unproven", func() (bool, string) {
		cp := checkpoint()
		s, err := ops.ReadStatus(context.Background(), st, scope)
		if err != nil {
			return false, err.Error()
		}
		status = s
		return cp.IncarnationEpoch > m0.Epoch && cp.Incarnation != before.Incarnation && !s.Proven,
			fmt.Sprintf("checkpoint %+v; status epoch %d proven %t reason %q", cp, s.Epoch, s.Proven, s.Reason)
	}, proc.Running)
	reset := checkpoint()
	if !reset.Watermark.IsZero() || reset.HasApplied || len(reset.Cursor) != 0 {
		t.Fatalf("the reset checkpoint keeps old coordinates: %+v", reset)
	}
	// What an operator reads: `connect tidemark status` says why.
	cli := exec.Command(e2etest.Connect(t), "tidemark", "status", "--scope", scope, "--table", tb.Name, "--endpoint", tb.Endpoint)
	cli.Env = e2etest.Env()
	res := e2etest.Run(t, e2etest.Patience, cli)
	for _, want := range []string{"incarnation changed from " + before.Incarnation + " to " + reset.Incarnation, "withheld until the new incarnation certifies", "frontier withheld"} {
		if !strings.Contains(res.Output, want) {
			t.Fatalf("status does not say %q:\n%s", want, res.Output)
		}
	}
	if status.Frontier != nil {
		t.Fatalf("status shows a frontier %s before the new incarnation certified anything", *status.Frontier)
	}

	gate.set(false, false)
	if !docsBefore {
		e2etest.WaitFor(t, e2etest.Patience, "the empty new incarnation proven (complete through its last_seq 0)", func() (bool, string) {
			s, err := ops.ReadStatus(context.Background(), st, scope)
			if err != nil {
				return false, err.Error()
			}
			return s.Proven, fmt.Sprintf("checkpoint %+v; status epoch %d reason %q", checkpoint(), s.Epoch, s.Reason)
		}, proc.Running)
		couchDocs(t, srv.URL, db, "new", newDocs)
	}
	e2etest.WaitFor(t, e2etest.Patience, "every document of the new incarnation delivered and certified", func() (bool, string) {
		ok, why := delivered("new", newDocs)
		cp := checkpoint()
		return ok && cp.Watermark == coord.Integer(int64(newDocs)), fmt.Sprintf("%s; checkpoint %+v", why, cp)
	}, proc.Running)
	e2etest.WaitFor(t, e2etest.Patience, "the new epoch proven", func() (bool, string) {
		s, err := ops.ReadStatus(context.Background(), st, scope)
		if err != nil {
			return false, err.Error()
		}
		return s.Proven && s.Frontier != nil, fmt.Sprintf("status epoch %d proven %t frontier %v reason %q", s.Epoch, s.Proven, s.Frontier, s.Reason)
	}, proc.Running)
	_ = proc.Signal(syscall.SIGTERM)
	if err := proc.Wait(e2etest.Patience); err != nil {
		t.Logf("connect ended: %v", err)
	}

	// The oracle over every message, in output order.
	lines := readCouchLines(t, out)
	newEpoch := reset.IncarnationEpoch
	deliveredNew := map[int64]bool{}
	deliveredOld := map[int64]bool{}
	for i, l := range lines {
		isNew := strings.HasPrefix(l.ID, "new-")
		if isNew {
			deliveredNew[l.Seq] = true
			if l.Epoch < newEpoch {
				t.Errorf("line %d: %s of the new incarnation carries epoch %d, before the change's %d", i, l.ID, l.Epoch, newEpoch)
			}
		} else {
			deliveredOld[l.Seq] = true
		}
		if l.Frontier == nil {
			continue
		}
		got := deliveredOld
		if l.FrontierEpoch >= newEpoch {
			got = deliveredNew
		} else if isNew {
			t.Errorf("line %d: %s of the new incarnation carries frontier %d of epoch %d, the old incarnation's", i, l.ID, *l.Frontier, l.FrontierEpoch)
		}
		for s := int64(1); s <= *l.Frontier; s++ {
			if !got[s] {
				t.Fatalf("line %d (%s, epoch %d) carries frontier %d of epoch %d, but seq %d of that incarnation was not delivered before it\nlog:\n%s",
					i, l.ID, l.Epoch, *l.Frontier, l.FrontierEpoch, s, logs.Tail(40))
			}
		}
	}
	if ok, why := delivered("new", newDocs); !ok {
		t.Fatalf("new incarnation: %s", why)
	}
	if n := logs.Count("source incarnation changed"); n == 0 {
		t.Fatalf("the log does not say the source incarnation changed:\n%s", logs.Tail(40))
	}
	t.Logf("%d messages; incarnation %s -> %s at epoch %d; status said: %s", len(lines), before.Incarnation, reset.Incarnation, newEpoch, status.Reason)
}
