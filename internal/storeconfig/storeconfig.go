// Package storeconfig holds the Benthos config fields of tidemark's stores:
// the DynamoDB table fields (DynamoFields) shared by the checkpoint store and
// the tidemark_dynamodb cache, and the `checkpoint` object (CheckpointFields,
// StoreFromParsed) shared by the paginated_partitions input, the
// partition_frontier processor and the frontier_advances input.
//
// Invariant: every component of one process that names `backend: memory`
// gets the same in-memory store (SharedMemStore), so an input and a
// processor of one pipeline see one another's checkpoints.
package storeconfig

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/tidemark/tidemark/internal/awscreds/awscredsfield"
	"github.com/tidemark/tidemark/internal/dynamostore"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/store/memstore"
)

// Field names of the DynamoDB connection (DynamoFields) and of the
// `checkpoint` object (CheckpointFields).
const (
	dynFieldTable      = "table"
	dynFieldRegion     = "region"
	dynFieldEndpoint   = "endpoint"
	dynFieldCreate     = "create"
	dynFieldMaxRetries = "max_retries"
	dynFieldMaxBackoff = "max_backoff"
	dynFieldCallTO     = "call_timeout"

	fieldBackend    = "backend"
	fieldDynamoDB   = "dynamodb"
	fieldWitnessTTL = "witness_ttl"
	fieldCleanup    = "witness_cleanup"

	fieldEncryption = "cursor_encryption"
	fieldEncActive  = "active_id"
	fieldEncKeys    = "keys"
	fieldEncKeyID   = "id"
	fieldEncKeyEnv  = "env"
	fieldEncKeyFile = "file"
)

// Values of witness_cleanup.
const (
	CleanupAuto  = "auto"
	CleanupPrune = "prune"
	CleanupKeep  = "keep"
)

// DynamoFields are the config fields of a DynamoDB connection (table,
// region, endpoint, credentials, create, max_retries, max_backoff), shared by the
// tidemark_dynamodb cache and the checkpoint store's `dynamodb` object.
// Read them with DynamoConfigFromParsed.
func DynamoFields() []*service.ConfigField {
	return []*service.ConfigField{
		service.NewStringField(dynFieldTable).
			Description("The DynamoDB table. It needs a string partition key `pk` and a string sort key `sk` (created so with `create: true`). The checkpoint store and the cache may share one table.").
			Default(dynamostore.DefaultTable).
			Example("tidemark-prod"),
		service.NewStringField(dynFieldRegion).
			Description("The AWS region. Empty: the SDK's default chain (`AWS_REGION`, the shared config profile); `us-east-1` when that names none and an endpoint is set.").
			Default("").
			Example("eu-west-1"),
		service.NewStringField(dynFieldEndpoint).
			Description("Overrides the DynamoDB endpoint, for DynamoDB Local or dynalite. Empty: AWS's endpoint for the region.").
			Default("").
			Example("http://127.0.0.1:8000"),
		awscredsfield.Field(),
		service.NewBoolField(dynFieldCreate).
			Description("Create the table when it does not exist (on-demand billing) and wait until it is active. The input does it when it connects, retried with back-off while the store is unreachable; the cache at its first operation, and again at the next one after a failure.").
			Default(false).
			Example(true),
		service.NewIntField(dynFieldMaxRetries).
			Description("How many times a request is retried after throttling, a 5xx answer or a transport error, with exponential back-off and jitter (0: never). A failed condition is never retried.").
			Default(dynamostore.DefaultMaxRetries).
			Example(3).
			Advanced(),
		service.NewDurationField(dynFieldMaxBackoff).
			Description("The longest back-off between two retries.").
			Default(dynamostore.DefaultMaxBackoff.String()).
			Example("500ms").
			Advanced(),
		service.NewDurationField(dynFieldCallTO).
			Description("The deadline of one DynamoDB call, all its retries and back-offs included. A call without an answer by then fails (a write's outcome is then unknown, and is resolved by reading it back before anything is decided, never by writing again blindly); the caller logs a warning naming the operation and the partition and tries again after `store_backoff`, so a store that hangs is reported within one deadline and the input resumes by itself when the store answers. Must be positive.").
			Default(dynamostore.DefaultCallTimeout.String()).
			Example("2s").
			Advanced(),
	}
}

