package publish

import "time"

// Pacer decides when an instance's publisher runs its next round
// (docs/design.md#publishing). It is a value the driver consults; it reads
// no clock and starts no timer.
//
//   - A change of this process (a durable promotion handed over by the
//     feed, a newer membership epoch) is published at once when the last
//     round started at least MinGap ago, else MinGap after it: changes that
//     arrive meanwhile share that one round. So a promotion waits at most
//     MinGap plus one round, and an instance runs at most one round per
//     MinGap however fast it promotes.
//   - Without a change here, a round only reads (the membership epoch and
//     the record's root) to follow the other instances. It runs Idle after
//     the previous round; each round that found nothing changed anywhere
//     doubles that wait, up to MaxIdle, and any change brings it back to
//     Idle.
//
// The zero value is not usable: set the three durations (MinGap ≤ Idle ≤
// MaxIdle).
type Pacer struct {
	MinGap, Idle, MaxIdle time.Duration

	last    time.Time     // start of the last round (zero: none yet)
	wait    time.Duration // the idle wait after last
	pending bool          // a change of this process awaits its round
}

// Changed notes a change of this process that a round should publish.
func (p *Pacer) Changed() { p.pending = true }

// Pending reports whether a change awaits its round.
func (p *Pacer) Pending() bool { return p.pending }

// Due returns when the next round is due: at once before the first round,
// MinGap after the last round with a change pending, else the idle wait
// after it.
func (p *Pacer) Due() time.Time {
	switch {
	case p.last.IsZero():
		return time.Time{}
	case p.pending:
		return p.last.Add(p.MinGap)
	default:
		return p.last.Add(p.idleWait())
	}
}

func (p *Pacer) idleWait() time.Duration {
	if p.wait < p.Idle {
		return p.Idle
	}
	return p.wait
}

// Ran records a round that started at start and covered every change noted
// before it. active is whether the round found anything changed: it wrote
// a record, read a record or an epoch another instance changed, or failed
// (a failed round is retried at the Idle pace, not after a longer wait).
func (p *Pacer) Ran(start time.Time, active bool) {
	p.last = start
	p.pending = false
	switch {
	case active:
		p.wait = p.Idle
	default:
		p.wait = min(2*p.idleWait(), max(p.MaxIdle, p.Idle))
	}
}
