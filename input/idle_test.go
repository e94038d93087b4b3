package input

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/store/memstore"
)

// seal marks the partition sealed at its current end.
func (s *shardSource) seal(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.shards[name].sealed = true
}

// grow appends n events to the partition.
func (s *shardSource) grow(name string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sh := s.shards[name]
	for range n {
		s.next++
		sh.events = append(sh.events, s.next)
	}
}

func (r *liveRun) complete(parts ...string) bool {
	for _, p := range parts {
		cp, err := r.st.LoadCheckpoint(r.t.Context(), store.Key{Scope: "shards", Partition: p})
		if err != nil || !cp.Complete {
			return false
		}
	}
	return true
}

// A complete partition's worker ends: once every partition is sealed and
// read to its end, the input runs no worker, drives no partition and
// waits for no deadline (without leases, and with them: the leases stay
// held).
func TestCompletePartitionsEndTheirWorkers(t *testing.T) {
	for _, leased := range []bool{false, true} {
		t.Run(map[bool]string{false: "without leases", true: "with leases"}[leased], func(t *testing.T) {
			src := newShardSource()
			src.add("s0", 4)
			src.add("s1", 7)
			src.seal("s0")
			src.seal("s1")
			var lc *LeaseConfig
			if leased {
				lc = &LeaseConfig{InstanceID: "a", Period: time.Second, RenewInterval: 200 * time.Millisecond, BalanceInterval: 300 * time.Millisecond, MaxSteals: 1}
			}
			r := startLiveOn(t, src, memstore.New(), false, lc)
			r.waitFor("every event", func() bool { return r.delivered(src.ids()) })
			r.waitFor("both partitions complete", func() bool { return r.complete("s0", "s1") })
			r.waitFor("no worker left", func() bool {
				live, driving := r.in.runner.workers()
				return live == 0 && driving == 0
			})
			assert.Zero(t, r.in.runner.sched.Pending(), "no deadline waits for a complete partition")
			if leased {
				for _, p := range []string{"s0", "s1"} {
					cp, err := r.st.LoadCheckpoint(t.Context(), store.Key{Scope: "shards", Partition: p})
					require.NoError(t, err)
					assert.Contains(t, cp.Lease.Owner, "a#", "the lease of %s stays held", p)
				}
			}
		})
	}
}

// A quiet partition waits for its next poll in the input's scheduler,
// holding no goroutine, and still picks up a new event after its poll
// interval.
func TestQuietPartitionPicksUpANewEventAfterItsPollInterval(t *testing.T) {
	src := newShardSource()
	src.add("s0", 4)
	r := startLive(t, src, false)
	r.waitFor("every event", func() bool { return r.delivered(src.ids()) })
	r.waitFor("s0 quiet: its next poll waits in the scheduler, no goroutine drives it", func() bool {
		live, driving := r.in.runner.workers()
		return live == 1 && driving == 0 && r.in.runner.sched.Pending() == 1
	})
	src.grow("s0", 2)
	r.waitFor("the new events", func() bool { return r.delivered(src.ids()) })
	live, _ := r.in.runner.workers()
	assert.Equal(t, int64(1), live, "the quiet partition's worker still runs")
	assert.False(t, r.complete("s0"))
}

// Many quiet partitions wait in the one scheduler: each has its next poll
// pending there, none is driven by a goroutine, and the pool keeps no more
// goroutines than it lets linger.
func TestQuietPartitionsWaitInOneSchedulerWithoutGoroutines(t *testing.T) {
	const n = 300
	src := newShardSource()
	for i := range n {
		src.add(fmt.Sprintf("q%03d", i), 2)
	}
	// A poll interval of seconds, so that the 300 partitions' polls (each
	// one drives the partition for a moment) leave the instants at which
	// none is driven even under -race on a busy machine; at 20 ms they
	// never did there.
	r := startLiveWith(t, src, memstore.New(), false, nil, 5*time.Second)
	r.waitFor("every event", func() bool { return r.delivered(src.ids()) })
	r.waitFor("every partition quiet at once", func() bool {
		live, driving := r.in.runner.workers()
		return live == n && driving == 0 && r.in.runner.sched.Pending() == n && r.in.runner.pool.Running() <= runnersKept
	})
}
