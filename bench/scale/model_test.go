package scale

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMonthlyUSD(t *testing.T) {
	tests := []struct {
		name string
		r    Rates
		p    Prices
		want float64
	}{
		{"nothing", Rates{}, DefaultPrices, 0},
		// 1 write unit/s for 730 h = 2.628 million units.
		{"one write unit a second", Rates{WriteUnits: 1}, Prices{WritePerMillion: 1}, 2.628},
		{"one read unit a second", Rates{ReadUnits: 1}, Prices{ReadPerMillion: 1}, 2.628},
		{"a refused write is billed as one unit", Rates{RefusedWrites: 1}, Prices{WritePerMillion: 1}, 2.628},
		// The 1,000-partition figure: 333 renewals/s and ~4,270
		// consistent checkpoint reads/s at 1.25 and 0.25 USD per million.
		{"renewals and reads", Rates{WriteUnits: 333, ReadUnits: 4270}, Prices{WritePerMillion: 1.25, ReadPerMillion: 0.25}, 2.628 * (333*1.25 + 4270*0.25)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.InDelta(t, tt.want, MonthlyUSD(tt.r, tt.p), 1e-6)
		})
	}
}

func TestRatesOf(t *testing.T) {
	r := RatesOf(OpCount{Requests: 90, ReadUnits: 30, WriteUnits: 60, CondFailures: 3, Items: 120}, 30)
	assert.Equal(t, Rates{Requests: 3, ReadUnits: 1, WriteUnits: 2, RefusedWrites: 0.1, Items: 4}, r)
	assert.InDelta(t, 2.1, r.BillableWriteUnits(), 1e-9)
	assert.Equal(t, Rates{}, RatesOf(OpCount{Requests: 5}, 0), "an empty window has no rate")
}

func TestFit(t *testing.T) {
	tests := []struct {
		name string
		ps   []int
		ys   []float64
		want Linear
	}{
		{"one size: proportional", []int{1000}, []float64{390}, Linear{PerPartition: 0.39, Points: 1}},
		{"per-partition cost", []int{1000, 5000}, []float64{333, 1665}, Linear{PerPartition: 0.333, Points: 2}},
		// 3 instances, 1 heartbeat/s each, plus 0.001/s per partition.
		{"per-instance and per-partition cost", []int{1000, 5000, 10000}, []float64{4, 8, 13}, Linear{PerPartition: 0.001, PerInstance: 1, Points: 3}},
		{"constant: per instance only", []int{1000, 5000}, []float64{3, 3}, Linear{PerInstance: 1, Points: 2}},
		{"falling cost is clamped to per instance", []int{1000, 5000}, []float64{6, 3}, Linear{PerInstance: 1.5, Points: 2}},
		{"negative intercept is refitted proportional", []int{1000, 2000}, []float64{1, 3}, Linear{PerPartition: 7.0 / 5000, Points: 2}},
		{"nothing", nil, nil, Linear{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Fit(tt.ps, tt.ys, 3)
			assert.InDelta(t, tt.want.PerPartition, got.PerPartition, 1e-9)
			assert.InDelta(t, tt.want.PerInstance, got.PerInstance, 1e-9)
			assert.Equal(t, tt.want.Points, got.Points)
		})
	}
	assert.InDelta(t, 13.0, Linear{PerPartition: 0.001, PerInstance: 1}.At(10000, 3), 1e-9)
}

func TestBalancedAndAllOwned(t *testing.T) {
	tests := []struct {
		name             string
		owned            []int
		p                int
		balanced, allOwn bool
	}{
		{"even split", []int{334, 333, 333}, 1000, true, true},
		{"skewed", []int{595, 206, 199}, 1000, false, true},
		{"not all owned", []int{333, 333, 333}, 1000, false, false},
		{"a gauge counting a lost lease twice", []int{11, 10, 10}, 30, false, false},
		{"a stopped instance does not count", []int{notRunning, 500, 500}, 1000, true, true},
		{"an instance that does not answer: unknown", []int{noAnswer, 500, 500}, 1000, false, false},
		{"four instances", []int{250, 250, 250, 250}, 1000, true, true},
		{"four instances, one above its share", []int{251, 250, 250, 249}, 1000, false, true},
		{"nobody", []int{notRunning}, 10, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.balanced, Balanced(tt.owned, tt.p), "Balanced")
			assert.Equal(t, tt.allOwn, AllOwned(tt.owned, tt.p), "AllOwned")
		})
	}
}

