package httpprovider

// Tests against real servers started by the test (internal/servertest):
// pouchdb-server, json-server and Debian's etcd, all bound to 127.0.0.1 on
// free ports. Each provider config is testdata/<name>.yaml, parsed through
// the spec, so the files double as documentation. Without the servers the
// tests skip (or fail when CI or TIDEMARK_REQUIRE_SERVERS is set); install
// them with ./scripts/install-deps.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/servertest"
	"github.com/tidemark/tidemark/provider"
)

// call makes a setup request to a test server and returns its body; any
// non-2xx status fails the test.
func call(t *testing.T, method, url, body string) []byte {
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
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("%s %s: HTTP %d: %s", method, url, resp.StatusCode, b)
	}
	return b
}

func startPouchDB(t *testing.T) *servertest.Server {
	node, script := servertest.NodeScript(t, "pouchdb-server", "bin/pouchdb-server")
	return servertest.Start(t, servertest.Config{
		Name: "pouchdb-server",
		// --in-memory: the native leveldown is not built (npm
		// --ignore-scripts). It writes log.txt and config.json into its
		// working directory, a t.TempDir().
		Command: func(ports []int) []string {
			return []string{node, script, "--host", "127.0.0.1", "--port", strconv.Itoa(ports[0]), "--in-memory", "--no-color"}
		},
		Ready: servertest.HTTPProbe(http.MethodGet, "/", "", http.StatusOK),
	})
}

// TestPouchDBChanges reads a CouchDB _changes feed page by page: every
// document is read once, in sequence order, and the final empty page
// carries last_seq as its complete-through watermark.
func TestPouchDBChanges(t *testing.T) {
	srv := startPouchDB(t)
	call(t, http.MethodPut, srv.URL+"/events", "")
	var docs []string
	for i := 1; i <= 7; i++ {
		docs = append(docs, fmt.Sprintf(`{"_id":"doc%d","n":%d}`, i, i))
	}
	call(t, http.MethodPost, srv.URL+"/events/_bulk_docs", `{"docs":[`+strings.Join(docs, ",")+`]}`)

	p := parseProvider(t, loadTestdata(t, "pouchdb_changes.yaml", map[string]string{"POUCHDB_URL": srv.URL}), nil, nil)
	if c := p.Contract(); c.EmptyPage != provider.EmptyFinalThroughWatermark || !c.OrderedPositions {
		t.Fatalf("contract %+v", c)
	}

	var (
		cursor string
		read   []string
		last   int64
		pages  []int
		final  provider.Response
	)
	for page := 0; ; page++ {
		if page > 10 {
			t.Fatal("the feed does not end")
		}
		resp := fetch(t, p, "events", cursor)
		pages = append(pages, len(resp.Events))
		for _, e := range resp.Events {
			if e.Position.Int <= last {
				t.Fatalf("position %d after %d: the feed is ordered", e.Position.Int, last)
			}
			last = e.Position.Int
			var change struct{ ID string }
			if err := json.Unmarshal(e.Payload, &change); err != nil {
				t.Fatalf("payload %s: %v", e.Payload, err)
			}
			if e.ID != change.ID+"@"+strconv.FormatInt(e.Position.Int, 10) {
				t.Fatalf("event id %q for change %s at %d", e.ID, change.ID, e.Position.Int)
			}
			read = append(read, change.ID)
		}
		if len(resp.Events) > 0 && resp.CompleteThrough != provider.IntegerWatermark(last) {
			t.Fatalf("page %d: complete_through %s, want last_seq %d", page, resp.CompleteThrough, last)
		}
		if len(resp.Events) == 0 {
			final = resp
			break
		}
		cursor = string(resp.Successor)
	}
	if !slices.Equal(pages, []int{3, 3, 1, 0}) {
		t.Errorf("page sizes %v, want [3 3 1 0]", pages)
	}
	slices.Sort(read)
	want := []string{"doc1", "doc2", "doc3", "doc4", "doc5", "doc6", "doc7"}
	if !slices.Equal(read, want) {
		t.Fatalf("read %v, want %v", read, want)
	}
	// The empty page proves completeness through last_seq; its successor is
	// where to poll next.
	if final.CompleteThrough != provider.IntegerWatermark(7) || string(final.Successor) != "7" {
		t.Fatalf("empty page: complete_through %s successor %q, want 7 and 7", final.CompleteThrough, final.Successor)
	}

	// The empty page was final through 7, not the end of the data.
	call(t, http.MethodPut, srv.URL+"/events/doc8", `{"n":8}`)
	resp := fetch(t, p, "events", string(final.Successor))
	if len(resp.Events) != 1 || resp.Events[0].ID != "doc8@8" || resp.CompleteThrough != provider.IntegerWatermark(8) {
		t.Fatalf("after an insert: %v complete_through %s", ids(resp), resp.CompleteThrough)
	}

	// Restart from the durable watermark replays what follows it.
	restart, err := p.RestartCursor(context.Background(), provider.Boundary{Partition: "events", Watermark: provider.IntegerWatermark(6)})
	if err != nil || string(restart) != "6" {
		t.Fatalf("RestartCursor = %q, %v", restart, err)
	}
	if resp := fetch(t, p, "events", string(restart)); !slices.Equal(ids(resp), []string{"doc7@7", "doc8@8"}) {
		t.Fatalf("from the restart cursor: %v", ids(resp))
	}
}

