package bench

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"text/template"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/require"

	_ "github.com/redpanda-data/benthos/v4/public/components/io"

	_ "github.com/tidemark/tidemark/plugin"

	"github.com/tidemark/tidemark/internal/dynalitetest"
)

// The http provider against a plain Redpanda Connect pipeline
// (plain_http.yaml): both read the same local page server, 100 events a
// page, 20 ms a page, JSON; output drop.

//go:embed plain_http.yaml
var plainHTTPConfig string

//go:embed tidemark_http.yaml
var tidemarkHTTPConfig string

var configTemplates = template.New("").Funcs(template.FuncMap{"join": strings.Join})

// vsConfig is what the two templates are rendered with.
type vsConfig struct {
	URL string
	// Scope: tidemark's scope; the memory backend is one store per process,
	// so runs in one process need scopes of their own.
	Scope      string
	Partitions []string
	Backend    string // tidemark: memory or dynamodb
	Endpoint   string
	Table      string
}

func renderConfig(tb testing.TB, name, text string, c vsConfig) string {
	tb.Helper()
	t, err := template.Must(configTemplates.Clone()).New(name).Parse(text)
	if err != nil {
		tb.Fatal(err)
	}
	var b strings.Builder
	if err := t.Execute(&b, c); err != nil {
		tb.Fatal(err)
	}
	return b.String()
}

// pageServer serves pages of partitions: page n (cursor "n"; "" and "0" are
// the first) of every partition is the same JSON document of pageSize
// events with ids and positions n*pageSize+1.. and "next" the following
// page's cursor, "" on the last; cursor "end" is an empty page (the plain
// pipeline's request after a partition's last page). Every answer waits
// latency first. It records what it served.
type pageServer struct {
	URL     string
	pages   [][]byte
	end     []byte
	latency time.Duration

	mu       sync.Mutex
	served   map[string][]int // partition -> pages, in the order served
	inFlight map[string]int
	maxIn    int // the most requests of one partition in flight at once
	ends     int // "end" requests
	bad      []string
	first    time.Time // the first request
	last     time.Time // the last page's answer (of any partition)
	onFirst  func()
}

