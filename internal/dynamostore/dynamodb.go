package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/store"
)

// DynamoStore is the store.Store over one DynamoDB table (see the package
// documentation for keys, attributes and item sizes). It is safe for
// concurrent use.
//
// Every write of progress is one conditional request on one item. A failed
// condition (ConditionalCheckFailedException) is never retried: the store
// reads the winner with a consistent GetItem (DynamoDB's
// ReturnValuesOnConditionCheckFailure is not used, dynalite drops it) and
// returns *store.FenceError. Throttling, 5xx answers and transport errors
// are retried by the SDK with bounded exponential back-off and jitter
// (DynamoConfig.MaxRetries, MaxBackoff); when a write still fails, its
// error is returned and its outcome is unknown: the write may have been
// applied with its response lost. Callers resolve that by reading, never by
// writing again: store.ResolvePromotion for a promotion, a Load for the
// rest. (When the SDK's own retry of a promotion meets the promotion's
// applied first attempt, Promote recognises its witness id in the winner
// and returns success; see store.PromotionApplied.)
type DynamoStore struct {
	client *dynamodb.Client
	table  string
	ttl    time.Duration // witness expiry (DynamoConfig.WitnessTTL)
	now    func() time.Time
	// ttlEnabled is the outcome of enabling TTL at creation (nil: enabled
	// or not attempted).
	ttlEnabled error

	// prepare is what Prepare still has to do (OpenDynamoStore).
	prepMu   sync.Mutex
	prepared bool
	create   bool

	// largest is the size of the largest item this store put (itemsize.go).
	largest atomic.Int64
}

// TTLError is why enabling DynamoDB TTL on the table failed when the store
// created it with a WitnessTTL (nil when it did not fail): dynalite has no
// TTL, so its witnesses only leave by PruneWitnesses.
func (s *DynamoStore) TTLError() error { return s.ttlEnabled }

// ClearTTLError forgets TTLError once it was reported.
func (s *DynamoStore) ClearTTLError() { s.ttlEnabled = nil }

var _ store.Store = (*DynamoStore)(nil)

// NewDynamoStore builds the client cfg describes (NewDynamoClient) and, when
// cfg.Create is set, creates the table if needed (EnsureTable).
func NewDynamoStore(ctx context.Context, cfg DynamoConfig) (*DynamoStore, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	client, err := NewDynamoClient(ctx, cfg)
	if err != nil {
		return nil, err
	}
	s := NewDynamoStoreWithClient(client, cfg.Table)
	s.ttl = cfg.WitnessTTL
	if cfg.Create {
		if err := s.EnsureTable(ctx); err != nil {
			return nil, err
		}
		if s.ttl > 0 {
			s.ttlEnabled = EnableWitnessTTL(ctx, client, cfg.Table)
		}
	}
	return s, nil
}

// OpenDynamoStore builds the client cfg describes (NewDynamoClient) without
// any request: the table is checked or created (cfg.Create) by Prepare, which
// a component calls from its Connect, so a store that is down at start is
// retried with the component's back-off instead of failing the process.
func OpenDynamoStore(ctx context.Context, cfg DynamoConfig) (*DynamoStore, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	client, err := NewDynamoClient(ctx, cfg)
	if err != nil {
		return nil, err
	}
	s := NewDynamoStoreWithClient(client, cfg.Table)
	s.ttl = cfg.WitnessTTL
	s.create = cfg.Create
	return s, nil
}

// Prepare readies a store from OpenDynamoStore: with Create, it creates the
// table when it does not exist, waits until it is ACTIVE and enables TTL
// (TTLError); without, it checks nothing (the first call reports a missing
// table). It is safe to call again after a failure (each call is bounded by
// the call timeout) and does nothing once it succeeded.
func (s *DynamoStore) Prepare(ctx context.Context) error {
	s.prepMu.Lock()
	defer s.prepMu.Unlock()
	if s.prepared || !s.create {
		return nil
	}
	if err := s.EnsureTable(ctx); err != nil {
		return err
	}
	if s.ttl > 0 {
		s.ttlEnabled = EnableWitnessTTL(ctx, s.client, s.table)
	}
	s.prepared = true
	return nil
}

// NewDynamoStoreWithClient returns a store over an existing client and
// table (the client's retry policy is the caller's).
func NewDynamoStoreWithClient(client *dynamodb.Client, table string) *DynamoStore {
	return &DynamoStore{client: client, table: table, now: time.Now}
}

