package chain

// Every park reason the machine writes starts with the class of what
// happened, followed by the details (the attempts, the partition, the
// generation and cursor hash it stopped at, the error). An operator reads
// the class first: it says whether retrying could help
// (docs/design.md#failures).
const (
	// ReasonMalformed: the provider answered one page (cursor, generation)
	// with a body that cannot be read FetchRetries+1 times in a row
	// ("malformed page after N attempts: ..."): truncated or non-JSON
	// bodies, a mapping that finds no events, an event without id or
	// position, a duplicate id or positions out of order in one response.
	ReasonMalformed = "malformed page"
	// ReasonReceiptConflict: a response shows another identity, payload or
	// position where a durable receipt says what was delivered.
	ReasonReceiptConflict = "receipt conflict"
	// ReasonMovedEvent: a response has an event id at another position than
	// an earlier response to the same (cursor, generation) had it.
	ReasonMovedEvent = "moved event"
	// ReasonUnreconcilable: any other response the classifier rejects.
	ReasonUnreconcilable = "unreconcilable page"
	// ReasonDivergence: a retry whose safety cannot be proven (recovery
	// park, or restarts from a boundary that made no progress).
	ReasonDivergence = "unprovable divergence"
	// ReasonExpired: the source no longer honours the cursor.
	ReasonExpired = "expired cursor"
	// ReasonRefused: the promotion of a complete page was refused.
	ReasonRefused = "refused promotion"
	// ReasonPermanent: a fetch that retrying cannot fix (an HTTP 4xx other
	// than 429 and the expired statuses, a request that cannot be built).
	ReasonPermanent = "permanent fetch failure"
	// ReasonUnstorableWitness: a page's witness can never be stored (too
	// large for the store).
	ReasonUnstorableWitness = "unstorable witness"
	// ReasonContractViolation: a response broke a claim the partition may
	// have published (an event at or below its durable complete-through
	// watermark, a watermark below it; docs/design.md#contract-monitors),
	// under recovery park. The page that showed it was delivered and
	// promoted first.
	ReasonContractViolation = "contract violation"
)
