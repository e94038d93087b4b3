package chain

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/store"
)

// Source incarnations (docs/design.md#source-incarnations). A partition
// whose provider names the incarnation of its source checks it when it
// starts (every load: start-up, a lease taken, a restart, an unpark),
// before every recovery, and every IncarnationInterval while it reads. A
// response whose positions went back where the contract says they never
// do (reconcile.Recreated) is evidence of a new incarnation too. A change is
// never a silent continuation: Reincarnate records it as a membership
// change (a new, unproven epoch) and resets the checkpoint to the
// partition's start in the new incarnation, with one conditional write
// that clears the coordinates (they restart) and carries the new epoch.

// ReasonIncarnation starts the log line of an incarnation change.
const ReasonIncarnation = "source incarnation changed"

// checkDue reports whether the reading partition checks its incarnation on
// an interval.
func (m *Machine) checkDue() bool {
	return m.cfg.Incarnation && m.cfg.IncarnationInterval > 0 && !m.nextCheck.IsZero()
}

func (m *Machine) scheduleCheck() {
	if m.cfg.Incarnation && m.cfg.IncarnationInterval > 0 {
		m.nextCheck = m.now.Add(m.cfg.IncarnationInterval)
	}
}

// verifyIncarnation checks the incarnation before the partition reads:
// the same (or none recorded yet: recordIncarnation writes it first)
// runs then; another one is an incarnation change. Until the provider
// answers, the partition does not read.
func (m *Machine) verifyIncarnation(why string, then *next) {
	m.incarnation = m.cp.Incarnation
	if !m.cfg.Incarnation {
		m.resume(then)
		return
	}
	m.ask(StateCheckingIncarnation, CheckIncarnation{Key: m.cfg.Key, Why: why}, next{kind: onIncarnationVerified, text: why, then: then})
}

func (m *Machine) onIncarnationVerified(why string, r IncarnationFound, then *next) {
	if r.Err != nil {
		m.logf(Warn, "Partition %s cannot check the incarnation of its source, not reading until it can (retrying in %s): %v", m.part(), m.cfg.PollInterval, r.Err)
		m.wait(StateCheckingIncarnation, m.cfg.PollInterval, next{kind: doVerifyIncarnation, text: why, then: then})
		return
	}
	h := reconcile.IncarnationHash(r.Value)
	m.scheduleCheck()
	switch {
	case m.cp.Incarnation == h:
		m.resume(then)
	case m.cp.Incarnation == "":
		m.recordIncarnation(h)
	case m.cfg.IgnoreIncarnation:
		m.resume(then) // broken: reads on as the stored incarnation

	default:
		m.reincarnate(m.cp.Incarnation, h, fmt.Sprintf("the incarnation check when %s answered another value at %s", why, m.stamp()))
	}
}

// recordIncarnation makes the first incarnation a partition sees durable,
// with one conditional write that keeps the cursor, watermark and applied
// position and moves the generation on: witnesses an earlier process left
// for the cursor were fetched before the incarnation was known (maybe from
// a source recreated since), so they are never compared with the answers
// of this one. Then the partition loads again.
func (m *Machine) recordIncarnation(h string) {
	prom := store.Promotion{
		Key: m.cfg.Key, FromCursor: m.cp.Cursor, FromGeneration: m.cp.Generation, To: m.cp.Cursor,
		WitnessID: "incarnation:" + h, Incarnation: h, Epoch: m.cfg.Epoch, Lease: m.writeLease(),
		Complete: m.cp.Complete, // a complete partition stays complete
	}
	m.logf(Info, "Partition %s: recording its source incarnation %s at generation %d", m.part(), h, m.cp.Generation)
	m.ask(StateReincarnating, Promote{Promotion: prom, Restart: true}, next{kind: onIncarnationRecorded, prom: &prom})
}

func (m *Machine) onIncarnationRecorded(carried store.Lease, r Promoted) {
	if m.leaseGoneAfterWrite(r.Checkpoint, r.Err, carried) {
		return
	}
	switch {
	case r.Err == nil:
		m.cp = r.Checkpoint
		m.emit(Observe{Checkpoint: r.Checkpoint})
		m.load()
	case errors.Is(r.Err, store.ErrFenced):
		m.load()
	default:
		m.logf(Warn, "Partition %s: its source incarnation could not be recorded, retrying after %s: %v", m.part(), m.cfg.StoreBackoff, r.Err)
		m.wait(StateLoading, m.cfg.StoreBackoff, next{kind: doLoad})
	}
}

