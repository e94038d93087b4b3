package chain

import (
	"fmt"
	"maps"
	"strings"

	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/provider"
)

// Contract monitors (docs/design.md#contract-monitors): the core decides
// what a response shows (reconcile.Monitor, reconcile.BuildViolation,
// reconcile.SelfCertifyRun); the machine counts each observation
// (MetricViolations{kind}, and the checkpoint's counts, written with the
// next promotion), logs the first of each kind, and for an observation
// that breaks a claim the partition may have published withdraws the
// scope's scalar frontier (Withdraw) and, once the page that showed it is
// delivered and promoted, recovers as the contract says.

// monitorState is the machine's part of the monitors.
type monitorState struct {
	selfRun reconcile.SelfCertifyRun
	// pending counts the observations since the counts were last written
	// (with a promotion); nil when none. inflight is the part of pending
	// the promotion in flight carries.
	pending, inflight map[string]uint64
	// logged and withdrawn: the kinds already logged, and already
	// withdrawn (the write succeeded or found it withheld), by this
	// machine.
	logged    map[reconcile.ViolationKind]bool
	withdrawn map[reconcile.ViolationKind]bool
	// recoverDrained is the reason to recover with once the chain has
	// drained through the page that broke a claim ("" when none).
	recoverDrained ParkReason
	// refused counts the pages this machine refused (refuse).
	refused int
}

// monitorResponse returns what the witness of a response fetched by f
// shows against the contract (the classification's inputs in in). The
// watermark it is held against is the one the checkpoint holds once f's
// generation is durable: the pages before it are promoted first, so their
// claim is published before this page's.
func (m *Machine) monitorResponse(f *fetchRec, in reconcile.ClassifyInput, class reconcile.RetryClass) []reconcile.Violation {
	vs := reconcile.Monitor(reconcile.MonitorInput{
		Contract: in.Contract, Durable: f.wm,
		Applied: in.Applied, HasApplied: in.HasApplied,
		Replay: in.Witness.Generation == m.cp.Generation && restarted(m.cp.PromotedWitness),
		Prior:  in.Prior, Receipts: in.Receipts, Pending: in.Pending, Witness: in.Witness,
	})
	// Only a watermark the contract says the source certifies is a claim
	// a self-certifying source contradicts: an append_only_writer or lag
	// basis is the page's own position by declaration, and finality none
	// claims nothing. Under dense positions a watermark at the page's last
	// position is what an honest log certifies (no position can appear
	// below it without breaking density, which rule (b) checks), so it is
	// no hint either.
	if class != reconcile.ExactReplay && in.Contract.Finality == provider.FinalitySource && !in.Contract.DensePositions {
		var v reconcile.Violation
		var ok bool
		if m.mon.selfRun, v, ok = m.mon.selfRun.Observe(in.Witness); ok {
			vs = append(vs, v)
		}
	}
	return vs
}

// refusing returns the violation of vs for which the page that showed it is
// refused: an offset-shaped successor (reconcile.OffsetShapedSuccessor).
// Its page was read by an offset the contract does not declare, so a
// delete on an earlier page may have slid a row past it: delivering it
// and promoting its successor would make that loss durable, and every
// later page is read the same way. Reading on is never safe, unlike the
// other kinds (counted, the page delivered).
func refusing(vs []reconcile.Violation) (reconcile.Violation, bool) {
	for _, v := range vs {
		if v.Kind == reconcile.OffsetShapedSuccessor {
			return v, true
		}
	}
	return reconcile.Violation{}, false
}

// refuse recovers from a page refused for v (refusing): nothing of it was
// emitted or promoted, the chain is dropped, and the partition recovers as
// its contract says: park, or restart from a stable boundary. A restart
// reads the same offsets again, and the pages before the refused one may
// be promoted in between (which resets the restart count of recover), so
// this worker parks once it has refused more than max_restarts pages,
// whatever was promoted between: a restart never loops for ever, and
// nothing read by an undeclared offset is promoted.
func (m *Machine) refuse(v reconcile.Violation) {
	reason := ParkReason{ParkContractViolation, strings.TrimPrefix(v.String(), ParkContractViolation.String()+" ")}
	m.mon.refused++
	if limit := m.maxRestarts(); m.mon.refused > limit {
		m.park(reason.also("this worker refused %d pages for it; a restart from a stable boundary reads the same offsets again (max_restarts %d)", m.mon.refused, limit))
		return
	}
	m.recover(false, reason)
}

