package store

import (
	"context"
	"fmt"

	"github.com/tidemark/tidemark/internal/reconcile"
)

// MaxWitnessGroup bounds how many witnesses one PutWitnesses stores, and
// so how many generations one group spans: a group's witnesses are of
// strictly increasing generations of one partition, the last at most
// MaxWitnessGroup-1 above the first. A store that packs a group into one
// record reads the witnesses of generation G from the groups that begin
// at most MaxWitnessGroup-1 generations before it (a bounded read).
const MaxWitnessGroup = 8

// WitnessGrouper is the optional part of a WitnessStore that makes several
// witnesses durable in one write (group commit,
// docs/design.md#write-units-per-page). PutWitnesses stores every witness
// of ws or none: when it returns nil each is stored exactly as PutWitness
// would have stored it alone (the same reads, receipts, dispositions and
// pruning); storing the same group again is a no-op; a group whose first
// witness's (generation, attempt) is stored with other content is fenced
// (*FenceError) and nothing of it is written. A witness is written once,
// alone or in one group, and an attempt id names one response (the
// machine draws a fresh one for every fetch), so a group is known by its
// first witness.
type WitnessGrouper interface {
	PutWitnesses(ctx context.Context, ws []reconcile.Witness) error
}

// PutWitnesses makes every witness of ws durable: with one write when st
// groups witnesses (WitnessGrouper), otherwise one PutWitness each, in
// order. Either way nothing may be emitted before it returns nil; after an
// error some of ws may be stored, and writing the same ws again is
// idempotent.
func PutWitnesses(ctx context.Context, st WitnessStore, ws []reconcile.Witness) error {
	if len(ws) == 1 {
		return st.PutWitness(ctx, ws[0])
	}
	if g, ok := st.(WitnessGrouper); ok {
		return g.PutWitnesses(ctx, ws)
	}
	for _, w := range ws {
		if err := st.PutWitness(ctx, w); err != nil {
			return err
		}
	}
	return nil
}

// ValidateWitnessGroup rejects a group PutWitnesses cannot store: empty,
// larger than MaxWitnessGroup, of several partitions, of generations that
// do not strictly increase or span MaxWitnessGroup or more, larger than
// MaxRecordBytes in all (WitnessSize), or with a witness ValidateWitness
// rejects.
func ValidateWitnessGroup(ws []reconcile.Witness) error {
	if len(ws) == 0 || len(ws) > MaxWitnessGroup {
		return fmt.Errorf("%w: a witness group of %d witnesses (1 to %d)", ErrInvalid, len(ws), MaxWitnessGroup)
	}
	size := 0
	for i, w := range ws {
		if err := ValidateWitness(w); err != nil {
			return err
		}
		if size += WitnessSize(w); size > MaxRecordBytes {
			return fmt.Errorf("%w: a witness group of %d witnesses is over %d bytes, the limit of one stored item", ErrInvalid, len(ws), MaxRecordBytes)
		}
		if i == 0 {
			continue
		}
		if w.Scope != ws[0].Scope || w.Partition != ws[0].Partition {
			return fmt.Errorf("%w: a witness group spans partitions %s/%s and %s/%s", ErrInvalid, ws[0].Scope, ws[0].Partition, w.Scope, w.Partition)
		}
		if w.Generation <= ws[i-1].Generation {
			return fmt.Errorf("%w: a witness group's generations must strictly increase (%d after %d)", ErrInvalid, w.Generation, ws[i-1].Generation)
		}
		if w.Generation-ws[0].Generation >= MaxWitnessGroup {
			return fmt.Errorf("%w: a witness group spans generations %d to %d (at most %d)", ErrInvalid, ws[0].Generation, w.Generation, MaxWitnessGroup)
		}
	}
	return nil
}
