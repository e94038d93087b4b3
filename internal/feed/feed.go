// Package feed carries durable checkpoint watermarks from the
// paginated_partitions input to partition_frontier processors running in the
// same process.
//
// Invariant: only watermarks that are already durable (read from, or
// written by a successful conditional write to, the checkpoint store) are
// published, so a view built from the feed may lag the store, never lead
// it.
package feed

import (
	"sync"

	"github.com/tidemark/tidemark/internal/coord"
)

// Update is one partition's durable complete-through watermark.
type Update struct {
	Partition string
	Watermark coord.Watermark
}

type scopeFeed struct {
	latest map[string]coord.Watermark
	// bases is the finality basis of each partition's latest watermark
	// (store.Checkpoint.Finality), when known.
	bases map[string]string
	subs  map[*Subscription]struct{}
}

var (
	mu     sync.Mutex
	scopes = map[string]*scopeFeed{}
)

func scopeOf(scope string) *scopeFeed {
	f := scopes[scope]
	if f == nil {
		f = &scopeFeed{latest: map[string]coord.Watermark{}, bases: map[string]string{}, subs: map[*Subscription]struct{}{}}
		scopes[scope] = f
	}
	return f
}

// Publish records a durable watermark of (scope, partition).
func Publish(scope, partition string, w coord.Watermark) {
	mu.Lock()
	defer mu.Unlock()
	f := scopeOf(scope)
	f.latest[partition] = w
	for s := range f.subs {
		s.dirty[partition] = w
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// PublishFinality records the finality basis of the durable watermark of
// (scope, partition), as its checkpoint records it ("" is ignored: unknown).
// Subscribers read it with Finalities; it changes no watermark.
func PublishFinality(scope, partition, basis string) {
	if basis == "" {
		return
	}
	mu.Lock()
	defer mu.Unlock()
	scopeOf(scope).bases[partition] = basis
}

// Finalities returns a copy of the finality bases published in scope.
func Finalities(scope string) map[string]string {
	mu.Lock()
	defer mu.Unlock()
	out := make(map[string]string, len(scopeOf(scope).bases))
	for p, b := range scopeOf(scope).bases {
		out[p] = b
	}
	return out
}

// Subscription receives the updates of one scope.
type Subscription struct {
	scope string
	dirty map[string]coord.Watermark
	wake  chan struct{}
}

// Subscribe returns a subscription whose first Drain holds every watermark
// published so far in scope.
func Subscribe(scope string) *Subscription {
	mu.Lock()
	defer mu.Unlock()
	f := scopeOf(scope)
	s := &Subscription{scope: scope, dirty: map[string]coord.Watermark{}, wake: make(chan struct{}, 1)}
	for p, w := range f.latest {
		s.dirty[p] = w
	}
	f.subs[s] = struct{}{}
	return s
}

// Drain returns the updates since the last Drain (latest value per
// partition).
func (s *Subscription) Drain() []Update {
	mu.Lock()
	defer mu.Unlock()
	if len(s.dirty) == 0 {
		return nil
	}
	out := make([]Update, 0, len(s.dirty))
	for p, w := range s.dirty {
		out = append(out, Update{Partition: p, Watermark: w})
	}
	clear(s.dirty)
	return out
}

// Wake is signalled after a Publish to this scope.
func (s *Subscription) Wake() <-chan struct{} { return s.wake }

// Close stops the subscription.
func (s *Subscription) Close() {
	mu.Lock()
	defer mu.Unlock()
	delete(scopeOf(s.scope).subs, s)
}