// checkWhileReading is the check every IncarnationInterval: the chain goes
// on meanwhile (its inputs queue until the answer).
func (m *Machine) checkWhileReading() {
	m.nextCheck = time.Time{}
	m.checkBefore("", nil)
}

// checkBefore checks the incarnation before then runs (a recovery, why
// non-empty) or on the interval (why empty): a change reincarnates
// instead; a failed check runs then anyway (the partition was checked when
// it started).
func (m *Machine) checkBefore(why string, then *next) {
	if !m.cfg.Incarnation {
		m.resume(then)
		return
	}
	what := "the interval check"
	if why != "" {
		what = "the check before recovering from " + why
	}
	st := StateCheckingIncarnation
	if why != "" {
		st = StateRecovering
	}
	m.ask(st, CheckIncarnation{Key: m.cfg.Key, Why: what}, next{kind: onIncarnationChecked, text: what, then: then})
}

func (m *Machine) onIncarnationChecked(what string, covers uint64, r IncarnationFound, then *next) {
	if r.Err != nil {
		m.logf(Warn, "Partition %s cannot check the incarnation of its source (%s): %v", m.part(), what, r.Err)
		m.nextCheck = m.now.Add(m.cfg.PollInterval)
		m.resume(then)
		return
	}
	h := reconcile.IncarnationHash(r.Value)
	m.scheduleCheck()
	if h == m.incarnation && !m.cfg.IgnoreIncarnation {
		m.confirmed = max(m.confirmed, covers)
	}
	if h == m.incarnation || m.incarnation == "" || m.cfg.IgnoreIncarnation {
		// (IgnoreIncarnation, broken: reads on as the old one.)
		if m.incarnation == "" && !m.cfg.IgnoreIncarnation {
			m.incarnation = h
		}
		m.resume(then)
		return
	}
	m.reincarnate(m.incarnation, h, fmt.Sprintf("%s answered another value at %s", what, m.stamp()))
}

// incarnationConfirmed reports whether pg may be emitted and promoted as
// far as the incarnation goes: the provider names none, or a check that
// began after pg's answer arrived found the incarnation unchanged. So a
// page a recreated source served under the old cursor is never emitted
// nor promoted under the old incarnation: the check after it sees the new
// one.
func (m *Machine) incarnationConfirmed(pg *page) bool {
	return !m.cfg.Incarnation || m.cfg.IgnoreIncarnation || pg.seq <= m.confirmed
}

// confirmIncarnation checks the incarnation before the head page's
// promotion when no check covers it yet (a page with nothing to emit):
// unchanged, every page whose answer had arrived when the check began is
// confirmed and the head is decided again; changed, the partition
// reincarnates; a failed check is asked again after PollInterval (nothing
// is promoted meanwhile).
func (m *Machine) confirmIncarnation() {
	m.ask(StateCheckingIncarnation, CheckIncarnation{Key: m.cfg.Key, Why: "before a promotion"}, next{kind: onIncarnationConfirmed})
}

func (m *Machine) onIncarnationConfirmed(covers uint64, r IncarnationFound) {
	if r.Err != nil {
		m.logf(Warn, "Partition %s cannot check the incarnation of its source before a promotion, retrying in %s: %v", m.part(), m.cfg.PollInterval, r.Err)
		m.wait(StateCheckingIncarnation, m.cfg.PollInterval, next{kind: doPromoteHead})
		return
	}
	h := reconcile.IncarnationHash(r.Value)
	if h != m.incarnation {
		m.reincarnate(m.incarnation, h, fmt.Sprintf("the check before a promotion answered another value at %s", m.stamp()))
		return
	}
	m.confirmed = max(m.confirmed, covers)
	m.scheduleCheck()
	m.promoteHead()
}