// Client returns the underlying DynamoDB client.
func (s *DynamoStore) Client() *dynamodb.Client { return s.client }

// Table returns the table name.
func (s *DynamoStore) Table() string { return s.table }

// EnsureTable creates the table (on-demand billing) when it does not exist
// and waits until it is ACTIVE.
func (s *DynamoStore) EnsureTable(ctx context.Context) error {
	return EnsureTable(ctx, s.client, s.table)
}

// expr collects the placeholders of one request's expressions; every
// attribute name goes through ExpressionAttributeNames (DynamoDB reserves
// hundreds of words).
type expr struct {
	names  map[string]string
	values map[string]types.AttributeValue
}

func newExpr() *expr {
	return &expr{names: map[string]string{}, values: map[string]types.AttributeValue{}}
}

func (e *expr) n(attr string) string {
	e.names["#"+attr] = attr
	return "#" + attr
}

func (e *expr) v(name string, v types.AttributeValue) string {
	e.values[":"+name] = v
	return ":" + name
}

func (e *expr) vals() map[string]types.AttributeValue {
	if len(e.values) == 0 {
		return nil
	}
	return e.values
}

func isConditionFailed(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	return errors.As(err, &ccf)
}

func (s *DynamoStore) wrap(op string, what fmt.Stringer, err error) error {
	var nf *types.ResourceNotFoundException
	if errors.As(err, &nf) {
		return fmt.Errorf("dynamostore: %s %s: table %s does not exist (create it, or set create: true): %w", op, what, s.table, err)
	}
	if isRead(op) {
		return fmt.Errorf("dynamostore: %s %s failed (a read: nothing was written): %w", op, what, err)
	}
	return fmt.Errorf("dynamostore: %s %s (outcome unknown for a write: resolve by reading): %w", op, what, err)
}

// isRead reports whether the operation named op (as wrap's callers name
// them) only reads: its failure leaves nothing to resolve.
func isRead(op string) bool {
	for _, p := range []string{"load ", "list ", "read ", "scan "} {
		if strings.HasPrefix(op, p) {
			return true
		}
	}
	return false
}

type name string

func (n name) String() string { return string(n) }

func (s *DynamoStore) get(ctx context.Context, key item) (item, error) {
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            key,
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, err
	}
	return out.Item, nil
}

// loadCheckpoint reads a checkpoint consistently; nil when none is stored.
func (s *DynamoStore) loadCheckpoint(ctx context.Context, k store.Key) (*store.Checkpoint, error) {
	it, err := s.get(ctx, checkpointKey(k))
	if err != nil {
		return nil, s.wrap("load checkpoint", k, err)
	}
	if it == nil {
		return nil, nil
	}
	c, err := decodeCheckpoint(k, it)
	if err != nil {
		return nil, err
	}
	return &c, nil
}

// winner reads the state after a failed condition. A read failure is
// reported in the returned reason suffix; the fence still stands.
func (s *DynamoStore) winner(ctx context.Context, k store.Key) (*store.Checkpoint, string) {
	w, err := s.loadCheckpoint(ctx, k)
	if err != nil {
		return nil, fmt.Sprintf(" (reading the winner failed: %v)", err)
	}
	return w, ""
}

// LoadCheckpoint implements store.Store with a consistent GetItem.
func (s *DynamoStore) LoadCheckpoint(ctx context.Context, k store.Key) (store.Checkpoint, error) {
	if err := k.Validate(); err != nil {
		return store.Checkpoint{}, err
	}
	c, err := s.loadCheckpoint(ctx, k)
	if err != nil {
		return store.Checkpoint{}, err
	}
	if c == nil {
		return store.Checkpoint{}, fmt.Errorf("%w: no checkpoint for %s", store.ErrNotFound, k)
	}
	return *c, nil
}

