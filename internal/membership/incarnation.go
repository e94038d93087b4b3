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

// A source incarnation (docs/design.md#source-incarnations): a partition's
// source deleted and created again under the same name (a CouchDB database,
// a stream, a bucket, a cluster) starts its positions over. Its change is a
// membership change, never a silent continuation: in a new epoch the old
// incarnation leaves unsealed and the new one joins, read from its start;
// the epoch is unproven, so its scalar frontier is withheld, until the new
// incarnation certifies a watermark of its own (or completes). The
// partition's checkpoint is reset into the new incarnation by a write that
// carries the new epoch (store.Promotion.Reset), so the old incarnation's
// watermark is never lowered within an epoch.

// IncarnationChange is one partition found in a new incarnation.
type IncarnationChange struct {
	Partition string
	// From and To are the hashes of the old and new incarnation
	// (reconcile.IncarnationHash; From may equal To when only the positions
	// showed the change).
	From, To string
	// Why says how it was found, with when (the caller's clock).
	Why string
}

// DecideIncarnation plans the epoch that records ch: the same partitions,
// ch.Partition unproven (and in Incarnations with the new epoch) besides
// every earlier unproven change, the cutover the published frontier. It is
// pure. For a partition that is not a member (a worker that has not yet
// stopped after it left) the epoch changes nothing else: the partition is
// in no frontier of it, and the epoch only lets its checkpoint be reset
// (a reset needs an epoch newer than the checkpoint's). Without a record
// nothing is planned.
func DecideIncarnation(in PlanInput, ch IncarnationChange) Plan {
	if !in.HasCurrent {
		return Plan{}
	}
	for _, cp := range in.Checkpoints {
		if cp.Partition == ch.Partition && cp.Incarnation != "" && cp.Incarnation != ch.From {
			// Another worker already recorded a change and reset the
			// checkpoint (into this incarnation, or into another: a source
			// recreated twice): this change is stale, nothing to record.
			// (Recording it would name an epoch no reset can follow, and
			// leave the partition unproven for good.)
			return Plan{}
		}
	}
	cur := in.Current
	if !slices.Contains(cur.Partitions, ch.Partition) {
		next := cur
		next.Epoch = cur.Epoch + 1
		return Plan{Changed: true, Recreated: []string{ch.Partition}, Next: next}
	}
	published := coord.Watermark{}
	if in.Published.Epoch == cur.Epoch {
		published = in.Published.Scalar
	}
	next := frontier.PlanChange(frontierrec.Membership(cur), published, nil, nil)
	unproven := append(slices.Clone(next.Unproven), ch.Partition)
	slices.Sort(unproven)
	incs := carriedIncarnations(cur, unproven)
	incs[ch.Partition] = next.Epoch
	why := incarnationReason(ch.Partition, next.Epoch, fmt.Sprintf("incarnation changed from %s to %s (%s)", orNone(ch.From), ch.To, ch.Why))
	// The frontier core names every carried change with its generic
	// text; an earlier pending incarnation change of another partition
	// keeps its own reason (rewritten after ch.Partition's entry is
	// dropped: an incarnation reason itself holds "; ").
	reasons := incarnationReasons(strings.Join(dropReasonOf(next.Reason, ch.Partition), "; "), carriedIncarnations(cur, unproven))
	reasons = append(reasons, why)
	return Plan{
		Changed:   true,
		Recreated: []string{ch.Partition},
		Next: store.Membership{
			Scope: in.Scope, Epoch: next.Epoch, Partitions: next.Partitions, Cutover: next.Cutover,
			Proven: false, Reason: strings.Join(reasons, "; "), Unproven: slices.Compact(unproven),
			Parents: cur.Parents, Incarnations: incs,
		},
	}
}

func orNone(h string) string {
	if h == "" {
		return "none recorded"
	}
	return h
}

// incarnationReason is the reason an epoch names a pending incarnation
// change with: what changed, and what the scalar waits for.
func incarnationReason(p string, epoch uint64, what string) string {
	return fmt.Sprintf("%s: %s; its old incarnation left unsealed and its new one is read from its start (epoch %d): the scalar frontier is withheld until the new incarnation certifies a complete-through watermark (a source without watermarks: until a page of it is promoted)", p, what, epoch)
}

// dropReasonOf removes the entries of a joined reason that name p (the
// frontier core's generic text for a carried change), keeping the others.
func dropReasonOf(reason, p string) []string {
	var out []string
	for _, r := range strings.Split(reason, "; ") {
		if r != "" && !strings.HasPrefix(r, p+": ") {
			out = append(out, r)
		}
	}
	return out
}

