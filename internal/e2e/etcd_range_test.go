//go:build unix

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/dynalitetest"
	"github.com/tidemark/tidemark/internal/dynamostore"
	"github.com/tidemark/tidemark/internal/e2etest"
	"github.com/tidemark/tidemark/internal/servertest"
	"github.com/tidemark/tidemark/internal/store"
)

// startEtcd starts Debian's etcd on 127.0.0.1 (client and peer ports free)
// with its data in a temporary directory.
func startEtcd(t *testing.T) *servertest.Server { return servertest.StartEtcd(t, "tidemark-e2e") }

// etcdClient writes keys through etcd's JSON gateway and keeps the history
// of every write (one writer at a time), so the test knows each key's value
// at any revision.
type etcdClient struct {
	t    *testing.T
	base string

	mu      sync.Mutex
	history map[string][]etcdWrite // by key, in revision order
	rev     int64
}

type etcdWrite struct {
	rev   int64
	value string
}

func (c *etcdClient) post(path, body string) []byte {
	resp, err := http.Post(c.base+path, "application/json", bytes.NewReader([]byte(body)))
	if err != nil {
		c.t.Errorf("POST %s: %v", path, err)
		return nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		c.t.Errorf("POST %s: HTTP %d: %s", path, resp.StatusCode, b)
		return nil
	}
	return b
}