// CreateCheckpoint implements store.Store: the partition's entry is first
// put in the scope's partition index (the keys alone, idempotent; a
// failure fails the creation, so ListCheckpoints never misses a
// checkpoint), then the checkpoint is put with attribute_not_exists(pk).
func (s *DynamoStore) CreateCheckpoint(ctx context.Context, c store.Checkpoint) (store.Checkpoint, error) {
	if err := c.Validate(); err != nil {
		return store.Checkpoint{}, err
	}
	if c.Generation != 1 {
		return store.Checkpoint{}, fmt.Errorf("%w: a first checkpoint has generation 1, not %d", store.ErrInvalid, c.Generation)
	}
	if err := s.indexPartition(ctx, c.Key); err != nil {
		return store.Checkpoint{}, err
	}
	it := checkpointItem(c)
	e := newExpr()
	_, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                aws.String(s.table),
		Item:                     it,
		ConditionExpression:      aws.String("attribute_not_exists(" + e.n(attrPK) + ")"),
		ExpressionAttributeNames: e.names,
	})
	if isConditionFailed(err) {
		w, readErr := s.winner(ctx, c.Key)
		return store.Checkpoint{}, &store.FenceError{Key: c.Key, Op: "create checkpoint", Reason: "a checkpoint already exists" + readErr, Winner: w}
	}
	if err != nil {
		return store.Checkpoint{}, s.wrap("create checkpoint", c.Key, err)
	}
	return decodeCheckpoint(c.Key, it)
}

// Promote implements store.Store with ONE UpdateItem on the checkpoint item:
//
//	SET cur = :to, gen = :g + pages, ep = :ep, wid = :wid [, wmk = :k, wm = :w, fin = :f] [, app = :a, appid = :id] [, done = true]
//	[REMOVE done] [REMOVE appid] [REMOVE fin]
//	IF  cur = :c AND gen = :g AND attribute_not_exists(park)
//	    [AND lo = :lo AND lc = :lc]
//	    [AND (attribute_not_exists(wmk) OR (wmk = :k AND wm <= :w))]
//	    [AND (attribute_not_exists(inc) OR inc = :inc)]
//
// A Reset (a new source incarnation) instead SETs inc = :inc, ince = :ep
// and REMOVEs wmk, wm, app, appk, appid and done, conditional on
// ep < :ep besides the cursor, generation, park and lease.
//
// with ReturnValues ALL_NEW. The success path costs one write and no read.
func (s *DynamoStore) Promote(ctx context.Context, p store.Promotion) (store.Checkpoint, error) {
	p.Lease = p.Lease.Fence()
	if err := p.Validate(); err != nil {
		return store.Checkpoint{}, err
	}
	e := newExpr()
	cond := append(e.fence(p.FromCursor, p.FromGeneration, p.Lease), "attribute_not_exists("+e.n(attrParked)+")")
	set := []string{
		e.n(attrCursor) + " = " + e.v("to", avB(p.To)),
		e.n(attrGeneration) + " = " + e.v("next", avU(p.ToGeneration())),
		e.n(attrEpoch) + " = " + e.v("ep", avU(p.Epoch)),
	}
	var remove []string
	if p.WitnessID != "" {
		set = append(set, e.n(attrWitnessID)+" = "+e.v("wid", avS(p.WitnessID)))
	} else {
		remove = append(remove, e.n(attrWitnessID))
	}
	if p.Incarnation != "" {
		inc := e.v("inc", avS(p.Incarnation))
		set = append(set, e.n(attrIncarnation)+" = "+inc)
		if p.Reset {
			cond = append(cond, e.n(attrEpoch)+" < :ep")
			set = append(set, e.n(attrIncEpoch)+" = :ep")
			remove = append(remove, e.n(attrWMKind), e.n(attrWM), e.n(attrApplied), e.n(attrAppliedKind), e.n(attrAppliedID),
				e.n(attrRereadFrom), e.n(attrRereadFromKind), e.n(attrRereadMark), e.n(attrRereadMarkKind))
		} else {
			cond = append(cond, fmt.Sprintf("(attribute_not_exists(%s) OR %s = %s)", e.n(attrIncarnation), e.n(attrIncarnation), inc))
		}
	}
	if !p.Watermark.IsZero() {
		k, w := e.v("wmk", avU(uint64(p.Watermark.Kind))), e.v("wm", watermarkValue(p.Watermark))
		cond = append(cond, fmt.Sprintf("(attribute_not_exists(%s) OR (%s = %s AND %s <= %s))", e.n(attrWMKind), e.n(attrWMKind), k, e.n(attrWM), w))
		set = append(set, e.n(attrWMKind)+" = "+k, e.n(attrWM)+" = "+w)
		if !p.Finality.IsZero() {
			set = append(set, e.n(attrFinality)+" = "+e.v("fin", avS(p.Finality.String())))
		} else {
			remove = append(remove, e.n(attrFinality))
		}
	}
	if p.HasApplied {
		set = append(set, e.n(attrApplied)+" = "+e.v("app", watermarkValue(p.Applied.AsWatermark())))
		if p.Applied.Kind != coord.KindInteger {
			set = append(set, e.n(attrAppliedKind)+" = "+e.v("appk", avU(uint64(p.Applied.Kind))))
		} else {
			remove = append(remove, e.n(attrAppliedKind))
		}
		if p.AppliedID != "" {
			set = append(set, e.n(attrAppliedID)+" = "+e.v("appid", avB([]byte(p.AppliedID))))
		} else {
			remove = append(remove, e.n(attrAppliedID))
		}
	}
	if r := p.Reread; r != nil && !p.Reset {
		set, remove = rereadUpdate(e, set, remove, attrRereadFromKind, attrRereadFrom, "rrf", r.From, r.HasFrom)
		set, remove = rereadUpdate(e, set, remove, attrRereadMarkKind, attrRereadMark, "rrm", r.Mark, r.Started())
	}
	if p.Complete {
		set = append(set, e.n(attrComplete)+" = "+e.v("done", avBool(true)))
	} else {
		remove = append(remove, e.n(attrComplete))
	}
	remove = append(remove, e.n(attrFailing)) // progress ends the failures noted
	if p.Violations != nil {
		set = append(set, e.n(attrViolations)+" = "+e.v("cv", avCounts(p.Violations)))
	}
	if p.Repairs != nil {
		if rep, err := store.EncodeRepairs(p.Repairs); err != nil {
			return store.Checkpoint{}, fmt.Errorf("%w: repair log: %v", store.ErrInvalid, err)
		} else if rep != "" {
			set = append(set, e.n(attrRepairs)+" = "+e.v("rep", avS(rep)))
		} else {
			remove = append(remove, e.n(attrRepairs))
		}
	}
	update := "SET " + strings.Join(set, ", ")
	if len(remove) > 0 {
		update += " REMOVE " + strings.Join(remove, ", ")
	}
	out, err := s.updateCheckpoint(ctx, p.Key, e, update, cond)
	if isConditionFailed(err) {
		w, readErr := s.winner(ctx, p.Key)
		if w != nil && store.PromotionApplied(p, *w) {
			return *w, nil
		}
		reason := store.PromotionConflict(p, w)
		if reason == "" {
			reason = "the stored checkpoint changed while the condition was evaluated"
		}
		return store.Checkpoint{}, &store.FenceError{Key: p.Key, Op: "promote", Reason: reason + readErr, WantGeneration: p.FromGeneration, Winner: w}
	}
	if err != nil {
		return store.Checkpoint{}, s.wrap("promote", p.Key, err)
	}
	return decodeCheckpoint(p.Key, out.Attributes)
}

