package frontier

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/tidemark/tidemark/internal/coord"
)

// Snapshot is the combined frontier of one membership epoch, as computed by
// Tracker.Frontier or as last published. The zero Snapshot (epoch 0) means
// "nothing published yet".
type Snapshot struct {
	// Epoch is the membership epoch the snapshot belongs to.
	Epoch uint64
	// Scalar is the combined safe frontier; the zero watermark when
	// withheld.
	Scalar coord.Watermark
	// Proven is true exactly when Scalar is a proven combined frontier.
	Proven bool
	// Vector is every partition's complete-through watermark in the epoch
	// (zero: no evidence). It is always present, scalar or not.
	Vector map[string]coord.Watermark
	// HeldBy lists, sorted, the partitions holding the frontier back: those
	// lacking a complete-through watermark if any, otherwise those at the
	// minimum. Empty when mixed kinds leave no minimum.
	HeldBy []string
	// Reason explains a withheld scalar; empty when Proven.
	Reason string
}

// hasScalar reports whether s carries a proven scalar.
func (s Snapshot) hasScalar() bool { return s.Proven && !s.Scalar.IsZero() }

// String renders s deterministically for logs and golden files, e.g.
// "epoch 2 frontier 90 held by b vector a=120 b=90" or
// "epoch 3 frontier withheld (reason) vector a=120 c=none".
func (s Snapshot) String() string {
	var b strings.Builder
	b.WriteString("epoch ")
	b.WriteString(strconv.FormatUint(s.Epoch, 10))
	if s.hasScalar() {
		b.WriteString(" frontier ")
		b.WriteString(s.Scalar.String())
	} else {
		b.WriteString(" frontier withheld")
		if s.Reason != "" {
			b.WriteString(" (")
			b.WriteString(s.Reason)
			b.WriteString(")")
		}
	}
	if len(s.HeldBy) > 0 {
		b.WriteString(" held by ")
		b.WriteString(strings.Join(s.HeldBy, ","))
	}
	b.WriteString(" vector")
	for _, p := range slices.Sorted(maps.Keys(s.Vector)) {
		b.WriteString(" ")
		b.WriteString(p)
		b.WriteString("=")
		b.WriteString(s.Vector[p].String())
	}
	return b.String()
}

// NextPublication decides whether the computed snapshot next may replace
// the last published snapshot prev (the zero Snapshot when nothing is
// published). It returns what to publish and whether to write it; when
// publish is false, pub is prev.
//
//   - An older epoch than prev is never published (a stale view).
//   - A newer epoch is published whatever its scalar: proven, with its
//     scalar (which may be lower than prev's: readers see the new epoch);
//     unproven, with the scalar withheld and the vector.
//   - Within prev's epoch nothing decreases: a scalar lower than prev's, or
//     incomparable with it, is not published and neither is a snapshot
//     without a scalar once one was published (never retract); a vector
//     that lowers any partition, drops one, or adds one is refused too.
//     An admissible snapshot is published only when it differs from prev.
//
// A snapshot whose Proven is set without a scalar is treated as unproven.
func NextPublication(prev, next Snapshot) (pub Snapshot, publish bool) {
	if !next.hasScalar() {
		next.Scalar, next.Proven = coord.Watermark{}, false
	}
	switch {
	case next.Epoch < prev.Epoch:
		return prev, false
	case next.Epoch > prev.Epoch:
		return next, true
	}
	if prev.hasScalar() {
		if !next.hasScalar() {
			return prev, false
		}
		if c, err := next.Scalar.Compare(prev.Scalar); err != nil || c < 0 {
			return prev, false
		}
	}
	if vectorRegresses(prev.Vector, next.Vector) {
		return prev, false
	}
	if equalSnapshots(prev, next) {
		return prev, false
	}
	return next, true
}

// ScalarAdvanced reports whether pub carries a scalar that prev did not: a proven
// scalar in a newer epoch, a first scalar in prev's epoch, or a higher one.
// Use it on (prev, pub) of NextPublication to trigger "complete through"
// work once per advance.
func ScalarAdvanced(prev, pub Snapshot) bool {
	if !pub.hasScalar() {
		return false
	}
	if pub.Epoch != prev.Epoch || !prev.hasScalar() {
		return pub.Epoch >= prev.Epoch
	}
	return prev.Scalar.Less(pub.Scalar)
}

// vectorRegresses reports whether next, in the same epoch as prev, lowers
// or drops a partition's watermark or names a partition prev does not.
func vectorRegresses(prev, next map[string]coord.Watermark) bool {
	if len(prev) != len(next) {
		return true
	}
	for p, was := range prev {
		now, ok := next[p]
		if !ok {
			return true
		}
		if was.IsZero() {
			continue
		}
		if c, err := now.Compare(was); err != nil || c < 0 {
			return true
		}
	}
	return false
}

func equalSnapshots(a, b Snapshot) bool {
	return a.Epoch == b.Epoch && a.Scalar == b.Scalar && a.Proven == b.Proven && a.Reason == b.Reason &&
		slices.Equal(a.HeldBy, b.HeldBy) && maps.Equal(a.Vector, b.Vector)
}
