package clustersim

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var (
	flagScaleTable     = flag.Bool("scale-table", false, "TestScaleTable: run the scale simulation at full size and print its table")
	flagScaleSizes     = flag.String("scale-sizes", "10000,100000", "TestScaleTable's partition counts")
	flagScaleInstances = flag.String("scale-instances", "3,10", "TestScaleTable's instance counts")
	flagScaleModel     = flag.String("scale-model", "dynamodb", "TestScaleTable's store model: dynamodb or dynalite")
	flagScaleSeed      = flag.Uint64("scale-seed", 1, "TestScaleTable's seed")
	flagScaleExisting  = flag.Bool("scale-existing", false, "TestScaleTable: the scope's checkpoints exist before the instances start (a restart, not a new scope)")
	flagScaleLegacy    = flag.Bool("scale-legacy-index", false, "TestScaleTable with -scale-existing: the scope's partition index is in the layout of releases before issue 35 (64 string sets under one key)")
	flagScalePhase     = flag.Duration("scale-phase-timeout", 0, "TestScaleTable: each phase's timeout in simulated time (0: 10 minutes)")
	flagScaleList      = flag.Duration("scale-list-timeout", 0, "TestScaleTable: a what-if deadline of a lease read's checkpoint listing (0: the product's, the renew interval)")
)

// TestScaleMeasuresEveryPhase: at 2,000 partitions and 3 instances on the
// DynamoDB model, every phase of the scale run finishes within its timeout
// (every partition held and the shares fair after the cold start and after
// an added instance, every partition held by the others after a kill -9),
// every partition's first page is promoted, no partition is ever held by
// two live instances, each machine holds exactly the partitions whose
// workers run, no lease is lost while idle, the idle upkeep is the
// heartbeat protocol's alone (one renewal and one heartbeat Query per
// instance per renew interval), and the takeover waits until the dead
// instance's last heartbeat the others saw is a lease period old (its last
// renewal was at most a renew interval before the kill).
func TestScaleMeasuresEveryPhase(t *testing.T) {
	res := RunScale(ScaleConfig{Seed: 1, Partitions: 2000, Instances: 3})
	t.Log(scaleRow(res))
	for name, p := range map[string]ScalePhase{"cold start": res.ColdBalanced, "cold-start work": res.ColdWork, "added instance": res.Added, "takeover": res.Takeover, "balanced after the takeover": res.TakeoverBalanced} {
		require.True(t, p.Done, "%s not done after %s: %v", name, p.At, p.Owned)
	}
	require.Equal(t, []int{667, 667, 666}, sortedDesc(res.ColdBalanced.Owned))
	require.Equal(t, []int{500, 500, 500, 500}, sortedDesc(res.Added.Owned))
	require.Equal(t, []int{667, 667, 666}, sortedDesc(res.TakeoverBalanced.Owned))
	require.Zero(t, res.DoubleHeld, "a partition held by two live instances")
	require.Empty(t, res.Disagree, "the machines hold what the workers run")
	require.Zero(t, res.Idle.Lost, "leases lost while idle")
	ops, total := res.IdleRate()
	require.InDelta(t, 1.0, ops["UpdateItem"], 0.05, "renewals a second: 3 instances, one every 3 s")
	require.InDelta(t, 1.0, ops["Query"], 0.05, "heartbeat reads a second")
	require.InDelta(t, 2.0, total, 0.1, "nothing else while idle: %v", ops)
	require.GreaterOrEqual(t, res.Takeover.At, lsPeriod-lsRenew, "the dead instance's partitions were held elsewhere before its last heartbeat seen was a lease period old")
}

