package frontier

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/tidemark/tidemark/internal/coord"
)

// Membership names the partitions of one membership epoch. It mirrors the
// store's membership record (which must also persist Unproven).
type Membership struct {
	// Epoch numbers the membership; epochs start at 1 and every change is a
	// new epoch.
	Epoch uint64
	// Partitions is the partition set, sorted.
	Partitions []string
	// Cutover is the coordinate at which this epoch took over from the
	// previous one: the last published frontier when the change was
	// planned (zero when nothing had been published).
	Cutover coord.Watermark
	// Proven is false when a membership change lacks its proof (see
	// Unproven). No scalar frontier may be published in an unproven epoch.
	Proven bool
	// Reason explains an unproven epoch, naming each partition and its
	// missing proof. It also notes ignored plan entries (empty names).
	Reason string
	// Unproven lists, sorted, the partitions whose membership change still
	// lacks proof: members added without proof of coverage and former
	// members removed without proof of sealing. PlanChange carries it into
	// the next epoch until the proof arrives, so a gap stays visible; it
	// must be persisted with the record. Proven == (len(Unproven) == 0),
	// except that an unproven record with an empty Unproven (one stored
	// without the list) is treated as unproven for an unknown reason in
	// every later epoch.
	Unproven []string
}

// AddProof is the evidence offered for adding a partition: it must have
// complete coverage from the previous published frontier, or its earlier
// range must have been replayed.
type AddProof struct {
	Partition string
	// CoveredFrom is the coordinate from which every event of the
	// partition is covered (read or certainly going to be read); zero when
	// unknown. It proves coverage when it is at or before the published
	// frontier.
	CoveredFrom coord.Watermark
	// Replayed is set when the partition's earlier range was replayed and
	// processed (or it was read from its very beginning). It proves
	// coverage on its own.
	Replayed bool
}

// RemoveProof is the evidence offered for removing a partition: it must be
// sealed through the cutover coordinate.
type RemoveProof struct {
	Partition string
	// SealedThrough is the partition's complete-through watermark at its
	// seal: the consumer has finished every event at or before it.
	SealedThrough coord.Watermark
	// Sealed is set when the provider certifies that the partition has no
	// event after SealedThrough (a closed shard, a retired partition).
	Sealed bool
}