// DynamoConfigFromParsed reads the fields of DynamoFields.
func DynamoConfigFromParsed(conf *service.ParsedConfig) (dynamostore.DynamoConfig, error) {
	var cfg dynamostore.DynamoConfig
	var err error
	if cfg.Table, err = conf.FieldString(dynFieldTable); err != nil {
		return cfg, err
	}
	if cfg.Region, err = conf.FieldString(dynFieldRegion); err != nil {
		return cfg, err
	}
	if cfg.Endpoint, err = conf.FieldString(dynFieldEndpoint); err != nil {
		return cfg, err
	}
	if cfg.Credentials, err = awscredsfield.FromParsed(conf); err != nil {
		return cfg, fmt.Errorf("dynamodb: %w", err)
	}
	if cfg.Create, err = conf.FieldBool(dynFieldCreate); err != nil {
		return cfg, err
	}
	if cfg.MaxRetries, err = conf.FieldInt(dynFieldMaxRetries); err != nil {
		return cfg, err
	}
	switch {
	case cfg.MaxRetries == 0:
		cfg.MaxRetries = -1 // in YAML, 0 means no retries
	case cfg.MaxRetries < 0:
		return cfg, fmt.Errorf("dynamodb.%s must not be negative, got %d", dynFieldMaxRetries, cfg.MaxRetries)
	}
	if cfg.MaxBackoff, err = conf.FieldDuration(dynFieldMaxBackoff); err != nil {
		return cfg, err
	}
	if cfg.MaxBackoff <= 0 {
		return cfg, fmt.Errorf("dynamodb.%s must be positive, got %s", dynFieldMaxBackoff, cfg.MaxBackoff)
	}
	if cfg.CallTimeout, err = conf.FieldDuration(dynFieldCallTO); err != nil {
		return cfg, err
	}
	if cfg.CallTimeout <= 0 {
		return cfg, fmt.Errorf("dynamodb.%s must be positive, got %s", dynFieldCallTO, cfg.CallTimeout)
	}
	if err := cfg.Validate(); err != nil {
		return cfg, fmt.Errorf("dynamodb.%s: %w", dynFieldTable, err)
	}
	return cfg, nil
}

