package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/store"
)

// RunHeartbeat runs the heartbeat contract (internal/store/heartbeat.go):
// renewals are conditional on the counter and on not being taken over, a
// takeover is conditional on the counter seen, repeats of applied writes
// succeed, and every heartbeat of a scope is listed.
func RunHeartbeat(t *testing.T, newStore func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"HeartbeatRenewIncrements", testHeartbeatRenewIncrements},
		{"HeartbeatRenewNeedsTheCounterHeld", testHeartbeatRenewNeedsTheCounterHeld},
		{"HeartbeatTakeOverStopsRenewals", testHeartbeatTakeOverStopsRenewals},
		{"HeartbeatTakeOverLosesToARenewal", testHeartbeatTakeOverLosesToARenewal},
		{"HeartbeatRepeatsAreIdempotent", testHeartbeatRepeatsAreIdempotent},
		{"HeartbeatListIsPerScope", testHeartbeatListIsPerScope},
		{"HeartbeatDeleteConditional", testHeartbeatDeleteConditional},
		{"HeartbeatInvalid", testHeartbeatInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore(t)) })
	}
}

var hbA = store.Heartbeat{Scope: "orders", Owner: "i1#aaaa"}

func renewHB(t *testing.T, s store.Store, hb store.Heartbeat, held int) store.Heartbeat {
	t.Helper()
	got, err := s.RenewHeartbeat(ctx(t), hb, held)
	require.NoError(t, err)
	require.Equal(t, store.RenewedHeartbeat(hb, held), got)
	return got
}

func testHeartbeatRenewIncrements(t *testing.T, s store.Store) {
	hb := renewHB(t, s, hbA, 0)
	require.Equal(t, uint64(1), hb.Counter)
	hb = renewHB(t, s, hb, 7)
	hb = renewHB(t, s, hb, 9)
	require.Equal(t, uint64(3), hb.Counter)
	list, err := s.ListHeartbeats(ctx(t), hbA.Scope)
	require.NoError(t, err)
	require.Equal(t, []store.Heartbeat{hb}, list)
	require.Equal(t, 9, list[0].Held)
}

func testHeartbeatRenewNeedsTheCounterHeld(t *testing.T, s store.Store) {
	hb := renewHB(t, s, hbA, 1)
	hb = renewHB(t, s, hb, 1)
	// Creating again (counter 0) over a stored heartbeat loses.
	_, err := s.RenewHeartbeat(ctx(t), hbA, 1)
	requireFence(t, err)
	// A counter from the future loses.
	_, err = s.RenewHeartbeat(ctx(t), store.Heartbeat{Scope: hb.Scope, Owner: hb.Owner, Counter: hb.Counter + 5}, 1)
	requireFence(t, err)
	// A counter never stored loses.
	_, err = s.RenewHeartbeat(ctx(t), store.Heartbeat{Scope: hb.Scope, Owner: "nobody#0", Counter: 3}, 1)
	requireFence(t, err)
}

func testHeartbeatTakeOverStopsRenewals(t *testing.T, s store.Store) {
	hb := renewHB(t, s, hbA, 4)
	taken, err := s.TakeOverHeartbeat(ctx(t), hb, "i2#bbbb")
	require.NoError(t, err)
	require.Equal(t, store.TakenOverHeartbeat(hb, "i2#bbbb"), taken)
	require.True(t, taken.Taken())
	// The zombie's next renewal fails: it must stop every worker.
	_, err = s.RenewHeartbeat(ctx(t), hb, 4)
	fe := requireFence(t, err)
	require.Contains(t, fe.Reason, "taken over")
	// Nobody else can take it over again.
	_, err = s.TakeOverHeartbeat(ctx(t), hb, "i3#cccc")
	requireFence(t, err)
	list, err := s.ListHeartbeats(ctx(t), hb.Scope)
	require.NoError(t, err)
	require.Equal(t, []store.Heartbeat{taken}, list)
}

func testHeartbeatTakeOverLosesToARenewal(t *testing.T, s store.Store) {
	seen := renewHB(t, s, hbA, 2)
	renewHB(t, s, seen, 2) // the owner was alive after all
	_, err := s.TakeOverHeartbeat(ctx(t), seen, "i2#bbbb")
	fe := requireFence(t, err)
	require.Contains(t, fe.Reason, "alive")
	_, err = s.TakeOverHeartbeat(ctx(t), store.Heartbeat{Scope: hbA.Scope, Owner: "ghost#0", Counter: 1}, "i2#bbbb")
	requireFence(t, err)
}

