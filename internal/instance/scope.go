package instance

// What the instance decides about its scope beside its workers: when the
// membership is read and discovery runs (and what a read leads to), the
// lineage gate (a child starts once its parents are complete), and when a
// partition's witnesses are deleted.

import (
	"slices"
	"time"

	"github.com/tidemark/tidemark/internal/chain"
	"github.com/tidemark/tidemark/internal/membership"
	"github.com/tidemark/tidemark/internal/store"
)

// ---------------------------------------------------------------------------
// Membership reads and discovery.

// tickMembership asks for the due membership call, one at a time:
// discovery at its interval first, else the periodic read.
func (m *Machine) tickMembership() {
	if m.memBusy {
		return
	}
	switch {
	case m.cfg.Discover && m.cfg.DiscoveryInterval > 0 && !m.now.Before(m.nextDiscover):
		m.nextDiscover = m.now.Add(m.cfg.DiscoveryInterval)
		m.discover("discovery_interval")
	case m.cfg.MembershipCheck > 0 && !m.now.Before(m.nextCheck):
		m.nextCheck = m.now.Add(m.cfg.MembershipCheck)
		m.memBusy = true
		m.emit(ReadMembership{})
	}
}

func (m *Machine) discover(why string) {
	m.memBusy = true
	m.emit(Discover{Why: why})
}

// membershipRead: an operator's request (the counter moved since it was
// last read) runs discovery; otherwise a newer epoch is adopted, and a
// source incarnation awaiting its proof runs discovery too (so the scalar
// comes back as soon as the proof arrives). The first read only learns the
// counter.
func (m *Machine) membershipRead(in MembershipRead) {
	m.memBusy = false
	first := !m.memRead
	m.memRead = true
	if in.Err != nil && !in.RequestsRead {
		return
	}
	if in.RequestsRead {
		if m.cfg.Discover && m.requestsKnown && in.Requests > m.requests {
			m.requests = in.Requests
			m.discover("requested")
			return
		}
		m.requests, m.requestsKnown = max(m.requests, in.Requests), true
	}
	if in.Err != nil {
		return
	}
	m.adopt(in.Membership, "read from the store", in.Record)
	if in.Incarnations && !first {
		m.discover("incarnation proof")
	}
}

// ---------------------------------------------------------------------------
// Lineage.

// gate is a partition that starts (under lease, with leases) once its
// parents are complete.
type gate struct {
	lease   store.Lease
	reading bool      // ReadParents in flight
	next    time.Time // when its parents are read again
	waiting []string  // the parents it was last seen waiting for
}

// parentsPoll is how often a waiting partition's parents are read.
func (m *Machine) parentsPoll() time.Duration {
	if m.cfg.ParentsPoll > 0 {
		return m.cfg.ParentsPoll
	}
	return time.Second
}

func (m *Machine) readParents(part string, g *gate) {
	g.reading = true
	m.emit(ReadParents{Partition: part, Parents: slices.Clone(m.members.Parents[part])})
}

// parentsRead starts the partition once every parent that is still a
// member is complete (membership.Waiting), else reads them again after
// ParentsPoll; a change in what it waits for is told (LineageWait).
func (m *Machine) parentsRead(in ParentsRead) {
	g := m.gated[in.Partition]
	if g == nil || !g.reading {
		return
	}
	g.reading = false
	if in.Err != nil {
		g.next = m.now.Add(m.parentsPoll())
		return
	}
	rec := store.Membership{Epoch: m.members.Epoch, Partitions: m.members.Partitions, Parents: m.members.Parents}
	wait := membership.Waiting(rec, in.Partition, in.Checkpoints)
	if len(wait) > 0 {
		if !slices.Equal(wait, g.waiting) {
			g.waiting = wait
			m.emit(LineageWait{Partition: in.Partition, Waiting: slices.Clone(wait)})
		}
		g.next = m.now.Add(m.parentsPoll())
		return
	}
	delete(m.gated, in.Partition)
	if g.waiting != nil {
		m.emit(LineageWait{Partition: in.Partition})
	}
	m.workers[in.Partition] = g.lease
	m.emit(StartWorker{Partition: in.Partition, Lease: g.lease, Epoch: m.members.Epoch})
}

// ---------------------------------------------------------------------------
// Pruning.

// prune: a durable checkpoint of part at generation gen; every PruneEvery
// generations the witnesses below are deleted, one deletion of a
// partition at a time (chain.Pruning). None starts once the instance
// decided to exit or shuts down.
func (m *Machine) prune(part string, gen uint64) {
	if m.cfg.PruneEvery == 0 || part == "" || m.held != nil || m.shutdown || !m.started {
		return
	}
	st := m.prunes[part]
	if st == nil {
		st = &chain.Pruning{Every: m.cfg.PruneEvery}
		m.prunes[part] = st
	}
	if below, due := st.Due(gen); due {
		m.pruning++
		m.emit(Prune{Partition: part, Below: below})
	}
}

// pruned: a deletion ended; checkpoints that became durable meanwhile may
// make the next one due at once (also while an exit waits for it). An
// exit held for the deletions goes on after the last.
func (m *Machine) pruned(in Pruned) {
	st := m.prunes[in.Partition]
	if st == nil || m.pruning == 0 {
		return
	}
	m.pruning--
	if next, again := st.Done(in.Below, in.Err); again && !m.shutdown {
		m.pruning++
		m.emit(Prune{Partition: in.Partition, Below: next})
	}
	if m.held != nil && m.pruning == 0 {
		m.finish(*m.held)
	}
}
