package clustersim

import (
	"flag"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var (
	flagLeaseSeed    = flag.Uint64("lease-seed", 0, "TestLeaseSim: run only the lease schedule with this seed (0: -lease-seeds schedules from -lease-base)")
	flagLeaseSeeds   = flag.Int("lease-seeds", 0, "schedules TestLeaseSim runs (default 12; 4 under -race or with -short)")
	flagLeaseBase    = flag.Uint64("lease-base", 1, "first seed of TestLeaseSim")
	flagLeaseVariant = flag.String("lease-variant", "faithful", "TestLeaseSim's driver: faithful, renew-after-takeover, promote-without-lease")
	flagLeaseParts   = flag.Int("lease-partitions", 0, "TestLeaseSim's partitions (0: drawn from the seed, 20..300)")
)

// leaseSchedule is the shape seed draws for TestLeaseSim: 3..5 instances,
// 20..300 partitions, faults in three schedules of four.
func leaseSchedule(seed uint64, v LeaseVariant) LeaseSimConfig {
	parts := 20 + int(seed*7919%281)
	if *flagLeaseParts > 0 {
		parts = *flagLeaseParts
	}
	return LeaseSimConfig{Seed: seed, Instances: 3 + int(seed%3), Partitions: parts, NoFaults: seed%4 == 0, Variant: v}
}

// TestLeaseSim: seeded lease schedules of the faithful driver keep every
// lease check green (no promotion by an incarnation the lease did not
// name, no write sent after an incarnation was gone, every partition held
// by a live incarnation and fair shares after the faults, no lease lost
// without a fault).
func TestLeaseSim(t *testing.T) {
	v, err := ParseLeaseVariant(*flagLeaseVariant)
	require.NoError(t, err)
	seeds := []uint64{*flagLeaseSeed}
	if *flagLeaseSeed == 0 {
		n := *flagLeaseSeeds
		if n == 0 {
			n = 12
			if raceEnabled || testing.Short() {
				n = 4
			}
		}
		seeds = seeds[:0]
		for i := range n {
			seeds = append(seeds, *flagLeaseBase+uint64(i))
		}
	}
	var total LeaseSimStats
	for _, seed := range seeds {
		res := RunLeases(leaseSchedule(seed, v))
		if res.Failure != nil {
			t.Fatal(res.Failure.Error())
		}
		addLeaseStats(&total, res.Stats)
	}
	t.Logf("%d schedules: %+v", len(seeds), total)
	require.Positive(t, total.Promotions, "workers promoted")
	require.Positive(t, total.Claims, "leases claimed")
}

func addLeaseStats(t *LeaseSimStats, s LeaseSimStats) {
	t.Renewals += s.Renewals
	t.RenewFenced += s.RenewFenced
	t.TakeOvers += s.TakeOvers
	t.Claims += s.Claims
	t.ClaimsExpired += s.ClaimsExpired
	t.Releases += s.Releases
	t.Promotions += s.Promotions
	t.PromotionsFenced += s.PromotionsFenced
	t.StaleStops += s.StaleStops
	t.Lost += s.Lost
	t.Pauses += s.Pauses
	t.Kills += s.Kills
	t.Restarts += s.Restarts
	t.Added += s.Added
	t.SlowObservers += s.SlowObservers
	t.FailedCalls += s.FailedCalls
	t.UnknownOutcomes += s.UnknownOutcomes
	t.Owned = max(t.Owned, s.Owned) // the slowest schedule
	t.Converged = max(t.Converged, s.Converged)
}

// TestLeaseSimThousands: at thousands of partitions (a fault-free cold
// start of three instances, and a faulty schedule of four with pauses,
// kills and takeovers), every partition is held by a live incarnation
// within the liveness bound, the shares become fair, no lease is lost
// without a fault, and no write is fenced wrongly.
func TestLeaseSimThousands(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  LeaseSimConfig
	}{
		{"cold start, 3 instances, 5000 partitions, no faults", LeaseSimConfig{Seed: 1, Instances: 3, Partitions: 5000, NoFaults: true}},
		{"faults, 4 instances, 2000 partitions", LeaseSimConfig{Seed: 2, Instances: 4, Partitions: 2000, FaultPhase: 90 * time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := RunLeases(tc.cfg)
			if res.Failure != nil {
				t.Fatal(res.Failure.Error())
			}
			t.Logf("%s: %+v", res.Setup, res.Stats)
			require.Positive(t, res.Stats.Promotions)
			require.Positive(t, res.Stats.Converged)
			if tc.cfg.NoFaults {
				require.Zero(t, res.Stats.Lost, "leases lost without a fault")
				require.Zero(t, res.Stats.TakeOvers, "takeovers without a fault")
			}
		})
	}
}

