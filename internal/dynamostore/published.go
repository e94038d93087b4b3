package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/store"
)

// The published frontier in shards (store/published.go,
// docs/design.md#dynamodb-layout):
//
//	item              pk                  sk                                   attributes
//	frontier root     <scope>##frontier   record                               ep, ver, wmk/wm, held, why, ns, sv
//	frontier shard    <scope>##frontier   shard#<epoch, 20 digits>#<i, 6 digits>  ep, ver, vec
//
// ns is the number of shards of the epoch, sv the list of their versions
// as the root's writer knew them (a shard may be ahead of it). A root with
// vec instead of ns is a record of one item, written before shards; it is
// read whole, and the next publication writes shards. The shards of an
// epoch outlive it only until the root of the next is written: its
// publisher deletes them.

const (
	attrShardCount    = "ns" // N: shards of the epoch
	attrShardVersions = "sv" // L of N: each shard's version
	skShardPrefix     = "shard#"
	// maxShardWriteAttempts bounds the read-merge-write rounds of one
	// shard racing other publishers.
	maxShardWriteAttempts = 8
)

var _ store.ShardedFrontier = (*DynamoStore)(nil)

func frontierShardKey(scope string, epoch uint64, i int) item {
	return item{attrPK: avS(recordPK(scope, recFrontier)), attrSK: avS(fmt.Sprintf("%s%020d#%06d", skShardPrefix, epoch, i))}
}

func parseShardSK(sk string) (uint64, int, error) {
	rest, ok := strings.CutPrefix(sk, skShardPrefix)
	if !ok {
		return 0, 0, fmt.Errorf("%w: %q is not a shard key", errMalformed, sk)
	}
	e, i, ok := strings.Cut(rest, "#")
	if !ok {
		return 0, 0, fmt.Errorf("%w: %q is not a shard key", errMalformed, sk)
	}
	epoch, err := strconv.ParseUint(e, 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("%w: shard key %q: %v", errMalformed, sk, err)
	}
	idx, err := strconv.Atoi(i)
	if err != nil {
		return 0, 0, fmt.Errorf("%w: shard key %q: %v", errMalformed, sk, err)
	}
	return epoch, idx, nil
}

func avVector(v map[string]coord.Watermark) types.AttributeValue {
	vec := make(map[string]types.AttributeValue, len(v))
	for p, w := range v {
		e := item{attrEntryKind: avU(uint64(w.Kind))}
		if !w.IsZero() {
			e[attrEntryValue] = watermarkValue(w)
		}
		vec[p] = &types.AttributeValueMemberM{Value: e}
	}
	return &types.AttributeValueMemberM{Value: vec}
}

func getVector(it item) (map[string]coord.Watermark, error) {
	switch v := it[attrVector].(type) {
	case nil:
		return nil, nil
	case *types.AttributeValueMemberM:
		var out map[string]coord.Watermark
		if len(v.Value) > 0 {
			out = make(map[string]coord.Watermark, len(v.Value))
		}
		var errs []error
		for p, e := range v.Value {
			m, ok := e.(*types.AttributeValueMemberM)
			if !ok {
				errs = append(errs, fmt.Errorf("%w: vector entry %s is not a map", errMalformed, p))
				continue
			}
			w, err := getWatermark(m.Value, attrEntryKind, attrEntryValue)
			errs = append(errs, err)
			out[p] = w
		}
		return out, errors.Join(errs...)
	default:
		return nil, fmt.Errorf("%w: attribute %s is not a map", errMalformed, attrVector)
	}
}

func frontierShardItem(sh store.FrontierShard) item {
	it := frontierShardKey(sh.Scope, sh.Epoch, sh.Index)
	it[attrEpoch] = avU(sh.Epoch)
	it[attrVersion] = avU(sh.Version)
	if len(sh.Vector) > 0 {
		it[attrVector] = avVector(sh.Vector)
	}
	return it
}

func decodeFrontierShard(scope string, it item) (store.FrontierShard, error) {
	sk, err := getS(it, attrSK)
	if err != nil {
		return store.FrontierShard{}, err
	}
	epoch, i, err := parseShardSK(sk)
	if err != nil {
		return store.FrontierShard{}, err
	}
	sh := store.FrontierShard{Scope: scope, Epoch: epoch, Index: i}
	var errs []error
	sh.Version, _, err = getU(it, attrVersion)
	errs = append(errs, err)
	sh.Vector, err = getVector(it)
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return store.FrontierShard{}, fmt.Errorf("dynamostore: frontier shard %s of %s: %w", sk, scope, err)
	}
	return sh, nil
}

