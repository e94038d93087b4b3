package reconcile

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/provider"
)

func TestCanPromote(t *testing.T) {
	endOfData := with(sparse, func(c *Contract) { c.EmptyPage = provider.EmptyEndOfData })
	finalThrough := with(sparse, func(c *Contract) { c.EmptyPage = provider.EmptyFinalThroughWatermark })
	two := resp("N8", ev("a", 501), ev("b", 505))
	for _, tc := range []struct {
		name     string
		contract Contract
		r        Response
		acked    int
		complete bool
		reason   string
		applied  int64 // 0: none
	}{
		{"no event acknowledged", sparse, two, 0, false, "0 of 2 events", 505},
		{"some events acknowledged", sparse, two, 1, false, "1 of 2 events", 505},
		{"negative acknowledgement count", sparse, two, -3, false, "0 of 2 events", 505},
		{"every event acknowledged", sparse, two, 2, true, "all 2 events have a durable terminal outcome", 505},
		{"events and a watermark", sparse, Response{Successor: []byte("N8"), Events: two.Events, CompleteThrough: coord.Integer(900)}, 2, true, "all 2", 505},
		{"empty, no evidence", sparse, resp("N8"), 0, false, "stays pending", 0},
		{"empty, end-of-data contract", endOfData, resp("N8"), 0, true, "end of data", 0},
		{"empty, watermark, final-through contract", finalThrough, Response{Successor: []byte("N8"), CompleteThrough: coord.Integer(9)}, 0, true, "complete-through watermark 9", 0},
		{"empty, no watermark, final-through contract", finalThrough, resp("N8"), 0, false, "stays pending", 0},
		{"empty, watermark, no-evidence contract", sparse, Response{Successor: []byte("N8"), CompleteThrough: coord.Integer(9)}, 0, false, "stays pending", 0},
		{"empty, marker, snapshot contract", snap, marked(resp("N8"), "rv"), 0, true, "snapshot marker", 0},
		{"empty, marker, no snapshot contract", sparse, marked(resp("N8"), "rv"), 0, false, "stays pending", 0},
		{"empty, sealed flag only", sparse, Response{Successor: []byte("N8"), Sealed: true}, 0, false, "stays pending", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := acked(build(t, tc.contract, "C41", 9, "a1", tc.r), tc.acked)
			c := CanPromote(tc.contract, w)
			assert.Equal(t, tc.complete, c.Complete)
			assert.Contains(t, c.Reason, tc.reason)
			assert.Equal(t, tc.r.CompleteThrough, c.Watermark, "the watermark is the response's own, never a position")
			assert.Equal(t, tc.applied != 0, c.HasApplied)
			if tc.applied != 0 {
				assert.Equal(t, coord.IntPosition(tc.applied), c.Applied)
			} else {
				assert.True(t, c.Applied.IsZero(), "no applied position without events")
			}
		})
	}
}

