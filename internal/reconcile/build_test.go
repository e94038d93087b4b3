package reconcile

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/provider"
)

func TestBuild_RecordsTheResponse(t *testing.T) {
	cursor, successor, marker := []byte("C41"), []byte("N7"), []byte("rv-9")
	in := BuildInput{
		Scope: scope, Partition: part, Generation: 9, InputCursor: cursor, AttemptID: "a1", Contract: snap,
		Response: Response{
			Events: []Event{
				ev("e501", 501),
				{ID: "e502", Position: coord.IntPosition(502), Payload: []byte(`{"v":1,"read_at":1}`), Semantic: []byte(`{"v":1}`)},
			},
			Successor: successor, Marker: marker, CompleteThrough: coord.Integer(502), Sealed: true,
		},
	}
	w, err := Build(in)
	require.NoError(t, err)
	assert.Equal(t, Witness{
		Scope: scope, Partition: part, Generation: 9, InputCursor: []byte("C41"), AttemptID: "a1",
		Events: []EventWitness{
			{IDHash: HashID("e501"), Position: coord.IntPosition(501), Digest: HashPayload([]byte("payload of e501"))},
			{IDHash: HashID("e502"), Position: coord.IntPosition(502), Digest: HashPayload([]byte(`{"v":1}`))},
		},
		Successor: []byte("N7"), Marker: []byte("rv-9"), CompleteThrough: coord.Integer(502), Sealed: true,
		Disposition: Pending,
	}, w)

	// The witness never aliases the caller's memory.
	cursor[0], successor[0], marker[0] = 'X', 'X', 'X'
	assert.Equal(t, []byte("C41"), w.InputCursor)
	assert.Equal(t, []byte("N7"), w.Successor)
	assert.Equal(t, []byte("rv-9"), w.Marker)
}

func TestEventOf_DigestsTheSemanticProjection(t *testing.T) {
	a := Event{ID: "e1", Position: coord.IntPosition(1), Payload: []byte(`{"v":1,"read_at":1}`), Semantic: []byte(`{"v":1}`)}
	b := Event{ID: "e1", Position: coord.IntPosition(1), Payload: []byte(`{"v":1,"read_at":2}`), Semantic: []byte(`{"v":1}`)}
	assert.Equal(t, EventOf(a), EventOf(b), "fields outside the projection do not change the digest")
	b.Semantic = []byte(`{"v":2}`)
	assert.NotEqual(t, EventOf(a).Digest, EventOf(b).Digest)
	empty := Event{ID: "e1", Position: coord.IntPosition(1), Payload: []byte("x"), Semantic: []byte{}}
	assert.Equal(t, HashPayload(nil), EventOf(empty).Digest, "a non-nil empty projection is digested, not the payload")
	assert.NotEqual(t, HashID("e1"), HashID("e2"))
	assert.Equal(t, uint64(0xe3b0c44298fc1c14), HashPayload(nil), "first 8 bytes of SHA-256, big-endian")
}

