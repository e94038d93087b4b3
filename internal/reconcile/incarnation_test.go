package reconcile

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tidemark/tidemark/internal/coord"
)

func TestRecreatedIsDecidedOnlyWherePositionsNeverGoBack(t *testing.T) {
	ordered := Contract{OrderedPositions: true, WatermarkCoversPositions: true}
	evs := func(ps ...int64) []Event {
		out := make([]Event, len(ps))
		for i, p := range ps {
			out[i] = Event{ID: "e", Position: coord.IntPosition(p)}
		}
		return out
	}
	tests := []struct {
		name string
		in   RecreationInput
		want bool
	}{
		{"certified watermark below the durable one", RecreationInput{Contract: ordered, Watermark: coord.Integer(300),
			Response: Response{CompleteThrough: coord.Integer(20)}}, true},
		{"certified watermark equal to the durable one (pouchdb echoes since)", RecreationInput{Contract: ordered, Watermark: coord.Integer(300),
			Response: Response{CompleteThrough: coord.Integer(300)}}, false},
		{"watermark not in the positions' coordinate", RecreationInput{Contract: Contract{OrderedPositions: true}, Watermark: coord.Integer(300),
			Response: Response{CompleteThrough: coord.Integer(20)}}, false},
		{"page after the boundary wholly below it", RecreationInput{Contract: ordered, AfterPage: true, Applied: coord.IntPosition(300), HasApplied: true,
			Response: Response{Events: evs(1, 2, 3)}}, true},
		{"page repeating the boundary event", RecreationInput{Contract: ordered, AfterPage: true, Applied: coord.IntPosition(300), HasApplied: true,
			Response: Response{Events: evs(299, 300)}}, false},
		{"page from a restart cursor below the boundary", RecreationInput{Contract: ordered, Applied: coord.IntPosition(300), HasApplied: true,
			Response: Response{Events: evs(1, 2, 3)}}, false},
		{"unordered positions", RecreationInput{Contract: Contract{WatermarkCoversPositions: true}, AfterPage: true, Applied: coord.IntPosition(300), HasApplied: true, Watermark: coord.Integer(300),
			Response: Response{Events: evs(1), CompleteThrough: coord.Integer(1)}}, false},
		{"an empty page is no evidence", RecreationInput{Contract: ordered, AfterPage: true, Applied: coord.IntPosition(300), HasApplied: true}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			why, got := Recreated(tc.in)
			assert.Equal(t, tc.want, got, why)
			if got {
				assert.Contains(t, why, "positions never go back")
			}
		})
	}
}

func TestIncarnationHashNeverShowsTheValue(t *testing.T) {
	h := IncarnationHash("6a0c2f5e-secret")
	assert.Regexp(t, `^sha256:[0-9a-f]{16}$`, h)
	assert.NotContains(t, h, "secret")
	assert.Empty(t, IncarnationHash(""))
}
