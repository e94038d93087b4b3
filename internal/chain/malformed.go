package chain

import (
	"bytes"
	"fmt"
	"time"

	"github.com/tidemark/tidemark/internal/reconcile"
)

// MaxFetchBackoff caps the doubling of the wait between two fetches of a
// cursor whose answers were malformed (and of the input's back-off between
// retries of a transient fetch failure), unless FetchBackoff itself is
// longer: then it is the cap.
const MaxFetchBackoff = 10 * time.Second

// malformedRun is a run of malformed answers to one fetch (cursor,
// generation): answers that could not be read, or that Build rejects on
// their own (no id or position, a duplicate id, positions out of order, a
// position of another kind). Nothing of such an answer is witnessed,
// emitted or promoted, so fetching the same cursor again is safe. Any
// answer that can be read ends the run (it is classified as usual; so does
// one the machine ignores, to a fetch of an ended chain); a transient
// failure in between neither counts nor ends it, a malformed answer to
// another fetch starts a new run.
type malformedRun struct {
	cursor []byte
	gen    uint64
	n      int
}

// onMalformed handles a malformed answer to f: it is fetched again after a
// back-off (exponential, jittered, bounded), up to FetchRetries times in a
// row; the next one parks the partition with the reason, once the pages
// before it in the chain are promoted. The chain stays as it is
// meanwhile: earlier pages are still delivered and promoted.
func (m *Machine) onMalformed(f *fetchRec, detail string) {
	m.count(MetricMalformed, 1)
	run := &m.malformed
	if run.n == 0 || run.gen != f.gen || !bytes.Equal(run.cursor, f.cursor) {
		*run = malformedRun{cursor: f.cursor, gen: f.gen}
	}
	run.n++
	attempts := max(m.cfg.FetchRetries, 0) + 1
	if run.n >= attempts {
		reason := ParkReason{ParkMalformed, fmt.Sprintf("after %s: partition %s, generation %d, cursor %s: %s",
			plural(run.n, "attempt"), m.part(), f.gen, reconcile.CursorHash(f.cursor), detail)}
		m.malformed = malformedRun{}
		if len(m.chain) == 0 {
			m.park(reason)
			return
		}
		// A page fetched ahead: the pages before it are still delivered
		// and promoted, then the partition parks at its cursor. Nothing is
		// fetched meanwhile. A chain that ends first (a nack, a hold, a
		// lost compare-and-swap) drops the park: its next answers decide
		// again.
		m.parkDrained = reason
		m.extend = false
		m.logf(Warn, "Partition %s: %s; parking once every page before it is promoted (%d in flight)", m.part(), reason, len(m.chain))
		return
	}
	d := m.fetchBackoff(run.n)
	m.logf(Warn, "Partition %s: malformed answer %d of at most %d to cursor %s at generation %d, fetching it again in %s: %s",
		m.part(), run.n, attempts, reconcile.CursorHash(f.cursor), f.gen, d, detail)
	// The tail is unchanged: the next fetch asks for the same cursor once
	// the back-off has passed (maybeFetch waits for pollAt).
	m.pollAt = m.now.Add(d)
}

// malformedDone ends a run of malformed answers: an answer could be read.
func (m *Machine) malformedDone() { m.malformed = malformedRun{} }

// fetchBackoff is the wait before retry n (1 for the first) of a malformed
// answer: FetchBackoff doubled n-1 times, at most the greater of
// MaxFetchBackoff and FetchBackoff, drawn by Jitter when set.
func (m *Machine) fetchBackoff(n int) time.Duration {
	first := max(m.cfg.FetchBackoff, 0)
	limit := max(MaxFetchBackoff, first)
	d := first
	for i := 1; i < n && d < limit; i++ {
		d *= 2
	}
	d = min(d, limit)
	if m.cfg.Jitter != nil {
		d = min(max(m.cfg.Jitter(d), 0), d)
	}
	return d
}

// malformedPage marks an error of reconcile.Build about the response alone:
// the answer is malformed, and may be fetched again.
type malformedPage struct{ err error }

func (e malformedPage) Error() string { return e.err.Error() }
func (e malformedPage) Unwrap() error { return e.err }

// plural is "1 attempt", "3 attempts".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
