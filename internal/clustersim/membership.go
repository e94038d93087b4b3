package clustersim

import (
	"fmt"
	"slices"

	"github.com/tidemark/tidemark/internal/frontier"
	"github.com/tidemark/tidemark/internal/frontierrec"
	"github.com/tidemark/tidemark/internal/membership"
	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/store"
)

// coordinator is an operator changing the membership by hand with
// explicit proofs (the ops "add" and "remove", in schedules without
// discovery): read the record and the published frontier, plan the change
// with frontier.PlanChange, write it with one SwapMembership
// compare-and-swap on the epoch. Planning and writing are two steps, so a
// publisher can move the frontier in between. It offers proofs the
// discoverer never does (coverage from a position, none at all), which is
// why it is kept beside it; it keeps the recorded lineage of the
// partitions that stay.
//
// Its proofs are honest: every lane reads a partition from its start, so
// "replay" is true; "covered" offers the first position the partition can
// hold; "seal" is offered only when the provider sealed the partition and
// its durable watermark reached the seal.
type coordinator struct {
	s         *sim
	planned   *store.Membership
	prevEpoch uint64
}

func (c *coordinator) step(op Op) string {
	s := c.s
	if c.planned != nil {
		next := *c.planned
		c.planned = nil
		m, err := s.st.SwapMembership(bg, c.prevEpoch, next)
		if err != nil {
			return fmt.Sprintf("swap membership to epoch %d: %v", next.Epoch, err)
		}
		s.stats.Epochs++
		if !m.Proven {
			s.stats.UnprovenEpochs++
		}
		return "membership " + describeMembership(m)
	}
	p := s.part(op.P)
	if p == nil || !p.appeared {
		return "no such partition"
	}
	cur, err := s.st.LoadMembership(bg, s.scope)
	if err != nil {
		return fmt.Sprintf("cannot read membership: %v", err)
	}
	published := cur.Cutover
	if f, err := s.st.LoadFrontier(bg, s.scope); err == nil && f.Epoch == cur.Epoch && !f.Scalar.IsZero() {
		published = f.Scalar
	}
	member := slices.Contains(cur.Partitions, p.name)
	pending := slices.Contains(cur.Unproven, p.name)
	var adds []frontier.AddProof
	var removes []frontier.RemoveProof
	switch op.Kind {
	case OpAdd:
		if (member && !pending) || (!member && s.everMember[p.name]) {
			return "nothing to add"
		}
		a := frontier.AddProof{Partition: p.name}
		switch op.Proof {
		case "replay":
			a.Replayed = true
		case "covered":
			a.CoveredFrom = p.wm(p.created)
		}
		adds = append(adds, a)
	case OpRemove:
		if (!member && !pending) || (member && len(cur.Partitions) == 1) {
			return "nothing to remove"
		}
		r := frontier.RemoveProof{Partition: p.name}
		if op.Proof == "seal" {
			// The operator offers a seal only when the provider sealed the
			// partition and its durable watermark reached the seal.
			// The watermark must be the sealed source's: a checkpoint
			// left by an earlier incarnation (its worker stopped before
			// the source was recreated and sealed) proves nothing of it.
			cp, err := s.st.LoadCheckpoint(bg, store.Key{Scope: s.scope, Partition: p.name})
			stale := cp.Incarnation != reconcile.IncarnationHash(p.incarnationValue())
			if n, ok := p.ord(cp.Watermark); err != nil || !p.sealed || stale || !ok || n < p.final {
				return "no proof of sealing yet"
			}
			r.Sealed, r.SealedThrough = true, cp.Watermark
		}
		removes = append(removes, r)
	}
	next := frontier.PlanChange(frontierrec.Membership(cur), published, adds, removes)
	var lineage map[string][]string
	for _, name := range next.Partitions {
		if ps := cur.Parents[name]; len(ps) > 0 {
			if lineage == nil {
				lineage = map[string][]string{}
			}
			lineage[name] = slices.Clone(ps)
		}
	}
	c.planned = &store.Membership{
		Scope: s.scope, Epoch: next.Epoch, Partitions: next.Partitions, Cutover: next.Cutover,
		Proven: next.Proven, Reason: next.Reason, Unproven: next.Unproven, Parents: lineage,
	}
	c.prevEpoch = cur.Epoch
	return "planned " + describeMembership(*c.planned)
}

// discoverer is the input's discovery (schedules with discovery): it reads
// the provider's partition list with its lineage (listing) and the store,
// decides the change with the product's membership.Read and
// membership.Decide (FreshFromStart: every lane reads a partition from its
// start), and writes the plan with SwapMembership at its next step, so that
// publishers, workers and faults interleave between the decision and the
// compare-and-swap. A write that lost the race (another epoch was written
// in between) is fenced; the next round decides again.
type discoverer struct {
	s    *sim
	plan *membership.Plan
	prev uint64
}

func (d *discoverer) step() string {
	s := d.s
	if d.plan != nil {
		plan := *d.plan
		d.plan = nil
		m, err := s.st.SwapMembership(bg, d.prev, plan.Next)
		if err != nil {
			return fmt.Sprintf("swap membership to epoch %d: %v", plan.Next.Epoch, err)
		}
		s.stats.Epochs++
		s.stats.DiscoveryEpochs++
		if !m.Proven {
			s.stats.UnprovenEpochs++
		}
		for _, name := range plan.Sealed {
			if p := s.part(name); p != nil && p.split {
				s.stats.ParentsRetired++
			}
		}
		return "membership " + describeMembership(m) + " (" + plan.String() + ")"
	}
	in, err := membership.Read(bg, s.st, s.scope, s.listing(), true)
	if err != nil {
		return fmt.Sprintf("discovery cannot read: %v", err)
	}
	plan := membership.Decide(in)
	if !plan.Changed {
		return "discovery: no change"
	}
	d.plan, d.prev = &plan, in.Current.Epoch
	return "planned " + plan.String()
}

// listing is the provider's partition list: every partition that exists,
// split ones too (closed shards stay listed), with its parents.
func (s *sim) listing() []membership.Member {
	var out []membership.Member
	for _, p := range s.parts {
		if p.appeared {
			out = append(out, membership.Member{Name: p.name, Parents: slices.Clone(p.parents)})
		}
	}
	return out
}

func describeMembership(m store.Membership) string {
	s := fmt.Sprintf("epoch %d %v cutover %s", m.Epoch, m.Partitions, m.Cutover)
	if !m.Proven {
		s += fmt.Sprintf(" UNPROVEN %v", m.Unproven)
	}
	if len(m.Parents) > 0 {
		s += fmt.Sprintf(" lineage %v", m.Parents)
	}
	return s
}
