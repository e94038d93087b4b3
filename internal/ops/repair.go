package ops

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/store"
)

// Repair is one planned conditional write.
type Repair struct {
	// Describe is the exact write, for the dry run and the confirmation.
	Describe string
	// Before is the state the repair read and conditions its write on
	// (CheckpointState or MembershipState: never a raw cursor).
	Before string
	// Entry is the audit entry the repair writes with its change.
	Entry store.RepairEntry
	apply func(ctx context.Context) (string, error)
}

// Apply performs the repair's conditional write and returns the state it
// wrote (in Before's form).
func (r Repair) Apply(ctx context.Context) (string, error) { return r.apply(ctx) }

// Operator is who makes a repair and when: the audit entry's time, OS user
// and host (cmd/connect reads them from the clock and the OS).
type Operator struct {
	Time time.Time
	User string
	Host string
}

// Options are a repair's operator and overrides.
type Options struct {
	Operator Operator
	// Force makes a repair that would be refused (RefusedError): a restart
	// of a complete partition, backwards, or to another partition's cursor;
	// an epoch cutover of another kind, below the published frontier or
	// above what the checkpoints prove. The audit entry records it.
	Force bool
}

// RefusedError is a repair refused without --force: Why says what the
// store holds that makes it unsafe, and the message names the flag.
type RefusedError struct {
	Repair string
	Why    []string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("refusing to %s: %s; pass --force to do it anyway", e.Repair, strings.Join(e.Why, "; "))
}

// IsRefused reports whether err is a repair refused without --force.
func IsRefused(err error) bool {
	var r *RefusedError
	return errors.As(err, &r)
}

// CheckpointState is what a repair prints of a checkpoint, before and
// after: generation, cursor hash, watermark, applied position, complete
// flag (and the park reason, when parked).
func CheckpointState(cp store.Checkpoint) string {
	applied := "none"
	if cp.HasApplied {
		applied = cp.Applied.String()
	}
	s := fmt.Sprintf("generation %d, cursor %s, watermark %s, applied %s, complete %t",
		cp.Generation, reconcile.CursorHash(cp.Cursor), cp.Watermark, applied, cp.Complete)
	if cp.Parked != "" {
		s += fmt.Sprintf(", parked %q", cp.Parked)
	}
	return s
}

// MembershipState is what advance-epoch prints of a membership record.
func MembershipState(m store.Membership) string {
	return fmt.Sprintf("epoch %d, proven %t, cutover %s, partitions %v", m.Epoch, m.Proven, m.Cutover, m.Partitions)
}

// checkpointPrevious is the audit entry's record of what a repair of cp
// replaced.
func checkpointPrevious(cp store.Checkpoint) map[string]string {
	p := map[string]string{
		"generation": strconv.FormatUint(cp.Generation, 10),
		"cursor":     reconcile.CursorHash(cp.Cursor),
		"watermark":  cp.Watermark.String(),
		"applied":    "none",
		"complete":   strconv.FormatBool(cp.Complete),
	}
	if cp.HasApplied {
		p["applied"] = store.ClipRepairField(cp.Applied.String())
	}
	if cp.Parked != "" {
		p["parked"] = store.ClipRepairField(cp.Parked)
	}
	p["watermark"] = store.ClipRepairField(p["watermark"])
	return p
}

// entry builds the audit entry of a repair; overridden lists the refusals
// --force overrode.
func (o Options) entry(command string, previous map[string]string, overridden []string) store.RepairEntry {
	if o.Force {
		command += " --force"
	}
	if len(overridden) > 0 {
		previous["forced"] = store.ClipRepairField(strings.Join(overridden, "; "))
	}
	t := o.Operator.Time
	if t.IsZero() {
		t = time.Now()
	}
	return store.NormalizeRepair(store.RepairEntry{
		Time: t, User: store.ClipRepairField(o.Operator.User), Host: store.ClipRepairField(o.Operator.Host),
		Command: store.ClipRepairField(command), Previous: previous,
	})
}

// refuse returns the refusal of repair for why, or nil when there is
// nothing to refuse or Force overrides it.
func (o Options) refuse(repair string, why []string) error {
	if len(why) == 0 || o.Force {
		return nil
	}
	return &RefusedError{Repair: repair, Why: why}
}

