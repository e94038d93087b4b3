package frontier

import (
	"cmp"

	"github.com/tidemark/tidemark/internal/coord"
)

// slot is one partition of a Tracker.
type slot struct {
	name string
	w    coord.Watermark
	// pos is the slot's index in minHeap.order.
	pos int
}

// minHeap is an indexed min-heap of the slots of a fixed partition set,
// ordered by rank. Every slot is always in the heap (partitions without
// evidence rank first), so only heap.Init and heap.Fix are used: Update
// never pushes, pops or allocates.
type minHeap struct {
	slots []slot
	// order[i] is the slot at heap position i.
	order []int32
}

func (h *minHeap) Len() int { return len(h.order) }

func (h *minHeap) Less(i, j int) bool {
	return rank(h.slots[h.order[i]].w, h.slots[h.order[j]].w) < 0
}

func (h *minHeap) Swap(i, j int) {
	h.order[i], h.order[j] = h.order[j], h.order[i]
	h.slots[h.order[i]].pos = i
	h.slots[h.order[j]].pos = j
}

// Push and Pop complete heap.Interface. The partition set of an epoch is
// fixed, so they are never called.
func (h *minHeap) Push(any) { panic("frontier: the partition set of a tracker is fixed") }
func (h *minHeap) Pop() any { panic("frontier: the partition set of a tracker is fixed") }

// root returns the slot at the top of the heap. The heap must not be empty.
func (h *minHeap) root() *slot { return &h.slots[h.order[0]] }

// ties returns the names of the slots that rank equal to the root, unsorted.
// The slots equal to the minimum form a subtree containing the root, so the
// walk visits O(k) nodes for k ties.
func (h *minHeap) ties() []string {
	if len(h.order) == 0 {
		return nil
	}
	low := h.root().w
	var names []string
	stack := []int{0}
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		s := &h.slots[h.order[i]]
		if rank(s.w, low) != 0 {
			continue
		}
		names = append(names, s.name)
		for _, c := range [2]int{2*i + 1, 2*i + 2} {
			if c < len(h.order) {
				stack = append(stack, c)
			}
		}
	}
	return names
}

// rank is a total order over watermarks of every kind, used only to keep
// the heap consistent: by Kind first (KindNone, i.e. no evidence, ranks
// first), then by value. It is not a statement that watermarks of different
// kinds are ordered; the Tracker publishes a scalar only when every
// partition has the same non-zero kind.
func rank(a, b coord.Watermark) int {
	if a.Kind != b.Kind {
		return cmp.Compare(a.Kind, b.Kind)
	}
	switch a.Kind {
	case coord.KindNone:
		return 0
	}
	c, _ := a.Compare(b)
	return c
}