// emitChecked emits pg's events once the incarnation is confirmed for it:
// a page is emitted only after an incarnation check that began after its
// answer arrived has answered the incarnation the partition reads, so no
// event a recreated source served under the old cursor is delivered under
// the old incarnation's epoch and frontier. The check is coalesced: it
// covers every page whose answer had arrived when it began (the interval
// check, the check before a promotion, or the one this asks; answers the
// machine holds when it answers, see CheckIncarnation). A page with
// nothing to emit (no events, or all with a terminal outcome) waits for
// nothing here; the check before its promotion covers it. Witness first is
// kept: pg's witness is durable before this runs.
func (m *Machine) emitChecked(pg *page) {
	if m.needsCheck(pg) || m.anyUnchecked() {
		// (A page behind pages that wait for their check waits with
		// them: events leave in chain order.)
		pg.unchecked = true
		m.confirmEmission()
		return
	}
	m.emitPage(pg)
	m.promoteHead()
}

// needsCheck reports whether pg's events wait for an incarnation check
// before they are emitted.
func (m *Machine) needsCheck(pg *page) bool {
	return pg.ackedUpTo < len(pg.w.Events) && !m.incarnationConfirmed(pg) && !m.cfg.EmitBeforeCheck
}

// anyUnchecked reports whether a page of the chain waits for an
// incarnation check before its events are emitted.
func (m *Machine) anyUnchecked() bool {
	for _, pg := range m.chain {
		if pg.unchecked {
			return true
		}
	}
	return false
}

// confirmEmission asks the check that the unchecked pages of the chain
// wait for.
func (m *Machine) confirmEmission() {
	m.ask(StateCheckingIncarnation, CheckIncarnation{Key: m.cfg.Key, Why: "before emitting"}, next{kind: onEmissionConfirmed})
}

// onEmissionConfirmed emits, in chain order, the pages the check covers
// (covers: the answers that had arrived when it began); another
// incarnation drops them unemitted (the partition reincarnates: the new
// incarnation is read from its start); a failed check is asked again
// after PollInterval, nothing emitted meanwhile.
func (m *Machine) onEmissionConfirmed(covers uint64, r IncarnationFound) {
	if r.Err != nil {
		m.logf(Warn, "Partition %s cannot check the incarnation of its source before emitting, retrying in %s: %v", m.part(), m.cfg.PollInterval, r.Err)
		m.wait(StateCheckingIncarnation, m.cfg.PollInterval, next{kind: doConfirmEmission})
		return
	}
	h := reconcile.IncarnationHash(r.Value)
	if h != m.incarnation {
		pages, events := 0, 0
		for _, pg := range m.chain {
			if pg.unchecked {
				pages++
				events += len(pg.w.Events) - pg.ackedUpTo
			}
		}
		m.logf(Info, "Partition %s: %d events fetched since the last incarnation check (pages: %d) are dropped unemitted; the new incarnation is read from its start", m.part(), events, pages)
		m.reincarnate(m.incarnation, h, fmt.Sprintf("the check before emitting answered another value at %s", m.stamp()))
		return
	}
	m.confirmed = max(m.confirmed, covers)
	m.scheduleCheck()
	for _, pg := range m.chain {
		if pg.unchecked && pg.seq <= m.confirmed {
			pg.unchecked = false
			m.emitPage(pg)
		}
	}
	m.promoteHead()
}

// watches reports whether a durably complete partition goes on checking
// its source's incarnation (every IncarnationInterval): a recreated source
// reopens it. Not when the input exits once every partition is complete.
func (m *Machine) watches() bool {
	return m.cp.Complete && m.cfg.Incarnation && m.cfg.IncarnationInterval > 0 && !m.cfg.ExitWhenComplete && !m.cfg.IgnoreIncarnation
}

// checkComplete is the interval check of a complete partition.
func (m *Machine) checkComplete() {
	m.nextCheck = time.Time{}
	m.ask(StateCheckingIncarnation, CheckIncarnation{Key: m.cfg.Key, Why: "the interval check of a complete partition"}, next{kind: onCompleteChecked})
}

// onCompleteChecked: the same incarnation keeps the partition complete;
// another reopens it in the new incarnation (the reset clears the complete
// mark, and the partition is read from its start); a failed check is asked
// again after PollInterval.
func (m *Machine) onCompleteChecked(r IncarnationFound) {
	if r.Err != nil {
		m.logf(Warn, "Partition %s cannot check the incarnation of its source (the interval check of a complete partition), retrying in %s: %v", m.part(), m.cfg.PollInterval, r.Err)
		m.nextCheck = m.now.Add(m.cfg.PollInterval)
		return
	}
	h := reconcile.IncarnationHash(r.Value)
	if h == m.cp.Incarnation || m.cp.Incarnation == "" {
		m.scheduleCheck()
		return
	}
	m.reincarnate(m.cp.Incarnation, h, fmt.Sprintf("the interval check of the complete partition answered another value at %s", m.stamp()))
}