// RepairStore is what the repairs of one partition use: its checkpoint
// (and the scope's others, to find a cursor) and the witnesses a cursor
// is looked up in. A store that can search the whole table for a cursor
// (store.CursorFinder) is asked too.
type RepairStore interface {
	store.CheckpointStore
	store.WitnessStore
}

// PlanUnpark clears a partition's parked reason, conditional on the cursor
// and generation read now (and on the park itself), and writes the audit
// entry with it. The worker resumes from the durable cursor and classifies
// its next response again.
func PlanUnpark(ctx context.Context, st RepairStore, k store.Key, o Options) (Repair, error) {
	cp, err := st.LoadCheckpoint(ctx, k)
	if err != nil {
		return Repair{}, err
	}
	if cp.Parked == "" {
		return Repair{}, fmt.Errorf("partition %s is not parked", k)
	}
	e := o.entry(fmt.Sprintf("unpark --scope %s --partition %s", k.Scope, k.Partition), checkpointPrevious(cp), nil)
	return Repair{
		Describe: fmt.Sprintf("clear the park reason of %s (%q) if it still holds generation %d", k, cp.Parked, cp.Generation),
		Before:   CheckpointState(cp),
		Entry:    e,
		apply: func(ctx context.Context) (string, error) {
			after, err := st.Unpark(ctx, k, cp.Cursor, cp.Generation, cp.Lease, store.AppendRepair(cp.Repairs, e))
			if err != nil {
				return "", err
			}
			return CheckpointState(after), nil
		},
	}, nil
}

// cursorSeen is where the store has seen a cursor: as a checkpoint's
// cursor, or as a witness's input cursor or successor, and at which
// generation it was (or becomes) the partition's durable cursor.
type cursorSeen struct {
	partition  string
	generation uint64
	how        string
}

// findCursor looks cursor up in the checkpoint and the witnesses of one
// partition and returns the latest generation at which it was (or would
// become) that partition's cursor.
func findCursor(ctx context.Context, st RepairStore, cp store.Checkpoint, cursor []byte) (cursorSeen, bool, error) {
	var best cursorSeen
	found := false
	see := func(gen uint64, how string) {
		if !found || gen > best.generation {
			best, found = cursorSeen{partition: cp.Partition, generation: gen, how: how}, true
		}
	}
	if bytes.Equal(cp.Cursor, cursor) {
		see(cp.Generation, "its current cursor")
	}
	ws, err := st.WitnessesFrom(ctx, cp.Key, 0)
	if err != nil {
		return cursorSeen{}, false, fmt.Errorf("reading the witnesses of %s: %w", cp.Key, err)
	}
	for _, w := range ws {
		if bytes.Equal(w.InputCursor, cursor) {
			see(w.Generation, fmt.Sprintf("the input cursor of its witness %s at generation %d", w.AttemptID, w.Generation))
		}
		if len(w.Successor) > 0 && bytes.Equal(w.Successor, cursor) {
			see(w.Generation+1, fmt.Sprintf("the successor of its witness %s at generation %d", w.AttemptID, w.Generation))
		}
	}
	return best, found, nil
}

// findElsewhere looks cursor up in the other partitions of k's scope.
func findElsewhere(ctx context.Context, st RepairStore, k store.Key, cursor []byte) (cursorSeen, bool, error) {
	others, err := st.ListCheckpoints(ctx, k.Scope)
	if err != nil {
		return cursorSeen{}, false, fmt.Errorf("reading checkpoints of %s: %w", k.Scope, err)
	}
	for _, other := range others {
		if other.Partition == k.Partition {
			continue
		}
		seen, found, err := findCursor(ctx, st, other, cursor)
		if err != nil || found {
			return seen, found, err
		}
	}
	return cursorSeen{}, false, nil
}

