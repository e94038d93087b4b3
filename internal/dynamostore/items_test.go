package dynamostore

import (
	"math"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/store"
)

// Keys never collide, whatever the names (no dynalite needed).
func TestKeysAreInjective(t *testing.T) {
	keys := []store.Key{
		{Scope: "a#b", Partition: "c"},
		{Scope: "a", Partition: "b#c"},
		{Scope: "a", Partition: "#membership"},
		{Scope: "a", Partition: "membership"},
		{Scope: "a#", Partition: "membership"},
		{Scope: "a%23b", Partition: "c"},
		{Scope: "a%", Partition: "23b#c"},
		{Scope: "%", Partition: "#"},
		{Scope: "#", Partition: "%"},
	}
	seen := map[string]store.Key{}
	for _, k := range keys {
		pk := checkpointPK(k)
		prev, dup := seen[pk]
		require.False(t, dup, "%q and %q share pk %q", prev, k, pk)
		seen[pk] = k
		back, err := parseCheckpointPK(pk)
		require.NoError(t, err)
		require.Equal(t, k, back)
	}
	for _, rec := range []string{recMembership, recFrontier, recPartitions} {
		for _, scope := range []string{"a", "a#", "a#b"} {
			pk := recordPK(scope, rec)
			_, dup := seen[pk]
			require.False(t, dup, "record %s of %q collides with a checkpoint", rec, scope)
			_, err := parseCheckpointPK(pk)
			require.Error(t, err, "a record key must never parse as a checkpoint key")
		}
	}
}

func TestWitnessSortKey(t *testing.T) {
	for _, gen := range []uint64{0, 1, 10, math.MaxUint64} {
		for _, attempt := range []string{"a", "a#b", "01JF#%"} {
			sk := witnessSK(gen, attempt)
			g, a, err := parseWitnessSK(sk)
			require.NoError(t, err)
			require.Equal(t, gen, g)
			require.Equal(t, attempt, a)
		}
	}
	require.NotContains(t, witnessSK(10, "x"), witnessPrefix(1))
	require.Equal(t, "witness#00000000000000000001#", witnessPrefix(1))
}

// numberSize follows dynalite's (and DynamoDB's documented) rule.
func TestNumberSize(t *testing.T) {
	for s, want := range map[string]int{
		"0": 1, "1": 2, "12": 2, "120": 3, "123": 3, "1234": 3, "100": 2, "-1": 3,
		"18446744073709551615": 11, "9223372036854775807": 11,
	} {
		require.Equal(t, want, numberSize(s), s)
	}
}

func TestItemSize(t *testing.T) {
	it := item{
		"pk":  avS("abc"),
		"b":   avB([]byte{1, 2, 3, 4}),
		"n":   avU(12),
		"ok":  avBool(true),
		"l":   avStrings([]string{"x", "yz"}),
		"m":   &types.AttributeValueMemberM{Value: item{"k": avU(1)}},
		"set": &types.AttributeValueMemberSS{Value: []string{"ab", "c"}},
	}
	// pk 2+3, b 1+4, n 1+2, ok 2+1, l 1+(3+1+1+1+2), m 1+(3+1+(1+2)), set 3+3
	require.Equal(t, 5+5+3+3+9+8+6, ItemSize(it))
}

// The witness item round-trips through its attribute encoding.
func TestWitnessItemRoundTrip(t *testing.T) {
	w := reconcile.Witness{
		Scope: "s#1", Partition: "p%2", Generation: 12, InputCursor: []byte{0, 1}, AttemptID: "att#1",
		Events:    []reconcile.EventWitness{{IDHash: 1, Position: coord.IntPosition(-3), Digest: 2}, {IDHash: 3, Position: coord.IntPosition(9), Digest: 4}},
		Successor: []byte{0xff}, Marker: []byte("m"), CompleteThrough: coord.String("z"), Sealed: true,
		Disposition: reconcile.Abandoned, AckedThrough: 1,
	}
	got, err := decodeWitness(witnessItem(w))
	require.NoError(t, err)
	require.Equal(t, w, got)
}