func TestBuild_Errors(t *testing.T) {
	unordered := with(sparse, func(c *Contract) { c.OrderedPositions = false })
	for _, tc := range []struct {
		name     string
		contract Contract
		in       BuildInput
		is       error
		contains []string
	}{
		{"missing id", dense, BuildInput{Response: resp("N7", ev("e501", 501), ev("", 502))}, ErrMissing, []string{"p1", "event 1", "position 502", "no id"}},
		{"missing position", dense, BuildInput{Response: resp("N7", ev("e501", 501), Event{ID: "e502", NoPosition: true})}, ErrMissing, []string{"p1", `"e502"`, "no position"}},
		{"duplicate id", dense, BuildInput{Response: resp("N7", ev("e501", 501), ev("e502", 502), ev("e501", 503))}, ErrDuplicateID, []string{"p1", `"e501"`, "positions 501 and 503"}},
		{"duplicate id, unordered contract", unordered, BuildInput{Response: resp("N7", ev("e1", 9), ev("e1", 3))}, ErrDuplicateID, []string{"positions 9 and 3"}},
		{"positions decrease", sparse, BuildInput{Response: resp("N7", ev("e502", 502), ev("e501", 501))}, ErrOutOfOrder, []string{"p1", "position 501", "follow position 502"}},
		{"position repeated", dense, BuildInput{Response: resp("N7", ev("a", 7), ev("b", 7))}, ErrOutOfOrder, []string{"position 7", "follow position 7"}},
		{"dense implies ordered", with(dense, func(c *Contract) { c.OrderedPositions = false }), BuildInput{Response: resp("N7", ev("a", 8), ev("b", 7))}, ErrOutOfOrder, []string{"position 7"}},
		{"has_more true without a successor", eot, BuildInput{Response: more(resp("", ev("e501", 501)))}, ErrHasMoreContradicted, []string{"p1", "has_more true without a successor"}},
		{"has_more true on an empty page without a successor", eot, BuildInput{Response: more(resp(""))}, ErrHasMoreContradicted, []string{"p1", "has_more true without a successor"}},
		{"has_more true on a sealed page without a successor", eot, BuildInput{Response: sealed(more(resp("", ev("e501", 501))))}, ErrHasMoreContradicted, []string{"has_more true without a successor"}},
		{"has_more true on a sealed page", eot, BuildInput{Response: sealed(more(resp("N7", ev("e501", 501))))}, ErrHasMoreContradicted, []string{"p1", "has_more true on a sealed page"}},
		{"loop", dense, BuildInput{Response: resp("C41")}, ErrLoop, []string{"p1", "generation 9", CursorHash([]byte("C41"))}},
		{"loop with a marker the contract ignores", dense, BuildInput{Response: marked(resp("C41"), "m")}, ErrLoop, nil},
		{"loop with a watermark the contract ignores", dense, BuildInput{Response: Response{Successor: []byte("C41"), CompleteThrough: coord.Integer(5)}}, ErrLoop, nil},
		{"no partition", dense, BuildInput{Partition: "-", Response: resp("N7")}, ErrInvalid, nil},
		{"no attempt", dense, BuildInput{AttemptID: "-", Response: resp("N7")}, ErrInvalid, nil},
		{"zero contract", Contract{}, BuildInput{Response: resp("N7")}, ErrInvalid, []string{"empty_page(0)"}},
		{"unknown recovery", with(dense, func(c *Contract) { c.Recovery = 9 }), BuildInput{Response: resp("N7")}, ErrInvalid, []string{"recovery(9)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			in.Scope, in.Generation, in.InputCursor, in.Contract = scope, 9, []byte("C41"), tc.contract
			in.Partition, in.AttemptID = part, "a1"
			if tc.in.Partition == "-" {
				in.Partition = ""
			}
			if tc.in.AttemptID == "-" {
				in.AttemptID = ""
			}
			w, err := Build(in)
			require.Error(t, err)
			assert.Zero(t, w)
			assert.ErrorIs(t, err, tc.is)
			bad := !errors.Is(tc.is, ErrLoop) && !errors.Is(tc.is, ErrInvalid)
			assert.Equal(t, bad, errors.Is(err, ErrBadResponse), "only provider input is ErrBadResponse")
			for _, s := range tc.contains {
				assert.Contains(t, err.Error(), s)
			}
		})
	}
}

// eot is a finite traversal: a page without successor completes the
// partition, an empty page is the end of the data.
var eot = with(dense, func(c *Contract) {
	c.MissingSuccessor, c.EmptyPage = provider.MissingSuccessorEndsTraversal, provider.EmptyEndOfData
})

func more(r Response) Response   { r.HasMore, r.HasMoreKnown = true, true; return r }
func sealed(r Response) Response { r.Sealed = true; return r }

// TestBuild_HasMoreIsNeverTheEnd: a response whose has_more is true is
// recorded only when it has a successor and is not sealed; has_more false
// (or unmapped) leaves the successor alone, so a page without one is the end
// as the contract says, and a successor next to has_more false is kept (the
// core follows it: the flag is not evidence).
func TestBuild_HasMoreIsNeverTheEnd(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    Response
		ok   bool
	}{
		{"has_more true with a successor", more(resp("N7", ev("e501", 501))), true},
		{"has_more true, empty page with a successor", more(resp("N7")), true},
		{"has_more false without a successor", func() Response { r := resp("", ev("e501", 501)); r.HasMoreKnown = true; return r }(), true},
		{"has_more false with a successor", func() Response { r := resp("N7", ev("e501", 501)); r.HasMoreKnown = true; return r }(), true},
		{"has_more unmapped without a successor", resp("", ev("e501", 501)), true},
		{"sealed without has_more", sealed(resp("", ev("e501", 501))), true},
		{"has_more true without a successor", more(resp("", ev("e501", 501))), false},
		{"has_more true, unknown to the contract, without a successor", func() Response { r := resp("", ev("e501", 501)); r.HasMore = true; return r }(), false},
		{"has_more true, sealed", sealed(more(resp("N7", ev("e501", 501)))), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := Build(BuildInput{Scope: scope, Partition: part, Generation: 9, InputCursor: []byte("C41"), AttemptID: "a1", Contract: eot, Response: tc.r})
			if tc.ok {
				require.NoError(t, err)
				assert.Equal(t, string(tc.r.Successor), string(w.Successor))
				return
			}
			var hm *HasMoreError
			require.ErrorAs(t, err, &hm)
			assert.Equal(t, part, hm.Partition)
			assert.ErrorIs(t, err, ErrBadResponse, "a malformed page: fetched again, then parked")
			assert.Zero(t, w)
		})
	}
}

