package store

import "github.com/tidemark/tidemark/internal/frontier"

// This file is the one conversion between the store's records and the
// frontier core's values; every component that reads or publishes a
// frontier goes through it, so no field (Unproven, Reason, HeldBy) is
// dropped on one path and kept on another.

// FrontierMembership is m as the frontier core's membership.
func (m Membership) FrontierMembership() frontier.Membership {
	return frontier.Membership{Epoch: m.Epoch, Partitions: m.Partitions, Cutover: m.Cutover, Proven: m.Proven, Reason: m.Reason, Unproven: m.Unproven}
}

// Snapshot is the published record f as the frontier core's snapshot: its
// scalar is proven exactly when one was published.
func (f Frontier) Snapshot() frontier.Snapshot {
	return frontier.Snapshot{
		Epoch: f.Epoch, Scalar: f.Scalar, Proven: !f.Scalar.IsZero(),
		Vector: f.Vector, HeldBy: f.HeldBy, Reason: f.Reason,
	}
}

// FrontierRecord is the record that publishes s for scope, as a store
// keeps it: the scalar only when s proves it, the held-by list capped
// (CapHeldBy). Compare a computed snapshot with a stored record in this
// form (FrontierRecord(scope, s).Snapshot()), or a list longer than the
// cap always looks changed.
func FrontierRecord(scope string, s frontier.Snapshot) Frontier {
	f := Frontier{Scope: scope, Epoch: s.Epoch, Vector: s.Vector, HeldBy: CapHeldBy(s.HeldBy), Reason: s.Reason}
	if s.Proven {
		f.Scalar = s.Scalar
	}
	return f
}
