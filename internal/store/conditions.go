package store

import (
	"bytes"
	"fmt"
	"maps"
	"slices"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/reconcile"
)

// The conditions of the conditional writes, as pure functions. The in-memory store (memstore)
// evaluates them directly; the DynamoDB store states the same conditions as
// ConditionExpressions and, after a failed condition, uses these functions
// on the winner it read back to explain the loss. The contract suite checks
// that both agree.

// PromotionConflict returns "" when p's condition holds on the stored
// checkpoint (nil: none stored), and otherwise the reason it does not. The
// condition: a checkpoint exists, is not parked, holds p's lease (when p
// carries one), holds exactly p.FromCursor at p.FromGeneration, and its
// watermark is not above p.Watermark (when p carries one; a stored
// watermark of another kind also refuses); its incarnation is absent or
// p's (when p carries one). A Reset instead requires p.Epoch above the
// stored checkpoint's epoch (and ignores watermark and incarnation).
func PromotionConflict(p Promotion, stored *Checkpoint) string {
	switch {
	case stored == nil:
		return "no checkpoint stored"
	case stored.Parked != "":
		return "partition is parked: " + stored.Parked
	case !p.Lease.IsZero() && stored.Lease != p.Lease:
		return fmt.Sprintf("lease %s/%d does not hold the stored lease %s/%d", p.Lease.Owner, p.Lease.Counter, stored.Lease.Owner, stored.Lease.Counter)
	case stored.Generation != p.FromGeneration:
		return fmt.Sprintf("checkpoint is at generation %d, not %d", stored.Generation, p.FromGeneration)
	case !bytes.Equal(stored.Cursor, p.FromCursor):
		return fmt.Sprintf("stored cursor differs at generation %d", stored.Generation)
	}
	return progressConflict(p, stored)
}

// progressConflict is the part of PromotionConflict about what the write
// does to the stored progress: a watermark never lowered, an incarnation
// never silently replaced, a reset only into a newer epoch.
func progressConflict(p Promotion, stored *Checkpoint) string {
	switch {
	case p.Reset && p.Epoch <= stored.Epoch:
		return fmt.Sprintf("a reset into incarnation %s at epoch %d would clear the progress written at epoch %d: a new incarnation needs a newer membership epoch", p.Incarnation, p.Epoch, stored.Epoch)
	case p.Reset:
		return ""
	case p.Incarnation != "" && stored.Incarnation != "" && p.Incarnation != stored.Incarnation:
		return fmt.Sprintf("incarnation %s differs from the stored %s", p.Incarnation, stored.Incarnation)
	case !p.Watermark.IsZero() && !stored.Watermark.IsZero() && stored.Watermark.Kind != p.Watermark.Kind:
		return fmt.Sprintf("watermark %s (%s) is not comparable with the stored %s (%s)", p.Watermark, p.Watermark.Kind, stored.Watermark, stored.Watermark.Kind)
	case !p.Watermark.IsZero() && p.Watermark.Less(stored.Watermark):
		return fmt.Sprintf("watermark %s is lower than the stored %s", p.Watermark, stored.Watermark)
	}
	return ""
}

// MaxPromotionPages bounds the pages one coalesced promotion may cover.
const MaxPromotionPages = 1024

// ToGeneration is the generation p writes: FromGeneration plus the pages it
// promotes (at least one).
func (p Promotion) ToGeneration() uint64 { return p.FromGeneration + max(p.Pages, 1) }

// Apply returns c as p leaves it when p's condition holds on c: the
// checkpoint every store writes (and the one a coalescing machine reasons
// from between the pages of one write).
func (p Promotion) Apply(c Checkpoint) Checkpoint {
	c.Cursor = bytes.Clone(p.To)
	c.Generation = p.ToGeneration()
	c.PromotedWitness = p.WitnessID
	c.Epoch = p.Epoch
	if !p.Watermark.IsZero() {
		c.Watermark, c.Finality = NormalizeWatermark(p.Watermark), p.Finality
	}
	if p.HasApplied {
		c.Applied, c.HasApplied, c.AppliedID = p.Applied, true, p.AppliedID
	}
	c.Complete = p.Complete
	c.Failing = "" // progress: the failures it noted are over
	if p.Violations != nil {
		c.Violations = maps.Clone(p.Violations)
	}
	if p.Incarnation != "" {
		c.Incarnation = p.Incarnation
	}
	if p.Reset {
		// The coordinates restart with the incarnation.
		c.Watermark, c.Finality = coord.Watermark{}, reconcile.Basis{}
		c.Applied, c.HasApplied, c.AppliedID = coord.Position{}, false, ""
		c.IncarnationEpoch = p.Epoch
		c.Reread = RereadState{}
	}
	if p.Reread != nil && !p.Reset {
		c.Reread = *p.Reread
	}
	if p.Repairs != nil {
		c.Repairs = CloneRepairs(p.Repairs)
	}
	return c
}

