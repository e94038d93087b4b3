package storetest

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/store"
)

// repairEntry is an operator's audit entry at minute n. Its cursor is a
// stand-in, not a digest: an encrypted store keys the cursor digests of
// the text it writes (RunEncrypted's KeyedDigestsAtRest).
func repairEntry(n int, command string) store.RepairEntry {
	return store.RepairEntry{
		Time: time.Date(2026, 12, 4, 16, n, 0, 123456789, time.UTC), User: "ops", Host: "bastion",
		Command:  command,
		Previous: map[string]string{"generation": "2", "cursor": "cursor-digest", "complete": "true"},
	}
}

// An operator's unpark clears the park reason and writes the repair log in
// one write, conditional on cursor, generation and the park itself; a
// restart's promotion carries its log the same way; every other write keeps
// the log, and it stays bounded (docs/design.md#operator-repairs).
func testRepairLogTravelsWithRepairs(t *testing.T, s store.Store) {
	cp := create(t, s, key, "C0")
	cp = promote(t, s, promotion(cp, "C1", "w1"))
	parked, err := s.SetParked(ctx(t), key, cp.Cursor, cp.Generation, store.Lease{}, "expired cursor")
	require.NoError(t, err)

	log := store.AppendRepair(nil, repairEntry(1, "unpark --partition p0"))
	_, err = s.Unpark(ctx(t), key, []byte("C0"), cp.Generation, store.Lease{}, log)
	requireWinner(t, err, parked)
	_, err = s.Unpark(ctx(t), key, cp.Cursor, cp.Generation+1, store.Lease{}, log)
	requireWinner(t, err, parked)

	unparked, err := s.Unpark(ctx(t), key, cp.Cursor, cp.Generation, store.Lease{}, log)
	require.NoError(t, err)
	want := cp
	want.Repairs = log
	require.Equal(t, want, unparked, "an unpark changes only the park reason and the repair log")
	requireStored(t, s, want)
	assert.Equal(t, time.Date(2026, 12, 4, 16, 1, 0, 123000000, time.UTC), unparked.Repairs[0].Time, "times are kept in UTC to the millisecond")

	// The repeat of the applied unpark returns the stored checkpoint; an
	// unpark of a partition that is not parked (with another log) is fenced.
	again, err := s.Unpark(ctx(t), key, cp.Cursor, cp.Generation, store.Lease{}, log)
	require.NoError(t, err)
	require.Equal(t, want, again)
	fe := requireWinner(t, firstErr(s.Unpark(ctx(t), key, cp.Cursor, cp.Generation, store.Lease{}, store.AppendRepair(log, repairEntry(2, "unpark")))), want)
	assert.Contains(t, fe.Reason, "not parked")

	// A worker's promotion keeps the log.
	cp = promote(t, s, promotion(want, "C2", "w2"))
	require.Equal(t, log, cp.Repairs)

	// A restart's promotion replaces it; the log keeps the newest MaxRepairs.
	for i := range store.MaxRepairs + 2 {
		p := promotion(cp, "R"+strings.Repeat("x", i), "repair:restart")
		p.Repairs = store.AppendRepair(cp.Repairs, repairEntry(10+i, "restart --partition p0 --cursor sha256:…"))
		cp = promote(t, s, p)
	}
	require.Len(t, cp.Repairs, store.MaxRepairs)
	assert.Equal(t, 10+store.MaxRepairs+1, cp.Repairs[store.MaxRepairs-1].Time.Minute(), "the newest entry is last")
	assert.Equal(t, 12, cp.Repairs[0].Time.Minute(), "the oldest entries were dropped")
	requireStored(t, s, cp)

	// A log the store cannot keep is refused whole.
	tooMany := make([]store.RepairEntry, store.MaxRepairs+1)
	for i := range tooMany {
		tooMany[i] = repairEntry(i, "restart")
	}
	p := promotion(cp, "C3", "w3")
	p.Repairs = tooMany
	require.ErrorIs(t, firstErr(s.Promote(ctx(t), p)), store.ErrInvalid)
	long := repairEntry(1, strings.Repeat("c", store.MaxRepairFieldBytes+1))
	p.Repairs = []store.RepairEntry{long}
	require.ErrorIs(t, firstErr(s.Promote(ctx(t), p)), store.ErrInvalid)
	requireStored(t, s, cp)
}

// advance-epoch's audit entry travels with the membership record it wrote.
func testMembershipRepairLogRoundTrip(t *testing.T, s store.Store) {
	scope := "repaired"
	_, err := s.SwapMembership(ctx(t), 0, store.Membership{Scope: scope, Epoch: 1, Partitions: []string{"a"}})
	require.NoError(t, err)
	e := repairEntry(5, "advance-epoch --cutover 10")
	e.Previous = map[string]string{"epoch": "1", "proven": "false"}
	next := store.Membership{Scope: scope, Epoch: 2, Partitions: []string{"a"}, Proven: true, Repairs: store.AppendRepair(nil, e)}
	got, err := s.SwapMembership(ctx(t), 1, next)
	require.NoError(t, err)
	require.Equal(t, next.Repairs, got.Repairs)
	loaded, err := s.LoadMembership(ctx(t), scope)
	require.NoError(t, err)
	require.Equal(t, next.Repairs, loaded.Repairs)
}
