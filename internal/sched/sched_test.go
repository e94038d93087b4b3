package sched

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeClock moves only when the test advances it.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	c     *fakeClock
	ch    chan time.Time
	at    time.Time
	armed bool
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) NewTimer() Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, ch: make(chan time.Time, 1)}
	c.timers = append(c.timers, t)
	return t
}

// Advance moves the clock by d and fires the timers due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	for _, t := range c.timers {
		t.fireLocked()
	}
}

func (t *fakeTimer) fireLocked() {
	if t.armed && !t.at.After(t.c.now) {
		t.armed = false
		select {
		case t.ch <- t.c.now:
		default:
		}
	}
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Reset(d time.Duration) {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	select {
	case <-t.ch:
	default:
	}
	t.at, t.armed = t.c.now.Add(d), true
	t.fireLocked()
}

func (t *fakeTimer) Stop() {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	t.armed = false
	select {
	case <-t.ch:
	default:
	}
}

func TestQueueOrdersByDeadlineThenByScheduling(t *testing.T) {
	t0 := time.Unix(0, 0)
	tests := []struct {
		name  string
		sched []string // key@second
		now   int
		want  []string
		left  int
	}{
		{"earliest first", []string{"a@3", "b@1", "c@2"}, 3, []string{"b", "c", "a"}, 0},
		{"only what is due", []string{"a@3", "b@1", "c@2"}, 2, []string{"b", "c"}, 1},
		{"ties in scheduling order", []string{"x@1", "y@1", "z@1"}, 1, []string{"x", "y", "z"}, 0},
		{"a key moved keeps one entry", []string{"a@1", "b@2", "a@3"}, 3, []string{"b", "a"}, 0},
		{"a key moved earlier", []string{"a@5", "b@2", "a@1"}, 2, []string{"a", "b"}, 0},
		{"nothing due", []string{"a@5"}, 4, nil, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var q Queue[string]
			for _, s := range tc.sched {
				var k string
				var sec int
				_, err := fmt.Sscanf(s, "%1s@%d", &k, &sec)
				require.NoError(t, err)
				q.At(k, t0.Add(time.Duration(sec)*time.Second))
			}
			assert.Equal(t, tc.want, q.PopDue(t0.Add(time.Duration(tc.now)*time.Second), nil))
			assert.Equal(t, tc.left, q.Len())
		})
	}
}

func TestQueueHoldsOneEntryPerKey(t *testing.T) {
	var q Queue[int]
	t0 := time.Unix(0, 0)
	for i := range 10_000 {
		q.At(i%100, t0.Add(time.Duration(i)*time.Millisecond))
	}
	assert.Equal(t, 100, q.Len(), "rescheduling a key replaces its entry")
	next, ok := q.Next()
	require.True(t, ok)
	assert.Equal(t, t0.Add(9_900*time.Millisecond), next, "each key keeps its latest deadline")
}

func TestQueueCancelRemovesTheEntry(t *testing.T) {
	var q Queue[string]
	t0 := time.Unix(0, 0)
	q.At("a", t0.Add(time.Second))
	q.At("b", t0.Add(2*time.Second))
	assert.True(t, q.Cancel("a"))
	assert.False(t, q.Cancel("a"), "cancelled twice")
	assert.False(t, q.Cancel("never"))
	assert.Equal(t, []string{"b"}, q.PopDue(t0.Add(time.Hour), nil))
	_, ok := q.Next()
	assert.False(t, ok)
}

// startScheduler runs a scheduler on a fake clock whose fired keys arrive
// on the returned channel.
func startScheduler(t *testing.T) (*Scheduler[string], *fakeClock, chan string) {
	t.Helper()
	clock := newFakeClock()
	fired := make(chan string, 100)
	s := NewScheduler(clock, func(k string) { fired <- k })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return s, clock, fired
}

func next(t *testing.T, fired chan string) string {
	t.Helper()
	select {
	case k := <-fired:
		return k
	case <-time.After(30 * time.Second):
		t.Fatal("no key fired")
		return ""
	}
}

// waitPending waits until the scheduler holds n deadlines (the run
// goroutine took the due ones).
func waitPending(t *testing.T, s *Scheduler[string], n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for s.Pending() != n {
		if time.Now().After(deadline) {
			t.Fatalf("pending %d, want %d", s.Pending(), n)
		}
		runtime.Gosched()
	}
}

func TestSchedulerFiresEachKeyAtItsDeadlineOnTheFakeClock(t *testing.T) {
	s, clock, fired := startScheduler(t)
	now := clock.Now()
	s.At("a", now.Add(3*time.Second))
	s.At("b", now.Add(time.Second))
	s.At("c", now.Add(2*time.Second))
	waitPending(t, s, 3)

	clock.Advance(1500 * time.Millisecond)
	assert.Equal(t, "b", next(t, fired))
	waitPending(t, s, 2)
	assert.Empty(t, fired, "nothing else is due")

	clock.Advance(1500 * time.Millisecond)
	assert.Equal(t, "c", next(t, fired))
	assert.Equal(t, "a", next(t, fired))
	waitPending(t, s, 0)
}