// restarted reports whether a checkpoint's promoted witness id names a
// restart from a boundary or an operator's restart: its cursor may
// legitimately re-read a range already certified.
func restarted(wid string) bool {
	return strings.HasPrefix(wid, "restart:") || strings.HasPrefix(wid, "repair:")
}

// claimBroken returns the first violation of vs that breaks a claim (one
// per kind: Monitor reports each kind once).
func claimBroken(vs []reconcile.Violation) (reconcile.Violation, bool) {
	for _, v := range vs {
		if v.Kind.BreaksClaim() {
			return v, true
		}
	}
	return reconcile.Violation{}, false
}

// report counts and logs vs, withdraws the scalar frontier for those that
// break a claim (once per kind, unless the write failed), then runs then.
func (m *Machine) report(vs []reconcile.Violation, then *next) {
	if len(vs) == 0 {
		m.resume(then)
		return
	}
	v := vs[0]
	kind := v.Kind.String()
	m.emit(Count{Metric: MetricViolations, Violation: v.Kind, N: 1})
	if m.mon.pending == nil {
		m.mon.pending = map[string]uint64{}
	}
	m.mon.pending[kind]++
	if m.mon.logged == nil {
		m.mon.logged = map[reconcile.ViolationKind]bool{}
	}
	if !m.mon.logged[v.Kind] {
		m.mon.logged[v.Kind] = true
		also := ""
		if v.Kind.BreaksClaim() {
			also = "; it breaks the complete-through claim: the scope's scalar frontier is withdrawn"
		}
		// A watermark equal to the last position page after page is a
		// hint (an honest source may certify exactly that): info.
		level := Warn
		if v.Kind == reconcile.SelfCertified {
			level = Info
		}
		m.logf(level, "Partition %s: %s (logged once per partition and kind; counted in %s{kind=%q} and by connect tidemark status)%s",
			m.part(), v, MetricViolations, kind, also)
	}
	if !v.Kind.BreaksClaim() || m.mon.withdrawn[v.Kind] {
		m.report(vs[1:], then)
		return
	}
	if m.mon.withdrawn == nil {
		m.mon.withdrawn = map[reconcile.ViolationKind]bool{}
	}
	m.mon.withdrawn[v.Kind] = true
	m.ask(StateWithdrawing, Withdraw{Key: m.cfg.Key, Reason: v.String()}, next{kind: onWithdrawn, violation: v, vs: vs[1:], then: then})
}

// onWithdrawn goes on with the violations rest once the scalar frontier is
// withdrawn for v.
func (m *Machine) onWithdrawn(v reconcile.Violation, rest []reconcile.Violation, r Withdrawn, then *next) {
	kind := v.Kind.String()
	switch {
	case r.Err != nil:
		m.mon.withdrawn[v.Kind] = false // try again on the next observation
		m.logf(Error, "Partition %s: cannot withdraw the scalar frontier of scope %s after %s: %v", m.part(), m.cfg.Key.Scope, kind, r.Err)
	case r.Changed:
		m.logf(Warn, "Partition %s: the scalar frontier of scope %s is withdrawn: membership epoch %d is unproven on its account (%s) until an operator proves a cutover (connect tidemark advance-epoch)",
			m.part(), m.cfg.Key.Scope, r.Epoch, kind)
	}
	m.report(rest, then)
}

// violationTotals returns the counts a promotion writes: the durable ones
// plus those observed since, or nil (keep the stored counts) when nothing
// was observed since.
func (m *Machine) violationTotals() map[string]uint64 {
	m.mon.inflight = nil
	if len(m.mon.pending) == 0 {
		return nil
	}
	m.mon.inflight = maps.Clone(m.mon.pending)
	out := maps.Clone(m.cp.Violations)
	if out == nil {
		out = map[string]uint64{}
	}
	for k, n := range m.mon.pending {
		out[k] += n
	}
	return out
}

// countsWritten forgets the pending counts the promotion that succeeded
// carried (observations made while it was in flight stay pending).
func (m *Machine) countsWritten() {
	for k, n := range m.mon.inflight {
		if m.mon.pending[k] <= n {
			delete(m.mon.pending, k)
		} else {
			m.mon.pending[k] -= n
		}
	}
	m.mon.inflight = nil
}

// recoverAfter is the reason the machine recovers with once the page that
// broke a claim (at generation gen, from cursor) is promoted.
func recoverAfter(gen uint64, cursor []byte, v reconcile.Violation) ParkReason {
	return ParkReason{ParkContractViolation, fmt.Sprintf("at generation %d cursor %s: %s (the page that showed it was delivered and promoted)",
		gen, reconcile.CursorHash(cursor), v)}
}