func TestBuild_ErrorTypes(t *testing.T) {
	b := func(c Contract, r Response) error {
		_, err := Build(BuildInput{Partition: part, AttemptID: "a1", InputCursor: []byte("C"), Contract: c, Response: r})
		return err
	}
	var missing *MissingError
	require.ErrorAs(t, b(dense, resp("N", ev("", 3))), &missing)
	assert.Equal(t, MissingError{Partition: part, Index: 0, Field: "id", Position: coord.IntPosition(3)}, *missing)
	var dup *DuplicateIDError
	require.ErrorAs(t, b(dense, resp("N", ev("x", 3), ev("x", 4))), &dup)
	assert.Equal(t, [2]coord.Position{coord.IntPosition(3), coord.IntPosition(4)}, dup.Positions)
	var order *OrderError
	require.ErrorAs(t, b(dense, resp("N", ev("x", 4), ev("y", 3))), &order)
	assert.Equal(t, OrderError{Partition: part, Index: 1, Previous: coord.IntPosition(4), Position: coord.IntPosition(3)}, *order)
	var loop *LoopError
	require.ErrorAs(t, b(dense, resp("C")), &loop)
	assert.Equal(t, part, loop.Partition)
}

func TestBuild_EmptyResponseIsNoLoopWithEvidence(t *testing.T) {
	for _, tc := range []struct {
		name     string
		contract Contract
		r        Response
	}{
		{"end-of-data contract", with(dense, func(c *Contract) { c.EmptyPage = provider.EmptyEndOfData }), resp("C41")},
		{"snapshot marker", snap, marked(resp("C41"), "rv")},
		{"final through a watermark", with(dense, func(c *Contract) { c.EmptyPage = provider.EmptyFinalThroughWatermark }), Response{Successor: []byte("C41"), CompleteThrough: coord.Integer(3)}},
		{"another successor", dense, resp("N1")},
		{"events", dense, resp("C41", ev("e1", 1))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := build(t, tc.contract, "C41", 1, "a1", tc.r)
			assert.Equal(t, Pending, w.Disposition)
		})
	}
}

func TestWitness_CloneAndString(t *testing.T) {
	w := build(t, snap, "C41", 9, "a1", Response{
		Successor: []byte("N7"), Marker: []byte("rv"), CompleteThrough: coord.Integer(9), Sealed: true,
		Events: []Event{ev("e1", 501), ev("e2", 503)},
	})
	c := w.Clone()
	assert.Equal(t, w, c)
	c.Events[0].Position, c.Successor[0], c.Marker[0], c.InputCursor[0] = coord.IntPosition(1), 'X', 'X', 'X'
	assert.Equal(t, coord.IntPosition(501), w.Events[0].Position)
	assert.Equal(t, []byte("N7"), w.Successor)

	s := acked(w, 1).String()
	for _, want := range []string{"s/p1 g9 attempt a1", "2 events 501..503", CursorHash([]byte("N7")), "pending", "acked 1", "marker", "complete through 9", "sealed"} {
		assert.Contains(t, s, want)
	}
	assert.NotContains(t, s, "N7", "cursors are logged only as hashes")
	assert.Contains(t, Witness{Partition: part}.String(), "no events, successor none")
	assert.Equal(t, Witness{}, Witness{}.Clone())
}

func TestCursorHash(t *testing.T) {
	assert.Equal(t, "none", CursorHash(nil))
	assert.Regexp(t, `^sha256:[0-9a-f]{16}$`, CursorHash([]byte("C41")))
	assert.NotEqual(t, CursorHash([]byte("C41")), CursorHash([]byte("C42")))
}

func TestEnumStrings(t *testing.T) {
	assert.Equal(t, "pending", Pending.String())
	assert.Equal(t, "promoted", Promoted.String())
	assert.Equal(t, "abandoned", Abandoned.String())
	assert.Equal(t, "disposition(0)", Disposition(0).String())
	for c, want := range map[RetryClass]string{
		0: "retry_class(0)", FirstResponse: "first_response", ExactReplay: "exact_replay", TokenRotation: "token_rotation",
		ShiftedPage: "shifted_page", UnprovableDivergence: "unprovable_divergence", HeadGrowth: "head_growth", 7: "retry_class(7)",
	} {
		assert.Equal(t, want, c.String())
	}
	for a, want := range map[Action]string{0: "action(0)", Promote: "promote", Hold: "hold", Refuse: "refuse", 4: "action(4)"} {
		assert.Equal(t, want, a.String())
	}
}
