package clustersim

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// Flags of the simulator tests. CI runs the defaults; the long mode is
//
//	go test ./internal/clustersim -run TestSim -schedules=100000 -timeout=2h -v
var (
	flagSeed      = flag.Uint64("seed", 0, "run only the schedule with this seed (0: run -schedules schedules from -base)")
	flagSchedules = flag.Int("schedules", 0, "number of schedules TestSim runs (default 2000; 300 under -race or with -short)")
	flagSteps     = flag.Int("steps", 0, "ops per schedule (default DefaultSteps, 1500)")
	flagBase      = flag.Uint64("base", 1, "first seed of a multi-schedule run")
	flagVariant   = flag.String("variant", "faithful", "behaviour under test: faithful, promote-other-successor, max-frontier, bare-empty-page, unconditional-write, ignore-lease, any-watermark-covers, park-on-malformed, retry-malformed-forever, partial-view, children-first, self-certified-watermark, ignore-offset-overlap, ignore-incarnation, coalesced-watermark-dropped, accept-offset-shaped-successor, trust-first-page, emit-before-incarnation-check, skip-reread-receipts, keep-lost-lease, exit-with-parked, publish-before-promotion")
	flagStrict    = flag.Bool("strict-records", false, "also fail when a promoted witness is later recorded abandoned")
	flagTail      = flag.Int("tail", 60, "history lines printed on failure")
	flagLiveness  = flag.Bool("liveness", true, "add a fault-free phase and check that every partition catches up")
	flagHistory   = flag.Bool("history", false, "with -seed: log every history line, not only the tail of a failure")
	flagReplay    = flag.String("replay", "", "with -seed: replay the ops in this file (one per line) instead of generating them")
	flagShrink    = flag.Int("shrink", 600, "replays spent shrinking a failure to a shorter op list (0: none)")
)

func defaultSchedules() int {
	switch {
	case *flagSchedules > 0:
		return *flagSchedules
	case raceEnabled:
		return 300
	case testing.Short():
		return 300
	}
	return 2000
}

