package publish

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func newPacer() *Pacer {
	return &Pacer{MinGap: 50 * time.Millisecond, Idle: time.Second, MaxIdle: 30 * time.Second}
}

// The first round is due at once; a change after a round long enough ago
// is due at once too, one within MinGap of the last round waits for it,
// and several changes share that one round.
func TestPacerPublishesAChangeAtOnceOrAfterTheMinimumGap(t *testing.T) {
	p := newPacer()
	t0 := time.Unix(1000, 0)
	require.True(t, p.Due().IsZero(), "the first round is due at once")
	p.Ran(t0, true)

	p.Changed()
	p.Changed()
	require.Equal(t, t0.Add(50*time.Millisecond), p.Due(), "changes within the gap share the round after it")
	p.Ran(t0.Add(50*time.Millisecond), true)
	require.False(t, p.Pending())
	require.Equal(t, t0.Add(50*time.Millisecond+time.Second), p.Due(), "no change: the idle read")

	// A change long after the last round: due in the past, i.e. at once.
	now := t0.Add(700 * time.Millisecond)
	p.Changed()
	require.False(t, p.Due().After(now), "a change after a quiet spell is published at once")
}

// Idle rounds that find nothing changed double the wait up to MaxIdle;
// one that finds a change (here or in another instance) brings it back.
func TestPacerSlowsIdleReadsUntilSomethingChanges(t *testing.T) {
	p := newPacer()
	at := time.Unix(1000, 0)
	p.Ran(at, true)
	var waits []time.Duration
	for range 7 {
		next := p.Due()
		waits = append(waits, next.Sub(at))
		at = next
		p.Ran(at, false)
	}
	s := time.Second
	require.Equal(t, []time.Duration{s, 2 * s, 4 * s, 8 * s, 16 * s, 30 * s, 30 * s}, waits)
	p.Ran(at, true)
	require.Equal(t, at.Add(time.Second), p.Due(), "a change anywhere: back to the idle pace")
	p.Ran(at, false)
	p.Changed()
	require.Equal(t, at.Add(50*time.Millisecond), p.Due(), "a change here does not wait for the slowed idle read")
}