func startJSONServer(t *testing.T, db string) *servertest.Server {
	node, script := servertest.NodeScript(t, "json-server", "lib/cli/bin.js")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "db.json"), []byte(db), 0o644); err != nil {
		t.Fatal(err)
	}
	return servertest.Start(t, servertest.Config{
		Name: "json-server",
		Dir:  dir,
		Command: func(ports []int) []string {
			return []string{node, script, "--host", "127.0.0.1", "--port", strconv.Itoa(ports[0]), "--quiet", "db.json"}
		},
		Ready: servertest.HTTPProbe(http.MethodGet, "/db", "", http.StatusOK),
	})
}

// TestJSONServerShiftedPage: an insert between two requests of the same
// page number shifts the page. The provider must return each response
// faithfully (different events for the same cursor); telling a shifted page
// from a replay is the classifier's job.
func TestJSONServerShiftedPage(t *testing.T) {
	srv := startJSONServer(t, `{"items":[{"id":10},{"id":20},{"id":30},{"id":40},{"id":50},{"id":60},{"id":70}]}`)
	p := parseProvider(t, loadTestdata(t, "json_server_pages.yaml", map[string]string{"JSON_SERVER_URL": srv.URL}), nil, nil)
	original := []string{"10", "20", "30", "40", "50", "60", "70"}

	page1 := fetch(t, p, "items", "")
	if !slices.Equal(ids(page1), []string{"10", "20", "30"}) || string(page1.Successor) != "2" || !page1.HasMore {
		t.Fatalf("page 1: %v successor %q has_more %t", ids(page1), page1.Successor, page1.HasMore)
	}
	cursor := string(page1.Successor)
	first, err := p.Fetch(context.Background(), provider.Request{Scope: "test", Partition: "items", Cursor: []byte(cursor)})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids(first), []string{"40", "50", "60"}) {
		t.Fatalf("page 2: %v", ids(first))
	}

	// An insert before the cursor shifts page 2 by one.
	call(t, http.MethodPost, srv.URL+"/items", `{"id":15}`)
	retry, err := p.Fetch(context.Background(), provider.Request{Scope: "test", Partition: "items", Cursor: []byte(cursor), Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids(retry), []string{"30", "40", "50"}) {
		t.Fatalf("retry of page 2: %v, want the shifted page [30 40 50]", ids(retry))
	}
	// Same cursor, same successor, other events: a shifted page that only
	// the events reveal.
	if slices.Equal(ids(first), ids(retry)) || string(first.Successor) != string(retry.Successor) {
		t.Fatalf("first %v -> %q, retry %v -> %q", ids(first), first.Successor, ids(retry), retry.Successor)
	}

	page3 := fetch(t, p, "items", string(retry.Successor))
	if !slices.Equal(ids(page3), []string{"60", "70"}) || page3.Successor != nil || page3.HasMore {
		t.Fatalf("page 3: %v successor %q has_more %t", ids(page3), page3.Successor, page3.HasMore)
	}

	seen := map[string]bool{}
	for _, r := range []provider.Response{page1, first, retry, page3} {
		for _, id := range ids(r) {
			seen[id] = true
		}
	}
	for _, id := range original {
		if !seen[id] {
			t.Errorf("record %s is in no response", id)
		}
	}
	// The inserted record fell behind the cursor: no page after it shows it,
	// which is why page numbers alone never prove coverage.
	if seen["15"] {
		t.Errorf("record 15 was inserted behind the cursor but appeared")
	}

	// The core's classifier must refuse to advance on the shifted retry:
	// page 1 is promoted (applied boundary 30, its events durable), the
	// first response to cursor "2" was witnessed and nothing of it acked,
	// then the retry came back shifted. Positions are sparse and the
	// contract gives no coverage proof, so this is unprovable divergence,
	// recovered as the contract says, never a silent advance past record 15.
	contract := p.Contract()
	build := func(gen uint64, cursor, attempt string, r provider.Response) reconcile.Witness {
		t.Helper()
		w, err := reconcile.Build(reconcile.BuildInput{Scope: "test", Partition: "items", Generation: gen,
			InputCursor: []byte(cursor), AttemptID: attempt, Response: reconcile.FromProvider(r), Contract: contract})
		if err != nil {
			t.Fatalf("reconcile.Build(%s): %v", attempt, err)
		}
		return w
	}
	promoted := build(1, "", "g1-a1", page1)
	firstW := build(2, cursor, "g2-a1", first)
	retryW := build(2, cursor, "g2-a2", retry)
	v1, err := reconcile.Classify(reconcile.ClassifyInput{Contract: contract, Applied: coord.IntPosition(30), HasApplied: true,
		Receipts: promoted.Events, Witness: firstW})
	if err != nil || v1.Class != reconcile.FirstResponse {
		t.Fatalf("first response to cursor 2: %v, %v", v1, err)
	}
	v2, err := reconcile.Classify(reconcile.ClassifyInput{Contract: contract, Applied: coord.IntPosition(30), HasApplied: true,
		Prior: []reconcile.Witness{firstW}, Receipts: promoted.Events, Witness: retryW})
	if err != nil {
		t.Fatalf("classifying the shifted retry: %v", err)
	}
	t.Logf("shifted retry classified: %v", v2)
	if v2.Class != reconcile.UnprovableDivergence || v2.Advances() || v2.Recovery != provider.RecoveryRestartFromBoundary {
		t.Fatalf("shifted retry: %v (recovery %s); want unprovable divergence, recovered by restart_from_boundary", v2, v2.Recovery)
	}
}

