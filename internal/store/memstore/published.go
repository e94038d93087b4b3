package memstore

import (
	"context"
	"fmt"
	"slices"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/store"
)

var _ store.ShardedFrontier = (*Store)(nil)

// writeShardsLocked applies the shard writes of publishing next over the
// stored record (nil: none) the way the DynamoDB store does: each changed
// shard becomes the entry-wise maximum of what it holds and next's
// entries, and its version grows; a new epoch starts every shard at
// version 1. It returns the vector the record now holds. The caller holds
// s.mu.
func (s *Store) writeShardsLocked(stored *store.Frontier, next store.Frontier) map[string]coord.Watermark {
	n := store.ShardCount(len(next.Vector))
	vers := s.shardVersions[next.Scope]
	var prev store.Frontier
	if stored != nil && stored.Epoch == next.Epoch && len(vers) == n {
		prev = *stored
	} else {
		vers = make([]uint64, n)
	}
	vers = slices.Clone(vers)
	nextShards := store.SplitVector(next.Vector, n)
	prevShards := store.SplitVector(prev.Vector, n)
	out := make(map[string]coord.Watermark, len(next.Vector))
	for i := range n {
		merged, changed, _ := store.MergeShard(prevShards[i], nextShards[i])
		if changed || vers[i] == 0 {
			vers[i]++
		}
		for p, w := range merged {
			out[p] = w
		}
	}
	s.shardVersions[next.Scope] = vers
	if len(out) == 0 {
		return nil
	}
	return out
}

// LoadFrontierHead implements ShardedFrontier.
func (s *Store) LoadFrontierHead(_ context.Context, scope string) (store.FrontierHead, error) {
	if err := store.CheckName("scope", scope); err != nil {
		return store.FrontierHead{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.frontiers[scope]
	if !ok {
		return store.FrontierHead{}, fmt.Errorf("%w: no published frontier for scope %s", store.ErrNotFound, scope)
	}
	h := store.FrontierHead{Frontier: cloneFrontier(f), Shards: slices.Clone(s.shardVersions[scope])}
	h.Vector = nil
	if h.Shards == nil {
		h.Shards = []uint64{}
	}
	return h, nil
}

// LoadFrontierShards implements ShardedFrontier.
func (s *Store) LoadFrontierShards(_ context.Context, scope string, epoch uint64, shards []int) ([]store.FrontierShard, error) {
	if err := store.CheckName("scope", scope); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.frontiers[scope]
	vers := s.shardVersions[scope]
	out := make([]store.FrontierShard, 0, len(shards))
	var split []map[string]coord.Watermark
	if ok && f.Epoch == epoch {
		split = store.SplitVector(f.Vector, len(vers))
	}
	for _, i := range shards {
		sh := store.FrontierShard{Scope: scope, Epoch: epoch, Index: i}
		if split != nil && i >= 0 && i < len(split) {
			sh.Version, sh.Vector = vers[i], split[i]
		}
		out = append(out, sh)
	}
	return out, nil
}

var _ store.MembershipEpochReader = (*Store)(nil)

// MembershipEpoch implements MembershipEpochReader.
func (s *Store) MembershipEpoch(_ context.Context, scope string) (uint64, error) {
	if err := store.CheckName("scope", scope); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.members[scope]
	if !ok {
		return 0, fmt.Errorf("%w: no membership record for scope %s", store.ErrNotFound, scope)
	}
	return m.Epoch, nil
}
