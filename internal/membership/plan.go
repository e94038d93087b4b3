package membership

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/frontier"
	"github.com/tidemark/tidemark/internal/frontierrec"
	"github.com/tidemark/tidemark/internal/store"
)

// Member is a partition the provider lists (or the configuration names),
// with the partitions it descends from (a split's parent, a merge's two
// parents); Parents is empty for most partitions.
type Member struct {
	Name    string
	Parents []string
}

// Names returns plain members for names (no lineage).
func Names(names []string) []Member {
	out := make([]Member, len(names))
	for i, n := range names {
		out[i] = Member{Name: n}
	}
	return out
}

// PlanInput is what a membership change is decided from.
type PlanInput struct {
	Scope string
	// Current is the stored membership record; HasCurrent is false when
	// none is stored yet (the first epoch).
	Current    store.Membership
	HasCurrent bool
	// Want is the partition list the provider gave (or the configured one).
	Want []Member
	// Checkpoints are the scope's durable checkpoints.
	Checkpoints []store.Checkpoint
	// Published is the published frontier record (zero when none).
	Published store.Frontier
	// FreshFromStart is set when a partition without a checkpoint is read
	// from the provider's start (no start_cursor): reading it then replays
	// its whole range, which proves its coverage.
	FreshFromStart bool
}

// Plan is a decided change.
type Plan struct {
	// Next is the record to write (Epoch = Current.Epoch+1); valid only
	// when Changed.
	Next    store.Membership
	Changed bool
	// Added and Removed name the partitions that join and leave; Sealed
	// the removed ones that leave with proof of sealing; Settled the
	// partitions of earlier unproven changes whose proof arrived.
	Added, Removed, Sealed, Settled []string
	// Recreated names the partitions whose source incarnation changed
	// (DecideIncarnation): the old incarnation left unsealed, the new one
	// joined to be read from its start.
	Recreated []string
	// DroppedIncarnations names the partitions whose pending incarnation
	// change is not carried because they leave (no longer members): the
	// change never blocks the membership.
	DroppedIncarnations []string
}

// String describes the change for logs.
func (p Plan) String() string {
	if !p.Changed {
		return "no change"
	}
	var parts []string
	if len(p.Added) > 0 {
		parts = append(parts, fmt.Sprintf("added %v", p.Added))
	}
	if len(p.Removed) > 0 {
		parts = append(parts, fmt.Sprintf("removed %v (sealed: %v)", p.Removed, p.Sealed))
	}
	if len(p.Settled) > 0 {
		parts = append(parts, fmt.Sprintf("proof arrived for %v", p.Settled))
	}
	if len(p.Recreated) > 0 {
		parts = append(parts, fmt.Sprintf("source incarnation changed for %v", p.Recreated))
	}
	if len(parts) == 0 {
		parts = append(parts, "lineage changed")
	}
	if len(p.DroppedIncarnations) > 0 {
		parts = append(parts, fmt.Sprintf("the pending incarnation change of %v is not carried: no longer a member", p.DroppedIncarnations))
	}
	s := fmt.Sprintf("epoch %d: %s; partitions %v", p.Next.Epoch, strings.Join(parts, ", "), p.Next.Partitions)
	if !p.Next.Proven {
		s += "; unproven: " + p.Next.Reason
	}
	return s
}

