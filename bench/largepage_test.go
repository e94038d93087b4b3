package bench

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
)

// largePageServer serves pages of `events` events of `payload` bytes each
// (a page is events × payload bytes of JSON, 10 MB at 100 × 100 KB) for
// any partition: cursor "" is page 0, cursor "N" page N, and after the last
// page an empty page without successor.
func largePageServer(pages, events, payload int) *httptest.Server {
	blob := strings.Repeat("x", payload)
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("cursor"))
		w.Header().Set("Content-Type", "application/json")
		if n >= pages {
			fmt.Fprint(w, `{"events":[]}`)
			return
		}
		var sb strings.Builder
		sb.Grow(events * (payload + 64))
		sb.WriteString(`{"events":[`)
		for i := range events {
			if i > 0 {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, `{"id":"e%d-%d","pos":%d,"body":"%s"}`, n, i, n*events+i+1, blob)
		}
		fmt.Fprintf(&sb, `],"next":"%d"}`, n+1)
		_, _ = w.Write([]byte(sb.String()))
	}))
}

// BenchmarkPeakRSSLargePages runs bin/connect (TIDEMARK_BENCH_BIN) over 4
// partitions of 10 MB pages (100 events of 100 KB; 6 pages each) from a
// local page server, with a pipeline slower than the source (a 2 ms sleep
// per message, 200 ms a page) so that pages pile up to the byte budget, at
// max_bytes_in_flight 64 MiB (the default), 16 MiB and 1 byte (one page
// per partition, whatever the budget), and reports the peak resident set
// (peak-RSS-MB) beside the budget and the page size. docs/benchmarks.md
// ("Memory with large pages") carries the figures and the formula.
func BenchmarkPeakRSSLargePages(b *testing.B) {
	bin := os.Getenv(EnvBin)
	if bin == "" {
		b.Skip(EnvBin + " is not set: build bin/connect and point it there (scripts/bench does)")
	}
	const (
		parts   = 4
		pages   = 6
		events  = 100
		payload = 100 << 10
	)
	srv := largePageServer(pages, events, payload)
	defer srv.Close()
	for _, budget := range []int{64 << 20, 16 << 20, 1} {
		b.Run(fmt.Sprintf("max_bytes_in_flight=%d", budget), func(b *testing.B) {
			var r rssResult
			loop(b, func() runResult {
				r = rssRun(b, bin, largePageConfig(srv.URL, parts, budget))
				return runResult{}
			})
			b.ReportMetric(float64(r.peak)/(1<<20), "peak-RSS-MB")
			b.ReportMetric(float64(budget)/(1<<20), "budget-MB")
			b.ReportMetric(float64(events*payload)/(1<<20), "page-MB")
		})
	}
}

func largePageConfig(url string, parts, budget int) string {
	return fmt.Sprintf(`http:
  enabled: false
logger:
  level: warn
input:
  paginated_partitions:
    scope: large-pages
    partitions: [ %s ]
    exit_when_complete: true
    max_bytes_in_flight: %d
    checkpoint:
      backend: memory
    http:
      url: '%s/p/${! @partition }?cursor=${! @cursor }'
      max_response_bytes: 33554432
      events: root = this.events
      event_position: root = this.pos
      successor: root = this.next.or(deleted())
      contract:
        positions: dense
        empty_page: end_of_data
pipeline:
  processors:
    - sleep: { duration: 2ms }
output:
  drop: {}
`, strings.Join(partitionNames(parts), ", "), budget, url)
}