// PlanChange returns the membership of the next epoch (current.Epoch+1,
// Cutover = published) after applying remove, then add, in order.
//
// published is the last published scalar frontier. Pass the zero watermark
// when the published record carries no scalar (none yet in the current
// epoch, or the current epoch is unproven): current.Cutover, the frontier
// published when the current epoch began, is used instead, and it is zero
// only when nothing was ever published.
//
//   - Adding a partition is proven when add.Replayed, or add.CoveredFrom is
//     at or before published. When nothing has been published (published
//     zero) only a replay proves coverage.
//   - Removing a partition is proven when it is Sealed and SealedThrough is
//     at or after the cutover. When nothing has been published, Sealed with a
//     non-zero SealedThrough suffices.
//   - A proof offered for a partition listed in current.Unproven (an add
//     for a member, a remove for a former member) settles the earlier change
//     when valid. Removing a non-member or adding a proven member otherwise
//     changes nothing. Entries with an empty name are ignored and noted in
//     Reason.
//
// Without a proof the partition still joins or leaves, and is recorded in
// Unproven: the next epoch is unproven, its Tracker withholds the scalar and
// publishes the vector, and Reason names the partitions and the missing
// proofs. An unproven current epoch stays unproven until its Unproven
// partitions are settled.
func PlanChange(current Membership, published coord.Watermark, add []AddProof, remove []RemoveProof) (next Membership) {
	if published.IsZero() {
		// No scalar published in the current epoch: the last published
		// frontier is the one the current epoch took over at.
		published = current.Cutover
	}
	members := make(map[string]bool, len(current.Partitions)+len(add))
	for _, p := range current.Partitions {
		members[p] = true
	}
	// unproven maps a partition to the reason its change is unproven.
	unproven := make(map[string]string, len(current.Unproven))
	for _, p := range current.Unproven {
		if members[p] {
			unproven[p] = fmt.Sprintf("%s: added by an earlier epoch without proof of coverage", p)
		} else {
			unproven[p] = fmt.Sprintf("%s: removed by an earlier epoch without proof of sealing", p)
		}
	}
	var notes []string
	if !current.Proven && len(current.Unproven) == 0 && current.Epoch > 0 {
		why := current.Reason
		if why == "" {
			why = "no reason recorded"
		}
		notes = append(notes, fmt.Sprintf("epoch %d was unproven without naming its unproven partitions (%s)", current.Epoch, why))
	}
	proven := len(notes) == 0

	settle := func(p string, ok bool, why string) {
		if ok {
			delete(unproven, p)
		} else {
			unproven[p] = why
		}
	}
	for _, r := range remove {
		p := r.Partition
		switch _, pending := unproven[p]; {
		case p == "":
			notes = append(notes, "ignored a remove with an empty partition name")
		case members[p]:
			delete(members, p)
			ok, why := sealProof(r, published)
			settle(p, ok, "remove "+p+": "+why)
		case pending:
			ok, why := sealProof(r, published)
			settle(p, ok, "remove "+p+": "+why)
		}
	}
	for _, a := range add {
		p := a.Partition
		switch _, pending := unproven[p]; {
		case p == "":
			notes = append(notes, "ignored an add with an empty partition name")
		case !members[p]:
			members[p] = true
			ok, why := coverageProof(a, published)
			settle(p, ok, "add "+p+": "+why)
		case pending:
			ok, why := coverageProof(a, published)
			settle(p, ok, "add "+p+": "+why)
		}
	}

	next = Membership{
		Epoch:      current.Epoch + 1,
		Partitions: slices.Sorted(maps.Keys(members)),
		Cutover:    published,
		Unproven:   slices.Sorted(maps.Keys(unproven)),
	}
	next.Proven = proven && len(next.Unproven) == 0
	reasons := notes
	for _, p := range next.Unproven {
		reasons = append(reasons, unproven[p])
	}
	next.Reason = strings.Join(reasons, "; ")
	return next
}

// coverageProof checks an AddProof against the published frontier.
func coverageProof(a AddProof, published coord.Watermark) (bool, string) {
	if a.Replayed {
		return true, ""
	}
	const notReplayed = "and its earlier range was not replayed"
	if a.CoveredFrom.IsZero() {
		return false, "no proof of coverage: no covered-from coordinate " + notReplayed
	}
	if published.IsZero() {
		return false, fmt.Sprintf("covered from %s, but no frontier was published, so only a replay of its earlier range proves coverage", a.CoveredFrom)
	}
	c, err := a.CoveredFrom.Compare(published)
	if err != nil {
		return false, fmt.Sprintf("covered from %s (%s), not comparable with the published frontier %s (%s), %s",
			a.CoveredFrom, a.CoveredFrom.Kind, published, published.Kind, notReplayed)
	}
	if c > 0 {
		return false, fmt.Sprintf("covered only from %s, after the published frontier %s, %s", a.CoveredFrom, published, notReplayed)
	}
	return true, ""
}

// sealProof checks a RemoveProof against the cutover coordinate.
func sealProof(r RemoveProof, cutover coord.Watermark) (bool, string) {
	if !r.Sealed {
		return false, fmt.Sprintf("not sealed (complete through %s) through the cutover %s", r.SealedThrough, cutover)
	}
	if r.SealedThrough.IsZero() {
		return false, "sealed, but through no coordinate"
	}
	if cutover.IsZero() {
		return true, ""
	}
	c, err := r.SealedThrough.Compare(cutover)
	if err != nil {
		return false, fmt.Sprintf("sealed through %s (%s), not comparable with the cutover %s (%s)",
			r.SealedThrough, r.SealedThrough.Kind, cutover, cutover.Kind)
	}
	if c < 0 {
		return false, fmt.Sprintf("sealed only through %s, before the cutover %s", r.SealedThrough, cutover)
	}
	return true, ""
}