// Decide plans the next membership from what the provider lists now. It is
// pure: the same input gives the same plan.
//
//   - The wanted set is Want, less every partition that is complete and a
//     parent of a wanted partition or of a member (a sealed, drained
//     parent leaves even while still listed).
//   - A wanted partition that is not a member joins; it is proven when it
//     is fresh (no checkpoint, or a checkpoint never promoted, at the
//     provider's start) and FreshFromStart.
//   - A member that is not wanted leaves; it is proven when its checkpoint
//     is Complete: sealed through its watermark, and through the cutover
//     when that is later or of another kind (nothing of a complete
//     partition follows its watermark, so frontier.PlanChange's check
//     against the cutover holds for it whatever the cutover).
//   - A partition of an earlier unproven change is offered its proof again
//     (a former member that completed since settles its removal; a member
//     whose source incarnation changed settles once its checkpoint, reset
//     by that change and read from its start, certifies a watermark or
//     completes).
//   - The lineage recorded is that of the members: from Want, else kept
//     from the current record; a link of a child whose checkpoint was
//     reset into another source incarnation than its parent's is dropped
//     (dropStaleLineage).
//
// Without a current record the first epoch holds the wanted set, proven.
func Decide(in PlanInput) Plan {
	cps := make(map[string]store.Checkpoint, len(in.Checkpoints))
	for _, cp := range in.Checkpoints {
		cps[cp.Partition] = cp
	}
	lineage := map[string][]string{}
	if in.HasCurrent {
		for c, ps := range in.Current.Parents {
			lineage[c] = slices.Clone(ps)
		}
	}
	for _, m := range in.Want {
		if len(m.Parents) > 0 {
			ps := slices.Clone(m.Parents)
			slices.Sort(ps)
			lineage[m.Name] = slices.Compact(ps)
		}
	}
	dropStaleLineage(lineage, cps)
	isParent := map[string]bool{}
	for _, ps := range lineage {
		for _, p := range ps {
			isParent[p] = true
		}
	}
	want := map[string]bool{}
	for _, m := range in.Want {
		if m.Name == "" {
			continue
		}
		if cp, ok := cps[m.Name]; ok && cp.Complete && isParent[m.Name] {
			continue // sealed and drained parent: it leaves (or never joins)
		}
		want[m.Name] = true
	}
	lineageOf := func(members []string) map[string][]string {
		var out map[string][]string
		for _, p := range members {
			if ps := lineage[p]; len(ps) > 0 {
				if out == nil {
					out = map[string][]string{}
				}
				out[p] = ps
			}
		}
		return out
	}

	if !in.HasCurrent {
		names := slices.Sorted(maps.Keys(want))
		return Plan{
			Next:    store.Membership{Scope: in.Scope, Epoch: 1, Partitions: names, Proven: true, Parents: lineageOf(names)},
			Changed: len(names) > 0,
			Added:   names,
		}
	}

	cur := in.Current
	member := map[string]bool{}
	for _, p := range cur.Partitions {
		member[p] = true
	}
	fresh := func(p string) bool {
		cp, ok := cps[p]
		return in.FreshFromStart && (!ok || (len(cp.Cursor) == 0 && !cp.HasApplied && (cp.Generation == 1 || onlyRecorded(cp))))
	}
	published := coord.Watermark{}
	if in.Published.Epoch == cur.Epoch {
		published = in.Published.Scalar
	}
	// The cutover PlanChange checks a seal against: the scalar published
	// in the current epoch, else the one the epoch took over at.
	cutover := published
	if cutover.IsZero() {
		cutover = cur.Cutover
	}
	seal := func(p string) frontier.RemoveProof {
		cp, ok := cps[p]
		r := frontier.RemoveProof{Partition: p, Sealed: ok && cp.Complete, SealedThrough: cp.Watermark}
		// A complete partition has nothing after its watermark and every
		// event of it is done: it is sealed through any coordinate, the
		// cutover's too. It may have joined below the cutover (with a
		// replay) and been sealed before its epoch published a scalar (a
		// split parent whose children, held back until it completes, have
		// no watermark yet), or its coordinate may be of another kind than
		// the cutover's; its removal is proven all the same.
		if r.Sealed && !cutover.IsZero() {
			if c, err := r.SealedThrough.Compare(cutover); r.SealedThrough.IsZero() || err != nil || c < 0 {
				r.SealedThrough = cutover
			}
		}
		return r
	}
	var plan Plan
	var adds []frontier.AddProof
	var removes []frontier.RemoveProof
	for _, p := range slices.Sorted(maps.Keys(want)) {
		if !member[p] {
			plan.Added = append(plan.Added, p)
			adds = append(adds, frontier.AddProof{Partition: p, Replayed: fresh(p)})
		}
	}
	for _, p := range cur.Partitions {
		if !want[p] {
			r := seal(p)
			plan.Removed = append(plan.Removed, p)
			if r.Sealed {
				plan.Sealed = append(plan.Sealed, p)
			}
			removes = append(removes, r)
		}
	}
	// Earlier unproven changes: offer what proof there is now.
	var pendingOffered []string
	for _, p := range cur.Unproven {
		switch {
		case member[p] && want[p]:
			if e, pending := cur.Incarnations[p]; pending {
				cp, ok := cps[p]
				if incarnationProven(cp, ok, e, in.FreshFromStart) {
					adds = append(adds, frontier.AddProof{Partition: p, Replayed: true})
					pendingOffered = append(pendingOffered, p)
				}
				continue
			}
			if fresh(p) {
				adds = append(adds, frontier.AddProof{Partition: p, Replayed: true})
				pendingOffered = append(pendingOffered, p)
			}
		case !member[p]:
			if r := seal(p); r.Sealed {
				removes = append(removes, r)
				pendingOffered = append(pendingOffered, p)
			}
		}
	}
	next := frontier.PlanChange(frontierrec.Membership(cur), published, adds, removes)
	for _, p := range pendingOffered {
		if !slices.Contains(next.Unproven, p) {
			plan.Settled = append(plan.Settled, p)
		}
	}
	nextLineage := lineageOf(next.Partitions)
	plan.Changed = len(plan.Added)+len(plan.Removed)+len(plan.Settled) > 0 || !equalLineage(nextLineage, cur.Parents)
	plan.Next = store.Membership{
		Scope: in.Scope, Epoch: next.Epoch, Partitions: next.Partitions, Cutover: next.Cutover,
		Proven: next.Proven, Reason: next.Reason, Unproven: next.Unproven, Parents: nextLineage,
	}
	plan.DroppedIncarnations = settleIncarnations(cur, &plan.Next)
	return plan
}

