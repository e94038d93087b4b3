// Package feed carries durable checkpoint watermarks and published frontier
// records from the paginated_partitions input to the partition_frontier
// processors of the same pipeline.
//
// A Hub is an explicit dependency: the input and the processor each take
// one, and the Benthos components take theirs from the pipeline's resources
// (Of), so components of one running config share a hub and two configs
// (two streams, two tests) never see each other's values. Values are keyed
// by scope within a hub; the hub is freed with the resources that hold it.
//
// Invariants:
//   - only watermarks that are already durable (read from, or written by a
//     successful conditional write to, the checkpoint store) and records
//     this process wrote by a successful compare-and-swap are published, so
//     a view built from the feed may lag the store, never lead it;
//   - a subscription's first Drain holds every watermark published in its
//     scope before it subscribed; after that, only what changed;
//   - a record subscription keeps only the newest record (by epoch, then
//     version): an older one arriving late never replaces a newer one.
package feed

import (
	"maps"
	"sync"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/provider"
)

// Hub holds the watermarks and published records of the scopes of one
// pipeline. The zero value is not usable: use NewHub. Safe for concurrent
// use.
type Hub struct {
	mu     sync.Mutex
	scopes map[string]*scopeFeed
}

// NewHub returns an empty hub.
func NewHub() *Hub {
	return &Hub{scopes: map[string]*scopeFeed{}}
}

type resourceKey struct{}

// Of returns the hub kept in res (one per pipeline's resources: the input
// and processors of one config share it), creating it on first use; with
// res nil, a new hub of its own (a component built outside a pipeline, as
// in unit tests, shares its feed with nobody).
func Of(res *service.Resources) *Hub {
	if res == nil {
		return NewHub()
	}
	h, _ := res.GetOrSetGeneric(resourceKey{}, NewHub())
	return h.(*Hub)
}

// Update is one partition's durable complete-through watermark.
type Update struct {
	Partition string
	Watermark coord.Watermark
}

type scopeFeed struct {
	// holds, when set, says whether this process still holds the lease a
	// message of a partition was emitted under (LeaseHolder).
	holds  LeaseHolder
	latest map[string]coord.Watermark
	// bases is the finality basis of each partition's latest watermark
	// (store.Checkpoint.Finality), when known.
	bases   map[string]provider.Basis
	subs    map[*Subscription]struct{}
	records map[*RecordSubscription]struct{}
}

func (h *Hub) scope(scope string) *scopeFeed {
	f := h.scopes[scope]
	if f == nil {
		f = &scopeFeed{
			latest:  map[string]coord.Watermark{},
			bases:   map[string]provider.Basis{},
			subs:    map[*Subscription]struct{}{},
			records: map[*RecordSubscription]struct{}{},
		}
		h.scopes[scope] = f
	}
	return f
}

// Publish records a durable watermark of (scope, partition).
func (h *Hub) Publish(scope, partition string, w coord.Watermark) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f := h.scope(scope)
	f.latest[partition] = w
	for s := range f.subs {
		s.dirty[partition] = w
		select {
		case s.wake <- struct{}{}:
		default: // a wake-up is pending already
		}
	}
}

// PublishFinality records the finality basis of the durable watermark of
// (scope, partition), as its checkpoint records it (the zero basis is
// ignored: unknown). Subscribers read it with Finalities; it changes no
// watermark.
func (h *Hub) PublishFinality(scope, partition string, basis provider.Basis) {
	if basis.IsZero() {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.scope(scope).bases[partition] = basis
}

// Finalities returns a copy of the finality bases published in scope.
func (h *Hub) Finalities(scope string) map[string]provider.Basis {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.scope(scope).bases)
}

// Subscription receives the watermark updates of one scope.
type Subscription struct {
	hub   *Hub
	scope string
	dirty map[string]coord.Watermark
	// wake holds one token when something was published since the last
	// receive (Wake).
	wake chan struct{}
}

// Subscribe returns a subscription whose first Drain holds every watermark
// published so far in scope.
func (h *Hub) Subscribe(scope string) *Subscription {
	h.mu.Lock()
	defer h.mu.Unlock()
	f := h.scope(scope)
	s := &Subscription{hub: h, scope: scope, dirty: maps.Clone(f.latest), wake: make(chan struct{}, 1)}
	if len(s.dirty) > 0 {
		s.wake <- struct{}{}
	}
	f.subs[s] = struct{}{}
	return s
}

// Wake returns a channel that receives when a watermark was published in
// the subscription's scope since the last receive (one token however many
// were published: Drain them). A subscriber waits on it instead of
// polling.
func (s *Subscription) Wake() <-chan struct{} { return s.wake }

// Drain returns the updates since the last Drain (latest value per
// partition, in no particular order).
func (s *Subscription) Drain() []Update {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
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

// Close stops the subscription.
func (s *Subscription) Close() {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	delete(s.hub.scope(s.scope).subs, s)
}

// LeaseHolder reports whether this process still holds, at now, the lease
// of partition it emitted a message under (owner, counter): the lease is
// the one it holds and its heartbeat is fresh (a lease period has not
// passed since the start of its last successful renewal).
type LeaseHolder func(partition, owner string, counter uint64, now time.Time) bool

// SetLeaseHolder registers the input's lease check for scope (nil: none,
// every lease counts as held). With leases on, the input registers it; the
// processors ask it before attaching a frontier (Holds).
func (h *Hub) SetLeaseHolder(scope string, holds LeaseHolder) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.scope(scope).holds = holds
}

// Holds reports whether a message of partition emitted under (owner,
// counter) is still this process's to attach a frontier to: true without
// a registered check (no leases in this process).
func (h *Hub) Holds(scope, partition, owner string, counter uint64, now time.Time) bool {
	h.mu.Lock()
	holds := h.scope(scope).holds
	h.mu.Unlock()
	return holds == nil || holds(partition, owner, counter, now)
}

// PublishRecord hands f, just written to the store by this process (a
// successful compare-and-swap), to the record subscribers of its scope.
func (h *Hub) PublishRecord(f store.Frontier) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.scope(f.Scope).records {
		if s.latest == nil || s.latest.Epoch < f.Epoch || (s.latest.Epoch == f.Epoch && s.latest.Version < f.Version) {
			c := f
			s.latest = &c
		}
	}
}

// RecordSubscription receives the newest record published in one scope.
type RecordSubscription struct {
	hub    *Hub
	scope  string
	latest *store.Frontier
}

// SubscribeRecords returns a subscription to scope's published records
// (those published after it subscribed).
func (h *Hub) SubscribeRecords(scope string) *RecordSubscription {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := &RecordSubscription{hub: h, scope: scope}
	h.scope(scope).records[s] = struct{}{}
	return s
}

// Latest returns the newest record published since the last call (nil:
// none). Its vector is shared: callers do not modify it.
func (s *RecordSubscription) Latest() *store.Frontier {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	f := s.latest
	s.latest = nil
	return f
}

// Close stops the subscription.
func (s *RecordSubscription) Close() {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	delete(s.hub.scope(s.scope).records, s)
}
