package e2etest

import (
	"testing"
	"time"
)

// Patience is how long a test waits for a condition that must come. It is
// far above what the condition takes on an idle machine: a deadline only
// turns a hang into a failure, it never measures speed.
const Patience = 2 * time.Minute

// WaitFor polls cond until it holds and fails t when timeout passes first.
// cond returns whether the condition holds and a description of the state
// it saw, printed on failure. Each guard is checked before every poll: a
// non-nil error fails the wait at once (Proc.Running: the process the
// condition depends on has died).
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() (bool, string), guards ...func() error) {
	t.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	pause := 5 * time.Millisecond
	last := ""
	for {
		for _, g := range guards {
			if err := g(); err != nil {
				t.Fatalf("waiting for %s: %v; last state: %s", what, err, last)
			}
		}
		ok, state := cond()
		if ok {
			return
		}
		last = state
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: not reached after %s; last state: %s", what, time.Since(start).Round(time.Millisecond), last)
		}
		time.Sleep(pause)
		pause = min(2*pause, 100*time.Millisecond)
	}
}

// WaitUntil is WaitFor with a condition that has no state to describe.
func WaitUntil(t testing.TB, timeout time.Duration, what string, cond func() bool, guards ...func() error) {
	t.Helper()
	WaitFor(t, timeout, what, func() (bool, string) { return cond(), "" }, guards...)
}
