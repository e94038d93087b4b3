package store

import (
	"fmt"
	"strconv"
)

// Leases (scale-out: several instances share a scope's partitions).
//
// Liveness is the instance heartbeat (heartbeat.go): a partition's lease
// is never renewed, so the counter moves only on claim, takeover (a claim
// expecting a dead owner's lease) and release.
//
// A partition's lease lives on its checkpoint record, so that fencing stays
// ONE condition on ONE record: a promotion by a lease holder is conditional
// on the lease, the cursor and the generation together, and a writer whose
// lease was taken cannot promote, park or restart the partition any more.
//
// The lease of a checkpoint moves through these states (o, o' are owners,
// n the counter):
//
//	no lease {"", 0} ──ClaimLease(expect {"",0}, o)──▶ {o, 1}
//	{o, n}  ──ClaimLease(expect {o,n}, o')──▶ {o', n+1}   steal, or take-over of an expired lease
//	{o, n}  ──ReleaseLease({o,n})──────────▶ {"", n+1}    graceful hand-off
//	{"", n} ──ClaimLease(expect {"",n}, o)──▶ {o, n+1}
//
// Every transition is a conditional write on the exact (owner, counter) the
// writer read or holds, and strictly increases the counter: the counter is
// the fencing token. Nothing else of the checkpoint changes (cursor,
// generation, watermark, parked reason, epoch).
//
// Expiry is not stored: the store never compares clocks. An instance that
// sees the (owner, counter) pair of a lease unchanged for its lease period,
// measured on its own monotonic clock, may claim it with the pair it saw as
// expect; the condition makes that safe against a late renewal.
//
// What a lease fences. Promote and SetParked carry the writer's lease and
// fail with *FenceError once it changed. Witnesses and receipts are other
// records: DynamoDB cannot condition a write on another item without
// transactions (which dynalite lacks), so PutWitness, RecordReceipt and
// SetDisposition are not fenced by the lease. That is safe: a zombie (a
// paused or partitioned former holder) can write a PENDING witness or raise
// the receipts of its own witness, but it can never PROMOTE, and a witness
// alone advances nothing. A receipt records what the zombie's own outputs
// really acknowledged, so it stays true; a new holder classifies the
// zombie's witnesses like any earlier attempt of the same (cursor,
// generation).
//
// Owner names must be unique per process incarnation (the input appends a
// random incarnation suffix to its instance id): the stores recognise a
// lease write whose response was lost and retried by the SDK by finding the
// exact result (same owner, next counter) already stored, the way
// PromotionApplied recognises a promotion.

// Held reports whether l names an owner. A lease without an owner (the
// zero Lease, or {"", n} left by ReleaseLease) imposes no condition on
// Promote and SetParked.
func (l Lease) Held() bool { return l.Owner != "" }

func (l Lease) String() string {
	owner := l.Owner
	if owner == "" {
		owner = "unowned"
	}
	return owner + "/" + strconv.FormatUint(l.Counter, 10)
}

// Fence is the lease condition a Promotion or SetParked carrying l states:
// l itself when it names an owner, otherwise the zero Lease (no condition).
// Both stores apply it to their argument first, so passing back the
// unowned lease read from a released checkpoint is not an error.
func (l Lease) Fence() Lease {
	if !l.Held() {
		return Lease{}
	}
	return l
}

// ClaimedLease is the lease ClaimLease(expect, owner) writes.
func ClaimedLease(expect Lease, owner string) Lease {
	return Lease{Owner: owner, Counter: expect.Counter + 1}
}

// ReleasedLease is the lease ReleaseLease(held) writes: no owner, the next
// counter.
func ReleasedLease(held Lease) Lease { return Lease{Counter: held.Counter + 1} }

// LeaseConflict returns "" when the stored checkpoint (nil: none stored)
// holds exactly want, and otherwise the reason it does not. It is the
// condition of ClaimLease (want = expect) and ReleaseLease (want = held).
func LeaseConflict(want Lease, stored *Checkpoint) string {
	switch {
	case stored == nil:
		return "no checkpoint stored"
	case stored.Lease != want:
		return fmt.Sprintf("lease is %s, not %s", stored.Lease, want)
	}
	return ""
}

// ValidateClaim checks ClaimLease's arguments the way every store does.
func ValidateClaim(k Key, expect Lease, owner string) error {
	if err := k.Validate(); err != nil {
		return err
	}
	if err := CheckName("lease owner", owner); err != nil {
		return err
	}
	if expect.Owner != "" {
		if err := CheckName("expected lease owner", expect.Owner); err != nil {
			return err
		}
	}
	return checkCounter(expect)
}

// ValidateHeld checks the arguments of ReleaseLease: the held lease must
// name an owner.
func ValidateHeld(k Key, held Lease) error {
	if err := k.Validate(); err != nil {
		return err
	}
	if err := CheckName("held lease owner", held.Owner); err != nil {
		return err
	}
	return checkCounter(held)
}

func checkCounter(l Lease) error {
	if l.Counter == ^uint64(0) {
		return fmt.Errorf("%w: lease counter %d cannot be incremented", ErrInvalid, l.Counter)
	}
	return nil
}

// LeaseFence is the *FenceError of a lost lease write (op: "claim lease",
// "renew lease", "release lease").
func LeaseFence(k Key, op string, want Lease, winner *Checkpoint, suffix string) error {
	return &FenceError{Key: k, Op: op, Reason: LeaseConflict(want, winner) + suffix, Winner: winner}
}
