package clustersim

import (
	"slices"
	"testing"
)

// TestLeaseZombiesFenced: lease mode steals leases and fences the
// promotions of zombies (workers resumed after a pause longer than the
// lease period), and the oracle stays green meanwhile. It scans the
// lease-mode seeds until both happened.
func TestLeaseZombiesFenced(t *testing.T) {
	const bound = 2000
	var total Stats
	runs := 0
	for seed := uint64(1); seed <= bound; seed++ {
		if newLeases(Config{Seed: seed}) == nil {
			continue
		}
		res := Run(Config{Seed: seed, TraceTail: 30, Liveness: true})
		if res.Failure != nil {
			t.Fatal(res.Failure.Error())
		}
		runs++
		total.Add(res.Stats)
		if total.Steals > 0 && total.PausedZombieFenced > 0 {
			t.Logf("after %d lease-mode schedules (seeds 1..%d): %d steals, %d pauses, %d zombie promotions fenced (%d after a pause), %d lanes gave their partition up",
				runs, seed, total.Steals, total.Pauses, total.ZombieFenced, total.PausedZombieFenced, total.LeaseLost)
			return
		}
	}
	t.Fatalf("no steal and fenced zombie promotion after a pause in %d lease-mode schedules: %+v", runs, total)
}

// TestLeaseOps: pause and resume print and parse.
func TestLeaseOps(t *testing.T) {
	for _, s := range []string{"pause w1", "resume w0"} {
		op, err := ParseOp(s)
		if err != nil || op.String() != s {
			t.Fatalf("%q: %v, %q", s, err, op)
		}
	}
}

// TestLeaseModeSeeded: lease mode is decided by the seed alone, in a
// fraction of the schedules, and always under IgnoreLease.
func TestLeaseModeSeeded(t *testing.T) {
	on := 0
	for seed := uint64(1); seed <= 400; seed++ {
		if newLeases(Config{Seed: seed}) != nil {
			on++
		}
		if newLeases(Config{Seed: seed, Variant: IgnoreLease}) == nil {
			t.Fatalf("seed %d: ignore-lease without lease mode", seed)
		}
	}
	if on < 50 || on > 150 {
		t.Fatalf("lease mode in %d of 400 schedules, want about a quarter", on)
	}
}

// TestLeaseDeterministic: a lease-mode schedule with pauses replays to the
// same history from its ops.
func TestLeaseDeterministic(t *testing.T) {
	for seed := uint64(1); seed <= 200; seed++ {
		if newLeases(Config{Seed: seed}) == nil {
			continue
		}
		var a, b []string
		r := Run(Config{Seed: seed, Steps: 800, OnStep: func(l string) { a = append(a, l) }})
		if r.Stats.Pauses == 0 {
			continue
		}
		ops, err := ParseOps(FormatOps(r.ops()))
		if err != nil {
			t.Fatal(err)
		}
		Run(Config{Seed: seed, Ops: ops, OnStep: func(l string) { b = append(b, l) }})
		if !slices.Equal(a, b) {
			t.Fatalf("seed %d: the replay of a lease-mode schedule differs", seed)
		}
		return
	}
	t.Fatal("no lease-mode schedule with a pause in seeds 1..200")
}

// TestLeasedChildrenWaitInTheInstanceMachine: in lease mode the workers'
// instance machines keep the lineage gate (the lanes do not): a claimed
// child of a split starts only once its parents are complete, the oracle
// stays green and every child is read once the faults stop; with the gate
// skipped (ChildrenFirst: the machine's UnorderedLineage) the same
// schedule fails CheckLineage. It scans the lease-mode seeds with a split
// whose children waited.
func TestLeasedChildrenWaitInTheInstanceMachine(t *testing.T) {
	const bound = 400
	for seed := uint64(1); seed <= bound; seed++ {
		if newLeases(Config{Seed: seed}) == nil {
			continue
		}
		res := Run(Config{Seed: seed, TraceTail: 30, Liveness: true})
		if res.Failure != nil {
			t.Fatal(res.Failure.Error())
		}
		if res.Stats.LineageWaits == 0 {
			continue
		}
		if res.Stats.ChildrenReleased == 0 {
			t.Fatalf("seed %d: children waited for their parents (%d waits) and were never started", seed, res.Stats.LineageWaits)
		}
		f := Run(Config{Seed: seed, Variant: ChildrenFirst, TraceTail: 30, Liveness: true}).Failure
		if f == nil || f.Check != CheckLineage {
			t.Fatalf("seed %d: a lease-mode schedule whose children waited is not caught with the gate skipped: %v", seed, f)
		}
		t.Logf("seed %d: %d waits, %d children released by the instance machines; children-first caught: %s", seed, res.Stats.LineageWaits, res.Stats.ChildrenReleased, f.Detail)
		return
	}
	t.Fatalf("no lease-mode schedule with a waiting child within %d seeds", bound)
}

// TestLeasedWitnessesArePrunedByTheInstanceMachine: in lease mode the
// witness deletions are the workers' instance machines' (instance.Prune,
// performed through the faulty store; the lanes prune only without
// leases), and the oracle stays green. It scans the lease-mode seeds until
// one pruned.
func TestLeasedWitnessesArePrunedByTheInstanceMachine(t *testing.T) {
	const bound = 400
	for seed := uint64(1); seed <= bound; seed++ {
		if newLeases(Config{Seed: seed}) == nil {
			continue
		}
		res := Run(Config{Seed: seed, TraceTail: 30, Liveness: true, StrictRecords: true})
		if res.Failure != nil {
			t.Fatal(res.Failure.Error())
		}
		if res.Stats.Prunes > 0 {
			t.Logf("seed %d: %d deletions, %d witnesses pruned", seed, res.Stats.Prunes, res.Stats.Pruned)
			return
		}
	}
	t.Fatalf("no lease-mode schedule pruned within %d seeds", bound)
}

// TestLeasedPublicationIsTimedByTheInstanceMachine: in lease mode each
// worker's instance machine times its own frontier publisher (the first
// round at once, a round after its durable checkpoints, idle reads), whose
// rounds run through the faulty store beside the publisher actors, and the
// oracle (monotone, publication) stays green. It scans the lease-mode
// seeds until machine-timed rounds wrote records.
func TestLeasedPublicationIsTimedByTheInstanceMachine(t *testing.T) {
	const bound = 400
	for seed := uint64(1); seed <= bound; seed++ {
		if newLeases(Config{Seed: seed}) == nil {
			continue
		}
		res := Run(Config{Seed: seed, TraceTail: 30, Liveness: true})
		if res.Failure != nil {
			t.Fatal(res.Failure.Error())
		}
		if res.Stats.InstancePublished > 0 {
			t.Logf("seed %d: %d rounds asked for by the instance machines, %d records written", seed, res.Stats.InstanceRounds, res.Stats.InstancePublished)
			return
		}
	}
	t.Fatalf("no lease-mode schedule published through its instance machines within %d seeds", bound)
}