// carriedIncarnations keeps cur's pending incarnation changes of the
// partitions still unproven.
func carriedIncarnations(cur store.Membership, unproven []string) map[string]uint64 {
	out := map[string]uint64{}
	for p, e := range cur.Incarnations {
		if slices.Contains(unproven, p) && slices.Contains(cur.Partitions, p) {
			out[p] = e
		}
	}
	return out
}

// incarnationProven reports whether cp proves the new incarnation recorded
// at epoch e: the checkpoint was reset into it by that change (its
// IncarnationEpoch), read from the provider's start (fresh), and has since
// certified a watermark, completed, or promoted a page (a source without
// watermarks: its new incarnation is being replayed from its start, which
// is the proof a joining partition needs; its missing watermark keeps the
// scalar withheld anyway).
func incarnationProven(cp store.Checkpoint, ok bool, e uint64, fresh bool) bool {
	return ok && fresh && cp.IncarnationEpoch == e &&
		(cp.Complete || !cp.Watermark.IsZero() || !strings.HasPrefix(cp.PromotedWitness, "incarnation:"))
}

// settleIncarnations rewrites a planned record after Decide: the pending
// incarnation changes of partitions still unproven are carried (with their
// reason instead of the frontier core's generic one).
func settleIncarnations(cur store.Membership, next *store.Membership) {
	incs := carriedIncarnations(cur, next.Unproven)
	if len(incs) == 0 {
		next.Incarnations = nil
		return
	}
	next.Incarnations = incs
	next.Reason = strings.Join(incarnationReasons(next.Reason, incs), "; ")
}

// incarnationReasons rewrites, in a joined reason, the frontier core's
// generic text for a carried change ("added by an earlier epoch without
// proof of coverage") of every partition with a pending incarnation change
// in incs: what holds it is its new incarnation, read from its start, not
// a join without proof. It returns the entries.
func incarnationReasons(reason string, incs map[string]uint64) []string {
	if reason == "" {
		return nil
	}
	reasons := strings.Split(reason, "; ")
	for _, p := range slices.Sorted(maps.Keys(incs)) {
		generic := p + ": added by an earlier epoch without proof of coverage"
		for i, r := range reasons {
			if r == generic {
				reasons[i] = incarnationReason(p, incs[p], "incarnation changed at epoch "+fmt.Sprint(incs[p]))
			}
		}
	}
	return reasons
}

// ErrIncarnationRecorded is returned by RecordIncarnation when the
// partition's checkpoint is no longer in the incarnation the change starts
// from: another writer recorded a change and reset it.
var ErrIncarnationRecorded = errors.New("membership: the checkpoint was already reset into another incarnation")

// RecordIncarnation writes the epoch that records ch (DecideIncarnation)
// with one compare-and-swap on the membership epoch, re-reading and
// deciding again when another writer changed the record in between. The
// caller then resets the partition's checkpoint with the returned epoch.
// When the checkpoint is no longer in the incarnation the change starts
// from it writes nothing and returns ErrIncarnationRecorded.
func RecordIncarnation(ctx context.Context, st Records, scope string, ch IncarnationChange) (store.Membership, error) {
	for try := 0; ; try++ {
		in, err := Read(ctx, st, scope, nil, false)
		if err != nil {
			return store.Membership{}, err
		}
		plan := DecideIncarnation(in, ch)
		if !plan.Changed {
			if in.HasCurrent {
				return in.Current, ErrIncarnationRecorded
			}
			return store.Membership{}, fmt.Errorf("recording the incarnation change of %s: scope %s has no membership record", ch.Partition, scope)
		}
		m, err := st.SwapMembership(ctx, in.Current.Epoch, plan.Next)
		if errors.Is(err, store.ErrFenced) && try < 5 {
			continue
		}
		if err != nil {
			return store.Membership{}, fmt.Errorf("recording the incarnation change of %s in epoch %d: %w", ch.Partition, plan.Next.Epoch, err)
		}
		return m, nil
	}
}

// onlyRecorded reports whether cp's one promotion recorded its first
// source incarnation (the machine's recordIncarnation: generation 2, the
// cursor and everything else unchanged): it is as fresh as a checkpoint
// never promoted.
func onlyRecorded(cp store.Checkpoint) bool {
	return cp.Generation == 2 && cp.IncarnationEpoch == 0 && strings.HasPrefix(cp.PromotedWitness, "incarnation:")
}
