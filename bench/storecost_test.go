package bench

import (
	"maps"
	"slices"
	"testing"
	"time"
)

// perPageKinds are reported per page (in this order); the rest of the
// requests are summed as other/page.
var perPageKinds = []string{kWitnessPut, kPromotion, kReceipt, kDisposition, kWitnessQuery, kCheckpointGet, kWitnessGet}

func reportCosts(b *testing.B, pages float64, window time.Duration, c costs) {
	var kinds, total int64
	for _, v := range c.attempts {
		kinds += v
	}
	for _, v := range c.byOp {
		total += v
	}
	if kinds != total {
		b.Errorf("the meter saw %d attempts, dynamostore.RequestCounter %d", kinds, total)
	}
	// All requests, by operation (dynamostore.RequestCounter), per page.
	b.ReportMetric(float64(c.writes())/pages, "writes/page")
	b.ReportMetric(float64(c.reads())/pages, "reads/page")
	// The requests made for pages, and the frontier publisher's (per second).
	b.ReportMetric(float64(c.pageWrites())/pages, "page-writes/page")
	b.ReportMetric(float64(c.pageReads())/pages, "page-reads/page")
	b.ReportMetric(float64(c.attempts[kRecord])/window.Seconds(), "record-requests/s")
	b.ReportMetric(c.writeUnits()/pages, "WCU/page")
	for _, k := range perPageKinds {
		b.ReportMetric(float64(c.attempts[k])/pages, k+"/page")
	}
	for _, k := range slices.Sorted(maps.Keys(c.noCapacity)) {
		if c.noCapacity[k] > 0 {
			b.Logf("%d successful %s requests came back without ConsumedCapacity", c.noCapacity[k], k)
		}
	}
	b.Logf("steady-state window %v, %v pages: by operation %v; by kind %v; write units reported %v; PutItem units by item size %v",
		window.Round(time.Millisecond), pages, c.byOp, c.attempts, c.units, c.sizedUnits)
}

// BenchmarkStoreCost counts the DynamoDB requests (by operation with
// dynamostore.RequestCounter, by kind with the bench meter) and the write units
// dynalite reports (ConsumedCapacity) per 100-event page, after start-up:
//   - steady: no faults;
//   - steady-alone: the same with witness_group_pages 1 (every witness
//     written alone, at once: the behaviour before group commit);
//   - steady-shared-digest-alone: steady-shared-digest with
//     witness_group_pages 1;
//   - steady-compact: steady with compact_witness (4 bytes an event);
//   - steady-compact-4: the same with witness_group_pages 4 and
//     promotion_min_pages 4;
//   - steady-no-wait: the same as steady with promotion_min_pages 1 (every page
//     promoted as soon as it is delivered, unless a promotion is in
//     flight);
//   - steady-shared-digest: the same as steady with a constant semantic
//     projection (payload changes do not matter): each witness stores one
//     digest, 8 bytes an event;
//   - load-p64: no faults, 64 partitions at 20 ms a page (dynalite's
//     ceiling: promotions coalesce);
//   - retries: rotating tokens, shifted retries (shift_rate 0.5) and every
//     10th delivered batch nacked, so 10% of the pages are fetched again and
//     classified against their witness.
func BenchmarkStoreCost(b *testing.B) {
	cases := []struct {
		name string
		spec runSpec
	}{
		{"steady", runSpec{Partitions: 4, Pages: 200, PageSize: benchPageSize, Latency: 5 * time.Millisecond, Store: "dynamodb"}},
		{"steady-alone", runSpec{Partitions: 4, Pages: 200, PageSize: benchPageSize, Latency: 5 * time.Millisecond, Store: "dynamodb", WitnessGroup: 1}},
		{"steady-shared-digest-alone", runSpec{Partitions: 4, Pages: 200, PageSize: benchPageSize, Latency: 5 * time.Millisecond, Store: "dynamodb", ConstantSemantic: true, WitnessGroup: 1}},
		{"steady-compact", runSpec{Partitions: 4, Pages: 200, PageSize: benchPageSize, Latency: 5 * time.Millisecond, Store: "dynamodb", Compact: true}},
		{"steady-compact-4", runSpec{Partitions: 4, Pages: 200, PageSize: benchPageSize, Latency: 5 * time.Millisecond, Store: "dynamodb", Compact: true, WitnessGroup: 4, MinPages: 4}},
		{"steady-no-wait", runSpec{Partitions: 4, Pages: 200, PageSize: benchPageSize, Latency: 5 * time.Millisecond, Store: "dynamodb", MinPages: 1}},
		{"steady-shared-digest", runSpec{Partitions: 4, Pages: 200, PageSize: benchPageSize, Latency: 5 * time.Millisecond, Store: "dynamodb", ConstantSemantic: true}},
		// Under load: 64 partitions against dynalite's ceiling, where
		// acknowledgements run ahead of promotions and coalesce.
		{"load-p64", runSpec{Partitions: 64, Pages: 40, PageSize: benchPageSize, Latency: 20 * time.Millisecond, Store: "dynamodb"}},
		{"retries", runSpec{Partitions: 4, Pages: 200, PageSize: benchPageSize, Latency: 5 * time.Millisecond, Store: "dynamodb", RotateTokens: true, ShiftRate: 0.5, NackEvery: 10}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			r := loop(b, func() runResult { return runPipeline(b, c.spec) })
			// Pages of the window: the generations its promotions moved (a
			// coalesced promotion moves several).
			pages := float64(r.Costs.pages)
			if pages == 0 {
				b.Fatalf("no page was promoted in the steady-state window")
			}
			reportCosts(b, pages, r.Costs.at.Sub(r.Startup.at), *r.Costs)
			b.ReportMetric(float64(r.Startup.writes()+r.Startup.reads())/float64(c.spec.Partitions), "startup-requests/partition")
			b.ReportMetric(float64(r.Nacks)/(float64(r.Events)/float64(c.spec.PageSize)), "nacks/page")
			if n := r.Total.calls[kWitnessPut]; n > 0 {
				b.ReportMetric(float64(r.Total.itemBytes[kWitnessPut])/float64(n), "witness-item-bytes")
			}
			if n := r.Total.calls[kPromotion]; n > 0 {
				b.ReportMetric(r.Total.units[kPromotion]/float64(n), "promotion-WCU")
			}
		})
	}
}