// PromotionApplied reports whether the stored checkpoint is exactly the
// result of p: generation ToGeneration(), cursor To, promoted witness
// WitnessID (and p's watermark, when p carries one), under p's lease when p
// carries one. A promotion without a WitnessID can never be recognised and
// always reports false.
//
// Both stores use it after a failed condition: when the loser is in fact the
// writer of the stored state (its first attempt was applied and its response
// lost, then the SDK retried), Promote returns the stored checkpoint instead
// of a *FenceError. The lease matters: a new lease holder may promote the
// very witness a former holder left (an exact replay resumes it), and the
// former holder's late promotion of it must still be fenced.
func PromotionApplied(p Promotion, stored Checkpoint) bool {
	return p.WitnessID != "" &&
		stored.Generation == p.ToGeneration() &&
		stored.PromotedWitness == p.WitnessID &&
		bytes.Equal(stored.Cursor, p.To) &&
		(p.Watermark.IsZero() || SameWatermark(stored.Watermark, p.Watermark)) &&
		stored.Complete == p.Complete &&
		(p.Incarnation == "" || stored.Incarnation == p.Incarnation) &&
		(!p.Reset || (stored.IncarnationEpoch == p.Epoch && stored.Watermark.IsZero())) &&
		(!p.Lease.Held() || stored.Lease == p.Lease)
}

// ParkConflict returns "" when SetParked's condition holds on the stored
// checkpoint (nil: none stored): it holds cursor at generation, and lease
// when one is given.
func ParkConflict(cursor []byte, generation uint64, lease Lease, stored *Checkpoint) string {
	switch {
	case stored == nil:
		return "no checkpoint stored"
	case !lease.IsZero() && stored.Lease != lease:
		return fmt.Sprintf("lease %s/%d does not hold the stored lease %s/%d", lease.Owner, lease.Counter, stored.Lease.Owner, stored.Lease.Counter)
	case stored.Generation != generation:
		return fmt.Sprintf("checkpoint is at generation %d, not %d", stored.Generation, generation)
	case !bytes.Equal(stored.Cursor, cursor):
		return fmt.Sprintf("stored cursor differs at generation %d", stored.Generation)
	}
	return ""
}

// IsZero reports whether f is the zero Frontier, which PublishFrontier's
// prev uses for "none stored". Published frontiers have an epoch >= 1.
func (f Frontier) IsZero() bool { return f.Epoch == 0 && f.Scalar.IsZero() }

// FrontierRegression returns "" when publishing next over prev keeps the
// frontier monotone, and otherwise the reason it does not: next may not go
// back to an older epoch, and within one epoch it may neither lower the
// scalar, change its coordinate kind, nor withdraw a published scalar.
func FrontierRegression(prev, next Frontier) string {
	switch {
	case prev.IsZero():
		return ""
	case next.Epoch < prev.Epoch:
		return fmt.Sprintf("epoch %d is older than the published epoch %d", next.Epoch, prev.Epoch)
	case next.Epoch > prev.Epoch || prev.Scalar.IsZero():
		return ""
	case next.Scalar.IsZero():
		return fmt.Sprintf("withdrawing the published scalar %s within epoch %d", prev.Scalar, prev.Epoch)
	case next.Scalar.Kind != prev.Scalar.Kind:
		return fmt.Sprintf("scalar %s (%s) is not comparable with the published %s (%s)", next.Scalar, next.Scalar.Kind, prev.Scalar, prev.Scalar.Kind)
	case next.Scalar.Less(prev.Scalar):
		return fmt.Sprintf("scalar %s is lower than the published %s in epoch %d", next.Scalar, prev.Scalar, prev.Epoch)
	}
	return vectorRegression(prev, next)
}

// vectorRegression returns why next's vector lowers a partition's
// published watermark within prev's epoch, or "".
func vectorRegression(prev, next Frontier) string {
	if next.Epoch != prev.Epoch {
		return ""
	}
	for _, p := range slices.Sorted(maps.Keys(prev.Vector)) {
		w := prev.Vector[p]
		if w.IsZero() {
			continue
		}
		n, ok := next.Vector[p]
		if !ok || n.IsZero() {
			return fmt.Sprintf("partition %s's published watermark %s is withdrawn within epoch %d", p, w, prev.Epoch)
		}
		if c, err := n.Compare(w); err != nil || c < 0 {
			return fmt.Sprintf("partition %s's watermark %s is lower than (or not comparable with) the published %s in epoch %d", p, n, w, prev.Epoch)
		}
	}
	return ""
}

// FrontierMatches reports whether the stored frontier (nil: none stored) is
// still prev as PublishFrontier compares it: same version, epoch and
// scalar.
func FrontierMatches(stored *Frontier, prev Frontier) bool {
	if prev.IsZero() {
		return stored == nil
	}
	return stored != nil && stored.Version == prev.Version && stored.Epoch == prev.Epoch && SameWatermark(stored.Scalar, prev.Scalar)
}

