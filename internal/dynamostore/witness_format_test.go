package dynamostore

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/dynalitetest"
	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/provider"
)

// previousFormat is the DynamoDB store under the contract suite, able to
// write a witness item as the previous release did
// (storetest.PreviousFormat).
type previousFormat struct{ *DynamoStore }

// PutWitnessPreviousFormat writes w's item with its event witness in the
// previous release's form: formats 1 (integer positions as varint deltas)
// or 2 (consecutive integer positions), a 16-byte id hash and digest for
// every event, whatever the digests.
func (s previousFormat) PutWitnessPreviousFormat(ctx context.Context, w reconcile.Witness) error {
	it := witnessItem(w)
	it[attrEvents] = avB(previousEventBlob(w.Events))
	_, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: it})
	return err
}

// previousEventBlob encodes integer positions as the previous release's
// reconcile.EncodeEvents did (written out here, not by the current code).
func previousEventBlob(events []reconcile.EventWitness) []byte {
	consecutive := len(events) > 0
	for i := 1; i < len(events); i++ {
		consecutive = consecutive && events[i].Position.Int == events[i-1].Position.Int+1
	}
	hashes := func(out []byte, e reconcile.EventWitness) []byte {
		out = binary.BigEndian.AppendUint64(out, e.IDHash)
		return binary.BigEndian.AppendUint64(out, e.Digest)
	}
	if consecutive {
		out := binary.AppendVarint(binary.AppendUvarint([]byte{2}, uint64(len(events))), events[0].Position.Int)
		for _, e := range events {
			out = hashes(out, e)
		}
		return out
	}
	out := binary.AppendUvarint([]byte{1}, uint64(len(events)))
	var prev int64
	for _, e := range events {
		out = binary.AppendVarint(out, e.Position.Int-prev)
		prev = e.Position.Int
		out = hashes(out, e)
	}
	return out
}

// An item written in the previous layout (its event witness 16 bytes an
// event, every event with the same digest) is read by the current store,
// is the same response when the current store writes it again (no fence),
// and is classified as an exact replay of the same answer built now: a
// retry after the upgrade resumes it. The current form of that witness is
// one write unit where the old one was two.
func TestWitnessItemOfThePreviousLayoutIsRead(t *testing.T) {
	dynalitetest.Endpoint(t)
	s := newTestStore(t)
	ctx := t.Context()
	k := store.Key{Scope: "orders", Partition: "p0"}
	events := make([]reconcile.EventWitness, 100)
	for i := range events {
		events[i] = reconcile.EventWitness{IDHash: reconcile.HashID(fmt.Sprintf("evt-%d", i)), Position: coord.IntPosition(int64(501 + i)), Digest: reconcile.HashPayload(nil)}
	}
	w := reconcile.Witness{Scope: k.Scope, Partition: k.Partition, Generation: 9, InputCursor: []byte("C41"), AttemptID: "a1", Events: events, Successor: []byte("N7"), Disposition: reconcile.Pending}

	old := witnessItem(w)
	old[attrEvents] = avB(previousEventBlob(events))
	_, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: old})
	require.NoError(t, err)
	require.Greater(t, ItemSize(old), 1024, "the previous layout: two write units")
	require.LessOrEqual(t, ItemSize(witnessItem(w)), 1024, "the current layout: one write unit")

	got, err := s.Witnesses(ctx, k, 9)
	require.NoError(t, err)
	require.Equal(t, []reconcile.Witness{w}, got)
	require.NoError(t, s.PutWitness(ctx, w), "the same response written again")
	require.NoError(t, s.RecordReceipt(ctx, k, 9, "a1", 40))

	retry := w
	retry.AttemptID = "a2"
	dense := reconcile.Contract{EmptyPage: provider.EmptyNoEvidence, OrderedPositions: true, DensePositions: true, Recovery: provider.RecoveryPark, Finality: provider.FinalitySource}
	v, err := reconcile.Classify(reconcile.ClassifyInput{Contract: dense, Prior: got, Witness: retry})
	require.NoError(t, err)
	require.Equal(t, reconcile.ExactReplay, v.Class)
	require.NotNil(t, v.Resume)
	require.Equal(t, "a1", v.Resume.AttemptID)
}
