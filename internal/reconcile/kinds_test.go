package reconcile

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/provider"
)

// Kinesis-style sequence numbers: 56 digits, far beyond int64.
const seqBase = "4959033827149025660855969253836157109592157598913658"

func seqPos(t testing.TB, suffix string) coord.Position {
	t.Helper()
	p, err := coord.DecimalPosition(seqBase + suffix)
	require.NoError(t, err)
	return p
}

func evAt(id string, p coord.Position) Event {
	return Event{ID: id, Position: p, Payload: []byte("payload of " + id)}
}

// The classification rules hold for decimal and string positions as they
// do for integers: the next required position of dense decimal positions is
// found across a carry, an omitted event of a string-keyed listing is
// divergence, and a watermark of the positions' kind covers them.
func TestClassifyPositionsOfDeclaredKinds(t *testing.T) {
	denseDec := with(dense, func(c *Contract) { c.PositionKind = provider.KindDecimal })
	keys := with(sparse, func(c *Contract) { c.PositionKind = provider.KindString })
	keysCovered := with(keys, func(c *Contract) { c.WatermarkCoversPositions = true })
	key := func(s string) coord.Position { return coord.StringPosition(s) }
	obj := func(id string) Event { return evAt(id, key(id)) }
	for _, tc := range []struct {
		name     string
		c        Contract
		applied  coord.Position
		prior    []Response
		retry    Response
		want     RetryClass
		contains string
	}{
		{name: "dense decimal continues across a carry", c: denseDec, applied: seqPos(t, "09999"),
			retry: resp("s2", evAt("a", seqPos(t, "10000")), evAt("b", seqPos(t, "10001"))), want: FirstResponse},
		{name: "dense decimal gap after the boundary", c: denseDec, applied: seqPos(t, "09999"),
			prior: []Response{resp("s2", evAt("a", seqPos(t, "10000")), evAt("b", seqPos(t, "10001")))},
			retry: resp("s3", evAt("b", seqPos(t, "10001")), evAt("c", seqPos(t, "10002"))), want: UnprovableDivergence,
			contains: "omits it"},
		{name: "dense decimal first event past the next required one", c: denseDec, applied: seqPos(t, "09999"),
			retry: resp("s3", evAt("b", seqPos(t, "10001"))), want: UnprovableDivergence,
			contains: "not at the next required position " + seqBase + "10000"},
		{name: "string keys: a retry omitting a listed key", c: keys, applied: key("photos/0001"),
			prior: []Response{resp("t2", obj("photos/0002"), obj("photos/0003"), obj("photos/0010"))},
			retry: resp("t3", obj("photos/0002"), obj("photos/0010")), want: UnprovableDivergence, contains: "photos/0003"},
		{name: "string keys: rotation of the same listing", c: with(keys, func(c *Contract) { c.TokensMayRotate = true }), applied: key("photos/0001"),
			prior: []Response{resp("t2", obj("photos/0002"), obj("photos/0003"))},
			retry: resp("t3", obj("photos/0002"), obj("photos/0003")), want: TokenRotation},
		{name: "string keys: a shifted page covered by a key watermark", c: keysCovered, applied: key("photos/0001"),
			prior: []Response{func() Response {
				r := resp("t2", obj("photos/0002"), obj("photos/0003"))
				r.CompleteThrough = coord.String("photos/0003")
				return r
			}()},
			retry: func() Response {
				r := resp("t3", obj("photos/0002"), obj("photos/0003"), obj("photos/0004"))
				r.CompleteThrough = coord.String("photos/0004")
				return r
			}(), want: ShiftedPage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cp := Checkpoint{Scope: scope, Partition: part, Cursor: []byte("C"), Generation: 4, Applied: tc.applied, HasApplied: true}
			var prior []Witness
			for i, r := range tc.prior {
				prior = append(prior, build(t, tc.c, "C", 4, "a"+string(rune('0'+i)), r))
			}
			v := classify(t, tc.c, cp, build(t, tc.c, "C", 4, "new", tc.retry), prior...)
			assert.Equal(t, tc.want, v.Class, v.Reason)
			assert.Contains(t, v.Reason, tc.contains)
		})
	}
}

// A response whose positions are not of the declared kind is a bad
// response, whatever else it holds.
func TestBuildRefusesAPositionOfAnotherKind(t *testing.T) {
	c := with(sparse, func(c *Contract) { c.PositionKind = provider.KindDecimal })
	_, err := Build(BuildInput{Scope: scope, Partition: part, Generation: 1, AttemptID: "a", Contract: c,
		Response: resp("n", evAt("a", seqPos(t, "1")), ev("b", 7))})
	var ke *KindError
	require.ErrorAs(t, err, &ke)
	assert.ErrorIs(t, err, ErrBadResponse)
	assert.Equal(t, 1, ke.Index)
	assert.Contains(t, err.Error(), "integer position 7, but the contract declares decimal positions")
}
