package frontier

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/coord"
)

// The property tests run seeded math/rand/v2 histories (one PCG per seed,
// never the global source) against naive oracles recomputed from scratch.
// A failure names its subtest, e.g. seed=17; rerun it alone with
//
//	go test -run 'TestProperty_TrackerMatchesOracle/seed=17$' ./internal/frontier/

const propertySeeds = 200

// oracle is the naive model of a Tracker: a map, and the minimum recomputed
// from scratch over it.
type oracle struct {
	names []string // sorted
	w     map[string]coord.Watermark
}

func newOracle(names []string) *oracle {
	o := &oracle{names: slices.Sorted(slices.Values(names)), w: map[string]coord.Watermark{}}
	for _, n := range names {
		o.w[n] = coord.Watermark{}
	}
	return o
}

// apply predicts Tracker.Apply and updates the model.
func (o *oracle) apply(p string, w coord.Watermark) (Outcome, error) {
	cur, ok := o.w[p]
	switch {
	case !ok:
		return 0, ErrUnknownPartition
	case w.IsZero():
		return Unchanged, nil
	case cur.IsZero():
		o.w[p] = w
		return Advanced, nil
	case cur.Kind != w.Kind:
		return 0, coord.ErrIncomparable
	case w == cur:
		return Unchanged, nil
	case w.Less(cur):
		return Stale, nil
	}
	o.w[p] = w
	return Advanced, nil
}

// frontier is the minimum over the map, with the withholding rules.
func (o *oracle) frontier() (scalar coord.Watermark, proven bool, heldBy []string) {
	if len(o.names) == 0 {
		return coord.Watermark{}, false, nil
	}
	kinds := map[coord.Kind]bool{}
	for _, n := range o.names {
		if o.w[n].IsZero() {
			heldBy = append(heldBy, n)
		} else {
			kinds[o.w[n].Kind] = true
		}
	}
	if len(heldBy) > 0 {
		return coord.Watermark{}, false, heldBy
	}
	if len(kinds) > 1 {
		return coord.Watermark{}, false, nil
	}
	low := o.w[o.names[0]]
	for _, n := range o.names {
		if o.w[n].Less(low) {
			low = o.w[n]
		}
	}
	for _, n := range o.names {
		if o.w[n] == low {
			heldBy = append(heldBy, n)
		}
	}
	return low, true, heldBy
}

// requireNotAbove fails unless s is at or before every watermark of vec
// (which must all be comparable with it).
func requireNotAbove(t *testing.T, s coord.Watermark, vec map[string]coord.Watermark, ctx string) {
	t.Helper()
	for p, w := range vec {
		c, err := s.Compare(w)
		require.NoError(t, err, "partition %s: %s", p, ctx)
		require.LessOrEqual(t, c, 0, "published %s exceeds partition %s at %s: %s", s, p, w, ctx)
	}
}

