package clustersim

import (
	"slices"
	"testing"
)

// TestDiscoveryDeterministic: a schedule with discovery and a split replays
// to the same history from its ops ("split" and "discover" print and parse).
func TestDiscoveryDeterministic(t *testing.T) {
	for seed := uint64(1); seed <= 200; seed++ {
		var a, b []string
		r := Run(Config{Seed: seed, Steps: 800, OnStep: func(l string) { a = append(a, l) }})
		if r.Stats.DiscoveryRuns == 0 || r.Stats.Splits == 0 || r.Stats.DiscoveryEpochs == 0 {
			continue
		}
		ops, err := ParseOps(FormatOps(r.ops()))
		if err != nil {
			t.Fatal(err)
		}
		Run(Config{Seed: seed, Ops: ops, OnStep: func(l string) { b = append(b, l) }})
		if !slices.Equal(a, b) {
			t.Fatalf("seed %d: the replay of a schedule with a split differs", seed)
		}
		return
	}
	t.Fatal("no schedule with a split and a discovery epoch in seeds 1..200")
}

// TestSplitEndsProvenWithoutParent: schedules with splits pass every check,
// read the children only after their parents completed, and end (once
// everything is read) in a proven epoch without the split parents.
func TestSplitEndsProvenWithoutParent(t *testing.T) {
	settled := 0
	for seed := uint64(1); seed <= 60 && settled < 3; seed++ {
		r := Run(Config{Seed: seed, Liveness: true})
		if r.Failure != nil {
			t.Fatal(r.Failure.Error())
		}
		if r.Stats.Splits == 0 {
			continue
		}
		if r.Stats.SplitRunsSettled != 1 || r.Stats.ParentsRetired == 0 || r.Stats.ChildrenReleased == 0 {
			t.Fatalf("seed %d split %d partitions but did not end proven without them: %+v", seed, r.Stats.Splits, r.Stats)
		}
		settled++
	}
	if settled < 3 {
		t.Fatalf("only %d schedules with a split in seeds 1..60", settled)
	}
}