// runMany runs n schedules from seed base on every CPU and returns the
// failures ordered by seed, and the summed stats.
func runMany(base uint64, n int, cfg Config) ([]*Failure, Stats) {
	var (
		mu       sync.Mutex
		failures []*Failure
		total    Stats
		wg       sync.WaitGroup
	)
	next := make(chan uint64)
	for w := 0; w < runtime.GOMAXPROCS(0); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seed := range next {
				c := cfg
				c.Seed = seed
				res := Run(c)
				mu.Lock()
				total.Add(res.Stats)
				if res.Failure != nil {
					failures = append(failures, res.Failure)
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
	sort.Slice(failures, func(i, j int) bool { return failures[i].Seed < failures[j].Seed })
	return failures, total
}

// TestSim runs the faithful simulator (or -variant) over many seeded
// schedules with the oracle checked after every step, or one schedule with
// -seed. A failure prints the seed, the tail of the history and the
// command that reproduces it.
func TestSim(t *testing.T) {
	v, err := ParseVariant(*flagVariant)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Steps: *flagSteps, Variant: v, StrictRecords: *flagStrict, TraceTail: *flagTail, Liveness: *flagLiveness}
	if *flagSeed != 0 {
		cfg.Seed = *flagSeed
		if *flagHistory {
			cfg.OnStep = func(line string) { t.Log(line) }
		}
		if *flagReplay != "" {
			b, err := os.ReadFile(*flagReplay)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Ops, err = ParseOps(string(b)); err != nil {
				t.Fatal(err)
			}
		}
		res := Run(cfg)
		t.Logf("setup: %s", res.Setup)
		t.Logf("stats: %+v", res.Stats)
		if res.Failure != nil {
			t.Fatal(res.Failure.Error() + shrunk(t, cfg, res.Failure))
		}
		return
	}
	n := defaultSchedules()
	start := time.Now()
	failures, total := runMany(*flagBase, n, cfg)
	elapsed := time.Since(start)
	t.Logf("%d schedules (seeds %d..%d, %d steps) in %s, %d failed", n, *flagBase, *flagBase+uint64(n)-1, total.Steps, elapsed.Round(time.Millisecond), len(failures))
	t.Logf("stats: %+v", total)
	if v == Faithful && total.FalseAlarms > 0 {
		t.Errorf("the contract monitors reported %d violations of kinds the model never commits (only rogue token rotations and its own watermarks)", total.FalseAlarms)
	}
	if len(failures) > 0 {
		seeds := make([]uint64, 0, len(failures))
		for _, f := range failures {
			seeds = append(seeds, f.Seed)
		}
		if len(seeds) > 20 {
			seeds = seeds[:20]
		}
		c := cfg
		c.Seed = failures[0].Seed
		t.Fatalf("%d of %d schedules failed (first seeds %v); the first:\n%s%s", len(failures), n, seeds, failures[0].Error(), shrunk(t, c, failures[0]))
	}
	// Coverage is a property of a large sample: the rarest paths (a paused
	// zombie's fenced promotion) need about a thousand schedules. The
	// 2,000-schedule run of `make sim` checks it; the shorter -short and
	// -race runs check only the invariants.
	if v == Faithful && n >= 1000 {
		assertCoverage(t, total)
	}
}

// shrunk shrinks a failure and describes the shorter schedule and how to
// replay it.
func shrunk(t *testing.T, cfg Config, f *Failure) string {
	if *flagShrink <= 0 || cfg.Ops != nil {
		return ""
	}
	ops, g := Shrink(cfg, f, *flagShrink)
	path := filepath.Join(os.TempDir(), fmt.Sprintf("tidemark-sim-%d-%s.ops", f.Seed, f.Variant))
	if err := os.WriteFile(path, []byte(FormatOps(ops)), 0o644); err != nil {
		t.Logf("cannot write the shrunk schedule: %v", err)
	}
	return fmt.Sprintf("\nshrunk to %d ops (of %d), failing check %s: %s\n%s\nreplay: %s -replay=%s -v\n",
		len(ops), len(f.Ops), g.Check, g.Detail, strings.Join(g.Trace, "\n"), strings.TrimSuffix(f.Rerun(), " -v"), path)
}

// assertCoverage fails when the schedules did not reach the states the
// simulator exists to exercise: a simulator that never loses a CAS or
// never crashes proves nothing.
func assertCoverage(t *testing.T, s Stats) {
	t.Helper()
	for name, got := range map[string]int{
		"promotions": s.Promotions, "fetch-ahead pages": s.FetchAhead, "lost CAS races": s.Fenced,
		"lost responses": s.LostResponses, "resolved lost promotions": s.ResolvedApplied,
		"throttled calls": s.Throttled, "crashes": s.Crashes, "exact replays": s.ExactReplays,
		"token rotations": s.Rotations, "shifted pages": s.ShiftedPages, "divergences": s.Divergences,
		"retries that grew at the head": s.HeadGrowths, "rogue rotations reported by the monitors": s.RogueRotationsSeen,
		"regressing watermarks reported by the monitors": s.RegressionsSeen, "frontiers withdrawn": s.Withdrawals,
		"offset-shaped successors reported by the monitors": s.OffsetShapedSeen,
		"restarts": s.Restarts, "parks": s.Parks, "unparks": s.Unparks, "expiries": s.Expired,
		"glitch pages": s.Glitches, "omissions": s.Omissions, "first pages cut above the origin": s.FirstPagesCut, "lagging retries": s.Lags, "stalls": s.Stalls, "holds": s.Holds,
		"nacks": s.Nacks, "scalars published": s.ScalarsPublished, "membership epochs": s.Epochs,
		"unproven epochs": s.UnprovenEpochs, "shared partitions": s.SharedPartitions,
		"malformed pages": s.Garbage, "pages with has_more and no successor": s.Torn, "malformed bodies": s.MalformedFaults, "malformed answers retried or parked": s.MalformedAnswers,
		"parks after malformed answers": s.MalformedParks, "persistently malformed partitions": s.BrokenRuns, "operator restarts": s.Repairs,
		"scalars after a membership change": s.ScalarsAfterChange, "resolved to another winner": s.ResolvedMoved,
		"promotions written again after a lost response": s.ResolvedRetry,
		"lease-mode schedules":                           s.LeaseRuns, "lease steals": s.Steals, "pauses": s.Pauses,
		"zombie promotions fenced by the lease": s.ZombieFenced,
		"pages without a successor":             s.NoSuccessor, "retries repeating the boundary event": s.BoundaryRepeats,
		"pages with tied positions": s.Ties, "durably completed partitions": s.Completions,
		"lanes ended by exit_when_complete": s.Exits, "instances ended by their machine's Exit": s.InstanceExits, "coalesced promotions": s.Coalesced,
		"promotions that waited for the page behind": s.PromotionWaits,
		"witnesses written in groups":                s.WitnessGroups,
		"transient fetch failures retried":           s.TransientRetries, "transient retries that ran out": s.TransientGiveUps,
		"queued emissions dropped at a chain's end": s.DroppedEmissions, "witnesses pruned": s.Pruned,
		"schedules with discovery": s.DiscoveryRuns, "schedules with three publishers": s.ThreePublisherRuns,
		"splits": s.Splits, "epochs written by the discoverer": s.DiscoveryEpochs,
		"split parents that left sealed": s.ParentsRetired, "children waiting for their parents": s.LineageWaits,
		"children released once their parents completed":                    s.ChildrenReleased,
		"schedules with a split that ended proven without the split parent": s.SplitRunsSettled,
		"complete partitions reopened by a recreated source":                s.ReopenedComplete,
		"late events shown beyond a re-read window":                         s.LateBeyondWindow,
		"late arrivals near a re-read window's edge named":                  s.LateNearEdgeNamed,
		"events shown beyond a re-read window left undelivered":             s.BeyondMissed,
	} {
		if got == 0 {
			t.Errorf("coverage: no %s in any schedule", name)
		}
	}
}

func ExampleParseOp() {
	op, _ := ParseOp("step w1 4 9")
	fmt.Println(op.Kind, op.W, op.N, op.M, op)
	// Output: step 1 4 9 step w1 4 9
}