// SetParked implements store.Store with one conditional UpdateItem:
//
//	SET parked = :r (or REMOVE parked)  IF cur = :c AND gen = :g [AND lo = :lo AND lc = :lc]
func (s *DynamoStore) SetParked(ctx context.Context, k store.Key, cursor []byte, generation uint64, lease store.Lease, reason string) (store.Checkpoint, error) {
	return s.setFencedText(ctx, "set parked", attrParked, k, cursor, generation, lease, reason)
}

// NoteFailure implements store.Store with one conditional UpdateItem:
//
//	SET fail = :r (or REMOVE fail)  IF cur = :c AND gen = :g [AND lo = :lo AND lc = :lc]
func (s *DynamoStore) NoteFailure(ctx context.Context, k store.Key, cursor []byte, generation uint64, lease store.Lease, note string) (store.Checkpoint, error) {
	return s.setFencedText(ctx, "note failure", attrFailing, k, cursor, generation, lease, note)
}

// setFencedText sets the checkpoint's text attribute attr (a park reason,
// a failure note) to text, or removes it when text is empty after
// store.CleanReason, conditional on the checkpoint's cursor, generation
// and lease like a park: never progress, fenced by it. op names the call
// in errors.
func (s *DynamoStore) setFencedText(ctx context.Context, op, attr string, k store.Key, cursor []byte, generation uint64, lease store.Lease, text string) (store.Checkpoint, error) {
	lease = lease.Fence()
	if err := store.ValidatePark(k, cursor, lease); err != nil {
		return store.Checkpoint{}, err
	}
	e := newExpr()
	cond := e.fence(cursor, generation, lease)
	update := "REMOVE " + e.n(attr)
	if r := store.CleanReason(text); r != "" {
		update = "SET " + e.n(attr) + " = " + e.v("r", avS(r))
	}
	out, err := s.updateCheckpoint(ctx, k, e, update, cond)
	if isConditionFailed(err) {
		w, readErr := s.winner(ctx, k)
		reason := store.ParkConflict(cursor, generation, lease, w)
		if reason == "" {
			reason = "the stored checkpoint changed while the condition was evaluated"
		}
		return store.Checkpoint{}, &store.FenceError{Key: k, Op: op, Reason: reason + readErr, WantGeneration: generation, Winner: w}
	}
	if err != nil {
		return store.Checkpoint{}, s.wrap(op, k, err)
	}
	return decodeCheckpoint(k, out.Attributes)
}

