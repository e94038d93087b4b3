package storetest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/store"
)

// Membership epochs advance by compare-and-swap; a stale prevEpoch loses
// (invariant 8).
func testMembershipCAS(t *testing.T, s store.Store) {
	const scope = "orders"
	e1 := store.Membership{Scope: scope, Epoch: 1, Partitions: []string{"b", "a"}, Proven: true}
	got, err := s.SwapMembership(ctx(t), 0, e1)
	require.NoError(t, err)
	require.Equal(t, e1, got)

	e2 := store.Membership{Scope: scope, Epoch: 2, Partitions: []string{"a", "b", "c"}, Cutover: coord.Integer(90), Proven: false, Reason: "partition c added without proof of coverage from 90", Unproven: []string{"c"}}
	requireFence(t, firstErr(s.SwapMembership(ctx(t), 0, e2)))
	got, err = s.SwapMembership(ctx(t), 1, e2)
	require.NoError(t, err)
	require.Equal(t, e2, got)

	// A stale writer still holding epoch 1 loses.
	stale := store.Membership{Scope: scope, Epoch: 3, Partitions: []string{"a"}, Proven: true}
	fe := requireFence(t, firstErr(s.SwapMembership(ctx(t), 1, stale)))
	require.Contains(t, fe.Reason, "epoch 2")

	_, err = s.SwapMembership(ctx(t), 2, store.Membership{Scope: scope, Epoch: 2})
	require.ErrorIs(t, err, store.ErrInvalid, "the next epoch must be greater")
	_, err = s.SwapMembership(ctx(t), 2, store.Membership{Scope: scope, Epoch: 3, Partitions: []string{"a", "a"}})
	require.ErrorIs(t, err, store.ErrInvalid, "duplicate partitions")
	_, err = s.SwapMembership(ctx(t), 2, store.Membership{Scope: scope, Epoch: 3, Partitions: []string{""}})
	require.ErrorIs(t, err, store.ErrInvalid)

	loaded, err := s.LoadMembership(ctx(t), scope)
	require.NoError(t, err)
	require.Equal(t, e2, loaded)

	empty := store.Membership{Scope: scope, Epoch: 3}
	got, err = s.SwapMembership(ctx(t), 2, empty)
	require.NoError(t, err)
	require.Equal(t, empty, got)
}

// The lineage of a split (child -> parents) is stored with the membership
// and read back sorted; a lineage entry of a non-member or a partition that
// is its own parent is refused.
func testMembershipLineageRoundTrip(t *testing.T, s store.Store) {
	const scope = "shards"
	e1 := store.Membership{Scope: scope, Epoch: 1, Partitions: []string{"s0"}, Proven: true}
	_, err := s.SwapMembership(ctx(t), 0, e1)
	require.NoError(t, err)
	e2 := store.Membership{Scope: scope, Epoch: 2, Partitions: []string{"s0", "s1", "s2", "s3"}, Proven: true,
		Parents: map[string][]string{"s1": {"s0"}, "s2": {"s0"}, "s3": {"s2", "s1"}}}
	_, err = s.SwapMembership(ctx(t), 1, e2)
	require.NoError(t, err)
	loaded, err := s.LoadMembership(ctx(t), scope)
	require.NoError(t, err)
	require.Equal(t, map[string][]string{"s1": {"s0"}, "s2": {"s0"}, "s3": {"s1", "s2"}}, loaded.Parents)

	// The parent leaves; its children keep their lineage.
	e3 := store.Membership{Scope: scope, Epoch: 3, Partitions: []string{"s1", "s2"}, Proven: true, Parents: map[string][]string{"s1": {"s0"}, "s2": {"s0"}}}
	_, err = s.SwapMembership(ctx(t), 2, e3)
	require.NoError(t, err)
	loaded, err = s.LoadMembership(ctx(t), scope)
	require.NoError(t, err)
	require.Equal(t, e3.Parents, loaded.Parents)

	_, err = s.SwapMembership(ctx(t), 3, store.Membership{Scope: scope, Epoch: 4, Partitions: []string{"s1"}, Parents: map[string][]string{"s9": {"s0"}}})
	require.ErrorIs(t, err, store.ErrInvalid, "lineage of a non-member")
	_, err = s.SwapMembership(ctx(t), 3, store.Membership{Scope: scope, Epoch: 4, Partitions: []string{"s1"}, Parents: map[string][]string{"s1": {"s1"}}})
	require.ErrorIs(t, err, store.ErrInvalid, "its own parent")
}