func newPageServer(tb testing.TB, pages, pageSize int, latency time.Duration) *pageServer {
	tb.Helper()
	s := &pageServer{latency: latency, served: map[string][]int{}, inFlight: map[string]int{}, end: []byte(`{"items":[],"next":""}`)}
	for n := range pages {
		s.pages = append(s.pages, renderPage(n, pages, pageSize))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	tb.Cleanup(func() { _ = srv.Close() })
	s.URL = "http://" + ln.Addr().String()
	return s
}

// renderPage is page n of pages: nested events shaped like identity
// providers' audit-log entries (about 1 KB each: objects three levels deep,
// an array of objects, strings, numbers, booleans and nulls), what users
// send rather than flat records.
func renderPage(n, pages, pageSize int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"items":[`)
	for i := range pageSize {
		if i > 0 {
			b.WriteByte(',')
		}
		pos := n*pageSize + i + 1
		fmt.Fprintf(&b, `{"id":"evt-%08d","position":%d,"published":"2026-12-03T10:%02d:%02d.123Z","eventType":"user.session.start","severity":"INFO",`+
			`"actor":{"id":"u-%d","type":"User","alternateId":"user%d@example.com","displayName":"Some Body","detail":null},`+
			`"client":{"userAgent":{"rawUserAgent":"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36","os":"Linux","browser":"CHROME"},"zone":"null","device":"Computer","ipAddress":"10.0.%d.%d",`+
			`"geographicalContext":{"city":"Paris","state":"Ile-de-France","country":"France","postalCode":"75001","geolocation":{"lat":48.8566,"lon":2.3522}}},`+
			`"outcome":{"result":"SUCCESS","reason":null},`+
			`"target":[{"id":"app-%d","type":"AppInstance","alternateId":"Example App","displayName":"Example App","detailEntry":{"signOnModeType":"SAML_2_0"}},{"id":"grp-1","type":"UserGroup","alternateId":"Everyone","displayName":"Everyone","detailEntry":null}],`+
			`"transaction":{"type":"WEB","id":"tx-%d","detail":{}},`+
			`"debugContext":{"debugData":{"requestId":"req-%08d","requestUri":"/api/v1/authn","threatSuspected":false,"risk":{"level":"LOW","reasons":["known device","known location"]}}},`+
			`"tags":["a","b"],"score":%d.5}`,
			pos, pos, (pos/60)%60, pos%60, pos%17, pos%17, pos%251, pos%253, pos%5, pos, pos, pos%1000)
	}
	next := ""
	if n+1 < pages {
		next = strconv.Itoa(n + 1)
	}
	fmt.Fprintf(&b, `],"next":%q}`, next)
	return b.Bytes()
}

func (s *pageServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	part, cursor := r.URL.Query().Get("partition"), r.URL.Query().Get("cursor")
	s.mu.Lock()
	if s.first.IsZero() {
		s.first = time.Now()
		if s.onFirst != nil {
			s.onFirst()
		}
	}
	s.inFlight[part]++
	s.maxIn = max(s.maxIn, s.inFlight[part])
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inFlight[part]--
		s.mu.Unlock()
	}()
	time.Sleep(s.latency)

	body := s.end
	n := -1
	if cursor != "end" {
		var err error
		if cursor == "" {
			n = 0
		} else if n, err = strconv.Atoi(cursor); err != nil || n < 0 || n >= len(s.pages) {
			s.mu.Lock()
			s.bad = append(s.bad, part+"/"+cursor)
			s.mu.Unlock()
			http.Error(w, "no such page", http.StatusBadRequest)
			return
		}
		body = s.pages[n]
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
	s.mu.Lock()
	if n >= 0 {
		s.served[part] = append(s.served[part], n)
		if n == len(s.pages)-1 {
			s.last = time.Now()
		}
	} else {
		s.ends++
	}
	s.mu.Unlock()
}

// check reports what was wrong with the pages served to partitions: each
// must have had every page exactly once, in order, one request at a time.
func (s *pageServer) check(partitions []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.bad) > 0 {
		return fmt.Errorf("requests for no page: %v", s.bad)
	}
	if s.maxIn > 1 {
		return fmt.Errorf("%d requests of one partition in flight at once", s.maxIn)
	}
	for _, p := range partitions {
		got := s.served[p]
		if len(got) != len(s.pages) {
			return fmt.Errorf("partition %s: %d pages served, want %d", p, len(got), len(s.pages))
		}
		for i, n := range got {
			if n != i {
				return fmt.Errorf("partition %s: page %d served as the %dth", p, n, i+1)
			}
		}
	}
	return nil
}

// Both pipelines of the comparison read every page of every partition
// exactly once, in order, with one request of a partition in flight at a
// time, and stop at the end.
func TestVsPlainPipelinesReadEveryPageOnce(t *testing.T) {
	for _, c := range []struct{ name, text string }{
		{"plain", plainHTTPConfig},
		{"tidemark", tidemarkHTTPConfig},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := newPageServer(t, 3, 5, 0)
			parts := partitionNames(2)
			sb := service.NewStreamBuilder()
			scope := fmt.Sprintf("vsplain-test-%d", envSeq.Add(1))
			require.NoError(t, sb.SetYAML(renderConfig(t, c.name, c.text, vsConfig{URL: srv.URL, Scope: scope, Partitions: parts, Backend: "memory"})))
			stream, err := sb.Build()
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			require.NoError(t, stream.Run(ctx))
			require.NoError(t, srv.check(parts))
		})
	}
}

// vsResult is one run of bin/connect against the page server.
type vsResult struct {
	wall   time.Duration // the first request -> the last page's answer
	cpu    float64       // the process's CPU seconds from its first request to its exit
	total  float64       // the process's CPU seconds in all (start-up included)
	server float64       // this process's (the page server's) CPU seconds over the run
	// others: the cores everybody else on the machine (dynalite included)
	// used from the first request to the exit.
	others float64
	events int
	rss    float64 // peak RSS of the process (VmHWM), MB
	pages  int     // pages of all partitions
}

// vsRun runs bin/connect on cfg to completion against srv.
func vsRun(tb testing.TB, bin, cfg string, srv *pageServer, partitions []string, pageSize int) vsResult {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "vs.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", path)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	var pid atomic.Int64
	var atFirst, selfFirst, busyFirst float64
	var firstAt time.Time
	srv.onFirst = func() {
		firstAt = time.Now()
		atFirst = procCPU(int(pid.Load()))
		selfFirst = ownCPU()
		busyFirst = machineBusy()
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	pid.Store(int64(cmd.Process.Pid))
	// The peak RSS is the process's VmHWM, read every 50 ms until it
	// exits (not ru_maxrss: the kernel starts a child's at its parent's
	// peak, the bench process's, when the child execs).
	done, sampled := make(chan struct{}), make(chan struct{})
	var hwm int64
	go func() {
		defer close(sampled)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			if _, h := procMem(cmd.Process.Pid); h > 0 {
				hwm = max(hwm, h)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	err := cmd.Wait()
	close(done)
	<-sampled
	selfEnd, busyEnd, endAt := ownCPU(), machineBusy(), time.Now()
	if err != nil {
		tb.Fatalf("%s run: %v\n%s", bin, err, out.String())
	}
	if err := srv.check(partitions); err != nil {
		tb.Fatalf("%v\n%s", err, out.String())
	}
	total := (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
	rss := float64(hwm) / 1e6
	srv.mu.Lock()
	defer srv.mu.Unlock()
	cpu, server := total-atFirst, selfEnd-selfFirst
	return vsResult{
		wall: srv.last.Sub(srv.first), cpu: cpu, total: total, server: server,
		others: max(busyEnd-busyFirst-cpu-server, 0) / endAt.Sub(firstAt).Seconds(),
		events: len(partitions) * len(srv.pages) * pageSize,
		rss:    rss, pages: len(partitions) * len(srv.pages),
	}
}

// vsPages is the number of pages per partition of a run at P partitions:
// about 5 s at the limit for P=1, 2 s for P=16, 1.2 s for P=64.
func vsPages(p int) int {
	switch {
	case p <= 1:
		return 250
	case p <= 16:
		return 100
	}
	return 60
}

// BenchmarkVsPlain runs bin/connect (TIDEMARK_BENCH_BIN) on the plain
// pipeline (plain_http.yaml) and on tidemark (tidemark_http.yaml, the http
// provider, the memory store and, with dynalite, the DynamoDB store)
// against one local page server (100 nested events a page, 20 ms a page,
// JSON), for P = 1, 16 and 64 partitions. wall-s is the first request to
// the last page's answer; cpu-s the process's CPU seconds from its first
// request to its exit (start-up excluded); cpu-us/event their quotient per
// event; startup-cpu-s the rest of its CPU; server-cpu-s the page server's
// (this process's) CPU; cpu-others-cores what everything else on the
// machine (dynalite included) used meanwhile; peak-RSS-MB the process's
// VmHWM (read every 50 ms while it runs). Store writes: the plain pipeline writes its cursor to its
// cache once a request (cache-writes/page: its requests per page); the
// DynamoDB store's requests go through a metering proxy (ddbProxy), which
// counts every write request of the run and the write units dynalite
// reports (writes/page, WCU/page: start-up, membership and frontier
// records included; failed-writes/page: conditional check failures and
// throttles, which report no units). Run with -benchtime 1x; -count N
// runs each sub-benchmark N times in a row, so scripts/bench runs -count 1
// N times instead (rounds in which the pipelines alternate).
func BenchmarkVsPlain(b *testing.B) {
	bin := os.Getenv(EnvBin)
	if bin == "" {
		b.Skip(EnvBin + " is not set: build bin/connect and point it there (scripts/bench does)")
	}
	for _, p := range []int{1, 16, 64} {
		for _, pipe := range []string{"plain", "tidemark-memory", "tidemark-dynamodb"} {
			b.Run(fmt.Sprintf("P=%d/pipeline=%s", p, pipe), func(b *testing.B) {
				if pipe == "tidemark-dynamodb" && os.Getenv(dynalitetest.EnvEndpoint) == "" {
					b.Skip("no dynalite")
				}
				var r vsResult
				var proxy *ddbProxy
				var srv *pageServer
				for b.Loop() {
					srv = newPageServer(b, vsPages(p), benchPageSize, benchLatency)
					parts := partitionNames(p)
					c := vsConfig{URL: srv.URL, Scope: "vsplain", Partitions: parts}
					var cfg string
					switch pipe {
					case "plain":
						cfg = renderConfig(b, pipe, plainHTTPConfig, c)
					case "tidemark-memory":
						c.Backend = "memory"
						cfg = renderConfig(b, pipe, tidemarkHTTPConfig, c)
					case "tidemark-dynamodb":
						tbl := dynalitetest.NewTable(b)
						proxy = newDDBProxy(b, tbl.Endpoint)
						c.Backend, c.Endpoint, c.Table = "dynamodb", proxy.URL, tbl.Name
						cfg = renderConfig(b, pipe, tidemarkHTTPConfig, c)
					}
					r = vsRun(b, bin, cfg, srv, parts, benchPageSize)
				}
				b.ReportMetric(r.wall.Seconds(), "wall-s")
				b.ReportMetric(r.cpu, "cpu-s")
				b.ReportMetric(r.cpu/float64(r.events)*1e6, "cpu-us/event")
				b.ReportMetric(r.total-r.cpu, "startup-cpu-s")
				b.ReportMetric(r.server, "server-cpu-s")
				b.ReportMetric(float64(r.events)/r.wall.Seconds(), "events/s")
				b.ReportMetric(float64(p*benchPageSize)/benchLatency.Seconds(), "limit-events/s")
				b.ReportMetric(r.others, "cpu-others-cores")
				b.ReportMetric(r.rss, "peak-RSS-MB")
				b.ReportMetric(load1(), "load1")
				switch pipe {
				case "plain":
					srv.mu.Lock()
					b.ReportMetric(float64(r.pages+srv.ends)/float64(r.pages), "cache-writes/page")
					srv.mu.Unlock()
				case "tidemark-dynamodb":
					writes, units, _, noCap, failed := proxy.totals()
					if noCap > 0 {
						b.Fatalf("%d writes answered without their consumed capacity", noCap)
					}
					b.ReportMetric(float64(writes)/float64(r.pages), "writes/page")
					b.ReportMetric(units/float64(r.pages), "WCU/page")
					b.ReportMetric(float64(failed)/float64(r.pages), "failed-writes/page")
				}
			})
		}
	}
}
