package dynamostore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tidemark/tidemark/internal/store"
)

// Paged membership records and the sharded partition index
// (docs/design.md#dynamodb-layout).
//
// A membership record whose item would exceed inlineMembershipBytes is
// written as a root and pages:
//
//	item               pk                    sk                                          attributes
//	membership root    <scope>##membership   record                                      ep, cutk/cut, proven, why, rep, np, dig
//	membership page    <scope>##membership   page#<epoch, 20 digits>#<dig>#<i, 6 digits>  d (B)
//
// The pages hold the JSON of the partitions, the unproven list, the
// lineage and the incarnation changes (membershipPayload), cut into
// membershipPageBytes; dig is the first 16 hex digits of its SHA-256 and np
// the number of pages. The pages are put first (they are not progress:
// their key names the content, so a repeat writes the same bytes), then
// the root with SwapMembership's one compare-and-swap on the epoch, which
// is the commit point. Readers read the root, then its pages with one
// consistent Query, and check the digest. Pages of older epochs are
// deleted after a successful swap, those of a lost swap at once (best
// effort: a leftover page is never read, its key names another digest).
//
// The partition index is one item per partition, its keys alone
// (indexEntry: pk <scope>##partitions#<NN>, NN = store.PartitionIndexKey
// of the name, sk p#<name>), written before the checkpoint. ListCheckpoints
// queries the store.PartitionIndexKeys keys and the key of earlier
// releases, <scope>##partitions (64 string-set shards shard#NN, and a
// single record before them), which is read and never written.

const (
	inlineMembershipBytes = 64 << 10
	membershipPageBytes   = 300 << 10
	skPagePrefix          = "page#"
	attrPages             = "np"  // N: pages of a paged membership
	attrDigest            = "dig" // S: digest of its payload
	attrData              = "d"   // B: one page

	skIndexEntry = "p#"
)

type membershipPayload struct {
	Partitions   []string            `json:"p,omitempty"`
	Unproven     []string            `json:"u,omitempty"`
	Parents      map[string][]string `json:"l,omitempty"`
	Incarnations map[string]uint64   `json:"i,omitempty"`
}

func pagePrefix(epoch uint64, dig string) string {
	return fmt.Sprintf("%s%020d#%s#", skPagePrefix, epoch, dig)
}

// membershipItems returns the items SwapMembership puts for m: the one
// item when it is small, else the root and its pages.
func membershipItems(m store.Membership) (item, []item, error) {
	full := membershipItem(m)
	if ItemSize(full) <= inlineMembershipBytes {
		return full, nil, nil
	}
	data, err := json.Marshal(membershipPayload{Partitions: m.Partitions, Unproven: m.Unproven, Parents: m.Parents, Incarnations: m.Incarnations})
	if err != nil {
		return nil, nil, fmt.Errorf("dynamostore: membership of %s: %w", m.Scope, err)
	}
	sum := sha256.Sum256(data)
	dig := hex.EncodeToString(sum[:8])
	root := full
	for _, a := range []string{attrParts, attrUnprov, attrLineage, attrIncs} {
		delete(root, a)
	}
	var pages []item
	for i, chunk := 0, data; len(chunk) > 0; i++ {
		n := min(len(chunk), membershipPageBytes)
		pages = append(pages, item{
			attrPK:   avS(recordPK(m.Scope, recMembership)),
			attrSK:   avS(fmt.Sprintf("%s%06d", pagePrefix(m.Epoch, dig), i)),
			attrData: avB(chunk[:n]),
		})
		chunk = chunk[n:]
	}
	root[attrPages] = avU(uint64(len(pages)))
	root[attrDigest] = avS(dig)
	return root, pages, nil
}

// readMembershipPages completes a paged root with its pages.
func (s *DynamoStore) readMembershipPages(ctx context.Context, scope string, root item) (store.Membership, error) {
	m, err := decodeMembership(scope, root)
	if err != nil {
		return store.Membership{}, err
	}
	np, _, err := getU(root, attrPages)
	if err != nil {
		return store.Membership{}, err
	}
	dig, err := getS(root, attrDigest)
	if err != nil {
		return store.Membership{}, err
	}
	items, err := s.queryPrefix(ctx, recordPK(scope, recMembership), pagePrefix(m.Epoch, dig))
	if err != nil {
		return store.Membership{}, s.wrap("load membership pages of", name(scope), err)
	}
	if uint64(len(items)) != np {
		return store.Membership{}, fmt.Errorf("%w: membership epoch %d of %s: %d of %d pages found", errPagesMissing, m.Epoch, scope, len(items), np)
	}
	var data bytes.Buffer
	for _, it := range items { // sk order is page order
		b, err := getB(it, attrData)
		if err != nil {
			return store.Membership{}, err
		}
		data.Write(b)
	}
	sum := sha256.Sum256(data.Bytes())
	if hex.EncodeToString(sum[:8]) != dig {
		return store.Membership{}, fmt.Errorf("%w: membership epoch %d of %s: pages do not match digest %s", errPagesMissing, m.Epoch, scope, dig)
	}
	var p membershipPayload
	if err := json.Unmarshal(data.Bytes(), &p); err != nil {
		return store.Membership{}, fmt.Errorf("dynamostore: membership of %s: %w", scope, err)
	}
	m.Partitions, m.Unproven, m.Parents, m.Incarnations = p.Partitions, p.Unproven, p.Parents, p.Incarnations
	if len(m.Parents) == 0 {
		m.Parents = nil
	}
	if len(m.Incarnations) == 0 {
		m.Incarnations = nil
	}
	return m, nil
}