func startEtcd(t *testing.T) *servertest.Server { return servertest.StartEtcd(t, "tidemark-test") }

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// etcdPut writes a key and returns the revision of the write.
func etcdPut(t *testing.T, base, key, value string) int64 {
	t.Helper()
	body := call(t, http.MethodPost, base+"/v3/kv/put", fmt.Sprintf(`{"key":%q,"value":%q}`, b64(key), b64(value)))
	var out struct {
		Header struct {
			Revision string `json:"revision"`
		} `json:"header"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatal(err)
	}
	rev, err := strconv.ParseInt(out.Header.Revision, 10, 64)
	if err != nil {
		t.Fatalf("put %s: revision %q", key, out.Header.Revision)
	}
	return rev
}

// TestEtcdRangeSnapshot reads a key prefix in pages at one pinned revision,
// then compacts that revision: the next page is an expired cursor, and the
// fresh_snapshot recovery reads the prefix again at a new revision.
func TestEtcdRangeSnapshot(t *testing.T) {
	srv := startEtcd(t)
	revs := map[string]int64{}
	for i := 1; i <= 5; i++ {
		k := fmt.Sprintf("tm/k%d", i)
		revs[k] = etcdPut(t, srv.URL, k, fmt.Sprintf("v%d", i))
	}
	etcdPut(t, srv.URL, "tn/other", "outside the prefix")

	p := parseProvider(t, loadTestdata(t, "etcd_range.yaml", map[string]string{"ETCD_URL": srv.URL}), nil, nil)
	if c := p.Contract(); !c.SnapshotMarker || c.OrderedPositions || c.Recovery != provider.RecoveryFreshSnapshot {
		t.Fatalf("contract %+v", c)
	}

	page1 := fetch(t, p, "tm", "")
	pinned := string(page1.Marker)
	if !slices.Equal(ids(page1), []string{"tm/k1@" + strconv.FormatInt(revs["tm/k1"], 10), "tm/k2@" + strconv.FormatInt(revs["tm/k2"], 10)}) ||
		!page1.HasMore || pinned == "" {
		t.Fatalf("page 1: %v has_more %t marker %q", ids(page1), page1.HasMore, pinned)
	}
	env, err := p.openCursor("tm", page1.Successor)
	if err != nil || env.Values["pinned_revision"] != pinned || env.Values["cluster_id"] == "" {
		t.Fatalf("successor %s does not pin revision %s and the cluster: %+v, %v", page1.Successor, pinned, env, err)
	}

	// Writes after the snapshot: an overwrite and a new key ahead of the
	// cursor. The pinned revision hides both.
	etcdPut(t, srv.URL, "tm/k3", "v3-overwritten")
	etcdPut(t, srv.URL, "tm/k9", "new")

	var events []provider.Event
	events = append(events, page1.Events...)
	cursor := page1.Successor
	var page2Cursor []byte
	for page := 2; cursor != nil; page++ {
		if page == 2 {
			page2Cursor = cursor
		}
		resp := fetch(t, p, "tm", string(cursor))
		if string(resp.Marker) != pinned {
			t.Fatalf("page %d: marker %q, want the pinned revision %s", page, resp.Marker, pinned)
		}
		events = append(events, resp.Events...)
		cursor = resp.Successor
		if resp.HasMore != (cursor != nil) {
			t.Fatalf("page %d: has_more %t with successor %q", page, resp.HasMore, cursor)
		}
	}
	var got []string
	for _, e := range events {
		var kv struct {
			Key, Value string
		}
		if err := json.Unmarshal(e.Payload, &kv); err != nil {
			t.Fatal(err)
		}
		got = append(got, kv.Key+"="+kv.Value)
		if e.Position.Int != revs[kv.Key] {
			t.Errorf("%s at mod_revision %d, want %d (the pinned snapshot)", kv.Key, e.Position.Int, revs[kv.Key])
		}
	}
	if want := []string{"tm/k1=v1", "tm/k2=v2", "tm/k3=v3", "tm/k4=v4", "tm/k5=v5"}; !slices.Equal(got, want) {
		t.Fatalf("snapshot read %v, want %v", got, want)
	}

	// Compact past the pinned revision: re-reading page 2 is an expired
	// cursor, never a silently different page.
	current := etcdPut(t, srv.URL, "tm/k9", "newer")
	call(t, http.MethodPost, srv.URL+"/v3/kv/compaction", fmt.Sprintf(`{"revision":"%d","physical":true}`, current))
	_, err = p.Fetch(context.Background(), provider.Request{Scope: "test", Partition: "tm", Cursor: page2Cursor, Attempt: 1})
	var exp *provider.ExpiredError
	if !errors.As(err, &exp) || !strings.Contains(exp.Reason, "required revision has been compacted") || exp.Partition != "tm" {
		t.Fatalf("fetch after compaction: %v, want *provider.ExpiredError (compacted)", err)
	}

	// fresh_snapshot: the restart cursor pins no revision, so the prefix is
	// read again at the current one.
	restart, err := p.RestartCursor(context.Background(), provider.Boundary{Partition: "tm", Watermark: provider.Watermark{}})
	if err != nil || restart != nil {
		t.Fatalf("RestartCursor = %q, %v; want the start of the prefix", restart, err)
	}
	fresh := fetch(t, p, "tm", string(restart))
	if m, _ := strconv.ParseInt(string(fresh.Marker), 10, 64); m < current {
		t.Fatalf("fresh snapshot at revision %q, want >= %d", fresh.Marker, current)
	}
	var all []provider.Event
	all = append(all, fresh.Events...)
	for cursor := fresh.Successor; cursor != nil; {
		resp := fetch(t, p, "tm", string(cursor))
		if !bytes.Equal(resp.Marker, fresh.Marker) {
			t.Fatalf("marker changed within the fresh snapshot: %q then %q", fresh.Marker, resp.Marker)
		}
		all = append(all, resp.Events...)
		cursor = resp.Successor
	}
	var keys []string
	for _, e := range all {
		keys = append(keys, e.ID[:strings.IndexByte(e.ID, '@')])
	}
	if want := []string{"tm/k1", "tm/k2", "tm/k3", "tm/k4", "tm/k5", "tm/k9"}; !slices.Equal(keys, want) {
		t.Fatalf("fresh snapshot keys %v, want %v", keys, want)
	}
}

// TestEtcdRecreatedClusterInvalidatesAStoredCursor: a cursor pins the
// revision and the cluster id of the traversal's first page. A new process
// (a new provider) validates the cursor its checkpoint holds before the
// first fetch from it: against the same cluster it reads on at the pinned
// revision; against a cluster created anew under the configured address
// (another etcd, another cluster id) the cursor is declared invalid, an
// expired cursor, and the fresh snapshot reads the new cluster's keys.
func TestEtcdRecreatedClusterInvalidatesAStoredCursor(t *testing.T) {
	old := startEtcd(t)
	for i := 1; i <= 4; i++ {
		etcdPut(t, old.URL, fmt.Sprintf("tm/k%d", i), "old")
	}
	cfg := func(url string) string {
		return loadTestdata(t, "etcd_range.yaml", map[string]string{"ETCD_URL": url})
	}
	page1 := fetch(t, parseProvider(t, cfg(old.URL), nil, nil), "tm", "")
	stored := string(page1.Successor)

	// A restart against the same cluster: valid, read on at the pin.
	etcdPut(t, old.URL, "tm/k3", "overwritten after the pin")
	page2 := fetch(t, parseProvider(t, cfg(old.URL), nil, nil), "tm", stored)
	var kv struct{ Key, Value string }
	if len(page2.Events) != 2 || json.Unmarshal(page2.Events[0].Payload, &kv) != nil || kv.Key != "tm/k3" || kv.Value != "old" {
		t.Fatalf("page 2 from the stored cursor: %v (%+v); want tm/k3 as it was at the pinned revision", ids(page2), kv)
	}

	// The cluster recreated: same keys, another history.
	recreated := startEtcd(t)
	for i := 1; i <= 4; i++ {
		etcdPut(t, recreated.URL, fmt.Sprintf("tm/k%d", i), "new")
	}
	p := parseProvider(t, cfg(recreated.URL), nil, nil)
	_, err := p.Fetch(context.Background(), provider.Request{Scope: "test", Partition: "tm", Cursor: []byte(stored)})
	var exp *provider.ExpiredError
	if !errors.As(err, &exp) || !strings.Contains(exp.Reason, "validation request declared the stored cursor invalid") {
		t.Fatalf("fetch of the old cluster's cursor from the recreated one: %v; want it declared invalid (expired)", err)
	}
	restart, err := p.RestartCursor(context.Background(), provider.Boundary{Partition: "tm", Expired: true})
	if err != nil {
		t.Fatal(err)
	}
	var values []string
	for cursor := string(restart); ; {
		resp := fetch(t, p, "tm", cursor)
		for _, e := range resp.Events {
			if err := json.Unmarshal(e.Payload, &kv); err != nil {
				t.Fatal(err)
			}
			values = append(values, kv.Key+"="+kv.Value)
		}
		if resp.Successor == nil {
			break
		}
		cursor = string(resp.Successor)
	}
	if want := []string{"tm/k1=new", "tm/k2=new", "tm/k3=new", "tm/k4=new"}; !slices.Equal(values, want) {
		t.Fatalf("fresh snapshot of the recreated cluster: %v, want %v", values, want)
	}
}

// TestEtcdClusterRecreatedWithTheSameTokenInvalidatesAStoredCursor: etcd
// derives the cluster id from the members and the initial-cluster-token,
// so a cluster recreated at the same address with the same name and token
// keeps its cluster id (checked here: the premise). The stored cursor's
// pinned revision is above the recreated cluster's current revision (its
// history restarted at 1), so `validate` declares the cursor invalid, an
// expired cursor, instead of reading the new cluster at a revision of the
// old one. The testdata's validation is the shipped example's.
func TestEtcdClusterRecreatedWithTheSameTokenInvalidatesAStoredCursor(t *testing.T) {
	example, err := os.ReadFile(filepath.Join("..", "..", "config", "examples", "http_etcd_range.yaml"))
	require.NoError(t, err)
	testdata := loadTestdata(t, "etcd_range.yaml", map[string]string{"ETCD_URL": "http://unused"})
	for _, line := range []string{"valid: ", "pin: "} {
		i := strings.Index(testdata, line)
		require.GreaterOrEqual(t, i, 0, line)
		want := strings.TrimSpace(testdata[i : i+strings.IndexByte(testdata[i:], '\n')])
		require.Contains(t, string(example), want, "the testdata's %s must be the shipped example's", line)
	}

	old := servertest.StartEtcdAt(t, "tidemark-test", nil)
	for i := 1; i <= 6; i++ {
		etcdPut(t, old.URL, fmt.Sprintf("tm/k%d", i), "old")
	}
	cfg := loadTestdata(t, "etcd_range.yaml", map[string]string{"ETCD_URL": old.URL})
	page1 := fetch(t, parseProvider(t, cfg, nil, nil), "tm", "")
	stored := string(page1.Successor)
	clusterID := func(base string) string {
		var st struct {
			Header struct {
				ClusterID string `json:"cluster_id"`
			}
		}
		require.NoError(t, json.Unmarshal(call(t, http.MethodPost, base+"/v3/maintenance/status", `{}`), &st))
		return st.Header.ClusterID
	}
	oldID := clusterID(old.URL)

	// Recreated: the same name, ports and token, a fresh data directory.
	ports := old.Ports
	old.Stop()
	recreated := servertest.StartEtcdAt(t, "tidemark-test", ports)
	require.Equal(t, old.URL, recreated.URL)
	require.Equal(t, oldID, clusterID(recreated.URL), "a cluster recreated with the same members and token keeps its cluster id: the premise")
	etcdPut(t, recreated.URL, "tm/k1", "new")
	etcdPut(t, recreated.URL, "tm/k2", "new")

	p := parseProvider(t, cfg, nil, nil)
	_, err = p.Fetch(context.Background(), provider.Request{Scope: "test", Partition: "tm", Cursor: []byte(stored)})
	var exp *provider.ExpiredError
	if !errors.As(err, &exp) || !strings.Contains(exp.Reason, "validation request declared the stored cursor invalid") {
		t.Fatalf("fetch of the old cluster's cursor from the recreated one (same cluster id): %v; want it declared invalid (expired)", err)
	}
}

// TestJSONServerOffsetOverlap: a real server paged by offset with the
// overlap check. The page after the first begins with the first page's
// last row, and CheckContinuity accepts it; after a delete on the first
// page the same request begins with another row (30 slid onto page 1, 40
// would be skipped), and CheckContinuity refuses it.
func TestJSONServerOffsetOverlap(t *testing.T) {
	srv := startJSONServer(t, `{"items":[{"id":10},{"id":20},{"id":30},{"id":40},{"id":50},{"id":60},{"id":70}]}`)
	p := parseProvider(t, loadTestdata(t, "json_server_offset.yaml", map[string]string{"JSON_SERVER_URL": srv.URL}), nil, nil)
	contract := p.Contract()
	build := func(gen uint64, cursor, attempt string, r provider.Response) reconcile.Witness {
		t.Helper()
		w, err := reconcile.Build(reconcile.BuildInput{Scope: "test", Partition: "items", Generation: gen,
			InputCursor: []byte(cursor), AttemptID: attempt, Response: reconcile.FromProvider(r), Contract: contract})
		if err != nil {
			t.Fatalf("reconcile.Build(%s): %v", attempt, err)
		}
		return w
	}

	page1 := fetch(t, p, "items", "")
	if !slices.Equal(ids(page1), []string{"10", "20", "30"}) || string(page1.Successor) != "2" {
		t.Fatalf("page 1: %v successor %q", ids(page1), page1.Successor)
	}
	w1 := build(1, "", "g1-a1", page1)
	last := w1.Events[len(w1.Events)-1]
	start := reconcile.CheckContinuity(reconcile.ContinuityInput{Contract: contract, Boundary: true, Witness: w1})
	if !start.Continues {
		t.Fatalf("page 1 from the start: %+v", start)
	}

	page2 := fetch(t, p, "items", "2")
	if !slices.Equal(ids(page2), []string{"30", "40", "50"}) {
		t.Fatalf("page 2: %v, want it to begin with page 1's last row", ids(page2))
	}
	ok := reconcile.CheckContinuity(reconcile.ContinuityInput{Contract: contract, Previous: last, HasPrevious: true, Witness: build(2, "2", "g2-a1", page2)})
	if !ok.Continues || ok.Overlap != 1 {
		t.Fatalf("page 2 continues page 1: %+v", ok)
	}

	call(t, http.MethodDelete, srv.URL+"/items/20", "")
	shifted := fetch(t, p, "items", "2")
	if !slices.Equal(ids(shifted), []string{"40", "50", "60"}) {
		t.Fatalf("page 2 after the delete: %v", ids(shifted))
	}
	got := reconcile.CheckContinuity(reconcile.ContinuityInput{Contract: contract, Previous: last, HasPrevious: true, Witness: build(2, "2", "g2-a2", shifted)})
	t.Logf("after the delete: %s", got.Reason)
	if got.Continues || !strings.Contains(got.Reason, "the page shifted") {
		t.Fatalf("page 2 after a delete on page 1: %+v; want it refused", got)
	}
}
