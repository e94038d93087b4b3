package promexport

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

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
	e.NewTimerCtor("tidemark_fetch_latency")().Timing(1_500_000_000)
	e.NewTimerCtor("tidemark_fetch_latency")().Timing(500_000_000)

	body := scrape(t, e)
	assert.True(t, hasType(body, "tidemark_pages_fetched_total", "counter"), body)
	assert.Equal(t, "3", sample(t, body, "tidemark_pages_fetched_total"))
	assert.Equal(t, "2", sample(t, body, "tidemark_promotions_total"))
	assert.Equal(t, "1", sample(t, body, `tidemark_retries_total{class="token_rotation"}`))
	assert.Equal(t, "4", sample(t, body, `tidemark_retries_total{class="shifted_page"}`))
	assert.True(t, hasType(body, "tidemark_parked_partitions", "gauge"), body)
	assert.Equal(t, "1", sample(t, body, "tidemark_parked_partitions"))
	assert.Equal(t, "1200", sample(t, body, `tidemark_frontier{scope="demo"}`))
	assert.Equal(t, "500", sample(t, body, `tidemark_partition_watermark{partition="p0"}`))
	assert.Equal(t, "450", sample(t, body, `tidemark_partition_watermark{partition="p1"}`))
	assert.True(t, hasType(body, "tidemark_fetch_latency_seconds", "summary"), body)
	assert.Equal(t, "2", sample(t, body, "tidemark_fetch_latency_seconds_sum"))
	assert.Equal(t, "2", sample(t, body, "tidemark_fetch_latency_seconds_count"))
	assert.Contains(t, body, `tidemark_fetch_latency_seconds{quantile="0.5"}`)
	// The process and Go collectors are served too.
	assert.Contains(t, body, "go_goroutines ")
}

func TestExporterSanitisesNames(t *testing.T) {
	e := New("")
	e.NewCounterCtor("input.received-count", "label-key", "path.x")("a", "root.input").Incr(1)
	e.NewCounterCtor("already_total")().Incr(1)
	e.NewGaugeCtor("9lives")().Set(9)
	e.NewGaugeCtor("ünïcode gauge")().Set(2)
	e.NewTimerCtor("a/b")().Timing(1000)

	body := scrape(t, e)
	assert.Equal(t, "1", sample(t, body, `input_received_count_total{label_key="a",path_x="root.input"}`))
	assert.Equal(t, "1", sample(t, body, "already_total"), "a counter ending in _total gets no second suffix")
	assert.NotContains(t, body, "already_total_total")
	assert.Equal(t, "9", sample(t, body, "_9lives"), "a name cannot start with a digit")
	assert.Equal(t, "2", sample(t, body, "_n_code_gauge"))
	assert.Equal(t, "1e-06", sample(t, body, "a_b_seconds_sum"))
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
	assert.Equal(t, "5", sample(t, body, "connect_tidemark_promotions_total"))
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
	assert.Equal(t, "4", sample(t, body, "tidemark_promotions_total"))
	assert.Equal(t, "3", sample(t, body, "t_seconds_count"))
	assert.Equal(t, 1, strings.Count(body, "# TYPE tidemark_promotions_total counter"))
}

// A name already taken by a metric of another type is dropped, never a
// panic, and the first registration keeps serving.
func TestExporterTypeClash(t *testing.T) {
	e := New("")
	e.NewCounterCtor("x")().Incr(1)
	assert.NotPanics(t, func() { e.NewGaugeCtor("x_total")().Set(99) })
	e.NewGaugeCtor("y")().Set(3)
	assert.NotPanics(t, func() { e.NewCounterCtor("y_total")().Incr(1) })
	body := scrape(t, e)
	assert.Equal(t, "1", sample(t, body, "x_total"))
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
	assert.Equal(t, "1", sample(t, body, `requests_total{code="200"}`))
}

// The exporter is registered with Benthos under the name prometheus.
func TestExporterRegisteredAsPrometheus(t *testing.T) {
	b := service.NewStreamBuilder()
	require.NoError(t, b.SetMetricsYAML(`prometheus: { prefix: "x_" }`))
	conf, err := spec().ParseYAML(`{}`, nil)
	require.NoError(t, err)
	p, err := conf.FieldString(fieldPrefix)
	require.NoError(t, err)
	assert.Empty(t, p)
	assert.NoError(t, New("").Close(t.Context()))
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
