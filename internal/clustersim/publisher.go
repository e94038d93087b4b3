package clustersim

import (
	"errors"
	"fmt"
	"hash/fnv"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/frontier"
	"github.com/tidemark/tidemark/internal/publish"
	"github.com/tidemark/tidemark/internal/store"
)

// publisher is one instance's frontier publisher: the product's own
// publish.Publisher over the faulty store. A round is two steps:
// Prepare (the reads and the decision) at one step, Commit (the one
// PublishFrontier compare-and-swap) at its next, so that workers, the
// discoverer and other publishers interleave between them. A crash loses
// the publisher and what it prepared.
//
// Under MaxFrontier the prepared record's scalar is replaced by the
// greatest of its vector's watermarks (the maximum instead of the
// minimum); under PartialView the publisher's View keeps only the
// partitions its instance would hold (viewHolds), from its feed, its seed
// and the published record alike.
type publisher struct {
	s       *sim
	id      int
	pub     *publish.Publisher
	pending *publish.Prepared
}

func (p *publisher) crash() {
	p.pub, p.pending = nil, nil
}

func (p *publisher) step() string {
	if p.pub == nil {
		p.pub = publish.NewPublisher(p.s.st, p.s.scope)
		if p.s.variant == PartialView {
			p.pub.View = func(partition string) bool { return viewHolds(p.id, partition) }
		}
	}
	// The publisher's feed: the durable checkpoints of the partitions its
	// instance holds. Every partition has a holder that publishes it, so
	// each publisher observes them all; under PartialView only its half,
	// and it ignores what the other published.
	if cps, err := p.s.mem.ListCheckpoints(bg, p.s.scope); err == nil {
		for _, cp := range cps {
			p.pub.Observe(cp.Partition, cp.Watermark)
		}
	}
	if p.pending != nil {
		r := *p.pending
		p.pending = nil
		f, _, err := p.pub.Commit(bg, r)
		switch {
		case err == nil:
			p.s.stats.Published++
			if !f.Scalar.IsZero() {
				p.s.stats.ScalarsPublished++
				if f.Epoch > 1 {
					p.s.stats.ScalarsAfterChange++
				}
			}
			return "published " + describeFrontier(f)
		case errors.Is(err, store.ErrFenced):
			return fmt.Sprintf("publish fenced: %v", err)
		default:
			return fmt.Sprintf("publish failed: %v", err)
		}
	}
	r, err := p.pub.Prepare(bg)
	if err != nil {
		return fmt.Sprintf("cannot prepare: %v", err)
	}
	if p.s.variant == MaxFrontier && r.Next != nil && !r.Next.Scalar.IsZero() {
		next := *r.Next
		for _, w := range next.Vector {
			if next.Scalar.Less(w) {
				next.Scalar = w
			}
		}
		r.Next = &next
	}
	if r.Next == nil {
		return "nothing to publish: " + r.Snapshot.String()
	}
	p.pending = &r
	return "will publish " + describeFrontier(*r.Next)
}

// viewHolds reports whether the instance of publisher id holds partition
// name under PartialView: half the partitions, by a stable hash of the
// name, as if each of two instances held its own half.
func viewHolds(id int, name string) bool {
	h := fnv.New32a()
	h.Write([]byte(name))
	return h.Sum32()%2 == uint32(id%2)
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