// Discovery requests count up from 0 per scope.
func testDiscoveryRequestsCount(t *testing.T, s store.Store) {
	n, err := s.DiscoveryRequests(ctx(t), "orders")
	require.NoError(t, err)
	require.Zero(t, n)
	for want := uint64(1); want <= 3; want++ {
		n, err = s.RequestDiscovery(ctx(t), "orders")
		require.NoError(t, err)
		require.Equal(t, want, n)
	}
	n, err = s.DiscoveryRequests(ctx(t), "orders")
	require.NoError(t, err)
	require.Equal(t, uint64(3), n)
	n, err = s.DiscoveryRequests(ctx(t), "other")
	require.NoError(t, err)
	require.Zero(t, n, "another scope's requests")
}

func firstErr[T any](_ T, err error) error { return err }

// The published frontier never decreases within an epoch; a newer epoch may
// start lower; an older epoch is refused (invariants 3 and 7; the example
// of docs/design.md#frontier-example: A at 120, B at 90 -> 90, then B at
// 110 -> 110).
func testFrontierMonotone(t *testing.T, s store.Store) {
	const scope = "orders"
	f90 := store.Frontier{Scope: scope, Epoch: 1, Scalar: integer(90), HeldBy: []string{"B"}}
	got, err := s.PublishFrontier(ctx(t), store.Frontier{}, f90)
	require.NoError(t, err)
	f90.Version = 1
	require.Equal(t, f90, got, "the first publication is version 1")
	requireFence(t, firstErr(s.PublishFrontier(ctx(t), store.Frontier{}, f90)))

	lower := f90
	lower.Scalar = integer(80)
	fe := requireFence(t, firstErr(s.PublishFrontier(ctx(t), f90, lower)))
	require.Contains(t, fe.Reason, "lower")

	withdrawn := f90
	withdrawn.Scalar = coord.Watermark{}
	requireFence(t, firstErr(s.PublishFrontier(ctx(t), f90, withdrawn)))

	otherKind := f90
	otherKind.Scalar = coord.String("95")
	requireFence(t, firstErr(s.PublishFrontier(ctx(t), f90, otherKind)))

	f110 := store.Frontier{Scope: scope, Epoch: 1, Scalar: integer(110), HeldBy: []string{"B"}}
	f110, err = s.PublishFrontier(ctx(t), f90, f110)
	require.NoError(t, err)
	require.Equal(t, uint64(2), f110.Version)
	same := f110
	same.HeldBy = []string{"A", "B"}
	same, err = s.PublishFrontier(ctx(t), f110, same)
	require.NoError(t, err, "an equal scalar is not lower")

	// A publisher that still believes 90 is stored loses, even with a higher
	// scalar: the record changed under it.
	f120 := f110
	f120.Scalar = integer(120)
	fe = requireFence(t, firstErr(s.PublishFrontier(ctx(t), f90, f120)))
	require.Contains(t, fe.Reason, "110")

	// A new epoch may start lower (scalar withheld or smaller)...
	e2 := store.Frontier{Scope: scope, Epoch: 2, Scalar: integer(50), Reason: "partition C joined at 50"}
	e2, err = s.PublishFrontier(ctx(t), same, e2)
	require.NoError(t, err)
	e3 := store.Frontier{Scope: scope, Epoch: 3, Reason: "unproven membership change: scalar withheld", Vector: map[string]coord.Watermark{"A": integer(130), "C": {}}}
	e3, err = s.PublishFrontier(ctx(t), e2, e3)
	require.NoError(t, err)
	// ...but never go back to an older epoch.
	old := store.Frontier{Scope: scope, Epoch: 2, Scalar: integer(200)}
	fe = requireFence(t, firstErr(s.PublishFrontier(ctx(t), e3, old)))
	require.Contains(t, fe.Reason, "older")

	e3scalar := e3
	e3scalar.Scalar = integer(60)
	e3scalar, err = s.PublishFrontier(ctx(t), e3, e3scalar)
	require.NoError(t, err, "publishing a scalar where it was withheld")

	loaded, err := s.LoadFrontier(ctx(t), scope)
	require.NoError(t, err)
	require.Equal(t, e3scalar, loaded)

	_, err = s.PublishFrontier(ctx(t), e3scalar, store.Frontier{Scope: scope, Epoch: 0})
	require.ErrorIs(t, err, store.ErrInvalid)
	_, err = s.PublishFrontier(ctx(t), e3scalar, store.Frontier{Scope: "other", Epoch: 4})
	require.ErrorIs(t, err, store.ErrInvalid, "prev of another scope")
}

