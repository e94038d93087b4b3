package reconcile

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/provider"
)

// fetched is one earlier response to C41 at generation 9, with how many of
// its leading events have durable receipts.
type fetched struct {
	r     Response
	acked int
	disp  Disposition
}

func TestClassify_Classes(t *testing.T) {
	rotating := with(dense, func(c *Contract) { c.TokensMayRotate = true })
	exclusive := with(dense, func(c *Contract) { c.ExclusiveBoundary = true })
	noRecovery := with(dense, func(c *Contract) { c.Recovery = 0 })
	denseCT := with(dense, func(c *Contract) { c.WatermarkCoversPositions = true })
	sparseCT := with(sparse, func(c *Contract) { c.WatermarkCoversPositions = true })
	n7 := resp("N7", ev("e501", 501), ev("e502", 502))
	// couch: a changes feed (CouchDB last_seq): empty pages final through
	// their watermark, ordered sparse positions; quiet: its empty head page
	// at C41 (successor C41 itself, last_seq 500).
	couch := with(sparse, func(c *Contract) { c.EmptyPage = provider.EmptyFinalThroughWatermark })
	couchCT := with(couch, func(c *Contract) { c.WatermarkCoversPositions = true })
	quiet := Response{Successor: []byte("C41"), CompleteThrough: coord.Integer(500)}
	grown := func(succ string, events ...Event) Response {
		r := resp(succ, events...)
		r.CompleteThrough = coord.Integer(events[len(events)-1].Position.Int)
		return r
	}
	ends := with(sparse, func(c *Contract) { c.MissingSuccessor = provider.MissingSuccessorEndsTraversal })
	unordered := with(sparse, func(c *Contract) { c.OrderedPositions = false })
	for _, tc := range []struct {
		name      string
		contract  Contract
		applied   int64 // -1: nothing applied yet
		prior     []fetched
		receipts  []EventWitness
		retry     Response
		class     RetryClass
		attempt   string // the verdict binds this attempt ("" = the new one, "b1")
		satisfied int
		reason    string
	}{
		// First responses.
		{name: "first response, dense from the boundary", contract: dense, applied: 500, retry: n7, class: FirstResponse, reason: "first response"},
		{name: "first response, sparse", contract: sparse, applied: 500, retry: resp("N7", ev("a", 507), ev("b", 590)), class: FirstResponse},
		{name: "first response, nothing applied yet", contract: dense, applied: -1, retry: resp("N7", ev("a", 1), ev("b", 2)), class: FirstResponse},
		{name: "first response, dense, starts past the next required position", contract: dense, applied: 500, retry: resp("N7", ev("e502", 502)), class: UnprovableDivergence, reason: "coverage rule (b): partition p1: the first event above the durable applied boundary 500 is at position 502, not at the next required position 501"},
		{name: "first response, dense, skips a position", contract: dense, applied: 500, retry: resp("N7", ev("a", 501), ev("c", 503)), class: UnprovableDivergence, reason: "503 follows 501: position 502 is missing"},
		{name: "first response, dense gap with a watermark proof", contract: denseCT, applied: 500, retry: Response{Successor: []byte("N7"), Events: []Event{ev("c", 503)}, CompleteThrough: coord.Integer(503)}, class: FirstResponse},
		{name: "first response, dense gap above its watermark", contract: denseCT, applied: 500, retry: Response{Successor: []byte("N7"), Events: []Event{ev("c", 503)}, CompleteThrough: coord.Integer(501)}, class: UnprovableDivergence, reason: "no complete-through watermark covers the gap"},
		{name: "first response, dense gap, watermark not in the positions' coordinate", contract: dense, applied: 500, retry: Response{Successor: []byte("N7"), Events: []Event{ev("c", 503)}, CompleteThrough: coord.Integer(503)}, class: UnprovableDivergence, reason: "not at the next required position 501"},
		{name: "first response, inclusive provider repeats the boundary event", contract: dense, applied: 500, retry: resp("N7", ev("e500", 500), ev("e501", 501)), class: FirstResponse},

		// Exact replays.
		{name: "exact replay", contract: dense, applied: 500, prior: []fetched{{r: n7, acked: 1}}, retry: n7, class: ExactReplay, attempt: "a1", satisfied: 1, reason: "exact replay of attempt a1"},
		{name: "exact replay resumes the pending witness", contract: dense, applied: 500, prior: []fetched{{r: n7, disp: Abandoned}, {r: n7}}, retry: n7, class: ExactReplay, attempt: "a2"},
		{name: "exact replay of an abandoned witness only", contract: dense, applied: 500, prior: []fetched{{r: n7, disp: Abandoned}}, retry: n7, class: ExactReplay, attempt: "a1"},
		{name: "exact replay without the marker the witness has", contract: snap, applied: 500, prior: []fetched{{r: marked(n7, "rv")}}, retry: n7, class: ExactReplay, attempt: "a1"},
		{name: "exact replay of an empty response", contract: dense, applied: 500, prior: []fetched{{r: resp("N7")}}, retry: resp("N7"), class: ExactReplay, attempt: "a1"},

		// Token rotations.
		{name: "token rotation permitted", contract: rotating, applied: 500, prior: []fetched{{r: n7, acked: 2}}, retry: resp("N7b", ev("e501", 501), ev("e502", 502)), class: TokenRotation, satisfied: 2, reason: "token rotation: same 2 events as attempt a1"},
		{name: "token rotation not permitted", contract: dense, applied: 500, prior: []fetched{{r: n7}}, retry: resp("N7b", ev("e501", 501), ev("e502", 502)), class: UnprovableDivergence, reason: "does not permit token rotation"},
		{name: "exact replay after the token rotated, rotation not permitted", contract: dense, applied: 500, prior: []fetched{{r: n7}, {r: resp("N7b", ev("e501", 501), ev("e502", 502))}}, retry: n7, class: UnprovableDivergence, attempt: "a1", reason: "attempt a2 returned the same 2 events"},
		{name: "exact replay after the token rotated, rotation permitted", contract: rotating, applied: 500, prior: []fetched{{r: n7}, {r: resp("N7b", ev("e501", 501), ev("e502", 502))}}, retry: n7, class: ExactReplay, attempt: "a1"},
		{name: "token rotation preferred over a shifted page", contract: rotating, applied: 500, prior: []fetched{{r: resp("N6", ev("e501", 501))}, {r: n7}}, retry: resp("N8", ev("e501", 501), ev("e502", 502)), class: TokenRotation, reason: "attempt a2"},
		{name: "rotation that a later snapshot contradicts", contract: with(snap, func(c *Contract) { c.TokensMayRotate = true }), applied: 500, prior: []fetched{{r: marked(n7, "rv1")}, {r: marked(resp("N8", ev("e501", 501)), "rv2")}}, retry: marked(resp("N9", ev("e501", 501), ev("e502", 502)), "rv2"), class: UnprovableDivergence, reason: "snapshot is not stable"},

		// Shifted pages.
		{name: "same events and successor, new coverage evidence", contract: snap, applied: 500, prior: []fetched{{r: n7}}, retry: marked(n7, "rv"), class: ShiftedPage, reason: "coverage evidence that attempt lacks"},
		{name: "shifted page, dense, adds an event", contract: dense, applied: 500, prior: []fetched{{r: n7, acked: 2}}, retry: resp("N8", ev("e501", 501), ev("e502", 502), ev("e503", 503)), class: ShiftedPage, satisfied: 2, reason: "continue at the next required position 501"},
		{name: "shifted page, dense, payload of an unacknowledged event changed", contract: dense, applied: 500, prior: []fetched{{r: n7, acked: 1}}, retry: resp("N8", ev("e501", 501), evp("e502", 502, "v2")), class: ShiftedPage, satisfied: 1},
		{name: "shifted page, dense, fewer events", contract: dense, applied: 500, prior: []fetched{{r: n7}}, retry: resp("N8", ev("e501", 501)), class: ShiftedPage},
		{name: "shifted page, dense, nothing applied yet", contract: dense, applied: -1, prior: []fetched{{r: resp("N7", ev("a", 1))}}, retry: resp("N8", ev("a", 1), ev("b", 2)), class: ShiftedPage, reason: "omit nothing an earlier fetch showed"},
		{name: "shifted page, sparse, no proof", contract: sparse, applied: 500, prior: []fetched{{r: n7}}, retry: resp("N8", ev("e501", 501), ev("e502", 502), ev("e509", 509)), class: UnprovableDivergence, reason: "only a complete-through watermark in the positions' coordinate at or above 509 could prove"},
		{name: "shifted page, sparse, a new snapshot marker is no proof of an omission", contract: snap, applied: 500, prior: []fetched{{r: n7}}, retry: marked(resp("N8", ev("e501", 501), ev("e509", 509)), "rv2"), class: UnprovableDivergence, reason: "showed position 502"},
		{name: "shifted page, sparse, a new snapshot marker is no proof of coverage", contract: snap, applied: 500, prior: []fetched{{r: marked(n7, "rv1")}}, retry: marked(resp("N8", ev("e501", 501), ev("e502", 502), ev("e509", 509)), "rv2"), class: UnprovableDivergence, reason: "positions may be sparse"},
		{name: "shifted page, sparse, complete-through watermark", contract: sparseCT, applied: 500, prior: []fetched{{r: n7}}, retry: Response{Successor: []byte("N8"), Events: []Event{ev("e501", 501), ev("e502", 502), ev("e509", 509)}, CompleteThrough: coord.Integer(509)}, class: ShiftedPage, reason: "complete-through watermark 509 covers its whole range"},
		{name: "shifted page, sparse, watermark below its range", contract: sparseCT, applied: 500, prior: []fetched{{r: n7}}, retry: Response{Successor: []byte("N8"), Events: []Event{ev("e501", 501), ev("e502", 502), ev("e509", 509)}, CompleteThrough: coord.Integer(502)}, class: UnprovableDivergence, reason: "at or above 509"},
		{name: "shifted page omits an event another fetch showed", contract: dense, applied: 500, prior: []fetched{{r: n7}}, retry: resp("N8", ev("e501", 501), ev("x502", 502)), class: UnprovableDivergence, reason: "attempt a1 showed position 502"},
		{name: "same snapshot, other events", contract: snap, applied: 500, prior: []fetched{{r: marked(n7, "rv")}}, retry: marked(resp("N8", ev("e501", 501)), "rv"), class: UnprovableDivergence, reason: "the snapshot is not stable"},
		{name: "empty retry omits what an earlier fetch showed", contract: snap, applied: 500, prior: []fetched{{r: n7}}, retry: resp("N8"), class: UnprovableDivergence, reason: "range (500, successor]"},
		{name: "empty retry with a new snapshot marker omits what an earlier fetch showed", contract: snap, applied: 500, prior: []fetched{{r: n7}}, retry: marked(resp("N8"), "rv"), class: UnprovableDivergence, reason: "showed position 501"},
		{name: "omission below the boundary is not a gap", contract: dense, applied: 501, prior: []fetched{{r: n7, acked: 1}}, retry: resp("N8", ev("e502", 502)), class: ShiftedPage},

		// Grew at the head.
		{name: "grew at the head: appends after a quiet page", contract: couch, applied: 500, prior: []fetched{{r: quiet}}, retry: grown("503", ev("e501", 501), ev("e503", 503)), class: HeadGrowth, reason: "grew at the head: 1 earlier head answer(s) (the last empty, 0 events) are exact prefixes of this response; its 2 new events at positions 501..503 lie above the durable applied boundary 500"},
		{name: "grew at the head: appends after a quiet page, nothing applied yet", contract: couch, applied: -1, prior: []fetched{{r: Response{Successor: []byte("C41"), CompleteThrough: coord.Integer(7)}}}, retry: grown("9", ev("a", 9)), class: HeadGrowth, reason: "above the durable applied boundary none"},
		{name: "grew at the head: a polled page without a successor", contract: sparse, applied: 500, prior: []fetched{{r: resp("", ev("e501", 501), ev("e502", 502)), acked: 2}}, retry: resp("", ev("e501", 501), ev("e502", 502), ev("e509", 509)), class: HeadGrowth, satisfied: 2, reason: "(the last without a successor (polled), 2 events)"},
		{name: "grew at the head twice", contract: couch, applied: 500, prior: []fetched{{r: quiet}, {r: resp("", ev("e501", 501)), acked: 1}}, retry: grown("509", ev("e501", 501), ev("e509", 509)), class: HeadGrowth, satisfied: 1, reason: "its 2 new events at positions 501..509"},
		{name: "grew at the head: a new snapshot after an empty one", contract: with(snap, func(c *Contract) { c.EmptyPage = provider.EmptyFinalThroughWatermark }), applied: 500, prior: []fetched{{r: marked(quiet, "rv1")}}, retry: marked(resp("N8", ev("e501", 501)), "rv2"), class: HeadGrowth},
		{name: "not head growth: the same snapshot grew", contract: with(snap, func(c *Contract) { c.EmptyPage = provider.EmptyFinalThroughWatermark }), applied: 500, prior: []fetched{{r: marked(quiet, "rv1")}}, retry: marked(resp("N8", ev("e501", 501)), "rv1"), class: UnprovableDivergence, reason: "the snapshot is not stable"},
		{name: "not head growth: the earlier page had a successor (a middle page)", contract: sparse, applied: 500, prior: []fetched{{r: n7}}, retry: resp("", ev("e501", 501), ev("e502", 502), ev("e509", 509)), class: UnprovableDivergence, reason: "the page shifted"},
		{name: "not head growth: a prefix event's payload changed", contract: sparse, applied: 500, prior: []fetched{{r: resp("", ev("e501", 501), ev("e502", 502))}}, retry: resp("", ev("e501", 501), evp("e502", 502, "v2"), ev("e509", 509)), class: UnprovableDivergence, reason: "the page shifted"},
		{name: "not head growth: an event appeared inside the earlier range", contract: sparse, applied: 500, prior: []fetched{{r: resp("", ev("e501", 501), ev("e505", 505))}}, retry: resp("", ev("e501", 501), ev("e503", 503), ev("e505", 505), ev("e509", 509)), class: UnprovableDivergence, reason: "the page shifted"},
		{name: "not head growth: a new event at the applied boundary", contract: couch, applied: 500, prior: []fetched{{r: quiet}}, retry: grown("501", ev("e500", 500), ev("e501", 501)), class: UnprovableDivergence, reason: "the page shifted"},
		{name: "not head growth: a new event at or below the earlier page's watermark", contract: couchCT, applied: 490, prior: []fetched{{r: quiet}}, retry: resp("503", ev("e495", 495), ev("e503", 503)), class: UnprovableDivergence, reason: "the page shifted"},
		{name: "not head growth: the last page of a finite traversal", contract: ends, applied: 500, prior: []fetched{{r: resp("", ev("e501", 501))}}, retry: resp("", ev("e501", 501), ev("e502", 502)), class: UnprovableDivergence, reason: "the page shifted"},
		{name: "not head growth: unordered positions", contract: unordered, applied: 500, prior: []fetched{{r: resp("", ev("e501", 501))}}, retry: resp("", ev("e501", 501), ev("e502", 502)), class: UnprovableDivergence, reason: "the page shifted"},
		{name: "not head growth: the earlier page was sealed", contract: sparse, applied: 500, prior: []fetched{{r: Response{Events: []Event{ev("e501", 501)}, Sealed: true}}}, retry: resp("", ev("e501", 501), ev("e502", 502)), class: UnprovableDivergence, reason: "the page shifted"},
		{name: "head growth under dense positions still needs the next position", contract: dense, applied: 500, prior: []fetched{{r: resp("", ev("e501", 501))}}, retry: resp("", ev("e501", 501), ev("e503", 503)), class: UnprovableDivergence, reason: "503 follows 501"},
		{name: "head growth under dense positions", contract: dense, applied: 500, prior: []fetched{{r: resp("", ev("e501", 501))}}, retry: resp("", ev("e501", 501), ev("e502", 502)), class: HeadGrowth},

		// Coverage rule (a): at or below the durable applied boundary.
		{name: "(a) exclusive boundary, repeated event without receipt", contract: exclusive, applied: 500, prior: []fetched{{r: n7}}, retry: resp("N8", ev("e500", 500), ev("e501", 501), ev("e502", 502)), class: UnprovableDivergence, reason: "coverage rule (a): partition p1: position 500 (id#"},
		{name: "(a) exclusive boundary, repeated event matches its receipt", contract: exclusive, applied: 500, receipts: []EventWitness{EventOf(ev("e500", 500))}, prior: []fetched{{r: n7}}, retry: resp("N8", ev("e500", 500), ev("e501", 501), ev("e502", 502)), class: ShiftedPage, satisfied: 1},
		{name: "(a) exclusive boundary, acknowledged event above it", contract: exclusive, applied: 500, prior: []fetched{{r: n7, acked: 1}}, retry: resp("N8", ev("e501", 501), ev("e502", 502), ev("e503", 503)), class: ShiftedPage, satisfied: 1},
		{name: "(a) inclusive boundary, repeated event", contract: dense, applied: 500, prior: []fetched{{r: resp("N7", ev("e500", 500), ev("e501", 501))}}, retry: resp("N8", ev("e500", 500), ev("e501", 501), ev("e502", 502)), class: ShiftedPage},

		{name: "divergence without a declared recovery parks", contract: noRecovery, applied: 500, retry: resp("N7", ev("e502", 502)), class: UnprovableDivergence},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var prior []Witness
			for i, f := range tc.prior {
				w := acked(build(t, tc.contract, "C41", 9, "a"+string(rune('1'+i)), f.r), f.acked)
				if f.disp != 0 {
					w.Disposition = f.disp
				}
				prior = append(prior, w)
			}
			w := build(t, tc.contract, "C41", 9, "b1", tc.retry)
			v, err := Classify(ClassifyInput{Contract: tc.contract, Applied: coord.IntPosition(tc.applied), HasApplied: tc.applied >= 0, Prior: prior, Receipts: tc.receipts, Witness: w})
			require.NoError(t, err)
			assert.Equal(t, tc.class, v.Class, v.Reason)
			assert.Contains(t, v.Reason, tc.reason)
			assert.Equal(t, tc.satisfied, v.Satisfied)
			want := tc.attempt
			if want == "" {
				want = "b1"
			}
			assert.Equal(t, want, v.Attempt)
			assert.Len(t, v.Against, len(prior))
			if tc.class == ExactReplay || tc.attempt != "" {
				require.NotNil(t, v.Resume)
				assert.Equal(t, want, v.Resume.AttemptID)
			} else {
				assert.Nil(t, v.Resume)
			}
			if tc.class == UnprovableDivergence {
				assert.False(t, v.Advances())
				assert.Equal(t, tc.contract.EffectiveRecovery(), v.Recovery)
			} else {
				assert.True(t, v.Advances())
				assert.Zero(t, v.Recovery)
			}
		})
	}
}

