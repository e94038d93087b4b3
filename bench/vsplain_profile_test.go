package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
)

// BenchmarkVsPlainInProcess runs the two pipelines of BenchmarkVsPlain
// (plain_http.yaml and tidemark_http.yaml with the memory store) in the
// test process, against the same local page server, so that `go test
// -cpuprofile` profiles them: run one pipeline at a time, e.g.
//
//	go test -run '^$' -bench 'BenchmarkVsPlainInProcess/P=16/pipeline=plain$' -benchtime 1x -cpuprofile plain.prof ./bench/
//	go tool pprof -top -nodecount 40 plain.prof
//
// The profile holds the page server too (the same for both pipelines:
// net/http writing prepared pages). CPU figures to compare with plain come
// from BenchmarkVsPlain (a process of its own), not from here.
func BenchmarkVsPlainInProcess(b *testing.B) {
	for _, p := range []int{16, 64} {
		for _, pipe := range []string{"plain", "tidemark"} {
			b.Run(fmt.Sprintf("P=%d/pipeline=%s", p, pipe), func(b *testing.B) {
				for b.Loop() {
					srv := newPageServer(b, vsPages(p), benchPageSize, benchLatency)
					parts := partitionNames(p)
					c := vsConfig{URL: srv.URL, Scope: fmt.Sprintf("vsplain-inproc-%d", envSeq.Add(1)), Partitions: parts, Backend: "memory"}
					text := plainHTTPConfig
					if pipe == "tidemark" {
						text = tidemarkHTTPConfig
					}
					sb := service.NewStreamBuilder()
					if err := sb.SetYAML(renderConfig(b, pipe, text, c)); err != nil {
						b.Fatal(err)
					}
					stream, err := sb.Build()
					if err != nil {
						b.Fatal(err)
					}
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
					err = stream.Run(ctx)
					cancel()
					if err != nil {
						b.Fatal(err)
					}
					if err := srv.check(parts); err != nil {
						b.Fatal(err)
					}
					b.ReportMetric(srv.last.Sub(srv.first).Seconds(), "wall-s")
				}
			})
		}
	}
}
