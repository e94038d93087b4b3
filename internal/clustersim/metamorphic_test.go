package clustersim

import (
	"flag"
	"maps"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// Flags of TestMetamorphic (-seed and -variant are TestSim's):
//
//	go test ./internal/clustersim -run TestMetamorphic -metamorphic-seeds=2000 -timeout=2h -v
var (
	flagMetaSeeds = flag.Int("metamorphic-seeds", 200, "schedules TestMetamorphic runs under every shape (from -base)")
	flagMetaSteps = flag.Int("metamorphic-steps", 600, "ops per metamorphic schedule")
	// TestMetamorphicInstancesEndAlike's schedules (each run three times).
	flagInstanceSeeds = flag.Int("instance-seeds", 200, "schedules TestMetamorphicInstancesEndAlike runs by 3, 1 and 3 leased instances (from -base)")
)

// TestMetamorphicShapesEndAlike runs each schedule under every shape of
// the input (coalescing on and off, max_pages_in_flight 1, 2 and 8), with
// the oracle after every step and liveness, and requires the same
// outcome: the same events delivered, the same final checkpoints (resume
// position, watermark, complete), the same published frontier.
func TestMetamorphicShapesEndAlike(t *testing.T) {
	runMetamorphicSeeds(t, *flagMetaSeeds, Shapes, RunMetamorphic, nil)
}

// TestMetamorphicInstancesEndAlike runs each schedule by three instances
// (each reading its own partitions), by one, and by three that share the
// partitions through heartbeat leases (their instance machines claiming,
// balancing and handing off), with the oracle after every step and
// liveness, and requires the same outcome: the same events delivered, the
// same final checkpoints, the same published frontier.
func TestMetamorphicInstancesEndAlike(t *testing.T) {
	// The leased instances claim the partitions, and take over those of
	// a crashed one.
	leased := map[string]func(Stats) int{
		"leased runs": func(s Stats) int { return s.LeaseRuns }, "claims": func(s Stats) int { return s.Claims },
		"steals": func(s Stats) int { return s.Steals },
	}
	t.Run("static", func(t *testing.T) {
		runMetamorphicSeeds(t, *flagInstanceSeeds, InstanceShapes, RunInstances, leased)
	})
	// With membership changes: partitions appear and split at the
	// provider and the discoverer follows; the final membership and the
	// published frontier are compared without their epoch numbers.
	changes := map[string]func(Stats) int{
		"epochs written by the discoverer": func(s Stats) int { return s.DiscoveryEpochs }, "splits": func(s Stats) int { return s.Splits },
		"children waiting for their parents": func(s Stats) int { return s.LineageWaits },
	}
	for k, v := range leased {
		changes[k] = v
	}
	t.Run("membership", func(t *testing.T) {
		runMetamorphicSeeds(t, *flagInstanceSeeds, MembershipInstanceShapes, RunInstancesMembership, changes)
	})
}

// runMetamorphicSeeds runs n schedules (from -base; -seed runs one) under
// shapes with run, in parallel, and fails on any failure, on outcomes that
// compare nothing, or (with more than one schedule) when a count of
// coverage is zero over every run.
func runMetamorphicSeeds(t *testing.T, n int, shapes []Shape, run func(Config) MetamorphicResult, coverage map[string]func(Stats) int) {
	v, err := ParseVariant(*flagVariant)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Steps: *flagMetaSteps, Variant: v, TraceTail: *flagTail}
	base := *flagBase
	if *flagSeed != 0 {
		base, n = *flagSeed, 1
	}
	start := time.Now()
	var (
		mu       sync.Mutex
		failures []*Failure
		runs     int
		events   int
		marks    int
		wg       sync.WaitGroup
		stats    Stats
	)
	next := make(chan uint64)
	for w := 0; w < runtime.GOMAXPROCS(0); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seed := range next {
				c := cfg
				c.Seed = seed
				r := run(c)
				mu.Lock()
				runs += r.Runs
				stats.Add(r.Stats)
				if o := r.Outcome; o != nil {
					events += len(o.Delivered)
					for _, cp := range o.Checkpoints {
						if !strings.Contains(cp, "watermark none,") {
							marks++
						}
					}
				}
				if r.Failure != nil {
					failures = append(failures, r.Failure)
				}
				mu.Unlock()
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- base + uint64(i)
	}
	close(next)
	wg.Wait()
	t.Logf("%d schedules (seeds %d..%d, %d steps each) under %d shapes: %d runs in %s, %d failed; the outcomes compared hold %d events and %d checkpoints with a watermark",
		n, base, base+uint64(n)-1, cfg.Steps, len(shapes), runs, time.Since(start).Round(time.Millisecond), len(failures), events, marks)
	if len(failures) == 0 && (events == 0 || marks == 0) {
		t.Fatalf("the outcomes compared are empty (%d events, %d watermarks): the comparison proves nothing", events, marks)
	}
	for _, name := range slices.Sorted(maps.Keys(coverage)) {
		if got := coverage[name](stats); n > 1 && got == 0 {
			t.Errorf("coverage: no %s in any run", name)
		} else {
			t.Logf("%s: %d", name, got)
		}
	}
	if len(failures) > 0 {
		sort.Slice(failures, func(i, j int) bool { return failures[i].Seed < failures[j].Seed })
		var seeds []uint64
		for _, f := range failures {
			seeds = append(seeds, f.Seed)
		}
		t.Fatalf("%d of %d schedules failed (seeds %v); the first:\n%s", len(failures), n, seeds, failures[0].Error())
	}
}