func TestDecidePromotion(t *testing.T) {
	cp := checkpoint("C41", 9, 500, true)
	cp.Watermark = coord.Integer(100)
	cp.PromotedWitness = "z0"
	n7 := resp("N7", ev("e501", 501), ev("e502", 502))
	a1 := build(t, dense, "C41", 9, "a1", n7)
	v1 := classify(t, dense, cp, a1)
	complete := acked(a1, 2)

	withWM := func(wm coord.Watermark) (Witness, Verdict) {
		w := build(t, dense, "C41", 9, "w1", Response{Successor: []byte("N7"), Events: n7.Events, CompleteThrough: wm})
		return acked(w, 2), classify(t, dense, cp, w)
	}
	wmUp, vUp := withWM(coord.Integer(200))
	wmDown, vDown := withWM(coord.Integer(50))
	wmOther, vOther := withWM(coord.String("x"))
	wmSame, vSame := withWM(coord.Integer(100))

	endOfData := with(dense, func(c *Contract) { c.EmptyPage = provider.EmptyEndOfData })
	finalThrough := with(dense, func(c *Contract) { c.EmptyPage = provider.EmptyFinalThroughWatermark })
	emptyEnd := build(t, endOfData, "C41", 9, "e1", resp("N9"))
	vEmptyEnd := classify(t, endOfData, cp, emptyEnd)
	stay := build(t, endOfData, "C41", 9, "e2", resp("C41"))
	vStay := classify(t, endOfData, cp, stay)
	stayWM := build(t, finalThrough, "C41", 9, "e3", Response{Successor: []byte("C41"), CompleteThrough: coord.Integer(150)})
	vStayWM := classify(t, finalThrough, cp, stayWM)
	stayOldWM := build(t, finalThrough, "C41", 9, "e4", Response{Successor: []byte("C41"), CompleteThrough: coord.Integer(100)})
	vStayOldWM := classify(t, finalThrough, cp, stayOldWM)
	noSucc := acked(build(t, dense, "C41", 9, "n1", resp("", ev("e501", 501))), 1)
	vNoSucc := classify(t, dense, cp, noSucc)
	sealed := acked(build(t, dense, "C41", 9, "s1", Response{Events: []Event{ev("e501", 501)}, Sealed: true}), 1)
	vSealed := classify(t, dense, cp, sealed)
	finite := with(dense, func(c *Contract) { c.MissingSuccessor = provider.MissingSuccessorEndsTraversal })
	last := acked(build(t, finite, "C41", 9, "l1", resp("", ev("e501", 501))), 1)
	vLast := classify(t, finite, cp, last)
	complete9 := cp
	complete9.Complete = true

	// A later fetch of C41 that shows another id at 502.
	later := build(t, dense, "C41", 9, "a9", resp("N8", ev("e501", 501), ev("x502", 502)))

	moved := cp
	moved.Generation = 10
	otherCursor := cp
	otherCursor.Cursor = []byte("C40")
	otherScope := cp
	otherScope.Scope = "other"
	parked := cp
	parked.Parked = "operator"
	lowApplied := cp
	lowApplied.Applied = coord.IntPosition(700)
	noWM := cp
	noWM.Watermark = coord.Watermark{}

	divergent := v1
	divergent.Class, divergent.Reason = UnprovableDivergence, "because"

	for _, tc := range []struct {
		name     string
		contract Contract
		cp       Checkpoint
		w        Witness
		v        Verdict
		all      []Witness
		action   Action
		reason   string
		check    func(t *testing.T, p Promotion)
	}{
		{name: "complete response", contract: dense, cp: cp, w: complete, v: v1, all: []Witness{complete}, action: Promote, reason: "all 2 events", check: func(t *testing.T, p Promotion) {
			assert.Equal(t, Promotion{Scope: scope, Partition: part, FromCursor: []byte("C41"), FromGeneration: 9, To: []byte("N7"), WitnessID: "a1", Applied: coord.IntPosition(502), HasApplied: true}, p)
		}},
		{name: "incomplete response", contract: dense, cp: cp, w: acked(a1, 1), v: v1, action: Hold, reason: "1 of 2"},
		{name: "no verdict", contract: dense, cp: cp, w: complete, action: Refuse, reason: "classify it first"},
		{name: "verdict of another response", contract: dense, cp: cp, w: complete, v: vUp, action: Refuse, reason: "the verdict binds attempt w1, not a1"},
		{name: "divergent verdict", contract: dense, cp: cp, w: complete, v: divergent, action: Refuse, reason: "unprovable_divergence (attempt a1): because"},
		{name: "abandoned witness", contract: dense, cp: cp, w: disposed(complete, Abandoned), v: v1, action: Refuse, reason: "a1 is abandoned"},
		{name: "promoted witness", contract: dense, cp: cp, w: disposed(complete, Promoted), v: v1, action: Refuse, reason: "a1 is promoted"},
		{name: "parked partition", contract: dense, cp: parked, w: complete, v: v1, action: Refuse, reason: "parked: operator"},
		{name: "checkpoint moved on", contract: dense, cp: moved, w: complete, v: v1, action: Refuse, reason: "holds generation 10"},
		{name: "checkpoint at another cursor", contract: dense, cp: otherCursor, w: complete, v: v1, action: Refuse, reason: "losing retry"},
		{name: "checkpoint of another scope", contract: dense, cp: otherScope, w: complete, v: v1, action: Refuse, reason: "losing retry"},
		{name: "a later fetch shows an omitted event", contract: dense, cp: cp, w: complete, v: v1, all: []Witness{complete, later}, action: Refuse, reason: "a later fetch (attempt a9) shows position 502"},
		{name: "a witness the verdict was reconciled with", contract: dense, cp: cp, w: complete, v: withAgainst(v1, "a9"), all: []Witness{complete, later}, action: Promote},
		{name: "a witness of another generation is ignored", contract: dense, cp: cp, w: complete, v: v1, all: []Witness{complete, func() Witness { o := later; o.Generation = 8; return o }()}, action: Promote},
		{name: "watermark rises", contract: dense, cp: cp, w: wmUp, v: vUp, action: Promote, check: func(t *testing.T, p Promotion) { assert.Equal(t, coord.Integer(200), p.Watermark) }},
		{name: "watermark equal", contract: dense, cp: cp, w: wmSame, v: vSame, action: Promote, check: func(t *testing.T, p Promotion) { assert.Equal(t, coord.Integer(100), p.Watermark) }},
		{name: "watermark lower is not written", contract: dense, cp: cp, w: wmDown, v: vDown, action: Promote, reason: "does not rise above the durable 100", check: func(t *testing.T, p Promotion) { assert.True(t, p.Watermark.IsZero()) }},
		{name: "watermark of another kind is not written", contract: dense, cp: cp, w: wmOther, v: vOther, action: Promote, reason: "is not written", check: func(t *testing.T, p Promotion) { assert.True(t, p.Watermark.IsZero()) }},
		{name: "first watermark", contract: dense, cp: noWM, w: wmDown, v: vDown, action: Promote, check: func(t *testing.T, p Promotion) { assert.Equal(t, coord.Integer(50), p.Watermark) }},
		{name: "applied boundary never falls", contract: dense, cp: lowApplied, w: complete, v: v1, action: Promote, check: func(t *testing.T, p Promotion) { assert.Equal(t, coord.IntPosition(700), p.Applied) }},
		{name: "first applied boundary", contract: dense, cp: checkpoint("C41", 9, 0, false), w: complete, v: v1, action: Promote, check: func(t *testing.T, p Promotion) {
			assert.True(t, p.HasApplied)
			assert.Equal(t, coord.IntPosition(502), p.Applied)
		}},
		{name: "empty response, end-of-data contract", contract: endOfData, cp: cp, w: emptyEnd, v: vEmptyEnd, action: Promote, check: func(t *testing.T, p Promotion) {
			assert.False(t, p.HasApplied, "an empty response leaves the applied boundary alone")
			assert.Equal(t, []byte("N9"), p.To)
		}},
		{name: "empty response back to its own cursor", contract: endOfData, cp: cp, w: stay, v: vStay, action: Hold, reason: "nothing to advance"},
		{name: "empty response back to its own cursor, watermark rises", contract: finalThrough, cp: cp, w: stayWM, v: vStayWM, action: Promote, check: func(t *testing.T, p Promotion) { assert.Equal(t, coord.Integer(150), p.Watermark) }},
		{name: "empty response back to its own cursor, same watermark", contract: finalThrough, cp: cp, w: stayOldWM, v: vStayOldWM, action: Hold, reason: "nothing to advance"},
		{name: "no successor, poll", contract: dense, cp: cp, w: noSucc, v: vNoSucc, action: Hold, reason: "no successor"},
		{name: "no successor, sealed", contract: dense, cp: cp, w: sealed, v: vSealed, action: Promote, check: func(t *testing.T, p Promotion) {
			assert.True(t, p.Sealed)
			assert.True(t, p.Complete)
			assert.Equal(t, []byte("C41"), p.To, "a complete partition keeps its last cursor")
		}},
		{name: "no successor, end of a finite traversal", contract: finite, cp: cp, w: last, v: vLast, action: Promote, reason: "the partition is complete", check: func(t *testing.T, p Promotion) {
			assert.True(t, p.Complete)
			assert.False(t, p.Sealed)
			assert.Equal(t, []byte("C41"), p.To)
			assert.Equal(t, coord.IntPosition(501), p.Applied)
		}},
		{name: "complete partition", contract: finite, cp: complete9, w: last, v: vLast, action: Refuse, reason: "is complete"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := decide(tc.contract, tc.cp, tc.w, tc.v, tc.all...)
			require.Equal(t, tc.action, d.Action, d.Reason)
			assert.Contains(t, d.Reason, tc.reason)
			if tc.action != Promote {
				assert.Zero(t, d.Promotion)
				return
			}
			if len(tc.w.Successor) > 0 {
				assert.Equal(t, tc.w.Successor, d.Promotion.To, "only the witness's own successor")
			}
			assert.Equal(t, tc.w.AttemptID, d.Promotion.WitnessID)
			if tc.check != nil {
				tc.check(t, d.Promotion)
			}
		})
	}
}