// put writes key=value and records the revision of the write.
func (c *etcdClient) put(key, value string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.post("/v3/kv/put", fmt.Sprintf(`{"key":%q,"value":%q}`, base64.StdEncoding.EncodeToString([]byte(key)), base64.StdEncoding.EncodeToString([]byte(value))))
	var out struct {
		Header struct {
			Revision string `json:"revision"`
		} `json:"header"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		c.t.Errorf("put %s: %v", key, err)
		return
	}
	rev, err := strconv.ParseInt(out.Header.Revision, 10, 64)
	if err != nil {
		c.t.Errorf("put %s: revision %q", key, out.Header.Revision)
		return
	}
	if c.history == nil {
		c.history = map[string][]etcdWrite{}
	}
	c.history[key] = append(c.history[key], etcdWrite{rev, value})
	c.rev = rev
}

// at returns key's value and mod_revision at revision rev.
func (c *etcdClient) at(key string, rev int64) (string, int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var w etcdWrite
	found := false
	for _, h := range c.history[key] {
		if h.rev <= rev {
			w, found = h, true
		}
	}
	return w.value, w.rev, found
}

func (c *etcdClient) lastRevision() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rev
}

// gate is an HTTP proxy whose requests cross a link with latency, and which
// can be held: requests that arrive while it is held wait until it is
// released.
type gate struct {
	mu   sync.Mutex
	open chan struct{}
}

func newGate(t *testing.T, upstream string, latency time.Duration) (*gate, string) {
	target, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	g := &gate{open: make(chan struct{})}
	close(g.open)
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		open := g.open
		g.mu.Unlock()
		<-open
		time.Sleep(latency)
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		g.release()
		srv.Close()
	})
	return g, srv.URL
}

func (g *gate) hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
		g.open = make(chan struct{})
	default:
	}
}

func (g *gate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
	default:
		close(g.open)
	}
}

// etcdLine is one line of the example's output.
type etcdLine struct {
	Prefix      string `json:"prefix"`
	Key         string `json:"key"`
	Value       string `json:"value"`
	ModRevision int64  `json:"mod_revision"`
	Revision    int64  `json:"revision"`
}

// decodeLines reads the output file at path one JSON line at a time:
// the lines that decode and pass whole, and the number of torn ones (a
// kill during a write). A missing file holds nothing.
func decodeLines[T any](t *testing.T, path string, whole func(T) bool) ([]T, int) {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, 0
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []T
	torn := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l T
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil || !whole(l) {
			torn++
			continue
		}
		out = append(out, l)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out, torn
}

// etcdLines reads the example's output file.
func etcdLines(t *testing.T, path string) ([]etcdLine, int) {
	return decodeLines(t, path, func(l etcdLine) bool { return l.Key != "" })
}

// TestExampleEtcdRangeSnapshotSurvivesKill9AndCompaction runs
// http_etcd_range.yaml against etcd while a writer overwrites random keys
// of the range the whole time. Run 1 pins the revision of its first page
// and is killed with SIGKILL mid-range; run 2 validates the stored cursor
// (same cluster) and reads on at the same pinned revision, which the
// checkpoint's cursor carried. Mid-way through run 2 etcd is compacted past
// that revision: the next page is an expired cursor, and the fresh snapshot
// reads the whole range again at a new pinned revision, to the end. Every
// key is printed; every line holds the key exactly as it was at the
// revision it names (never a concurrent overwrite); the partition ends
// complete and unparked.
func TestExampleEtcdRangeSnapshotSurvivesKill9AndCompaction(t *testing.T) {
	tb := dynalitetest.NewTable(t)
	srv := startEtcd(t)
	etcd := &etcdClient{t: t, base: srv.URL}
	const n = 150
	var keys []string
	for i := range n {
		k := fmt.Sprintf("tm/key-%03d", i)
		keys = append(keys, k)
		etcd.put(k, "v0")
	}
	etcd.put("tn/outside", "not in the range")

	// The writer overwrites random keys of the range until the test ends.
	stop := make(chan struct{})
	var writes sync.WaitGroup
	writes.Add(1)
	go func() {
		defer writes.Done()
		for i := 1; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond): // pacing, not a wait for a condition
			}
			etcd.put(keys[rand.IntN(n)], "v"+strconv.Itoa(i))
		}
	}()
	stopWriter := func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		writes.Wait()
	}
	defer stopWriter()

	g, link := newGate(t, srv.URL, 30*time.Millisecond)
	out := filepath.Join(t.TempDir(), "keys.jsonl")
	env := e2etest.Env(
		"ETCD_URL="+link, "ETCD_PREFIXES=tm", "ETCD_PAGE_SIZE=5", "ETCD_OUTPUT="+out, "ETCD_POLL_INTERVAL=50ms",
		"TIDEMARK_TABLE="+tb.Name, "TIDEMARK_CREATE_TABLE=true", "TIDEMARK_DYNAMODB_ENDPOINT="+dynaliteShield(t, tb.Endpoint),
	)
	bin := e2etest.Connect(t)
	printed := func() int {
		ls, _ := etcdLines(t, out)
		return len(ls)
	}

	// Run 1, killed mid-range.
	cmd := exec.Command(bin, "run", "--log.level", "warn", examplePath(t, "http_etcd_range"))
	cmd.Env = env
	first := e2etest.Start(t, "run 1", cmd)
	e2etest.WaitFor(t, e2etest.Patience, "run 1 printed some keys", func() (bool, string) {
		return printed() >= 20 || first.Exited(), fmt.Sprintf("%d lines", printed())
	})
	if first.Exited() {
		t.Fatal("run 1 ended before the kill: the test proved nothing")
	}
	if err := first.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait(e2etest.Patience)
	afterKill := printed()
	if afterKill >= n {
		t.Fatalf("run 1 had printed all %d keys before the kill: the test proved nothing", afterKill)
	}

	// Run 2 reads on, then etcd compacts past the pinned revision while
	// the range is held at the link (no request crosses it meanwhile).
	cmd = exec.Command(bin, "run", "--log.level", "warn", examplePath(t, "http_etcd_range"))
	cmd.Env = env
	second := e2etest.Start(t, "run 2", cmd)
	e2etest.WaitFor(t, e2etest.Patience, "run 2 read on from the stored cursor", func() (bool, string) {
		return printed() >= afterKill+10, fmt.Sprintf("%d lines (%d after the kill)", printed(), afterKill)
	}, second.Running)
	g.hold()
	if second.Exited() || printed() >= afterKill+n {
		t.Fatal("run 2 ended its traversal before the compaction: the test proved nothing")
	}
	compactedAt := etcd.lastRevision()
	etcd.post("/v3/kv/compaction", fmt.Sprintf(`{"revision":"%d","physical":true}`, compactedAt))
	g.release()
	if err := second.Wait(e2etest.Patience); err != nil {
		t.Fatalf("run 2: %v\n%s", err, second.Out.Tail(40))
	}
	stopWriter()

	lines, torn := etcdLines(t, out)
	if torn > 1 {
		t.Fatalf("%d torn lines: only the line a kill interrupted may be torn", torn)
	}
	seen := map[string]bool{}
	fresh := map[string]bool{}
	pinsBefore := map[int64]bool{}
	hidden := 0
	for _, l := range lines {
		if l.Prefix != "tm" {
			t.Fatalf("line %+v is not of the prefix tm", l)
		}
		value, mod, ok := etcd.at(l.Key, l.Revision)
		if !ok || l.Value != value || l.ModRevision != mod {
			t.Fatalf("%s printed as %q (mod_revision %d) at revision %d; at that revision it was %q (mod_revision %d): not read at the pinned revision", l.Key, l.Value, l.ModRevision, l.Revision, value, mod)
		}
		if now, _, _ := etcd.at(l.Key, etcd.lastRevision()); now != l.Value {
			hidden++ // overwritten after the pin, and read as it was
		}
		seen[l.Key] = true
		if l.Revision >= compactedAt {
			fresh[l.Key] = true
		} else {
			pinsBefore[l.Revision] = true
		}
	}
	for _, k := range keys {
		if !seen[k] {
			t.Errorf("key %s was never printed", k)
		}
		if !fresh[k] {
			t.Errorf("key %s is not in the fresh snapshot after the compaction", k)
		}
	}
	if len(pinsBefore) != 1 {
		t.Errorf("before the compaction the range was read at revisions %v; want one pinned revision across the kill", pinsBefore)
	}
	if hidden == 0 {
		t.Error("no printed key had been overwritten after its pinned revision: the writer did not race the traversal")
	}
	t.Logf("%d lines: %d before the kill, %d hidden overwrites, compacted at %d", len(lines), afterKill, hidden, compactedAt)

	st, err := dynamostore.NewDynamoStore(context.Background(), dynamostore.DynamoConfig{Table: tb.Name, Endpoint: tb.Endpoint})
	if err != nil {
		t.Fatal(err)
	}
	cp, err := st.LoadCheckpoint(context.Background(), store.Key{Scope: "etcd-range", Partition: "tm"})
	if err != nil {
		t.Fatal(err)
	}
	if !cp.Complete || cp.Parked != "" {
		t.Errorf("checkpoint complete=%v parked %q; want the range complete", cp.Complete, cp.Parked)
	}
}