// Unpark implements store.Store with one conditional UpdateItem:
//
//	REMOVE park SET rep = :rep
//	IF cur = :c AND gen = :g AND attribute_exists(park) [AND lo = :lo AND lc = :lc]
func (s *DynamoStore) Unpark(ctx context.Context, k store.Key, cursor []byte, generation uint64, lease store.Lease, repairs []store.RepairEntry) (store.Checkpoint, error) {
	lease = lease.Fence()
	if err := store.ValidateUnpark(k, cursor, lease, repairs); err != nil {
		return store.Checkpoint{}, err
	}
	rep, err := store.EncodeRepairs(repairs)
	if err != nil {
		return store.Checkpoint{}, fmt.Errorf("%w: repair log: %v", store.ErrInvalid, err)
	}
	e := newExpr()
	cond := append(e.fence(cursor, generation, lease), "attribute_exists("+e.n(attrParked)+")")
	update := "REMOVE " + e.n(attrParked)
	if rep != "" {
		update = "SET " + e.n(attrRepairs) + " = " + e.v("rep", avS(rep)) + " " + update
	} else {
		update += ", " + e.n(attrRepairs)
	}
	out, err := s.updateCheckpoint(ctx, k, e, update, cond)
	if isConditionFailed(err) {
		w, readErr := s.winner(ctx, k)
		if w != nil && store.UnparkApplied(cursor, generation, repairs, *w) {
			return *w, nil
		}
		reason := store.ParkConflict(cursor, generation, lease, w)
		if reason == "" && w != nil && w.Parked == "" {
			reason = "the partition is not parked"
		}
		if reason == "" {
			reason = "the stored checkpoint changed while the condition was evaluated"
		}
		return store.Checkpoint{}, &store.FenceError{Key: k, Op: "unpark", Reason: reason + readErr, WantGeneration: generation, Winner: w}
	}
	if err != nil {
		return store.Checkpoint{}, s.wrap("unpark", k, err)
	}
	return decodeCheckpoint(k, out.Attributes)
}

// ListCheckpoints implements store.Store: consistent Queries of the
// scope's partition index (its store.PartitionIndexKeys keys and the key
// of earlier releases), then consistent BatchGetItem requests of up to
// 100 checkpoints, at most store.ListReadsInFlight at a time. Checkpoints
// come in partition order.
func (s *DynamoStore) ListCheckpoints(ctx context.Context, scope string) ([]store.Checkpoint, error) {
	if err := store.CheckName("scope", scope); err != nil {
		return nil, err
	}
	parts, err := s.indexedPartitions(ctx, scope)
	if err != nil {
		return nil, s.wrap("list checkpoints of", name(scope), err)
	}
	chunks := slices.Collect(slices.Chunk(parts, 100))
	results, err := readInParallel(ctx, len(chunks), func(ctx context.Context, i int) ([]store.Checkpoint, error) {
		return s.readCheckpoints(ctx, scope, chunks[i])
	})
	if err != nil {
		return nil, s.wrap("list checkpoints of", name(scope), err)
	}
	var out []store.Checkpoint
	for _, r := range results {
		out = append(out, r...)
	}
	slices.SortFunc(out, func(a, b store.Checkpoint) int { return strings.Compare(a.Partition, b.Partition) })
	return out, nil
}

