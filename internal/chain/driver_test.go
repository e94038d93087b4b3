package chain

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
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
	_, ok = p.Due(10)
	assert.False(t, ok, "one deletion in flight at a time")
	p.Done(below, errors.New("throttled"))
	below, ok = p.Due(6)
	assert.True(t, ok, "a failed deletion is retried at the next checkpoint")
	assert.Equal(t, uint64(5), below)
	p.Done(below, nil)
	_, ok = p.Due(9)
	assert.False(t, ok)
	_, ok = p.Due(10)
	assert.True(t, ok)
	_, ok = (&Pruning{}).Due(100)
	assert.False(t, ok, "Every 0 never prunes")
}
