package cache

import (
	"context"
	"errors"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/tidemark/tidemark/internal/dynamostore"
	"github.com/tidemark/tidemark/internal/storeconfig"
)

// CacheName is the Benthos name of the cache component.
const CacheName = "tidemark_dynamodb"

// Field names of the tidemark_dynamodb cache (besides the table fields of
// storeconfig.DynamoFields).
const (
	cacheFieldTTLAttribute = "ttl_attribute"
	cacheFieldDefaultTTL   = "default_ttl"
)

func init() {
	service.MustRegisterCache(CacheName, cacheSpec(), newCacheFromParsed)
}

func cacheSpec() *service.ConfigSpec {
	return service.NewConfigSpec().
		Beta().
		Categories("Services", "AWS").
		Summary("Stores key/value pairs in a DynamoDB table, with an optional expiry per key. Add is a conditional put, so it fails with a key-already-exists error when the key is present and not expired.").
		Description(`
Items live under the partition key `+"`pk`"+` (the cache key) and the sort key `+"`sk`"+` = `+"`cache`"+`, the key schema of tidemark's checkpoint store, so the cache may share the store's table (no store item uses that sort key) or use its own. The value is stored as binary attribute `+"`v`"+`. Reads are strongly consistent.

Expiry: with a TTL (per call or `+"`"+cacheFieldDefaultTTL+"`"+`) an item carries a Unix-seconds expiry in `+"`"+cacheFieldTTLAttribute+"`"+`. An expired item reads as missing and `+"`add`"+` may overwrite it, whether or not DynamoDB has deleted it yet. To have AWS delete expired items, enable Time To Live on that attribute for the table (DynamoDB Local and dynalite do not delete them; the component does not need them deleted).

### An idempotent sink, and why a dedupe processor is not one

A `+"`dedupe`"+` processor in front of an output is no substitute for tidemark's receipts. `+"`dedupe`"+` records an event id when the message passes the processor, before the output has written it. If the write then fails, the batch is nacked and replayed, and on replay `+"`dedupe`"+` finds the id and drops the message: the event is lost although nothing downstream ever received it. tidemark's receipts are the opposite: they record an outcome only after the output acknowledged it.

Make the sink itself idempotent instead: write each event under its stable id, so that a replay overwrites the same key with the same value. With the stock `+"`cache`"+` output:

`+"```yaml"+`
input:
  paginated_partitions: {} # tidemark's input; sets @tidemark_event_id
output:
  cache:
    target: events
    key: '${! @tidemark_scope }/${! @tidemark_partition }/${! @tidemark_event_id }'
cache_resources:
  - label: events
    tidemark_dynamodb:
      table: tidemark-events
      create: true
`+"```"+`

A replayed event rewrites its own key; a nacked write is retried and never skipped.`).
		Fields(storeconfig.DynamoFields()...).
		Fields(
			service.NewStringField(cacheFieldTTLAttribute).
				Description("The attribute holding an item's expiry (Unix seconds). Enable DynamoDB Time To Live on it to have AWS delete expired items.").
				Default(dynamostore.DefaultTTLAttribute).
				Example("ttl"),
			service.NewDurationField(cacheFieldDefaultTTL).
				Description("The expiry of items set or added without a TTL of their own. Empty: such items never expire.").
				Optional().
				Example("72h"),
		)
}

// cacheConfigFromParsed reads the cache's fields.
func cacheConfigFromParsed(conf *service.ParsedConfig) (dynamostore.KVConfig, error) {
	dc, err := storeconfig.DynamoConfigFromParsed(conf)
	if err != nil {
		return dynamostore.KVConfig{}, err
	}
	cfg := dynamostore.KVConfig{DynamoConfig: dc}
	if cfg.TTLAttribute, err = conf.FieldString(cacheFieldTTLAttribute); err != nil {
		return cfg, err
	}
	if conf.Contains(cacheFieldDefaultTTL) {
		if cfg.DefaultTTL, err = conf.FieldDuration(cacheFieldDefaultTTL); err != nil {
			return cfg, err
		}
	}
	return cfg, cfg.Validate()
}

func newCacheFromParsed(conf *service.ParsedConfig, _ *service.Resources) (service.Cache, error) {
	cfg, err := cacheConfigFromParsed(conf)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kv, err := dynamostore.NewKV(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &Cache{kv: kv}, nil
}

// Cache is the tidemark_dynamodb cache: a dynamostore.KV whose errors are
// Benthos's (service.ErrKeyNotFound, service.ErrKeyAlreadyExists).
type Cache struct{ kv *dynamostore.KV }

var _ service.Cache = (*Cache)(nil)

// Get returns the value of key, or service.ErrKeyNotFound when it is
// missing or expired. The read is strongly consistent.
func (c *Cache) Get(ctx context.Context, key string) ([]byte, error) {
	v, err := c.kv.Get(ctx, key)
	if errors.Is(err, dynamostore.ErrKeyNotFound) {
		return nil, service.ErrKeyNotFound
	}
	return v, err
}

// Set writes key unconditionally (a cache entry, not progress).
func (c *Cache) Set(ctx context.Context, key string, value []byte, ttl *time.Duration) error {
	return c.kv.Set(ctx, key, value, ttl)
}

// Add writes key only if it is missing or expired, otherwise it returns
// service.ErrKeyAlreadyExists.
func (c *Cache) Add(ctx context.Context, key string, value []byte, ttl *time.Duration) error {
	err := c.kv.Add(ctx, key, value, ttl)
	if errors.Is(err, dynamostore.ErrKeyExists) {
		return service.ErrKeyAlreadyExists
	}
	return err
}

// Delete removes key; a missing key is not an error.
func (c *Cache) Delete(ctx context.Context, key string) error { return c.kv.Delete(ctx, key) }

// Close implements service.Cache.
func (c *Cache) Close(ctx context.Context) error { return c.kv.Close(ctx) }
