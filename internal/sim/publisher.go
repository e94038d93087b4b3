package sim

import (
	"errors"
	"fmt"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/frontier"
	"github.com/tidemark/tidemark/internal/store"
)

// publisher keeps the published frontier record up to date the way
// input/membership.go's publishFrontier does: a frontier.Tracker fed with
// durable checkpoints, frontier.NextPublication against the last published
// record, one PublishFrontier compare-and-swap, a re-read after losing it.
// Unlike the input, which fixes its membership at Connect, it re-reads the
// membership record every round and starts a new tracker when the epoch
// changed. A round is two steps: the reads, then the write.
type publisher struct {
	s       *sim
	id      int
	tracker *frontier.Tracker
	prev    store.Frontier
	loaded  bool
	pending *store.Frontier
}

func (p *publisher) crash() {
	*p = publisher{s: p.s, id: p.id}
}

func (p *publisher) step() string {
	if p.pending != nil {
		next := *p.pending
		p.pending = nil
		f, err := p.s.st.PublishFrontier(bg, p.prev, next)
		switch {
		case err == nil:
			p.prev = f
			p.s.stats.Published++
			if !f.Scalar.IsZero() {
				p.s.stats.ScalarsPublished++
				if f.Epoch > 1 {
					p.s.stats.ScalarsAfterChange++
				}
			}
			return "published " + describeFrontier(f)
		case errors.Is(err, store.ErrFenced):
			p.loaded = false
			return fmt.Sprintf("publish fenced: %v", err)
		default:
			p.loaded = false
			return fmt.Sprintf("publish failed: %v", err)
		}
	}
	m, err := p.s.st.LoadMembership(bg, p.s.scope)
	if err != nil {
		return fmt.Sprintf("cannot read membership: %v", err)
	}
	if p.tracker == nil || p.tracker.Epoch() != m.Epoch {
		t, err := frontier.NewTrackerFor(m.FrontierMembership())
		if err != nil {
			return fmt.Sprintf("tracker for epoch %d: %v", m.Epoch, err)
		}
		p.tracker = t
	}
	cps, err := p.s.st.ListCheckpoints(bg, p.s.scope)
	if err != nil {
		return fmt.Sprintf("cannot list checkpoints: %v", err)
	}
	for _, cp := range cps {
		_, _ = p.tracker.Apply(cp.Partition, cp.Watermark)
	}
	if !p.loaded {
		f, err := p.s.st.LoadFrontier(bg, p.s.scope)
		if err != nil && !errors.Is(err, store.ErrNoCheckpoint) {
			return fmt.Sprintf("cannot read the published frontier: %v", err)
		}
		p.prev, p.loaded = f, true
	}
	snap := p.tracker.Frontier()
	if p.s.variant == MaxFrontier && snap.Proven {
		for _, w := range snap.Vector {
			if snap.Scalar.Less(w) {
				snap.Scalar = w
			}
		}
	}
	pub, ok := frontier.NextPublication(p.prev.Snapshot(), snap)
	if !ok {
		return "nothing to publish: " + snap.String()
	}
	next := store.FrontierRecord(p.s.scope, pub)
	p.pending = &next
	return "will publish " + describeFrontier(next)
}

func describeFrontier(f store.Frontier) string {
	s := fmt.Sprintf("epoch %d", f.Epoch)
	if f.Scalar.IsZero() {
		s += " scalar withheld"
	} else {
		s += " scalar " + f.Scalar.String()
	}
	return s + " vector " + describeVector(f.Vector)
}

func describeVector(v map[string]coord.Watermark) string {
	snap := frontier.Snapshot{Vector: v}
	s := snap.String()
	// Snapshot.String starts with "epoch 0 frontier withheld vector".
	const head = "epoch 0 frontier withheld vector"
	if len(s) >= len(head) {
		return "{" + s[len(head):] + " }"
	}
	return s
}