func frontierRootItem(f store.Frontier, shards []uint64) item {
	it := recordKey(f.Scope, recFrontier)
	it[attrEpoch] = avU(f.Epoch)
	if f.Version > 0 {
		it[attrVersion] = avU(f.Version)
	}
	putWatermark(it, attrWMKind, attrWM, f.Scalar)
	if len(f.HeldBy) > 0 {
		it[attrHeldBy] = avStrings(store.CapHeldBy(f.HeldBy))
	}
	if r := store.CleanReason(f.Reason); r != "" {
		it[attrReason] = avS(r)
	}
	it[attrShardCount] = avU(uint64(len(shards)))
	l := make([]types.AttributeValue, len(shards))
	for i, v := range shards {
		l[i] = avU(v)
	}
	it[attrShardVersions] = &types.AttributeValueMemberL{Value: l}
	return it
}

// decodeFrontierHead decodes a root record; a record of one item (vec, no
// ns) comes back whole with nil Shards.
func decodeFrontierHead(scope string, it item) (store.FrontierHead, error) {
	if _, sharded := it[attrShardCount]; !sharded {
		f, err := decodeFrontier(scope, it)
		return store.FrontierHead{Frontier: f}, err
	}
	var errs []error
	add := func(e error) { errs = append(errs, e) }
	f := decodeFrontierFields(scope, it, add)
	n, _, err := getU(it, attrShardCount)
	add(err)
	h := store.FrontierHead{Frontier: f, Shards: make([]uint64, n)}
	if l, ok := it[attrShardVersions].(*types.AttributeValueMemberL); ok {
		for i, v := range l.Value {
			if i >= len(h.Shards) {
				break
			}
			if nv, ok := v.(*types.AttributeValueMemberN); ok {
				h.Shards[i], err = strconv.ParseUint(nv.Value, 10, 64)
				add(err)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return store.FrontierHead{}, fmt.Errorf("dynamostore: frontier of %s: %w", scope, err)
	}
	return h, nil
}

// LoadFrontierHead implements store.ShardedFrontier with one consistent
// GetItem of the root.
func (s *DynamoStore) LoadFrontierHead(ctx context.Context, scope string) (store.FrontierHead, error) {
	if err := store.CheckName("scope", scope); err != nil {
		return store.FrontierHead{}, err
	}
	it, err := s.get(ctx, recordKey(scope, recFrontier))
	if err != nil {
		return store.FrontierHead{}, s.wrap("load frontier of", name(scope), err)
	}
	if it == nil {
		return store.FrontierHead{}, fmt.Errorf("%w: no published frontier for scope %s", store.ErrNotFound, scope)
	}
	return decodeFrontierHead(scope, it)
}

// LoadFrontierShards implements store.ShardedFrontier with consistent
// BatchGetItem requests (100 keys each).
func (s *DynamoStore) LoadFrontierShards(ctx context.Context, scope string, epoch uint64, shards []int) ([]store.FrontierShard, error) {
	if err := store.CheckName("scope", scope); err != nil {
		return nil, err
	}
	found := map[int]store.FrontierShard{}
	for chunk := range slices.Chunk(shards, 100) {
		keys := make([]item, len(chunk))
		for i, idx := range chunk {
			keys[i] = frontierShardKey(scope, epoch, idx)
		}
		items, err := s.batchGet(ctx, keys)
		if err != nil {
			return nil, s.wrap("load frontier shards of", name(scope), err)
		}
		for _, it := range items {
			sh, err := decodeFrontierShard(scope, it)
			if err != nil {
				return nil, err
			}
			found[sh.Index] = sh
		}
	}
	out := make([]store.FrontierShard, len(shards))
	for i, idx := range shards {
		sh, ok := found[idx]
		if !ok {
			sh = store.FrontierShard{Scope: scope, Epoch: epoch, Index: idx}
		}
		out[i] = sh
	}
	return out, nil
}

// LoadFrontier implements store.Store: the root (one consistent GetItem),
// then every shard of its epoch (consistent BatchGetItem); the root again
// when its shards were replaced in between (store.MaxShardRereads reads
// in all).
func (s *DynamoStore) LoadFrontier(ctx context.Context, scope string) (store.Frontier, error) {
	for attempt := 1; ; attempt++ {
		f, err := s.loadFrontierOnce(ctx, scope)
		if !errors.Is(err, store.ErrShardsReplaced) || attempt == store.MaxShardRereads {
			return f, err
		}
	}
}

// loadFrontierOnce is one LoadFrontier: store.ErrShardsReplaced when a
// newer epoch's root replaced the one read before its shards were read.
func (s *DynamoStore) loadFrontierOnce(ctx context.Context, scope string) (store.Frontier, error) {
	h, err := s.LoadFrontierHead(ctx, scope)
	if err != nil || h.Shards == nil {
		return h.Frontier, err
	}
	idx := make([]int, len(h.Shards))
	for i := range idx {
		idx[i] = i
	}
	shards, err := s.LoadFrontierShards(ctx, scope, h.Epoch, idx)
	if err != nil {
		return store.Frontier{}, err
	}
	if err := store.CheckShardsOfHead(h, shards); err != nil {
		return store.Frontier{}, err
	}
	f := h.Frontier
	for _, sh := range shards {
		if len(sh.Vector) > 0 && f.Vector == nil {
			f.Vector = make(map[string]coord.Watermark, len(sh.Vector)*len(shards))
		}
		maps.Copy(f.Vector, sh.Vector)
	}
	return f, nil
}

// PublishFrontier implements store.Store:
//
//  1. the regression check on (prev, next) (store.ValidatePublish);
//  2. one consistent read of the root: when it is no longer prev, a fence
//     before anything is written;
//  3. for each shard whose entries change (store.ChangedShards): a
//     consistent read, then one PutItem of the entry-wise maximum of the
//     stored shard and next's entries (store.MergeShard) with its version
//     + 1, conditional on the version read (attribute_not_exists(pk) for a
//     new shard); a lost condition reads and merges again;
//  4. one PutItem of the root, conditional on the stored root still being
//     prev (version, epoch and scalar; attribute_not_exists(pk) for the
//     zero prev);
//  5. when the root's epoch (or its number of shards) changed: the
//     deletion of the shards it no longer names (deleteFrontierShards).
//
// Shards written by a publisher that then loses step 4 hold durable
// watermarks only, never lower than before: readers may see them ahead of
// the root, which is harmless.
func (s *DynamoStore) PublishFrontier(ctx context.Context, prev, next store.Frontier) (store.Frontier, error) {
	if err := store.ValidatePublish(prev, next); err != nil {
		return store.Frontier{}, err
	}
	next.Version = prev.Version + 1
	next.HeldBy = store.CapHeldBy(next.HeldBy)
	var stored *store.FrontierHead
	it, err := s.get(ctx, recordKey(next.Scope, recFrontier))
	if err != nil {
		return store.Frontier{}, s.wrap("publish frontier of", name(next.Scope), err)
	}
	if it != nil {
		h, err := decodeFrontierHead(next.Scope, it)
		if err != nil {
			return store.Frontier{}, err
		}
		stored = &h
	}
	if !store.FrontierMatches(headFrontier(stored), prev) {
		return store.Frontier{}, store.FrontierFence(next.Scope, headFrontier(stored))
	}
	n := store.ShardCount(len(next.Vector))
	versions := make([]uint64, n)
	if stored != nil && stored.Epoch == next.Epoch && len(stored.Shards) == n {
		copy(versions, stored.Shards)
	}
	parts := store.SplitVector(next.Vector, n)
	out := map[string]coord.Watermark{}
	write := store.ChangedShards(prev, next, n)
	if stored == nil || stored.Shards == nil || stored.Epoch != next.Epoch || len(stored.Shards) != n {
		write = make([]int, n)
		for i := range write {
			write[i] = i
		}
	}
	for i := range n {
		if !slices.Contains(write, i) {
			maps.Copy(out, parts[i])
		}
	}
	for _, i := range write {
		merged, ver, err := s.writeFrontierShard(ctx, next.Scope, next.Epoch, i, parts[i])
		if err != nil {
			return store.Frontier{}, err
		}
		versions[i] = ver
		maps.Copy(out, merged)
	}
	root := frontierRootItem(next, versions)
	e := newExpr()
	var cond string
	if prev.IsZero() {
		cond = "attribute_not_exists(" + e.n(attrPK) + ")"
	} else {
		if prev.Version == 0 {
			cond = "attribute_not_exists(" + e.n(attrVersion) + ") AND "
		} else {
			cond = e.n(attrVersion) + " = " + e.v("pv", avU(prev.Version)) + " AND "
		}
		cond += e.n(attrEpoch) + " = " + e.v("pe", avU(prev.Epoch)) + " AND "
		if prev.Scalar.IsZero() {
			cond += "attribute_not_exists(" + e.n(attrWMKind) + ")"
		} else {
			cond += e.n(attrWMKind) + " = " + e.v("pk", avU(uint64(prev.Scalar.Kind))) + " AND " + e.n(attrWM) + " = " + e.v("pw", watermarkValue(prev.Scalar))
		}
	}
	_, err = s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                 aws.String(s.table),
		Item:                      root,
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  e.names,
		ExpressionAttributeValues: e.vals(),
	})
	s.noteItem(root)
	if isConditionFailed(err) {
		h, err := s.LoadFrontierHead(ctx, next.Scope)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return store.Frontier{}, store.FrontierFence(next.Scope, nil)
		case err != nil:
			return store.Frontier{}, &store.FenceError{Key: store.Key{Scope: next.Scope}, Op: "publish frontier", Reason: fmt.Sprintf("the published frontier changed (reading it failed: %v)", err)}
		}
		return store.Frontier{}, store.FrontierFence(next.Scope, &h.Frontier)
	}
	if err != nil {
		return store.Frontier{}, s.wrap("publish frontier of", name(next.Scope), err)
	}
	if stored != nil && stored.Shards != nil && (stored.Epoch != next.Epoch || len(stored.Shards) > n) {
		s.deleteFrontierShards(ctx, next.Scope, next.Epoch, n)
	}
	f, err := decodeFrontierHead(next.Scope, root)
	if err != nil {
		return store.Frontier{}, err
	}
	if len(out) > 0 {
		f.Vector = out
	}
	return f.Frontier, nil
}

