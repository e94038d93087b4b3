// Package ops implements the operator commands of tidemark (`connect
// tidemark status|unpark|restart|advance-epoch`): a per-partition view of the
// durable state, and repairs.
//
// Invariants:
//   - Status only reads.
//   - Every repair is a conditional write on the state the operator saw
//     (cursor and generation, or membership epoch): a repair racing a live
//     worker loses with a fencing error instead of overwriting progress.
//   - Every repair has a dry run that prints the exact write it would make.
//   - A repair the stored state makes unsafe is refused (RefusedError)
//     unless Options.Force; every repair prints the state before and after
//     and writes its audit entry (store.RepairEntry) in its own conditional
//     write (docs/design.md#operator-repairs).
package ops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/frontier"
	"github.com/tidemark/tidemark/internal/frontierrec"
	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/store"
)

// PartitionStatus is one row of the status table.
type PartitionStatus struct {
	Partition  string `json:"partition"`
	Generation uint64 `json:"generation"`
	Watermark  string `json:"watermark"`
	// Finality is what the watermark's finality rests on, as the contract
	// declared it when it was written ("source", "append_only_writer
	// assertion", "lag 5m0s"); empty when unknown or without a watermark.
	Finality string `json:"finality,omitempty"`
	// Reread is the range of the partition's current re-read pass,
	// "(from, mark]" ("(start, mark]" for the first), when it has a re-read
	// window (docs/design.md#re-read-windows).
	Reread  string `json:"reread,omitempty"`
	Applied string `json:"applied,omitempty"`
	// AppliedID is the id of the event at Applied (what restart_cursor
	// sees as applied_id), when recorded.
	AppliedID       string `json:"applied_id,omitempty"`
	CursorHash      string `json:"cursor_hash"`
	PromotedWitness string `json:"promoted_witness,omitempty"`
	PendingWitness  int    `json:"pending_witnesses"`
	Parked          string `json:"parked,omitempty"`
	// Failing is why the partition's fetches keep failing transiently
	// (retried for ever, never parked): the worker's note, rewritten at
	// most once a minute while they fail, cleared by its next promotion.
	Failing string `json:"failing,omitempty"`
	// Complete: the partition is durably complete (sealed, or its finite
	// traversal ended); it is never read again.
	Complete     bool   `json:"complete"`
	LeaseOwner   string `json:"lease_owner,omitempty"`
	LeaseCounter uint64 `json:"lease_counter,omitempty"`
	// Lag is how far this partition's watermark trails the most advanced
	// partition of the scope (integer and timestamp coordinates only).
	Lag *int64 `json:"lag,omitempty"`
	// Member is false for a checkpoint outside the membership epoch.
	Member bool `json:"member"`
	// Violations counts the contract violations the partition's workers
	// observed, by kind, as of its last promotion
	// (docs/design.md#contract-monitors).
	Violations map[string]uint64 `json:"contract_violations,omitempty"`
	// Incarnation is the hash of the source incarnation the checkpoint
	// belongs to, and IncarnationEpoch the epoch that reset it into it (0:
	// it began there) (docs/design.md#source-incarnations).
	Incarnation      string `json:"incarnation,omitempty"`
	IncarnationEpoch uint64 `json:"incarnation_epoch,omitempty"`
	// Repairs is the partition's audit log of operator repairs (unpark,
	// restart), oldest first, at most store.MaxRepairs.
	Repairs []store.RepairEntry `json:"repairs,omitempty"`
}

// Status is the whole view of a scope.
type Status struct {
	Scope      string   `json:"scope"`
	Epoch      uint64   `json:"epoch"`
	Proven     bool     `json:"membership_proven"`
	Membership []string `json:"membership"`
	Frontier   *string  `json:"frontier"`
	HeldBy     []string `json:"held_by"`
	Reason     string   `json:"reason,omitempty"`
	// FrontierFinality names the members the frontier rests on whose
	// watermark is an append-only writer assertion or a lag
	// (frontier.FinalityNote).
	FrontierFinality string            `json:"frontier_finality,omitempty"`
	Vector           map[string]string `json:"vector"`
	Published        *string           `json:"published_frontier"`
	Partitions       []PartitionStatus `json:"partitions"`
	// MembershipRepairs is the audit log of the advance-epoch that wrote
	// the current membership record, if one did.
	MembershipRepairs []store.RepairEntry `json:"membership_repairs,omitempty"`
	// CursorKeyIDs are the ids of the keys the scope's checkpoint cursors
	// are stored encrypted under, sorted, as status read them without
	// --cursor-key (with the keys it reads them decrypted and lists none):
	// an input of the scope without checkpoint.cursor_encryption holding
	// these ids refuses to start (store.SealedCursorError).
	CursorKeyIDs []string `json:"cursor_key_ids,omitempty"`
}

// StatusStore is what status reads: the scope's checkpoints and records,
// and the witnesses of each partition's current generation.
type StatusStore interface {
	store.ScopeProgress
	store.WitnessStore
}

