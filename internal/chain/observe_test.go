package chain

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tidemark/tidemark/internal/reconcile"
)

func TestParkKindOfReadsTheKindOfEveryReasonTheMachineWrites(t *testing.T) {
	for k := ParkMalformed; k <= ParkContractViolation; k++ {
		r := ParkReason{Kind: k, Detail: "at generation 3 cursor sha256:00: boom"}
		assert.Equal(t, k, ParkKindOf(r.String()), r.String())
		// Suffixes a failed recovery adds keep the kind.
		assert.Equal(t, k, ParkKindOf(r.also("restart from a stable boundary failed: %v", "x").String()), k.String())
	}
	for _, text := range []string{"", "held by operator", "malformed pages galore", "expired"} {
		assert.Equal(t, ParkUnknown, ParkKindOf(text), text)
	}
}

func TestParkReasonStringIsTheKindThenTheDetail(t *testing.T) {
	r := ParkReason{Kind: ParkMalformed, Detail: "after 3 attempts: partition p"}
	assert.Equal(t, "malformed page after 3 attempts: partition p", r.String())
	assert.Equal(t, "malformed page after 3 attempts: partition p; 8 restarts", r.also("%d restarts", 8).String())
	assert.True(t, ParkReason{}.IsZero())
	assert.False(t, r.IsZero())
}

func TestRetryClassNamesTheClassifierClassesAndTheIdleAnswers(t *testing.T) {
	for c := reconcile.FirstResponse; c <= reconcile.HeadGrowth; c++ {
		assert.Equal(t, c.String(), classOf(c).String())
	}
	assert.Equal(t, "idle", ClassIdle.String())
	assert.Equal(t, "empty_no_evidence", ClassEmptyNoEvidence.String())
}

func TestCountLabelIsItsClassOrViolationKind(t *testing.T) {
	tests := []struct {
		c    Count
		want string
	}{
		{Count{Metric: MetricRetries, Class: ClassShiftedPage, N: 1}, "count tidemark_retries{shifted_page}"},
		{Count{Metric: MetricViolations, Violation: reconcile.LatePosition, N: 1}, "count tidemark_contract_violations{late_position}"},
		{Count{Metric: MetricParked, N: -1}, "count tidemark_parked_partitions -1"},
		{Count{Metric: MetricHolds, N: 1}, "count holds"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, tt.c.String())
	}
}
