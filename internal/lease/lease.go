// Package lease is the pure part of tidemark's scale-out: which leases an
// instance claims, steals, releases or has lost in one balance round
// (Balance), the rendezvous order that spreads instances starting together
// over different partitions, and expiry tracking on the instance's own
// clock (Tracker). No Benthos, no store calls, no clock of its own: the
// caller passes every reading of its monotonic clock in, so the simulator
// can run the same rules under a simulated clock.
//
// Invariants (docs/design.md#leases-and-fencing):
//   - Expiry never compares two hosts' clocks: a foreign lease is expired
//     when its (owner, counter) pair has not changed for the lease period
//     on this instance's clock, measured from when this instance first saw
//     it (Tracker.Observe).
//   - A steal never takes the victim below the fair share nor this instance
//     above it, so instances that agree on the live count never steal back
//     and forth.
//   - Safety never depends on these decisions: every write of progress is
//     conditional on the lease it carries (package store); a wrong decision
//     costs a fenced write, never a lost or doubled event.
package lease

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tidemark/tidemark/internal/store"
)

// ---------------------------------------------------------------------------
// Pure decisions.

// View is one partition's lease as this instance saw it.
type View struct {
	Partition string
	Lease     store.Lease
	// Since is the reading of this instance's monotonic clock when it first
	// saw Lease: the pair (owner, counter) has not changed since.
	Since time.Time
}

// ClaimKind says why a lease is claimed.
type ClaimKind int

const (
	ClaimFree    ClaimKind = 1 + iota // unowned, or ours in the store but not held here
	ClaimExpired                      // unchanged for the lease period
	ClaimSteal                        // live, taken from the busiest owner
)

func (k ClaimKind) String() string {
	switch k {
	case ClaimFree:
		return "free"
	case ClaimExpired:
		return "expired"
	case ClaimSteal:
		return "steal"
	}
	return "ClaimKind(" + strconv.Itoa(int(k)) + ")"
}

// Claim is one ClaimLease to perform: Expect is the lease as seen.
type Claim struct {
	Partition string
	Expect    store.Lease
	Kind      ClaimKind
}

func (c Claim) String() string {
	return fmt.Sprintf("claim %s %s (was %s)", c.Partition, c.Kind, c.Expect)
}

// BalanceInput is everything balance decides from.
type BalanceInput struct {
	// Self is this instance's lease owner.
	Self string
	// Now is a reading of this instance's monotonic clock, comparable with
	// the Since of Leases.
	Now    time.Time
	Period time.Duration
	// MaxOwned caps the partitions held (0: no cap); MaxSteals caps the
	// steals of this round.
	MaxOwned  int
	MaxSteals int
	// Steal is false in rounds that may only claim free and expired
	// leases (the wake-ups at a lease's expiry between balance ticks).
	Steal bool
	// Held is the leases this instance holds, by partition.
	Held map[string]store.Lease
	// Busy partitions have a worker of this instance still stopping: they
	// are not claimed.
	Busy map[string]bool
	// Leases is every partition of the membership, as observed.
	Leases []View
}

// Plan is balance's decision.
type Plan struct {
	// Live counts the instances seen alive (owners of leases that are not
	// expired, and this one); Target is this instance's fair share.
	Live, Target int
	// Lost lists held partitions whose stored lease is no longer the held
	// one: stop their workers now.
	Lost []string
	// Release lists held partitions to hand off (above MaxOwned).
	Release []string
	// Claims are the claims to perform, in order.
	Claims []Claim
	// NextExpiry is the earliest instant at which a live foreign lease
	// expires if it does not change (zero: none).
	NextExpiry time.Time
}

func (p Plan) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "live %d target %d", p.Live, p.Target)
	if len(p.Lost) > 0 {
		fmt.Fprintf(&b, " lost %v", p.Lost)
	}
	if len(p.Release) > 0 {
		fmt.Fprintf(&b, " release %v", p.Release)
	}
	for _, c := range p.Claims {
		fmt.Fprintf(&b, "; %s", c)
	}
	return b.String()
}