// PlanRestart moves a partition to a provider-supported stable boundary
// cursor: one promotion from the (cursor, generation) read now, keeping the
// watermark and the applied position, with the audit entry in the same
// conditional write. A parked partition is unparked first (conditionally),
// because no promotion is made from a parked checkpoint. Events after the
// durable applied boundary are replayed and deduplicated downstream.
//
// Without o.Force it refuses (RefusedError), from what the store holds:
//   - a complete partition (the promotion clears its complete flag and the
//     partition is read again);
//   - a cursor that moves the partition backwards: the empty cursor (the
//     provider's start) of a partition with progress, or a cursor the
//     partition's witnesses or checkpoint held at an older generation
//     than the current one (the input cursor of a witness at generation
//     g, or the successor of a witness at generation g-1), which would
//     leave the kept watermark and applied position ahead of the cursor;
//   - a cursor the partition never held that another partition of the
//     scope holds (as its checkpoint's cursor, a witness's input cursor or
//     successor).
//
// A cursor the store does not know (a boundary built by the operator, or
// one whose witnesses were pruned) is not refused: its position cannot be
// checked, and Describe says so.
func PlanRestart(ctx context.Context, st RepairStore, k store.Key, cursor []byte, o Options) (Repair, error) {
	cp, err := st.LoadCheckpoint(ctx, k)
	if err != nil {
		return Repair{}, err
	}
	if err := store.CheckCursor("cursor", cursor); err != nil {
		return Repair{}, err
	}
	if store.IsSealedCursor(cp.Cursor) && !store.IsEncrypted(st) {
		// Not overridable: the restart would write the boundary cursor in
		// clear into a table whose cursors are protected, and could not
		// check it against the (encrypted) witnesses.
		return Repair{}, fmt.Errorf("the cursors of %s are encrypted (checkpoint.cursor_encryption): pass the input's keys with --cursor-key ID=env:VARIABLE (or ID=file:PATH), so that the restart checks the cursor against the partition's witnesses and writes it encrypted", k)
	}
	own, ownFound, err := findCursor(ctx, st, cp, cursor)
	if err != nil {
		return Repair{}, err
	}
	var other cursorSeen
	otherFound := false
	if !ownFound && len(cursor) > 0 {
		if other, otherFound, err = findElsewhere(ctx, st, k, cursor); err != nil {
			return Repair{}, err
		}
	}
	var otherScopes []store.Key
	if !ownFound && !otherFound && len(cursor) > 0 {
		if otherScopes, err = keysInOtherScopes(ctx, st, k.Scope, cursor); err != nil {
			return Repair{}, err
		}
	}
	// The searches above read every witness: read the checkpoint again, so
	// that the repair's condition is as fresh as one read (a live worker
	// keeps promoting). Generations only grow, so what was older stays
	// older.
	if cp, err = st.LoadCheckpoint(ctx, k); err != nil {
		return Repair{}, err
	}
	if bytes.Equal(cp.Cursor, cursor) {
		own, ownFound = cursorSeen{partition: k.Partition, generation: cp.Generation, how: "its current cursor"}, true
	}
	var why []string
	if cp.Complete {
		why = append(why, fmt.Sprintf("%s is complete (watermark %s): the restart would clear its complete flag and read it again", k, cp.Watermark))
	}
	progress := fmt.Sprintf("generation %d with watermark %s and applied %s", cp.Generation, cp.Watermark, appliedString(cp))
	where := "a cursor this partition's checkpoint and witnesses do not hold: its position is not checked"
	switch {
	case len(cursor) == 0:
		where = "the provider's start"
		if cp.Generation > 1 || cp.HasApplied || !cp.Watermark.IsZero() {
			why = append(why, fmt.Sprintf("the empty cursor is the provider's start: it moves %s backwards from %s, which the restart keeps ahead of the cursor", k, progress))
		}
	case ownFound:
		where = fmt.Sprintf("%s (its cursor at generation %d)", own.how, own.generation)
		if own.generation < cp.Generation {
			why = append(why, fmt.Sprintf("the cursor is %s, an older position: it moves %s backwards from %s, which the restart keeps ahead of the cursor", where, k, progress))
		}
	case len(otherScopes) > 0:
		where = fmt.Sprintf("a cursor stored in scope %s (partition %s)", otherScopes[0].Scope, otherScopes[0].Partition)
		why = append(why, fmt.Sprintf("the cursor belongs to partition %s of scope %s, not to scope %s (a cursor copied from another pipeline's scope; cursors that look alike across scopes, such as offsets, need --force)",
			otherScopes[0].Partition, otherScopes[0].Scope, k.Scope))
	case otherFound:
		where = fmt.Sprintf("partition %s's cursor (%s)", other.partition, other.how)
		why = append(why, fmt.Sprintf("the cursor belongs to partition %s of scope %s (%s), not to %s (cursors that look alike across partitions, such as offsets, need --force)",
			other.partition, k.Scope, other.how, k.Partition))
	}
	command := fmt.Sprintf("restart --scope %s --partition %s --cursor %s", k.Scope, k.Partition, reconcile.CursorHash(cursor))
	repair := fmt.Sprintf("restart %s at cursor %s", k, reconcile.CursorHash(cursor))
	if err := o.refuse(repair, why); err != nil {
		return Repair{}, err
	}
	e := o.entry(command, checkpointPrevious(cp), why)
	unpark := map[bool]string{true: ", unparking it first", false: ""}[cp.Parked != ""]
	return Repair{
		Describe: fmt.Sprintf("move %s from generation %d to generation %d at the given boundary cursor %s, %s (watermark %s and applied %s kept)%s",
			k, cp.Generation, cp.Generation+1, reconcile.CursorHash(cursor), where, cp.Watermark, appliedString(cp), unpark),
		Before: CheckpointState(cp),
		Entry:  e,
		apply: func(ctx context.Context) (string, error) {
			cur := cp
			if cp.Parked != "" {
				if cur, err = st.SetParked(ctx, k, cp.Cursor, cp.Generation, cp.Lease, ""); err != nil {
					return "", err
				}
			}
			after, err := st.Promote(ctx, store.Promotion{
				Key: k, FromCursor: cur.Cursor, FromGeneration: cur.Generation,
				To: cursor, WitnessID: "repair:restart", Epoch: cur.Epoch, Lease: cur.Lease,
				Repairs: store.AppendRepair(cur.Repairs, e),
			})
			if err != nil && cp.Parked != "" {
				return "", fmt.Errorf("%s was unparked at generation %d, but the restart lost (the partition resumes from its own cursor): %w", k, cur.Generation, err)
			}
			if err != nil {
				return "", err
			}
			return CheckpointState(after), nil
		},
	}, nil
}

