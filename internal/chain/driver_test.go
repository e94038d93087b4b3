package chain

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFetchRetryRetriesOnlyTransientFailuresWithDoublingBackoff(t *testing.T) {
	r := FetchRetry{Retries: 3, Backoff: 4 * time.Second}
	for _, f := range []FetchFailure{FetchExpired, FetchMalformed, FetchPermanent} {
		_, ok := r.Retry(f)
		assert.False(t, ok, f.String())
	}
	var got []time.Duration
	for {
		d, ok := r.Retry(FetchTransient)
		if !ok {
			break
		}
		got = append(got, d)
	}
	assert.Equal(t, []time.Duration{4 * time.Second, 8 * time.Second, MaxFetchBackoff}, got)
	assert.Equal(t, 3, r.Tries())
}

func TestEndChainEndsItsOwnAndEarlierChains(t *testing.T) {
	e := EndChain{Chain: 5}
	assert.True(t, e.Ends(4))
	assert.True(t, e.Ends(5))
	assert.False(t, e.Ends(6))
}

func TestPruningEveryNGenerationsOneAtATime(t *testing.T) {
	p := Pruning{Every: 4}
	_, ok := p.Due(4)
	assert.False(t, ok, "below the first round")
	below, ok := p.Due(5)
	assert.True(t, ok)
	assert.Equal(t, uint64(4), below, "the promoted witness of the generation before the checkpoint's stays (Load.From)")
	_, ok = p.Due(6)
	assert.False(t, ok, "one deletion in flight at a time")
	_, ok = p.Done(below, errors.New("throttled"))
	assert.False(t, ok, "a failed deletion is not repeated at once")
	below, ok = p.Due(7)
	assert.True(t, ok, "a failed deletion is retried at the next checkpoint")
	assert.Equal(t, uint64(6), below)
	_, ok = p.Done(below, nil)
	assert.False(t, ok, "nothing became durable meanwhile")
	_, ok = p.Due(10)
	assert.False(t, ok, "Every generations after the last deletion: below 9 < 6+4")
	_, ok = p.Due(11)
	assert.True(t, ok)
	_, ok = (&Pruning{}).Due(100)
	assert.False(t, ok, "Every 0 never prunes")
}

// Checkpoints that became durable while a deletion ran make the next
// deletion due when it ends, so a partition that promotes nothing more
// (complete) still has its witnesses deleted up to its last checkpoint.
func TestPruningCatchesUpWithCheckpointsDurableDuringADeletion(t *testing.T) {
	p := Pruning{Every: 1}
	below, ok := p.Due(3)
	require.True(t, ok)
	require.Equal(t, uint64(2), below)
	for g := uint64(4); g <= 12; g++ {
		_, ok := p.Due(g)
		require.False(t, ok, "generation %d: one deletion in flight at a time", g)
	}
	next, ok := p.Done(below, nil)
	require.True(t, ok, "the checkpoints durable meanwhile make a deletion due")
	assert.Equal(t, uint64(11), next, "below the last durable generation's predecessor")
	_, ok = p.Done(next, nil)
	assert.False(t, ok, "caught up")
}