func TestSchedulerFiresAPastDeadlineAtOnce(t *testing.T) {
	s, clock, fired := startScheduler(t)
	s.At("late", clock.Now().Add(-time.Second))
	assert.Equal(t, "late", next(t, fired))
}

func TestSchedulerWakesForAnEarlierDeadline(t *testing.T) {
	s, clock, fired := startScheduler(t)
	s.At("later", clock.Now().Add(time.Hour))
	waitPending(t, s, 1)
	s.At("sooner", clock.Now().Add(time.Second))
	waitPending(t, s, 2)
	clock.Advance(time.Second)
	assert.Equal(t, "sooner", next(t, fired))
	waitPending(t, s, 1)
}

func TestSchedulerCancelledKeyNeverFires(t *testing.T) {
	s, clock, fired := startScheduler(t)
	s.At("a", clock.Now().Add(time.Second))
	s.At("b", clock.Now().Add(2*time.Second))
	s.Cancel("a")
	waitPending(t, s, 1)
	clock.Advance(3 * time.Second)
	assert.Equal(t, "b", next(t, fired))
	waitPending(t, s, 0)
	assert.Empty(t, fired)
}

func TestSchedulerHoldsNoGoroutinePerKey(t *testing.T) {
	before := runtime.NumGoroutine()
	s, clock, fired := startScheduler(t)
	for i := range 10_000 {
		s.At(fmt.Sprint(i), clock.Now().Add(time.Duration(i+1)*time.Millisecond))
	}
	// Rescheduled keys do not add entries: the pending entries are bounded
	// by the keys.
	for i := range 10_000 {
		s.At(fmt.Sprint(i), clock.Now().Add(time.Duration(i+1)*time.Second))
	}
	assert.Equal(t, 10_000, s.Pending())
	assert.LessOrEqual(t, runtime.NumGoroutine()-before, 1, "one goroutine (Run) for every key")
	clock.Advance(5 * time.Second)
	for range 5 {
		next(t, fired)
	}
	waitPending(t, s, 9_995)
}

func TestPoolRunsAtMostItsBound(t *testing.T) {
	p := NewPool(3, 0, 0)
	release := make(chan struct{})
	var now, peak, ran atomic.Int64
	for range 20 {
		p.Go(func() {
			n := now.Add(1)
			for {
				m := peak.Load()
				if n <= m || peak.CompareAndSwap(m, n) {
					break
				}
			}
			<-release
			now.Add(-1)
			ran.Add(1)
		})
	}
	deadline := time.Now().Add(30 * time.Second)
	for now.Load() < 3 {
		require.False(t, time.Now().After(deadline), "the pool never ran 3 at once")
		runtime.Gosched()
	}
	assert.Equal(t, 3, p.Running())
	assert.Equal(t, 17, p.Waiting())
	close(release)
	for p.Running() > 0 {
		require.False(t, time.Now().After(deadline), "the pool's goroutines did not end")
		runtime.Gosched()
	}
	assert.Equal(t, int64(20), ran.Load())
	assert.Equal(t, int64(3), peak.Load())
	assert.Equal(t, 0, p.Waiting())
}

func TestPoolRunsInSubmissionOrder(t *testing.T) {
	p := NewPool(1, 0, 0)
	release := make(chan struct{})
	done := make(chan struct{})
	var order []int
	p.Go(func() { <-release })
	for i := range 5 {
		p.Go(func() { order = append(order, i) })
	}
	p.Go(func() { close(done) })
	close(release)
	<-done
	assert.Equal(t, []int{0, 1, 2, 3, 4}, order)
}

func TestPoolGoroutinesLingerThenEnd(t *testing.T) {
	p := NewPool(4, 1, 20*time.Millisecond)
	release := make(chan struct{})
	var started sync.WaitGroup
	for range 4 {
		started.Add(1)
		p.Go(func() {
			started.Done()
			<-release
		})
	}
	started.Wait()
	assert.Equal(t, 4, p.Running())
	close(release)
	deadline := time.Now().Add(30 * time.Second)
	for p.Running() > 1 {
		require.False(t, time.Now().After(deadline), "more goroutines linger than kept")
		time.Sleep(time.Millisecond)
	}
	for range 50 {
		done := make(chan struct{})
		p.Go(func() { close(done) })
		<-done
		assert.LessOrEqual(t, p.Running(), 2, "a lingering goroutine takes the next function")
	}
	for p.Running() > 0 {
		require.False(t, time.Now().After(deadline), "the lingering goroutine did not end")
		time.Sleep(time.Millisecond)
	}
	done := make(chan struct{})
	p.Go(func() { close(done) })
	<-done
}