func TestClassify_ResumeIsACopy(t *testing.T) {
	cp := checkpoint("C41", 9, 500, true)
	first := build(t, dense, "C41", 9, "a1", resp("N7", ev("e501", 501)))
	v := classify(t, dense, cp, build(t, dense, "C41", 9, "a2", resp("N7", ev("e501", 501))), first)
	require.Equal(t, ExactReplay, v.Class)
	v.Resume.Successor[0], v.Resume.Events[0].Position = 'X', coord.IntPosition(9)
	assert.Equal(t, []byte("N7"), first.Successor)
	assert.Equal(t, coord.IntPosition(501), first.Events[0].Position)
	assert.Contains(t, v.String(), "exact_replay (attempt a1): exact replay of attempt a1")
}

// An exact replay of a response a later fetch contradicted is no longer
// safe: the verdict still names the witness it replays.
func TestClassify_ExactReplayOfAContradictedResponse(t *testing.T) {
	cp := checkpoint("C41", 9, 500, true)
	a1 := build(t, dense, "C41", 9, "a1", resp("N7", ev("e501", 501), ev("e502", 502)))
	a2 := build(t, dense, "C41", 9, "a2", resp("N8", ev("e501", 501), ev("x502", 502)))
	v := classify(t, dense, cp, build(t, dense, "C41", 9, "a3", resp("N7", ev("e501", 501), ev("e502", 502))), a1, a2)
	assert.Equal(t, UnprovableDivergence, v.Class)
	assert.Contains(t, v.Reason, "attempt a2 showed position 502")
	require.NotNil(t, v.Resume)
	assert.Equal(t, "a1", v.Attempt)
}