// readCheckpoints reads the checkpoints of parts (at most 100) in one
// consistent BatchGetItem (and its retries of unprocessed keys).
func (s *DynamoStore) readCheckpoints(ctx context.Context, scope string, parts []string) ([]store.Checkpoint, error) {
	keys := make([]item, len(parts))
	for i, p := range parts {
		keys[i] = checkpointKey(store.Key{Scope: scope, Partition: p})
	}
	items, err := s.batchGet(ctx, keys)
	if err != nil {
		return nil, err
	}
	out := make([]store.Checkpoint, 0, len(items))
	for _, it := range items {
		pk, err := getS(it, attrPK)
		if err != nil {
			return nil, err
		}
		k, err := parseCheckpointPK(pk)
		if err != nil {
			return nil, err
		}
		c, err := decodeCheckpoint(k, it)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// batchGet reads keys consistently, retrying unprocessed keys with bounded
// back-off.
func (s *DynamoStore) batchGet(ctx context.Context, keys []item) ([]item, error) {
	var out []item
	delay := 20 * time.Millisecond
	for attempt := 0; len(keys) > 0; attempt++ {
		if attempt > 0 {
			if attempt > 10 {
				return nil, fmt.Errorf("dynamostore: %d keys still unprocessed after %d batch reads", len(keys), attempt)
			}
			t := time.NewTimer(delay)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			case <-t.C:
			}
			delay = min(2*delay, time.Second)
		}
		res, err := s.client.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{
			RequestItems: map[string]types.KeysAndAttributes{
				s.table: {Keys: keys, ConsistentRead: aws.Bool(true)},
			},
		})
		if err != nil {
			return nil, err
		}
		out = append(out, res.Responses[s.table]...)
		keys = res.UnprocessedKeys[s.table].Keys
	}
	return out, nil
}

// PutWitness implements store.Store with one PutItem conditional on
// attribute_not_exists(pk). A failed condition is an idempotent no-op once a
// consistent read shows the same response under that attempt id
// (store.SameWitness); another response under the same id is fenced.
func (s *DynamoStore) PutWitness(ctx context.Context, w reconcile.Witness) error {
	if err := store.ValidateWitness(w); err != nil {
		return err
	}
	k := store.Key{Scope: w.Scope, Partition: w.Partition}
	it := witnessItem(w)
	if s.ttl > 0 {
		it[attrExpires] = avU(uint64(s.now().Add(s.ttl).Unix()))
	}
	if n := ItemSize(it); n > maxItemBytes {
		return fmt.Errorf("%w: witness %s is a %d-byte item, over DynamoDB's %d-byte limit; it is refused, never cut", store.ErrInvalid, w.AttemptID, n, maxItemBytes)
	}
	e := newExpr()
	_, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                aws.String(s.table),
		Item:                     it,
		ConditionExpression:      aws.String("attribute_not_exists(" + e.n(attrPK) + ")"),
		ExpressionAttributeNames: e.names,
	})
	if err == nil {
		return nil
	}
	if !isConditionFailed(err) {
		return s.wrap("put witness", k, err)
	}
	old, err := s.get(ctx, witnessKey(k, w.Generation, w.AttemptID))
	if err != nil {
		return s.wrap("put witness: reading the stored witness of", k, err)
	}
	if old != nil {
		stored, err := decodeWitness(old)
		if err != nil {
			return err
		}
		if store.SameWitness(stored, w) {
			return nil
		}
	}
	return &store.FenceError{Key: k, Op: "put witness", Reason: fmt.Sprintf("attempt %q at generation %d is already stored with different content", w.AttemptID, w.Generation), WantGeneration: w.Generation}
}

// Witnesses implements store.Store with one consistent Query of the sort
// keys witness#<generation-(store.MaxWitnessGroup-1)># through
// witness#<generation>#~ (paginated): the witnesses of generation, alone
// or in a group that began at most store.MaxWitnessGroup-1 generations
// before it (witness_group.go).
func (s *DynamoStore) Witnesses(ctx context.Context, k store.Key, generation uint64) ([]reconcile.Witness, error) {
	if err := k.Validate(); err != nil {
		return nil, err
	}
	e := newExpr()
	cond := fmt.Sprintf("%s = %s AND %s BETWEEN %s AND %s", e.n(attrPK), e.v("pk", avS(checkpointPK(k))), e.n(attrSK),
		e.v("lo", avS(witnessPrefix(groupFloor(generation)))), e.v("hi", avS(witnessPrefix(generation)+"~")))
	out, err := s.queryWitnesses(ctx, k, e, cond, func(g uint64) bool { return g == generation })
	if err != nil {
		return nil, err
	}
	sortWitnesses(out)
	return out, nil
}