// TestLeaseSimTakeoversHappen: over the default faulty schedules the
// faults do what they are for: heartbeats are taken over, fenced
// renewals stop incarnations, partitions are claimed from dead owners and
// zombie promotions are fenced by the store, while the oracle stays green.
func TestLeaseSimTakeoversHappen(t *testing.T) {
	var total LeaseSimStats
	for seed := uint64(1); seed <= 40; seed++ {
		cfg := leaseSchedule(seed, LeaseFaithful)
		if cfg.NoFaults {
			continue
		}
		res := RunLeases(cfg)
		if res.Failure != nil {
			t.Fatal(res.Failure.Error())
		}
		addLeaseStats(&total, res.Stats)
		if total.TakeOvers > 0 && total.RenewFenced > 0 && total.ClaimsExpired > 0 && total.PromotionsFenced > 0 && total.StaleStops > 0 {
			t.Logf("after seeds 1..%d: %+v", seed, total)
			return
		}
	}
	t.Fatalf("the faults never produced takeovers, fenced renewals, expired claims, fenced promotions and stale stops together: %+v", total)
}

// TestLeaseSimCatchesRenewAfterTakeover: the broken driver that keeps its
// workers writing (and renewing) after its incarnation is gone is caught
// by the oracle in the default schedules.
func TestLeaseSimCatchesRenewAfterTakeover(t *testing.T) {
	var caught []Check
	for seed := uint64(1); seed <= 40; seed++ {
		cfg := leaseSchedule(seed, RenewAfterTakeover)
		if cfg.NoFaults {
			continue
		}
		res := RunLeases(cfg)
		if res.Failure == nil {
			continue
		}
		if !slices.Contains(caught, res.Failure.Check) {
			caught = append(caught, res.Failure.Check)
			t.Logf("seed %d caught by %s: %s", seed, res.Failure.Check, res.Failure.Detail)
		}
		if slices.Contains(caught, CheckWriteAfterGone) {
			return
		}
	}
	t.Fatalf("renew-after-takeover was not caught as a write after gone in seeds 1..40 (caught by %v)", caught)
}

// TestLeaseSimCatchesPromoteWithoutLease: workers whose promotions carry
// no lease condition are caught by the lease-writer check (a zombie's
// promotion lands after its partition was claimed away).
func TestLeaseSimCatchesPromoteWithoutLease(t *testing.T) {
	for seed := uint64(1); seed <= 40; seed++ {
		cfg := leaseSchedule(seed, PromoteWithoutLease)
		if cfg.NoFaults {
			continue
		}
		if res := RunLeases(cfg); res.Failure != nil && res.Failure.Check == CheckLeaseWriter {
			t.Logf("seed %d caught: %s", seed, res.Failure.Detail)
			return
		}
	}
	t.Fatal("promote-without-lease was not caught by the lease-writer check in seeds 1..40")
}

// TestLeaseSimDeterministic: one seed gives one history.
func TestLeaseSimDeterministic(t *testing.T) {
	var a, b []string
	RunLeases(LeaseSimConfig{Seed: 7, Partitions: 50, OnEvent: func(l string) { a = append(a, l) }})
	RunLeases(LeaseSimConfig{Seed: 7, Partitions: 50, OnEvent: func(l string) { b = append(b, l) }})
	require.NotEmpty(t, a)
	require.Equal(t, a, b)
}

// TestLeaseSimCatchesKeepLostPartition: an instance machine that keeps a
// partition's worker after its lease was lost (its StopWorker dropped) is
// caught: a promotion it sent after its incarnation was gone lands, or a
// worker still runs under a lease the store no longer has.
func TestLeaseSimCatchesKeepLostPartition(t *testing.T) {
	for seed := uint64(1); seed <= 40; seed++ {
		cfg := leaseSchedule(seed, KeepLostPartition)
		if cfg.NoFaults {
			continue
		}
		if res := RunLeases(cfg); res.Failure != nil && (res.Failure.Check == CheckWriteAfterGone || res.Failure.Check == CheckLeaseLiveness) {
			t.Logf("seed %d caught: %s", seed, res.Failure.Detail)
			return
		}
	}
	t.Fatal("keep-lost-partition was not caught by the write-after-gone or lease-liveness checks in seeds 1..40")
}

// TestLeaseSimDrivesTheInstanceMachine: the simulator steps the instance
// machine the product runs, not a copy: clustersim imports
// internal/instance, as the input (without leases) and its lease manager
// (internal/leasing, with leases) do.
func TestLeaseSimDrivesTheInstanceMachine(t *testing.T) {
	const machine = "github.com/tidemark/tidemark/internal/instance"
	for _, dir := range []string{".", "../../input", "../leasing"} {
		require.Contains(t, packageImports(t, dir), machine, "package %s does not drive the instance machine", dir)
	}
}
