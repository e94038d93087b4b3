package input

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/tidemark/tidemark/internal/sched"
)

// partitionRunners bounds the goroutines that drive partitions at once
// (their fetches run on goroutines of their own, as before): partitions
// with work beyond it wait their turn in the pool's queue.
const partitionRunners = 256

// runnerLinger is how long a pool goroutine with nothing to do waits for
// the next partition before it ends, and runnersKept how many of them wait
// (partitions polled every second keep a few goroutines, and their stacks,
// instead of starting one per poll).
const (
	runnerLinger = time.Second
	runnersKept  = 4
)

// partitionRunner is what the input's partitions share instead of a
// goroutine and a timer each: one scheduler holding every partition's
// next deadline (a quiet partition's next poll, a back-off, a park check)
// and one bounded pool of goroutines that drive the partitions with
// something to do. An idle input holds the scheduler's goroutine only.
type partitionRunner struct {
	sched *sched.Scheduler[*partition]
	pool  *sched.Pool
	// live counts the workers launched and not ended (complete
	// partitions' workers end).
	live atomic.Int64
	// driving counts the partitions a goroutine drives now (or that wait
	// for one in the pool's queue).
	driving atomic.Int64
}

func newPartitionRunner() *partitionRunner {
	return &partitionRunner{
		sched: sched.NewScheduler(sched.Real, (*partition).fire),
		pool:  sched.NewPool(partitionRunners, runnersKept, runnerLinger),
	}
}

// run fires deadlines until ctx ends (one goroutine per input).
func (r *partitionRunner) run(ctx context.Context) { r.sched.Run(ctx) }

// workers is how many partition workers run (launched and not ended) and
// how many of them are driven by a goroutine now (or wait for one): for
// tests.
func (r *partitionRunner) workers() (live, driving int64) {
	return r.live.Load(), r.driving.Load()
}