// deleteFrontierShards deletes the frontier shards of scope that the root
// just written (epoch, n shards) no longer names: those of older epochs
// and those of its epoch at index n or above. One consistent Query of the
// shard keys, then one DeleteItem each. Best effort, like the deletion of
// membership pages: a shard is not progress, and a reader that read the
// older root and then finds its shards gone reads the root again
// (store.ErrShardsReplaced). A shard a losing publisher of an older epoch
// writes after this deletion stays until the next change of epoch, whose
// publisher deletes it with the rest.
func (s *DynamoStore) deleteFrontierShards(ctx context.Context, scope string, epoch uint64, n int) {
	e := newExpr()
	cond := e.n(attrPK) + " = " + e.v("pk", avS(recordPK(scope, recFrontier))) + " AND begins_with(" + e.n(attrSK) + ", " + e.v("pre", avS(skShardPrefix)) + ")"
	items, err := s.queryItems(ctx, e, cond, e.n(attrPK)+", "+e.n(attrSK))
	if err != nil {
		return
	}
	for _, it := range items {
		sk, err := getS(it, attrSK)
		if err != nil {
			continue
		}
		ep, i, err := parseShardSK(sk)
		if err != nil || ep > epoch || (ep == epoch && i < n) {
			continue
		}
		_, _ = s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
			TableName: aws.String(s.table),
			Key:       item{attrPK: it[attrPK], attrSK: it[attrSK]},
		})
	}
}

