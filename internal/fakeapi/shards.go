package fakeapi

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Shards request kinds counted by Served.
const (
	// ShardsList is a request for the partition list (GET /partitions).
	ShardsList = "list"
	// ShardsPage is a page request of one partition.
	ShardsPage = "page"
)

// Errors of the Shards control methods.
var (
	// ErrNoShard: no partition of that name.
	ErrNoShard = errors.New("fakeapi: no such partition")
	// ErrShardSealed: the partition is sealed; it takes no more events.
	ErrShardSealed = errors.New("fakeapi: partition is sealed")
	// ErrShardExists: a partition of that name exists already.
	ErrShardExists = errors.New("fakeapi: partition exists")
)

// ShardEvent is one event of a Shards partition.
type ShardEvent struct {
	ID        string `json:"id"`
	Partition string `json:"-"`
	// Pos is the event's place in the source's one global sequence: every
	// event gets the next integer, whichever partition it goes to, so
	// positions increase across time and across partitions (a split's
	// children lie above their parent's events).
	Pos     int64  `json:"pos"`
	Payload string `json:"payload"`
}

// ShardInfo describes one partition as GET /partitions lists it.
type ShardInfo struct {
	Name    string   `json:"name"`
	Parents []string `json:"parents,omitempty"`
	// Sealed: the partition takes no more events (a split parent).
	Sealed bool `json:"sealed"`
}

// Shards is a fake sharded event stream whose partitions change while it is
// read: partitions are added, and a partition splits into two children
// that name it as their parent (create it with NewShards). Its API is the
// fake's own; it models the behaviour of resharding streams such as
// Kinesis Data Streams and DynamoDB Streams (a closed parent shard stays
// listed; its children's records follow its last record), with integer
// positions from one global sequence instead of per-shard sequence
// numbers, and a complete-through watermark on every page.
//
// It answers:
//
//   - GET /partitions: `{"partitions": [{"name", "parents", "sealed"}],
//     "head"}`, every partition ever created in creation order, sealed ones
//     included; `parents` only for a split's children; `head` is the
//     largest position handed out so far (0: none).
//   - GET /partitions/{name}?after=N&limit=K: the partition's events with
//     a position above N (default 0: from the start), at most K (default
//     100, 1 to 1000), in position order: `{"events": [{"id", "pos",
//     "payload"}], "complete_through", "next", "has_more", "sealed"}`.
//     When more events follow the page, `has_more` is true, and `next` and
//     `complete_through` are the position of the page's last event.
//     Otherwise the page reaches the partition's end: an open partition
//     answers `next` = the last event's position (N when the page is
//     empty) and `complete_through` = the head (every later event of any
//     partition gets a larger position, so the partition is complete
//     through the head); a sealed partition answers `sealed: true`, no
//     `next`, and `complete_through` = the head when it was sealed.
//   - An unknown partition is 404 `{"error": ...}`; a malformed `after` or
//     `limit` is 400.
//   - The rate-limit answer (Control.RateLimit): 429 with `Retry-After`.
//
// It leaves out: authentication, merges, cursor expiry, retention, and
// any request but these two GETs.
//
// Control: Append and AppendOpen add events (before or while the pipeline
// runs), Trickle appends on a timer, AddPartition creates a partition,
// Split seals a partition at its current end and creates its two
// children (from then on new events go only to the children), and Events
// and Partitions describe what the fake holds for the test's oracle.
type Shards struct {
	*Control

	mu    sync.Mutex
	head  int64
	order []string
	parts map[string]*shard
}

type shard struct {
	parents  []string
	events   []ShardEvent
	sealed   bool
	sealedAt int64
}

// NewShards starts a fake stream with the open partitions names (none
// sealed, no events).
func NewShards(t testing.TB, names ...string) *Shards {
	t.Helper()
	s := &Shards{parts: map[string]*shard{}}
	for _, n := range names {
		if err := s.AddPartition(n); err != nil {
			t.Fatal(err)
		}
	}
	s.Control = start(t, http.HandlerFunc(s.serve), func(w http.ResponseWriter, now, until time.Time) time.Time {
		nb := retryAfter(w, now, until)
		writeJSON(w, http.StatusTooManyRequests, map[string]any{"error": "rate limited"})
		return nb
	})
	return s
}

// AddPartition creates an open partition without events.
func (s *Shards) AddPartition(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addLocked(name, nil)
}

func (s *Shards) addLocked(name string, parents []string) error {
	if name == "" || strings.ContainsAny(name, "/?#") {
		return fmt.Errorf("fakeapi: invalid partition name %q", name)
	}
	if _, ok := s.parts[name]; ok {
		return fmt.Errorf("%w: %s", ErrShardExists, name)
	}
	s.parts[name] = &shard{parents: parents}
	s.order = append(s.order, name)
	return nil
}

// Append adds n events to partition and returns them; every event takes
// the next position of the global sequence.
func (s *Shards) Append(partition string, n int) ([]ShardEvent, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sh, ok := s.parts[partition]
	switch {
	case !ok:
		return nil, fmt.Errorf("%w: %s", ErrNoShard, partition)
	case sh.sealed:
		return nil, fmt.Errorf("%w: %s", ErrShardSealed, partition)
	}
	out := make([]ShardEvent, 0, n)
	for range n {
		out = append(out, s.appendLocked(partition, sh))
	}
	return out, nil
}

