package chain

import (
	"fmt"
	"time"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/sdkcoord"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/provider"
)

// Re-read windows (docs/design.md#re-read-windows). A source whose
// positions are assigned out of visibility order (a database sequence
// whose transactions commit out of order, client-chosen ids, events made
// visible late) can show an event below the partition's applied boundary
// after the chain has passed it. Under Contract.RereadWindow w, each time
// the chain reaches its head (at most every RereadInterval) the machine
// starts a pass: one restart promotion to the provider's restart cursor
// built from the window's start, which records the pass (the range's
// exclusive start From and the applied boundary Mark it started at, on
// the checkpoint: store.RereadState). The chain then walks from there as
// it always does; events a durable receipt shows delivered are not
// emitted again, the others are (late arrivals), and every delivered
// page's receipts are written before its promotion.
//
// Pass k re-reads (Mark_{k-1} - w, Mark_k]. An event at position p whose
// source makes it visible before any event at p + w or above (the bound
// finality lag declares) is delivered by the first pass whose Mark is at
// least p + w, if the chain missed it: that Mark was visible, so p was,
// when the pass started, and Mark_{k-1} < p + w puts p in its range. So
// once pass k+1 starts (pass k reached the head), every event at or below
// Mark_k - w is delivered: that is the watermark the pass's promotion
// writes under finality lag. Receipts at or below the new range's start
// are never matched again and are pruned.

// rkey is what a receipt matches: an event's id hash at its position,
// with its payload digest (a rewritten object keeps its listing time to
// the second, and only its ETag tells: it is delivered again, an update).
type rkey struct {
	id     uint64
	pos    coord.Position
	digest uint64
}

// rereadState is the machine's view of the window: the receipts above
// the current range's start, loaded when a chain starts.
type rereadState struct {
	loaded bool
	from   coord.Position
	has    bool
	set    map[rkey]struct{}
	// next is the earliest time the next pass may start (RereadInterval
	// after the last one started in this process).
	next time.Time
	// said: the machine has logged why it cannot re-read.
	said bool
	// atHead: the poll scheduled is a poll of the head (pollLater), which
	// a due pass replaces; not a back-off after a failed fetch.
	atHead bool
	// reached: since the current pass started (in this process), the
	// chain delivered a page reaching the pass's mark, or held a page
	// without successor (a listing's last page): the pass read its whole
	// range. Only then does the next pass start and write the watermark
	// this one proves; otherwise a due pass re-reads the current range
	// again (an empty answer before the mark proves nothing, and a
	// restarted process cannot tell).
	reached bool
	// reachedPass is the pass reached refers to (the checkpoint's
	// RereadState when the chain reached its mark). Several workers may
	// read one partition, and another one's write may start the next
	// pass: a reach counts only for the pass the checkpoint records now
	// (passDone).
	reachedPass store.RereadState
	// edgeSaid: this pass has logged a late arrival near its window's
	// edge (one warning a pass).
	edgeSaid bool
	// top is the greatest position of the receipts loaded or written: a
	// page held at the head (a listing's last page, which has no
	// successor and is never promoted) delivered its events, and its
	// receipts say so, though the applied boundary does not.
	top coord.Position
}

func (m *Machine) rereads() bool { return m.cfg.Contract.Rereads() }

// received reports whether e is delivered already: a durable receipt
// shows it, or it lies at or below the current pass's range start, which
// every pass since has left behind (for a listing re-read from its start,
// the modification-time watermark: design.md, "Re-read windows").
func (m *Machine) received(e reconcile.EventWitness) bool {
	if !m.rereads() || m.rr.set == nil {
		return false
	}
	if m.rr.has && e.Position.Kind == m.rr.from.Kind && e.Position.Compare(m.rr.from) <= 0 {
		return true
	}
	if mk := m.cp.Reread.Mark; m.cfg.SkipRereadReceipts && !mk.IsZero() && e.Position.Kind == mk.Kind && e.Position.Compare(mk) <= 0 {
		return true // the broken variant: no receipt looked for
	}
	_, ok := m.rr.set[rkey{e.IDHash, e.Position, e.Digest}]
	return ok
}

