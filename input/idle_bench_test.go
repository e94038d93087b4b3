package input

// The idle cost of a partition: what an input holds and spends per
// partition once every partition has delivered its events and only polls
// (docs/design.md "Performance model", "Idle partitions").
//
//	go test -run '^$' -bench 'BenchmarkIdlePartitions|BenchmarkQuietPartitionsBackedOff' -benchtime 1x ./input/
//
// reports, per partition, over an idle window of idleWindow: goroutines,
// goroutine stack bytes, the live heap the input holds (after a GC: what
// it frees when it closes; the in-memory store and the simulated source
// are reported apart) and CPU time (user and system, getrusage of the
// whole process), and per quiet poll (a fetch of a caught-up partition,
// counted at the source): the process's CPU (cpu-us/poll: everything it
// spent in the window, garbage collection included, over the polls made
// in it), allocations and bytes allocated. IDLE_CPUPROFILE=file writes a
// CPU profile of the window, IDLE_HEAPPROFILE=file a heap profile at its
// end.

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/tidemark/tidemark/internal/chain"
	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/store/memstore"
	"github.com/tidemark/tidemark/provider"
	"github.com/tidemark/tidemark/provider/simulated"
)

// idleWindow is how long the idle input is measured: ten polls of every
// partition at the default poll_interval.
const idleWindow = 10 * time.Second

func BenchmarkIdlePartitions(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) {
			for range b.N {
				benchIdle(b, n, idleRun{window: idleWindow})
			}
		})
	}
}

// BenchmarkQuietPartitionsBackedOff is BenchmarkIdlePartitions with
// max_poll_interval 10s: the window starts once every partition's
// back-off has reached it (1s, 2s, 4s, 8s of quiet first), and is three
// of its polls long.
func BenchmarkQuietPartitionsBackedOff(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) {
			for range b.N {
				benchIdle(b, n, idleRun{maxPoll: 10 * time.Second, settle: 20 * time.Second, window: 30 * time.Second})
			}
		})
	}
}

// idleRun is one idle measurement's shape.
type idleRun struct {
	// complete: exit_when_complete (the partitions end once caught up).
	complete bool
	// maxPoll is max_poll_interval (0: no back-off).
	maxPoll time.Duration
	// settle: how long to wait once idle before the window starts.
	settle time.Duration
	// window: how long the idle input is measured.
	window time.Duration
}

// BenchmarkCompletePartitions is the same with exit_when_complete: every
// partition completes once it is caught up, and the input then holds
// nothing but what it needs to answer (the end of input).
func BenchmarkCompletePartitions(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) {
			for range b.N {
				benchIdle(b, n, idleRun{complete: true, window: idleWindow})
			}
		})
	}
}

// idleFigures is what one idle measurement found, per partition.
type idleFigures struct {
	goroutines float64
	heapBytes  float64
	stackBytes float64
	cpuPerSec  float64 // CPU seconds per second of idle window
}

