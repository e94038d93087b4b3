package bench

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"
)

// Figures of the issue: 20 ms per fetch, 100 events per page.
const (
	benchLatency  = 20 * time.Millisecond
	benchPageSize = 100
)

// benchPages is the number of pages per partition of a throughput run
// (TIDEMARK_BENCH_PAGES, default 200: 4 s at the limit).
func benchPages() int {
	if n, err := strconv.Atoi(os.Getenv("TIDEMARK_BENCH_PAGES")); err == nil && n > 0 {
		return n
	}
	return 200
}

var partitionCounts = []int{1, 4, 16, 64}

// loop runs one op per b.Loop iteration and reports the CPU it used: the
// bench process, dynalite and everything else on the machine (other
// sessions), in cores, and the one-minute load average at the end.
func loop(b *testing.B, op func() runResult) runResult {
	var r runResult
	c0 := sampleCPU()
	for b.Loop() {
		r = op()
	}
	u := sampleCPU().since(c0)
	b.ReportMetric(u.Self, "cpu-bench-cores")
	if u.Dynalite > 0 {
		b.ReportMetric(u.Dynalite, "cpu-dynalite-cores")
	}
	b.ReportMetric(u.Others, "cpu-others-cores")
	b.ReportMetric(load1(), "load1")
	return r
}

func reportThroughput(b *testing.B, s runSpec, r runResult) {
	rate := float64(r.Events) / r.Wall.Seconds()
	b.ReportMetric(rate, "events/s")
	b.ReportMetric(s.limit(), "limit-events/s")
	b.ReportMetric(rate/s.limit(), "ratio")
	b.ReportMetric(float64(r.FirstEvent)/float64(time.Millisecond), "first-event-ms")
	if r.Costs != nil {
		for _, k := range []string{kWitnessPut, kPromotion} {
			b.ReportMetric(r.Costs.meanLatency(k), k+"-ms")
		}
	}
}

// BenchmarkThroughput runs the whole pipeline (simulated source, 20 ms per
// fetch, 100 events per page -> paginated_partitions -> an output acking at
// once) to completion for P partitions, with the checkpoint store on
// dynalite, in memory, and in memory behind a fixed latency per request
// (memory+5ms, memory+10ms: DynamoDB's latency without a throughput
// ceiling). events/s counts the source's events over the time
// from the stream's start to the last delivered batch; limit-events/s is
// P*100/0.020; ratio is their quotient. With DynamoDB, witness-put-ms and
// promotion-ms are the mean latencies of those requests in steady state.
func BenchmarkThroughput(b *testing.B) {
	for _, st := range []string{"dynamodb", "memory", "memory+5ms", "memory+10ms"} {
		for _, p := range partitionCounts {
			b.Run(fmt.Sprintf("store=%s/P=%d", st, p), func(b *testing.B) {
				s := runSpec{Partitions: p, Pages: benchPages(), PageSize: benchPageSize, Latency: benchLatency, Store: st}
				r := loop(b, func() runResult { return runPipeline(b, s) })
				reportThroughput(b, s, r)
			})
		}
	}
}

// BenchmarkPlainRead is the physical reference: the same source read with
// one goroutine per partition fetching sequentially and discarding, with no
// checkpoint and no pipeline.
func BenchmarkPlainRead(b *testing.B) {
	for _, p := range partitionCounts {
		b.Run(fmt.Sprintf("P=%d", p), func(b *testing.B) {
			s := runSpec{Partitions: p, Pages: benchPages(), PageSize: benchPageSize, Latency: benchLatency}
			r := loop(b, func() runResult { return plainRead(b, s) })
			reportThroughput(b, s, r)
		})
	}
}