// keysInOtherScopes searches the table for cursor outside scope, when the
// store can (store.CursorFinder); a search the store cut short is an
// error, so that an unchecked cursor is never passed as checked.
func keysInOtherScopes(ctx context.Context, st RepairStore, scope string, cursor []byte) ([]store.Key, error) {
	f := store.FindCursorFinder(st)
	if f == nil {
		return nil, nil
	}
	keys, err := f.KeysHoldingCursor(ctx, cursor, scope, 1)
	if err != nil {
		return nil, fmt.Errorf("searching the other scopes of the table for the cursor: %w", err)
	}
	return keys, nil
}

func appliedString(cp store.Checkpoint) string {
	if !cp.HasApplied {
		return "none"
	}
	return cp.Applied.String()
}

// PlanAdvanceEpoch records, as a new membership epoch, the operator's proof
// that the current partition set's change is complete (added partitions
// covered, removed ones sealed) through cutover. One compare-and-swap on the
// membership epoch read now, with the audit entry on the new record. The
// new epoch keeps the members' lineage: it is the provider's fact, not a
// proof, and a child still waits for its parents.
//
// Without o.Force it refuses (RefusedError) a cutover the store
// contradicts (docs/design.md#proving-a-cutover-by-hand):
//   - of another coordinate kind than the scope's watermarks (the members'
//     and the published frontier's);
//   - below the published frontier (published consumers were already told
//     that everything through it is complete);
//   - above what the checkpoints prove: the minimum complete-through
//     watermark of the members (a complete member without a watermark
//     does not hold it; a member without a checkpoint or a watermark
//     proves nothing, and every cutover is refused).
func PlanAdvanceEpoch(ctx context.Context, st store.ScopeProgress, scope string, cutover coord.Watermark, o Options) (Repair, error) {
	m, err := st.LoadMembership(ctx, scope)
	if err != nil {
		return Repair{}, err
	}
	why, err := cutoverRefusals(ctx, st, m, cutover)
	if err != nil {
		return Repair{}, err
	}
	if err := o.refuse(fmt.Sprintf("advance the membership of %s to cutover %s", scope, cutover), why); err != nil {
		return Repair{}, err
	}
	prev := map[string]string{
		"epoch":   strconv.FormatUint(m.Epoch, 10),
		"proven":  strconv.FormatBool(m.Proven),
		"cutover": store.ClipRepairField(m.Cutover.String()),
	}
	if m.Reason != "" {
		prev["reason"] = store.ClipRepairField(m.Reason)
	}
	e := o.entry(store.ClipRepairField(fmt.Sprintf("advance-epoch --scope %s --cutover %s --coordinate %s", scope, cutover, cutover.Kind)), prev, why)
	next := store.Membership{Scope: scope, Epoch: m.Epoch + 1, Partitions: slices.Clone(m.Partitions), Cutover: cutover, Proven: true,
		Parents: maps.Clone(m.Parents), Repairs: store.AppendRepair(m.Repairs, e)}
	return Repair{
		Describe: fmt.Sprintf("advance membership of %s from epoch %d (proven %t) to epoch %d, proven through cutover %s, partitions %v",
			scope, m.Epoch, m.Proven, next.Epoch, cutover, next.Partitions),
		Before: MembershipState(m),
		Entry:  e,
		apply: func(ctx context.Context) (string, error) {
			after, err := st.SwapMembership(ctx, m.Epoch, next)
			if err != nil {
				return "", err
			}
			return MembershipState(after), nil
		},
	}, nil
}