func TestSumMetrics(t *testing.T) {
	body := `# HELP tidemark_owned_partitions x
# TYPE tidemark_owned_partitions gauge
tidemark_owned_partitions{label="",path="root.input"} 334
tidemark_leases_lost_total{label="",path="root.input"} 2
tidemark_leases_lost_total{label="b",path="root.input"} 3
tidemark_partition_watermark{partition="p{1}"} 5
tidemark_events_emitted 7 1700000000
`
	m, err := SumMetrics(strings.NewReader(body), "tidemark_owned_partitions", "tidemark_leases_lost", "tidemark_events_emitted", "tidemark_absent")
	require.NoError(t, err)
	assert.Equal(t, map[string]float64{"tidemark_owned_partitions": 334, "tidemark_leases_lost": 5, "tidemark_events_emitted": 7}, m)

	_, err = SumMetrics(strings.NewReader("tidemark_owned_partitions{x=\"1\"} nan-ish\n"), "tidemark_owned_partitions")
	assert.Error(t, err)
}

func TestProcParsing(t *testing.T) {
	stat := "1234 (bin connect) S 1 1234 1234 0 -1 4194560 5000 0 0 0 250 50 0 0 20 0 12 0 100 1000000 2000 18446744073709551615"
	cpu, err := parseStatCPU(stat)
	require.NoError(t, err)
	assert.InDelta(t, 3.0, cpu, 1e-9, "utime 250 + stime 50 ticks at 100 Hz")
	_, err = parseStatCPU("garbage")
	assert.Error(t, err)
	assert.Equal(t, int64(51200*1024), parseStatusRSS("Name:\tconnect\nVmRSS:\t   51200 kB\nThreads:\t12\n"))
	assert.Equal(t, int64(0), parseStatusRSS("Name:\tconnect\n"))
}

func TestPartitionNames(t *testing.T) {
	names := PartitionNames(1000)
	seen := map[string]bool{}
	for _, n := range names {
		assert.Len(t, n, 36)
		seen[n] = true
	}
	assert.Len(t, seen, 1000, "distinct")
	assert.Equal(t, names[:10], PartitionNames(10), "the same names every run")
}

func TestReportModelAndTable(t *testing.T) {
	idle := func(p int, upd, bget float64) *Idle {
		by := map[string]Rates{
			"UpdateItem":   {Requests: upd, WriteUnits: upd},
			"BatchGetItem": {Requests: bget, ReadUnits: bget * 100, Items: bget * 100},
		}
		return &Idle{Seconds: 45, ByOp: by, Total: Rates{Requests: upd + bget, WriteUnits: upd, ReadUnits: bget * 100},
			Instances: []InstanceUsage{{RSSMiB: 80, CPUCores: 0.1}, {RSSMiB: 81, CPUCores: 0.2}, {RSSMiB: 82, CPUCores: 0.3}}}
	}
	rep := &Report{
		Command: "make bench-scale", Prices: Prices{WritePerMillion: 1, ReadPerMillion: 1},
		Results: []SizeResult{
			{Partitions: 1000, Instances: 3, Status: "measured", Idle: idle(1000, 333, 3),
				Cold:     &Phase{Seconds: 75, Owned: []int{595, 206, 199}},
				AddOne:   &Phase{Done: true, Seconds: 20, Owned: []int{250, 250, 250, 250}},
				Takeover: &Phase{Done: true, Seconds: 12, Owned: []int{notRunning, 334, 333, 333}}, Killed: 250},
			{Partitions: 2000, Instances: 3, Status: "measured", Idle: idle(2000, 666, 6)},
			{Partitions: 10000, Instances: 3, Status: "skipped: budget"},
		},
	}
	rep.BuildModel()
	assert.InDelta(t, 0.333, rep.Model["UpdateItem"].PerPartition, 1e-9)
	require.Len(t, rep.Predictions, 1)
	pr := rep.Predictions[0]
	assert.Equal(t, 10000, pr.Partitions)
	assert.InDelta(t, 3330, pr.ByOp["UpdateItem"], 1e-6)
	assert.InDelta(t, 3330+30, pr.Total.Requests, 1e-6)
	assert.InDelta(t, 3000, pr.Total.ReadUnits, 1e-6)
	assert.InDelta(t, 2.628*(3330+3000), pr.MonthlyUSD, 1e-6)

	md := rep.Markdown()
	assert.Contains(t, md, "| 1,000 | 3 | 336 (UpdateItem 333, BatchGetItem 3.00) | 300 | 333 |")
	assert.Contains(t, md, "not balanced after 75 s [595, 206, 199]; never all owned")
	assert.Contains(t, md, "| 20 s | 12 s (250 partitions) | 80 / 81 / 82 | 0.100 / 0.200 / 0.300 |")
	assert.Contains(t, md, "| 10,000 | 3 | model: 3,360 (UpdateItem 3,330, BatchGetItem 30.0) | 3,000 | 3,330 |")
	assert.Contains(t, md, "| 10,000 | 3 | skipped: budget |")
	assert.Contains(t, md, "$1 per million write request units and $1 per million read request units")
}