func withAgainst(v Verdict, ids ...string) Verdict {
	v.Against = append(append([]string(nil), v.Against...), ids...)
	return v
}

func TestDecidePromotion_DoesNotAlias(t *testing.T) {
	cp := checkpoint("C41", 9, 500, true)
	w := acked(build(t, dense, "C41", 9, "a1", resp("N7", ev("e501", 501))), 1)
	d := decide(dense, cp, w, classify(t, dense, cp, w))
	require.Equal(t, Promote, d.Action)
	w.Successor[0], cp.Cursor[0] = 'X', 'X'
	assert.Equal(t, []byte("N7"), d.Promotion.To)
	assert.Equal(t, []byte("C41"), d.Promotion.FromCursor)
}

func TestCanPublish(t *testing.T) {
	w := build(t, dense, "C41", 9, "a1", resp("N7", ev("e501", 501)))
	cp := checkpoint("C41", 9, 500, true)
	assert.True(t, CanPublish(cp, w))
	assert.False(t, CanPublish(cp, disposed(w, Abandoned)))
	assert.False(t, CanPublish(cp, disposed(w, Promoted)))
	for _, moved := range []Checkpoint{
		checkpoint("N8", 10, 503, true),
		checkpoint("C41", 10, 500, true),
		checkpoint("C40", 9, 500, true),
		{Scope: scope, Partition: "p2", Cursor: []byte("C41"), Generation: 9},
	} {
		moved.PromotedWitness = "a2"
		assert.False(t, CanPublish(moved, w), "%+v", moved)
	}
}

