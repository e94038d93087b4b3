package frontier

import (
	"container/heap"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/tidemark/tidemark/internal/coord"
)

var (
	// ErrUnknownPartition is returned by Tracker.Update and Tracker.Apply
	// for a partition that is not a member of the tracker's epoch. A
	// partition joins only through a new epoch (PlanChange).
	ErrUnknownPartition = errors.New("frontier: partition is not in this membership epoch")
	// ErrInvalid is returned by NewTracker for epoch 0 or an empty or
	// duplicate partition name, and by Tracker.Update for a watermark of an
	// unknown coord.Kind.
	ErrInvalid = errors.New("frontier: invalid argument")
)

// Outcome says what one Tracker.Apply did. The zero value is invalid.
type Outcome uint8

const (
	// Advanced: the partition's watermark moved forward (or it gave its
	// first evidence).
	Advanced Outcome = 1 + iota
	// Unchanged: the same watermark again, or the zero watermark (a page
	// without complete-through evidence, which never erases evidence).
	Unchanged
	// Stale: a lower watermark than the partition already holds, such as a
	// late retry of an older page. It was ignored and counted
	// (Tracker.Ignored); the partition keeps its watermark.
	Stale
)

func (o Outcome) String() string {
	switch o {
	case Advanced:
		return "advanced"
	case Unchanged:
		return "unchanged"
	case Stale:
		return "stale"
	}
	return fmt.Sprintf("outcome(%d)", uint8(o))
}

// Tracker tracks the complete-through watermarks of the fixed partition set
// of one membership epoch and maintains their minimum. Apply and Update cost
// O(log P) and do not allocate (except to build an error); Scalar and MinHolder cost O(1); HeldBy costs
// O(k log k) for k partitions at the minimum; Frontier costs O(P).
//
// A Tracker is not safe for concurrent use.
type Tracker struct {
	epoch uint64
	index map[string]int32
	h     minHeap
	// kinds counts the partitions per coord.Kind; kinds[KindNone] is the
	// number of partitions without evidence.
	kinds    [coord.LastKind + 1]int
	ignored  uint64
	withheld string
}

// NewTracker returns a tracker for the partitions of membership epoch epoch,
// every partition starting without evidence (the zero watermark), so the
// scalar is withheld until each has given a complete-through watermark. The
// epoch must be at least 1 and the names non-empty and distinct; an empty set
// is allowed and never yields a scalar.
func NewTracker(epoch uint64, partitions []string) (*Tracker, error) {
	if epoch == 0 {
		return nil, fmt.Errorf("%w: membership epoch 0 (epochs start at 1)", ErrInvalid)
	}
	if len(partitions) > math.MaxInt32 {
		return nil, fmt.Errorf("%w: %d partitions", ErrInvalid, len(partitions))
	}
	t := &Tracker{
		epoch: epoch,
		index: make(map[string]int32, len(partitions)),
		h: minHeap{
			slots: make([]slot, len(partitions)),
			order: make([]int32, len(partitions)),
		},
	}
	for i, p := range partitions {
		if p == "" {
			return nil, fmt.Errorf("%w: empty partition name at index %d", ErrInvalid, i)
		}
		if _, dup := t.index[p]; dup {
			return nil, fmt.Errorf("%w: duplicate partition %q", ErrInvalid, p)
		}
		t.index[p] = int32(i)
		t.h.slots[i] = slot{name: p, pos: i}
		t.h.order[i] = int32(i)
	}
	t.kinds[coord.KindNone] = len(partitions)
	heap.Init(&t.h)
	return t, nil
}

// NewTrackerFor returns NewTracker(m.Epoch, m.Partitions), withholding the
// scalar with m.Reason when m is unproven.
func NewTrackerFor(m Membership) (*Tracker, error) {
	t, err := NewTracker(m.Epoch, m.Partitions)
	if err != nil {
		return nil, err
	}
	if !m.Proven {
		reason := m.Reason
		if reason == "" {
			reason = fmt.Sprintf("membership epoch %d is unproven", m.Epoch)
		}
		t.Withhold(reason)
	}
	return t, nil
}

// Withhold makes the tracker withhold the scalar for the rest of its epoch
// (the vector is still published) and records why; an empty reason is
// replaced by a generic one. Use it for an unproven membership epoch. It
// cannot be undone: proof arrives as a new epoch.
func (t *Tracker) Withhold(reason string) {
	if reason == "" {
		reason = "withheld by the caller"
	}
	if t.withheld == "" {
		t.withheld = reason
		return
	}
	t.withheld += "; " + reason
}

// Epoch returns the membership epoch of the tracker.
func (t *Tracker) Epoch() uint64 { return t.epoch }

// Len returns the number of partitions in the epoch.
func (t *Tracker) Len() int { return len(t.h.slots) }

// Ignored returns how many updates were ignored as Stale (lower than the
// partition's watermark) since the tracker was built.
func (t *Tracker) Ignored() uint64 { return t.ignored }

// Watermark returns the partition's current watermark (zero: no evidence);
// ok is false when the partition is not in the epoch.
func (t *Tracker) Watermark(partition string) (w coord.Watermark, ok bool) {
	i, ok := t.index[partition]
	if !ok {
		return coord.Watermark{}, false
	}
	return t.h.slots[i].w, true
}

// Update records a durable complete-through watermark of partition and
// reports whether the partition's watermark changed. A lower watermark is
// ignored and reported through Ignored (changed false, err nil); see Apply
// for the typed outcome.
func (t *Tracker) Update(partition string, w coord.Watermark) (changed bool, err error) {
	o, err := t.Apply(partition, w)
	return o == Advanced, err
}