// Balance decides one round. Rules, each with its reason:
//   - A held lease whose observed lease differs is lost: only this instance
//     writes its own leases, so another value means someone took it.
//   - A foreign lease is expired when now - Since >= Period: its pair has
//     not moved for a lease period on this instance's own clock.
//   - Live owners are the owners of leases that are not expired, plus this
//     instance; the target share is ceil(partitions / live), capped by
//     MaxOwned.
//   - Free leases (unowned, or owned by Self in the store without being
//     held: a claim whose response was lost) and expired leases are claimed
//     up to the target, in rendezvous-hash order of (Self, partition) so
//     that instances starting together prefer different partitions.
//   - Steal only when this instance is below the target and the busiest
//     live owner is above it, at most MaxSteals, never taking the victim
//     below the target nor this instance above it: after a steal the victim
//     still holds at least the target, so it never steals back (no
//     ping-pong while the instances agree on the live count).
//   - Held leases above MaxOwned are released.
func Balance(in BalanceInput) Plan {
	var plan Plan
	mine := 0
	lost := map[string]bool{}
	seen := make(map[string]View, len(in.Leases))
	for _, v := range in.Leases {
		seen[v.Partition] = v
	}
	for _, p := range sortedKeys(in.Held) {
		if v, ok := seen[p]; ok && v.Lease == in.Held[p] {
			mine++
			continue
		}
		plan.Lost = append(plan.Lost, p)
		lost[p] = true
	}

	counts := map[string]int{}
	byOwner := map[string][]string{}
	var free []Claim
	for _, v := range in.Leases {
		if h, ok := in.Held[v.Partition]; ok && h == v.Lease {
			continue
		}
		claimable := !lost[v.Partition] && !in.Busy[v.Partition]
		switch {
		case v.Lease.Owner == "" || v.Lease.Owner == in.Self:
			if claimable {
				free = append(free, Claim{Partition: v.Partition, Expect: v.Lease, Kind: ClaimFree})
			}
		case in.Now.Sub(v.Since) >= in.Period:
			if claimable {
				free = append(free, Claim{Partition: v.Partition, Expect: v.Lease, Kind: ClaimExpired})
			}
		default:
			counts[v.Lease.Owner]++
			if claimable {
				byOwner[v.Lease.Owner] = append(byOwner[v.Lease.Owner], v.Partition)
			}
			if exp := v.Since.Add(in.Period); plan.NextExpiry.IsZero() || exp.Before(plan.NextExpiry) {
				plan.NextExpiry = exp
			}
		}
	}
	plan.Live = 1 + len(counts)
	plan.Target = (len(in.Leases) + plan.Live - 1) / plan.Live
	if in.MaxOwned > 0 {
		plan.Target = min(plan.Target, in.MaxOwned)
	}

	if in.MaxOwned > 0 && mine > in.MaxOwned {
		var keep []string
		for _, p := range sortedKeys(in.Held) {
			if !lost[p] {
				keep = append(keep, p)
			}
		}
		Rendezvous(in.Self, keep)
		plan.Release = keep[in.MaxOwned:]
		slices.Sort(plan.Release)
		mine = in.MaxOwned
	}

	slices.SortFunc(free, func(a, b Claim) int { return cmpRendezvous(in.Self, a.Partition, b.Partition) })
	for _, c := range free {
		if mine >= plan.Target {
			break
		}
		plan.Claims = append(plan.Claims, c)
		mine++
	}

	if in.Steal && in.MaxSteals > 0 && mine < plan.Target {
		victim, most := "", 0
		for _, o := range sortedKeys(counts) {
			if counts[o] > most {
				victim, most = o, counts[o]
			}
		}
		if most > plan.Target {
			n := min(in.MaxSteals, plan.Target-mine, most-plan.Target, len(byOwner[victim]))
			parts := byOwner[victim]
			Rendezvous(in.Self, parts)
			for _, p := range parts[:n] {
				plan.Claims = append(plan.Claims, Claim{Partition: p, Expect: seen[p].Lease, Kind: ClaimSteal})
			}
		}
	}
	return plan
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Rendezvous sorts partitions by the rendezvous hash of (self, partition).
func Rendezvous(self string, parts []string) {
	slices.SortFunc(parts, func(a, b string) int { return cmpRendezvous(self, a, b) })
}

func cmpRendezvous(self, a, b string) int {
	ha, hb := rendezvousHash(self, a), rendezvousHash(self, b)
	switch {
	case ha < hb:
		return -1
	case ha > hb:
		return 1
	}
	return strings.Compare(a, b)
}

func rendezvousHash(self, part string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(self))
	h.Write([]byte{0})
	h.Write([]byte(part))
	// FNV-1a barely mixes its last bytes into the high bits; finish with
	// MurmurHash3's fmix64 so the order depends on every byte.
	x := h.Sum64()
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// Tracker remembers when this instance first saw each partition's
// current lease.
type Tracker struct {
	seen map[string]View
}

// Observe records the leases read at now (a reading taken after the read
// returned, so Since is never earlier than the write that set the pair) and
// returns the views of parts that have a checkpoint, in partition order.
func (tr *Tracker) Observe(cps []store.Checkpoint, parts []string, now time.Time) []View {
	if tr.seen == nil {
		tr.seen = map[string]View{}
	}
	want := make(map[string]bool, len(parts))
	for _, p := range parts {
		want[p] = true
	}
	var out []View
	for _, cp := range cps {
		if !want[cp.Partition] {
			continue
		}
		v, ok := tr.seen[cp.Partition]
		if !ok || v.Lease != cp.Lease {
			v = View{Partition: cp.Partition, Lease: cp.Lease, Since: now}
			tr.seen[cp.Partition] = v
		}
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b View) int { return strings.Compare(a.Partition, b.Partition) })
	return out
}
