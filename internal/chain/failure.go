package chain

import (
	"errors"
	"fmt"
	"time"

	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/store"
)

// FailureNoteInterval bounds the failure notes of one partition: while
// its fetches keep failing transiently (retried for ever, never parked),
// the machine writes why on its checkpoint (NoteFailure) at the first
// failure of a run and then at most once per interval, so that `status`
// shows why a partition does not advance without one write per failure.
const FailureNoteInterval = time.Minute

// failureRun is a run of transient fetch failures in a row: how many, and
// when the first and the last happened.
type failureRun struct {
	n           int
	since, last time.Time
}

// noteFailure counts the transient failure of fetch f (err, already
// redacted by the driver) and, when a note is due, writes it on the
// durable checkpoint: not progress, and conditional on the state the
// machine holds, so a note can never stand beside a later promotion
// (which clears it).
func (m *Machine) noteFailure(f *fetchRec, err error) {
	if m.failing.n == 0 {
		m.failing.since = m.now
	}
	m.failing.n++
	m.failing.last = m.now
	if m.now.Before(m.noteDue) {
		return
	}
	m.noteDue = m.now.Add(FailureNoteInterval)
	note := fmt.Sprintf("%d fetch(es) of cursor %s at generation %d failed in a row (retried for ever, not parked) since %s; the last at %s: %v",
		m.failing.n, reconcile.CursorHash(f.cursor), f.gen, stamp(m.failing.since), stamp(m.failing.last), err)
	a := NoteFailure{Key: m.cfg.Key, Cursor: m.cp.Cursor, Generation: m.cp.Generation, Lease: m.writeLease(), Note: note}
	// The note does not change what the machine does: it reports the
	// state it would report without it.
	m.ask(m.State(), a, next{kind: onFailureNoted, lease: a.Lease})
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

func (m *Machine) onFailureNoted(carried store.Lease, r FailureNoted) {
	if why, ok := m.fenced(r.Err, carried); ok {
		m.loseLease(why)
		return
	}
	switch {
	case r.Err == nil:
		m.cp.Failing = r.Checkpoint.Failing
	case errors.Is(r.Err, store.ErrFenced):
		// The checkpoint moved on: the note is stale, and the next
		// promotion (or load) tells the machine.
	default:
		// A note is best effort: the next one is written after
		// FailureNoteInterval.
		m.logf(Debug, "Partition %s: cannot record the failure note: %v", m.part(), r.Err)
	}
}