// noteLateNearEdge warns, once a pass, when pg holds an event about to
// be emitted (no receipt shows it delivered) within the lowest quarter of
// the window above the pass's range start From (at least one unit). Such
// an event was not visible when the previous pass read its position:
// that pass re-read (.., Mark] with Mark = From + w and would have
// delivered it, with a receipt; so it appeared when the partition had
// delivered through Mark at least, at least From + w - p below it. A
// source that shows events within a quarter of the window of its bound
// may show some beyond it, which no pass reads: the run says so, naming
// the partition, the depth and the window. The first pass (from the
// start) has no previous mark and says nothing. (A receipt whose write
// failed makes its event look late: a duplicate, and perhaps a warning.)
func (m *Machine) noteLateNearEdge(pg *page) {
	w := m.cfg.Contract.RereadWindow
	if !m.rereads() || !m.rr.has || m.rr.edgeSaid || w <= 0 {
		return
	}
	from := m.rr.from
	if from.Kind != coord.KindInteger && from.Kind != coord.KindTimestamp {
		return
	}
	edge := max(w/4, 1)
	for i := pg.ackedUpTo; i < len(pg.w.Events); i++ {
		e := pg.w.Events[i]
		if e.Position.Kind != from.Kind || e.Position.Compare(from) <= 0 || m.received(e) {
			continue
		}
		off := e.Position.Int - from.Int
		if off <= 0 || off > edge {
			continue
		}
		m.rr.edgeSaid = true
		la := &LateArrival{Position: e.Position, Depth: w - off, Window: w}
		m.emit(Log{Level: Warn, Late: la, Text: fmt.Sprintf(
			"Partition %s: a re-read pass found an event at %s that appeared at least %s below what was already delivered, within %s of the edge of its re-read window %s: events that appear later than the window are never read; if the source can show them, widen reread_window",
			m.part(), e.Position, windowText(la.Depth, from.Kind), windowText(off, from.Kind), windowText(w, from.Kind))})
		return
	}
}

// seen raises the greatest delivered position the receipts show.
func (m *Machine) seen(p coord.Position) {
	if m.rr.top.IsZero() || (p.Kind == m.rr.top.Kind && m.rr.top.Less(p)) {
		m.rr.top = p
	}
}

// mark is the boundary a pass starting now records: the greater of the
// applied boundary and the greatest position a receipt shows delivered.
func (m *Machine) mark() (coord.Position, bool) {
	p, ok := m.cp.Applied, m.cp.HasApplied
	if t := m.rr.top; !t.IsZero() && (!ok || (t.Kind == p.Kind && p.Less(t))) {
		p, ok = t, true
	}
	return p, ok
}

// beginChain loads the receipts of the checkpoint's re-read range, then
// starts the chain.
func (m *Machine) beginChain() {
	if !m.rereads() {
		m.startChain()
		return
	}
	rs := m.cp.Reread
	m.ask(StateLoading, LoadReceipts{Key: m.cfg.Key, From: rs.From, HasFrom: rs.HasFrom}, next{kind: onReceiptsLoaded})
}

func (m *Machine) onReceiptsLoaded(r ReceiptsLoaded) {
	if r.Err != nil {
		m.logf(Error, "Partition %s cannot read the receipts of its re-read window, not advancing: %v", m.part(), r.Err)
		m.wait(StateLoading, m.cfg.StoreBackoff, next{kind: doBeginChain})
		return
	}
	m.rr.loaded, m.rr.from, m.rr.has = true, m.cp.Reread.From, m.cp.Reread.HasFrom
	m.rr.set = make(map[rkey]struct{}, len(r.Receipts))
	m.rr.top = coord.Position{}
	for _, x := range r.Receipts {
		m.rr.set[rkey{x.IDHash, x.Position, x.Digest}] = struct{}{}
		m.seen(x.Position)
	}
	m.startChain()
}

// writeWindowReceipts records the receipts of the first complete page of
// the chain whose receipts are not yet durable, one page per call, then
// goes on with promoteHead. A receipt only saves a duplicate on a later
// pass: a failed write is logged and the page is promoted anyway.
func (m *Machine) writeWindowReceipts() bool {
	if !m.rereads() {
		return false
	}
	for _, pg := range m.chain {
		if pg.nacked || !pg.complete() {
			return false
		}
		if pg.rrDone {
			continue
		}
		var rs []store.Receipt
		for _, e := range pg.w.Events {
			if m.received(e) || (m.rr.has && !store.ReceiptAbove(store.Receipt{Position: e.Position}, m.rr.from, true)) {
				continue
			}
			if k := e.Position.Kind; k != coord.KindInteger && k != coord.KindTimestamp {
				continue
			}
			rs = append(rs, store.Receipt{IDHash: e.IDHash, Position: e.Position, Digest: e.Digest})
		}
		if len(rs) == 0 {
			pg.rrDone = true
			continue
		}
		c := store.ReceiptChunk{Key: m.cfg.Key, Generation: pg.fromGen, Attempt: pg.w.AttemptID, Receipts: rs}
		m.ask(StateRecordingReceipt, PutReceipts{Chunk: c}, next{kind: onReceiptsStored, pg: pg, chunk: &c})
		return true
	}
	return false
}