// ReadStatus reads the durable state of a scope.
func ReadStatus(ctx context.Context, st StatusStore, scope string) (Status, error) {
	s := Status{Scope: scope, Vector: map[string]string{}}
	cps, err := st.ListCheckpoints(ctx, scope)
	if err != nil {
		return s, fmt.Errorf("reading checkpoints of %s: %w", scope, err)
	}
	slices.SortFunc(cps, func(a, b store.Checkpoint) int { return strings.Compare(a.Partition, b.Partition) })
	for _, cp := range cps {
		if id, ok := store.SealedKeyID(cp.Cursor); ok && !slices.Contains(s.CursorKeyIDs, id) {
			s.CursorKeyIDs = append(s.CursorKeyIDs, id)
		}
	}
	slices.Sort(s.CursorKeyIDs)
	m, err := st.LoadMembership(ctx, scope)
	switch {
	case errors.Is(err, store.ErrNotFound):
		m = store.Membership{Scope: scope, Epoch: 1, Proven: true}
		for _, cp := range cps {
			m.Partitions = append(m.Partitions, cp.Partition)
		}
	case err != nil:
		return s, fmt.Errorf("reading membership of %s: %w", scope, err)
	}
	s.Epoch, s.Proven, s.Membership = m.Epoch, m.Proven, m.Partitions
	s.MembershipRepairs = m.Repairs
	if len(m.Partitions) > 0 {
		t, err := frontier.NewTrackerFor(frontierrec.Membership(m))
		if err != nil {
			return s, err
		}
		for _, cp := range cps {
			_, _ = t.Apply(cp.Partition, cp.Watermark)
		}
		snap := t.Frontier()
		if snap.Proven && !snap.Scalar.IsZero() {
			v := snap.Scalar.String()
			s.Frontier = &v
		}
		s.HeldBy, s.Reason = snap.HeldBy, snap.Reason
		bases := map[string]reconcile.Basis{}
		for _, cp := range cps {
			bases[cp.Partition] = cp.Finality
		}
		s.FrontierFinality = frontier.FinalityNote(snap, bases)
		for p, w := range snap.Vector {
			s.Vector[p] = w.String()
		}
	}
	// The published scalar is in the record's root: its shards are not read.
	if f, err := store.LoadFrontierHead(ctx, st, scope); err == nil && !f.Scalar.IsZero() {
		v := fmt.Sprintf("%s (epoch %d)", f.Scalar, f.Epoch)
		s.Published = &v
	}
	var top coord.Watermark
	for _, cp := range cps {
		if cp.Watermark.Kind == coord.KindInteger || cp.Watermark.Kind == coord.KindTimestamp {
			if top.IsZero() || top.Less(cp.Watermark) {
				top = cp.Watermark
			}
		}
	}
	members := make(map[string]bool, len(m.Partitions))
	for _, p := range m.Partitions {
		members[p] = true
	}
	for _, cp := range cps {
		ps := PartitionStatus{
			Partition: cp.Partition, Generation: cp.Generation, Watermark: cp.Watermark.String(), Finality: cp.Finality.String(),
			CursorHash: cursorHash(cp.Cursor), PromotedWitness: cp.PromotedWitness,
			Parked: cp.Parked, Failing: cp.Failing, Complete: cp.Complete, LeaseOwner: cp.Lease.Owner, LeaseCounter: cp.Lease.Counter,
			Member:      members[cp.Partition],
			Violations:  cp.Violations,
			Incarnation: cp.Incarnation, IncarnationEpoch: cp.IncarnationEpoch,
			Repairs: cp.Repairs,
		}
		if cp.HasApplied {
			ps.Applied, ps.AppliedID = cp.Applied.String(), cp.AppliedID
		}
		if r := cp.Reread; r.Started() {
			from := "start"
			if r.HasFrom {
				from = r.From.String()
			}
			ps.Reread = fmt.Sprintf("(%s, %s]", from, r.Mark)
		}
		if k := top.Kind; (k == coord.KindInteger || k == coord.KindTimestamp) && cp.Watermark.Kind == k {
			lag := top.Int - cp.Watermark.Int
			ps.Lag = &lag
		}
		ws, err := st.Witnesses(ctx, cp.Key, cp.Generation)
		if err != nil {
			return s, fmt.Errorf("reading witnesses of %s: %w", cp.Key, err)
		}
		for _, w := range ws {
			if w.Disposition == reconcile.Pending && string(w.InputCursor) == string(cp.Cursor) {
				ps.PendingWitness++
			}
		}
		s.Partitions = append(s.Partitions, ps)
	}
	return s, nil
}

