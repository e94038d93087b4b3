package dynamostore

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/store"
)

// With a witness TTL every witness carries the expiry attribute DynamoDB's
// time to live deletes it by (write time plus the TTL, epoch seconds); the
// repeat of a stored witness written later, with another expiry, is still
// the same witness; without a TTL no expiry is written.
func TestWitnessTTLWritesTheExpiryAttribute(t *testing.T) {
	k := store.Key{Scope: "ttl", Partition: "p"}
	w := reconcile.Witness{Scope: k.Scope, Partition: k.Partition, Generation: 1, AttemptID: "a1",
		InputCursor: []byte("c0"), Successor: []byte("c1"), Disposition: reconcile.Pending,
		Events: []reconcile.EventWitness{{IDHash: 7, Position: coord.IntPosition(1), Digest: 9}}}
	at := time.Unix(1_800_000_000, 0)

	s := newTestStore(t, func(c *DynamoConfig) { c.WitnessTTL = 48 * time.Hour })
	s.now = func() time.Time { return at }
	require.NoError(t, s.PutWitness(t.Context(), w))
	it, err := s.get(t.Context(), witnessKey(k, 1, "a1"))
	require.NoError(t, err)
	exp, ok, err := getU(it, attrExpires)
	require.NoError(t, err)
	require.True(t, ok, "the expiry attribute is written")
	assert.Equal(t, uint64(at.Add(48*time.Hour).Unix()), exp)

	s.now = func() time.Time { return at.Add(time.Hour) }
	require.NoError(t, s.PutWitness(t.Context(), w), "an idempotent repeat, whatever its expiry")
	t.Logf("enabling TTL on dynalite: %v", s.TTLError())

	plain := newTestStore(t)
	require.NoError(t, plain.PutWitness(t.Context(), w))
	it, err = plain.get(t.Context(), witnessKey(k, 1, "a1"))
	require.NoError(t, err)
	_, ok, err = getU(it, attrExpires)
	require.NoError(t, err)
	assert.False(t, ok, "no expiry without a TTL")
}