func (m *Machine) onReceiptsStored(pg *page, r ReceiptsStored, c store.ReceiptChunk) {
	if r.Err != nil {
		m.logf(Warn, "Partition %s: receipts of generation %d not recorded (a later re-read pass may emit its events again): %v", m.part(), pg.fromGen, r.Err)
	} else if m.rr.set != nil {
		for _, x := range c.Receipts {
			m.rr.set[rkey{x.IDHash, x.Position, x.Digest}] = struct{}{}
			m.seen(x.Position)
		}
	}
	pg.rrDone = true
	m.promoteHead()
}

// rereadDue reports whether a pass should start now: the chain is at its
// head with nothing in flight, something was applied, and the interval
// since the last pass has passed.
func (m *Machine) rereadDue() bool {
	if !m.rereads() || m.phase != phaseChain || len(m.chain) > 0 || m.fetch != nil || m.busy() || !m.cfg.Restarter {
		return false
	}
	mark, ok := m.mark()
	if !ok || m.now.Before(m.rr.next) {
		return false
	}
	if k := mark.Kind; k != reconcile.PositionKind(m.cfg.Contract) {
		if !m.rr.said {
			m.rr.said = true
			m.logf(Warn, "Partition %s cannot re-read its window: the delivered position %s is not a %s position", m.part(), mark, reconcile.PositionKind(m.cfg.Contract))
		}
		return false
	}
	return true
}

// passReached notes that the chain delivered pg (promoted, or held: held
// without successor when last).
func (m *Machine) passReached(pg *page, last bool) {
	mk := m.cp.Reread.Mark
	if !m.rereads() || mk.IsZero() || m.passDone() {
		return
	}
	if last {
		m.rr.reached, m.rr.reachedPass = true, m.cp.Reread
		return
	}
	for _, e := range pg.w.Events {
		if e.Position.Kind == mk.Kind && e.Position.Compare(mk) >= 0 {
			m.rr.reached, m.rr.reachedPass = true, m.cp.Reread
			return
		}
	}
}

// passDone reports whether the chain reached the mark of the pass the
// checkpoint records now (passReached). A reach of an earlier pass, or of
// the pass another worker's write replaced, proves nothing of this one.
func (m *Machine) passDone() bool {
	return m.rr.reached && m.rr.reachedPass == m.cp.Reread
}

// passRange is the range the pass starting now re-reads: above the
// previous pass's mark less the window (from the partition's start when
// no pass ran yet), and the watermark the previous pass proves under
// finality lag (zero when none).
func (m *Machine) passRange() (from coord.Position, has bool, wm coord.Watermark) {
	prev := m.cp.Reread
	if !prev.Started() {
		return coord.Position{}, false, coord.Watermark{}
	}
	if !m.passDone() {
		// The current pass has not read its whole range: read it again,
		// from the same start, claiming nothing more.
		return prev.From, prev.HasFrom, coord.Watermark{}
	}
	w, ok := prev.Mark.AsWatermark().Minus(m.cfg.Contract.RereadWindow)
	if !ok {
		return coord.Position{}, false, coord.Watermark{}
	}
	if m.cfg.Contract.EffectiveFinality() == provider.FinalityLag {
		wm = w
	}
	return coord.Position(w), true, wm
}

// startPass starts a re-read pass: the provider's restart cursor for the
// range's start, then one restart promotion that records the pass.
func (m *Machine) startPass() {
	// At most one pass per poll wait, however short the interval: a pass
	// that finds the head at once would otherwise start the next at once.
	m.rr.next = m.now.Add(max(m.cfg.Contract.RereadInterval, m.pollWait()))
	from, has, _ := m.passRange()
	m.ask(StateRecovering, RestartCursor{
		Partition: m.part(), Watermark: m.cp.Watermark, Applied: from, HasApplied: has,
	}, next{kind: onRereadCursor})
}