func headFrontier(h *store.FrontierHead) *store.Frontier {
	if h == nil {
		return nil
	}
	return &h.Frontier
}

// writeFrontierShard raises shard i of epoch to the entry-wise maximum of
// what it holds and entries: read, merge, PutItem conditional on the
// version read. It returns the shard's entries and version.
func (s *DynamoStore) writeFrontierShard(ctx context.Context, scope string, epoch uint64, i int, entries map[string]coord.Watermark) (map[string]coord.Watermark, uint64, error) {
	for range maxShardWriteAttempts {
		it, err := s.get(ctx, frontierShardKey(scope, epoch, i))
		if err != nil {
			return nil, 0, s.wrap("publish frontier shard of", name(scope), err)
		}
		var cur store.FrontierShard
		if it != nil {
			if cur, err = decodeFrontierShard(scope, it); err != nil {
				return nil, 0, err
			}
		}
		merged, changed, _ := store.MergeShard(cur.Vector, entries)
		if !changed && it != nil {
			return merged, cur.Version, nil
		}
		sh := store.FrontierShard{Scope: scope, Epoch: epoch, Index: i, Version: cur.Version + 1, Vector: merged}
		e := newExpr()
		var cond string
		if it != nil {
			cond = e.n(attrVersion) + " = " + e.v("v", avU(cur.Version))
		} else {
			cond = "attribute_not_exists(" + e.n(attrPK) + ")"
		}
		put := frontierShardItem(sh)
		_, err = s.client.PutItem(ctx, &dynamodb.PutItemInput{
			TableName:                 aws.String(s.table),
			Item:                      put,
			ConditionExpression:       aws.String(cond),
			ExpressionAttributeNames:  e.names,
			ExpressionAttributeValues: e.vals(),
		})
		s.noteItem(put)
		if isConditionFailed(err) {
			continue // another publisher wrote it: merge with theirs
		}
		if err != nil {
			return nil, 0, s.wrap("publish frontier shard of", name(scope), err)
		}
		return merged, sh.Version, nil
	}
	return nil, 0, &store.FenceError{Key: store.Key{Scope: scope}, Op: "publish frontier", Reason: fmt.Sprintf("shard %d of epoch %d kept changing under %d attempts", i, epoch, maxShardWriteAttempts)}
}