var errPagesMissing = fmt.Errorf("%w: membership pages changed while read", errMalformed)

// queryPrefix reads every item of pk whose sk begins with prefix
// (consistent, in sk order).
func (s *DynamoStore) queryPrefix(ctx context.Context, pk, prefix string) ([]item, error) {
	e := newExpr()
	cond := e.n(attrPK) + " = " + e.v("pk", avS(pk))
	if prefix != "" {
		cond += " AND begins_with(" + e.n(attrSK) + ", " + e.v("pre", avS(prefix)) + ")"
	}
	return s.queryItems(ctx, e, cond, "")
}

// deleteMembershipPages deletes the membership pages of scope whose sk
// sorts before below (below "": any) and begins with only (only "": any).
// Best effort: pages are not progress.
func (s *DynamoStore) deleteMembershipPages(ctx context.Context, scope, below, only string) {
	items, err := s.queryPrefix(ctx, recordPK(scope, recMembership), skPagePrefix)
	if err != nil {
		return
	}
	for _, it := range items {
		sk, _ := getS(it, attrSK)
		if (only != "" && !strings.HasPrefix(sk, only)) || (below != "" && sk >= below) {
			continue
		}
		_, _ = s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
			TableName: aws.String(s.table),
			Key:       item{attrPK: it[attrPK], attrSK: it[attrSK]},
		})
	}
}

// LoadMembership implements store.Store with a consistent GetItem of the
// root and, for a paged record, one consistent Query of its pages.
func (s *DynamoStore) LoadMembership(ctx context.Context, scope string) (store.Membership, error) {
	if err := store.CheckName("scope", scope); err != nil {
		return store.Membership{}, err
	}
	for attempt := 0; ; attempt++ {
		it, err := s.get(ctx, recordKey(scope, recMembership))
		if err != nil {
			return store.Membership{}, s.wrap("load membership of", name(scope), err)
		}
		if it == nil {
			return store.Membership{}, fmt.Errorf("%w: no membership record for scope %s", store.ErrNotFound, scope)
		}
		if _, paged := it[attrPages]; !paged {
			return decodeMembership(scope, it)
		}
		m, err := s.readMembershipPages(ctx, scope, it)
		if err == nil || attempt >= 2 || !isPagesMissing(err) {
			return m, err
		}
		// A newer epoch replaced the root and deleted these pages between
		// the two reads: read the root again.
	}
}

func isPagesMissing(err error) bool {
	return err != nil && strings.Contains(err.Error(), errPagesMissing.Error())
}

// MembershipEpoch implements store.MembershipEpochReader: one consistent
// GetItem of the root's epoch only.
func (s *DynamoStore) MembershipEpoch(ctx context.Context, scope string) (uint64, error) {
	if err := store.CheckName("scope", scope); err != nil {
		return 0, err
	}
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:                aws.String(s.table),
		Key:                      recordKey(scope, recMembership),
		ConsistentRead:           aws.Bool(true),
		ProjectionExpression:     aws.String("#ep"),
		ExpressionAttributeNames: map[string]string{"#ep": attrEpoch},
	})
	if err != nil {
		return 0, s.wrap("load membership epoch of", name(scope), err)
	}
	if out.Item == nil {
		return 0, fmt.Errorf("%w: no membership record for scope %s", store.ErrNotFound, scope)
	}
	e, _, err := getU(out.Item, attrEpoch)
	return e, err
}

