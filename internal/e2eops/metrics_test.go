package e2eops

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/e2etest"
	"github.com/tidemark/tidemark/internal/store"
)

// parkWithWatermark writes part's checkpoint complete through wm (cursor
// right after it, a valid simulated cursor) and parks it.
func parkWithWatermark(t *testing.T, st store.Store, scope, part string, wm int64) {
	t.Helper()
	ctx := context.Background()
	k := store.Key{Scope: scope, Partition: part}
	cp, err := st.CreateCheckpoint(ctx, store.Checkpoint{Key: k, Generation: 1, Epoch: 1})
	require.NoError(t, err)
	cp, err = st.Promote(ctx, store.Promotion{
		Key: k, FromGeneration: 1, To: []byte(fmt.Sprintf("sim1:%d:0", wm+1)), WitnessID: "e2e-seed",
		Watermark: coord.Integer(wm), Applied: coord.IntPosition(wm), HasApplied: true, Epoch: 1,
	})
	require.NoError(t, err)
	_, err = st.SetParked(ctx, k, cp.Cursor, cp.Generation, cp.Lease, parkedReason)
	require.NoError(t, err)
}

// one returns the single sample of name with labels want.
func one(t *testing.T, ms e2etest.Metrics, name string, want map[string]string) (float64, bool) {
	t.Helper()
	ss := ms.Find(name, want)
	if len(ss) == 0 {
		return 0, false
	}
	require.Len(t, ss, 1, "%s%v is one series", name, want)
	return ss[0].Value, true
}

// TestMetricsScrapeReportsProgressRetriesConflictsAndParks scrapes the
// binary's /metrics (the
// prometheus exporter behind `http: {address: 127.0.0.1:<port>}`) while it
// reads four simulated partitions, two of which start parked, and checks
// the named series and their values: pages fetched and promotions counted,
// p0's watermark, the frontier, retries by classification, a CAS conflict
// provoked by an operator restart, and the number of parked partitions as
// they are unparked one by one.
func TestMetricsScrapeReportsProgressRetriesConflictsAndParks(t *testing.T) {
	e := newEnv(t)
	const scope = "metrics"
	parkWithWatermark(t, e.st, scope, "p2", 20)
	parkWithWatermark(t, e.st, scope, "p3", 20)
	port := e2etest.FreePort(t)
	p := e.run("metrics", fmt.Sprintf(`
http: { address: 127.0.0.1:%d }
metrics: { prometheus: {} }
logger: { level: info }
input:
  paginated_partitions:
    scope: %s
    partitions: [ p0, p1, p2, p3 ]
    poll_interval: 50ms
    park_check_interval: 200ms
    frontier_publish_interval: 100ms
    checkpoint: %s
    simulated:
      events_per_partition: 0
      page_size: 20
      latency: 10ms
output:
  drop: {}
`, port, scope, e.checkpointYAML()))
	url := fmt.Sprintf("http://127.0.0.1:%d/metrics", port)

	var ms e2etest.Metrics
	var body string
	poll := func(what string, cond func() (bool, string)) {
		t.Helper()
		waitFor(t, p, what, func() (bool, string) {
			b, m, err := scrape(url)
			if err != nil {
				return false, err.Error()
			}
			body, ms = b, m
			return cond()
		})
	}
	val := func(name string, labels map[string]string) float64 {
		t.Helper()
		v, ok := one(t, ms, name, labels)
		require.True(t, ok, "series %s%v missing from /metrics:\n%s", name, labels, tidemarkSeries(body))
		return v
	}

	// The frontier reaches 20 once p0 and p1 have passed it, and stays
	// there: the parked partitions hold it back.
	poll("pages, promotions, p0's watermark, both parks and the frontier held at 20", func() (bool, string) {
		pages, _ := one(t, ms, "tidemark_pages_fetched", nil)
		proms, _ := one(t, ms, "tidemark_promotions", nil)
		wm, _ := one(t, ms, "tidemark_partition_watermark", map[string]string{"partition": "p0"})
		fr, _ := one(t, ms, "tidemark_frontier", map[string]string{"scope": scope})
		parked, _ := one(t, ms, "tidemark_parked_partitions", nil)
		return pages > 0 && proms > 0 && wm > 0 && fr == 20 && parked == 2, tidemarkSeries(body)
	})
	assertLoopbackOnly(t, port)

	assert.Greater(t, val("tidemark_pages_fetched", nil), 0.0)
	assert.Greater(t, val("tidemark_promotions", nil), 0.0)
	assert.Greater(t, val("tidemark_events_emitted", nil), 0.0)
	assert.Greater(t, val("tidemark_partition_watermark", map[string]string{"partition": "p0"}), 0.0)
	assert.Equal(t, 20.0, val("tidemark_partition_watermark", map[string]string{"partition": "p2"}), "parked p2 stays at its durable watermark")
	assert.Equal(t, 20.0, val("tidemark_frontier", map[string]string{"scope": scope}), "the parked partitions hold the frontier at 20")
	assert.Greater(t, val("tidemark_partition_generation", map[string]string{"partition": "p0"}), 1.0)
	assert.GreaterOrEqual(t, val("tidemark_partition_lag", map[string]string{"partition": "p2"}), 0.0)
	for _, s := range ms["tidemark_retries"] {
		assert.NotEmpty(t, s.Labels["class"], "retries are labelled by classification")
		assert.Greater(t, s.Value, 0.0)
	}
	parked, ok := one(t, ms, "tidemark_parked_partitions", nil)
	assert.True(t, ok, "tidemark_parked_partitions is exported")
	assert.Equal(t, 2.0, parked, "two partitions are parked")

	// An operator restart of p0 while it runs makes its in-flight promotion
	// lose its compare-and-swap.
	// p0 is advancing, so the restart planned from one read can itself lose
	// to the worker (and say so); an operator runs it again. The boundary
	// may be a cursor p0 held at an older generation: moving it back takes
	// --force.
	waitFor(t, p, "an operator restart of p0 applied", func() (bool, string) {
		out, code := e.cli("", "restart", "--scope", scope, "--partition", "p0", "--cursor", "sim1:1:0", "--force", "--yes")
		if code != 0 {
			require.Contains(t, out, "the repair was not applied", "a failed restart must be a lost compare-and-swap")
		}
		return code == 0, out
	})
	poll("a CAS conflict", func() (bool, string) {
		v, _ := one(t, ms, "tidemark_cas_conflicts", nil)
		return v > 0, tidemarkSeries(body)
	})

	// Unpark the parked partitions one by one.
	for i, part := range []string{"p2", "p3"} {
		out, code := e.cli("", "unpark", "--scope", scope, "--partition", part, "--yes")
		require.Equal(t, 0, code, out)
		poll(part+" promoting again", func() (bool, string) {
			g, _ := one(t, ms, "tidemark_partition_generation", map[string]string{"partition": part})
			return g > 2, "generation " + strconv.FormatFloat(g, 'f', -1, 64)
		})
		// The gauge is set when the worker resumes, after its promotion
		// may already show: wait for it.
		want := float64(1 - i)
		poll(fmt.Sprintf("tidemark_parked_partitions at %v after unparking %s", want, part), func() (bool, string) {
			v, ok := one(t, ms, "tidemark_parked_partitions", nil)
			return ok && v == want, fmt.Sprintf("tidemark_parked_partitions %v (exported %v)", v, ok)
		})
	}
	poll("the frontier above the parked watermark", func() (bool, string) {
		f, _ := one(t, ms, "tidemark_frontier", map[string]string{"scope": scope})
		return f > 20, tidemarkSeries(body)
	})
}

