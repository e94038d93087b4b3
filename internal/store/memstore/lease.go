package memstore

import (
	"context"
	"fmt"

	"github.com/tidemark/tidemark/internal/store"
)

// ClaimLease implements Store.
func (s *Store) ClaimLease(_ context.Context, k store.Key, expect store.Lease, owner string) (store.Checkpoint, error) {
	if err := store.ValidateClaim(k, expect, owner); err != nil {
		return store.Checkpoint{}, err
	}
	return s.swapLease(k, "claim lease", expect, store.ClaimedLease(expect, owner))
}

// ReleaseLease implements Store.
func (s *Store) ReleaseLease(_ context.Context, k store.Key, held store.Lease) (store.Checkpoint, error) {
	if err := store.ValidateHeld(k, held); err != nil {
		return store.Checkpoint{}, err
	}
	return s.swapLease(k, "release lease", held, store.ReleasedLease(held))
}

// swapLease replaces the lease want by next, the one condition of every
// lease write. A checkpoint already holding next is the repeat of an
// applied write and is returned as such (see the package notes on leases).
func (s *Store) swapLease(k store.Key, op string, want, next store.Lease) (store.Checkpoint, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.checkpoints[k]
	if !ok {
		return store.Checkpoint{}, fmt.Errorf("%w: no checkpoint for %s (a lease lives on the checkpoint: create it first)", store.ErrNotFound, k)
	}
	if c.Lease == next {
		return cloneCheckpoint(c), nil
	}
	if c.Lease != want {
		w := cloneCheckpoint(c)
		return store.Checkpoint{}, store.LeaseFence(k, op, want, &w, "")
	}
	c.Lease = next
	s.checkpoints[k] = c
	return cloneCheckpoint(c), nil
}
