package publish

import (
	"context"
	"errors"
	"fmt"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/frontier"
	"github.com/tidemark/tidemark/internal/frontierrec"
	"github.com/tidemark/tidemark/internal/store"
)

// Publisher keeps a scope's published frontier record up to date, following
// change rather than re-reading every checkpoint (docs/design.md#publishing).
// A round is two steps, Prepare (the reads and the decision) and Commit
// (the one publication), so that a simulation can interleave other steps
// between them; Round does both.
//
// What a publisher knows, all durable:
//   - its own process's successful promotions, handed to Observe (the
//     in-process feed): the holder of a partition publishes it;
//   - the published record, read incrementally (store.FrontierCache: the
//     root every round, only the shards whose version changed), which
//     carries what the other instances published;
//   - every checkpoint of the scope, read once (ListCheckpoints) when the
//     publisher starts and when the membership epoch changes, so partitions
//     nobody holds (complete, unleased) and a record written before shards
//     count from the start.
//
// The membership is read the same way (store.MembershipCache: the epoch
// every round, the record only when it changed). So an idle round costs
// two small reads, whatever the number of partitions. A publisher whose
// reads are behind the record publishes nothing (frontier.NextPublication)
// or loses the compare-and-swap, so the record's scalar and vector entries
// never go down within an epoch.
type Publisher struct {
	st    store.ScopeProgress
	scope string

	// View, when set, keeps only the partitions it accepts from what a
	// round reads (the checkpoints of the seed and the published record's
	// entries). The product never sets it: the simulator's broken variant
	// "partial view" uses it to publish from one instance's partitions
	// only, ignoring what the others published.
	View func(partition string) bool

	members *store.MembershipCache
	cache   *store.FrontierCache
	tracker *frontier.Tracker
	m       store.Membership
}

// NewPublisher returns a publisher of scope's frontier.
func NewPublisher(st store.ScopeProgress, scope string) *Publisher {
	return &Publisher{st: st, scope: scope, members: store.NewMembershipCache(st, scope)}
}

// Prepared is the outcome of Prepare.
type Prepared struct {
	// Membership is the record the round computed the frontier for;
	// EpochChanged is set when it is newer than the previous round's.
	Membership   store.Membership
	EpochChanged bool
	// RecordChanged is set when the published record read differs from
	// the one the previous round read (another instance, or this one,
	// published since).
	RecordChanged bool
	// Snapshot is the frontier the publisher knows.
	Snapshot frontier.Snapshot
	// Next is the record to write, nil when nothing is to be published.
	Next *store.Frontier
	prev store.Frontier
}

// Observe applies a durable watermark of this process (the in-process feed
// of its successful promotions and of the checkpoints it loaded). One
// observed before the first Prepare is covered by that Prepare's read of
// every checkpoint.
func (p *Publisher) Observe(partition string, w coord.Watermark) {
	if p.tracker != nil && p.viewed(partition) {
		_, _ = p.tracker.Apply(partition, w) // non-members are refused by the tracker
	}
}

func (p *Publisher) viewed(partition string) bool { return p.View == nil || p.View(partition) }

// Epoch returns the epoch of the last round's membership (0 before any).
func (p *Publisher) Epoch() uint64 { return p.m.Epoch }

// Prepare reads and decides.
func (p *Publisher) Prepare(ctx context.Context) (Prepared, error) {
	m, err := p.members.Load(ctx)
	if err != nil {
		return Prepared{}, fmt.Errorf("reading the membership: %w", err)
	}
	var out Prepared
	if p.cache == nil {
		p.cache = store.NewFrontierCache(p.st, p.scope)
		if p.View != nil {
			p.cache.Filter = p.View
		}
	}
	if p.tracker == nil || m.Epoch != p.tracker.Epoch() {
		t, err := frontier.NewTrackerFor(frontierrec.Membership(m))
		if err != nil {
			return Prepared{}, fmt.Errorf("epoch %d cannot be tracked: %w", m.Epoch, err)
		}
		// The seed: every checkpoint, once per epoch.
		cps, err := p.st.ListCheckpoints(ctx, p.scope)
		if err != nil {
			return Prepared{}, fmt.Errorf("reading the checkpoints: %w", err)
		}
		for _, cp := range cps {
			if p.viewed(cp.Partition) {
				_, _ = t.Apply(cp.Partition, cp.Watermark)
			}
		}
		out.EpochChanged = p.tracker != nil
		p.tracker = t
		p.cache.Reset() // the next refresh reads every shard
	}
	p.m = m
	out.Membership = m
	f, changed, err := p.cache.Refresh(ctx)
	switch {
	case store.IsNotPublished(err):
		f, changed = store.Frontier{}, false
	case err != nil:
		return out, fmt.Errorf("reading the published record: %w", err)
	}
	out.RecordChanged = changed
	if changed && f.Epoch == m.Epoch {
		for part, w := range f.Vector {
			_, _ = p.tracker.Apply(part, w)
		}
	}
	out.Snapshot = p.tracker.Frontier()
	out.prev = f
	// The snapshot in the form the store keeps it (held-by list capped):
	// compared as computed, a list longer than the cap would differ from
	// the stored record in every round, and every instance would write it
	// again every round.
	stored := frontierrec.Snapshot(frontierrec.Record(p.scope, out.Snapshot))
	if pub, ok := frontier.NextPublication(frontierrec.Snapshot(f), stored); ok {
		next := frontierrec.Record(p.scope, pub)
		out.Next = &next
	}
	return out, nil
}

// Commit writes r.Next (when set) conditional on the record Prepare read.
// It returns the stored record and whether the scalar advanced. A lost
// compare-and-swap (store.ErrFenced) or a failed write leaves nothing to
// undo: the next Prepare reads the record again.
func (p *Publisher) Commit(ctx context.Context, r Prepared) (store.Frontier, bool, error) {
	if r.Next == nil {
		return r.prev, false, nil
	}
	f, err := p.st.PublishFrontier(ctx, r.prev, *r.Next)
	if err != nil {
		if !errors.Is(err, store.ErrFenced) && p.cache != nil {
			p.cache.Reset()
		}
		return store.Frontier{}, false, err
	}
	return f, frontier.ScalarAdvanced(frontierrec.Snapshot(r.prev), frontierrec.Snapshot(f)), nil
}

// Round is Prepare then Commit.
func (p *Publisher) Round(ctx context.Context) (Prepared, store.Frontier, bool, error) {
	r, err := p.Prepare(ctx)
	if err != nil {
		return r, store.Frontier{}, false, err
	}
	f, adv, err := p.Commit(ctx, r)
	return r, f, adv, err
}
