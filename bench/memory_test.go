package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/dynalitetest"
)

// EnvBin names the connect binary the memory benchmark runs
// (scripts/bench builds bin/connect and sets it).
const EnvBin = "TIDEMARK_BENCH_BIN"

const rssPartitions = 64

// rssConfig is the pipeline of the memory benchmark: 64 simulated
// partitions of events/64 events each, 100 per page, no latency, the
// default max_pages_in_flight, output drop.
func rssConfig(events int, backend, endpoint, table string) string {
	parts := partitionNames(rssPartitions)
	var cp string
	switch backend {
	case "memory":
		cp = "      backend: memory\n"
	case "dynamodb":
		cp = fmt.Sprintf("      backend: dynamodb\n      dynamodb:\n        table: %s\n        endpoint: %s\n        region: us-east-1\n        create: true\n", table, endpoint)
	}
	return fmt.Sprintf(`http:
  enabled: false
logger:
  level: warn
input:
  paginated_partitions:
    scope: rss
    partitions: [ %s ]
    exit_when_complete: true
    checkpoint:
%s    simulated:
      events_per_partition: %d
      page_size: 100
      latency: 0s
output:
  drop: {}
`, strings.Join(parts, ", "), cp, events/rssPartitions)
}

type rssResult struct {
	peak int64 // the process's own peak resident set, bytes: VmHWM (ru_maxrss only when no sample was read)
	hwm  int64 // the last VmHWM sampled from /proc/<pid>/status
	// The largest VmRSS sampled (every 50 ms) in the first and the second
	// half of the run: a process whose memory grows with the run has a
	// larger second half.
	firstHalf, secondHalf int64
	wall                  time.Duration
}

// rssRun runs bin/connect on cfg to completion and measures its resident
// set.
func rssRun(tb testing.TB, bin, cfg string) rssResult {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "rss.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", path)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	type sample struct {
		at  time.Duration
		rss int64
	}
	var (
		res     rssResult
		samples []sample
	)
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				rss, hwm := procMem(cmd.Process.Pid)
				if rss > 0 {
					samples = append(samples, sample{time.Since(start), rss})
				}
				res.hwm = max(res.hwm, hwm)
			}
		}
	}()
	err := cmd.Wait()
	close(done)
	<-sampled
	res.wall = time.Since(start)
	for _, s := range samples {
		if s.at < res.wall/2 {
			res.firstHalf = max(res.firstHalf, s.rss)
		} else {
			res.secondHalf = max(res.secondHalf, s.rss)
		}
	}
	if err != nil {
		tb.Fatalf("%s run: %v\n%s", bin, err, out.String())
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		tb.Fatal("no rusage")
	}
	// ru_maxrss is not the process's own peak: the kernel carries the
	// parent's peak over the fork and exec into the child's, so every run
	// reported at least the bench process's resident set. VmHWM is the
	// exec'd image's own high-water mark (sampled: growth in the last 50 ms
	// before exit is missed).
	res.peak = res.hwm
	if res.peak == 0 {
		res.peak = ru.Maxrss * 1024
	}
	return res
}

// procMem reads the resident set size and its peak (VmRSS, VmHWM) of a
// live process, in bytes.
func procMem(pid int) (rss, hwm int64) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	kb := func(v string) int64 {
		n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		return n * 1024
	}
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			hwm = kb(v)
		}
		if v, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			rss = kb(v)
		}
	}
	return rss, hwm
}

// BenchmarkPeakRSS runs bin/connect (TIDEMARK_BENCH_BIN) over 1,000,000 and
// 4,000,000 events of 64 simulated partitions (no latency, default
// max_pages_in_flight, output drop), with the memory backend and, with
// dynalite, the DynamoDB backend; peak-RSS-MB is the process's peak
// resident set (VmHWM, sampled every 50 ms). It must not grow with the run length: compare
// the two lengths, and the two halves of one run (peak-RSS-1st-half-MB,
// peak-RSS-2nd-half-MB, from VmRSS sampled every 50 ms).
func BenchmarkPeakRSS(b *testing.B) {
	bin := os.Getenv(EnvBin)
	if bin == "" {
		b.Skip(EnvBin + " is not set: build bin/connect and point it there (scripts/bench does)")
	}
	for _, backend := range []string{"memory", "dynamodb"} {
		for _, events := range []int{1_000_000, 4_000_000} {
			b.Run(fmt.Sprintf("backend=%s/events=%d", backend, events), func(b *testing.B) {
				if backend == "dynamodb" && os.Getenv(dynalitetest.EnvEndpoint) == "" {
					b.Skip("no dynalite")
				}
				var r rssResult
				loop(b, func() runResult {
					var cfg string
					if backend == "dynamodb" {
						tbl := dynalitetest.NewTable(b)
						cfg = rssConfig(events, backend, tbl.Endpoint, tbl.Name)
					} else {
						cfg = rssConfig(events, backend, "", "")
					}
					r = rssRun(b, bin, cfg)
					return runResult{}
				})
				b.ReportMetric(float64(r.peak)/(1<<20), "peak-RSS-MB")
				b.ReportMetric(float64(r.hwm)/(1<<20), "VmHWM-MB")
				b.ReportMetric(float64(r.firstHalf)/(1<<20), "peak-RSS-1st-half-MB")
				b.ReportMetric(float64(r.secondHalf)/(1<<20), "peak-RSS-2nd-half-MB")
				b.ReportMetric(float64(events)/r.wall.Seconds(), "events/s")
			})
		}
	}
}
