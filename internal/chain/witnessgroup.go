package chain

import (
	"bytes"
	"errors"
	"fmt"

	"time"

	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/store"
)

// Group commit of witnesses (docs/design.md#write-units-per-page). With
// Config.WitnessGroupPages of 2 or more, a fresh page's witness waits,
// while the page behind it is coming (being fetched by this chain from its
// successor at the next generation), to be made durable together with the
// witnesses of the pages that come meanwhile, by one PutWitnesses: at
// most WitnessGroupPages witnesses (and store.MaxWitnessGroup), at most
// PromoteLinger from when the first was ready, and only while the group is
// small (maxGroupWaitBytes). Nothing of a waiting page is emitted and
// nothing of it is promoted (page.complete is false until its witness is
// durable): witness first holds for every page of the group. A crash, a
// stop or the end of the chain before the write drops the waiting pages
// unemitted (their retry is a first response); after it every witness of
// the group is durable exactly as if written alone, and the pages are
// emitted in chain order. A page behind the group that does not join it
// (no witness to write, or too large to group) is handled once the group
// is durable, after it.

// maxGroupWaitBytes bounds what a waiting group holds (store.WitnessSize of
// its witnesses): a group this large is written without waiting, and a
// page this large is written alone. Eight such pages stay under
// store.MaxRecordBytes.
const maxGroupWaitBytes = 32 << 10

// groupWitness makes pg's witness durable, then emits pg: at once and alone
// (the behaviour without groups), or with the pages behind it.
func (m *Machine) groupWitness(pg *page) {
	size := store.WitnessSize(pg.w)
	if len(m.wgroup) > 0 && m.wgroupBytes+size <= store.MaxRecordBytes && len(m.wgroup) < store.MaxWitnessGroup {
		pg.unwitnessed = true
		m.wgroup = append(m.wgroup, pg)
		m.wgroupBytes += size
		if !m.groupWaits() {
			m.flushWitnesses(nil)
		}
		return
	}
	if len(m.wgroup) > 0 {
		m.flushWitnesses(pg)
		return
	}
	if m.cfg.WitnessGroupPages < 2 || m.cfg.PromoteLinger <= 0 || size > maxGroupWaitBytes {
		m.putWitness(pg.w, &next{kind: doEmitWitnessed, pg: pg})
		return
	}
	pg.unwitnessed = true
	m.wgroup, m.wgroupBytes, m.wgroupUntil = []*page{pg}, size, m.now.Add(m.cfg.PromoteLinger)
	if !m.groupWaits() {
		m.flushWitnesses(nil)
	}
}

// groupWaits reports whether the waiting group may wait longer for the
// page behind its last: it is smaller than WitnessGroupPages (and
// store.MaxWitnessGroup, and maxGroupWaitBytes), that page is being
// fetched by this chain from the last page's successor at the next
// generation, and PromoteLinger has not passed since the first page was
// ready.
func (m *Machine) groupWaits() bool {
	n := len(m.wgroup)
	if n == 0 || n >= m.cfg.WitnessGroupPages || n >= store.MaxWitnessGroup || m.wgroupBytes > maxGroupWaitBytes {
		return false
	}
	last := m.wgroup[n-1]
	f := m.fetch
	coming := f != nil && f.chain == m.chainID && f.chain == last.chain && f.gen == last.fromGen+1 && bytes.Equal(f.cursor, last.w.Successor)
	return coming && m.now.Before(m.wgroupUntil)
}

// flushWitnesses writes the waiting group in one write; trailing, when
// not nil, is the page behind it that did not join, handled after it.
func (m *Machine) flushWitnesses(trailing *page) {
	pages := m.wgroup
	m.wgroup, m.wgroupBytes, m.wgroupUntil = nil, 0, time.Time{}
	ws := make([]reconcile.Witness, len(pages))
	for i, pg := range pages {
		ws[i] = pg.w
	}
	m.askWitnesses(ws, pages, trailing)
}

// askWitnesses asks for the write of ws, the witnesses of pages: a group
// of one is an ordinary PutWitness.
func (m *Machine) askWitnesses(ws []reconcile.Witness, pages []*page, trailing *page) {
	var a Action = PutWitnesses{Witnesses: ws}
	if len(ws) == 1 {
		a = PutWitness{Witness: ws[0]}
	}
	m.ask(StateWitnessing, a, next{kind: onWitnessesStored, pages: pages, pg: trailing})
}

// onWitnessesStored goes on once a group write is answered: on success
// every page of the group is emitted in chain order (after one incarnation
// check when one is due), then the trailing page is handled; a store error
// writes the same group again after StoreBackoff, nothing emitted; a
// witness the store cannot hold parks the partition.
func (m *Machine) onWitnessesStored(pages []*page, trailing *page, r WitnessStored) {
	switch {
	case r.Err == nil:
	case errors.Is(r.Err, store.ErrInvalid):
		m.park(ParkReason{ParkUnstorableWitness, fmt.Sprintf("of a group of %d from generation %d (attempt %s): %v", len(pages), pages[0].w.Generation, pages[0].w.AttemptID, r.Err)})
		return
	default:
		m.logf(Warn, "Partition %s cannot record the witnesses of generations %d to %d, not emitting: %v", m.part(), pages[0].w.Generation, pages[len(pages)-1].w.Generation, r.Err)
		m.wait(StateWitnessing, m.cfg.StoreBackoff, next{kind: doPutWitnesses, pages: pages, pg: trailing})
		return
	}
	// Pages emitted before these may still wait for an incarnation check:
	// these follow them (chain order).
	check := m.anyUnchecked()
	for _, pg := range pages {
		pg.unwitnessed = false
		m.rememberWitness(pg.w)
	}
	for _, pg := range pages {
		if check || m.needsCheck(pg) {
			pg.unchecked, check = true, true
			continue
		}
		m.emitPage(pg)
	}
	switch {
	case trailing != nil:
		m.witnessOrEmit(trailing)
	case check:
		m.confirmEmission()
	default:
		m.promoteHead()
	}
}

// retryWitnesses writes the group pages again after a store error.
func (m *Machine) retryWitnesses(pages []*page, trailing *page) {
	ws := make([]reconcile.Witness, len(pages))
	for i, pg := range pages {
		ws[i] = pg.w
	}
	m.askWitnesses(ws, pages, trailing)
}

// dropWitnessGroup forgets the waiting group (its chain ended: nothing of
// it was emitted).
func (m *Machine) dropWitnessGroup() {
	m.wgroup, m.wgroupBytes, m.wgroupUntil = nil, 0, time.Time{}
}

// witnessOrEmit goes on with a reconciled page pg (its verdict v): a
// fresh response's witness is made durable first (alone or in a group),
// then its events are emitted; a page without a witness to write (an
// exact replay) is emitted, after the waiting group when there is one.
func (m *Machine) witnessOrEmit(pg *page) {
	// Witness first: durable before any event attributed to it leaves the
	// input. An empty response that cannot be promoted carries no event and
	// no successor we may use, so it is not recorded.
	if pg.v.fresh && (len(pg.w.Events) > 0 || pg.v.promotable) {
		m.groupWitness(pg)
		return
	}
	if len(m.wgroup) > 0 {
		m.flushWitnesses(pg)
		return
	}
	m.emitChecked(pg)
}
