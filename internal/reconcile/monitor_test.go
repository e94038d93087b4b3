package reconcile

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/provider"
)

func TestMonitor(t *testing.T) {
	covered := with(sparse, func(c *Contract) { c.WatermarkCoversPositions = true })
	rotating := with(sparse, func(c *Contract) { c.TokensMayRotate = true })
	ct := func(r Response, w int64) Response { r.CompleteThrough = coord.Integer(w); return r }
	n7 := resp("N7", ev("e501", 501), ev("e502", 502))
	for _, tc := range []struct {
		name     string
		contract Contract
		durable  int64 // 0: no durable watermark
		applied  int64 // -1: none
		replay   bool
		prior    []Response
		receipts []EventWitness
		retry    Response
		want     []ViolationKind
		evidence string
	}{
		{name: "nothing to report", contract: covered, durable: 500, applied: 500, retry: ct(n7, 502)},
		{name: "tokens rotate though declared stable", contract: sparse, applied: 500, prior: []Response{n7}, retry: resp("N8", ev("e501", 501), ev("e502", 502)), want: []ViolationKind{TokensRotated},
			evidence: "attempts a1 and b1 returned the same 2 events with successors sha256:"},
		{name: "tokens rotate where the contract allows it", contract: rotating, applied: 500, prior: []Response{n7}, retry: resp("N8", ev("e501", 501), ev("e502", 502))},
		{name: "a retry differs under the same snapshot marker", contract: snap, applied: 500, prior: []Response{marked(n7, "rv")}, retry: marked(resp("N7", ev("e501", 501)), "rv"), want: []ViolationKind{SnapshotUnstable},
			evidence: "carried snapshot marker sha256:"},
		{name: "another snapshot marker is another snapshot", contract: snap, applied: 500, prior: []Response{marked(n7, "rv1")}, retry: marked(resp("N7", ev("e501", 501)), "rv2")},
		{name: "a position at or below the durable watermark arrives late", contract: covered, durable: 510, applied: 505, retry: resp("N9", ev("late", 507), ev("e511", 511)), want: []ViolationKind{LatePosition},
			evidence: "an event at position 507 (id#"},
		{name: "a late position is only comparable in the watermark's coordinate", contract: sparse, durable: 510, applied: 505, retry: resp("N9", ev("late", 507), ev("e511", 511))},
		{name: "a repeat at or below the applied boundary is no late arrival", contract: covered, durable: 510, applied: 505, retry: resp("N9", ev("e505", 505), ev("e511", 511))},
		{name: "a repeat of a receipt is no late arrival", contract: covered, durable: 510, applied: 505, receipts: []EventWitness{EventOf(ev("e507", 507))}, retry: resp("N9", ev("e507", 507), ev("e511", 511))},
		{name: "a late arrival after a restart is late all the same", contract: covered, durable: 510, applied: 505, replay: true, retry: resp("N9", ev("late", 507)), want: []ViolationKind{LatePosition}},
		{name: "a watermark below the durable one", contract: sparse, durable: 510, applied: 510, retry: ct(resp("N9", ev("e511", 511)), 505), want: []ViolationKind{WatermarkRegressed},
			evidence: "certifies complete through 505, below the durable complete-through watermark 510"},
		{name: "an empty page with a watermark below the durable one", contract: with(sparse, func(c *Contract) { c.EmptyPage = provider.EmptyFinalThroughWatermark }), durable: 510, applied: 510, retry: ct(resp("N9"), 505), want: []ViolationKind{WatermarkRegressed}},
		{name: "a replayed page may certify less", contract: sparse, durable: 510, applied: 510, retry: ct(resp("N9", ev("e505", 505)), 505)},
		{name: "an empty page read from a restart cursor may certify less", contract: with(sparse, func(c *Contract) { c.EmptyPage = provider.EmptyFinalThroughWatermark }), durable: 510, applied: 510, replay: true, retry: ct(resp("N9"), 505)},
		{name: "new events after a restart certify no less", contract: sparse, durable: 510, applied: 510, replay: true, retry: ct(resp("N9", ev("e511", 511)), 505), want: []ViolationKind{WatermarkRegressed}},
		{name: "both claims broken at once", contract: covered, durable: 510, applied: 505, retry: ct(resp("N9", ev("late", 507)), 507), want: []ViolationKind{LatePosition, WatermarkRegressed}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var prior []Witness
			for i, r := range tc.prior {
				prior = append(prior, build(t, tc.contract, "C41", 9, "a"+string(rune('1'+i)), r))
			}
			in := MonitorInput{Contract: tc.contract, Applied: coord.IntPosition(tc.applied), HasApplied: tc.applied >= 0, Replay: tc.replay,
				Prior: prior, Receipts: tc.receipts, Witness: build(t, tc.contract, "C41", 9, "b1", tc.retry)}
			if tc.durable != 0 {
				in.Durable = coord.Integer(tc.durable)
			}
			got := Monitor(in)
			var kinds []ViolationKind
			for _, v := range got {
				kinds = append(kinds, v.Kind)
				assert.Equal(t, part, v.Partition)
				assert.NotContains(t, v.Evidence, "C41", "cursors appear only as hashes")
			}
			assert.Equal(t, tc.want, kinds)
			if tc.evidence != "" {
				require.NotEmpty(t, got)
				assert.Contains(t, got[0].Evidence, tc.evidence)
			}
		})
	}
}

