package store

import (
	"bytes"
	"context"
	"fmt"

	"github.com/tidemark/tidemark/internal/witness"
)

// ResolvePromotion decides, by reading only, whether promotion p took
// effect after Promote returned a transport error (the write may or may not
// have happened: its response was lost). It never writes.
//
// It returns the stored checkpoint and:
//   - applied = true when the checkpoint is p's result (PromotionApplied),
//     or when it has since moved further and p's witness is recorded as
//     promoted;
//   - applied = false otherwise. If the checkpoint still holds
//     p.FromCursor at p.FromGeneration, p did not take effect (yet) and the
//     caller may promote again: the lost write, should it still land, and
//     the new one race on the same condition and at most one wins. If the
//     checkpoint moved on, another writer won (or p's success can no longer
//     be told apart from a loss): the caller continues from the returned
//     checkpoint, marks its witness abandoned and never reuses p.
//
// err is non-nil only when the checkpoint could not be read
// (ErrNoCheckpoint or a transport failure): the outcome is still unknown;
// call again later.
func ResolvePromotion(ctx context.Context, s Store, p Promotion) (Checkpoint, bool, error) {
	cp, err := s.LoadCheckpoint(ctx, p.Key)
	if err != nil {
		return Checkpoint{}, false, fmt.Errorf("store: resolving promotion of %s from generation %d: %w", p.Key, p.FromGeneration, err)
	}
	// The question is only whether this write happened: compare without
	// the lease (a lease holder's checkpoint may have been renewed since
	// the promotion was built; a write that did not happen never counts).
	q := p
	q.Lease = Lease{}
	if PromotionApplied(q, cp) {
		return cp, true, nil
	}
	if cp.Generation > p.FromGeneration+1 && p.WitnessID != "" {
		ws, err := s.Witnesses(ctx, p.Key, p.FromGeneration)
		if err != nil {
			return Checkpoint{}, false, fmt.Errorf("store: resolving promotion of %s from generation %d: %w", p.Key, p.FromGeneration, err)
		}
		for _, w := range ws {
			if w.AttemptID == p.WitnessID && w.Disposition == witness.Promoted {
				return cp, true, nil
			}
		}
	}
	return cp, false, nil
}

// StillAt reports whether c still holds p's starting point (p.FromCursor at
// p.FromGeneration): after ResolvePromotion reported p not applied, p may
// then be written again.
func (p Promotion) StillAt(c Checkpoint) bool {
	return c.Key == p.Key && c.Generation == p.FromGeneration && bytes.Equal(c.Cursor, p.FromCursor)
}
