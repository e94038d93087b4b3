package reconcile

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func buildCompact(t testing.TB, c Contract, cursor string, gen uint64, attempt string, r Response) Witness {
	t.Helper()
	w, err := Build(BuildInput{Scope: scope, Partition: part, Generation: gen, InputCursor: []byte(cursor), AttemptID: attempt, Response: r, Contract: c, Compact: true})
	require.NoError(t, err)
	return w
}

// A compact witness carries one 32-bit fingerprint of each event's id and
// payload projection as both its id hash and its digest, and its exact
// position; it stores in 4 bytes an event and reads back the same.
func TestBuildCompactFingerprintsIdAndPayload(t *testing.T) {
	w := buildCompact(t, dense, "C41", 9, "a1", resp("N7", ev("e501", 501), evp("e502", 502, "p")))
	require.Len(t, w.Events, 2)
	for i, e := range w.Events {
		assert.Equal(t, e.IDHash, e.Digest)
		assert.Less(t, e.IDHash, uint64(1)<<32)
		assert.Equal(t, int64(501+i), e.Position.Int)
	}
	assert.Equal(t, HashCompact("e502", []byte("p")), w.Events[1].IDHash)
	assert.NotEqual(t, HashCompact("e502", []byte("q")), w.Events[1].IDHash, "the payload is part of the fingerprint")
	assert.NotEqual(t, HashCompact("e50", []byte("2p")), w.Events[1].IDHash, "the id is length-prefixed")
	b := EncodeEvents(w.Events)
	assert.Equal(t, formatConsecutive+compactEvents, b[0])
	got, err := DecodeEvents(b)
	require.NoError(t, err)
	assert.Equal(t, w.Events, got)
}

// Two distinct ids of one page with the same fingerprint would be one
// identity: such a page is built with 64-bit hashes instead, the same way
// every time it is fetched.
func TestBuildCompactFallsBackOnAFingerprintCollisionInThePage(t *testing.T) {
	seen := map[uint64]string{}
	var a, b string
	for i := 0; a == ""; i++ {
		id := fmt.Sprintf("id-%d", i)
		fp := HashCompact(id, nil)
		if other, ok := seen[fp]; ok {
			a, b = other, id
		}
		seen[fp] = id
	}
	r := resp("N7", evp(a, 501, ""), evp(b, 502, ""))
	w := buildCompact(t, dense, "C41", 9, "a1", r)
	assert.Equal(t, []EventWitness{EventOf(evp(a, 501, "")), EventOf(evp(b, 502, ""))}, w.Events)
	assert.Equal(t, w.Events, buildCompact(t, dense, "C41", 9, "a2", r).Events)
	assert.Less(t, EncodeEvents(w.Events)[0], formatDelta+compactEvents, "stored in a 64-bit form")
}

// Under the compact encoding a retry's classification compares
// fingerprints: the same answer is an exact replay; a payload changed
// under the same id at a receipt's position is a receipt conflict under
// ordered positions (another identity there), as a changed digest is with
// 64-bit hashes; an added event is a shifted page.
func TestClassifyCompactWitnesses(t *testing.T) {
	cp := checkpoint("C41", 9, 500, true)
	a1 := acked(buildCompact(t, dense, "C41", 9, "a1", resp("N7", ev("e501", 501), ev("e502", 502))), 2)

	v := classify(t, dense, cp, buildCompact(t, dense, "C41", 9, "a2", resp("N7", ev("e501", 501), ev("e502", 502))), a1)
	assert.Equal(t, ExactReplay, v.Class)

	_, err := Classify(ClassifyInput{Contract: dense, Applied: cp.Applied, HasApplied: true, Prior: []Witness{a1},
		Witness: buildCompact(t, dense, "C41", 9, "a3", resp("N8", evp("e501", 501, "changed"), ev("e502", 502)))})
	require.ErrorIs(t, err, ErrReceiptConflict)

	v = classify(t, dense, cp, buildCompact(t, dense, "C41", 9, "a4", resp("N8", ev("e501", 501), ev("e502", 502), ev("e503", 503))), a1)
	assert.Equal(t, ShiftedPage, v.Class)
	assert.Equal(t, 2, v.Satisfied)
}
