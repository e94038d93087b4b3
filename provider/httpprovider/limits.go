package httpprovider

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// PartitionRateLimit limits the requests of each partition on its own
// (partition_rate_limit): at most Count in every Interval, for its page,
// bootstrap and validate requests, which then do not access the
// rate_limit resource (that one applies to the other requests: the
// incarnation request, discovery). A source whose quota is per partition
// (Kinesis: GetRecords "can support up to five read transactions per
// second per shard") is read at its quota on every partition at once.
type PartitionRateLimit struct {
	Count    int
	Interval time.Duration
}

// ParsePartitionRateLimit reads `count/interval` ("5/1s"); empty is none.
func ParsePartitionRateLimit(s string) (PartitionRateLimit, error) {
	if strings.TrimSpace(s) == "" {
		return PartitionRateLimit{}, nil
	}
	n, d, ok := strings.Cut(s, "/")
	count, err := strconv.Atoi(strings.TrimSpace(n))
	if !ok || err != nil || count <= 0 {
		return PartitionRateLimit{}, fmt.Errorf("partition_rate_limit %q: want count/interval with a positive count, such as 5/1s", s)
	}
	every, err := time.ParseDuration(strings.TrimSpace(d))
	if err != nil || every <= 0 {
		return PartitionRateLimit{}, fmt.Errorf("partition_rate_limit %q: want count/interval with a positive interval, such as 5/1s", s)
	}
	return PartitionRateLimit{Count: count, Interval: every}, nil
}

// partitionLimiter keeps one window per partition: Count requests may
// start in each Interval from the window's start. A window unused for an
// Interval is forgotten (pruned when the map grows past
// maxPartitionWindows), so what it keeps is bounded by the partitions read
// within one interval.
type partitionLimiter struct {
	limit PartitionRateLimit
	mu    sync.Mutex
	win   map[string]*rateWindow
}

type rateWindow struct {
	start time.Time
	used  int
}

// maxPartitionWindows is the size past which ended windows are pruned.
const maxPartitionWindows = 1024

func newPartitionLimiter(l PartitionRateLimit) *partitionLimiter {
	if l.Count <= 0 || l.Interval <= 0 {
		return nil
	}
	return &partitionLimiter{limit: l, win: map[string]*rateWindow{}}
}

// reserve takes a request of partition now, or says how long to wait
// before asking again.
func (l *partitionLimiter) reserve(partition string, now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.win[partition]
	if w == nil {
		if len(l.win) >= maxPartitionWindows {
			for p, o := range l.win {
				if now.Sub(o.start) >= l.limit.Interval {
					delete(l.win, p)
				}
			}
		}
		w = &rateWindow{start: now}
		l.win[partition] = w
	}
	if now.Sub(w.start) >= l.limit.Interval {
		w.start, w.used = now, 0
	}
	if w.used < l.limit.Count {
		w.used++
		return 0
	}
	return w.start.Add(l.limit.Interval).Sub(now)
}

// wait blocks until partition may make a request.
func (l *partitionLimiter) wait(ctx context.Context, partition string) error {
	for {
		d := l.reserve(partition, time.Now())
		if d <= 0 {
			return nil
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("partition_rate_limit: %w", ctx.Err())
		case <-t.C:
		}
	}
}

// sharedRequests coalesces identical requests of several partitions (the
// incarnation read of a source whose incarnation is one for all its
// partitions, such as a Kinesis stream's DescribeStreamSummary): a request
// is never joined once it has begun, so that every caller's answer comes
// from a request that began after the call (an incarnation check covers
// the pages that arrived before it began); callers that come while one is
// in flight share the next one, which starts when it ends. So at most one
// such request is in flight per distinct request, however many partitions
// ask.
type sharedRequests struct {
	mu      sync.Mutex
	flights map[string]*flight
}

type flight struct {
	next *sharedCall // the callers waiting for the next request
}

type sharedCall struct {
	done    chan struct{}
	res     *httpResult
	err     error
	waiters int // the callers that joined it
}

// requestKey identifies a request by everything that is sent.
func requestKey(rq *builtRequest) string {
	var b strings.Builder
	b.WriteString(rq.method)
	b.WriteByte(0)
	b.WriteString(rq.url)
	b.WriteByte(0)
	names := make([]string, 0, len(rq.header))
	for n := range rq.header {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		b.WriteString(n)
		b.WriteByte(':')
		b.WriteString(strings.Join(rq.header[n], ","))
		b.WriteByte(0)
	}
	if rq.hasBody {
		b.Write(rq.body)
	}
	return b.String()
}

// do runs rq through run, or waits for the next identical request to run.
func (s *sharedRequests) do(ctx context.Context, rq *builtRequest, run func(context.Context, *builtRequest) (*httpResult, error)) (*httpResult, error) {
	key := requestKey(rq)
	s.mu.Lock()
	if s.flights == nil {
		s.flights = map[string]*flight{}
	}
	f, inFlight := s.flights[key]
	if !inFlight {
		f = &flight{}
		s.flights[key] = f
		s.mu.Unlock()
		res, err := run(ctx, rq)
		s.next(key, f, ctx, rq, run)
		return res, err
	}
	// One is in flight: it began before this call. Wait for the next.
	if f.next == nil {
		f.next = &sharedCall{done: make(chan struct{})}
	}
	c := f.next
	c.waiters++
	s.mu.Unlock()
	select {
	case <-c.done:
		if c.res == nil {
			return nil, c.err
		}
		// Each caller reads its own copy of the answer.
		res := *c.res
		res.body = slices.Clone(c.res.body)
		res.header = c.res.header.Clone()
		return &res, c.err
	case <-ctx.Done():
		return nil, fmt.Errorf("httpprovider: partition %s: waiting for a shared incarnation request: %w", rq.partition, ctx.Err())
	}
}

// next ends key's flight, or starts the request its waiters share (on its
// own goroutine, bounded by the request's timeout and retries: the callers
// that joined it may give up waiting, it ends all the same).
func (s *sharedRequests) next(key string, f *flight, ctx context.Context, rq *builtRequest, run func(context.Context, *builtRequest) (*httpResult, error)) {
	s.mu.Lock()
	c := f.next
	f.next = nil
	if c == nil {
		delete(s.flights, key)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	go func() {
		bg := context.WithoutCancel(ctx)
		c.res, c.err = run(bg, rq)
		close(c.done)
		s.next(key, f, bg, rq, run)
	}()
}