// CheckpointFields are the fields of the `checkpoint` object of the
// paginated_partitions input, the partition_frontier processor and the
// frontier_advances input. Read them with StoreFromParsed.
func CheckpointFields() []*service.ConfigField {
	return []*service.ConfigField{
		service.NewStringAnnotatedEnumField(fieldBackend, map[string]string{
			"dynamodb": "A DynamoDB table (`dynamodb` below): every promotion is one conditional write, progress survives restarts and is shared by every instance of the scope.",
			"memory":   "This process's memory, for development only: progress and witnesses are lost on restart, and the input warns. Components of one process share it.",
		}).
			Description("Where checkpoints and response witnesses live.").
			Default("dynamodb").Example("memory"),
		service.NewObjectField(fieldDynamoDB, DynamoFields()...).
			Description("The DynamoDB table (used when `backend: dynamodb`). Credentials come from the AWS SDK's default chain."),
		service.NewDurationField(fieldWitnessTTL).
			Description("With `backend: dynamodb`, every witness carries an expiry attribute `exp` (epoch seconds: its write time plus this) for DynamoDB's time to live, which deletes expired items at no write cost; `create: true` enables TTL on `exp` (enable it yourself on an existing table). A witness is needed only until its generation is promoted, or, for a parked partition, until it is unparked: a witness that expired before an unpark makes the next answer a first response again (its events are delivered again, never skipped). 0s: no expiry attribute.").
			Default("168h").Example("24h").Advanced(),
		service.NewStringAnnotatedEnumField(fieldCleanup, map[string]string{
			CleanupAuto:  "The memory backend deletes the witnesses of generations below each promoted checkpoint at once (its memory stays flat however long it runs); DynamoDB leaves them to `witness_ttl` (no write cost).",
			CleanupPrune: "Also on DynamoDB, delete the witnesses below the promoted checkpoint's generation explicitly (one write unit per witness, every 16 generations), for tables without TTL (dynalite, DynamoDB Local).",
			CleanupKeep:  "Keep every witness (an audit trail; storage grows with the run).",
		}).
			Description("What happens to the witnesses of generations below the durable checkpoint, which classification, receipts and promotion never read again.").
			Default(CleanupAuto).Example(CleanupPrune).Advanced(),
		service.NewObjectField(fieldEncryption,
			service.NewStringField(fieldEncActive).
				Description("The id of the key that encrypts (the newest). Empty: the only key, when one is listed.").
				Default("").Example("2026-12"),
			service.NewObjectListField(fieldEncKeys,
				service.NewStringField(fieldEncKeyID).Description("The key id, stored with every value it encrypts (1 to 32 bytes).").Example("2026-12"),
				service.NewStringField(fieldEncKeyEnv).Description("The environment variable holding the key: 32 bytes, base64 (e.g. `openssl rand -base64 32`).").Default("").Example("TIDEMARK_CURSOR_KEY"),
				service.NewStringField(fieldEncKeyFile).Description("A file holding the key: 32 bytes, base64 (surrounding white space ignored). Exactly one of `env` and `file`.").Default("").Example("/run/secrets/tidemark-cursor-key"),
			).Description("Every key that may have encrypted a stored cursor: old keys decrypt, the `active_id` key encrypts. Empty: cursors are stored in clear.").
				Default([]any{}),
		).
			Description("Opt-in encryption at rest of the cursors and successors in checkpoints and witnesses, with AES-SIV (RFC 5297 deterministic authenticated encryption; cursors stored encrypted by earlier releases, with AES-256-GCM, are still read) (docs/design.md#cursor-protection-at-rest). Rotate by adding a key, making it `active_id`, and removing the old key once every checkpoint has been promoted since (each promotion re-encrypts). Values stored in clear before encryption was turned on are read as they are. Every component and instance of a scope must list the same keys; an input without the block refuses to start on a scope whose cursors are stored encrypted (naming the key id), rather than send ciphertext to the source. `tidemark status` shows the hash of the stored (encrypted) cursor.").
			Example(map[string]any{fieldEncActive: "2026-12", fieldEncKeys: []any{
				map[string]any{fieldEncKeyID: "2026-06", fieldEncKeyFile: "/run/secrets/tidemark-cursor-key-2026-06"},
				map[string]any{fieldEncKeyID: "2026-12", fieldEncKeyEnv: "TIDEMARK_CURSOR_KEY"},
			}}).
			Optional().Advanced(),
	}
}

// cursorKeysFromParsed reads cursor_encryption (nil keys when it is absent
// or lists none).
func cursorKeysFromParsed(conf *service.ParsedConfig) ([]store.CursorKey, string, error) {
	if !conf.Contains(fieldEncryption) {
		return nil, "", nil
	}
	enc := conf.Namespace(fieldEncryption)
	active, err := enc.FieldString(fieldEncActive)
	if err != nil {
		return nil, "", err
	}
	list, err := enc.FieldObjectList(fieldEncKeys)
	if err != nil {
		return nil, "", err
	}
	var keys []store.CursorKey
	for i, k := range list {
		id, err := k.FieldString(fieldEncKeyID)
		if err != nil {
			return nil, "", err
		}
		env, _ := k.FieldString(fieldEncKeyEnv)
		file, _ := k.FieldString(fieldEncKeyFile)
		key, err := LoadCursorKey(id, env, file)
		if err != nil {
			return nil, "", fmt.Errorf("%s.%s[%d]: %w", fieldEncryption, fieldEncKeys, i, err)
		}
		keys = append(keys, key)
	}
	return keys, active, nil
}

