package chain

import (
	"fmt"
	"strings"
)

// ParkKind is the class of a park reason: what happened, which tells an
// operator whether retrying could help (docs/design.md#failures). Every
// park reason the machine writes starts with its kind's text, followed by
// the details (ParkReason). The zero value is ParkUnknown: a reason the
// machine did not write (ParkKindOf).
type ParkKind uint8

const (
	// ParkUnknown: text that names no kind (ParkKindOf of a reason an
	// operator or an older version wrote).
	ParkUnknown ParkKind = iota
	// ParkMalformed: the provider answered one page (cursor, generation)
	// with a body that cannot be read FetchRetries+1 times in a row
	// ("malformed page after N attempts: ..."): truncated or non-JSON
	// bodies, a mapping that finds no events, an event without id or
	// position, a duplicate id or positions out of order in one response.
	ParkMalformed
	// ParkReceiptConflict: a response shows another identity, payload or
	// position where a durable receipt says what was delivered.
	ParkReceiptConflict
	// ParkMovedEvent: a response has an event id at another position than
	// an earlier response to the same (cursor, generation) had it.
	ParkMovedEvent
	// ParkUnreconcilable: any other response the classifier rejects.
	ParkUnreconcilable
	// ParkDivergence: a retry whose safety cannot be proven (recovery
	// park, or restarts from a boundary that made no progress).
	ParkDivergence
	// ParkExpired: the source no longer honours the cursor.
	ParkExpired
	// ParkRefused: the promotion of a complete page was refused.
	ParkRefused
	// ParkPermanent: a fetch that retrying cannot fix (an HTTP 4xx other
	// than 429 and the expired statuses, a request that cannot be built).
	ParkPermanent
	// ParkUnstorableWitness: a page's witness can never be stored (too
	// large for the store).
	ParkUnstorableWitness
	// ParkContractViolation: a response broke a claim the partition may
	// have published (an event at or below its durable complete-through
	// watermark, a watermark below it; docs/design.md#contract-monitors),
	// under recovery park. The page that showed it was delivered and
	// promoted first. Or a page refused for an offset-shaped successor
	// (never delivered: reading on by an undeclared offset is unsafe),
	// under recovery park or after the restarts.
	ParkContractViolation
)

// parkKindText is the text a reason of each kind starts with (the store's
// parked field, the log, status).
var parkKindText = [...]string{
	ParkUnknown:           "",
	ParkMalformed:         "malformed page",
	ParkReceiptConflict:   "receipt conflict",
	ParkMovedEvent:        "moved event",
	ParkUnreconcilable:    "unreconcilable page",
	ParkDivergence:        "unprovable divergence",
	ParkExpired:           "expired cursor",
	ParkRefused:           "refused promotion",
	ParkPermanent:         "permanent fetch failure",
	ParkUnstorableWitness: "unstorable witness",
	ParkContractViolation: "contract violation",
}

func (k ParkKind) String() string {
	if int(k) < len(parkKindText) {
		return parkKindText[k]
	}
	return fmt.Sprintf("park_kind(%d)", uint8(k))
}

// ParkReason is why the machine parks (or recovers, which parks when it
// cannot restart): its Kind, then the details (the attempts, the
// partition, the generation and cursor hash it stopped at, the error).
type ParkReason struct {
	Kind   ParkKind
	Detail string
}

// String is the reason as the store, the log and status show it: the
// kind's text, a space, the detail.
func (r ParkReason) String() string {
	if r.Detail == "" {
		return r.Kind.String()
	}
	return r.Kind.String() + " " + r.Detail
}

// also is r with more detail after it ("; " and the text).
func (r ParkReason) also(format string, a ...any) ParkReason {
	r.Detail += "; " + fmt.Sprintf(format, a...)
	return r
}

// IsZero reports whether r is no reason.
func (r ParkReason) IsZero() bool { return r == ParkReason{} }

// ParkKindOf reads the kind of a stored park reason (a checkpoint's
// Parked field): the one place a reason's text is matched, so drivers
// compare kinds. Text that starts with no kind's text is ParkUnknown.
func ParkKindOf(parked string) ParkKind {
	for k := ParkMalformed; int(k) < len(parkKindText); k++ {
		if t := parkKindText[k]; parked == t || strings.HasPrefix(parked, t+" ") {
			return k
		}
	}
	return ParkUnknown
}
