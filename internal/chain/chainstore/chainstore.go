// Package chainstore performs the store calls of a partition's chain
// machine (internal/chain) against the store roles they need (Store) and
// returns their answers. It is the only place where the machine's calls meet the store,
// shared by the input and the simulator; the machine itself does no I/O.
package chainstore

import (
	"context"
	"errors"

	"github.com/tidemark/tidemark/internal/chain"
	"github.com/tidemark/tidemark/internal/membership"
	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/store"
)

// Store is what a chain's store calls use: its checkpoint, its witnesses,
// its re-read receipts, and the scope's records (an incarnation change
// recorded in the membership, a partition withdrawn). Leases are the
// driver's (a lease rides on the checkpoint writes the machine states).
type Store interface {
	store.CheckpointStore
	store.WitnessStore
	store.ReceiptStore
	store.ScopeStore
}

// Do performs a against st and returns the machine's input answering it;
// ok is false when a is not a store call (Fetch, RestartCursor and the
// actions without an answer are the driver's).
func Do(ctx context.Context, st Store, a chain.Action) (in chain.Input, ok bool) {
	switch a := a.(type) {
	case chain.Load:
		cp, err := st.LoadCheckpoint(ctx, a.Key)
		if errors.Is(err, store.ErrNotFound) {
			cp, err = st.CreateCheckpoint(ctx, a.Create)
			var fe *store.FenceError
			if errors.As(err, &fe) && fe.Winner != nil {
				cp, err = *fe.Winner, nil
			}
		}
		if err != nil {
			return chain.Loaded{Err: err}, true
		}
		ws, err := st.WitnessesFrom(ctx, a.Key, a.From(cp))
		if err != nil {
			return chain.Loaded{Err: err}, true
		}
		return chain.Loaded{Checkpoint: cp, Witnesses: ws}, true
	case chain.PutWitness:
		return chain.WitnessStored{Err: st.PutWitness(ctx, a.Witness)}, true
	case chain.PutWitnesses:
		return chain.WitnessStored{Err: store.PutWitnesses(ctx, st, a.Witnesses)}, true
	case chain.RecordReceipt:
		return chain.ReceiptStored{Err: st.RecordReceipt(ctx, a.Key, a.Generation, a.Attempt, a.AckedThrough)}, true
	case chain.Abandon:
		return chain.Abandoned{Err: st.SetDisposition(ctx, a.Key, a.Generation, a.Attempt, reconcile.Abandoned)}, true
	case chain.Promote:
		cp, err := st.Promote(ctx, a.Promotion)
		return chain.Promoted{Checkpoint: cp, Err: err}, true
	case chain.Resolve:
		cp, applied, err := store.ResolvePromotion(ctx, st, a.Promotion)
		return chain.Resolved{Checkpoint: cp, Applied: applied, Err: err}, true
	case chain.Park:
		cp, err := st.SetParked(ctx, a.Key, a.Cursor, a.Generation, a.Lease, a.Reason.String())
		return chain.Parked{Checkpoint: cp, Err: err}, true
	case chain.NoteFailure:
		cp, err := st.NoteFailure(ctx, a.Key, a.Cursor, a.Generation, a.Lease, a.Note)
		return chain.FailureNoted{Checkpoint: cp, Err: err}, true
	case chain.Reincarnate:
		return Reincarnate(ctx, st, a), true
	case chain.WaitUnparked:
		cp, err := st.LoadCheckpoint(ctx, a.Key)
		return chain.ParkChecked{Checkpoint: cp, Err: err}, true
	case chain.LoadReceipts:
		rs, err := st.Receipts(ctx, a.Key, a.From, a.HasFrom)
		return chain.ReceiptsLoaded{Receipts: rs, Err: err}, true
	case chain.PutReceipts:
		return chain.ReceiptsStored{Err: st.PutReceipts(ctx, a.Chunk)}, true
	case chain.PruneReceipts:
		n, err := st.PruneReceipts(ctx, a.Key, a.Through)
		return chain.ReceiptsPruned{N: n, Err: err}, true
	case chain.Withdraw:
		m, changed, err := membership.Withdraw(ctx, st, a.Key.Scope, a.Key.Partition, a.Reason)
		return chain.Withdrawn{Changed: changed, Epoch: m.Epoch, Err: err}, true
	}
	return nil, false
}

// Reincarnate records an incarnation change as a membership change (a new,
// unproven epoch: membership.RecordIncarnation), then writes the reset with
// that epoch. The epoch comes first: the reset's write is refused within
// the epoch of the old incarnation's watermark, so the frontier of an
// epoch never sees a partition's watermark lowered. A crash in between
// leaves an unproven epoch and the old checkpoint: the next check finds
// the change again and records it in a further epoch.
//
// Two writers that find the same change can interleave the two writes:
// the first records epoch e, the second e+1, the first resets at e, and
// the second's reset is refused. The record then names an epoch no
// checkpoint carries, and the scalar frontier would stay withheld. So a
// refused reset is written again, from the checkpoint as it now is, while
// that checkpoint is in the same new incarnation under an older epoch
// (and the same lease): the partition reads its new incarnation from the
// start once more (duplicates, never a gap) under the recorded epoch. At
// most maxResetRetries times; a checkpoint in any other state (another
// incarnation, a newer epoch, another lease) is the winner's.
func Reincarnate(ctx context.Context, st store.ScopeProgress, a chain.Reincarnate) chain.Reincarnated {
	m, err := membership.RecordIncarnation(ctx, st, a.Key.Scope, membership.IncarnationChange{Partition: a.Key.Partition, From: a.From, To: a.To, Why: a.Why})
	if errors.Is(err, membership.ErrIncarnationRecorded) {
		// Another writer reset the checkpoint into it: this one lost.
		return chain.Reincarnated{Err: &store.FenceError{Key: a.Key, Op: "reincarnate", Reason: err.Error()}}
	}
	if err != nil {
		return chain.Reincarnated{Err: err}
	}
	p := a.Reset
	p.Epoch = m.Epoch
	cp, err := st.Promote(ctx, p)
	for try := 0; try < maxResetRetries && errors.Is(err, store.ErrFenced); try++ {
		cur, lerr := st.LoadCheckpoint(ctx, a.Key)
		if lerr != nil || !resetOwed(cur, p) {
			break
		}
		p.FromCursor, p.FromGeneration = cur.Cursor, cur.Generation
		cp, err = st.Promote(ctx, p)
	}
	return chain.Reincarnated{Checkpoint: cp, Epoch: m.Epoch, Membership: m, Err: err}
}

// maxResetRetries bounds the resets Reincarnate writes again.
const maxResetRetries = 3

// resetOwed reports whether reset, refused, is still owed by its writer:
// the checkpoint cur was reset into the same incarnation by a change
// recorded in an older epoch than reset's, under the same lease.
func resetOwed(cur store.Checkpoint, reset store.Promotion) bool {
	return cur.Incarnation == reset.Incarnation && cur.IncarnationEpoch < reset.Epoch && cur.Lease == reset.Lease
}
