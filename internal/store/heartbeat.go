package store

import (
	"context"
	"fmt"
	"strconv"
)

// Heartbeats (scale-out liveness; docs/design.md#leases-and-fencing).
//
// Each instance sharing a scope keeps ONE heartbeat record there and proves
// itself alive by renewing it: one conditional write per renew interval,
// however many partitions it holds. A partition's lease (on its checkpoint)
// names the holder's owner and a counter that moves only on claim, takeover
// and release, never on renewal, so idle upkeep costs O(instances) writes.
//
// A heartbeat moves through these states (n is the counter, h the
// partitions held, t the owner that took it over):
//
//	none ──RenewHeartbeat({o,0}, h)──────────────▶ {o, 1, h}
//	{o, n, _} ──RenewHeartbeat({o,n}, h)──────────▶ {o, n+1, h}
//	{o, n, _} ──TakeOverHeartbeat({o,n}, t)──────▶ {o, n, taken by t}   final
//	{o, n, _} ──DeleteHeartbeat({o,n})───────────▶ none                 graceful stop, or cleanup of a taken one
//
// Renewal is conditional on the counter the holder last wrote AND on the
// heartbeat not being taken over: once an observer decided the owner dead
// (its counter unchanged for a lease period on the observer's own clock)
// and took the heartbeat over, the owner's next renewal fails and it stops
// every worker at once; the taker then claims the dead owner's partitions
// one conditional write each (expect the dead owner's lease). The takeover
// itself is conditional on the counter the observer saw, so a renewal that
// lands first wins and the owner is not taken over.
//
// A repeat of an applied RenewHeartbeat or TakeOverHeartbeat (the SDK's
// retry of a write whose response was lost) finds the write's exact result
// stored and succeeds: owners are unique per process incarnation.

// Heartbeat is one instance's liveness record in a scope.
type Heartbeat struct {
	Scope string
	// Owner is the lease owner "<instance_id>#<incarnation>".
	Owner string
	// Counter is incremented by each renewal: 1 after the first.
	Counter uint64
	// Held is how many partitions the owner held at its last renewal, so
	// the others compute fair shares without reading checkpoints.
	Held int
	// TakenBy names the owner that took this heartbeat over ("" while
	// live). A taken heartbeat can no longer be renewed.
	TakenBy string
}

// Taken reports whether h was taken over.
func (h Heartbeat) Taken() bool { return h.TakenBy != "" }

func (h Heartbeat) String() string {
	s := h.Owner + "/" + strconv.FormatUint(h.Counter, 10) + " holding " + strconv.Itoa(h.Held)
	if h.Taken() {
		s += " (taken over by " + h.TakenBy + ")"
	}
	return s
}

// HeartbeatStore is the heartbeat part of Store.
type HeartbeatStore interface {
	// RenewHeartbeat writes {hb.Owner, hb.Counter+1, held}, conditional on
	// the stored heartbeat of hb.Owner having counter hb.Counter (0: none
	// stored) and not being taken over. A lost condition returns
	// *FenceError (errors.Is ErrFenced); the repeat of an applied renewal
	// returns the stored heartbeat.
	RenewHeartbeat(ctx context.Context, hb Heartbeat, held int) (Heartbeat, error)
	// TakeOverHeartbeat marks the heartbeat of seen.Owner taken over by
	// by, conditional on its counter still being seen.Counter and it not
	// being taken over by anyone else. It writes nothing else.
	TakeOverHeartbeat(ctx context.Context, seen Heartbeat, by string) (Heartbeat, error)
	// ListHeartbeats returns every heartbeat of scope, in owner order
	// (one Query in DynamoDB).
	ListHeartbeats(ctx context.Context, scope string) ([]Heartbeat, error)
	// DeleteHeartbeat removes the heartbeat of hb.Owner, conditional on
	// its counter being hb.Counter and its TakenBy being hb.TakenBy. A
	// missing heartbeat is not an error.
	DeleteHeartbeat(ctx context.Context, hb Heartbeat) error
}