// dropStaleLineage drops the links of lineage that belong to an earlier
// incarnation of the source: a child whose checkpoint was reset into a new
// incarnation (IncarnationEpoch set) that its parent's checkpoint is not
// in. A stream deleted and created again under the same name lists its
// shards anew, without the old split's parents, and its shard ids start
// over: the old lineage would hold the reused id of the old parent out of
// the membership for good (a complete parent of a member leaves even while
// listed) and its children behind a parent that never completes.
func dropStaleLineage(lineage map[string][]string, cps map[string]store.Checkpoint) {
	for c, ps := range lineage {
		child, ok := cps[c]
		if !ok || child.IncarnationEpoch == 0 {
			continue
		}
		kept := slices.DeleteFunc(slices.Clone(ps), func(p string) bool {
			parent, ok := cps[p]
			return ok && parent.Incarnation != child.Incarnation
		})
		if len(kept) == 0 {
			delete(lineage, c)
		} else {
			lineage[c] = kept
		}
	}
}

func equalLineage(a, b map[string][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for c, ps := range a {
		if !slices.Equal(ps, b[c]) {
			return false
		}
	}
	return true
}

// Records is what deciding a membership change reads and writes: every
// checkpoint of the scope (proofs of coverage and sealing) and the scope's
// records (membership, published frontier).
type Records = store.ScopeProgress

// Read gathers a PlanInput for want from st (the membership record, every
// checkpoint, the published frontier).
func Read(ctx context.Context, st Records, scope string, want []Member, freshFromStart bool) (PlanInput, error) {
	in := PlanInput{Scope: scope, Want: want, FreshFromStart: freshFromStart}
	cur, err := st.LoadMembership(ctx, scope)
	switch {
	case err == nil:
		in.Current, in.HasCurrent = cur, true
	case !errors.Is(err, store.ErrNotFound):
		return in, err
	}
	if in.Checkpoints, err = st.ListCheckpoints(ctx, scope); err != nil {
		return in, err
	}
	f, err := st.LoadFrontier(ctx, scope)
	switch {
	case err == nil:
		in.Published = f
	case !errors.Is(err, store.ErrNotFound):
		return in, err
	}
	return in, nil
}

// Reconcile brings the scope's membership to want: it reads, decides and
// writes the change with one compare-and-swap, re-reading and deciding
// again (a few times) when another instance or an operator changed the
// record in between. It returns the stored record and the plan that was
// written (Changed false when nothing had to change).
func Reconcile(ctx context.Context, st Records, scope string, want []Member, freshFromStart bool) (store.Membership, Plan, error) {
	for try := 0; ; try++ {
		in, err := Read(ctx, st, scope, want, freshFromStart)
		if err != nil {
			return store.Membership{}, Plan{}, err
		}
		plan := Decide(in)
		if !plan.Changed {
			return in.Current, plan, nil
		}
		prev := uint64(0)
		if in.HasCurrent {
			prev = in.Current.Epoch
		}
		m, err := st.SwapMembership(ctx, prev, plan.Next)
		if errors.Is(err, store.ErrFenced) && try < 5 {
			continue
		}
		if err != nil {
			return store.Membership{}, plan, fmt.Errorf("advancing membership of %s to epoch %d: %w", scope, plan.Next.Epoch, err)
		}
		return m, plan, nil
	}
}

// Waiting returns the parents that member must wait for before it is read:
// its recorded parents that are still members and not complete (sealed and
// drained). A parent that left the membership (sealed, or removed without
// proof, which its epoch's reason records) no longer holds its children.
func Waiting(m store.Membership, member string, cps []store.Checkpoint) []string {
	ps := m.Parents[member]
	if len(ps) == 0 {
		return nil
	}
	var out []string
	for _, p := range ps {
		if !slices.Contains(m.Partitions, p) {
			continue
		}
		done := false
		for _, cp := range cps {
			if cp.Partition == p {
				done = cp.Complete
				break
			}
		}
		if !done {
			out = append(out, p)
		}
	}
	return out
}