func benchIdle(b *testing.B, n int, run idleRun) {
	complete := run.complete
	const events = 5
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf("partition-%05d", i)
	}
	sim, err := simulated.New(simulated.Config{Partitions: parts, EventsPerPartition: events})
	if err != nil {
		b.Fatal(err)
	}
	prov := &countingProvider{Provider: sim}
	st := memstore.New()
	before := idleSample()

	bi, err := New(Config{
		Scope: "idle", Partitions: parts,
		// The spec's defaults.
		Config: chain.Config{
			MaxPagesInFlight: 4, PollInterval: time.Second, MaxPollInterval: run.maxPoll, ParkCheckInterval: 10 * time.Second,
			StoreBackoff: time.Second, FetchRetries: 5, FetchBackoff: 100 * time.Millisecond,
			ExitWhenComplete: complete, CoalescePromotions: true,
		},
	}, prov, st, nil, service.MockResources())
	if err != nil {
		b.Fatal(err)
	}
	in := bi.(*paginatedInput)
	if err := in.Connect(b.Context()); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var delivered atomic.Int64
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		for {
			batch, ack, err := in.ReadBatch(ctx)
			if err != nil {
				return
			}
			delivered.Add(int64(len(batch)))
			_ = ack(ctx, nil)
		}
	}()
	closeInput := sync.OnceFunc(func() {
		cancel()
		cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
		defer ccancel()
		if err := in.Close(cctx); err != nil {
			b.Error(err)
		}
		<-readerDone
	})
	defer closeInput()

	// Idle: every event delivered and every checkpoint promoted through
	// the partition's last event (and, with exit_when_complete, the input
	// ended).
	deadline := time.Now().Add(5 * time.Minute)
	for {
		if delivered.Load() >= int64(n*events) && promotedThrough(b, st, "idle", n, events) && (!complete || ended(readerDone)) {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("not idle after 5 minutes: %d of %d events delivered", delivered.Load(), n*events)
		}
		time.Sleep(100 * time.Millisecond)
	}

	time.Sleep(run.settle)
	b.ResetTimer()
	if path := os.Getenv("IDLE_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			b.Fatal(err)
		}
		defer f.Close()
	}
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	fetches0 := prov.fetches.Load()
	cpu0 := cpuTime()
	wall0 := time.Now()
	time.Sleep(run.window)
	cpu := cpuTime() - cpu0
	wall := time.Since(wall0)
	polls := prov.fetches.Load() - fetches0
	runtime.ReadMemStats(&ms1)
	pprof.StopCPUProfile()
	b.StopTimer()
	// Sample between two rounds of polls (the partitions started together
	// and poll together), not in the middle of one.
	betweenPolls(in)
	after := idleSample()
	if path := os.Getenv("IDLE_HEAPPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
	// What the input itself holds: the heap it frees when it closes (the
	// store and the source, which outlive it, stay).
	closeInput()
	closed := idleSample()
	runtime.KeepAlive(st)
	runtime.KeepAlive(prov)

	f := idleFigures{
		goroutines: float64(after.goroutines-before.goroutines) / float64(n),
		heapBytes:  float64(int64(after.heap)-int64(closed.heap)) / float64(n),
		stackBytes: float64(int64(after.stack)-int64(before.stack)) / float64(n),
		cpuPerSec:  cpu.Seconds() / wall.Seconds() / float64(n),
	}
	b.ReportMetric(f.goroutines, "goroutines/partition")
	b.ReportMetric(f.heapBytes, "input-heap-B/partition")
	b.ReportMetric(float64(int64(closed.heap)-int64(before.heap))/float64(n), "store+source-heap-B/partition")
	b.ReportMetric(f.stackBytes, "stack-B/partition")
	b.ReportMetric(f.cpuPerSec*100, "%core/partition")
	b.ReportMetric(cpu.Seconds()/wall.Seconds()*100, "%core-total")
	if polls > 0 {
		// A quiet poll: everything the process spent in the window (the
		// polls' fetches, timers, scheduling, garbage collection) over the
		// polls made in it.
		b.ReportMetric(float64(polls)/wall.Seconds()/float64(n), "polls/s/partition")
		b.ReportMetric(cpu.Seconds()*1e6/float64(polls), "cpu-us/poll")
		b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/float64(polls), "allocs/poll")
		b.ReportMetric(float64(ms1.TotalAlloc-ms0.TotalAlloc)/float64(polls), "B/poll")
		b.ReportMetric(float64(ms1.NumGC-ms0.NumGC), "GCs")
	}
}

// countingProvider counts the fetches of a simulated source (the polls of
// quiet partitions once they are caught up).
type countingProvider struct {
	*simulated.Provider
	fetches atomic.Int64
}

func (p *countingProvider) Fetch(ctx context.Context, req provider.Request) (provider.Response, error) {
	p.fetches.Add(1)
	return p.Provider.Fetch(ctx, req)
}

// promotedThrough reports whether each of the n partitions of scope has a
// checkpoint whose watermark is at least through.
func promotedThrough(b *testing.B, st store.Store, scope string, n int, through int64) bool {
	cps, err := st.ListCheckpoints(context.Background(), scope)
	if err != nil {
		b.Fatal(err)
	}
	if len(cps) < n {
		return false
	}
	for _, cp := range cps {
		if cp.Watermark.Less(coord.Integer(through)) {
			return false
		}
	}
	return true
}

type idleSnapshot struct {
	goroutines  int
	heap, stack uint64
}

func idleSample() idleSnapshot {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return idleSnapshot{goroutines: runtime.NumGoroutine(), heap: ms.HeapAlloc, stack: ms.StackInuse}
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// betweenPolls waits (up to a poll interval) until no partition is being
// driven.
func betweenPolls(in *paginatedInput) {
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if _, driving := in.runner.workers(); driving == 0 {
			return
		}
	}
}

func ended(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