// RenewedHeartbeat is the heartbeat RenewHeartbeat(hb, held) writes.
func RenewedHeartbeat(hb Heartbeat, held int) Heartbeat {
	return Heartbeat{Scope: hb.Scope, Owner: hb.Owner, Counter: hb.Counter + 1, Held: held}
}

// TakenOverHeartbeat is the heartbeat TakeOverHeartbeat(seen, by) writes
// over stored.
func TakenOverHeartbeat(stored Heartbeat, by string) Heartbeat {
	stored.TakenBy = by
	return stored
}

// HeartbeatRenewConflict returns "" when RenewHeartbeat(hb, _) may write
// over stored (nil: none stored), otherwise why not.
func HeartbeatRenewConflict(hb Heartbeat, stored *Heartbeat) string {
	switch {
	case stored == nil && hb.Counter == 0:
		return ""
	case stored == nil:
		return fmt.Sprintf("no heartbeat of %s stored (it was removed), not counter %d", hb.Owner, hb.Counter)
	case stored.Taken():
		return "the heartbeat of " + hb.Owner + " was taken over by " + stored.TakenBy
	case stored.Counter != hb.Counter:
		return fmt.Sprintf("the heartbeat of %s is at counter %d, not %d", hb.Owner, stored.Counter, hb.Counter)
	}
	return ""
}

// HeartbeatRenewApplied reports whether stored already is the result of
// RenewHeartbeat(hb, _): a repeat of an applied renewal.
func HeartbeatRenewApplied(hb Heartbeat, stored *Heartbeat) bool {
	return stored != nil && !stored.Taken() && stored.Counter == hb.Counter+1
}

// HeartbeatTakeOverConflict returns "" when TakeOverHeartbeat(seen, _) may
// write over stored, otherwise why not.
func HeartbeatTakeOverConflict(seen Heartbeat, stored *Heartbeat) string {
	switch {
	case stored == nil:
		return "no heartbeat of " + seen.Owner + " stored"
	case stored.Taken():
		return "the heartbeat of " + seen.Owner + " was already taken over by " + stored.TakenBy
	case stored.Counter != seen.Counter:
		return fmt.Sprintf("the heartbeat of %s moved to counter %d since %d was seen (it is alive)", seen.Owner, stored.Counter, seen.Counter)
	}
	return ""
}

// HeartbeatTakeOverApplied reports whether stored already is the result
// of TakeOverHeartbeat(seen, by).
func HeartbeatTakeOverApplied(seen Heartbeat, by string, stored *Heartbeat) bool {
	return stored != nil && stored.TakenBy == by && stored.Counter == seen.Counter
}

// HeartbeatDeleteConflict returns "" when DeleteHeartbeat(hb) may delete
// stored (nil: nothing to delete, not a conflict).
func HeartbeatDeleteConflict(hb Heartbeat, stored *Heartbeat) string {
	switch {
	case stored == nil:
		return ""
	case stored.Counter != hb.Counter || stored.TakenBy != hb.TakenBy:
		return fmt.Sprintf("the heartbeat is %s, not %s", stored, hb)
	}
	return ""
}

// ValidateHeartbeat checks a heartbeat argument the way every store does.
func ValidateHeartbeat(hb Heartbeat) error {
	if err := CheckName("scope", hb.Scope); err != nil {
		return err
	}
	if err := CheckName("heartbeat owner", hb.Owner); err != nil {
		return err
	}
	if hb.Held < 0 {
		return fmt.Errorf("%w: heartbeat of %s holds %d partitions", ErrInvalid, hb.Owner, hb.Held)
	}
	if hb.Counter == ^uint64(0) {
		return fmt.Errorf("%w: heartbeat counter %d cannot be incremented", ErrInvalid, hb.Counter)
	}
	return nil
}

// HeartbeatFence is the *FenceError of a lost heartbeat write.
func HeartbeatFence(hb Heartbeat, op, reason string) error {
	return &FenceError{Key: Key{Scope: hb.Scope, Partition: "heartbeat " + hb.Owner}, Op: op, Reason: reason}
}