func TestClassify_Errors(t *testing.T) {
	n7 := resp("N7", ev("e501", 501), ev("e502", 502))
	mk := func(attempt string, r Response, ackedN int) Witness {
		return acked(build(t, dense, "C41", 9, attempt, r), ackedN)
	}
	raw := func(events ...EventWitness) Witness {
		return Witness{Scope: scope, Partition: part, Generation: 9, InputCursor: []byte("C41"), AttemptID: "b1", Events: events, Successor: []byte("N8"), Disposition: Pending}
	}
	otherGen := mk("a1", n7, 0)
	otherGen.Generation = 8
	for _, tc := range []struct {
		name     string
		contract Contract
		prior    []Witness
		receipts []EventWitness
		w        Witness
		is       error
		contains []string
	}{
		{"receipt conflict: another id", dense, []Witness{mk("a1", n7, 2)}, nil, mk("b1", resp("N8", ev("e501", 501), ev("x502", 502)), 0), ErrReceiptConflict, []string{"partition p1", "position 502", "another identity", "attempt a1"}},
		{"receipt conflict: another payload", dense, []Witness{mk("a1", n7, 1)}, nil, mk("b1", resp("N8", evp("e501", 501, "changed"), ev("e502", 502)), 0), ErrReceiptConflict, []string{"position 501", "another payload digest"}},
		{"receipt conflict with a given receipt", dense, nil, []EventWitness{EventOf(ev("e500", 500))}, mk("b1", resp("N8", evp("e500", 500, "changed"), ev("e501", 501)), 0), ErrReceiptConflict, []string{"position 500", "attempt receipt"}},
		{"same id at two positions", dense, []Witness{mk("a1", n7, 0)}, nil, mk("b1", resp("N8", ev("e501", 501), ev("e503", 502), ev("e502", 503)), 0), ErrMoved, []string{"partition p1", "at position 503", "attempt a1 had it at position 502"}},
		{"same id at two positions, against a receipt", dense, nil, []EventWitness{EventOf(ev("e500", 500))}, mk("b1", resp("N8", ev("e500", 501)), 0), ErrMoved, []string{"attempt receipt had it at position 500"}},
		{"duplicate id hash in a stored witness", dense, nil, nil, raw(EventWitness{IDHash: 7, Position: coord.IntPosition(501)}, EventWitness{IDHash: 7, Position: coord.IntPosition(502)}), ErrDuplicateID, []string{"partition p1", "id#0000000000000007", "positions 501 and 502"}},
		{"positions out of order in a stored witness", dense, nil, nil, raw(EventWitness{IDHash: 1, Position: coord.IntPosition(502)}, EventWitness{IDHash: 2, Position: coord.IntPosition(501)}), ErrOutOfOrder, []string{"position 501", "follow position 502"}},
		{"prior of another generation", dense, []Witness{otherGen}, nil, mk("b1", n7, 0), ErrInvalid, []string{"prior attempt a1"}},
		{"prior with the same attempt id", dense, []Witness{mk("b1", n7, 0)}, nil, mk("b1", n7, 0), ErrInvalid, nil},
		{"witness without attempt id", dense, nil, nil, Witness{Partition: part}, ErrInvalid, nil},
		{"invalid contract", Contract{}, nil, nil, mk("b1", n7, 0), ErrInvalid, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := Classify(ClassifyInput{Contract: tc.contract, Applied: coord.IntPosition(499), HasApplied: true, Prior: tc.prior, Receipts: tc.receipts, Witness: tc.w})
			require.Error(t, err)
			assert.Zero(t, v)
			assert.ErrorIs(t, err, tc.is)
			assert.Equal(t, !errors.Is(tc.is, ErrInvalid), errors.Is(err, ErrBadResponse))
			for _, s := range tc.contains {
				assert.Contains(t, err.Error(), s)
			}
		})
	}
}