// recreated applies the core's rule to a response of fetch f, for a
// partition that declares no incarnation: its positions going back are the
// only sign of a recreated source, and reset it once per process. Then the
// same evidence is not taken for a new incarnation again: a source whose
// certified watermark or positions go back once more is contradicting its
// contract, and the contract monitors report it (watermark_regressed,
// late_position: the scalar is withdrawn and the partition recovers as its
// contract says) instead of a reset loop. A partition that declares an
// incarnation trusts its check instead: the check runs before every
// promotion (so no page of a recreated source is promoted into the old
// checkpoint), before every recovery and every validate_interval, and
// positions going back under an unchanged incarnation are the contract
// violation the monitors report, never a reset into an incarnation the
// source does not name (which the next check would undo).
func (m *Machine) recreated(f *fetchRec, r reconcile.Response) (string, bool) {
	if m.cfg.IgnoreIncarnation || m.cfg.Incarnation || m.evidenceResets > 0 {
		return "", false
	}
	return reconcile.Recreated(reconcile.RecreationInput{
		Contract: m.cfg.Contract, Applied: m.tail.applied, HasApplied: m.tail.hasApplied, Watermark: m.tail.wm,
		AfterPage: m.followsBoundary(f), Response: r,
	})
}

// followsBoundary reports whether f's cursor is the successor of a page
// whose greatest position is the applied boundary f is fetched with: the
// source was asked for what follows that very event. After a restart, a
// repair or a reset the boundary stays where it was while the pages read
// again lie below it, so their successors do not count.
func (m *Machine) followsBoundary(f *fetchRec) bool {
	if !m.tail.hasApplied {
		return false
	}
	var evs []reconcile.EventWitness
	switch {
	case f.gen == m.cp.Generation:
		evs = m.promotedEvents
	default:
		for _, pg := range m.chain {
			if pg.fromGen+1 == f.gen {
				evs = pg.w.Events
			}
		}
	}
	if len(evs) == 0 {
		return false
	}
	top := evs[0].Position
	for _, e := range evs[1:] {
		if e.Position.Kind != top.Kind {
			return false
		}
		top = coord.MaxPosition(top, e.Position)
	}
	return top == m.tail.applied
}

// onRecreated handles a response whose positions went back, for a
// partition that declares no incarnation (recreated): a new incarnation,
// recorded under a hash of the evidence, once per process.
func (m *Machine) onRecreated(f *fetchRec, attempt, why string) {
	evidence := fmt.Sprintf("a response of generation %d cursor %s: %s", f.gen, reconcile.CursorHash(f.cursor), why)
	m.evidenceResets++
	m.reincarnate(m.incarnation, reconcile.IncarnationHash("positions-went-back:"+attempt), evidence+" at "+m.stamp())
}

func (m *Machine) stamp() string { return m.now.UTC().Format(time.RFC3339) }

// reincarnate ends the chain and asks for the change: the membership
// epoch that records it, then the reset of the checkpoint to the
// partition's start in the new incarnation. Pages of the chain are
// dropped (their events are read again from the new start: duplicates,
// never gaps).
func (m *Machine) reincarnate(from, to, why string) {
	// Each reset after the first in this process waits first (doubling,
	// from poll_interval up to MaxRestartBackoff): an incarnation check
	// that answers another value every time cannot reset at full speed.
	if m.reincarnations++; m.reincarnations > 1 {
		d := min(m.cfg.PollInterval<<min(m.reincarnations-2, 16), MaxRestartBackoff)
		m.logf(Info, "Partition %s: incarnation change %d in this process, waiting %s first", m.part(), m.reincarnations, d)
		if m.phase == phaseChain {
			m.emit(EndChain{Chain: m.chainID})
			m.chain = nil
			m.dropWitnessGroup()
			clear(m.batches)
		}
		m.phase = phaseLoading
		m.wait(StateReincarnating, d, next{kind: doResetInto, from: from, to: to, text: why})
		return
	}
	m.resetInto(from, to, why)
}

