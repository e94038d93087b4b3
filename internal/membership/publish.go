package membership

import (
	"context"
	"errors"
	"fmt"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/frontier"
	"github.com/tidemark/tidemark/internal/store"
)

// Publisher keeps a scope's published frontier record up to date from
// durable state. A round is two steps, Prepare (the reads and the
// decision) and Commit (the one compare-and-swap), so that a simulation can
// interleave other steps between them; Round does both.
//
// Prepare reads the membership record (a newer epoch, changed by an
// operator or another instance, starts a new tracker), every checkpoint of
// the scope, and, when the last write was lost or failed, the published
// record. A publisher whose reads are behind the record publishes nothing
// (frontier.NextPublication), so the record's scalar and vector entries
// never go down within an epoch.
type Publisher struct {
	st    store.Store
	scope string

	// View, when set, filters the checkpoints a round reads. The product
	// never sets it: the simulator's broken variant "partial view" uses it
	// to publish from one instance's partitions only.
	View func([]store.Checkpoint) []store.Checkpoint

	tracker *frontier.Tracker
	m       store.Membership
	prev    store.Frontier
	loaded  bool
}

// NewPublisher returns a publisher of scope's frontier.
func NewPublisher(st store.Store, scope string) *Publisher {
	return &Publisher{st: st, scope: scope}
}

// Prepared is the outcome of Prepare.
type Prepared struct {
	// Membership is the record the round computed the frontier for;
	// EpochChanged is set when it is newer than the previous round's.
	Membership   store.Membership
	EpochChanged bool
	// Snapshot is the frontier computed from the checkpoints.
	Snapshot frontier.Snapshot
	// Next is the record to write, nil when nothing is to be published.
	Next *store.Frontier
	prev store.Frontier
}

// Observe applies a durable watermark seen between rounds (the in-process
// feed of this process's promotions); the next Prepare reads every
// checkpoint anyway.
func (p *Publisher) Observe(partition string, w coord.Watermark) {
	if p.tracker != nil {
		_, _ = p.tracker.Apply(partition, w)
	}
}

// Epoch returns the epoch of the last round's membership (0 before any).
func (p *Publisher) Epoch() uint64 { return p.m.Epoch }

// Prepare reads and decides.
func (p *Publisher) Prepare(ctx context.Context) (Prepared, error) {
	m, err := p.st.LoadMembership(ctx, p.scope)
	if err != nil {
		return Prepared{}, fmt.Errorf("reading the membership: %w", err)
	}
	var out Prepared
	if p.tracker == nil || m.Epoch != p.tracker.Epoch() {
		t, err := frontier.NewTrackerFor(m.FrontierMembership())
		if err != nil {
			return Prepared{}, fmt.Errorf("epoch %d cannot be tracked: %w", m.Epoch, err)
		}
		out.EpochChanged = p.tracker != nil
		p.tracker, p.loaded = t, false
	}
	p.m = m
	out.Membership = m
	cps, err := p.st.ListCheckpoints(ctx, p.scope)
	if err != nil {
		return out, fmt.Errorf("reading the checkpoints: %w", err)
	}
	if p.View != nil {
		cps = p.View(cps)
	}
	for _, cp := range cps {
		_, _ = p.tracker.Apply(cp.Partition, cp.Watermark) // non-members are refused by the tracker
	}
	if !p.loaded {
		f, err := p.st.LoadFrontier(ctx, p.scope)
		if err != nil && !errors.Is(err, store.ErrNoCheckpoint) {
			return out, fmt.Errorf("reading the published record: %w", err)
		}
		p.prev, p.loaded = f, true
	}
	out.Snapshot = p.tracker.Frontier()
	out.prev = p.prev
	if pub, ok := frontier.NextPublication(p.prev.Snapshot(), out.Snapshot); ok {
		next := store.FrontierRecord(p.scope, pub)
		out.Next = &next
	}
	return out, nil
}

// Commit writes r.Next (when set) conditional on the record Prepare read.
// It returns the stored record and whether the scalar advanced. A lost
// compare-and-swap (store.ErrFenced) or a failed write makes the next
// Prepare re-read the record.
func (p *Publisher) Commit(ctx context.Context, r Prepared) (store.Frontier, bool, error) {
	if r.Next == nil {
		return r.prev, false, nil
	}
	f, err := p.st.PublishFrontier(ctx, r.prev, *r.Next)
	if err != nil {
		p.loaded = false
		return store.Frontier{}, false, err
	}
	p.prev = f
	return f, frontier.ScalarAdvanced(r.prev.Snapshot(), f.Snapshot()), nil
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