func TestClassify_ErrorTypes(t *testing.T) {
	a1 := acked(build(t, dense, "C41", 9, "a1", resp("N7", ev("e501", 501))), 1)
	_, err := Classify(ClassifyInput{Contract: dense, Prior: []Witness{a1}, Witness: build(t, dense, "C41", 9, "b1", resp("N8", ev("x", 501)))})
	var rc *ReceiptConflictError
	require.ErrorAs(t, err, &rc)
	assert.Equal(t, ReceiptConflictError{Partition: part, Position: coord.IntPosition(501), Attempt: "a1", Receipt: EventOf(ev("e501", 501)), Got: EventOf(ev("x", 501))}, *rc)

	_, err = Classify(ClassifyInput{Contract: dense, Prior: []Witness{a1}, Witness: build(t, dense, "C41", 9, "b1", resp("N8", ev("e501", 502)))})
	var mv *MovedError
	require.ErrorAs(t, err, &mv)
	assert.Equal(t, MovedError{Partition: part, IDHash: HashID("e501"), Position: coord.IntPosition(502), PriorPosition: coord.IntPosition(501), PriorAttempt: "a1"}, *mv)
}

// Receipts are matched by identity: with unordered positions two events may
// share a position (two keys written in one transaction), and a retry after
// a partial acknowledgement is an exact replay, not a receipt conflict.
func TestClassifyTiedPositionsMatchReceiptsByIdentity(t *testing.T) {
	unordered := Contract{EmptyPage: provider.EmptyNoEvidence, Recovery: provider.RecoveryPark}
	cp := checkpoint("C41", 9, 6, true)
	page := resp("N7", ev("k-a", 7), ev("k-b", 7), ev("k-c", 8))
	first := acked(build(t, unordered, "C41", 9, "a1", page), 1)
	retry := build(t, unordered, "C41", 9, "a2", page)
	v := classify(t, unordered, cp, retry, first)
	require.Equal(t, ExactReplay, v.Class, v.Reason)
	assert.Equal(t, 1, v.Satisfied)

	// The same identity with another payload still conflicts.
	changed := build(t, unordered, "C41", 9, "a3", resp("N7", evp("k-a", 7, "v2"), ev("k-b", 7), ev("k-c", 8)))
	_, err := Classify(ClassifyInput{Contract: unordered, Applied: coord.IntPosition(6), HasApplied: true, Prior: []Witness{first}, Witness: changed})
	var rc *ReceiptConflictError
	require.ErrorAs(t, err, &rc)
}