// lossyHB applies each heartbeat write and loses its response, once.
type lossyHB struct{ store.Store }

var errHBLost = errors.New("storetest: heartbeat response lost")

func (l lossyHB) RenewHeartbeat(ctx context.Context, hb store.Heartbeat, held int) (store.Heartbeat, error) {
	if _, err := l.Store.RenewHeartbeat(ctx, hb, held); err != nil {
		return store.Heartbeat{}, err
	}
	return store.Heartbeat{}, errHBLost
}

func testHeartbeatRepeatsAreIdempotent(t *testing.T, s store.Store) {
	hb := renewHB(t, s, hbA, 1)
	_, err := lossyHB{s}.RenewHeartbeat(ctx(t), hb, 1)
	require.ErrorIs(t, err, errHBLost)
	// The retry of the applied renewal finds its result stored.
	got, err := s.RenewHeartbeat(ctx(t), hb, 1)
	require.NoError(t, err)
	require.Equal(t, hb.Counter+1, got.Counter)
	taken, err := s.TakeOverHeartbeat(ctx(t), got, "i2#bbbb")
	require.NoError(t, err)
	again, err := s.TakeOverHeartbeat(ctx(t), got, "i2#bbbb")
	require.NoError(t, err, "the repeat of an applied takeover succeeds")
	require.Equal(t, taken, again)
}

func testHeartbeatListIsPerScope(t *testing.T, s store.Store) {
	var want []store.Heartbeat
	for _, o := range []string{"i3#c", "i1#a", "i2#b"} {
		hb := renewHB(t, s, store.Heartbeat{Scope: "orders", Owner: o}, len(o))
		want = append(want, hb)
	}
	renewHB(t, s, store.Heartbeat{Scope: "orders2", Owner: "i9#z"}, 0)
	renewHB(t, s, store.Heartbeat{Scope: "order", Owner: "i8#y"}, 0)
	create(t, s, store.Key{Scope: "orders", Partition: "p0"}, "c0")
	got, err := s.ListHeartbeats(ctx(t), "orders")
	require.NoError(t, err)
	require.Equal(t, []store.Heartbeat{want[1], want[2], want[0]}, got)
	none, err := s.ListHeartbeats(ctx(t), "empty")
	require.NoError(t, err)
	require.Empty(t, none)
}

func testHeartbeatDeleteConditional(t *testing.T, s store.Store) {
	hb := renewHB(t, s, hbA, 1)
	requireFence(t, s.DeleteHeartbeat(ctx(t), store.Heartbeat{Scope: hb.Scope, Owner: hb.Owner, Counter: hb.Counter + 1}))
	taken, err := s.TakeOverHeartbeat(ctx(t), hb, "i2#bbbb")
	require.NoError(t, err)
	requireFence(t, s.DeleteHeartbeat(ctx(t), hb)) // a taken heartbeat is deleted only by naming its taker
	require.NoError(t, s.DeleteHeartbeat(ctx(t), taken))
	require.NoError(t, s.DeleteHeartbeat(ctx(t), taken), "deleting a missing heartbeat is not an error")
	list, err := s.ListHeartbeats(ctx(t), hb.Scope)
	require.NoError(t, err)
	require.Empty(t, list)
	// The owner's renewal after the removal fails.
	_, err = s.RenewHeartbeat(ctx(t), hb, 1)
	requireFence(t, err)
}

func testHeartbeatInvalid(t *testing.T, s store.Store) {
	for _, hb := range []store.Heartbeat{
		{Owner: "i1#a"},
		{Scope: "orders"},
		{Scope: "orders", Owner: "i1#a", Counter: ^uint64(0)},
	} {
		_, err := s.RenewHeartbeat(ctx(t), hb, 0)
		require.ErrorIs(t, err, store.ErrInvalid, "%+v", hb)
	}
	_, err := s.RenewHeartbeat(ctx(t), hbA, -1)
	require.ErrorIs(t, err, store.ErrInvalid)
	_, err = s.TakeOverHeartbeat(ctx(t), hbA, "")
	require.ErrorIs(t, err, store.ErrInvalid)
}
