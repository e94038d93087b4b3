package chain

import (
	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/store"
)

// nextKind names what the machine does next: once the call it made is
// answered (the on… kinds, which take the answer), once a back-off ends,
// or once a step that made calls of its own completes (the do… kinds, a
// then-chain). The machine's pending work is data: one call (or sleep)
// holding one next, never a closure.
type nextKind uint8

const (
	// Answers (run with the input that answers the call).
	onLoaded               nextKind = iota + 1 // ld
	onParkChecked                              //
	onAbandoned                                // text: the attempt; then
	onWitnessStored                            // w; then
	onWitnessesStored                          // pages, pg: the trailing page
	onReceiptStored                            // pg, n; then
	onPromoted                                 // pg, prom; then
	onResolved                                 // pg, prom; then
	onRestartCursor                            // reason
	onRestartPromoted                          // prom
	onParked                                   // reason, lease
	onFailureNoted                             // lease
	onIncarnationVerified                      // text: why; then
	onIncarnationRecorded                      // prom
	onIncarnationChecked                       // text: what; then
	onIncarnationConfirmed                     //
	onEmissionConfirmed                        //
	onCompleteChecked                          //
	onReincarnated                             // to, lease
	onWithdrawn                                // violation, vs: the rest; then
	onReceiptsLoaded                           //
	onReceiptsStored                           // pg, chunk
	onRereadCursor                             //
	onRereadPromoted                           // prom
	onReceiptsPruned                           //
	onResetReceiptsPruned                      // from, to, text: why

	// Continuations (run after a back-off, or when what they follow is done).
	doLoad               //
	doAfterLoad          // cp
	doStartChain         //
	doAskUnparked        //
	doAbandonAll         // st, gen, ids; then
	doPutWitness         // w; then
	doPutWitnesses       // pages, pg: the trailing page
	doEmitWitnessed      // pg
	doRefetchAfterNack   // pg
	doAfterHold          // pg, text: the reason
	doAfterPromotion     // pg, last
	doResolve            // pg, prom; then
	doRestartChain       //
	doSettlePages        // pages, i; then
	doRecoverNow         // expired, reason
	doRestart            // expired, reason
	doParkWrite          // reason
	doVerifyIncarnation  // text: why; then
	doPromoteHead        //
	doConfirmEmission    //
	doFinishComplete     //
	doResetInto          // from, to, text: why
	doOnMalformed        // f, text
	doOnReconciled       // f, fetched, v, reason: recoverWith
	doBeginChain         //
	doPruneResetReceipts // from, to, text: why
)

// next is one step of pending work: its kind and the few values it
// carries (which ones, per kind, above); then is what follows it, if
// anything.
type next struct {
	kind nextKind
	then *next

	// The large values are held by pointer (never changed once set): a
	// next is allocated for every call and back-off, and an idle poll
	// makes several.
	st        State
	ld        *Load
	cp        *store.Checkpoint
	pg, last  *page
	pages     []*page
	i, n      int
	prom      *store.Promotion
	lease     store.Lease // the lease the call carried
	w         *reconcile.Witness
	f         *fetchRec
	fetched   *Fetched
	v         *verdict
	violation reconcile.Violation
	vs        []reconcile.Violation
	gen       uint64
	ids       []string
	expired   bool
	text      string
	reason    ParkReason
	from, to  string
	chunk     *store.ReceiptChunk
}

// resume runs k, when there is one.
func (m *Machine) resume(k *next) {
	if k != nil {
		m.run(k, nil)
	}
}

