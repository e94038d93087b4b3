package chain

import (
	"bytes"

	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/store"
)

// Promotion coalescing. When acknowledgements run ahead of promotions (a
// promotion is in flight while later pages are delivered), the head page's
// promotion also promotes the delivered pages after it, in one conditional
// write, when each of them is exactly what the core would promote next:
//
//   - page i+1 was fetched from page i's successor at the generation after
//     it (the chain's fetch-ahead), every event of it has a terminal
//     outcome, and it is not nacked;
//   - reconcile.DecidePromotion, asked with the checkpoint page i's own
//     promotion would leave (store.Promotion.Apply), answers Promote;
//   - page i does not complete the partition, nor end it under
//     exit_when_complete.
//
// The write is the head's starting point (cursor, generation) to the last
// page's successor at generation FromGeneration+Pages, naming the last
// page's witness; each page's successor stays bound to its own witness at
// its own generation (the witnesses are durable before their events were
// emitted), so the checkpoints in between are exactly those single
// promotions would have written, only never stored. A lost compare-and-swap
// or an unknown outcome is handled as for one page: the loser re-reads the
// winner and restarts its chain from it.

// last returns the last page pg's promotion covers.
func (pg *page) last() *page {
	if n := len(pg.coalesced); n > 0 {
		return pg.coalesced[n-1]
	}
	return pg
}

// coalesce returns the pages after head (m.chain[0], its decision made)
// that its promotion can cover, deciding each.
func (m *Machine) coalesce(head *page) []*page {
	if !m.cfg.CoalescePromotions {
		return nil
	}
	virt := m.cp
	prev := head
	prom := m.storePromotion(head, head.decision, m.cp)
	var more []*page
	for i := 1; i < len(m.chain) && len(more)+1 < store.MaxPromotionPages; i++ {
		if prom.Complete || (prev.v.final && m.cfg.ExitWhenComplete) {
			break
		}
		virt = prom.Apply(virt)
		nx := m.chain[i]
		if nx.nacked || !nx.complete() || nx.fromGen != virt.Generation || !bytes.Equal(nx.fromCursor, virt.Cursor) || !m.incarnationConfirmed(nx) {
			break
		}
		nx.w.AckedThrough = len(nx.w.Events)
		d := reconcile.DecidePromotion(reconcile.PromotionInput{
			Contract:   m.cfg.Contract,
			Checkpoint: witnessCheckpoint(virt),
			Witness:    nx.w,
			Verdict:    nx.v.core,
			Witnesses:  m.prior[nx.fromGen],
		})
		if d.Action != reconcile.Promote {
			break
		}
		nx.decision = d.Promotion
		more = append(more, nx)
		prom = m.storePromotion(nx, nx.decision, virt)
		prev = nx
	}
	return more
}

// groupPromotion is the one conditional write of pg's promotion and the
// pages coalesced into it.
func (m *Machine) groupPromotion(pg *page) store.Promotion {
	if len(pg.coalesced) == 0 {
		return m.storePromotion(pg, pg.decision, m.cp)
	}
	// Walk the single promotions the group stands for; the write is their
	// composition.
	virt := m.cp
	var out store.Promotion
	for i, p := range append([]*page{pg}, pg.coalesced...) {
		sp := m.storePromotion(p, p.decision, virt)
		after := sp.Apply(virt)
		if i == 0 {
			out = sp
		} else {
			out.To, out.WitnessID, out.Complete = sp.To, sp.WitnessID, sp.Complete
			if !sp.Watermark.IsZero() {
				out.Watermark, out.Finality = sp.Watermark, sp.Finality
			}
			if sp.HasApplied {
				out.Applied, out.HasApplied, out.AppliedID = sp.Applied, true, sp.AppliedID
			}
		}
		virt = after
	}
	out.Pages = uint64(1 + len(pg.coalesced))
	return out
}

// lingers reports whether the promotion of head (decided Promote, its
// group coalesced) waits for the page behind the group
// (Config.PromoteMinPages): the group is smaller than PromoteMinPages, does
// not end the partition, and its next page is coming — in the chain, not
// nacked, fetched from the group's last successor at the next generation
// and still awaiting outcomes (or its witness, or an incarnation check), or
// being fetched by this chain from there — and PromoteLinger has not passed
// since head was first found waiting. It records the wait (m.linger,
// m.lingerUntil; settle decides again after every input and announces the
// deadline).
func (m *Machine) lingers(head *page) bool {
	if !m.cfg.CoalescePromotions || m.cfg.PromoteMinPages < 2 || m.cfg.PromoteLinger <= 0 {
		return false
	}
	n := 1 + len(head.coalesced)
	last := head.last()
	if n >= m.cfg.PromoteMinPages || m.ended(last) || last.v.final || last.w.Sealed || len(last.w.Successor) == 0 {
		return false
	}
	gen := last.fromGen + 1
	var coming bool
	if n < len(m.chain) {
		nx := m.chain[n]
		coming = !nx.nacked && !nx.complete() && nx.fromGen == gen && bytes.Equal(nx.fromCursor, last.w.Successor)
	} else if f := m.fetch; f != nil {
		coming = f.chain == m.chainID && f.gen == gen && bytes.Equal(f.cursor, last.w.Successor)
	}
	if !coming {
		return false
	}
	if m.linger != head {
		m.linger, m.lingerUntil = head, m.now.Add(m.cfg.PromoteLinger)
	}
	return m.now.Before(m.lingerUntil)
}