// Receipts the caller supplies (the promoted witness's events, all durable)
// reject a retry that repeats a position at or below the applied boundary
// with another identity or payload.
func TestClassifyRejectsARepeatedBoundaryEventThatConflictsWithItsReceipt(t *testing.T) {
	receipts := []EventWitness{EventOf(ev("e500", 500))}
	for name, r := range map[string]Response{
		"another identity": resp("N8", ev("x500", 500), ev("e501", 501)),
		"another payload":  resp("N8", evp("e500", 500, "changed"), ev("e501", 501)),
	} {
		t.Run(name, func(t *testing.T) {
			w := build(t, dense, "C41", 9, "a1", r)
			_, err := Classify(ClassifyInput{Contract: dense, Applied: coord.IntPosition(500), HasApplied: true, Receipts: receipts, Witness: w})
			var rc *ReceiptConflictError
			require.ErrorAs(t, err, &rc)
			assert.Equal(t, coord.IntPosition(500), rc.Position)
		})
	}
	// The same event repeated matches its receipt and is satisfied.
	w := build(t, dense, "C41", 9, "a1", resp("N8", ev("e500", 500), ev("e501", 501)))
	v, err := Classify(ClassifyInput{Contract: dense, Applied: coord.IntPosition(500), HasApplied: true, Receipts: receipts, Witness: w})
	require.NoError(t, err)
	assert.Equal(t, FirstResponse, v.Class)
	assert.Equal(t, 1, v.Satisfied)
}