func TestAbandon(t *testing.T) {
	w := func(attempt string, gen uint64, d Disposition) Witness {
		x := build(t, dense, "C41", gen, attempt, resp("N"+attempt, ev("e501", 501)))
		x.Disposition = d
		return x
	}
	ws := []Witness{
		w("a1", 9, Pending), w("a2", 9, Pending), w("a3", 9, Abandoned), w("a4", 9, Promoted),
		w("a5", 8, Pending), w("a6", 10, Pending),
		func() Witness { x := w("a7", 9, Pending); x.Partition = "p2"; return x }(),
	}
	for _, tc := range []struct {
		name   string
		winner Checkpoint
		want   []string
	}{
		{"no winner yet: the checkpoint still holds generation 9", Checkpoint{Scope: scope, Partition: part, Cursor: []byte("C41"), Generation: 9, PromotedWitness: "z"}, []string{"a5"}},
		{"a2 won generation 9", Checkpoint{Scope: scope, Partition: part, Cursor: []byte("Na2"), Generation: 10, PromotedWitness: "a2"}, []string{"a1", "a5"}},
		{"two promotions later", Checkpoint{Scope: scope, Partition: part, Cursor: []byte("X"), Generation: 11, PromotedWitness: "b1"}, []string{"a1", "a2", "a5", "a6"}},
		{"another scope", Checkpoint{Scope: "other", Partition: part, Generation: 99}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Abandon(tc.winner, ws))
		})
	}
}

// An empty page under empty_page follow_successor is promoted only to move
// on to another cursor: it carries no watermark (even one the response
// maps), no applied position, and is marked FollowOnly so the machine
// never takes it for caught up. A successor equal to its own cursor, or
// none, is no progress.
func TestCanPromote_FollowSuccessorClaimsNothing(t *testing.T) {
	follow := with(sparse, func(c *Contract) { c.EmptyPage = provider.EmptyFollowsSuccessor })
	followSnap := with(snap, func(c *Contract) { c.EmptyPage = provider.EmptyFollowsSuccessor })
	for _, tc := range []struct {
		name       string
		contract   Contract
		r          Response
		complete   bool
		followOnly bool
		reason     string
	}{
		{"another successor", follow, resp("N8"), true, true, "followed to its successor"},
		{"another successor and a watermark", follow, Response{Successor: []byte("N8"), CompleteThrough: coord.Integer(9)}, true, true, "followed to its successor"},
		{"no successor", follow, resp(""), false, false, "stays pending"},
		{"sealed without successor ends the partition", follow, Response{Sealed: true}, true, true, "followed to its successor"},
		{"a snapshot marker is evidence of its own", followSnap, marked(resp("N8"), "rv"), true, false, "snapshot marker"},
		{"events are not followed but delivered", follow, resp("N8", ev("a", 501)), true, false, "all 1 events"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := acked(build(t, tc.contract, "C41", 9, "a1", tc.r), len(tc.r.Events))
			c := CanPromote(tc.contract, w)
			assert.Equal(t, tc.complete, c.Complete)
			assert.Equal(t, tc.followOnly, c.FollowOnly)
			assert.Contains(t, c.Reason, tc.reason)
			if tc.followOnly {
				assert.True(t, c.Watermark.IsZero(), "a followed empty page claims no watermark")
				assert.False(t, c.HasApplied)
			}
		})
	}
}

func TestBuild_FollowedEmptyPageLoopingToItsCursorIsNoProgress(t *testing.T) {
	follow := with(sparse, func(c *Contract) { c.EmptyPage = provider.EmptyFollowsSuccessor })
	_, err := Build(BuildInput{Scope: "s", Partition: "p", Generation: 9, InputCursor: []byte("C41"), AttemptID: "a1", Response: resp("C41"), Contract: follow})
	assert.ErrorIs(t, err, ErrLoop)
}