// resetInto is reincarnate without its back-off.
func (m *Machine) resetInto(from, to, why string) {
	if m.phase == phaseChain {
		m.emit(EndChain{Chain: m.chainID})
		m.chain = nil
		m.dropWitnessGroup()
		clear(m.batches)
	}
	m.phase = phaseLoading
	m.done = false // the reset checkpoint is not complete
	m.parkDrained = ParkReason{}
	m.nextCheck = time.Time{}
	shown := from
	if shown == "" {
		shown = "none recorded"
	}
	m.logf(Warn, "Partition %s: %s from %s to %s (%s); the old incarnation leaves and the new one joins in a new membership epoch, read from the start: the checkpoint at generation %d is reset and the scalar frontier is withheld until the new incarnation certifies a watermark",
		m.part(), ReasonIncarnation, shown, to, why, m.cp.Generation)
	m.pruneResetReceipts(from, to, why)
}

// pruneResetReceipts drops every receipt of a re-read window before the
// reset into another incarnation is written: the old incarnation's
// receipts say nothing about the new one's events (the same id at the
// same position is another event), and their greatest position would
// become the first pass's mark (reread.go, mark), from which a later
// pass derives a watermark over events of the new incarnation not yet
// read. Pruned first, so a crash between the two writes leaves no old
// receipt behind a reset; a receipt lost to an old incarnation that goes
// on (the reset refused) only costs a duplicate.
func (m *Machine) pruneResetReceipts(from, to, why string) {
	k := reconcile.PositionKind(m.cfg.Contract)
	if !m.rereads() || (k != coord.KindInteger && k != coord.KindTimestamp) {
		m.writeReset(from, to, why)
		return
	}
	m.ask(StateReincarnating, PruneReceipts{Key: m.cfg.Key, Through: coord.Position{Kind: k, Int: math.MaxInt64}},
		next{kind: onResetReceiptsPruned, from: from, to: to, text: why})
}

func (m *Machine) onResetReceiptsPruned(from, to, why string, r ReceiptsPruned) {
	if r.Err != nil {
		m.logf(Warn, "Partition %s: the receipts of incarnation %s could not be dropped before its reset, retrying after %s: %v", m.part(), from, m.cfg.StoreBackoff, r.Err)
		m.wait(StateReincarnating, m.cfg.StoreBackoff, next{kind: doPruneResetReceipts, from: from, to: to, text: why})
		return
	}
	m.rr.set, m.rr.top = nil, coord.Position{}
	m.writeReset(from, to, why)
}

// writeReset writes the reset into incarnation to.
func (m *Machine) writeReset(from, to, why string) {
	reset := store.Promotion{
		Key: m.cfg.Key, FromCursor: m.cp.Cursor, FromGeneration: m.cp.Generation,
		To: m.cfg.StartCursor, WitnessID: "incarnation:" + to, Incarnation: to, Reset: true, Lease: m.writeLease(),
	}
	m.ask(StateReincarnating, Reincarnate{Key: m.cfg.Key, From: from, To: to, Why: why, Reset: reset}, next{kind: onReincarnated, to: to, lease: reset.Lease})
}

func (m *Machine) onReincarnated(to string, carried store.Lease, r Reincarnated) {
	if r.Err == nil {
		// The reset is written (even when it shows the lease gone).
		m.count(MetricIncarnationChanges, 1)
	}
	if m.leaseGoneAfterWrite(r.Checkpoint, r.Err, carried) {
		return
	}
	switch {
	case r.Err == nil:
		m.cfg.Epoch = r.Epoch
		m.cp = r.Checkpoint
		m.incarnation = to
		m.restarts, m.restartMark = 0, nil
		m.emit(Observe{Checkpoint: r.Checkpoint})
		m.logf(Info, "Partition %s: reset into incarnation %s at generation %d in membership epoch %d; reading it from the start", m.part(), to, r.Checkpoint.Generation, r.Epoch)
		m.load()
	case errors.Is(r.Err, store.ErrFenced):
		m.logf(Warn, "Partition %s: the reset into incarnation %s lost to another writer; re-reading: %v", m.part(), to, r.Err)
		m.load()
	default:
		m.logf(Warn, "Partition %s: the incarnation change to %s could not be written, retrying after %s: %v", m.part(), to, m.cfg.StoreBackoff, r.Err)
		m.wait(StateLoading, m.cfg.StoreBackoff, next{kind: doLoad})
	}
}
