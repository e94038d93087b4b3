// Package sched runs many waiting things on few goroutines: a Scheduler
// keeps one deadline per key in a min-heap and fires due keys from one
// goroutine (on an injected Clock), and a Pool runs submitted work on at
// most a fixed number of goroutines, started on demand and ended when the
// queue is empty. The input (input/partition.go) parks each quiet
// partition's next poll in one Scheduler and runs partitions with work on
// one Pool, so an idle partition holds no goroutine and no timer.
package sched

import (
	"container/heap"
	"context"
	"sync"
	"time"
)

// Clock is the time a Scheduler reads and waits on.
type Clock interface {
	Now() time.Time
	// NewTimer returns a stopped timer.
	NewTimer() Timer
}

// Timer is a resettable timer of a Clock.
type Timer interface {
	C() <-chan time.Time
	// Reset arms the timer to fire after d (at once when d <= 0),
	// replacing an earlier arming; no stale value is received afterwards.
	Reset(d time.Duration)
	Stop()
}

// Real is the system clock.
var Real Clock = realClock{}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) NewTimer() Timer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return realTimer{t}
}

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time   { return r.t.C }
func (r realTimer) Reset(d time.Duration) { r.t.Reset(max(d, 0)) }
func (r realTimer) Stop()                 { r.t.Stop() }

// Queue is a min-heap of deadlines with at most one entry per key: At
// moves a key's entry. Keys due at the same instant come out in the order
// they were last scheduled. Not safe for concurrent use.
type Queue[K comparable] struct {
	h     entries[K]
	index map[K]*entry[K]
	seq   uint64
}

type entry[K comparable] struct {
	key K
	at  time.Time
	seq uint64
	i   int
}

type entries[K comparable] []*entry[K]

func (h entries[K]) Len() int { return len(h) }
func (h entries[K]) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h entries[K]) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].i, h[j].i = i, j
}
func (h *entries[K]) Push(x any) {
	e := x.(*entry[K])
	e.i = len(*h)
	*h = append(*h, e)
}
func (h *entries[K]) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}

// At schedules k at t, replacing k's earlier deadline.
func (q *Queue[K]) At(k K, t time.Time) {
	if q.index == nil {
		q.index = map[K]*entry[K]{}
	}
	q.seq++
	if e, ok := q.index[k]; ok {
		e.at, e.seq = t, q.seq
		heap.Fix(&q.h, e.i)
		return
	}
	e := &entry[K]{key: k, at: t, seq: q.seq}
	q.index[k] = e
	heap.Push(&q.h, e)
}

// Cancel removes k's deadline; false when it had none.
func (q *Queue[K]) Cancel(k K) bool {
	e, ok := q.index[k]
	if !ok {
		return false
	}
	delete(q.index, k)
	heap.Remove(&q.h, e.i)
	return true
}

// Next returns the earliest deadline (false: none).
func (q *Queue[K]) Next() (time.Time, bool) {
	if len(q.h) == 0 {
		return time.Time{}, false
	}
	return q.h[0].at, true
}

// PopDue removes and returns, earliest first, the keys due at now.
func (q *Queue[K]) PopDue(now time.Time, into []K) []K {
	for len(q.h) > 0 && !q.h[0].at.After(now) {
		e := heap.Pop(&q.h).(*entry[K])
		delete(q.index, e.key)
		into = append(into, e.key)
	}
	return into
}

// Len is the number of pending deadlines (at most one per key).
func (q *Queue[K]) Len() int { return len(q.h) }

// Scheduler fires each key at its deadline from one goroutine (Run). fire
// is called without the Scheduler's lock and must not block: it hands the
// key on (to a Pool, a channel with room).
type Scheduler[K comparable] struct {
	clock Clock
	fire  func(K)
	kick  chan struct{}

	mu sync.Mutex
	q  Queue[K]
}

// NewScheduler returns a scheduler on clock that calls fire with every
// key that comes due.
func NewScheduler[K comparable](clock Clock, fire func(K)) *Scheduler[K] {
	return &Scheduler[K]{clock: clock, fire: fire, kick: make(chan struct{}, 1)}
}