// WriteTable renders s for a terminal.
func WriteTable(w io.Writer, s Status) error {
	fr := "withheld"
	if s.Frontier != nil {
		fr = *s.Frontier
	}
	fmt.Fprintf(w, "scope %s  epoch %d (proven %t)  frontier %s", s.Scope, s.Epoch, s.Proven, fr)
	if len(s.HeldBy) > 0 {
		fmt.Fprintf(w, "  held by %s", strings.Join(s.HeldBy, ","))
	}
	if s.Reason != "" {
		fmt.Fprintf(w, "  (%s)", s.Reason)
	}
	if s.FrontierFinality != "" {
		fmt.Fprintf(w, "  resting on %s", s.FrontierFinality)
	}
	if s.Published != nil {
		fmt.Fprintf(w, "  published %s", *s.Published)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tGENERATION\tWATERMARK\tFINALITY\tAPPLIED\tAPPLIED_ID\tLAG\tCURSOR\tPENDING\tLEASE\tPARKED")
	for _, p := range s.Partitions {
		lag := "-"
		if p.Lag != nil {
			lag = fmt.Sprint(*p.Lag)
		}
		lease := "-"
		if p.LeaseOwner != "" {
			lease = fmt.Sprintf("%s#%d", p.LeaseOwner, p.LeaseCounter)
		}
		parked := "-"
		if p.Parked != "" {
			parked = p.Parked
		}
		name := p.Partition
		if !p.Member {
			name += " (not a member)"
		}
		if p.Complete {
			name += " (complete)"
		}
		finality := "-"
		if p.Finality != "" {
			finality = strings.ReplaceAll(p.Finality, " ", "_")
		}
		// The applied position and its event id are what a restart
		// cursor is built from (restart --cursor, restart_cursor's
		// @applied and @applied_id).
		applied, appliedID := "-", "-"
		if p.Applied != "" {
			applied = p.Applied
		}
		if p.AppliedID != "" {
			appliedID = p.AppliedID
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", name, p.Generation, p.Watermark, finality, applied, appliedID, lag, p.CursorHash, p.PendingWitness, lease, parked)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := writeViolations(w, s.Partitions); err != nil {
		return err
	}
	if err := writeFailing(w, s.Partitions); err != nil {
		return err
	}
	if len(s.CursorKeyIDs) > 0 {
		if _, err := fmt.Fprintf(w, "cursors of scope %s are stored encrypted under key id(s) %s: an input of the scope needs checkpoint.cursor_encryption with these ids (without, it refuses to start); pass them as --cursor-key to see the cursor hashes\n",
			s.Scope, strings.Join(s.CursorKeyIDs, ", ")); err != nil {
			return err
		}
	}
	return writeRepairs(w, s)
}

// writeRepairs lists the last repair of each repaired partition and of the
// membership record, one line each: "last repair of P: <DescribeRepair>".
func writeRepairs(w io.Writer, s Status) error {
	for _, p := range s.Partitions {
		if len(p.Repairs) == 0 {
			continue
		}
		if _, err := fmt.Fprintf(w, "last repair of %s: %s\n", p.Partition, DescribeRepair(p.Repairs[len(p.Repairs)-1])); err != nil {
			return err
		}
	}
	if n := len(s.MembershipRepairs); n > 0 {
		if _, err := fmt.Fprintf(w, "last repair of the membership: %s\n", DescribeRepair(s.MembershipRepairs[n-1])); err != nil {
			return err
		}
	}
	return nil
}

// DescribeRepair renders an audit entry on one line: "<time> by
// <user>@<host>: <command> (before: k=v, ...)", previous values in name
// order.
func DescribeRepair(e store.RepairEntry) string {
	var prev []string
	for _, k := range slices.Sorted(maps.Keys(e.Previous)) {
		v := e.Previous[k]
		if v == "" || strings.ContainsAny(v, " ,=\"") {
			v = strconv.Quote(v)
		}
		prev = append(prev, k+"="+v)
	}
	return fmt.Sprintf("%s by %s@%s: %s (before: %s)", e.Time.UTC().Format("2006-01-02T15:04:05.000Z"), e.User, e.Host, e.Command, strings.Join(prev, ", "))
}

// writeViolations lists the partitions with contract violations, one line
// each: "contract violations of P: kind=n, ...".
func writeViolations(w io.Writer, ps []PartitionStatus) error {
	for _, p := range ps {
		if len(p.Violations) == 0 {
			continue
		}
		var kinds []string
		for _, k := range slices.Sorted(maps.Keys(p.Violations)) {
			kinds = append(kinds, fmt.Sprintf("%s=%d", k, p.Violations[k]))
		}
		if _, err := fmt.Fprintf(w, "contract violations of %s: %s\n", p.Partition, strings.Join(kinds, ", ")); err != nil {
			return err
		}
	}
	return nil
}

// writeFailing says, one line per partition with a failure note, why its
// fetches keep failing: "failing fetches of P: <note>".
func writeFailing(w io.Writer, ps []PartitionStatus) error {
	for _, p := range ps {
		if p.Failing == "" {
			continue
		}
		if _, err := fmt.Fprintf(w, "failing fetches of %s: %s\n", p.Partition, p.Failing); err != nil {
			return err
		}
	}
	return nil
}

// WriteJSON renders s as indented JSON.
func WriteJSON(w io.Writer, s Status) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(s)
}

// cursorHash is the hash the input logs for cursor, or "encrypted" for a
// value status cannot decrypt (read without --cursor-key): the hash of the
// ciphertext would match nothing in the logs.
func cursorHash(cursor []byte) string {
	if store.IsSealedCursor(cursor) {
		return "encrypted"
	}
	return reconcile.CursorHash(cursor)
}