// cutoverRefusals lists what the store holds against cutover.
func cutoverRefusals(ctx context.Context, st store.ScopeProgress, m store.Membership, cutover coord.Watermark) ([]string, error) {
	cps, err := st.ListCheckpoints(ctx, m.Scope)
	if err != nil {
		return nil, fmt.Errorf("reading checkpoints of %s: %w", m.Scope, err)
	}
	byPart := map[string]store.Checkpoint{}
	for _, cp := range cps {
		byPart[cp.Partition] = cp
	}
	f, err := st.LoadFrontier(ctx, m.Scope)
	switch {
	case errors.Is(err, store.ErrNotFound):
		f = store.Frontier{}
	case err != nil:
		return nil, fmt.Errorf("reading the published frontier of %s: %w", m.Scope, err)
	}

	kinds := map[coord.Kind][]string{}
	var proven coord.Watermark
	var holders, unprovenBy []string
	for _, p := range m.Partitions {
		cp, ok := byPart[p]
		switch {
		case !ok:
			unprovenBy = append(unprovenBy, p+" (no checkpoint)")
			continue
		case cp.Watermark.IsZero() && cp.Complete:
			continue
		case cp.Watermark.IsZero():
			unprovenBy = append(unprovenBy, p+" (no watermark)")
			continue
		}
		kinds[cp.Watermark.Kind] = append(kinds[cp.Watermark.Kind], p)
		switch {
		case proven.IsZero() || cp.Watermark.Less(proven):
			proven, holders = cp.Watermark, []string{p}
		case cp.Watermark == proven:
			holders = append(holders, p)
		}
	}
	if !f.Scalar.IsZero() {
		kinds[f.Scalar.Kind] = append(kinds[f.Scalar.Kind], "the published frontier")
	}

	var why []string
	for _, k := range slices.Sorted(maps.Keys(kinds)) {
		if k != cutover.Kind {
			why = append(why, fmt.Sprintf("the cutover is a %s coordinate but the scope's watermarks of %s are %s", cutover.Kind, strings.Join(kinds[k], ", "), k))
		}
	}
	if !f.Scalar.IsZero() && f.Scalar.Kind == cutover.Kind && cutover.Less(f.Scalar) {
		why = append(why, fmt.Sprintf("the cutover %s is below the published frontier %s (epoch %d), which consumers were already given as complete", cutover, f.Scalar, f.Epoch))
	}
	switch {
	case len(unprovenBy) > 0:
		why = append(why, fmt.Sprintf("the checkpoints prove no cutover: member %s", strings.Join(unprovenBy, ", member ")))
	case len(kinds) == 1 && !proven.IsZero() && proven.Kind == cutover.Kind && proven.Less(cutover):
		why = append(why, fmt.Sprintf("the cutover %s is above what the checkpoints prove: the minimum complete-through watermark of the members is %s (%s)", cutover, proven, strings.Join(holders, ", ")))
	}
	return why, nil
}

// IsFenced reports whether a repair lost to a concurrent writer.
func IsFenced(err error) bool { return errors.Is(err, store.ErrFenced) }