func (s *Shards) appendLocked(name string, sh *shard) ShardEvent {
	s.head++
	ev := ShardEvent{
		ID: fmt.Sprintf("%s:%d", name, s.head), Partition: name, Pos: s.head,
		Payload: fmt.Sprintf("event %d of %s", len(sh.events)+1, name),
	}
	sh.events = append(sh.events, ev)
	return ev
}

// AppendOpen adds n events to every open partition, one partition after
// the other in creation order, n rounds, and returns them in position
// order.
func (s *Shards) AppendOpen(n int) []ShardEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []ShardEvent
	for range n {
		for _, name := range s.order {
			if sh := s.parts[name]; !sh.sealed {
				out = append(out, s.appendLocked(name, sh))
			}
		}
	}
	return out
}

// Trickle calls AppendOpen(n) every interval until the returned stop is
// called (or the test ends). stop waits for a running append to finish,
// so no event is added after it returns; it may be called more than once.
func (s *Shards) Trickle(t testing.TB, every time.Duration, n int) (stop func()) {
	t.Helper()
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
				s.AppendOpen(n)
			}
		}
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() { close(quit) })
		<-done
	}
	t.Cleanup(stop)
	return stop
}

// Split seals parent at its current end and creates its two children,
// parent+".1" and parent+".2", each naming parent as its parent. From
// then on new events go to the children only, at positions above every
// event of the parent.
func (s *Shards) Split(parent string) ([2]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sh, ok := s.parts[parent]
	switch {
	case !ok:
		return [2]string{}, fmt.Errorf("%w: %s", ErrNoShard, parent)
	case sh.sealed:
		return [2]string{}, fmt.Errorf("%w: %s", ErrShardSealed, parent)
	}
	children := [2]string{parent + ".1", parent + ".2"}
	for _, c := range children {
		if _, ok := s.parts[c]; ok {
			return [2]string{}, fmt.Errorf("%w: %s", ErrShardExists, c)
		}
	}
	sh.sealed, sh.sealedAt = true, s.head
	for _, c := range children {
		if err := s.addLocked(c, []string{parent}); err != nil {
			return [2]string{}, err
		}
	}
	return children, nil
}

// Events returns every event of every partition, in position order.
func (s *Shards) Events() []ShardEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []ShardEvent
	for _, sh := range s.parts {
		out = append(out, sh.events...)
	}
	slices.SortFunc(out, func(a, b ShardEvent) int { return cmp.Compare(a.Pos, b.Pos) })
	return out
}

// Partitions returns every partition in creation order, as listed.
func (s *Shards) Partitions() []ShardInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.listLocked()
}

func (s *Shards) listLocked() []ShardInfo {
	out := make([]ShardInfo, 0, len(s.order))
	for _, name := range s.order {
		sh := s.parts[name]
		out = append(out, ShardInfo{Name: name, Parents: slices.Clone(sh.parents), Sealed: sh.sealed})
	}
	return out
}

// Head is the largest position handed out so far (0: none).
func (s *Shards) Head() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.head
}

// shardsPage is the answer of a page request.
type shardsPage struct {
	Events          []ShardEvent `json:"events"`
	CompleteThrough int64        `json:"complete_through"`
	Next            *string      `json:"next,omitempty"`
	HasMore         bool         `json:"has_more"`
	Sealed          bool         `json:"sealed"`
}

func (s *Shards) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		writeJSON(w, http.StatusMethodNotAllowed, map[string]any{"error": "only GET"})
		return
	}
	if r.URL.Path == "/partitions" {
		s.count(ShardsList)
		s.mu.Lock()
		body := map[string]any{"partitions": s.listLocked(), "head": s.head}
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, body)
		return
	}
	name, ok := strings.CutPrefix(r.URL.Path, "/partitions/")
	if !ok || name == "" || strings.Contains(name, "/") {
		writeJSON(w, http.StatusNotFound, map[string]any{"error": "not found"})
		return
	}
	q := r.URL.Query()
	after := int64(0)
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": "after must be a non-negative integer"})
			return
		}
		after = n
	}
	limit := 100
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": "limit must be 1 to 1000"})
			return
		}
		limit = n
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	sh, ok := s.parts[name]
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]any{"error": "no such partition: " + name})
		return
	}
	s.count(ShardsPage)
	i, _ := slices.BinarySearchFunc(sh.events, after+1, func(e ShardEvent, pos int64) int { return cmp.Compare(e.Pos, pos) })
	rest := sh.events[i:]
	page := shardsPage{Events: slices.Clone(rest[:min(limit, len(rest))])}
	last := after
	if len(page.Events) > 0 {
		last = page.Events[len(page.Events)-1].Pos
	}
	switch {
	case len(rest) > limit:
		next := strconv.FormatInt(last, 10)
		page.Next, page.HasMore, page.CompleteThrough = &next, true, last
	case sh.sealed:
		page.Sealed, page.CompleteThrough = true, max(sh.sealedAt, last)
	default:
		next := strconv.FormatInt(last, 10)
		page.Next, page.CompleteThrough = &next, s.head
	}
	writeJSON(w, http.StatusOK, page)
}
