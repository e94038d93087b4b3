package storetest

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/store"
)

// RunLease runs the lease contract (scale-out; internal/store/lease.go has
// the state diagram), one subtest per property, each on a fresh store from
// newStore. It is separate from Run so that `go test -run Lease` selects it.
//
// Usage:
//
//	func TestXLeaseContract(t *testing.T) {
//		storetest.RunLease(t, func(t *testing.T) store.Store { return newEmptyStore(t) })
//	}
func RunLease(t *testing.T, newStore func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"ClaimUnowned", testClaimUnowned},
		{"ClaimNeedsCheckpoint", testClaimNeedsCheckpoint},
		{"ClaimRace", testClaimRace},
		{"StealFencesZombie", testStealFencesZombie},
		{"ZombieWitnessNeverPromotes", testZombieWitnessNeverPromotes},
		{"ZombieRepeatIsFenced", testZombieRepeatIsFenced},
		{"ReleaseHandsOff", testReleaseHandsOff},
		{"OwnerlessLeaseNoCondition", testOwnerlessLeaseNoCondition},
		{"LeaseWritesKeepProgress", testLeaseWritesKeepProgress},
		{"CounterStrictlyIncreases", testCounterStrictlyIncreases},
		{"LeaseRepeatIsIdempotent", testLeaseRepeatIsIdempotent},
		{"LeaseInvalid", testLeaseInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newStore(t))
		})
	}
}

// requireLeaseFence requires err to be a lease fence whose winner holds
// the lease want.
func requireLeaseFence(t *testing.T, err error, want store.Lease) *store.FenceError {
	t.Helper()
	fe := requireFence(t, err)
	require.NotNil(t, fe.Winner, "a fenced lease write must carry the winner")
	require.Equal(t, want, fe.Winner.Lease)
	return fe
}

func claim(t *testing.T, s store.Store, k store.Key, expect store.Lease, owner string) store.Checkpoint {
	t.Helper()
	cp, err := s.ClaimLease(ctx(t), k, expect, owner)
	require.NoError(t, err)
	require.Equal(t, store.Lease{Owner: owner, Counter: expect.Counter + 1}, cp.Lease)
	return cp
}

func testClaimUnowned(t *testing.T, s store.Store) {
	cp := create(t, s, key, "C0")
	got := claim(t, s, key, store.Lease{}, "a")
	want := cp
	want.Lease = store.Lease{Owner: "a", Counter: 1}
	require.Equal(t, want, got)
	requireStored(t, s, want)

	// Claiming it again as if it were unowned loses to a.
	_, err := s.ClaimLease(ctx(t), key, store.Lease{}, "b")
	fe := requireLeaseFence(t, err, want.Lease)
	assert.Contains(t, fe.Reason, "lease")
	requireStored(t, s, want)
}

func testClaimNeedsCheckpoint(t *testing.T, s store.Store) {
	_, err := s.ClaimLease(ctx(t), key, store.Lease{}, "a")
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = s.ReleaseLease(ctx(t), key, store.Lease{Owner: "a", Counter: 1})
	require.ErrorIs(t, err, store.ErrNotFound)
	// No lease write creates a checkpoint.
	_, err = s.LoadCheckpoint(ctx(t), key)
	require.ErrorIs(t, err, store.ErrNotFound)
}

