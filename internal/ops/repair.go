package ops

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/store"
)

// Repair is one planned conditional write.
type Repair struct {
	// Describe is the exact write, for the dry run and the confirmation.
	Describe string
	apply    func(ctx context.Context) error
}

// Apply performs the repair's conditional write.
func (r Repair) Apply(ctx context.Context) error { return r.apply(ctx) }

// PlanUnpark clears a partition's parked reason, conditional on the cursor
// and generation read now. The worker resumes from the durable cursor and
// classifies its next response again.
func PlanUnpark(ctx context.Context, st store.Store, k store.Key) (Repair, error) {
	cp, err := st.LoadCheckpoint(ctx, k)
	if err != nil {
		return Repair{}, err
	}
	if cp.Parked == "" {
		return Repair{}, fmt.Errorf("partition %s is not parked", k)
	}
	return Repair{
		Describe: fmt.Sprintf("clear the park reason of %s (%q) if it still holds generation %d", k, cp.Parked, cp.Generation),
		apply: func(ctx context.Context) error {
			_, err := st.SetParked(ctx, k, cp.Cursor, cp.Generation, cp.Lease, "")
			return err
		},
	}, nil
}

// PlanRestart moves a partition to a provider-supported stable boundary
// cursor: one promotion from the (cursor, generation) read now, keeping the
// watermark. A parked partition is unparked first (conditionally), because
// no promotion is made from a parked checkpoint. Events after the durable
// applied boundary are replayed and deduplicated downstream.
func PlanRestart(ctx context.Context, st store.Store, k store.Key, cursor []byte) (Repair, error) {
	cp, err := st.LoadCheckpoint(ctx, k)
	if err != nil {
		return Repair{}, err
	}
	if err := store.CheckCursor("cursor", cursor); err != nil {
		return Repair{}, err
	}
	return Repair{
		Describe: fmt.Sprintf("move %s from generation %d to generation %d at the given boundary cursor (watermark %s kept)%s",
			k, cp.Generation, cp.Generation+1, cp.Watermark, map[bool]string{true: ", unparking it first", false: ""}[cp.Parked != ""]),
		apply: func(ctx context.Context) error {
			cur := cp
			if cp.Parked != "" {
				if cur, err = st.SetParked(ctx, k, cp.Cursor, cp.Generation, cp.Lease, ""); err != nil {
					return err
				}
			}
			_, err := st.Promote(ctx, store.Promotion{
				Key: k, FromCursor: cur.Cursor, FromGeneration: cur.Generation,
				To: cursor, WitnessID: "repair:restart", Epoch: cur.Epoch, Lease: cur.Lease,
			})
			if err != nil && cp.Parked != "" {
				return fmt.Errorf("%s was unparked at generation %d, but the restart lost (the partition resumes from its own cursor): %w", k, cur.Generation, err)
			}
			return err
		},
	}, nil
}

// PlanAdvanceEpoch records, as a new membership epoch, the operator's proof
// that the current partition set's change is complete (added partitions
// covered, removed ones sealed) through cutover. One compare-and-swap on the
// membership epoch read now. The new epoch keeps the members' lineage: it
// is the provider's fact, not a proof, and a child still waits for its
// parents.
func PlanAdvanceEpoch(ctx context.Context, st store.Store, scope string, cutover coord.Watermark) (Repair, error) {
	m, err := st.LoadMembership(ctx, scope)
	if err != nil {
		return Repair{}, err
	}
	next := store.Membership{Scope: scope, Epoch: m.Epoch + 1, Partitions: slices.Clone(m.Partitions), Cutover: cutover, Proven: true,
		Parents: maps.Clone(m.Parents)}
	return Repair{
		Describe: fmt.Sprintf("advance membership of %s from epoch %d (proven %t) to epoch %d, proven through cutover %s, partitions %v",
			scope, m.Epoch, m.Proven, next.Epoch, cutover, next.Partitions),
		apply: func(ctx context.Context) error {
			_, err := st.SwapMembership(ctx, m.Epoch, next)
			return err
		},
	}, nil
}

// IsFenced reports whether a repair lost to a concurrent writer.
func IsFenced(err error) bool { return errors.Is(err, store.ErrFenced) }
