//go:build unix

package e2e

// End-to-end fault tests with the real binary (cmd/connect, built here) and
// a real dynalite started with --path, against an HTTP provider and an HTTP
// sink served by this test:
//
//   - the binary is killed with SIGKILL at random points, over several runs;
//   - dynalite is killed with SIGKILL and restarted on the same --path in
//     the middle of some runs;
//   - the provider answers 500s, responses slower than the client timeout,
//     truncated JSON and HTML pages with status 200 (the last two are
//     fetched again on the same cursor; a page that stays malformed
//     through fetch_retries parks, and the test unparks with
//     `connect tidemark unpark` between runs);
//   - the sink answers some batches with 500 (the output nacks them).
//
// The oracle, after every kill (from `connect tidemark status --json`) and
// at the end: every event the provider issued at or below a partition's
// durable progress (its applied boundary and its complete-through
// watermark) reached the sink. The last run has no faults and must finish
// with exit_when_complete, every event delivered.
//
// It needs node and dynalite (npm ci at the repository root): without them
// it skips, except under CI or TIDEMARK_REQUIRE_DYNALITE, where it fails.
// -short skips it unless the environment requires it (e2etest).

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/dynalitetest"
	"github.com/tidemark/tidemark/internal/e2etest"
)

const (
	e2eScope  = "e2e"
	e2eTable  = "tidemark-e2e"
	e2ePage   = 10
	e2eRuns   = 6
	e2eEvents = 120 // per partition, at the start; more are appended while runs go on
)

var e2eParts = []string{"p0", "p1", "p2"}

func TestEndToEndFaults(t *testing.T) {
	env := newE2EEnv(t)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("TIDEMARK_E2E_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (rerun: TIDEMARK_E2E_SEED=%d go test ./internal/e2e -run TestEndToEndFaults -v)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0xe2e))
	prov := newE2EProvider(seed)
	sink := newE2ESink(seed)
	provSrv := httptest.NewServer(prov)
	defer provSrv.Close()
	sinkSrv := httptest.NewServer(sink)
	defer sinkSrv.Close()

	faulty := env.writeConfig(t, "faulty.yaml", provSrv.URL, sinkSrv.URL, false)
	final := env.writeConfig(t, "final.yaml", provSrv.URL, sinkSrv.URL, true)

	stopAppend := prov.appendWhileRunning()
	for run := 0; run < e2eRuns; run++ {
		p := env.startConnect(t, faulty, fmt.Sprintf("run%d", run))
		// The faults below need a run that has started: its table exists
		// (created by the first run's Connect) and its partitions are being
		// read. On a loaded machine that takes any time; wait for the state,
		// not a moment.
		env.waitReading(t, p)
		live := time.Duration(500+rng.IntN(2500)) * time.Millisecond
		if rng.IntN(2) == 0 {
			// Kill dynalite in the middle of the run and bring it back on
			// the same --path.
			time.Sleep(live / 2)
			env.killDynalite(t)
			time.Sleep(time.Duration(200+rng.IntN(800)) * time.Millisecond)
			env.startDynalite(t)
			t.Logf("run %d: dynalite killed and restarted", run)
			time.Sleep(live / 2)
		} else {
			time.Sleep(live)
		}
		p.Kill()
		st := env.status(t)
		t.Logf("run %d: killed after %s; %s; sink has %d events", run, live, describeStatus(st), sink.count())
		checkE2E(t, prov, sink, st, false)
		for _, ps := range st.Partitions {
			if ps.Parked != "" {
				env.cli(t, "unpark", "--partition", ps.Partition, "--yes")
			}
		}
	}
	stopAppend()
	prov.setFaults(false)
	sink.setFaults(false)
	for _, ps := range env.status(t).Partitions {
		if ps.Parked != "" {
			env.cli(t, "unpark", "--partition", ps.Partition, "--yes")
		}
	}
	p := env.startConnect(t, final, "final")
	if err := p.Wait(2 * e2etest.Patience); err != nil {
		t.Fatalf("final run: %v", err)
	}
	st := env.status(t)
	t.Logf("final: %s; sink has %d events; provider served %d requests (%d faults)", describeStatus(st), sink.count(), prov.requests(), prov.faultCount())
	checkE2E(t, prov, sink, st, true)
}

// checkE2E is the oracle: every issued event at or below a partition's
// durable progress reached the sink; with complete, every issued event.
func checkE2E(t *testing.T, prov *e2eProvider, sink *e2eSink, st e2eStatus, complete bool) {
	t.Helper()
	got := sink.snapshot()
	for _, ps := range st.Partitions {
		progress := int64(0)
		if ps.Applied != "" {
			a, err := strconv.ParseInt(ps.Applied, 10, 64)
			if err != nil {
				t.Fatalf("%s: status applied %q is not an integer position: %v", ps.Partition, ps.Applied, err)
			}
			progress = a
		}
		if w, err := strconv.ParseInt(ps.Watermark, 10, 64); err == nil {
			progress = max(progress, w)
		}
		last := prov.last(ps.Partition)
		if complete && progress < last {
			t.Errorf("partition %s: durable progress %d, but the provider issued events through %d", ps.Partition, progress, last)
		}
		if complete {
			progress = max(progress, last)
		}
		for pos := int64(1); pos <= min(progress, last); pos++ {
			if !got[e2eID(ps.Partition, pos)] {
				t.Errorf("partition %s: event at position %d is at or below the durable progress %d (generation %d) but never reached the sink", ps.Partition, pos, progress, ps.Generation)
				break
			}
		}
	}
	for id := range got {
		part, pos, ok := strings.Cut(id, "-")
		n, err := strconv.ParseInt(pos, 10, 64)
		if !ok || err != nil || n < 1 || n > prov.last(part) {
			t.Errorf("the sink received %q, which the provider never issued", id)
		}
	}
}

func e2eID(part string, pos int64) string { return part + "-" + strconv.FormatInt(pos, 10) }

// e2eProvider serves GET /events/{partition}?after=N&limit=K: the events at
// positions after N (dense from 1), the last position as the successor and
// as complete_through. With faults on it answers some requests with a 500,
// late (after the client's timeout), with truncated JSON or with garbage.
type e2eProvider struct {
	mu     sync.Mutex
	rng    *rand.Rand
	lastP  map[string]int64
	faults bool
	nreq   int
	nfault int
}

func newE2EProvider(seed uint64) *e2eProvider {
	p := &e2eProvider{rng: rand.New(rand.NewPCG(seed, 0x9e07)), lastP: map[string]int64{}, faults: true}
	for _, part := range e2eParts {
		p.lastP[part] = e2eEvents
	}
	return p
}

func (p *e2eProvider) last(part string) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastP[part]
}