func TestBuildViolation(t *testing.T) {
	_, err := Build(BuildInput{Partition: part, AttemptID: "a1", Contract: sparse, Response: resp("N1", ev("a", 5), ev("b", 3))})
	v, ok := BuildViolation(err)
	require.True(t, ok)
	assert.Equal(t, PositionsBackwards, v.Kind)
	assert.Equal(t, "contract violation positions_backwards: partition p1: position 3 (event 1) follows position 5 in one response, and the contract declares ordered positions", v.String())
	_, ok = BuildViolation(&MissingError{Partition: part, Field: "id"})
	assert.False(t, ok)
}

// A watermark equal to the page's last position on SelfCertifiedPages
// pages with events in a row is reported once; empty pages neither count
// nor break the run; a page with another watermark ends it.
func TestSelfCertifyRun(t *testing.T) {
	c := with(sparse, func(c *Contract) { c.EmptyPage = provider.EmptyFinalThroughWatermark })
	page := func(pos, wm int64) Witness {
		r := resp("N", ev("e", pos))
		if wm != 0 {
			r.CompleteThrough = coord.Integer(wm)
		}
		return build(t, c, "C", 1, "a", r)
	}
	var run SelfCertifyRun
	var fired []int
	obs := func(i int, w Witness) {
		var ok bool
		run, _, ok = run.Observe(w)
		if ok {
			fired = append(fired, i)
		}
	}
	for i := 1; i <= SelfCertifiedPages-1; i++ {
		obs(i, page(int64(i), int64(i)))
	}
	obs(0, build(t, c, "C", 1, "a", ct0(resp("N"), 99)))
	obs(8, page(8, 9)) // a watermark above the last position: the run ends
	assert.Empty(t, fired)
	for i := 1; i <= 2*SelfCertifiedPages; i++ {
		obs(100+i, page(int64(100+i), int64(100+i)))
	}
	assert.Equal(t, []int{100 + SelfCertifiedPages}, fired)
	_, v, ok := SelfCertifyRun{N: SelfCertifiedPages - 1}.Observe(page(7, 7))
	require.True(t, ok)
	assert.Equal(t, SelfCertified, v.Kind)
	assert.Contains(t, v.Evidence, "on 8 pages with events in a row")
}

func ct0(r Response, w int64) Response { r.CompleteThrough = coord.Integer(w); return r }

func TestViolationKindStrings(t *testing.T) {
	for k, want := range map[ViolationKind]string{
		0: "violation(0)", TokensRotated: "tokens_rotated", SnapshotUnstable: "snapshot_unstable", LatePosition: "late_position",
		WatermarkRegressed: "watermark_regressed", PositionsBackwards: "positions_backwards", SelfCertified: "self_certified_watermark", OffsetShapedSuccessor: "offset_shaped_successor", 8: "violation(8)",
	} {
		assert.Equal(t, want, k.String())
		assert.Equal(t, k == LatePosition || k == WatermarkRegressed, k.BreaksClaim(), k.String())
	}
}