// LoadCursorKey reads the cursor key id from the environment variable env
// or the file (exactly one of them): 32 bytes in base64, surrounding white
// space ignored. Errors never quote the key material.
func LoadCursorKey(id, env, file string) (store.CursorKey, error) {
	var text string
	switch {
	case (env == "") == (file == ""):
		return store.CursorKey{}, fmt.Errorf("key id %s: set exactly one of env and file", id)
	case env != "":
		v, ok := os.LookupEnv(env)
		if !ok {
			return store.CursorKey{}, fmt.Errorf("key id %s: environment variable %s is not set", id, env)
		}
		text = v
	default:
		b, err := os.ReadFile(file)
		if err != nil {
			return store.CursorKey{}, fmt.Errorf("key id %s: reading the key file: %w", id, err)
		}
		text = string(b)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(text))
	if err != nil || len(key) != 32 {
		return store.CursorKey{}, fmt.Errorf("key id %s: the key is not 32 bytes in base64", id)
	}
	return store.CursorKey{ID: id, Key: key}, nil
}

// withCursorEncryption wraps st with the cursor encryption conf asks for.
// Without keys st is returned as it is: the readers of the frontier use no
// cursor; the input, which sends them, wraps it with store.RefuseSealed.
func withCursorEncryption(conf *service.ParsedConfig, st store.Store) (store.Store, error) {
	keys, active, err := checkCursorEncryption(conf)
	if err != nil || len(keys) == 0 {
		return st, err
	}
	return store.Encrypted(st, keys, active)
}

// checkCursorEncryption reads cursor_encryption and checks it as
// store.Encrypted will (key ids, lengths, duplicates, active_id): run and
// lint share it. An active_id with no keys is refused (it would otherwise
// store every cursor in clear without a word).
func checkCursorEncryption(conf *service.ParsedConfig) ([]store.CursorKey, string, error) {
	keys, active, err := cursorKeysFromParsed(conf)
	if err != nil {
		return nil, "", err
	}
	if len(keys) == 0 {
		if active != "" {
			return nil, "", fmt.Errorf("%s.%s is %q but %s.%s lists no key: cursors would be stored in clear; list the key, or remove active_id", fieldEncryption, fieldEncActive, active, fieldEncryption, fieldEncKeys)
		}
		return nil, "", nil
	}
	if _, err := store.Encrypted(nil, keys, active); err != nil {
		return nil, "", fmt.Errorf("%s: %w", fieldEncryption, err)
	}
	return keys, active, nil
}

// PruneEvery returns, for a `checkpoint` object, after how many promoted
// generations the input deletes the witnesses below its checkpoint's (0:
// never).
func PruneEvery(conf *service.ParsedConfig) (uint64, error) {
	mode, err := conf.FieldString(fieldCleanup)
	if err != nil {
		return 0, err
	}
	backend, err := conf.FieldString(fieldBackend)
	if err != nil {
		return 0, err
	}
	switch {
	case mode == CleanupKeep:
		return 0, nil
	case backend == "memory":
		return 1, nil
	case mode == CleanupPrune:
		return 16, nil
	}
	return 0, nil
}