// TestProperty_TrackerMatchesOracle drives a Tracker and the oracle with the
// same random updates (advances, late retries, repeats, zero watermarks,
// unknown partitions, and in one run out of four watermarks of other kinds)
// and checks after every update that:
//   - every outcome and error matches the oracle;
//   - the scalar equals the oracle's minimum, and is withheld exactly when
//     the oracle has no comparable coordinate; HeldBy and the vector match;
//   - MinHolder is a partition at the minimum;
//   - the published scalar, fed fresh and stale snapshots, never decreases
//     within the epoch, never exceeds any partition's watermark, and equals
//     the oracle's minimum whenever a fresh snapshot was offered.
func TestProperty_TrackerMatchesOracle(t *testing.T) {
	for seed := uint64(1); seed <= propertySeeds; seed++ {
		t.Run("seed="+strconv.FormatUint(seed, 10), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0xf207))
			n := rng.IntN(12) + 1
			names := make([]string, n)
			for i := range names {
				names[i] = fmt.Sprintf("p%02d", i)
			}
			rng.Shuffle(n, func(i, j int) { names[i], names[j] = names[j], names[i] })
			mixed := seed%4 == 0
			tr, err := NewTracker(1, names)
			require.NoError(t, err)
			o := newOracle(names)

			var pub Snapshot
			var history []Snapshot
			for op := range 300 {
				p := names[rng.IntN(n)]
				if rng.IntN(50) == 0 {
					p = "not-a-member"
				}
				cur := o.w[p]
				var w coord.Watermark
				switch r := rng.IntN(20); {
				case r == 0:
					// a page without complete-through evidence
				case r == 1 && mixed:
					w = coord.String(strconv.Itoa(rng.IntN(100)))
				default:
					// advances, repeats and late retries around the current value
					w = coord.Integer(cur.Int + int64(rng.IntN(16)) - 5)
				}
				ctx := fmt.Sprintf("seed %d op %d: %s=%s", seed, op, p, w)

				wantO, wantErr := o.apply(p, w)
				gotO, gotErr := tr.Apply(p, w)
				if wantErr != nil {
					require.ErrorIs(t, gotErr, wantErr, ctx)
				} else {
					require.NoError(t, gotErr, ctx)
					require.Equal(t, wantO, gotO, ctx)
				}

				scalar, proven, heldBy := o.frontier()
				snap := tr.Frontier()
				require.Equal(t, scalar, snap.Scalar, ctx)
				require.Equal(t, proven, snap.Proven, ctx)
				require.Equal(t, heldBy, snap.HeldBy, ctx)
				require.Equal(t, o.w, snap.Vector, ctx)
				require.Equal(t, proven, snap.Reason == "", ctx)

				holder, hw, ok := tr.MinHolder()
				require.True(t, ok, ctx)
				require.Equal(t, o.w[holder], hw, ctx)
				if heldBy != nil {
					require.Contains(t, heldBy, holder, ctx)
				}

				// Publication, sometimes from a stale view.
				offered, fresh := snap, true
				if len(history) > 0 && rng.IntN(4) == 0 {
					offered, fresh = history[rng.IntN(len(history))], false
				}
				history = append(history, snap)
				next, _ := NextPublication(pub, offered)
				if pub.hasScalar() {
					require.True(t, next.hasScalar(), "published scalar retracted: %s", ctx)
					require.False(t, next.Scalar.Less(pub.Scalar), "published scalar went from %s to %s: %s", pub.Scalar, next.Scalar, ctx)
				}
				if next.hasScalar() {
					requireNotAbove(t, next.Scalar, o.w, ctx)
				}
				if fresh && proven {
					require.Equal(t, scalar, next.Scalar, "a fresh snapshot is always admissible: %s", ctx)
				}
				pub = next
			}
		})
	}
}

// membershipMode chooses which membership changes of a random history may
// lack proof; the other kind always comes with a valid proof.
type membershipMode int

const (
	addsMayLackProof membershipMode = iota
	removesMayLackProof
)

// TestProperty_AddWithoutProofNeverYieldsScalar: over random multi-epoch
// histories, once a partition is added without proof of coverage (and
// nothing settles it), no epoch ever yields or publishes a scalar, however
// far every partition advances.
func TestProperty_AddWithoutProofNeverYieldsScalar(t *testing.T) {
	runMembershipHistories(t, addsMayLackProof)
}

// TestProperty_RemoveUnsealedNeverYieldsScalar: the same for removing a
// partition that is not proven sealed through the cutover.
func TestProperty_RemoveUnsealedNeverYieldsScalar(t *testing.T) {
	runMembershipHistories(t, removesMayLackProof)
}

func runMembershipHistories(t *testing.T, mode membershipMode) {
	withheldWithFullEvidence := 0
	for seed := uint64(1); seed <= propertySeeds; seed++ {
		t.Run("seed="+strconv.FormatUint(seed, 10), func(t *testing.T) {
			withheldWithFullEvidence += runMembershipHistory(t, seed, mode)
		})
	}
	// Not vacuous: many epochs had evidence from every partition, where a
	// tracker ignoring membership would have published a scalar.
	require.Greater(t, withheldWithFullEvidence, propertySeeds)
}