// run runs k; in is the answer to the call k was waiting for (nil for a
// continuation).
func (m *Machine) run(k *next, in Input) {
	switch k.kind {
	case onLoaded:
		m.onLoaded(*k.ld, in.(Loaded))
	case onParkChecked:
		m.onParkChecked(in.(ParkChecked))
	case onAbandoned:
		m.onAbandoned(k.text, in.(Abandoned), k.then)
	case onWitnessStored:
		m.onWitnessStored(*k.w, in.(WitnessStored), k.then)
	case onWitnessesStored:
		m.onWitnessesStored(k.pages, k.pg, in.(WitnessStored))
	case onReceiptStored:
		m.onReceiptStored(k.pg, k.n, in.(ReceiptStored), k.then)
	case onPromoted:
		m.onPromoted(k.pg, *k.prom, in.(Promoted), k.then)
	case onResolved:
		m.onResolved(k.pg, *k.prom, in.(Resolved), k.then)
	case onRestartCursor:
		m.onRestartCursor(k.reason, in.(RestartCursorFound))
	case onRestartPromoted:
		m.onRestartPromoted(k.prom.Lease, in.(Promoted))
	case onParked:
		m.onParked(k.reason, k.lease, in.(Parked))
	case onFailureNoted:
		m.onFailureNoted(k.lease, in.(FailureNoted))
	case onIncarnationVerified:
		m.onIncarnationVerified(k.text, in.(IncarnationFound), k.then)
	case onIncarnationRecorded:
		m.onIncarnationRecorded(k.prom.Lease, in.(Promoted))
	// A check covers every answer that arrived before its request began:
	// every one the machine holds when it answers (CheckIncarnation).
	case onIncarnationChecked:
		m.onIncarnationChecked(k.text, m.arrived, in.(IncarnationFound), k.then)
	case onIncarnationConfirmed:
		m.onIncarnationConfirmed(m.arrived, in.(IncarnationFound))
	case onCompleteChecked:
		m.onCompleteChecked(in.(IncarnationFound))
	case onEmissionConfirmed:
		m.onEmissionConfirmed(m.arrived, in.(IncarnationFound))
	case onReincarnated:
		m.onReincarnated(k.to, k.lease, in.(Reincarnated))
	case onWithdrawn:
		m.onWithdrawn(k.violation, k.vs, in.(Withdrawn), k.then)

	case onReceiptsLoaded:
		m.onReceiptsLoaded(in.(ReceiptsLoaded))
	case onReceiptsStored:
		m.onReceiptsStored(k.pg, in.(ReceiptsStored), *k.chunk)
	case onRereadCursor:
		m.onRereadCursor(in.(RestartCursorFound))
	case onRereadPromoted:
		m.onRereadPromoted(*k.prom, in.(Promoted))
	case onReceiptsPruned:
		m.onReceiptsPruned(in.(ReceiptsPruned))
	case onResetReceiptsPruned:
		m.onResetReceiptsPruned(k.from, k.to, k.text, in.(ReceiptsPruned))

	case doLoad:
		m.load()
	case doAfterLoad:
		m.afterLoad(*k.cp)
	case doStartChain, doBeginChain:
		m.beginChain()
	case doAskUnparked:
		m.askUnparked()
	case doAbandonAll:
		m.abandonAll(k.st, k.gen, k.ids, k.then)
	case doPutWitness:
		m.putWitness(*k.w, k.then)
	case doPutWitnesses:
		m.retryWitnesses(k.pages, k.pg)
	case doEmitWitnessed:
		m.rememberWitness(k.pg.w)
		m.emitChecked(k.pg)
	case doRefetchAfterNack:
		m.logf(Info, "Partition %s re-fetching cursor %s at generation %d after a failed delivery", m.part(), reconcile.CursorHash(k.pg.fromCursor), k.pg.fromGen)
		m.restartChain()
	case doAfterHold:
		m.afterHold(k.pg, k.text)
	case doAfterPromotion:
		m.afterPromotion(k.pg, k.last)
	case doResolve:
		m.resolve(k.pg, *k.prom, k.then)
	case doRestartChain:
		m.restartChain()
	case doSettlePages:
		m.settlePages(k.pages, k.i, k.then)
	case doRecoverNow:
		m.recoverNow(k.expired, k.reason)
	case doRestart:
		m.restartFromBoundary(k.expired, k.reason)
	case doParkWrite:
		m.parkWrite(k.reason)
	case doVerifyIncarnation:
		m.verifyIncarnation(k.text, k.then)
	case doPromoteHead:
		m.promoteHead()
	case doFinishComplete:
		m.finishComplete()
	case doConfirmEmission:
		m.confirmEmission()
	case doPruneResetReceipts:
		m.pruneResetReceipts(k.from, k.to, k.text)
	case doResetInto:
		m.resetInto(k.from, k.to, k.text)
	case doOnMalformed:
		m.onMalformed(k.f, k.text)
	case doOnReconciled:
		m.onReconciled(k.f, *k.fetched, *k.v, k.reason)
	default:
		panic("chain: unknown next kind")
	}
}
