package feed

import "github.com/tidemark/tidemark/internal/store"

// The published frontier records of this process: the input's publisher
// hands each record it wrote (a successful compare-and-swap) to the
// partition_frontier processors in the same process, which attach only
// published watermarks (docs/design.md#publishing).

type recordFeed struct {
	subs map[*RecordSubscription]struct{}
}

var records = map[string]*recordFeed{}

// PublishRecord hands f, just written to the store by this process, to
// the record subscribers of its scope.
func PublishRecord(f store.Frontier) {
	mu.Lock()
	defer mu.Unlock()
	r := records[f.Scope]
	if r == nil {
		return
	}
	for s := range r.subs {
		if s.latest == nil || s.latest.Epoch < f.Epoch || (s.latest.Epoch == f.Epoch && s.latest.Version < f.Version) {
			c := f
			s.latest = &c
		}
	}
}

// RecordSubscription receives the latest record published in one scope.
type RecordSubscription struct {
	scope  string
	latest *store.Frontier
}

// SubscribeRecords returns a subscription to scope's published records.
func SubscribeRecords(scope string) *RecordSubscription {
	mu.Lock()
	defer mu.Unlock()
	r := records[scope]
	if r == nil {
		r = &recordFeed{subs: map[*RecordSubscription]struct{}{}}
		records[scope] = r
	}
	s := &RecordSubscription{scope: scope}
	r.subs[s] = struct{}{}
	return s
}

// Latest returns the newest record published since the last call (nil:
// none). Its vector is shared: callers do not modify it.
func (s *RecordSubscription) Latest() *store.Frontier {
	mu.Lock()
	defer mu.Unlock()
	f := s.latest
	s.latest = nil
	return f
}

// Close stops the subscription.
func (s *RecordSubscription) Close() {
	mu.Lock()
	defer mu.Unlock()
	if r := records[s.scope]; r != nil {
		delete(r.subs, s)
	}
}
