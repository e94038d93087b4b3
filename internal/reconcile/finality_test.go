package reconcile

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/provider"
)

// A watermark whose finality the source does not certify advances the
// durable watermark (named by its basis) but never covers a gap: the gap a
// page skipped stays a divergence, and an empty page stays pending.
func TestOnlySourceFinalityCoversAGap(t *testing.T) {
	denseCovered := with(dense, func(c *Contract) { c.WatermarkCoversPositions = true })
	appendOnly := with(dense, func(c *Contract) { c.Finality = provider.FinalityAppendOnlyWriter })
	lagged := with(dense, func(c *Contract) { c.Finality, c.FinalityLag = provider.FinalityLag, 1 })
	cp := checkpoint("C41", 9, 2, true)
	skips := Response{Successor: []byte("N5"), Events: []Event{ev("e5", 5)}, CompleteThrough: coord.Integer(5)}

	w := build(t, denseCovered, "C41", 9, "a1", skips)
	assert.True(t, classify(t, denseCovered, cp, w).Advances(), "a certified watermark covers positions 3 and 4")
	for name, c := range map[string]Contract{"append-only writer": appendOnly, "lag": lagged} {
		w := build(t, c, "C41", 9, "a1", skips)
		v := classify(t, c, cp, w)
		assert.Equal(t, UnprovableDivergence, v.Class, name)
		assert.Contains(t, v.Reason, "coverage rule (b)", name)

		empty := build(t, c, "C41", 9, "a2", Response{Successor: []byte("N9"), CompleteThrough: coord.Integer(9)})
		assert.False(t, CanPromote(c, empty).Complete, "%s: an uncertified watermark is no evidence for an empty page", name)
	}
}

func TestPromotionWritesTheFinalWatermarkWithItsBasis(t *testing.T) {
	cp := checkpoint("C41", 9, 500, true)
	r := Response{Successor: []byte("N7"), Events: []Event{ev("e501", 501)}, CompleteThrough: coord.Integer(501)}
	for _, tc := range []struct {
		name   string
		c      Contract
		want   coord.Watermark
		basis  Basis
		reason string
	}{
		{"none: the complete-through stays in the witness", with(dense, func(c *Contract) { c.Finality = provider.FinalityNone }), coord.Watermark{}, Basis{}, "complete-through 501 is recorded but not final"},
		{"source", dense, coord.Integer(501), Basis{Finality: provider.FinalitySource}, ""},
		{"append-only writer", with(dense, func(c *Contract) { c.Finality = provider.FinalityAppendOnlyWriter }), coord.Integer(501), Basis{Finality: provider.FinalityAppendOnlyWriter}, ""},
		{"lag", with(dense, func(c *Contract) { c.Finality, c.FinalityLag = provider.FinalityLag, 10 }), coord.Integer(491), Basis{Finality: provider.FinalityLag, Lag: 10}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := acked(build(t, tc.c, "C41", 9, "a1", r), 1)
			require.Equal(t, coord.Integer(501), w.CompleteThrough, "the witness records the response's own complete-through")
			d := decide(tc.c, cp, w, classify(t, tc.c, cp, w), w)
			require.Equal(t, Promote, d.Action, d.Reason)
			assert.Equal(t, tc.want, d.Promotion.Watermark)
			assert.Equal(t, tc.basis, d.Promotion.Finality)
			if tc.reason != "" {
				assert.Contains(t, d.Reason, tc.reason)
			}
		})
	}
}

// FinalOf turns a complete-through into what a promotion may write, under
// each finality (moved from the SDK, which declares the contract; the core
// computes what it means).
func TestFinalTurnsACompleteThroughIntoTheWatermarkAPromotionMayWrite(t *testing.T) {
	ts := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	lag := func(n int64) Contract { return provider.Contract{Finality: provider.FinalityLag, FinalityLag: n} }
	for _, tc := range []struct {
		name   string
		c      Contract
		ct     coord.Watermark
		want   coord.Watermark
		basis  string
		reason string
	}{
		{"unset finality is none: recorded, never durable", provider.Contract{}, coord.Integer(300), coord.Watermark{}, "", "recorded but not final"},
		{"none", provider.Contract{Finality: provider.FinalityNone}, coord.Integer(300), coord.Watermark{}, "", "declares no finality"},
		{"source", provider.Contract{Finality: provider.FinalitySource}, coord.Integer(300), coord.Integer(300), "source", ""},
		{"append-only writer, named as an assertion", provider.Contract{Finality: provider.FinalityAppendOnlyWriter}, coord.String("p3/e000300.json"), coord.String("p3/e000300.json"), "append_only_writer assertion", ""},
		{"integer lag", lag(50), coord.Integer(300), coord.Integer(250), "lag 50", ""},
		{"timestamp lag as a duration", lag(int64(5 * time.Minute)), coord.Timestamp(ts), coord.Timestamp(ts.Add(-5 * time.Minute)), "lag 5m0s", ""},
		{"a string has no lag arithmetic", lag(1), coord.String("k"), coord.Watermark{}, "", "nothing is final"},
		{"no complete-through", provider.Contract{Finality: provider.FinalitySource}, coord.Watermark{}, coord.Watermark{}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := FinalOf(tc.c, tc.ct)
			assert.Equal(t, tc.want, f.Watermark)
			assert.Equal(t, tc.basis, f.Basis.String())
			if tc.reason == "" {
				assert.Empty(t, f.Reason)
			} else {
				assert.Contains(t, f.Reason, tc.reason)
			}
		})
	}
}