func (m *Machine) onRereadCursor(r RestartCursorFound) {
	if r.Err != nil {
		m.logf(Warn, "Partition %s cannot start a re-read pass: the restart cursor failed: %v", m.part(), r.Err)
		m.pollAt = m.now.Add(m.pollWait())
		return
	}
	from, has, wm := m.passRange()
	mark, _ := m.mark()
	redo := m.cp.Reread.Started() && !m.passDone()
	if redo {
		// The same pass again: its range and mark stay.
		mark = m.cp.Reread.Mark
	}
	rs := store.RereadState{From: from, HasFrom: has, Mark: mark}
	prom := store.Promotion{
		Key: m.cfg.Key, FromCursor: m.cp.Cursor, FromGeneration: m.cp.Generation,
		To: r.Cursor, WitnessID: RereadWitnessID, Epoch: m.cfg.Epoch, Lease: m.writeLease(),
		Violations: m.violationTotals(), Incarnation: m.incarnation, Reread: &rs,
	}
	if !wm.IsZero() && (m.cp.Watermark.IsZero() || m.cp.Watermark.Less(wm)) {
		prom.Watermark, prom.Finality = wm, m.cfg.Contract.Basis(sdkcoord.SDKKind(wm.Kind))
	}
	start := "the start"
	if has {
		start = from.String()
	}
	what := "starts a re-read pass"
	if redo {
		what = "re-reads its pass again (the last one did not reach its mark)"
	}
	m.logf(Info, "Partition %s %s above %s through %s (re-read window %s)", m.part(), what, start, mark, windowText(m.cfg.Contract.RereadWindow, mark.Kind))
	m.count(MetricRereadPasses, 1)
	// What the chain reached belonged to the pass this write replaces.
	// Forget it before the write, not after: a write whose answer is lost
	// may have been applied, and the chain then walks the new pass with
	// the old pass's reach, which would let the next pass claim a
	// watermark over a range this one never read.
	m.rr.reached, m.rr.edgeSaid = false, false
	m.ask(StateRecovering, Promote{Promotion: prom, Restart: true}, next{kind: onRereadPromoted, prom: &prom})
}

func (m *Machine) onRereadPromoted(prom store.Promotion, r Promoted) {
	if m.leaseGoneAfterWrite(r.Checkpoint, r.Err, prom.Lease) {
		return
	}
	if r.Err != nil {
		m.logf(Warn, "Partition %s: the write starting a re-read pass failed, re-reading the checkpoint: %v", m.part(), r.Err)
		m.restartChain()
		return
	}
	m.countsWritten()
	m.cp = r.Checkpoint
	m.rr.reached, m.rr.edgeSaid = false, false
	m.emit(Observe{Checkpoint: r.Checkpoint})
	if rs := r.Checkpoint.Reread; rs.HasFrom {
		m.ask(StateRecovering, PruneReceipts{Key: m.cfg.Key, Through: rs.From}, next{kind: onReceiptsPruned})
		return
	}
	m.restartChain()
}

func (m *Machine) onReceiptsPruned(r ReceiptsPruned) {
	if r.Err != nil {
		m.logf(Debug, "Partition %s: pruning the receipts behind its re-read window: %v", m.part(), r.Err)
	}
	m.restartChain()
}

// rereadBoundary is the boundary a recovery restarts from under a re-read
// window: the current pass's range start, so the restart reads the whole
// range again (receipts keep what was delivered from being emitted
// twice) and the watermark the next pass writes stays proven.
func (m *Machine) rereadBoundary() (coord.Position, bool, bool) {
	if !m.rereads() || !m.cp.Reread.Started() {
		return coord.Position{}, false, false
	}
	return m.cp.Reread.From, m.cp.Reread.HasFrom, true
}

// RereadWitnessID is the witness id of the promotion that starts a pass.
const RereadWitnessID = RestartWitnessPrefix + "reread"

func describeReread(rs store.RereadState) string {
	if !rs.Started() {
		return ""
	}
	if rs.HasFrom {
		return fmt.Sprintf(" reread (%s, %s]", rs.From, rs.Mark)
	}
	return fmt.Sprintf(" reread (start, %s]", rs.Mark)
}

// windowText renders a window of n units of kind k: a duration for
// timestamps, units otherwise.
func windowText(n int64, k coord.Kind) string {
	if k == coord.KindTimestamp {
		return time.Duration(n).String()
	}
	return fmt.Sprint(n)
}