// queryWitnesses runs one consistent Query of witness items of k under
// cond (a key condition built with e), across every result page, and
// returns the witnesses whose generation keep accepts.
func (s *DynamoStore) queryWitnesses(ctx context.Context, k store.Key, e *expr, cond string, keep func(uint64) bool) ([]reconcile.Witness, error) {
	items, err := s.queryItems(ctx, e, cond, "")
	if err != nil {
		return nil, s.wrap("read witnesses of", k, err)
	}
	return decodeWitnessItems(items, keep)
}

// queryItems runs one consistent Query under the key condition cond (built
// with e) across every result page (each at most 1 MB), keeping only the
// attributes of projection ("" every attribute). Each page is one call
// under the client's per-call deadline; the loop ends with the results.
func (s *DynamoStore) queryItems(ctx context.Context, e *expr, cond, projection string) ([]item, error) {
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(s.table),
		KeyConditionExpression:    aws.String(cond),
		ExpressionAttributeNames:  e.names,
		ExpressionAttributeValues: e.vals(),
		ConsistentRead:            aws.Bool(true),
	}
	if projection != "" {
		in.ProjectionExpression = aws.String(projection)
	}
	var out []item
	for pages := dynamodb.NewQueryPaginator(s.client, in); pages.HasMorePages(); {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		out = append(out, page.Items...)
	}
	return out, nil
}

// decodeItems decodes every item with decode, stopping at the first error.
func decodeItems[T any](items []item, decode func(item) (T, error)) ([]T, error) {
	out := make([]T, 0, len(items))
	for _, it := range items {
		v, err := decode(it)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// RecordReceipt implements store.Store with one UpdateItem conditional on
// ack < :n AND nev >= :n. A failed condition costs one consistent read to
// tell an idempotent no-op from a missing witness or an out-of-range count.
func (s *DynamoStore) RecordReceipt(ctx context.Context, k store.Key, generation uint64, attempt string, ackedThrough int) error {
	if err := store.ValidateAttempt(k, attempt); err != nil {
		return err
	}
	if ackedThrough < 0 {
		return fmt.Errorf("%w: acked through %d", store.ErrInvalid, ackedThrough)
	}
	e := newExpr()
	n := e.v("n", avU(uint64(ackedThrough)))
	key := witnessKey(k, generation, attempt)
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       key,
		UpdateExpression:          aws.String("SET " + e.n(attrAcked) + " = " + n),
		ConditionExpression:       aws.String(fmt.Sprintf("attribute_exists(%s) AND %s < %s AND %s >= %s", e.n(attrPK), e.n(attrAcked), n, e.n(attrNEvents), n)),
		ExpressionAttributeNames:  e.names,
		ExpressionAttributeValues: e.vals(),
	})
	if err == nil {
		return nil
	}
	if !isConditionFailed(err) {
		return s.wrap("record receipt of", k, err)
	}
	it, err := s.get(ctx, key)
	if err != nil {
		return s.wrap("record receipt: reading the witness of", k, err)
	}
	if it == nil {
		// A witness written inside a group has no item of its own until
		// its receipts or disposition change (witness_group.go).
		w, ok, err := s.follower(ctx, k, generation, attempt)
		if err != nil {
			return s.wrap("record receipt: reading the witness group of", k, err)
		}
		if !ok {
			return fmt.Errorf("%w: no witness %s at generation %d of %s", store.ErrNotFound, attempt, generation, k)
		}
		return s.recordFollowerReceipt(ctx, k, w, ackedThrough)
	}
	events, _, err := getU(it, attrNEvents)
	if err != nil {
		return err
	}
	if uint64(ackedThrough) > events {
		return fmt.Errorf("%w: acked through %d of a witness of %d events", store.ErrInvalid, ackedThrough, events)
	}
	return nil
}

