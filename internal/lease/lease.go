// Package lease is the pure part of tidemark's scale-out: the heartbeat
// lease lifecycle of one instance incarnation (Machine: which instances
// are dead, what to take over, claim and release), the claims it decides
// and the rendezvous order that spreads instances starting together over
// different partitions. No Benthos, no store calls, no clock of its own:
// the caller (internal/instance, which owns the Machine) passes every
// reading of its monotonic clock in, so the simulator runs the same rules
// under a simulated clock.
//
// Invariants (docs/design.md#leases-and-fencing):
//   - Expiry never compares two hosts' clocks: another instance is dead
//     when its heartbeat counter has not changed for the lease period on
//     this instance's clock, measured from when this instance first saw
//     it (Machine.Observe).
//   - An instance above its share releases only what the live instances
//     below their shares can take, so instances that agree on the live set
//     never hand partitions back and forth.
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

	"github.com/tidemark/tidemark/internal/store"
)

// ---------------------------------------------------------------------------
// Pure decisions.

// ClaimKind says why a lease is claimed.
type ClaimKind int

const (
	ClaimFree    ClaimKind = 1 + iota // unowned, or ours in the store but not held here
	ClaimExpired                      // its owner's heartbeat was taken over, or it has none
)

func (k ClaimKind) String() string {
	switch k {
	case ClaimFree:
		return "free"
	case ClaimExpired:
		return "expired"
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
