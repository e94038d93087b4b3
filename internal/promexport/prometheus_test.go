package promexport

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// scrape serves e's handler once and returns the body.
func scrape(t *testing.T, e *Exporter) string {
	t.Helper()
	srv := httptest.NewServer(e.HandlerFunc())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, resp.Header.Get("Content-Type"), "text/plain")
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

// sample returns the value of the exact series line `series value`.
func sample(t *testing.T, body, series string) string {
	t.Helper()
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`)
	m := re.FindStringSubmatch(body)
	require.NotNil(t, m, "series %s not found in:\n%s", series, tidemarkLines(body))
	return m[1]
}

func hasType(body, name, typ string) bool {
	return strings.Contains(body, "# TYPE "+name+" "+typ+"\n")
}

func TestExporterSeries(t *testing.T) {
	e := New("")
	e.NewCounterCtor("tidemark_pages_fetched")().Incr(3)
	e.NewCounterCtor("tidemark_promotions")().Incr(2)
	retries := e.NewCounterCtor("tidemark_retries", "class")
	retries("token_rotation").Incr(1)
	retries("shifted_page").Incr(4)
	e.NewGaugeCtor("tidemark_parked_partitions")().Set(1)
	e.NewGaugeCtor("tidemark_frontier", "scope")("demo").Set(1200)
	wm := e.NewGaugeCtor("tidemark_partition_watermark", "partition")
	wm("p0").Set(500)
	wm("p1").Set(450)
	e.NewTimerCtor("output_latency_ns")().Timing(1_500_000_000)
	e.NewTimerCtor("output_latency_ns")().Timing(500_000_000)

	body := scrape(t, e)
	// Counters keep their name: no _total suffix (Redpanda Connect's names).
	assert.True(t, hasType(body, "tidemark_pages_fetched", "counter"), body)
	assert.Equal(t, "3", sample(t, body, "tidemark_pages_fetched"))
	assert.NotContains(t, body, "_total")
	assert.Equal(t, "2", sample(t, body, "tidemark_promotions"))
	assert.Equal(t, "1", sample(t, body, `tidemark_retries{class="token_rotation"}`))
	assert.Equal(t, "4", sample(t, body, `tidemark_retries{class="shifted_page"}`))
	assert.True(t, hasType(body, "tidemark_parked_partitions", "gauge"), body)
	assert.Equal(t, "1", sample(t, body, "tidemark_parked_partitions"))
	assert.Equal(t, "1200", sample(t, body, `tidemark_frontier{scope="demo"}`))
	assert.Equal(t, "500", sample(t, body, `tidemark_partition_watermark{partition="p0"}`))
	assert.Equal(t, "450", sample(t, body, `tidemark_partition_watermark{partition="p1"}`))
	// A timer keeps its name and is a summary of nanoseconds by default.
	assert.True(t, hasType(body, "output_latency_ns", "summary"), body)
	assert.Equal(t, "2e+09", sample(t, body, "output_latency_ns_sum"))
	assert.Equal(t, "2", sample(t, body, "output_latency_ns_count"))
	assert.Contains(t, body, `output_latency_ns{quantile="0.5"}`)
	assert.Contains(t, body, `output_latency_ns{quantile="0.99"}`)
	assert.NotContains(t, body, "_seconds")
	// Go and process series only when asked for (add_go_metrics,
	// add_process_metrics default false).
	assert.NotContains(t, body, "go_goroutines")
	assert.NotContains(t, body, "process_")
}

// use_histogram_timing: timers are histograms of seconds, under the same
// name, with the configured buckets.
func TestExporterHistogramTimingInSeconds(t *testing.T) {
	o := DefaultOptions()
	o.UseHistogram = true
	o.Buckets = []float64{0.5, 1, 2}
	e, err := NewWithOptions(o, nil)
	require.NoError(t, err)
	e.NewTimerCtor("processor_latency_ns", "label")("x").Timing(1_500_000_000)
	e.NewTimerCtor("processor_latency_ns", "label")("x").Timing(250_000_000)
	body := scrape(t, e)
	assert.True(t, hasType(body, "processor_latency_ns", "histogram"), body)
	assert.Equal(t, "1.75", sample(t, body, `processor_latency_ns_sum{label="x"}`))
	assert.Equal(t, "2", sample(t, body, `processor_latency_ns_count{label="x"}`))
	assert.Equal(t, "1", sample(t, body, `processor_latency_ns_bucket{label="x",le="0.5"}`))
	assert.Equal(t, "1", sample(t, body, `processor_latency_ns_bucket{label="x",le="1"}`))
	assert.Equal(t, "2", sample(t, body, `processor_latency_ns_bucket{label="x",le="2"}`))

	// Empty buckets: the client's defaults.
	o.Buckets = nil
	e, err = NewWithOptions(o, nil)
	require.NoError(t, err)
	e.NewTimerCtor("t_ns")().Timing(1)
	assert.Contains(t, scrape(t, e), `t_ns_bucket{le="0.005"}`)
}

func TestExporterSummaryObjectives(t *testing.T) {
	o := DefaultOptions()
	o.Objectives = []Quantile{{0.75, 0.01}}
	e, err := NewWithOptions(o, nil)
	require.NoError(t, err)
	e.NewTimerCtor("t_ns")().Timing(7)
	body := scrape(t, e)
	assert.Equal(t, "7", sample(t, body, `t_ns{quantile="0.75"}`))
	assert.NotContains(t, body, `quantile="0.5"`)
}

func TestExporterGoAndProcessMetricsOnRequest(t *testing.T) {
	o := DefaultOptions()
	o.GoMetrics = true
	e, err := NewWithOptions(o, nil)
	require.NoError(t, err)
	body := scrape(t, e)
	assert.Contains(t, body, "go_goroutines ")
	assert.NotContains(t, body, "process_start_time_seconds")

	o = DefaultOptions()
	o.ProcessMetrics = true
	e, err = NewWithOptions(o, nil)
	require.NoError(t, err)
	body = scrape(t, e)
	assert.NotContains(t, body, "go_goroutines ")
	assert.Contains(t, body, "process_start_time_seconds")
}

func TestExporterSanitisesNames(t *testing.T) {
	e := New("")
	e.NewCounterCtor("input.received-count", "label-key", "path.x")("a", "root.input").Incr(1)
	e.NewCounterCtor("already_total")().Incr(1)
	e.NewGaugeCtor("9lives")().Set(9)
	e.NewGaugeCtor("ünïcode gauge")().Set(2)
	e.NewTimerCtor("a/b")().Timing(1000)

	body := scrape(t, e)
	assert.Equal(t, "1", sample(t, body, `input_received_count{label_key="a",path_x="root.input"}`))
	assert.Equal(t, "1", sample(t, body, "already_total"))
	assert.Equal(t, "9", sample(t, body, "_9lives"), "a name cannot start with a digit")
	assert.Equal(t, "2", sample(t, body, "_n_code_gauge"))
	assert.Equal(t, "1000", sample(t, body, "a_b_sum"))
	valid := regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	for _, line := range strings.Split(body, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name := line[:strings.IndexAny(line, "{ ")]
		assert.Regexp(t, valid, name, "line %q", line)
	}
}

func TestExporterPrefix(t *testing.T) {
	e := New("connect.")
	e.NewCounterCtor("tidemark_promotions")().Incr(5)
	e.NewGaugeCtor("tidemark_frontier", "scope")("s").Set(7)
	body := scrape(t, e)
	assert.Equal(t, "5", sample(t, body, "connect_tidemark_promotions"))
	assert.Equal(t, "7", sample(t, body, `connect_tidemark_frontier{scope="s"}`))
}

// Components are created and closed repeatedly: registering a name again
// returns the same series (values accumulate) and never panics.
func TestExporterRegistersNamesOnce(t *testing.T) {
	e := New("")
	for range 3 {
		e.NewCounterCtor("tidemark_promotions")().Incr(1)
		e.NewGaugeCtor("tidemark_frontier", "scope")("s").Set(10)
		e.NewTimerCtor("t")().Timing(1)
	}
	// Two names that sanitise to one are one series.
	e.NewCounterCtor("tidemark.promotions")().Incr(1)
	body := scrape(t, e)
	assert.Equal(t, "4", sample(t, body, "tidemark_promotions"))
	assert.Equal(t, "3", sample(t, body, "t_count"))
	assert.Equal(t, 1, strings.Count(body, "# TYPE tidemark_promotions counter"))
}

// A name already taken by a metric of another type is dropped, never a
// panic, and the first registration keeps serving.
func TestExporterTypeClash(t *testing.T) {
	e := New("")
	e.NewCounterCtor("x")().Incr(1)
	assert.NotPanics(t, func() { e.NewGaugeCtor("x")().Set(99) })
	assert.NotPanics(t, func() { e.NewTimerCtor("x")().Timing(99) })
	e.NewGaugeCtor("y")().Set(3)
	assert.NotPanics(t, func() { e.NewCounterCtor("y")().Incr(1) })
	body := scrape(t, e)
	assert.Equal(t, "1", sample(t, body, "x"))
	assert.Equal(t, "3", sample(t, body, "y"))
}

// The same name registered again with other label keys (two `metric`
// processors naming one series differently, or two names that sanitise to
// one) must not panic the pipeline: the clashing registration is dropped.
func TestExporterLabelClashDoesNotPanic(t *testing.T) {
	e := New("")
	e.NewCounterCtor("requests", "code")("200").Incr(1)
	assert.NotPanics(t, func() { e.NewCounterCtor("requests", "code", "method")("500", "GET").Incr(1) })
	assert.NotPanics(t, func() { e.NewCounterCtor("requests")().Incr(1) })
	e.NewGaugeCtor("g.x", "a")("1").Set(1)
	assert.NotPanics(t, func() { e.NewGaugeCtor("g_x")().Set(2) })
	assert.NotPanics(t, func() { e.NewTimerCtor("lat", "a")("1").Timing(1) })
	assert.NotPanics(t, func() { e.NewTimerCtor("lat", "b", "c")("1", "2").Timing(1) })
	body := scrape(t, e)
	assert.Equal(t, "1", sample(t, body, `requests{code="200"}`))
}

// rpcAdvancedConfig is every field of Redpanda Connect's prometheus
// exporter, as its documentation's "Advanced" config lists them
// (docs.redpanda.com/connect/components/metrics/prometheus), with values.
const rpcAdvancedConfig = `
use_histogram_timing: true
histogram_buckets: [ 0.1, 1 ]
summary_quantiles_objectives:
  - error: 0.05
    quantile: 0.5
add_process_metrics: true
add_go_metrics: true
push_url: "http://127.0.0.1:9091"
push_interval: "30s"
push_job_name: benthos_push
push_basic_auth:
  username: "u"
  password: "p"
file_output_path: "/tmp/x.prom"
`

// A config written for Redpanda Connect's exporter parses, lints clean and
// sets the options its fields name; the defaults are its defaults.
func TestConfigAcceptsRedpandaConnectFields(t *testing.T) {
	env := service.NewEmptyEnvironment()
	require.NoError(t, Register(env))
	lints, err := env.NewComponentConfigLinter().LintMetricsYAML([]byte("prometheus:\n" + indent(rpcAdvancedConfig)))
	require.NoError(t, err)
	assert.Empty(t, lints)
	lints, err = env.NewComponentConfigLinter().LintMetricsYAML([]byte("prometheus:\n  no_such_field: 1\n"))
	require.NoError(t, err)
	assert.NotEmpty(t, lints, "the linter reads the fields")
	require.NoError(t, env.NewStreamBuilder().SetMetricsYAML("prometheus:\n"+indent(rpcAdvancedConfig)))

	conf, err := Spec().ParseYAML(rpcAdvancedConfig, env)
	require.NoError(t, err)
	o, err := optionsFromConfig(conf)
	require.NoError(t, err)
	assert.Equal(t, Options{
		UseHistogram: true, Buckets: []float64{0.1, 1}, Objectives: []Quantile{{0.5, 0.05}},
		ProcessMetrics: true, GoMetrics: true,
		PushURL: "http://127.0.0.1:9091", PushInterval: 30 * time.Second, PushJobName: "benthos_push",
		PushUser: "u", PushPassword: "p", FileOutputPath: "/tmp/x.prom",
	}, o)

	conf, err = Spec().ParseYAML(`{}`, env)
	require.NoError(t, err)
	o, err = optionsFromConfig(conf)
	require.NoError(t, err)
	assert.Equal(t, DefaultOptions(), o)

	conf, err = Spec().ParseYAML(`summary_quantiles_objectives: [ { quantile: 2, error: 0.1 } ]`, env)
	require.NoError(t, err)
	_, err = optionsFromConfig(conf)
	assert.ErrorContains(t, err, "[0, 1]")
}

func indent(s string) string {
	var out []string
	for _, l := range strings.Split(strings.TrimPrefix(s, "\n"), "\n") {
		if l != "" {
			l = "  " + l
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}

// pushGateway is a loopback Push Gateway stand-in that records each push.
type pushGateway struct {
	srv    *httptest.Server
	pushes chan pushed
}

type pushed struct {
	method, path, user, password, body string
}

func newPushGateway(t *testing.T) *pushGateway {
	t.Helper()
	g := &pushGateway{pushes: make(chan pushed, 64)}
	g.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		u, p, _ := r.BasicAuth()
		select {
		case g.pushes <- pushed{r.Method, r.URL.Path, u, p, string(b)}:
		default:
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(g.srv.Close)
	return g
}

func (g *pushGateway) next(t *testing.T) pushed {
	t.Helper()
	select {
	case p := <-g.pushes:
		return p
	case <-time.After(time.Minute):
		t.Fatal("no push reached the gateway")
		return pushed{}
	}
}

// push_url: the metrics are pushed (with basic auth, under the job name)
// when the exporter closes, and every push_interval while it runs.
func TestExporterPushesToGateway(t *testing.T) {
	g := newPushGateway(t)
	o := DefaultOptions()
	o.PushURL, o.PushJobName, o.PushUser, o.PushPassword = g.srv.URL, "tidemark_job", "user", "pw"
	e, err := NewWithOptions(o, nil)
	require.NoError(t, err)
	e.NewCounterCtor("input_received")().Incr(4)
	select {
	case p := <-g.pushes:
		t.Fatalf("a push before Close without push_interval: %+v", p)
	default:
	}
	require.NoError(t, e.Close(t.Context()))
	p := g.next(t)
	assert.Equal(t, http.MethodPut, p.method)
	assert.Equal(t, "/metrics/job/tidemark_job", p.path)
	assert.Equal(t, "user", p.user)
	assert.Equal(t, "pw", p.password)
	assert.NotEmpty(t, p.body)

	// With an interval: pushes while it runs.
	o.PushInterval = 10 * time.Millisecond
	e, err = NewWithOptions(o, nil)
	require.NoError(t, err)
	g.next(t)
	g.next(t)
	require.NoError(t, e.Close(t.Context()))
}

// A push that fails is an error of Close, not a hang.
func TestExporterPushFailureIsAnError(t *testing.T) {
	g := newPushGateway(t)
	url := g.srv.URL
	g.srv.Close()
	o := DefaultOptions()
	o.PushURL = url
	e, err := NewWithOptions(o, nil)
	require.NoError(t, err)
	assert.ErrorContains(t, e.Close(t.Context()), "Push Gateway")
}

// file_output_path: every metric is written in the text format on Close.
func TestExporterWritesFileOnClose(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metrics.prom")
	o := DefaultOptions()
	o.FileOutputPath = path
	e, err := NewWithOptions(o, nil)
	require.NoError(t, err)
	e.NewGaugeCtor("tidemark_frontier", "scope")("s").Set(42)
	_, err = os.Stat(path)
	require.True(t, os.IsNotExist(err), "nothing is written before Close")
	require.NoError(t, e.Close(t.Context()))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Contains(t, string(b), `tidemark_frontier{scope="s"} 42`)
}

// Register registers the exporter under Redpanda Connect's name; the
// plugin package does not (see cmd/connect).
func TestRegisterUnderPrometheus(t *testing.T) {
	env := service.NewEmptyEnvironment()
	b := env.NewStreamBuilder()
	assert.Error(t, b.SetMetricsYAML(`prometheus: {}`), "an empty environment has no prometheus exporter")
	require.NoError(t, Register(env))
	b = env.NewStreamBuilder()
	require.NoError(t, b.SetMetricsYAML(`prometheus: { prefix: "x_" }`))
}

// tidemarkLines drops the Go and process collectors' lines from body, for
// readable failure messages.
func tidemarkLines(body string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if !strings.Contains(l, "go_") && !strings.Contains(l, "process_") && !strings.Contains(l, "promhttp_") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
