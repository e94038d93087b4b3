package store

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/reconcile"
)

// Limits every Store implementation enforces, so that the in-memory twin
// refuses exactly what DynamoDB cannot hold.
const (
	// MaxNameBytes bounds a scope, partition, witness attempt id or lease
	// owner: at most 255 bytes of valid UTF-8. (DynamoDB keys hold at most
	// 2048 bytes of partition key and 1024 of sort key, after escaping.)
	MaxNameBytes = 255
	// MaxRecordBytes bounds the payload of one stored record: a witness
	// (WitnessSize), a membership record or a published frontier. It is
	// DynamoDB's 400 KB item limit less 8 KiB kept for keys, attribute names
	// and numbers. A larger record is refused with ErrInvalid, never cut.
	MaxRecordBytes = 400<<10 - 8<<10
	// MaxReasonBytes bounds free-form text (a parked reason, a membership or
	// frontier reason). Longer text is shortened, not refused: a partition
	// must always be able to park.
	MaxReasonBytes = 4 << 10
)

// CheckName reports whether s can name a scope, partition, attempt or lease
// owner: not empty, valid UTF-8, at most MaxNameBytes bytes.
func CheckName(field, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%w: empty %s", ErrInvalid, field)
	case len(s) > MaxNameBytes:
		return fmt.Errorf("%w: %s is %d bytes, over the %d-byte limit", ErrInvalid, field, len(s), MaxNameBytes)
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: %s %q is not valid UTF-8", ErrInvalid, field, s)
	}
	return nil
}

// CheckCursor refuses a cursor longer than MaxCursorBytes. Cursors are
// otherwise arbitrary bytes (zero bytes and invalid UTF-8 included) and are
// stored exactly.
//
// An encrypted cursor (Encrypted) may be SealOverhead bytes longer: its
// plaintext was checked against MaxCursorBytes before it was sealed.
func CheckCursor(field string, b []byte) error {
	limit := MaxCursorBytes
	if isSealed(b) {
		limit += SealOverhead
	}
	if len(b) > limit {
		return fmt.Errorf("%w: %s is %d bytes, over the %d-byte cursor limit (cursors are never truncated)", ErrInvalid, field, len(b), MaxCursorBytes)
	}
	return nil
}