// SwapMembership implements store.Store: the pages of a large record
// first, then one PutItem of the root conditional on the stored epoch
// (attribute_not_exists(pk) for prevEpoch 0): the commit point.
func (s *DynamoStore) SwapMembership(ctx context.Context, prevEpoch uint64, next store.Membership) (store.Membership, error) {
	if err := store.ValidateSwap(prevEpoch, next); err != nil {
		return store.Membership{}, err
	}
	it, pages, err := membershipItems(next)
	if err != nil {
		return store.Membership{}, err
	}
	for _, p := range pages {
		if _, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: p}); err != nil {
			return store.Membership{}, s.wrap("write membership pages of", name(next.Scope), err)
		}
		s.noteItem(p)
	}
	e := newExpr()
	var cond string
	if prevEpoch == 0 {
		cond = "attribute_not_exists(" + e.n(attrPK) + ")"
	} else {
		cond = e.n(attrEpoch) + " = " + e.v("prev", avU(prevEpoch))
	}
	_, err = s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                 aws.String(s.table),
		Item:                      it,
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  e.names,
		ExpressionAttributeValues: e.vals(),
	})
	s.noteItem(it)
	if isConditionFailed(err) {
		// The pages stay: a winner of the same epoch may have written the
		// same content under the same keys. The next swap deletes them.
		old, err := s.get(ctx, recordKey(next.Scope, recMembership))
		if err != nil {
			return store.Membership{}, &store.FenceError{Key: store.Key{Scope: next.Scope}, Op: "swap membership", Reason: fmt.Sprintf("expected epoch %d (reading the stored record failed: %v)", prevEpoch, err)}
		}
		var epoch uint64
		if old != nil {
			epoch, _, _ = getU(old, attrEpoch)
		}
		return store.Membership{}, store.MembershipFence(next.Scope, prevEpoch, old != nil, epoch)
	}
	if err != nil {
		return store.Membership{}, s.wrap("swap membership of", name(next.Scope), err)
	}
	if prevEpoch > 0 {
		// Pages of the epochs before this one are read no more.
		s.deleteMembershipPages(ctx, next.Scope, pagePrefix(next.Epoch, ""), "")
	}
	if len(pages) == 0 {
		return decodeMembership(next.Scope, it)
	}
	out := next
	m, err := decodeMembership(next.Scope, it)
	if err != nil {
		return store.Membership{}, err
	}
	m.Partitions, m.Unproven, m.Parents, m.Incarnations = out.Partitions, out.Unproven, out.Parents, out.Incarnations
	return normalizeMembership(m), nil
}

// normalizeMembership returns m as a round trip through the store returns
// it (empty lists and maps nil, lineage sorted).
func normalizeMembership(m store.Membership) store.Membership {
	if len(m.Partitions) == 0 {
		m.Partitions = nil
	} else {
		m.Partitions = slices.Clone(m.Partitions)
	}
	if len(m.Unproven) == 0 {
		m.Unproven = nil
	} else {
		m.Unproven = slices.Clone(m.Unproven)
	}
	if len(m.Parents) == 0 {
		m.Parents = nil
	} else {
		ps := make(map[string][]string, len(m.Parents))
		for c, l := range m.Parents {
			if len(l) > 0 {
				l = slices.Clone(l)
				slices.Sort(l)
				ps[c] = l
			}
		}
		m.Parents = ps
	}
	if len(m.Incarnations) == 0 {
		m.Incarnations = nil
	}
	return m
}

// indexEntry is the partition-index item that lists k.Partition: the keys
// alone, pk <scope>##partitions#<NN> (NN = store.PartitionIndexKey), sk
// p#<name>.
func indexEntry(k store.Key) item {
	return item{attrPK: avS(indexPK(k.Scope, store.PartitionIndexKey(k.Partition))), attrSK: avS(skIndexEntry + k.Partition)}
}

// indexPK is the partition key of the scope's partition-index entries
// numbered n.
func indexPK(scope string, n int) string {
	return recordPK(scope, fmt.Sprintf("%s#%02d", recPartitions, n))
}

// indexPartition writes k.Partition's partition-index entry: one PutItem of
// the keys alone, unconditional (writing it again writes the same item).
// It records no progress.
func (s *DynamoStore) indexPartition(ctx context.Context, k store.Key) error {
	_, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: indexEntry(k)})
	if err != nil {
		return s.wrap("index partition", k, err)
	}
	return nil
}

// indexedPartitions reads the partition index of scope: one consistent
// Query of each of its store.PartitionIndexKeys keys and one of the key
// of earlier releases (64 string-set shards, and the single record before
// them: read, never written), store.ListReadsInFlight at a time.
func (s *DynamoStore) indexedPartitions(ctx context.Context, scope string) ([]string, error) {
	pks := make([]string, 0, store.PartitionIndexKeys+1)
	pks = append(pks, recordPK(scope, recPartitions))
	for n := range store.PartitionIndexKeys {
		pks = append(pks, indexPK(scope, n))
	}
	results, err := readInParallel(ctx, len(pks), func(ctx context.Context, i int) ([]item, error) {
		return s.queryPrefix(ctx, pks[i], "")
	})
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []string
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for _, it := range results[0] { // earlier releases: string sets
		ps, err := getStrings(it, attrParts)
		if err != nil {
			return nil, err
		}
		for _, p := range ps {
			add(p)
		}
	}
	for _, items := range results[1:] {
		for _, it := range items {
			sk, err := getS(it, attrSK)
			if err != nil {
				return nil, err
			}
			p, ok := strings.CutPrefix(sk, skIndexEntry)
			if !ok {
				return nil, fmt.Errorf("%w: %q is not a partition-index entry", errMalformed, sk)
			}
			add(p)
		}
	}
	slices.Sort(out)
	return out, nil
}

var _ store.MembershipEpochReader = (*DynamoStore)(nil)