func TestUSD(t *testing.T) {
	assert.Equal(t, "$0", usd(0.2))
	assert.Equal(t, "$999", usd(999))
	assert.Equal(t, "$40,000", usd(40000))
	assert.Equal(t, "$1,234,568", usd(1234567.8))
}

func TestModelLeavesOutWindowsThatWereNotIdle(t *testing.T) {
	win := func(upd float64) *Idle {
		return &Idle{ByOp: map[string]Rates{"UpdateItem": {Requests: upd, WriteUnits: upd}}, Total: Rates{Requests: upd, WriteUnits: upd}}
	}
	rep := &Report{Results: []SizeResult{
		{Partitions: 1000, Instances: 3, Idle: win(3), EventsRead: &Phase{Done: true}},
		{Partitions: 5000, Instances: 3, Idle: win(2000), EventsRead: &Phase{Done: false}},
		{Partitions: 10000, Instances: 3},
	}}
	rep.BuildModel()
	assert.Empty(t, rep.ModelNote)
	assert.Equal(t, 1, rep.Model["UpdateItem"].Points, "fitted on the idle window only")
	assert.Equal(t, []int{1000}, rep.FittedOn)
	require.Len(t, rep.Predictions, 2, "the size whose window was not idle is predicted too")
	assert.Equal(t, 5000, rep.Predictions[0].Partitions)
	assert.InDelta(t, 15, rep.Predictions[0].ByOp["UpdateItem"], 1e-9)
	assert.InDelta(t, 30, rep.Predictions[1].ByOp["UpdateItem"], 1e-9)
	assert.Contains(t, rep.Markdown(), "† The idle window began before every event was read")

	rep.Results[0].Idle.LeasesLost = 3
	rep.BuildModel()
	assert.Contains(t, rep.ModelNote, "no model", "a window that lost leases is not steady")

	rep.Results[0].Idle.LeasesLost = 0
	rep.Results[0].EventsRead.Done = false
	rep.BuildModel()
	assert.Contains(t, rep.ModelNote, "no model", "no idle window, no model")
	assert.Empty(t, rep.Model)
	assert.Empty(t, rep.Predictions)
	assert.Contains(t, rep.Markdown(), "Model: no model")
}

func TestFirstErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(id, body string) *instance {
		p := dir + "/" + id + ".log"
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
		return &instance{id: id, logPath: p}
	}
	big := `time="x" level=error msg="Failed to connect: membership of 10000 partitions is 440000 bytes" @service=benthos` + "\n"
	insts := []*instance{
		write("i1", `time="x" level=warning msg="slow"`+"\n"+big+big),
		write("i2", big),
		write("i3", `time="x" level=info msg="fine"`+"\n"),
	}
	assert.Equal(t, []string{`i1, i2 logged "Failed to connect: membership of 10000 partitions is 440000 bytes"`}, firstErrors(insts))
}