// SetDisposition implements store.Store with one UpdateItem conditional on
// disp = "pending". Setting the state a witness already has is an
// idempotent no-op.
func (s *DynamoStore) SetDisposition(ctx context.Context, k store.Key, generation uint64, attempt string, d reconcile.Disposition) error {
	if err := store.ValidateDisposition(k, attempt, d); err != nil {
		return err
	}
	e := newExpr()
	key := witnessKey(k, generation, attempt)
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       key,
		UpdateExpression:          aws.String("SET " + e.n(attrDisp) + " = " + e.v("d", avS(dispositionNames[d]))),
		ConditionExpression:       aws.String(e.n(attrDisp) + " = " + e.v("pending", avS(dispositionNames[reconcile.Pending]))),
		ExpressionAttributeNames:  e.names,
		ExpressionAttributeValues: e.vals(),
	})
	if err == nil {
		return nil
	}
	if !isConditionFailed(err) {
		return s.wrap("set disposition of", k, err)
	}
	it, err := s.get(ctx, key)
	if err != nil {
		return s.wrap("set disposition: reading the witness of", k, err)
	}
	if it == nil {
		w, ok, err := s.follower(ctx, k, generation, attempt)
		if err != nil {
			return s.wrap("set disposition: reading the witness group of", k, err)
		}
		if !ok {
			return fmt.Errorf("%w: no witness %s at generation %d of %s", store.ErrNotFound, attempt, generation, k)
		}
		return s.setFollowerDisposition(ctx, k, w, d)
	}
	ds, err := getS(it, attrDisp)
	if err != nil {
		return err
	}
	stored, err := parseDisposition(ds)
	if err != nil {
		return err
	}
	if stored == d {
		return nil
	}
	return store.DispositionFence(k, generation, attempt, stored, d)
}

// RequestDiscovery implements store.Store with one UpdateItem that adds 1
// to the scope's discovery record (a request counter, not progress).
func (s *DynamoStore) RequestDiscovery(ctx context.Context, scope string) (uint64, error) {
	if err := store.CheckName("scope", scope); err != nil {
		return 0, err
	}
	out, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       recordKey(scope, recDiscovery),
		UpdateExpression:          aws.String("ADD #n :one"),
		ExpressionAttributeNames:  map[string]string{"#n": attrCount},
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": avU(1)},
		ReturnValues:              types.ReturnValueAllNew,
	})
	if err != nil {
		return 0, s.wrap("request discovery of", name(scope), err)
	}
	n, _, err := getU(out.Attributes, attrCount)
	return n, err
}

// DiscoveryRequests implements store.Store with a consistent GetItem.
func (s *DynamoStore) DiscoveryRequests(ctx context.Context, scope string) (uint64, error) {
	if err := store.CheckName("scope", scope); err != nil {
		return 0, err
	}
	it, err := s.get(ctx, recordKey(scope, recDiscovery))
	if err != nil {
		return 0, s.wrap("read discovery requests of", name(scope), err)
	}
	n, _, err := getU(it, attrCount)
	return n, err
}

// fence is the condition every write of a partition's progress carries:
// the stored cursor and generation are the ones the writer read, and,
// under leases, the lease is still the writer's (owner and counter).
func (e *expr) fence(cursor []byte, generation uint64, lease store.Lease) []string {
	cond := []string{
		e.n(attrCursor) + " = " + e.v("c", avB(cursor)),
		e.n(attrGeneration) + " = " + e.v("g", avU(generation)),
	}
	if !lease.IsZero() {
		cond = append(cond,
			e.n(attrLeaseOwner)+" = "+e.v("lo", avS(lease.Owner)),
			e.n(attrLeaseCounter)+" = "+e.v("lc", avU(lease.Counter)))
	}
	return cond
}

// updateCheckpoint is the one conditional UpdateItem of k's checkpoint
// item (update under all of cond), returning the item as written.
func (s *DynamoStore) updateCheckpoint(ctx context.Context, k store.Key, e *expr, update string, cond []string) (*dynamodb.UpdateItemOutput, error) {
	return s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       checkpointKey(k),
		UpdateExpression:          aws.String(update),
		ConditionExpression:       aws.String(strings.Join(cond, " AND ")),
		ExpressionAttributeNames:  e.names,
		ExpressionAttributeValues: e.vals(),
		ReturnValues:              types.ReturnValueAllNew,
	})
}

// rereadUpdate adds the SET (has) or REMOVE (not has) of one position of
// the re-read state to a promotion's update.
func rereadUpdate(e *expr, set, remove []string, kindAttr, valueAttr, name string, p coord.Position, has bool) ([]string, []string) {
	if !has {
		return set, append(remove, e.n(valueAttr), e.n(kindAttr))
	}
	set = append(set, e.n(valueAttr)+" = "+e.v(name, watermarkValue(p.AsWatermark())))
	if p.Kind != coord.KindInteger {
		set = append(set, e.n(kindAttr)+" = "+e.v(name+"k", avU(uint64(p.Kind))))
	} else {
		remove = append(remove, e.n(kindAttr))
	}
	return set, remove
}