// assertLoopbackOnly fails when the HTTP port answers on a non-loopback
// address of this machine.
func assertLoopbackOnly(t *testing.T, port int) {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Logf("cannot list interface addresses: %v", err)
		return
	}
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok || ipn.IP.IsLoopback() || ipn.IP.IsLinkLocalUnicast() {
			continue
		}
		c, err := net.DialTimeout("tcp", net.JoinHostPort(ipn.IP.String(), strconv.Itoa(port)), 300*time.Millisecond)
		if err == nil {
			c.Close()
			t.Fatalf("the binary answers on %s:%d: it must bind 127.0.0.1 only", ipn.IP, port)
		}
	}
}

// tidemarkSeries is the tidemark_ lines of a scrape, for messages.
func tidemarkSeries(body string) string {
	var out []byte
	for _, l := range splitLines(body) {
		if len(l) > 9 && l[:9] == "tidemark_" {
			out = append(out, l...)
			out = append(out, '\n')
		}
	}
	return string(out)
}

func splitLines(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// TestMetricsParkedGaugeExportedBeforeAnyPark: a dashboard alerting
// on tidemark_parked_partitions > 0 needs the series to exist, at 0, before
// any partition was ever parked.
func TestMetricsParkedGaugeExportedBeforeAnyPark(t *testing.T) {
	e := newEnv(t)
	port := e2etest.FreePort(t)
	p := e.run("metrics0", fmt.Sprintf(`
http: { address: 127.0.0.1:%d }
metrics: { prometheus: {} }
input:
  paginated_partitions:
    scope: metrics0
    partitions: [ p0 ]
    poll_interval: 50ms
    checkpoint: %s
    simulated: { events_per_partition: 100, page_size: 20 }
output:
  drop: {}
`, port, e.checkpointYAML()))
	url := fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
	var ms e2etest.Metrics
	var body string
	waitFor(t, p, "promotions and the frontier", func() (bool, string) {
		b, m, err := scrape(url)
		if err != nil {
			return false, err.Error()
		}
		body, ms = b, m
		v, _ := one(t, ms, "tidemark_promotions", nil)
		_, fr := one(t, ms, "tidemark_frontier", map[string]string{"scope": "metrics0"})
		return v >= 5 && fr, tidemarkSeries(body)
	})
	v, ok := one(t, ms, "tidemark_parked_partitions", nil)
	assert.True(t, ok, "tidemark_parked_partitions is exported before any park:\n%s", tidemarkSeries(body))
	assert.Equal(t, 0.0, v)
	f, ok := one(t, ms, "tidemark_frontier", map[string]string{"scope": "metrics0"})
	assert.True(t, ok, "tidemark_frontier is exported")
	assert.GreaterOrEqual(t, f, 0.0)
}
