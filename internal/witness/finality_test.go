package witness

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/coord"
)

func TestFinalTurnsACompleteThroughIntoTheWatermarkAPromotionMayWrite(t *testing.T) {
	ts := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	lag := func(n int64) Contract { return Contract{Finality: FinalityLag, FinalityLag: n} }
	for _, tc := range []struct {
		name   string
		c      Contract
		ct     coord.Watermark
		want   coord.Watermark
		basis  string
		reason string
	}{
		{"unset finality is none: recorded, never durable", Contract{}, coord.Integer(300), coord.Watermark{}, "", "recorded but not final"},
		{"none", Contract{Finality: FinalityNone}, coord.Integer(300), coord.Watermark{}, "", "declares no finality"},
		{"source", Contract{Finality: FinalitySource}, coord.Integer(300), coord.Integer(300), "source", ""},
		{"append-only writer, named as an assertion", Contract{Finality: FinalityAppendOnlyWriter}, coord.String("p3/e000300.json"), coord.String("p3/e000300.json"), "append_only_writer assertion", ""},
		{"integer lag", lag(50), coord.Integer(300), coord.Integer(250), "lag 50", ""},
		{"timestamp lag as a duration", lag(int64(5 * time.Minute)), coord.Timestamp(ts), coord.Timestamp(ts.Add(-5 * time.Minute)), "lag 5m0s", ""},
		{"a string has no lag arithmetic", lag(1), coord.String("k"), coord.Watermark{}, "", "nothing is final"},
		{"no complete-through", Contract{Finality: FinalitySource}, coord.Watermark{}, coord.Watermark{}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.c.Final(tc.ct)
			assert.Equal(t, tc.want, f.Watermark)
			assert.Equal(t, tc.basis, f.Basis)
			if tc.reason == "" {
				assert.Empty(t, f.Reason)
			} else {
				assert.Contains(t, f.Reason, tc.reason)
			}
		})
	}
}

func TestValidateRefusesCoverageWithoutSourceFinality(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    Contract
		err  string
	}{
		{"covers positions under none", with(sparse, func(c *Contract) { c.Finality, c.WatermarkCoversPositions = 0, true }), "watermark covers positions needs finality source, not none"},
		{"covers positions under an append-only assertion", with(sparse, func(c *Contract) { c.Finality, c.WatermarkCoversPositions = FinalityAppendOnlyWriter, true }), "not append_only_writer"},
		{"final-through empty pages under a lag", with(sparse, func(c *Contract) { c.Finality, c.FinalityLag, c.EmptyPage = FinalityLag, 5, EmptyFinalThroughWatermark }), "empty page final through watermark needs finality source, not lag"},
		{"a lag that is not positive", with(sparse, func(c *Contract) { c.Finality = FinalityLag }), "positive lag"},
		{"a lag without lag finality", with(sparse, func(c *Contract) { c.FinalityLag = 5 }), "not lag"},
		{"unknown finality", with(sparse, func(c *Contract) { c.Finality = 9 }), "finality(9)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.c.Validate()
			require.ErrorIs(t, err, ErrInvalid)
			assert.Contains(t, err.Error(), tc.err)
		})
	}
	ok := with(sparse, func(c *Contract) { c.WatermarkCoversPositions, c.EmptyPage = true, EmptyFinalThroughWatermark })
	require.NoError(t, ok.Validate())
}

// A watermark whose finality the source does not certify advances the
// durable watermark (named by its basis) but never covers a gap: the gap a
// page skipped stays a divergence, and an empty page stays pending.
func TestOnlySourceFinalityCoversAGap(t *testing.T) {
	denseCovered := with(dense, func(c *Contract) { c.WatermarkCoversPositions = true })
	appendOnly := with(dense, func(c *Contract) { c.Finality = FinalityAppendOnlyWriter })
	lagged := with(dense, func(c *Contract) { c.Finality, c.FinalityLag = FinalityLag, 1 })
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
		basis  string
		reason string
	}{
		{"none: the complete-through stays in the witness", with(dense, func(c *Contract) { c.Finality = FinalityNone }), coord.Watermark{}, "", "complete-through 501 is recorded but not final"},
		{"source", dense, coord.Integer(501), "source", ""},
		{"append-only writer", with(dense, func(c *Contract) { c.Finality = FinalityAppendOnlyWriter }), coord.Integer(501), "append_only_writer assertion", ""},
		{"lag", with(dense, func(c *Contract) { c.Finality, c.FinalityLag = FinalityLag, 10 }), coord.Integer(491), "lag 10", ""},
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

func TestFinalityNamesRoundTrip(t *testing.T) {
	for f := FinalityNone; f <= FinalityLag; f++ {
		got, err := ParseFinality(f.String())
		require.NoError(t, err)
		assert.Equal(t, f, got)
	}
	_, err := ParseFinality("self")
	require.ErrorIs(t, err, ErrInvalid)
	assert.Equal(t, "none", Finality(0).String())
}