// SameWitness reports whether a and b record the same response: the same
// input cursor, ordered events, successor, marker, complete-through
// watermark and sealed flag. Disposition and AckedThrough change over a
// witness's life and are not compared. PutWitness uses it to tell an
// idempotent repeat from a conflicting reuse of an attempt id.
func SameWitness(a, b reconcile.Witness) bool {
	return bytes.Equal(a.InputCursor, b.InputCursor) &&
		bytes.Equal(a.Successor, b.Successor) &&
		bytes.Equal(a.Marker, b.Marker) &&
		slices.Equal(a.Events, b.Events) &&
		SameWatermark(a.CompleteThrough, b.CompleteThrough) &&
		a.Sealed == b.Sealed
}

// SameWatermark reports whether a and b are the same coordinate (both zero,
// or of one kind and equal), ignoring fields their kind does not use.
func SameWatermark(a, b coord.Watermark) bool {
	return NormalizeWatermark(a) == NormalizeWatermark(b)
}

// NormalizeWatermark clears the fields w's kind does not use, which is how
// every store returns a watermark.
func NormalizeWatermark(w coord.Watermark) coord.Watermark {
	switch w.Kind {
	case coord.KindNone:
		return coord.Watermark{}
	case coord.KindString, coord.KindDecimal:
		return coord.Watermark{Kind: w.Kind, Str: w.Str}
	case coord.KindInteger, coord.KindTimestamp:
		return coord.Watermark{Kind: w.Kind, Int: w.Int}
	}
	return w
}

// ValidateUnpark checks Unpark's arguments the way every store does.
func ValidateUnpark(k Key, cursor []byte, lease Lease, repairs []RepairEntry) error {
	if err := ValidatePark(k, cursor, lease); err != nil {
		return err
	}
	return CheckRepairs(repairs)
}

// ValidatePark checks SetParked's arguments the way every store does.
func ValidatePark(k Key, cursor []byte, lease Lease) error {
	if err := k.Validate(); err != nil {
		return err
	}
	if err := CheckCursor("cursor", cursor); err != nil {
		return err
	}
	return checkLease(lease)
}

// ValidateDisposition checks SetDisposition's arguments the way every store
// does: only Promoted and Abandoned can be set.
func ValidateDisposition(k Key, attempt string, d reconcile.Disposition) error {
	if err := ValidateAttempt(k, attempt); err != nil {
		return err
	}
	if d != reconcile.Promoted && d != reconcile.Abandoned {
		return fmt.Errorf("%w: a witness can only be marked promoted or abandoned, not %s", ErrInvalid, d)
	}
	return nil
}

// DispositionFence is the error of SetDisposition on a witness whose
// disposition is already final (stored) and differs from want.
func DispositionFence(k Key, generation uint64, attempt string, stored, want reconcile.Disposition) error {
	return &FenceError{Key: k, Op: "set disposition", Reason: fmt.Sprintf("witness %s is already %s, cannot become %s", attempt, stored, want), WantGeneration: generation}
}

// ValidateSwap checks SwapMembership's arguments the way every store does.
func ValidateSwap(prevEpoch uint64, next Membership) error {
	if err := next.Validate(); err != nil {
		return err
	}
	if next.Epoch <= prevEpoch {
		return fmt.Errorf("%w: membership epoch %d does not follow %d", ErrInvalid, next.Epoch, prevEpoch)
	}
	return nil
}

// MembershipFence is the error of a SwapMembership whose prevEpoch is not
// the stored epoch (found: whether any record is stored).
func MembershipFence(scope string, prevEpoch uint64, found bool, stored uint64) error {
	got := "none is stored"
	if found {
		got = fmt.Sprintf("epoch %d is stored", stored)
	}
	return &FenceError{Key: Key{Scope: scope}, Op: "swap membership", Reason: fmt.Sprintf("expected epoch %d but %s", prevEpoch, got)}
}

// ValidatePublish checks PublishFrontier's arguments the way every store
// does: next must be valid, prev (when not zero) of the same scope, and next
// must not regress from prev (FrontierRegression: a *FenceError).
func ValidatePublish(prev, next Frontier) error {
	if err := next.Validate(); err != nil {
		return err
	}
	if !prev.IsZero() && prev.Scope != next.Scope {
		return fmt.Errorf("%w: frontier of scope %q published over one of scope %q", ErrInvalid, next.Scope, prev.Scope)
	}
	if why := FrontierRegression(prev, next); why != "" {
		return &FenceError{Key: Key{Scope: next.Scope}, Op: "publish frontier", Reason: why}
	}
	return nil
}

// FrontierFence is the error of a PublishFrontier whose prev is no longer
// the stored frontier (nil: none stored).
func FrontierFence(scope string, stored *Frontier) error {
	got := "none is published"
	if stored != nil {
		got = fmt.Sprintf("epoch %d scalar %s is published", stored.Epoch, stored.Scalar)
	}
	return &FenceError{Key: Key{Scope: scope}, Op: "publish frontier", Reason: "the published frontier changed: " + got}
}
