package chain

import "time"

// Decisions a driver makes beside the machine, kept here (pure) so that
// the input (input/input.go, input/partition.go) and the simulator's lanes
// (internal/clustersim) call the same rule rather than each keeping a copy.

// FetchRetry is a driver's retry of one fetch's transient failures
// (fetch_retries, fetch_backoff): the machine sees a transient failure
// only once the driver gave up (onFetchError then polls again later).
// Expired cursors, malformed answers and permanent failures are never
// retried here: the machine decides what they mean. Use one FetchRetry
// per Fetch.
type FetchRetry struct {
	// Retries is how many times a transiently failing fetch is made again
	// (Config.FetchRetries); Backoff is the wait before the first retry,
	// doubled before each further one up to the greater of
	// MaxFetchBackoff and Backoff.
	Retries int
	Backoff time.Duration

	tries int
	next  time.Duration
}

// Retry reports whether a fetch that failed with class f is made again,
// and the back-off before it (the driver may draw a jitter from it).
func (r *FetchRetry) Retry(f FetchFailure) (time.Duration, bool) {
	if f != FetchTransient || r.tries >= r.Retries {
		return 0, false
	}
	if r.tries == 0 {
		r.next = max(r.Backoff, 0)
	}
	d := r.next
	r.tries++
	r.next = min(r.next*2, max(MaxFetchBackoff, r.Backoff))
	return d, true
}

// FetchRetry is the retry of one fetch that config c asks for
// (FetchRetries, FetchBackoff).
func (c Config) FetchRetry() FetchRetry {
	return FetchRetry{Retries: c.FetchRetries, Backoff: c.FetchBackoff}
}

// Tries is how many retries were granted.
func (r *FetchRetry) Tries() int { return r.tries }

// Ends reports whether a batch emitted by chain c belongs to the chain
// this EndChain ends (or an earlier one): a driver drops such emissions it
// has not handed downstream yet, since their outcomes would be ignored and
// the pages are fetched again.
func (e EndChain) Ends(c uint64) bool { return c <= e.Chain }

// Pruning is a driver's deletion of the witnesses below a durable
// generation (checkpoint.witness_cleanup: prune, store.Store.PruneWitnesses):
// every Every promoted generations, one deletion at a time, beside the
// partition's worker. Checkpoints that become durable while a deletion
// runs are not forgotten: the deletion's Done names the next one they made
// due, so the deleted range catches up with the checkpoint even when the
// partition promotes nothing more (a complete partition). The zero Every
// never prunes.
type Pruning struct {
	Every uint64

	below    uint64 // witnesses below it are deleted
	latest   uint64 // the highest durable generation Due was told of
	inFlight bool
}

// Due reports whether witnesses are to be deleted now, at a durable
// checkpoint of generation generation; if so a deletion is in flight until
// Done. below keeps the generation before the checkpoint's: a load reads
// its promoted witness (Load.From), whose events are the receipts and the
// previous page a retry of the durable cursor is checked against (an
// offset page must begin with its last event). The simulator found a
// partition of offset pages that restarted for ever when it was deleted.
func (p *Pruning) Due(generation uint64) (below uint64, ok bool) {
	p.latest = max(p.latest, generation)
	if p.inFlight {
		return 0, false
	}
	return p.next()
}

// next starts the deletion the latest durable generation makes due.
func (p *Pruning) next() (uint64, bool) {
	below := max(p.latest, 2) - 1
	if p.Every == 0 || below < p.below+p.Every {
		return 0, false
	}
	p.inFlight = true
	return below, true
}

// Done ends the deletion Due (or an earlier Done) started: below is what
// it deleted below, err its failure (retried at a later checkpoint). After
// a success it reports the next deletion due (in flight until its own
// Done), if checkpoints became durable meanwhile.
func (p *Pruning) Done(below uint64, err error) (next uint64, ok bool) {
	p.inFlight = false
	if err != nil {
		return 0, false
	}
	p.below = max(p.below, below)
	return p.next()
}