// At schedules k at t (replacing its earlier deadline); a deadline not
// after now fires at once.
func (s *Scheduler[K]) At(k K, t time.Time) {
	s.mu.Lock()
	prev, had := s.q.Next()
	s.q.At(k, t)
	earlier := !had || t.Before(prev)
	s.mu.Unlock()
	if earlier {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
}

// Cancel removes k's deadline, if any.
func (s *Scheduler[K]) Cancel(k K) {
	s.mu.Lock()
	s.q.Cancel(k)
	s.mu.Unlock()
}

// Pending is the number of keys waiting for their deadline.
func (s *Scheduler[K]) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.q.Len()
}

// Run fires due keys until ctx ends. Run it on one goroutine.
func (s *Scheduler[K]) Run(ctx context.Context) {
	t := s.clock.NewTimer()
	defer t.Stop()
	var due []K
	for {
		s.mu.Lock()
		now := s.clock.Now()
		due = s.q.PopDue(now, due[:0])
		next, ok := s.q.Next()
		s.mu.Unlock()
		for i, k := range due {
			s.fire(k)
			var zero K
			due[i] = zero
		}
		if len(due) > 0 {
			// Firing took time: look again before sleeping.
			continue
		}
		if ok {
			t.Reset(next.Sub(now))
		} else {
			t.Stop()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		case <-s.kick:
		}
	}
}

// Pool runs submitted work on at most max goroutines, first come first
// served. Its goroutines start on demand; one that finds the queue empty
// waits up to linger for more work (at most keep of them wait), then ends:
// an idle Pool holds none, and a busy one does not start a goroutine (and
// grow its stack) for every function.
type Pool struct {
	max    int
	keep   int
	linger time.Duration
	// wake hands a queued function's turn to a lingering goroutine: one
	// token per goroutine taken off idle, sent under mu.
	wake chan struct{}

	mu      sync.Mutex
	queue   []func()
	head    int
	running int
	idle    int
}

// NewPool returns a pool of at most n goroutines (at least 1), keep of
// which linger for linger once the queue is empty.
func NewPool(n, keep int, linger time.Duration) *Pool {
	n = max(n, 1)
	return &Pool{max: n, keep: min(keep, n), linger: linger, wake: make(chan struct{}, n)}
}

// Go queues f; it never blocks.
func (p *Pool) Go(f func()) {
	p.mu.Lock()
	if p.head > 0 && p.head >= len(p.queue)/2 {
		// Reuse the room of the functions already started.
		n := copy(p.queue, p.queue[p.head:])
		clear(p.queue[n:])
		p.queue, p.head = p.queue[:n], 0
	}
	p.queue = append(p.queue, f)
	start := false
	switch {
	case p.idle > 0:
		p.idle--
		p.wake <- struct{}{} // room: at most max goroutines idle
	case p.running < p.max:
		p.running++
		start = true
	}
	p.mu.Unlock()
	if start {
		go p.work()
	}
}

func (p *Pool) work() {
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for {
		p.mu.Lock()
		if p.head < len(p.queue) {
			f := p.queue[p.head]
			p.queue[p.head] = nil
			p.head++
			p.mu.Unlock()
			f()
			continue
		}
		if p.linger <= 0 || p.idle >= p.keep {
			p.running--
			p.mu.Unlock()
			return
		}
		p.idle++
		p.mu.Unlock()
		if t == nil {
			t = time.NewTimer(p.linger)
		} else {
			t.Reset(p.linger)
		}
		select {
		case <-p.wake:
			continue
		case <-t.C:
		}
		p.mu.Lock()
		select {
		case <-p.wake:
			// Woken as the linger ended: the token is this goroutine's.
			p.mu.Unlock()
			continue
		default:
		}
		p.idle--
		p.running--
		p.mu.Unlock()
		return
	}
}

// Waiting is the number of queued functions not yet started.
func (p *Pool) Waiting() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.queue) - p.head
}

// Running is the number of the pool's goroutines (lingering ones
// included).
func (p *Pool) Running() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.running
}