// Apply is Update with the typed outcome:
//   - Advanced when w is after the partition's watermark, or is its first
//     evidence. A first watermark of another kind than the other partitions'
//     is accepted and makes the scalar unprovable (vector only) for the rest
//     of the epoch, since a partition's kind never changes.
//   - Unchanged when w equals it, or w is the zero watermark (no evidence
//     never erases evidence).
//   - Stale when w is before it: a late retry. Ignored and counted.
//
// Errors (the tracker is unchanged): ErrUnknownPartition; ErrInvalid for an
// unknown coord.Kind; coord.ErrIncomparable when w has another kind than the
// partition's own watermark, since the update could not be shown not to
// lower it.
func (t *Tracker) Apply(partition string, w coord.Watermark) (Outcome, error) {
	i, ok := t.index[partition]
	if !ok {
		return 0, fmt.Errorf("%w: %q in epoch %d", ErrUnknownPartition, partition, t.epoch)
	}
	if w.Kind > coord.LastKind {
		return 0, fmt.Errorf("%w: watermark of unknown kind %s for partition %q", ErrInvalid, w.Kind, partition)
	}
	s := &t.h.slots[i]
	switch {
	case w.IsZero():
		return Unchanged, nil
	case s.w.IsZero():
		t.kinds[coord.KindNone]--
		t.kinds[w.Kind]++
	case s.w.Kind != w.Kind:
		return 0, fmt.Errorf("frontier: partition %q holds %s watermark %s, refusing %s watermark %s: %w",
			partition, s.w.Kind, s.w, w.Kind, w, coord.ErrIncomparable)
	default:
		switch c := rank(w, s.w); {
		case c == 0:
			return Unchanged, nil
		case c < 0:
			t.ignored++
			return Stale, nil
		}
	}
	s.w = w
	heap.Fix(&t.h, s.pos)
	return Advanced, nil
}

// Scalar returns the combined safe frontier in O(1): the minimum watermark,
// when the epoch is proven, has at least one partition, and every partition
// has a watermark of one kind. Otherwise it returns the zero watermark and
// false.
func (t *Tracker) Scalar() (w coord.Watermark, proven bool) {
	if t.withheld != "" || len(t.h.order) == 0 {
		return coord.Watermark{}, false
	}
	r := t.h.root().w
	if r.IsZero() || t.kinds[r.Kind] != len(t.h.order) {
		return coord.Watermark{}, false
	}
	return r, true
}

// MinHolder returns, in O(1), one partition holding the frontier back: a
// partition without evidence (w zero) when there is one, otherwise one at
// the lowest watermark (with mixed kinds: the lowest of the lowest kind,
// which is not a frontier). Among ties it returns any one. ok is false for
// an empty epoch.
func (t *Tracker) MinHolder() (partition string, w coord.Watermark, ok bool) {
	if len(t.h.order) == 0 {
		return "", coord.Watermark{}, false
	}
	r := t.h.root()
	return r.name, r.w, true
}

// HeldBy returns, sorted, the partitions holding the frontier back: those
// without a complete-through watermark when there are any, otherwise those
// at the minimum. With mixed kinds and no missing evidence no partition is
// "at the minimum" and it returns nil (the Reason names the kinds). It costs
// O(k log k) for k such partitions.
func (t *Tracker) HeldBy() []string {
	if len(t.h.order) == 0 || (t.kinds[coord.KindNone] == 0 && t.mixed()) {
		return nil
	}
	names := t.h.ties()
	slices.Sort(names)
	return names
}

// mixed reports whether partitions with evidence use more than one kind.
func (t *Tracker) mixed() bool {
	n := 0
	for k := coord.KindNone + 1; k <= coord.LastKind; k++ {
		if t.kinds[k] > 0 {
			n++
		}
	}
	return n > 1
}

// Frontier returns the snapshot of the epoch: the scalar when proven, the
// vector always, the partitions holding it back and the reason for a
// withheld scalar. It copies the vector: O(P).
func (t *Tracker) Frontier() Snapshot {
	s := Snapshot{
		Epoch:  t.epoch,
		Vector: make(map[string]coord.Watermark, len(t.h.slots)),
		HeldBy: t.HeldBy(),
	}
	for i := range t.h.slots {
		s.Vector[t.h.slots[i].name] = t.h.slots[i].w
	}
	s.Scalar, s.Proven = t.Scalar()
	if !s.Proven {
		s.Reason = t.reason(s.HeldBy)
	}
	return s
}

// maxNamesInReason bounds the partition names spelled out in a Reason;
// HeldBy carries all of them.
const maxNamesInReason = 8

// reason explains a withheld scalar.
func (t *Tracker) reason(heldBy []string) string {
	var parts []string
	if t.withheld != "" {
		parts = append(parts, "membership unproven: "+t.withheld)
	}
	n := len(t.h.slots)
	if n == 0 {
		parts = append(parts, fmt.Sprintf("membership epoch %d has no partitions", t.epoch))
	}
	if missing := t.kinds[coord.KindNone]; missing > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d partitions have no complete-through watermark: %s",
			missing, n, nameList(heldBy)))
	}
	if t.mixed() {
		var kinds []string
		for k := coord.KindNone + 1; k <= coord.LastKind; k++ {
			if t.kinds[k] > 0 {
				kinds = append(kinds, fmt.Sprintf("%s: %d", k, t.kinds[k]))
			}
		}
		parts = append(parts, fmt.Sprintf("no comparable coordinate: partitions report watermarks of different kinds (%s)",
			strings.Join(kinds, ", ")))
	}
	return strings.Join(parts, "; ")
}

// nameList joins names, spelling out at most maxNamesInReason of them.
func nameList(names []string) string {
	if len(names) <= maxNamesInReason {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:maxNamesInReason], ", "), len(names)-maxNamesInReason)
}