// Sixteen instances claim the same unowned partition: exactly one wins, the
// others are fenced with the winner's lease.
func testClaimRace(t *testing.T, s store.Store) {
	for round := range 4 {
		k := store.Key{Scope: key.Scope, Partition: fmt.Sprintf("race-%d", round)}
		create(t, s, k, "C0")
		const n = 16
		var (
			start = make(chan struct{})
			wg    sync.WaitGroup
			res   [n]store.Checkpoint
			errs  [n]error
		)
		for i := range n {
			wg.Go(func() {
				<-start
				res[i], errs[i] = s.ClaimLease(ctx(t), k, store.Lease{}, fmt.Sprintf("owner-%02d", i))
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i := range n {
			if errs[i] == nil {
				require.Equal(t, -1, winner, "two claims won: %d and %d", winner, i)
				winner = i
			}
		}
		require.NotEqual(t, -1, winner, "no claim won")
		want := store.Lease{Owner: fmt.Sprintf("owner-%02d", winner), Counter: 1}
		require.Equal(t, want, res[winner].Lease)
		for i := range n {
			if i != winner {
				requireLeaseFence(t, errs[i], want)
			}
		}
	}
}

// docs/design.md#invariants, invariant 2 (fencing). b takes the lease
// of a (a steal, or the take-over of a lease b saw expired); every write of
// a that carries its old lease is fenced and changes nothing.
func testStealFencesZombie(t *testing.T, s store.Store) {
	create(t, s, key, "C0")
	zombie := claim(t, s, key, store.Lease{}, "a")
	p := promotion(zombie, "C1", "w1")
	p.Lease = zombie.Lease
	zombie = promote(t, s, p)

	thief := claim(t, s, key, zombie.Lease, "b")
	require.Equal(t, store.Lease{Owner: "b", Counter: 2}, thief.Lease)

	p = promotion(zombie, "C2", "w2")
	p.Lease = zombie.Lease
	p.Watermark = integer(10)
	_, err := s.Promote(ctx(t), p)
	fe := requireWinner(t, err, thief)
	assert.Contains(t, fe.Reason, "lease")
	_, err = s.SetParked(ctx(t), key, zombie.Cursor, zombie.Generation, zombie.Lease, "zombie parks")
	requireWinner(t, err, thief)
	_, err = s.ReleaseLease(ctx(t), key, zombie.Lease)
	requireLeaseFence(t, err, thief.Lease)
	_, err = s.ClaimLease(ctx(t), key, zombie.Lease, "a")
	requireLeaseFence(t, err, thief.Lease)
	requireStored(t, s, thief)

	// The thief promotes from the same checkpoint.
	p = promotion(thief, "C2", "w2b")
	p.Lease = thief.Lease
	next := promote(t, s, p)
	require.Equal(t, thief.Lease, next.Lease)
}

// A zombie can still write a PENDING witness (witnesses are other records;
// the lease cannot condition them without transactions), but it can never
// promote it: the promotion is what the lease fences, and a witness alone
// advances nothing.
func testZombieWitnessNeverPromotes(t *testing.T, s store.Store) {
	create(t, s, key, "C0")
	zombie := claim(t, s, key, store.Lease{}, "a")
	thief := claim(t, s, key, zombie.Lease, "b")

	w := reconcile.Witness{
		Scope: key.Scope, Partition: key.Partition, Generation: 1, AttemptID: "zombie-1",
		InputCursor: []byte("C0"), Successor: []byte("Z1"),
		Events:      []reconcile.EventWitness{{IDHash: 1, Position: coord.IntPosition(1), Digest: 1}},
		Disposition: reconcile.Pending,
	}
	require.NoError(t, s.PutWitness(ctx(t), w))
	require.NoError(t, s.RecordReceipt(ctx(t), key, 1, "zombie-1", 1))

	p := promotion(zombie, "Z1", "zombie-1")
	p.Lease = zombie.Lease
	_, err := s.Promote(ctx(t), p)
	requireWinner(t, err, thief)
	requireStored(t, s, thief)
}

// The new holder may promote the very witness the former holder left (an
// exact replay resumes it); the former holder's late promotion of the same
// witness is then fenced, not taken for the repeat of its own write.
func testZombieRepeatIsFenced(t *testing.T, s store.Store) {
	create(t, s, key, "C0")
	zombie := claim(t, s, key, store.Lease{}, "a")
	thief := claim(t, s, key, zombie.Lease, "b")

	p := promotion(zombie, "C1", "w-left-by-a")
	p.Lease = thief.Lease
	applied := promote(t, s, p)

	p.Lease = zombie.Lease
	_, err := s.Promote(ctx(t), p)
	fe := requireWinner(t, err, applied)
	require.Contains(t, fe.Reason, "lease")
	// Its own repeat (same lease) is still recognised as applied.
	p.Lease = thief.Lease
	got, err := s.Promote(ctx(t), p)
	require.NoError(t, err)
	require.Equal(t, applied, got)
}

func testReleaseHandsOff(t *testing.T, s store.Store) {
	create(t, s, key, "C0")
	held := claim(t, s, key, store.Lease{}, "a").Lease
	released, err := s.ReleaseLease(ctx(t), key, held)
	require.NoError(t, err)
	require.Equal(t, store.Lease{Counter: 2}, released.Lease)
	requireStored(t, s, released)

	// The released owner can no longer write with its lease.
	p := promotion(released, "C1", "w1")
	p.Lease = held
	_, err = s.Promote(ctx(t), p)
	requireWinner(t, err, released)
	_, err = s.SetParked(ctx(t), key, released.Cursor, released.Generation, held, "released owner parks")
	requireWinner(t, err, released)

	// The next claimant starts from the known unowned state {"" , 2}: a
	// claim that expects "never owned" loses, the exact state wins.
	_, err = s.ClaimLease(ctx(t), key, store.Lease{}, "b")
	requireLeaseFence(t, err, released.Lease)
	got := claim(t, s, key, released.Lease, "b")
	require.Equal(t, store.Lease{Owner: "b", Counter: 3}, got.Lease)
}

// A lease without an owner (the unowned lease read back from a released
// checkpoint) imposes no condition on Promote and SetParked: passing back
// what was read is never an error, and single-instance operation after a
// leased run keeps working.
func testOwnerlessLeaseNoCondition(t *testing.T, s store.Store) {
	create(t, s, key, "C0")
	held := claim(t, s, key, store.Lease{}, "a").Lease
	cp, err := s.ReleaseLease(ctx(t), key, held)
	require.NoError(t, err)

	p := promotion(cp, "C1", "w1")
	p.Lease = cp.Lease
	next := promote(t, s, p)
	require.Equal(t, cp.Lease, next.Lease)
	parked, err := s.SetParked(ctx(t), key, next.Cursor, next.Generation, next.Lease, "x")
	require.NoError(t, err)
	require.Equal(t, "x", parked.Parked)
}

// Lease writes change only the lease: cursor, generation, watermark,
// applied boundary, epoch, promoted witness and parked reason stay.
func testLeaseWritesKeepProgress(t *testing.T, s store.Store) {
	cp := create(t, s, key, "C0")
	p := promotion(cp, "C1", "w1")
	p.Watermark = coord.Integer(77)
	p.Applied, p.HasApplied = coord.IntPosition(77), true
	p.Epoch = 4
	cp = promote(t, s, p)
	cp, err := s.SetParked(ctx(t), key, cp.Cursor, cp.Generation, store.Lease{}, "parked for a test")
	require.NoError(t, err)

	check := func(got store.Checkpoint, lease store.Lease) {
		t.Helper()
		want := cp
		want.Lease = lease
		require.Equal(t, want, got)
		requireStored(t, s, want)
	}
	// A parked partition can still be claimed: ownership and progress are
	// separate.
	got := claim(t, s, key, store.Lease{}, "a")
	check(got, store.Lease{Owner: "a", Counter: 1})
	got = claim(t, s, key, got.Lease, "b")
	check(got, store.Lease{Owner: "b", Counter: 2})
	got, err = s.ReleaseLease(ctx(t), key, got.Lease)
	require.NoError(t, err)
	check(got, store.Lease{Counter: 3})
}

// The counter is the fencing token: it strictly increases on every claim,
// takeover and release, across owners.
func testCounterStrictlyIncreases(t *testing.T, s store.Store) {
	create(t, s, key, "C0")
	var seen []uint64
	cp := claim(t, s, key, store.Lease{}, "a")
	seen = append(seen, cp.Lease.Counter)
	step := func(c store.Checkpoint, err error) {
		t.Helper()
		require.NoError(t, err)
		cp = c
		seen = append(seen, cp.Lease.Counter)
	}
	step(s.ClaimLease(ctx(t), key, cp.Lease, "b"))
	step(s.ClaimLease(ctx(t), key, cp.Lease, "c"))
	step(s.ReleaseLease(ctx(t), key, cp.Lease))
	step(s.ClaimLease(ctx(t), key, cp.Lease, "a"))
	step(s.ClaimLease(ctx(t), key, cp.Lease, "c"))
	for i := 1; i < len(seen); i++ {
		require.Greater(t, seen[i], seen[i-1], "counters %v", seen)
	}
	require.Equal(t, store.Lease{Owner: "c", Counter: 6}, cp.Lease)
}

// A lease write whose exact result is already stored is the repeat of an
// applied write (its response lost, the client retried): it succeeds and
// writes nothing more.
func testLeaseRepeatIsIdempotent(t *testing.T, s store.Store) {
	create(t, s, key, "C0")
	first := claim(t, s, key, store.Lease{}, "a")
	again, err := s.ClaimLease(ctx(t), key, store.Lease{}, "a")
	require.NoError(t, err)
	require.Equal(t, first, again)

	taken, err := s.ClaimLease(ctx(t), key, first.Lease, "b")
	require.NoError(t, err)
	again, err = s.ClaimLease(ctx(t), key, first.Lease, "b")
	require.NoError(t, err)
	require.Equal(t, taken, again)

	released, err := s.ReleaseLease(ctx(t), key, taken.Lease)
	require.NoError(t, err)
	again, err = s.ReleaseLease(ctx(t), key, taken.Lease)
	require.NoError(t, err)
	require.Equal(t, released, again)
	requireStored(t, s, released)
}

func testLeaseInvalid(t *testing.T, s store.Store) {
	create(t, s, key, "C0")
	claimErr := func(k store.Key, expect store.Lease, owner string) error {
		_, err := s.ClaimLease(ctx(t), k, expect, owner)
		return err
	}
	releaseErr := func(held store.Lease) error { _, err := s.ReleaseLease(ctx(t), key, held); return err }
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"claim without owner", claimErr(key, store.Lease{}, "")},
		{"claim, bad key", claimErr(store.Key{Scope: key.Scope}, store.Lease{}, "a")},
		{"claim, bad expected owner", claimErr(key, store.Lease{Owner: "\xff"}, "a")},
		{"claim, last counter", claimErr(key, store.Lease{Owner: "x", Counter: ^uint64(0)}, "a")},
		{"claim, owner too long", claimErr(key, store.Lease{}, string(make([]byte, store.MaxNameBytes+1)))},
		{"release unowned, counter", releaseErr(store.Lease{Counter: 3})},
		{"release unowned", releaseErr(store.Lease{})},
	} {
		require.ErrorIs(t, tc.err, store.ErrInvalid, tc.name)
	}
	got, err := s.LoadCheckpoint(ctx(t), key)
	require.NoError(t, err)
	require.True(t, got.Lease.IsZero(), "an invalid lease write changed the lease: %s", got.Lease)
}
