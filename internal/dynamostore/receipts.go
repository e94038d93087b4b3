package dynamostore

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/store"
)

// Receipt chunks of a re-read window (store.ReceiptStore): one item per
// delivered page, in the partition's own item collection,
//
//	pk = <scope>#<partition>, sk = rcpt#<top position, 20 digits>#<generation, 20 digits>#<attempt>
//
// where the top position is the chunk's greatest, as the offset-binary
// unsigned form of its int64 (integer and timestamp positions), so sort
// order is position order. Attributes: rk (N, the positions' kind) and r
// (B, 24 bytes per receipt: id hash, position, digest, big-endian). The
// receipts above a position are one consistent Query on the sort-key
// range above it; the chunks the window left behind one keys-only Query
// and BatchWriteItem deletes.
const (
	skReceiptPrefix = "rcpt#"
	attrReceipts    = "r"
	attrReceiptKind = "rk"
	receiptBytes    = 24
)

func receiptPos(p coord.Position) string {
	return fmt.Sprintf("%020d", uint64(p.Int)^(1<<63))
}

func receiptSK(c store.ReceiptChunk) string {
	return fmt.Sprintf("%s%s#%020d#%s", skReceiptPrefix, receiptPos(c.Top()), c.Generation, c.Attempt)
}

func encodeReceipts(rs []store.Receipt) []byte {
	b := make([]byte, 0, len(rs)*receiptBytes)
	for _, r := range rs {
		b = binary.BigEndian.AppendUint64(b, r.IDHash)
		b = binary.BigEndian.AppendUint64(b, uint64(r.Position.Int))
		b = binary.BigEndian.AppendUint64(b, r.Digest)
	}
	return b
}

func decodeReceipts(it item) ([]store.Receipt, error) {
	b, err := getB(it, attrReceipts)
	if err != nil {
		return nil, err
	}
	k, _, err := getU(it, attrReceiptKind)
	if err != nil {
		return nil, err
	}
	if len(b)%receiptBytes != 0 || (coord.Kind(k) != coord.KindInteger && coord.Kind(k) != coord.KindTimestamp) {
		return nil, fmt.Errorf("%w: receipt chunk of %d bytes, kind %d", errMalformed, len(b), k)
	}
	out := make([]store.Receipt, 0, len(b)/receiptBytes)
	for ; len(b) > 0; b = b[receiptBytes:] {
		out = append(out, store.Receipt{
			IDHash:   binary.BigEndian.Uint64(b),
			Position: coord.Position{Kind: coord.Kind(k), Int: int64(binary.BigEndian.Uint64(b[8:]))},
			Digest:   binary.BigEndian.Uint64(b[16:]),
		})
	}
	return out, nil
}

// PutReceipts implements store.ReceiptStore with one PutItem. It is not
// conditional: a chunk is named by its page's witness and holds what that
// page delivered, so writing it again writes the same item.
func (s *DynamoStore) PutReceipts(ctx context.Context, c store.ReceiptChunk) error {
	if err := c.Validate(); err != nil {
		return err
	}
	it := item{
		attrPK:          avS(checkpointPK(c.Key)),
		attrSK:          avS(receiptSK(c)),
		attrReceiptKind: avU(uint64(c.Receipts[0].Position.Kind)),
		attrReceipts:    avB(encodeReceipts(c.Receipts)),
	}
	if n := ItemSize(it); n > maxItemBytes {
		return fmt.Errorf("%w: a receipt chunk of %d bytes", store.ErrInvalid, n)
	}
	if _, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: it}); err != nil {
		return s.wrap("put receipts of", c.Key, err)
	}
	return nil
}

// Receipts implements store.ReceiptStore with one consistent Query (paginated).
func (s *DynamoStore) Receipts(ctx context.Context, k store.Key, from coord.Position, hasFrom bool) ([]store.Receipt, error) {
	if err := k.Validate(); err != nil {
		return nil, err
	}
	lo := skReceiptPrefix
	if hasFrom {
		lo = skReceiptPrefix + receiptPos(from) + "#~"
	}
	e := newExpr()
	cond := fmt.Sprintf("%s = %s AND %s BETWEEN %s AND %s", e.n(attrPK), e.v("pk", avS(checkpointPK(k))), e.n(attrSK),
		e.v("lo", avS(lo)), e.v("hi", avS(skReceiptPrefix+"~")))
	its, err := s.queryItems(ctx, e, cond, "")
	if err != nil {
		return nil, s.wrap("read receipts of", k, err)
	}
	var out []store.Receipt
	for _, it := range its {
		rs, err := decodeReceipts(it)
		if err != nil {
			return nil, err
		}
		for _, r := range rs {
			if store.ReceiptAbove(r, from, hasFrom) {
				out = append(out, r)
			}
		}
	}
	store.SortReceipts(out)
	return out, nil
}

// PruneReceipts implements store.ReceiptStore: a keys-only consistent
// Query of the chunks whose top is at or below through, then
// BatchWriteItem deletes of 25 keys at a time (a write unit each).
func (s *DynamoStore) PruneReceipts(ctx context.Context, k store.Key, through coord.Position) (int, error) {
	if err := k.Validate(); err != nil {
		return 0, err
	}
	e := newExpr()
	cond := fmt.Sprintf("%s = %s AND %s BETWEEN %s AND %s", e.n(attrPK), e.v("pk", avS(checkpointPK(k))), e.n(attrSK),
		e.v("lo", avS(skReceiptPrefix)), e.v("hi", avS(skReceiptPrefix+receiptPos(through)+"#~")))
	keys, err := s.queryItems(ctx, e, cond, e.n(attrPK)+", "+e.n(attrSK))
	if err != nil {
		return 0, s.wrap("list receipts to prune of", k, err)
	}
	keys = slices.DeleteFunc(keys, func(it item) bool {
		sk, _ := getS(it, attrSK)
		return !strings.HasPrefix(sk, skReceiptPrefix)
	})
	return s.batchDelete(ctx, keys, "receipts", k)
}