// StoreFromParsed builds the checkpoint store of a `checkpoint` object.
func StoreFromParsed(ctx context.Context, conf *service.ParsedConfig, mgr *service.Resources) (store.Store, func(context.Context) error, error) {
	backend, err := conf.FieldString(fieldBackend)
	if err != nil {
		return nil, nil, err
	}
	switch backend {
	case "memory":
		mgr.Logger().Warn("Checkpoint backend is memory: progress and witnesses are lost on restart. Use it for development only.")
		st, err := withCursorEncryption(conf, SharedMemStore())
		return st, nil, err
	case "dynamodb":
		dc, err := dynamoFromCheckpoint(conf)
		if err != nil {
			return nil, nil, err
		}
		// No request here: the table is checked or created by Prepare,
		// from the component's Connect, which Benthos retries with
		// back-off while the store is down.
		ds, err := dynamostore.OpenDynamoStore(ctx, dc)
		if err != nil {
			return nil, nil, err
		}
		st, err := withCursorEncryption(conf, ds)
		return st, nil, err
	}
	return nil, nil, fmt.Errorf("unknown checkpoint backend %q", backend)
}

// dynamoFromCheckpoint reads the DynamoDB settings of a `checkpoint`
// object; errors name the field's path below it.
func dynamoFromCheckpoint(conf *service.ParsedConfig) (dynamostore.DynamoConfig, error) {
	dc, err := DynamoConfigFromParsed(conf.Namespace(fieldDynamoDB))
	if err != nil {
		return dc, err
	}
	if conf.Contains(fieldWitnessTTL) {
		if dc.WitnessTTL, err = conf.FieldDuration(fieldWitnessTTL); err != nil {
			return dc, err
		}
		if dc.WitnessTTL < 0 {
			return dc, fmt.Errorf("%s must not be negative (0s: no expiry), got %s", fieldWitnessTTL, dc.WitnessTTL)
		}
	}
	return dc, nil
}

// ValidateCheckpoint reports what StoreFromParsed would reject in a
// `checkpoint` object, without building anything (the lint rule and the
// run path share it). Errors name the field's path below `checkpoint`.
func ValidateCheckpoint(conf *service.ParsedConfig) error {
	backend, err := conf.FieldString(fieldBackend)
	if err != nil {
		return err
	}
	if _, err := PruneEvery(conf); err != nil {
		return err
	}
	if _, _, err := checkCursorEncryption(conf); err != nil {
		return err
	}
	switch backend {
	case "memory":
		return nil
	case "dynamodb":
		_, err := dynamoFromCheckpoint(conf)
		return err
	}
	return fmt.Errorf("%s: unknown checkpoint backend %q", fieldBackend, backend)
}

// Prepare readies a store StoreFromParsed built, from a component's
// Connect: with `create: true` it creates the DynamoDB table when missing
// (dynamostore.DynamoStore.Prepare). An error (a store that is down) is
// returned for Benthos to retry the Connect with back-off; it is safe to
// call again and does nothing once it succeeded. st is the store (any of
// its roles) that StoreFromParsed built.
func Prepare(ctx context.Context, st any, log *service.Logger) error {
	// A store that wraps another (cursor encryption) is readied through it.
	for {
		w, ok := st.(interface{ Unwrap() store.Store })
		if !ok {
			break
		}
		st = w.Unwrap()
	}
	ds, ok := st.(*dynamostore.DynamoStore)
	if !ok {
		return nil
	}
	if err := ds.Prepare(ctx); err != nil {
		return fmt.Errorf("checkpoint store (DynamoDB table %s) is not reachable or not ready, retrying: %w", ds.Table(), err)
	}
	if err := ds.TTLError(); err != nil {
		ds.ClearTTLError()
		log.Infof("DynamoDB time to live on the witnesses' exp attribute is not enabled on table %s (%v): witnesses then leave only with witness_cleanup: prune", ds.Table(), err)
	}
	return nil
}

var (
	memOnce  sync.Once
	memStore *memstore.Store
)

// SharedMemStore is the process-wide in-memory store, so that the input and
// the partition_frontier processor of one process share it.
func SharedMemStore() store.Store {
	memOnce.Do(func() { memStore = memstore.New() })
	return memStore
}
