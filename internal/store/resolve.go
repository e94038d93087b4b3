package store

import (
	"bytes"
	"context"
	"fmt"
)

// ResolvePromotion decides, by reading only, whether promotion p took
// effect after Promote returned a transport error (the write may or may not
// have happened: its response was lost). It never writes.
//
// It returns the stored checkpoint and:
//   - applied = true when the checkpoint is p's result (PromotionApplied);
//   - applied = false otherwise. If the checkpoint still holds p's starting
//     point (p.StillAt), p did not take effect (yet) and the caller may
//     promote again: the lost write, should it still land, and the new one
//     race on the same condition and at most one wins. If the checkpoint
//     moved on, the caller continues from the returned checkpoint and never
//     reuses p. Whether p's witness lost is known only when the checkpoint
//     is at exactly p.FromGeneration+1 and names another witness; a
//     checkpoint that has moved further says nothing about it, so its
//     witness is left pending (dispositions are hints: "promoted" is never
//     stored, the checkpoint's promoted witness says it).
//
// err is non-nil only when the checkpoint could not be read
// (ErrNotFound or a transport failure): the outcome is still unknown;
// call again later.
func ResolvePromotion(ctx context.Context, s CheckpointStore, p Promotion) (Checkpoint, bool, error) {
	cp, err := s.LoadCheckpoint(ctx, p.Key)
	if err != nil {
		return Checkpoint{}, false, fmt.Errorf("store: resolving promotion of %s from generation %d: %w", p.Key, p.FromGeneration, err)
	}
	// The question is only whether this write happened: compare without
	// the lease (a lease holder's checkpoint may have been renewed since
	// the promotion was built; a write that did not happen never counts).
	q := p
	q.Lease = Lease{}
	return cp, PromotionApplied(q, cp), nil
}

// StillAt reports whether c still holds p's starting point (p.FromCursor at
// p.FromGeneration): after ResolvePromotion reported p not applied, p may
// then be written again.
func (p Promotion) StillAt(c Checkpoint) bool {
	return c.Key == p.Key && c.Generation == p.FromGeneration && bytes.Equal(c.Cursor, p.FromCursor)
}
