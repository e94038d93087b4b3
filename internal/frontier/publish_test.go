package frontier

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/provider"
)

// snap builds a Snapshot; scalar 0 means withheld. vec lists partition,
// value pairs (value 0: no evidence).
func snap(epoch uint64, scalar int64, vec ...any) Snapshot {
	s := Snapshot{Epoch: epoch, Vector: map[string]coord.Watermark{}}
	if scalar != 0 {
		s.Scalar, s.Proven = coord.Integer(scalar), true
	} else {
		s.Reason = "withheld"
	}
	for i := 0; i < len(vec); i += 2 {
		var w coord.Watermark
		if v := vec[i+1].(int); v != 0 {
			w = coord.Integer(int64(v))
		}
		s.Vector[vec[i].(string)] = w
	}
	return s
}

func TestNextPublication(t *testing.T) {
	tests := []struct {
		name        string
		prev, next  Snapshot
		wantPublish bool
		wantScalar  int64 // 0: none
		wantEpoch   uint64
	}{
		{"first publication", Snapshot{}, snap(1, 90, "a", 120, "b", 90), true, 90, 1},
		{"first publication, scalar withheld: vector only", Snapshot{}, snap(1, 0, "a", 120, "b", 0), true, 0, 1},
		{"advance within the epoch", snap(1, 90, "a", 120, "b", 90), snap(1, 110, "a", 120, "b", 110), true, 110, 1},
		{"lower scalar within the epoch is not published", snap(1, 110, "a", 120, "b", 110), snap(1, 90, "a", 120, "b", 90), false, 110, 1},
		{"lower scalar is refused even when the vector does not go back", snap(1, 110, "a", 120, "b", 110), snap(1, 100, "a", 120, "b", 110), false, 110, 1},
		{"equal snapshot is not republished", snap(1, 90, "a", 120, "b", 90), snap(1, 90, "a", 120, "b", 90), false, 90, 1},
		{"same scalar, vector advanced: published", snap(1, 90, "a", 120, "b", 90), snap(1, 90, "a", 130, "b", 90), true, 90, 1},
		{"retracting a published scalar within the epoch is refused", snap(1, 90, "a", 120, "b", 90), snap(1, 0, "a", 120, "b", 90), false, 90, 1},
		{"a vector entry going back is refused", snap(1, 90, "a", 120, "b", 90), snap(1, 90, "a", 100, "b", 90), false, 90, 1},
		{"a vector entry losing its evidence is refused", snap(1, 0, "a", 120, "b", 0), snap(1, 0, "a", 0, "b", 0), false, 0, 1},
		{"a vector with another partition set in the same epoch is refused", snap(1, 0, "a", 120, "b", 0), snap(1, 0, "a", 120, "c", 0), false, 0, 1},
		{"a vector with an extra partition in the same epoch is refused", snap(1, 0, "a", 120), snap(1, 0, "a", 120, "c", 0), false, 0, 1},
		{"first scalar in the epoch", snap(1, 0, "a", 120, "b", 0), snap(1, 80, "a", 120, "b", 80), true, 80, 1},
		{"unproven to unproven with progress", snap(1, 0, "a", 120, "b", 0), snap(1, 0, "a", 130, "b", 0), true, 0, 1},
		{"older epoch is never published", snap(2, 50, "a", 50), snap(1, 90, "a", 120, "b", 90), false, 50, 2},
		{"new epoch may publish a lower proven scalar", snap(1, 110, "a", 120, "b", 110), snap(2, 100, "a", 120, "c", 100), true, 100, 2},
		{"new unproven epoch publishes the vector, scalar withheld", snap(1, 110, "a", 120, "b", 110), snap(2, 0, "a", 120, "b", 110, "c", 0), true, 0, 2},
		{
			"proven flag without a scalar is treated as unproven",
			snap(1, 0, "a", 0), Snapshot{Epoch: 2, Proven: true, Vector: map[string]coord.Watermark{"a": {}}},
			true, 0, 2,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pub, publish := NextPublication(tc.prev, tc.next)
			assert.Equal(t, tc.wantPublish, publish)
			assert.Equal(t, tc.wantEpoch, pub.Epoch)
			if tc.wantScalar == 0 {
				assert.True(t, pub.Scalar.IsZero())
				assert.False(t, pub.Proven)
			} else {
				assert.Equal(t, coord.Integer(tc.wantScalar), pub.Scalar)
				assert.True(t, pub.Proven)
			}
			if !publish {
				assert.Equal(t, tc.prev, pub, "not publishing keeps prev")
			}
		})
	}
}

