// Package frontierrec is the one conversion between the store's records
// (store.Membership, store.Frontier) and the frontier core's values
// (frontier.Membership, frontier.Snapshot). Every component that reads or
// publishes a frontier goes through it, so no field (Unproven, Reason,
// HeldBy) is dropped on one path and kept on another. It sits beside both
// so that neither the store port imports the frontier core nor the core
// the port.
package frontierrec

import (
	"github.com/tidemark/tidemark/internal/frontier"
	"github.com/tidemark/tidemark/internal/store"
)

// Membership is m as the frontier core's membership.
func Membership(m store.Membership) frontier.Membership {
	return frontier.Membership{Epoch: m.Epoch, Partitions: m.Partitions, Cutover: m.Cutover, Proven: m.Proven, Reason: m.Reason, Unproven: m.Unproven}
}

// Snapshot is the published record f as the frontier core's snapshot: its
// scalar is proven exactly when one was published.
func Snapshot(f store.Frontier) frontier.Snapshot {
	return frontier.Snapshot{
		Epoch: f.Epoch, Scalar: f.Scalar, Proven: !f.Scalar.IsZero(),
		Vector: f.Vector, HeldBy: f.HeldBy, Reason: f.Reason,
	}
}

// Record is the record that publishes s for scope, as a store keeps it:
// the scalar only when s proves it, the held-by list capped
// (store.CapHeldBy). Compare a computed snapshot with a stored record in
// this form (Snapshot(Record(scope, s))), or a list longer than the cap
// always looks changed.
func Record(scope string, s frontier.Snapshot) store.Frontier {
	f := store.Frontier{Scope: scope, Epoch: s.Epoch, Vector: s.Vector, HeldBy: store.CapHeldBy(s.HeldBy), Reason: s.Reason}
	if s.Proven {
		f.Scalar = s.Scalar
	}
	return f
}
