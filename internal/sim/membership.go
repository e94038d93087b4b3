package sim

import (
	"fmt"
	"slices"

	"github.com/tidemark/tidemark/internal/frontier"
	"github.com/tidemark/tidemark/internal/store"
)

// coordinator changes the membership the way input/membership.go's
// ensureMembership does: read the record and the published frontier, plan
// the change with frontier.PlanChange and its proofs, write it with one
// SwapMembership compare-and-swap on the epoch. Planning and writing are
// two steps, so a publisher can move the frontier in between.
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
			cp, err := s.st.LoadCheckpoint(bg, store.Key{Scope: s.scope, Partition: p.name})
			if n, ok := p.ord(cp.Watermark); err != nil || !p.sealed || !ok || n < p.final {
				return "no proof of sealing yet"
			}
			r.Sealed, r.SealedThrough = true, cp.Watermark
		}
		removes = append(removes, r)
	}
	next := frontier.PlanChange(cur.FrontierMembership(), published, adds, removes)
	c.planned = &store.Membership{
		Scope: s.scope, Epoch: next.Epoch, Partitions: next.Partitions, Cutover: next.Cutover,
		Proven: next.Proven, Reason: next.Reason, Unproven: next.Unproven,
	}
	c.prevEpoch = cur.Epoch
	return "planned " + describeMembership(*c.planned)
}

func describeMembership(m store.Membership) string {
	s := fmt.Sprintf("epoch %d %v cutover %s", m.Epoch, m.Partitions, m.Cutover)
	if !m.Proven {
		s += fmt.Sprintf(" UNPROVEN %v", m.Unproven)
	}
	return s
}