// CleanReason makes free-form text storable: invalid UTF-8 is replaced and
// text longer than MaxReasonBytes is shortened (marked with "…"). Both
// stores apply it, so what is read back is the same everywhere.
func CleanReason(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= MaxReasonBytes {
		return s
	}
	cut := MaxReasonBytes - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func checkWatermark(field string, w coord.Watermark) error {
	switch w.Kind {
	case coord.KindNone, coord.KindInteger, coord.KindTimestamp:
		return nil
	case coord.KindString:
		if len(w.Str) > MaxCursorBytes {
			return fmt.Errorf("%w: %s is %d bytes, over the %d-byte limit", ErrInvalid, field, len(w.Str), MaxCursorBytes)
		}
		return nil
	case coord.KindDecimal:
		if len(w.Str) > MaxCursorBytes {
			return fmt.Errorf("%w: %s is %d digits, over the %d-byte limit", ErrInvalid, field, len(w.Str), MaxCursorBytes)
		}
		if d, err := coord.Decimal(w.Str); err != nil || d.Str != w.Str {
			return fmt.Errorf("%w: %s %q is not a canonical decimal", ErrInvalid, field, w.Str)
		}
		return nil
	}
	return fmt.Errorf("%w: %s has unknown coordinate kind %d", ErrInvalid, field, uint8(w.Kind))
}

func checkLease(l Lease) error {
	if l.IsZero() {
		return nil
	}
	return CheckName("lease owner", l.Owner)
}

// Validate reports whether c can be stored: a valid key, a cursor within
// MaxCursorBytes, valid names and a known watermark kind.
func (c Checkpoint) Validate() error {
	if err := c.Key.Validate(); err != nil {
		return err
	}
	if err := CheckRepairs(c.Repairs); err != nil {
		return err
	}
	if err := CheckCursor("cursor", c.Cursor); err != nil {
		return err
	}
	if c.PromotedWitness != "" {
		if err := CheckName("promoted witness id", c.PromotedWitness); err != nil {
			return err
		}
	}
	if err := checkLease(c.Lease); err != nil {
		return err
	}
	if err := checkApplied(c.Applied, c.HasApplied, c.AppliedID); err != nil {
		return err
	}
	if err := checkFinality(c.Finality, c.Watermark); err != nil {
		return err
	}
	if c.Incarnation != "" {
		if err := CheckName("incarnation", c.Incarnation); err != nil {
			return err
		}
	}
	return checkWatermark("watermark", c.Watermark)
}

// checkFinality checks a watermark's finality basis: one a contract gives
// (reconcile.Basis.Validate), and only with a watermark.
func checkFinality(f reconcile.Basis, w coord.Watermark) error {
	switch {
	case f.IsZero():
		return nil
	case f.Validate() != nil:
		return fmt.Errorf("%w: watermark finality: %v", ErrInvalid, f.Validate())
	case w.IsZero():
		return fmt.Errorf("%w: a watermark finality without a watermark", ErrInvalid)
	}
	return nil
}

// checkApplied checks an applied position as a watermark of its kind: a
// known kind, strings within MaxCursorBytes, decimals canonical; and its
// event id: within MaxAppliedIDBytes, only with a position.
func checkApplied(p coord.Position, has bool, id string) error {
	if len(id) > MaxAppliedIDBytes {
		return fmt.Errorf("%w: applied event id is %d bytes, over the %d-byte limit", ErrInvalid, len(id), MaxAppliedIDBytes)
	}
	if !has {
		if id != "" {
			return fmt.Errorf("%w: an applied event id without an applied position", ErrInvalid)
		}
		return nil
	}
	if p.IsZero() {
		return fmt.Errorf("%w: an applied position without a kind", ErrInvalid)
	}
	return checkWatermark("applied position", p.AsWatermark())
}

// Validate reports whether p can be attempted: a valid key, both cursors
// within MaxCursorBytes, a generation that can be incremented, valid names
// and a known watermark kind.
func (p Promotion) Validate() error {
	if err := p.Key.Validate(); err != nil {
		return err
	}
	if err := CheckCursor("from cursor", p.FromCursor); err != nil {
		return err
	}
	if err := CheckCursor("successor cursor", p.To); err != nil {
		return err
	}
	if p.FromGeneration == 0 || p.FromGeneration == ^uint64(0) {
		return fmt.Errorf("%w: promotion from generation %d", ErrInvalid, p.FromGeneration)
	}
	if p.Pages > MaxPromotionPages || p.FromGeneration > ^uint64(0)-MaxPromotionPages {
		return fmt.Errorf("%w: promotion of %d pages from generation %d (at most %d)", ErrInvalid, p.Pages, p.FromGeneration, MaxPromotionPages)
	}
	if p.WitnessID != "" {
		if err := CheckName("witness id", p.WitnessID); err != nil {
			return err
		}
	}
	if err := checkLease(p.Lease); err != nil {
		return err
	}
	if err := checkApplied(p.Applied, p.HasApplied, p.AppliedID); err != nil {
		return err
	}
	if err := checkFinality(p.Finality, p.Watermark); err != nil {
		return err
	}
	if p.Incarnation != "" {
		if err := CheckName("incarnation", p.Incarnation); err != nil {
			return err
		}
	}
	if p.Reset {
		switch {
		case p.Incarnation == "":
			return fmt.Errorf("%w: a reset into a new incarnation names no incarnation", ErrInvalid)
		case p.Pages > 1 || !p.Watermark.IsZero() || p.HasApplied || p.Complete:
			return fmt.Errorf("%w: a reset into a new incarnation carries no page's progress", ErrInvalid)
		}
	}
	if err := CheckRepairs(p.Repairs); err != nil {
		return err
	}
	return checkWatermark("watermark", p.Watermark)
}

// Validate reports whether m can be stored.
func (m Membership) Validate() error {
	if err := CheckName("scope", m.Scope); err != nil {
		return err
	}
	if err := CheckRepairs(m.Repairs); err != nil {
		return err
	}
	if m.Epoch == 0 {
		return fmt.Errorf("%w: membership epoch 0 (epochs start at 1)", ErrInvalid)
	}
	seen := make(map[string]bool, len(m.Partitions))
	size := len(m.Reason) + len(m.Cutover.Str)
	for _, p := range m.Partitions {
		if err := CheckName("partition", p); err != nil {
			return err
		}
		if seen[p] {
			return fmt.Errorf("%w: partition %q listed twice in membership epoch %d", ErrInvalid, p, m.Epoch)
		}
		seen[p] = true
		size += len(p) + 8
	}
	for p := range m.Incarnations {
		if !seen[p] {
			return fmt.Errorf("%w: incarnation change of %q, which is not a member of epoch %d", ErrInvalid, p, m.Epoch)
		}
		size += len(p) + 8
	}
	for c, ps := range m.Parents {
		if !seen[c] {
			return fmt.Errorf("%w: lineage of %q, which is not a member of epoch %d", ErrInvalid, c, m.Epoch)
		}
		for _, p := range ps {
			if err := CheckName("parent", p); err != nil {
				return err
			}
			if p == c {
				return fmt.Errorf("%w: partition %q is its own parent", ErrInvalid, c)
			}
			size += len(p) + 8
		}
	}
	if size > MaxShardedRecordBytes { // stored in shards (published.go)
		return fmt.Errorf("%w: membership of %d partitions is %d bytes, over the %d-byte record limit", ErrInvalid, len(m.Partitions), size, MaxShardedRecordBytes)
	}
	return checkWatermark("cutover", m.Cutover)
}

// Validate reports whether f can be published.
func (f Frontier) Validate() error {
	if err := CheckName("scope", f.Scope); err != nil {
		return err
	}
	if f.Epoch == 0 {
		return fmt.Errorf("%w: frontier epoch 0 (epochs start at 1)", ErrInvalid)
	}
	if err := checkWatermark("frontier scalar", f.Scalar); err != nil {
		return err
	}
	size := len(f.Reason) + len(f.Scalar.Str)
	for p, w := range f.Vector {
		if err := CheckName("vector partition", p); err != nil {
			return err
		}
		if err := checkWatermark("vector watermark of "+p, w); err != nil {
			return err
		}
		size += len(p) + len(w.Str) + 32
	}
	for _, p := range f.HeldBy {
		if err := CheckName("held-by partition", p); err != nil {
			return err
		}
		size += len(p) + 8
	}
	if size > MaxShardedRecordBytes { // stored in shards (published.go)
		return fmt.Errorf("%w: frontier of %d partitions is %d bytes, over the %d-byte record limit", ErrInvalid, len(f.Vector), size, MaxShardedRecordBytes)
	}
	return nil
}

// WitnessSize is the payload size of a witness as every store counts it
// against MaxRecordBytes: both cursors, the marker, the compact event
// encoding (reconcile.EncodeEvents) and a string watermark.
func WitnessSize(w reconcile.Witness) int {
	return len(w.InputCursor) + len(w.Successor) + len(w.Marker) + len(reconcile.EncodeEvents(w.Events)) + len(w.CompleteThrough.Str)
}

// ValidateWitness reports whether w can be stored whole.
func ValidateWitness(w reconcile.Witness) error {
	k := Key{Scope: w.Scope, Partition: w.Partition}
	if err := ValidateAttempt(k, w.AttemptID); err != nil {
		return err
	}
	if err := CheckCursor("witness input cursor", w.InputCursor); err != nil {
		return err
	}
	if err := CheckCursor("witness successor", w.Successor); err != nil {
		return err
	}
	if err := checkWatermark("witness complete-through", w.CompleteThrough); err != nil {
		return err
	}
	switch w.Disposition {
	case reconcile.Pending, reconcile.Promoted, reconcile.Abandoned:
	default:
		return fmt.Errorf("%w: witness %s has disposition %s (want pending, promoted or abandoned)", ErrInvalid, w.AttemptID, w.Disposition)
	}
	if w.AckedThrough < 0 || w.AckedThrough > len(w.Events) {
		return fmt.Errorf("%w: witness %s acked through %d of %d events", ErrInvalid, w.AttemptID, w.AckedThrough, len(w.Events))
	}
	if n := WitnessSize(w); n > MaxRecordBytes {
		return fmt.Errorf("%w: witness %s (%d events, cursors and marker) is %d bytes, over the %d-byte limit of one stored item; it is refused, never cut: fetch smaller pages", ErrInvalid, w.AttemptID, len(w.Events), n, MaxRecordBytes)
	}
	return nil
}

// ValidateAttempt reports whether (k, attempt) can name a witness.
func ValidateAttempt(k Key, attempt string) error {
	if err := k.Validate(); err != nil {
		return err
	}
	return CheckName("witness attempt id", attempt)
}