// The events of a page fetched ahead of its predecessor's promotion are
// pending receipts: a repeat of one is checked (conflicts, the exclusive
// boundary) but satisfies nothing, so no receipt ever claims an outcome
// that is not durable yet.
func TestClassifyPendingReceiptsSatisfyNothing(t *testing.T) {
	exclusive := with(dense, func(c *Contract) { c.ExclusiveBoundary = true })
	pending := []EventWitness{EventOf(ev("e5", 5)), EventOf(ev("e6", 6))}
	w := build(t, exclusive, "C7", 3, "a1", resp("C10", ev("e6", 6), ev("e7", 7)))
	v, err := Classify(ClassifyInput{Contract: exclusive, Applied: coord.IntPosition(6), HasApplied: true, Pending: pending, Witness: w})
	require.NoError(t, err)
	assert.Equal(t, FirstResponse, v.Class, "the repeat of a pending event passes rule (a): %s", v.Reason)
	assert.Zero(t, v.Satisfied, "but it is not satisfied: it is emitted again")

	changed := build(t, exclusive, "C7", 3, "a2", resp("C10", evp("e6", 6, "other"), ev("e7", 7)))
	_, err = Classify(ClassifyInput{Contract: exclusive, Applied: coord.IntPosition(6), HasApplied: true, Pending: pending, Witness: changed})
	var rc *ReceiptConflictError
	require.ErrorAs(t, err, &rc, "another payload for a pending event is a conflict")

	impostor := build(t, exclusive, "C7", 3, "a3", resp("C10", ev("x6", 6), ev("e7", 7)))
	_, err = Classify(ClassifyInput{Contract: exclusive, Applied: coord.IntPosition(6), HasApplied: true, Pending: pending, Witness: impostor})
	require.ErrorAs(t, err, &rc, "under ordered positions another identity at a pending event's position is a conflict")
}
