// Package dynamostore is tidemark's DynamoDB adapter: DynamoStore, the
// store.Store over one DynamoDB table (compare-and-swap = ConditionExpression),
// and KV, the key-value items the tidemark_dynamodb Benthos cache (package
// cache) keeps in the same table. It imports no Benthos package.
//
// # Usage
//
//  1. Build the store: NewDynamoStore(ctx, DynamoConfig{Table: ..., Create: true}).
//     Credentials come from the SDK's default chain; Endpoint points at
//     DynamoDB Local or dynalite; Region defaults to the chain's.
//  2. Use it through store.Store. Branch on store.ErrFenced (a lost race or a
//     refused regression: *store.FenceError carries the winner, read back
//     with a consistent read), store.ErrNotFound and store.ErrInvalid.
//  3. Treat any other error from a write as "outcome unknown": the SDK
//     already retried throttling, 5xx and transport errors with bounded
//     back-off, so the request may have been applied with its response lost.
//     Resolve it by reading, never by writing again: store.ResolvePromotion
//     for a promotion, LoadCheckpoint / Witnesses / LoadMembership /
//     LoadFrontier for the rest.
//  4. The Benthos config fields of a table live in internal/storeconfig; the
//     cache component in package cache.
//
// # Key design
//
// docs/design.md#dynamodb-layout explains the same layout with the rest of
// the design.
//
// One table, string partition key pk and string sort key sk. Names are
// escaped ('%' -> "%25", '#' -> "%23") so '#' only ever separates key parts:
// ("a#b", "c") and ("a", "b#c") cannot collide, and a scope record's pk
// (two '#') can never equal a partition's pk (one '#'), whatever the
// partition is called.
//
//	item                 pk                       sk
//	checkpoint           <scope>#<partition>      checkpoint
//	response witness     <scope>#<partition>      witness#<generation, 20 digits>#<attempt id>
//	partition index      <scope>##partitions#<NN> p#<partition>  (NN: store.PartitionIndexKey, 16 keys)
//	  earlier releases   <scope>##partitions      shard#<NN>, record  (read, never written)
//	membership record    <scope>##membership      record      (root)
//	membership page      <scope>##membership      page#<epoch>#<digest>#<i>  (records over 64 KB)
//	published frontier   <scope>##frontier        record      (root)
//	frontier shard       <scope>##frontier        shard#<epoch>#<i>
//	cache entry          <cache key>              cache
//
// The witnesses of (partition, generation) are one consistent Query on
// begins_with(sk, "witness#<generation>#"); the fixed width keeps
// generation 1 from matching 10. ListCheckpoints reads the partition index
// (an item per name, written before its checkpoint, spread over 16
// partition keys; and the 64 string-set shards of earlier releases) with
// 17 consistent Queries and then the checkpoints with consistent
// BatchGetItem, so it never misses one and never scans witnesses. The
// paged membership and the frontier shards: membership_shards.go and
// published.go.
//
// # Attributes
//
//	item        attribute  type  meaning
//	checkpoint  cur        B     exact opaque cursor (<= 64 KiB, may be empty)
//	            gen        N     generation (1 at creation, +1 per promotion)
//	            wmk, wm    N, N|B  complete-through watermark: coord.Kind and value
//	                             (N for integer/timestamp, B for string so <= compares bytes)
//	            app, appk  N|B, N  durable applied boundary (absent: none) and its position kind (absent: integer)
//	            appid      B     id of the event at the applied boundary (absent: unknown)
//	            fin        S     finality basis of the watermark (provider.Contract.Basis; absent: unknown)
//	            ep         N     membership epoch of the last write
//	            wid        S     promoted witness (attempt id)
//	            park       S     parked reason (absent: not parked)
//	            done       BOOL  the partition is complete (sealed, or a finite traversal ended; absent: not)
//	            lo, lc     S, N  lease owner and counter (absent: no lease)
//	            cv         M     contract violations by kind -> N (absent: none recorded)
//	            inc, ince  S, N  source incarnation hash, epoch of the reset into it (absent: none, 0)
//	witness     in         B     input cursor
//	            succ       B     exact successor cursor
//	            mk         B     snapshot / coverage marker (absent: none)
//	            ev         B     compact event witness (reconcile.EncodeEvents: per event a
//	                             position (dense runs compacted), 8-byte id hash, 8-byte digest;
//	                             a digest shared by every event written once)
//	            nev        N     number of events (bounds receipts)
//	            ctk, ct    N, N|B  complete-through watermark the response certifies
//	            seal       BOOL  provider said the partition ends here (absent: false)
//	            disp       S     pending | promoted | abandoned
//	            ack        N     receipts: leading events with a durable outcome
//	index entry (none)           the keys alone: one write unit
//	index shard parts      SS    earlier releases: names of the scope's partitions in this shard
//	membership  ep, parts, unproven, cutk/cut, proven, why   epoch, ordered partition
//	                             list (L), partitions still lacking proof (L), cutover
//	                             watermark, proven flag, reason; incs (M: member -> N)
//	                             pending incarnation changes
//	frontier    ep, ver, wmk/wm, held, why, ns, sv   root: epoch, version, scalar (absent:
//	                             withheld), first 100 held-by, reason, shard count, shard versions
//	            ep, ver, vec     shard: epoch, version, vector (M: partition -> {k, v});
//	                             a root written before shards holds vec itself
//	cache       v          B     value; the expiry attribute (default expires_at) N, Unix seconds
//
// # Writes and their conditions
//
//	operation          request     condition
//	CreateCheckpoint   PutItem     index entry: none (the keys alone: writing it again writes the same item)
//	                   PutItem     attribute_not_exists(pk)
//	Promote            UpdateItem  cur = :c AND gen = :g AND attribute_not_exists(park)
//	                               [AND lo = :lo AND lc = :lc]
//	                               [AND (attribute_not_exists(wmk) OR (wmk = :k AND wm <= :w))]
//	                               [AND (attribute_not_exists(inc) OR inc = :inc)]
//	                               a Reset (new incarnation): AND ep < :ep instead of both
//	SetParked          UpdateItem  cur = :c AND gen = :g [AND lo = :lo AND lc = :lc]
//	ClaimLease         UpdateItem  attribute_exists(pk) AND lease = :expect   (lease.go)
//	ReleaseLease       UpdateItem  lo = :ho AND lc = :h
//	RenewHeartbeat     UpdateItem  attribute_not_exists(pk) | n = :n AND attribute_not_exists(tk)   (heartbeat.go)
//	TakeOverHeartbeat  UpdateItem  n = :seen AND attribute_not_exists(tk)
//	DeleteHeartbeat    DeleteItem  attribute_not_exists(pk) OR (n = :n AND tk as held)
//	PutWitness         PutItem     attribute_not_exists(pk)   (failed: same response = no-op)
//	PutWitnesses       PutItem     attribute_not_exists(pk) of the first witness's key (one item
//	                               for the group, witness_group.go; failed: same group = no-op)
//	RecordReceipt      UpdateItem  attribute_exists(pk) AND ack < :n AND nev >= :n
//	                               (a witness inside a group: its overlay item,
//	                               attribute_not_exists(pk) OR ack < :n)
//	SetDisposition     UpdateItem  disp = "pending"           (failed: same state = no-op;
//	                               a witness inside a group: its overlay item,
//	                               attribute_not_exists(pk) OR disp = "pending")
//	SwapMembership     PutItem     pages: none (keyed by epoch and digest), then
//	                               root: attribute_not_exists(pk) | ep = :prev
//	PublishFrontier    PutItem     each changed shard: attribute_not_exists(pk) | ver = :read
//	                               (entry-wise maximum with what is stored), then the root:
//	                               attribute_not_exists(pk) | ver = :v AND ep = :e AND (wmk, wm) = prev scalar
//	cache Set/Delete   PutItem/DeleteItem  none (cache entries, not progress)
//	cache Add          PutItem     attribute_not_exists(pk) OR expires_at <= :now
//
// A promotion is ONE UpdateItem with ReturnValues ALL_NEW: its success path
// costs one write and no read. After a failed condition the store reads the
// winner with one consistent GetItem (ReturnValuesOnConditionCheckFailure is
// not relied on: dynalite drops it). A promotion carrying a watermark
// refuses a lower one and one of another coordinate kind; without one it
// leaves the stored watermark untouched. A parked partition refuses
// promotions until SetParked clears the reason.
//
// # Item sizes and cost
//
// DynamoDB bills one write unit per started KB of item; the item limit is
// 400 KB. Measured with ItemSize (DynamoDB's sizing rule, the one dynalite
// applies) in TestWitnessItemSize:
//
//	item                                                        bytes   write units
//	checkpoint, 64-byte cursor, watermark, applied, witness id    153   1
//	witness of 100 events (dense positions), 64-byte input
//	  cursor and successor, 16-byte marker, 26-byte attempt id  1,962   2
//	compact events alone, 100 events                            1,703   -
//
// Each event costs 16 bytes plus its position delta (1 byte below 64, 2
// below 8,192, 3 below 1,048,576); a page of sparse or nanosecond positions
// costs up to 10 bytes more per event. A witness whose payload (cursors,
// marker, events) exceeds store.MaxRecordBytes (392 KiB) is refused with
// store.ErrInvalid, never cut: fetch smaller pages.
//
// Steady state per page: one PutItem (witness), one UpdateItem per
// acknowledged batch (receipt), one UpdateItem (promotion), and
// optionally one UpdateItem (disposition); no reads.
//
// # Errors and retries
//
// The SDK's standard retryer (retry.NewStandard: MaxAttempts =
// DynamoConfig.MaxRetries+1, MaxBackoff, exponential back-off with full
// jitter, no client-wide retry quota) retries throttling
// (ProvisionedThroughputExceededException, ThrottlingException,
// RequestLimitExceeded), 5xx and transport errors. It never retries
// ConditionalCheckFailedException. When it retries a promotion whose first
// attempt was applied, the retry's condition fails on the promotion's own
// write; Promote recognises it (store.PromotionApplied: same witness id,
// generation and cursor) and returns success.
package dynamostore