func (p *e2eProvider) setFaults(on bool) {
	p.mu.Lock()
	p.faults = on
	p.mu.Unlock()
}

func (p *e2eProvider) requests() int   { p.mu.Lock(); defer p.mu.Unlock(); return p.nreq }
func (p *e2eProvider) faultCount() int { p.mu.Lock(); defer p.mu.Unlock(); return p.nfault }

// appendWhileRunning appends an event to a random partition every 20ms
// until the returned stop is called.
func (p *e2eProvider) appendWhileRunning() (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				p.mu.Lock()
				p.lastP[e2eParts[p.rng.IntN(len(e2eParts))]]++
				p.mu.Unlock()
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

type e2eEvent struct {
	ID  string `json:"id"`
	Pos int64  `json:"pos"`
	V   string `json:"v"`
}

func (p *e2eProvider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	part := strings.TrimPrefix(r.URL.Path, "/events/")
	after, err1 := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
	limit, err2 := strconv.Atoi(r.URL.Query().Get("limit"))
	p.mu.Lock()
	last, known := p.lastP[part]
	p.nreq++
	fault := -1
	if p.faults {
		// 6% server errors, 4% too slow, 2% truncated JSON, 2% garbage.
		switch x := p.rng.IntN(100); {
		case x < 6:
			fault = 0
		case x < 10:
			fault = 1
		case x < 12:
			fault = 2
		case x < 14:
			fault = 3
		}
		if fault >= 0 {
			p.nfault++
		}
	}
	p.mu.Unlock()
	if !known || err1 != nil || err2 != nil || after < 0 || limit < 1 {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	switch fault {
	case 0:
		http.Error(w, "injected server error", http.StatusInternalServerError)
		return
	case 1:
		// Later than the client's timeout (500ms).
		select {
		case <-time.After(1200 * time.Millisecond):
		case <-r.Context().Done():
			return
		}
	}
	var evs []e2eEvent
	for pos := after + 1; pos <= last && len(evs) < limit; pos++ {
		evs = append(evs, e2eEvent{ID: e2eID(part, pos), Pos: pos, V: fmt.Sprintf("value of %s at %d", part, pos)})
	}
	top := after
	if len(evs) > 0 {
		top = evs[len(evs)-1].Pos
	}
	if evs == nil {
		evs = []e2eEvent{}
	}
	body, _ := json.Marshal(map[string]any{"events": evs, "last": top})
	w.Header().Set("Content-Type", "application/json")
	switch fault {
	case 2:
		body = body[:len(body)/2] // truncated JSON
	case 3:
		body = []byte("<html><body>502 Bad Gateway (but 200)</body></html>")
	}
	_, _ = w.Write(body)
}

// e2eSink records every event the output delivered with a 2xx answer; with
// faults on it answers some requests with a 500 instead (and records
// nothing for them).
type e2eSink struct {
	mu     sync.Mutex
	rng    *rand.Rand
	got    map[string]bool
	faults bool
}

func newE2ESink(seed uint64) *e2eSink {
	return &e2eSink{rng: rand.New(rand.NewPCG(seed, 0x5111)), got: map[string]bool{}, faults: true}
}

func (s *e2eSink) setFaults(on bool) { s.mu.Lock(); s.faults = on; s.mu.Unlock() }

func (s *e2eSink) count() int { s.mu.Lock(); defer s.mu.Unlock(); return len(s.got) }

func (s *e2eSink) snapshot() map[string]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]bool, len(s.got))
	for k := range s.got {
		out[k] = true
	}
	return out
}