func TestNextPublication_IncomparableScalarInSameEpoch(t *testing.T) {
	prev := snap(1, 90, "a", 90)
	next := Snapshot{Epoch: 1, Proven: true, Scalar: coord.String("z"), Vector: map[string]coord.Watermark{"a": coord.String("z")}}
	pub, publish := NextPublication(prev, next)
	assert.False(t, publish)
	assert.Equal(t, prev, pub)
}

func TestScalarAdvanced(t *testing.T) {
	tests := []struct {
		name      string
		prev, pub Snapshot
		want      bool
	}{
		{"first scalar", Snapshot{}, snap(1, 90, "a", 90), true},
		{"no scalar", Snapshot{}, snap(1, 0, "a", 0), false},
		{"higher in the same epoch", snap(1, 90, "a", 90), snap(1, 100, "a", 100), true},
		{"same scalar", snap(1, 90, "a", 90), snap(1, 90, "a", 90), false},
		{"lower in the same epoch", snap(1, 90, "a", 90), snap(1, 80, "a", 80), false},
		{"first scalar of the epoch", snap(1, 0, "a", 0), snap(1, 80, "a", 80), true},
		{"new epoch with a scalar", snap(1, 90, "a", 90), snap(2, 80, "a", 80), true},
		{"older epoch", snap(2, 90, "a", 90), snap(1, 100, "a", 100), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, ScalarAdvanced(tc.prev, tc.pub))
		})
	}
}

func TestSnapshot_String(t *testing.T) {
	tr := newTracker(t, 12, "b", "a", "c")
	applyAll(t, tr, []update{{"a", coord.Integer(120), Advanced}, {"b", coord.Integer(90), Advanced}})
	assert.Equal(t,
		"epoch 12 frontier withheld (1 of 3 partitions have no complete-through watermark: c) held by c vector a=120 b=90 c=none",
		tr.Frontier().String())
	applyAll(t, tr, []update{{"c", coord.Integer(95), Advanced}})
	assert.Equal(t, "epoch 12 frontier 90 held by b vector a=120 b=90 c=95", tr.Frontier().String())
	assert.Equal(t, "epoch 0 frontier withheld vector", Snapshot{}.String())
}

func TestFinalityNoteNamesMembersRestingOnAnAssertionOrALag(t *testing.T) {
	proven := Snapshot{Epoch: 1, Proven: true, Scalar: coord.Integer(5), Vector: map[string]coord.Watermark{"a": coord.Integer(5), "b": coord.Integer(9), "c": coord.Integer(7), "d": coord.Integer(8)}}
	assertion := provider.Basis{Finality: provider.FinalityAppendOnlyWriter}
	source := provider.Basis{Finality: provider.FinalitySource}
	bases := map[string]provider.Basis{
		"a": assertion, "b": source, "d": assertion,
		"c": {Finality: provider.FinalityLag, Lag: int64(5 * time.Minute), Timestamp: true},
		"x": {Finality: provider.FinalityLag, Lag: 1},
	}
	assert.Equal(t, "append_only_writer assertion (a, d); lag 5m0s (c)", FinalityNote(proven, bases))
	assert.Empty(t, FinalityNote(proven, map[string]provider.Basis{"a": source, "b": {}}), "source and unknown bases need no note")
	withheld := proven
	withheld.Proven, withheld.Scalar = false, coord.Watermark{}
	assert.Empty(t, FinalityNote(withheld, bases), "no note without a scalar")
}