func sortedDesc(xs []int) []int {
	out := append([]int(nil), xs...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] > out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// TestScaleDeterministic: one seed gives one result, event for event.
func TestScaleDeterministic(t *testing.T) {
	cfg := ScaleConfig{Seed: 3, Partitions: 500, Instances: 3}
	a, b := RunScale(cfg), RunScale(cfg)
	require.NotZero(t, a.Events)
	require.Equal(t, a, b)
}

// TestScaleStoreModelPerKeyLimit: a partition key serves its write units a
// second and no more: past them a request is throttled, whatever another
// key does; the key's capacity comes back with time.
func TestScaleStoreModelPerKeyLimit(t *testing.T) {
	s := &scaleSim{cfg: ScaleConfig{Model: DynamoDBModel()}, buckets: map[string]*[2]scBucket{}}
	for i := range 1000 {
		require.True(t, s.admit(scReq{op: "UpdateItem", key: "a", wcu: 1}), "write %d of the first second", i+1)
	}
	require.False(t, s.admit(scReq{op: "UpdateItem", key: "a", wcu: 1}), "the 1,001st write in one second")
	require.True(t, s.admit(scReq{op: "UpdateItem", key: "b", wcu: 1}), "another key")
	require.True(t, s.admit(scReq{op: "GetItem", key: "a", rcu: 1}), "reads have their own units")
	s.now += 10 * time.Millisecond
	for range 10 {
		require.True(t, s.admit(scReq{op: "UpdateItem", key: "a", wcu: 1}))
	}
	require.False(t, s.admit(scReq{op: "UpdateItem", key: "a", wcu: 1}), "10 ms bring back 10 units")
}

// TestScaleThrottlingAnswers: with a table that serves fewer write units a
// second than a cold start of 1,000 partitions asks (about 5 writes a
// partition), writes are throttled and retried (the write requests
// outnumber the units served), and the cold start still ends with every
// partition held once at its share and every first page promoted.
func TestScaleThrottlingAnswers(t *testing.T) {
	m := DynamoDBModel()
	m.TableWriteUnits = 150
	res := RunScale(ScaleConfig{Seed: 2, Partitions: 1000, Instances: 3, Model: m})
	t.Log(scaleRow(res))
	cold := res.ColdBalanced
	require.Positive(t, cold.Throttled, "throttled during the cold start")
	writes := cold.Requests["UpdateItem"] + cold.Requests["PutItem"] + cold.Requests["DeleteItem"]
	require.Greater(t, writes, int(cold.WriteUnits), "throttled writes retried")
	require.True(t, cold.Done, "balanced after the cold start")
	require.True(t, res.ColdWork.Done, "first pages promoted")
	require.Zero(t, res.DoubleHeld)
}

// TestScaleNewScopeIndexIsNotOneHotKey: a new scope's 10,000 checkpoint
// creations by 10 instances write their partition-index entries (one write
// unit each, dynamostore's layout) across the index's keys, so DynamoDB's
// per-key limit throttles none of them (with the index under one key, as
// before issue 35, thousands were throttled), and the cold start ends
// balanced with every first page promoted.
func TestScaleNewScopeIndexIsNotOneHotKey(t *testing.T) {
	// dynamostore's entry of the same name in scope "scale" is 62 bytes
	// (TestPartitionIndexEntryIsItsKeysAlone).
	require.Equal(t, 62, scIndexEntryBytes("9e3779b9-0000-4000-8000-000000000001"))
	res := RunScale(ScaleConfig{Seed: 1, Partitions: 10_000, Instances: 10})
	t.Log(scaleRow(res))
	require.True(t, res.ColdBalanced.Done, "balanced after the cold start")
	require.True(t, res.ColdWork.Done, "first pages promoted")
	require.GreaterOrEqual(t, res.ColdBalanced.Requests["PutItem"], 10_000, "an index entry and a checkpoint put per partition")
	require.Zero(t, res.ColdBalanced.Throttled, "requests throttled in the cold start")
	require.Zero(t, res.DoubleHeld)
}

// TestScaleSingleServerQueues: with one server (dynalite), requests that
// arrive together are served one after the other, each taking the service
// time (a batch longer by its further items).
func TestScaleSingleServerQueues(t *testing.T) {
	s := &scaleSim{cfg: ScaleConfig{Model: DynaliteModel()}, serverFree: make([]time.Duration, 1)}
	require.Equal(t, 800*time.Microsecond, s.serve(1))
	require.Equal(t, 1600*time.Microsecond, s.serve(1))
	require.Equal(t, 1600*time.Microsecond+800*time.Microsecond+99*40*time.Microsecond, s.serve(100))
	s.now = time.Second
	require.Equal(t, time.Second+800*time.Microsecond, s.serve(1), "an idle server serves at once")
}

// TestScaleTable prints the scale table (full size: minutes): go test
// ./internal/clustersim -run TestScaleTable -timeout 60m -v -args
// -scale-table [-scale-sizes 10000,100000] [-scale-instances 3,10]
// [-scale-model dynamodb|dynalite] [-scale-existing [-scale-legacy-index]]
// [-scale-list-timeout 30s] [-scale-phase-timeout 10m].
func TestScaleTable(t *testing.T) {
	if !*flagScaleTable {
		t.Skip("the full-size table runs with -args -scale-table")
	}
	model := DynamoDBModel()
	if *flagScaleModel == "dynalite" {
		model = DynaliteModel()
	}
	var rows []ScaleResult
	for _, p := range ints(t, *flagScaleSizes) {
		for _, n := range ints(t, *flagScaleInstances) {
			start := time.Now()
			res := RunScale(ScaleConfig{Seed: *flagScaleSeed, Partitions: p, Instances: n, Model: model, ListTimeout: *flagScaleList, Existing: *flagScaleExisting, LegacyIndex: *flagScaleLegacy, PhaseTimeout: *flagScalePhase})
			t.Logf("%s (%d events, %s)", scaleRow(res), res.Events, time.Since(start).Round(time.Second))
			require.Zero(t, res.DoubleHeld, "a partition held by two live instances")
			require.Empty(t, res.Disagree, "the machines hold what the workers run")
			rows = append(rows, res)
		}
	}
	fmt.Print(ScaleTable(rows))
}

func ints(t *testing.T, s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		require.NoError(t, err)
		out = append(out, n)
	}
	return out
}
