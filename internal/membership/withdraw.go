package membership

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/tidemark/tidemark/internal/store"
)

// PlanWithdraw returns the membership that withdraws the scalar frontier of
// cur's scope because partition broke a claim it may have published (a
// contract monitor's observation, docs/design.md#contract-monitors): a new
// epoch with the same partitions and lineage, unproven, partition added to
// Unproven, reason first. Its cutover is the scalar published in cur's
// epoch (else cur's own). changed is false when partition is not a member
// or already lacks proof (the scalar is already withheld on its account).
//
// The partition stays unproven until an operator proves a cutover
// (advance-epoch): Decide never settles a member that is not fresh.
func PlanWithdraw(cur store.Membership, published store.Frontier, partition, reason string) (next store.Membership, changed bool) {
	if !slices.Contains(cur.Partitions, partition) || slices.Contains(cur.Unproven, partition) {
		return cur, false
	}
	next = cur
	next.Epoch = cur.Epoch + 1
	next.Partitions = slices.Clone(cur.Partitions)
	if published.Epoch == cur.Epoch && !published.Scalar.IsZero() {
		next.Cutover = published.Scalar
	}
	next.Proven = false
	next.Unproven = append(slices.Clone(cur.Unproven), partition)
	slices.Sort(next.Unproven)
	next.Reason = fmt.Sprintf("withdrawn: partition %s: %s", partition, reason)
	if cur.Reason != "" {
		next.Reason += "; " + cur.Reason
	}
	if cur.Parents != nil {
		next.Parents = make(map[string][]string, len(cur.Parents))
		for c, ps := range cur.Parents {
			next.Parents[c] = slices.Clone(ps)
		}
	}
	return next, true
}

// Withdraw writes PlanWithdraw with one compare-and-swap on the epoch,
// reading and planning again (a few times) when another writer changed the
// record in between. It returns the stored record and whether this call
// wrote it. Without a membership record there is no scalar to withdraw
// (none is published before the first epoch): nothing is written.
func Withdraw(ctx context.Context, st store.ScopeStore, scope, partition, reason string) (store.Membership, bool, error) {
	for try := 0; ; try++ {
		cur, err := st.LoadMembership(ctx, scope)
		if errors.Is(err, store.ErrNotFound) {
			return store.Membership{}, false, nil
		}
		if err != nil {
			return store.Membership{}, false, err
		}
		published, err := st.LoadFrontier(ctx, scope)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return store.Membership{}, false, err
		}
		next, changed := PlanWithdraw(cur, published, partition, reason)
		if !changed {
			return cur, false, nil
		}
		m, err := st.SwapMembership(ctx, cur.Epoch, next)
		if errors.Is(err, store.ErrFenced) && try < 5 {
			continue
		}
		if err != nil {
			return store.Membership{}, false, fmt.Errorf("withdrawing the frontier of %s (epoch %d): %w", scope, next.Epoch, err)
		}
		return m, true, nil
	}
}
