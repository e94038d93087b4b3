package memstore

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/tidemark/tidemark/internal/store"
)

// RenewHeartbeat implements Store.
func (s *Store) RenewHeartbeat(_ context.Context, hb store.Heartbeat, held int) (store.Heartbeat, error) {
	if err := store.ValidateHeartbeat(hb); err != nil {
		return store.Heartbeat{}, err
	}
	if held < 0 {
		return store.Heartbeat{}, fmt.Errorf("%w: held %d", store.ErrInvalid, held)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	stored := s.heartbeat(hb.Scope, hb.Owner)
	if store.HeartbeatRenewApplied(hb, stored) {
		return *stored, nil
	}
	if why := store.HeartbeatRenewConflict(hb, stored); why != "" {
		return store.Heartbeat{}, store.HeartbeatFence(hb, "renew heartbeat", why)
	}
	next := store.RenewedHeartbeat(hb, held)
	s.putHeartbeat(next)
	return next, nil
}

// TakeOverHeartbeat implements Store.
func (s *Store) TakeOverHeartbeat(_ context.Context, seen store.Heartbeat, by string) (store.Heartbeat, error) {
	if err := store.ValidateHeartbeat(seen); err != nil {
		return store.Heartbeat{}, err
	}
	if err := store.CheckName("heartbeat taker", by); err != nil {
		return store.Heartbeat{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	stored := s.heartbeat(seen.Scope, seen.Owner)
	if store.HeartbeatTakeOverApplied(seen, by, stored) {
		return *stored, nil
	}
	if why := store.HeartbeatTakeOverConflict(seen, stored); why != "" {
		return store.Heartbeat{}, store.HeartbeatFence(seen, "take over heartbeat", why)
	}
	next := store.TakenOverHeartbeat(*stored, by)
	s.putHeartbeat(next)
	return next, nil
}

// ListHeartbeats implements Store.
func (s *Store) ListHeartbeats(_ context.Context, scope string) ([]store.Heartbeat, error) {
	if err := store.CheckName("scope", scope); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []store.Heartbeat
	for _, hb := range s.heartbeats[scope] {
		out = append(out, hb)
	}
	slices.SortFunc(out, func(a, b store.Heartbeat) int { return strings.Compare(a.Owner, b.Owner) })
	return out, nil
}

// DeleteHeartbeat implements Store.
func (s *Store) DeleteHeartbeat(_ context.Context, hb store.Heartbeat) error {
	if err := store.ValidateHeartbeat(hb); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if why := store.HeartbeatDeleteConflict(hb, s.heartbeat(hb.Scope, hb.Owner)); why != "" {
		return store.HeartbeatFence(hb, "delete heartbeat", why)
	}
	delete(s.heartbeats[hb.Scope], hb.Owner)
	return nil
}

func (s *Store) heartbeat(scope, owner string) *store.Heartbeat {
	hb, ok := s.heartbeats[scope][owner]
	if !ok {
		return nil
	}
	return &hb
}

func (s *Store) putHeartbeat(hb store.Heartbeat) {
	if s.heartbeats == nil {
		s.heartbeats = map[string]map[string]store.Heartbeat{}
	}
	if s.heartbeats[hb.Scope] == nil {
		s.heartbeats[hb.Scope] = map[string]store.Heartbeat{}
	}
	s.heartbeats[hb.Scope][hb.Owner] = hb
}