func (s *e2eSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var ids []string
	dec := json.NewDecoder(r.Body)
	for {
		var m struct {
			ID string `json:"id"`
		}
		if err := dec.Decode(&m); err != nil {
			break
		}
		ids = append(ids, m.ID)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.faults && s.rng.IntN(100) < 4 {
		http.Error(w, "injected sink error", http.StatusInternalServerError)
		return
	}
	for _, id := range ids {
		if id != "" {
			s.got[id] = true
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// e2eEnv is the binary and the dynalite of one test.
type e2eEnv struct {
	root     string
	dir      string
	bin      string
	dynDir   string
	port     int
	endpoint string
	dyn      *e2etest.Proc
	env      []string
}

func newE2EEnv(t *testing.T) *e2eEnv {
	t.Helper()
	e2etest.SkipUnderShort(t, "builds the binary and runs dynalite")
	skip := func(format string, a ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, a...)
		if dynalitetest.Required() {
			t.Fatal(msg + " (CI / TIDEMARK_REQUIRE_DYNALITE is set)")
		}
		t.Skip(msg)
	}
	root := e2etest.ModuleRoot(t)
	if _, err := exec.LookPath("node"); err != nil {
		skip("node is not installed")
	}
	if _, err := os.Stat(filepath.Join(root, "node_modules", "dynalite", "cli.js")); err != nil {
		skip("dynalite is not installed (run scripts/npm-install)")
	}
	e := &e2eEnv{root: root, dir: t.TempDir(), bin: e2etest.Connect(t)}
	e.dynDir = filepath.Join(e.dir, "dynalite")
	e.port = e2etest.FreePort(t)
	e.endpoint = fmt.Sprintf("http://127.0.0.1:%d", e.port)
	e.env = e2etest.Env("TIDEMARK_DYNAMODB_ENDPOINT=" + e.endpoint)
	e.startDynalite(t)
	return e
}

// startDynalite starts dynalite on the test's port and --path and waits
// until it answers ListTables; the test's cleanup kills it.
func (e *e2eEnv) startDynalite(t *testing.T) {
	t.Helper()
	cmd := exec.Command("node", filepath.Join(e.root, "scripts", "dynalite-server.js"),
		"--host", "127.0.0.1", "--port", strconv.Itoa(e.port), "--path", e.dynDir,
		"--createTableMs", "0", "--deleteTableMs", "0", "--updateTableMs", "0")
	e.dyn = e2etest.Start(t, "dynalite", cmd)
	e2etest.WaitFor(t, e2etest.Patience, "dynalite on "+e.endpoint+" to answer ListTables", func() (bool, string) {
		req, _ := http.NewRequest(http.MethodPost, e.endpoint+"/", strings.NewReader("{}"))
		req.Header.Set("Content-Type", "application/x-amz-json-1.0")
		req.Header.Set("X-Amz-Target", "DynamoDB_20120810.ListTables")
		req.Header.Set("X-Amz-Date", time.Now().UTC().Format("20060102T150405Z"))
		req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=local/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host;x-amz-date, Signature=00")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	}, e.dyn.Running)
}

// readingMarker is what the input logs (at info) once its Connect
// succeeded: the table exists and the partitions are being read.
const readingMarker = "paginated_partitions reading"

// waitReading waits until the run p has connected to its store and
// started reading its partitions.
func (e *e2eEnv) waitReading(t *testing.T, p *e2etest.Proc) {
	t.Helper()
	e2etest.WaitFor(t, e2etest.Patience, p.Name+" to connect and read", func() (bool, string) {
		return strings.Contains(p.Out.String(), readingMarker), "not connected yet: " + e2etest.Tail(p.Out.String(), 3)
	}, p.Running)
}

// killDynalite kills dynalite with SIGKILL (its data stays in --path).
func (e *e2eEnv) killDynalite(t *testing.T) {
	t.Helper()
	if e.dyn != nil {
		e.dyn.Kill()
		e.dyn = nil
	}
}

func (e *e2eEnv) writeConfig(t *testing.T, name, provider, sink string, exit bool) string {
	t.Helper()
	cfg := fmt.Sprintf(`input:
  paginated_partitions:
    scope: %s
    partitions: [ %s ]
    exit_when_complete: %t
    poll_interval: 100ms
    park_check_interval: 200ms
    store_backoff: 100ms
    fetch_backoff: 50ms
    max_pages_in_flight: 4
    checkpoint:
      backend: dynamodb
      dynamodb:
        table: %s
        endpoint: %s
        create: true
    http:
      url: '%s/events/${! @partition }?limit=%d&after=${! if @cursor == "" { "0" } else { @cursor } }'
      timeout: 500ms
      max_retries: 2
      backoff:
        initial_interval: 20ms
        max_interval: 100ms
      events: root = this.events
      event_id: root = this.id
      event_position: root = this.pos
      event_payload: root = this
      successor: root = this.last.string()
      complete_through: root = this.last
      contract:
        empty_page: final_through_watermark
        finality: source
        positions: dense
        coordinate: integer
        tokens_may_rotate: false
        recovery: restart_from_boundary
        restart_cursor: '${! @watermark }'
pipeline:
  processors:
    - mapping: |
        root.id = @tidemark_event_id
        root.partition = @tidemark_partition
        root.position = @tidemark_position.number()
output:
  http_client:
    url: %s/sink
    verb: POST
    max_in_flight: 8
    retries: 0
    timeout: 2s
logger:
  level: INFO
`, e2eScope, strings.Join(e2eParts, ", "), exit, e2eTable, e.endpoint, provider, e2ePage, sink)
	path := filepath.Join(e.dir, name)
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// startConnect starts `connect run config`; the test's cleanup kills it.
func (e *e2eEnv) startConnect(t *testing.T, config, name string) *e2etest.Proc {
	t.Helper()
	cmd := exec.Command(e.bin, "run", config)
	cmd.Env = e.env
	return e2etest.Start(t, name, cmd)
}

// cli runs `connect tidemark <args>` against the test's table and returns
// its stdout; a failure fails t.
func (e *e2eEnv) cli(t *testing.T, sub string, args ...string) []byte {
	t.Helper()
	all := append([]string{"tidemark", sub, "--scope", e2eScope, "--table", e2eTable, "--endpoint", e.endpoint}, args...)
	cmd := exec.Command(e.bin, all...)
	cmd.Env = e.env
	res := e2etest.Run(t, e2etest.Patience, cmd)
	if res.Code != 0 {
		t.Fatalf("connect %s: exit code %d\n%s", strings.Join(all, " "), res.Code, res.Output)
	}
	return []byte(res.Stdout)
}

type e2eStatus struct {
	Epoch      uint64 `json:"epoch"`
	Partitions []struct {
		Partition  string `json:"partition"`
		Generation uint64 `json:"generation"`
		Watermark  string `json:"watermark"`
		Applied    string `json:"applied"`
		Parked     string `json:"parked"`
	} `json:"partitions"`
}

func (e *e2eEnv) status(t *testing.T) e2eStatus {
	t.Helper()
	var s e2eStatus
	out := e.cli(t, "status", "--json")
	if err := json.Unmarshal(out, &s); err != nil {
		t.Fatalf("status: %v\n%s", err, out)
	}
	slices.SortFunc(s.Partitions, func(a, b struct {
		Partition  string `json:"partition"`
		Generation uint64 `json:"generation"`
		Watermark  string `json:"watermark"`
		Applied    string `json:"applied"`
		Parked     string `json:"parked"`
	}) int {
		return strings.Compare(a.Partition, b.Partition)
	})
	return s
}

func describeStatus(s e2eStatus) string {
	var parts []string
	for _, p := range s.Partitions {
		d := fmt.Sprintf("%s g%d wm %s", p.Partition, p.Generation, p.Watermark)
		if p.Parked != "" {
			r := p.Parked
			if len(r) > 90 {
				r = r[:90] + "…"
			}
			d += " PARKED (" + r + ")"
		}
		parts = append(parts, d)
	}
	return strings.Join(parts, ", ")
}