// A publisher whose view is stale loses the compare-and-swap on the
// record's version even when the epoch and scalar it expects are still
// there, and no publication lowers a partition's vector entry within an
// epoch: the stale publisher of two instances cannot take one partition's
// published watermark from 120 back to 100 while the scalar rises.
func testFrontierVersionFencesAStalePublisher(t *testing.T, s store.Store) {
	const scope = "invoices"
	v := func(a, b int64) map[string]coord.Watermark {
		return map[string]coord.Watermark{"A": integer(a), "B": integer(b)}
	}
	first, err := s.PublishFrontier(ctx(t), store.Frontier{}, store.Frontier{Scope: scope, Epoch: 1, Scalar: integer(90), Vector: v(100, 90)})
	require.NoError(t, err)
	// Publisher 1 sees A at 120; publisher 2, from the same record, only
	// the scalar's partition moving: both keep scalar 90.
	p1, err := s.PublishFrontier(ctx(t), first, store.Frontier{Scope: scope, Epoch: 1, Scalar: integer(90), Vector: v(120, 90)})
	require.NoError(t, err)
	require.Equal(t, first.Version+1, p1.Version)
	fe := requireFence(t, firstErr(s.PublishFrontier(ctx(t), first, store.Frontier{Scope: scope, Epoch: 1, Scalar: integer(90), Vector: v(100, 95)})))
	require.Contains(t, fe.Reason, "changed")
	// Re-reading gives it the record; from there, lowering A is refused.
	loaded, err := s.LoadFrontier(ctx(t), scope)
	require.NoError(t, err)
	require.Equal(t, p1, loaded)
	fe = requireFence(t, firstErr(s.PublishFrontier(ctx(t), loaded, store.Frontier{Scope: scope, Epoch: 1, Scalar: integer(95), Vector: v(100, 95)})))
	require.Contains(t, fe.Reason, "partition A")
	fe = requireFence(t, firstErr(s.PublishFrontier(ctx(t), loaded, store.Frontier{Scope: scope, Epoch: 1, Scalar: integer(95), Vector: map[string]coord.Watermark{"B": integer(95)}})))
	require.Contains(t, fe.Reason, "withdrawn")
	merged, err := s.PublishFrontier(ctx(t), loaded, store.Frontier{Scope: scope, Epoch: 1, Scalar: integer(95), Vector: v(120, 95)})
	require.NoError(t, err)
	require.Equal(t, loaded.Version+1, merged.Version)
	// A new epoch starts its own vector.
	_, err = s.PublishFrontier(ctx(t), merged, store.Frontier{Scope: scope, Epoch: 2, Vector: map[string]coord.Watermark{"A": integer(120), "C": {}}})
	require.NoError(t, err)
}

func testFrontierRoundTrip(t *testing.T, s store.Store) {
	f := store.Frontier{
		Scope:  "orders",
		Epoch:  7,
		Scalar: coord.Watermark{Kind: coord.KindTimestamp, Int: 1_764_741_600_000_000_001},
		Vector: map[string]coord.Watermark{
			"a":          {Kind: coord.KindTimestamp, Int: 1_764_741_600_000_000_001},
			"b#c":        {Kind: coord.KindTimestamp, Int: 1_764_741_700_000_000_000},
			"membership": {},
			"d":          coord.String("x\x00\xff"),
		},
		HeldBy: []string{"a", "membership"},
		Reason: "",
	}
	got, err := s.PublishFrontier(ctx(t), store.Frontier{}, f)
	require.NoError(t, err)
	f.Version = 1
	require.Equal(t, f, got)
	loaded, err := s.LoadFrontier(ctx(t), "orders")
	require.NoError(t, err)
	require.Equal(t, f, loaded)

	m := store.Membership{Scope: "orders", Epoch: 7, Partitions: []string{"z", "a", "b#c"}, Cutover: coord.String("\x00cut"), Proven: true}
	_, err = s.SwapMembership(ctx(t), 0, m)
	require.NoError(t, err)
	gotM, err := s.LoadMembership(ctx(t), "orders")
	require.NoError(t, err)
	require.Equal(t, m, gotM)
}