// runMembershipHistory plays one random history and returns how many
// snapshots were withheld only because of the membership.
func runMembershipHistory(t *testing.T, seed uint64, mode membershipMode) (withheld int) {
	rng := rand.New(rand.NewPCG(seed, uint64(mode)+0x3e3b))
	fresh := 0
	newName := func() string { fresh++; return fmt.Sprintf("p%03d", fresh) }

	// Epoch 1: every partition read from its beginning.
	var initial []AddProof
	for range rng.IntN(4) + 1 {
		initial = append(initial, AddProof{Partition: newName(), Replayed: true})
	}
	m := PlanChange(Membership{}, coord.Watermark{}, initial, nil)
	require.True(t, m.Proven, "seed %d", seed)

	marks := map[string]int64{} // durable watermark per partition (absent: no evidence)
	gap := false                // the oracle's view: some change lacked proof
	// unsettled holds partitions added without proof; the history never
	// removes them, since a sealed removal would settle the gap.
	unsettled := map[string]bool{}
	var pub Snapshot
	for range 10 {
		ctx := fmt.Sprintf("seed %d epoch %d", seed, m.Epoch)
		require.Equal(t, !gap, m.Proven, "PlanChange disagrees with the oracle's proof rules: %s (%s)", ctx, m.Reason)
		tr, err := NewTrackerFor(m)
		require.NoError(t, err, ctx)
		for _, p := range m.Partitions {
			if v, ok := marks[p]; ok {
				_, err := tr.Update(p, coord.Integer(v))
				require.NoError(t, err, ctx)
			}
		}
		for step := range 25 {
			p := m.Partitions[rng.IntN(len(m.Partitions))]
			if v, ok := marks[p]; ok {
				marks[p] = v + int64(rng.IntN(10))
			} else {
				marks[p] = pub.Scalar.Int + int64(rng.IntN(30)) - 10
			}
			_, err := tr.Update(p, coord.Integer(marks[p]))
			require.NoError(t, err, ctx)

			snap := tr.Frontier()
			next, _ := NextPublication(pub, snap)
			sctx := fmt.Sprintf("%s step %d: %s", ctx, step, snap)
			if gap {
				require.False(t, snap.Proven, "scalar computed in an unproven epoch: %s", sctx)
				require.True(t, next.Epoch != m.Epoch || !next.hasScalar(), "scalar published in an unproven epoch: %s", sctx)
				if allHaveEvidence(m.Partitions, marks) {
					withheld++
				}
			}
			if next.hasScalar() && next.Epoch == m.Epoch {
				vec := map[string]coord.Watermark{}
				for _, p := range m.Partitions {
					vec[p] = coord.Integer(marks[p])
				}
				requireNotAbove(t, next.Scalar, vec, sctx)
			}
			if pub.hasScalar() && next.Epoch == pub.Epoch {
				require.False(t, next.Scalar.Less(pub.Scalar), "decrease within epoch: %s", sctx)
			}
			pub = next
		}

		// Plan the next epoch. The oracle's proof rules, stated directly.
		published := pub.Scalar
		if pub.Epoch != m.Epoch {
			published = coord.Watermark{}
		}
		from := published
		if from.IsZero() {
			from = m.Cutover
		}
		var adds []AddProof
		var removes []RemoveProof
		for range rng.IntN(3) {
			a := AddProof{Partition: newName(), Replayed: rng.IntN(4) == 0}
			if rng.IntN(10) != 0 {
				a.CoveredFrom = coord.Integer(from.Int + int64(rng.IntN(21)) - 10)
			}
			valid := a.Replayed || (!from.IsZero() && !a.CoveredFrom.IsZero() && a.CoveredFrom.Int <= from.Int)
			if mode != addsMayLackProof && !valid {
				a.Replayed, valid = true, true
			}
			if !valid {
				gap, unsettled[a.Partition] = true, true
			}
			adds = append(adds, a)
		}
		var removable []string
		for _, p := range m.Partitions {
			if !unsettled[p] {
				removable = append(removable, p)
			}
		}
		if len(m.Partitions) > 1 && len(removable) > 0 && rng.IntN(2) == 0 {
			p := removable[rng.IntN(len(removable))]
			r := RemoveProof{Partition: p, Sealed: rng.IntN(10) < 7}
			if rng.IntN(10) != 0 {
				r.SealedThrough = coord.Integer(from.Int + int64(rng.IntN(21)) - 10)
			}
			valid := r.Sealed && !r.SealedThrough.IsZero() && (from.IsZero() || r.SealedThrough.Int >= from.Int)
			if mode != removesMayLackProof && !valid {
				r.Sealed, r.SealedThrough, valid = true, coord.Integer(from.Int+1), true
			}
			gap = gap || !valid
			removes = append(removes, r)
			delete(marks, p)
		}
		m = PlanChange(m, published, adds, removes)
	}
	return withheld
}

func allHaveEvidence(partitions []string, marks map[string]int64) bool {
	for _, p := range partitions {
		if _, ok := marks[p]; !ok {
			return false
		}
	}
	return true
}
