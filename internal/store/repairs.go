package store

import (
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"time"
	"unicode/utf8"
)

// MaxRepairs is how many repair entries a checkpoint or membership record
// keeps: the newest ones (AppendRepair drops the oldest).
const MaxRepairs = 5

// MaxRepairFieldBytes bounds each string of a RepairEntry (user, host,
// command, each previous value); ClipRepairField cuts to it.
const MaxRepairFieldBytes = 256

// maxRepairPrevious bounds how many previous values one entry names.
const maxRepairPrevious = 12

// RepairEntry is the audit record of one operator repair (`connect tidemark
// unpark|restart|advance-epoch`), kept on the record the repair wrote, in
// the same conditional write (docs/design.md#operator-repairs). It never
// holds a raw cursor: cursors appear as reconcile.CursorHash.
type RepairEntry struct {
	// Time is when the operator made the repair (UTC, milliseconds).
	Time time.Time `json:"time"`
	// User and Host name the operator's OS user and host.
	User string `json:"user"`
	Host string `json:"host"`
	// Command is the repair as the operator ran it, with cursors hashed
	// ("restart --partition p --cursor sha256:… --force").
	Command string `json:"command"`
	// Previous holds the values the repair replaced, by name
	// ("generation", "cursor", "watermark", "applied", "complete",
	// "parked"; "epoch", "cutover", "proven" for a membership).
	Previous map[string]string `json:"previous,omitempty"`
}

// ClipRepairField returns s as valid UTF-8 of at most MaxRepairFieldBytes
// bytes, ending in "…" when it was cut.
func ClipRepairField(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= MaxRepairFieldBytes {
		return s
	}
	cut := MaxRepairFieldBytes - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// AppendRepair returns log with e appended, keeping the newest MaxRepairs
// entries. log is not modified.
func AppendRepair(log []RepairEntry, e RepairEntry) []RepairEntry {
	out := append(CloneRepairs(log), NormalizeRepair(e))
	if len(out) > MaxRepairs {
		out = out[len(out)-MaxRepairs:]
	}
	return out
}

// NormalizeRepair returns e with its time in UTC at millisecond precision
// (what both stores keep) and a copy of its previous values.
func NormalizeRepair(e RepairEntry) RepairEntry {
	e.Time = e.Time.UTC().Truncate(time.Millisecond)
	if len(e.Previous) == 0 {
		e.Previous = nil
	} else {
		e.Previous = maps.Clone(e.Previous)
	}
	return e
}

// CloneRepairs deep-copies a repair log (nil when empty).
func CloneRepairs(log []RepairEntry) []RepairEntry {
	if len(log) == 0 {
		return nil
	}
	out := make([]RepairEntry, len(log))
	for i, e := range log {
		out[i] = NormalizeRepair(e)
	}
	return out
}

// CheckRepairs rejects a repair log a store cannot keep: more than
// MaxRepairs entries, a field longer than MaxRepairFieldBytes or not
// valid UTF-8, an entry without a time or command, too many previous
// values.
func CheckRepairs(log []RepairEntry) error {
	if len(log) > MaxRepairs {
		return fmt.Errorf("%w: %d repair entries (at most %d)", ErrInvalid, len(log), MaxRepairs)
	}
	for i, e := range log {
		if e.Time.IsZero() || e.Command == "" {
			return fmt.Errorf("%w: repair entry %d has no time or no command", ErrInvalid, i)
		}
		if len(e.Previous) > maxRepairPrevious {
			return fmt.Errorf("%w: repair entry %d names %d previous values (at most %d)", ErrInvalid, i, len(e.Previous), maxRepairPrevious)
		}
		fields := []string{e.User, e.Host, e.Command}
		for k, v := range e.Previous {
			fields = append(fields, k, v)
		}
		for _, f := range fields {
			if len(f) > MaxRepairFieldBytes || !utf8.ValidString(f) {
				return fmt.Errorf("%w: repair entry %d has a field longer than %d bytes or not UTF-8", ErrInvalid, i, MaxRepairFieldBytes)
			}
		}
	}
	return nil
}

// EncodeRepairs is the stored form of a repair log (JSON; "" when empty),
// for stores that keep it as one attribute.
func EncodeRepairs(log []RepairEntry) (string, error) {
	if len(log) == 0 {
		return "", nil
	}
	b, err := json.Marshal(CloneRepairs(log))
	return string(b), err
}

// DecodeRepairs reads EncodeRepairs's form ("" is the empty log).
func DecodeRepairs(s string) ([]RepairEntry, error) {
	if s == "" {
		return nil, nil
	}
	var log []RepairEntry
	if err := json.Unmarshal([]byte(s), &log); err != nil {
		return nil, err
	}
	return CloneRepairs(log), nil
}

// UnparkApplied reports whether stored is already the result of an Unpark
// that wrote repairs: not parked, at generation and cursor, with exactly
// that repair log (the repeat of an applied write whose response was lost).
func UnparkApplied(cursor []byte, generation uint64, repairs []RepairEntry, stored Checkpoint) bool {
	if stored.Parked != "" || stored.Generation != generation || string(stored.Cursor) != string(cursor) || len(repairs) == 0 {
		return false
	}
	a, errA := EncodeRepairs(repairs)
	b, errB := EncodeRepairs(stored.Repairs)
	return errA == nil && errB == nil && a == b
}
