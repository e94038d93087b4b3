package cache

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/redpanda-data/benthos/v4/public/service"
)

// CacheName is the Benthos name of the cache component.
const CacheName = "tidemark_dynamodb"

// Field names of the DynamoDB connection (DynamoFields) and of the
// tidemark_dynamodb cache.
const (
	dynFieldTable          = "table"
	dynFieldRegion         = "region"
	dynFieldEndpoint       = "endpoint"
	dynFieldCreate         = "create"
	dynFieldMaxRetries     = "max_retries"
	dynFieldMaxBackoff     = "max_backoff"
	cacheFieldTTLAttribute = "ttl_attribute"
	cacheFieldDefaultTTL   = "default_ttl"
)

// DefaultTable is the default table name of DynamoFields: the store and the
// cache can share one table (their items never collide).
const DefaultTable = "tidemark"

// DefaultTTLAttribute is the default name of the expiry attribute.
const DefaultTTLAttribute = "expires_at"

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
		Fields(DynamoFields()...).
		Fields(
			service.NewStringField(cacheFieldTTLAttribute).
				Description("The attribute holding an item's expiry (Unix seconds). Enable DynamoDB Time To Live on it to have AWS delete expired items.").
				Default(DefaultTTLAttribute).
				Example("ttl"),
			service.NewDurationField(cacheFieldDefaultTTL).
				Description("The expiry of items set or added without a TTL of their own. Empty: such items never expire.").
				Optional().
				Example("72h"),
		)
}

// DynamoFields are the config fields of a DynamoDB connection (table,
// region, endpoint, create, max_retries, max_backoff), shared by the
// tidemark_dynamodb cache and the checkpoint store's `dynamodb` object.
// Read them with DynamoConfigFromParsed.
func DynamoFields() []*service.ConfigField {
	return []*service.ConfigField{
		service.NewStringField(dynFieldTable).
			Description("The DynamoDB table. It needs a string partition key `pk` and a string sort key `sk` (created so with `create: true`). The checkpoint store and the cache may share one table.").
			Default(DefaultTable).
			Example("tidemark-prod"),
		service.NewStringField(dynFieldRegion).
			Description("The AWS region. Empty: the SDK's default chain (`AWS_REGION`, the shared config profile); `us-east-1` when that names none and an endpoint is set.").
			Default("").
			Example("eu-west-1"),
		service.NewStringField(dynFieldEndpoint).
			Description("Overrides the DynamoDB endpoint, for DynamoDB Local or dynalite. Empty: AWS's endpoint for the region. Credentials always come from the SDK's default chain.").
			Default("").
			Example("http://127.0.0.1:8000"),
		service.NewBoolField(dynFieldCreate).
			Description("Create the table when it does not exist (on-demand billing) and wait until it is active.").
			Default(false).
			Example(true),
		service.NewIntField(dynFieldMaxRetries).
			Description("How many times a request is retried after throttling, a 5xx answer or a transport error, with exponential back-off and jitter (0: never). A failed condition is never retried.").
			Default(DefaultMaxRetries).
			Example(3).
			Advanced(),
		service.NewDurationField(dynFieldMaxBackoff).
			Description("The longest back-off between two retries.").
			Default(DefaultMaxBackoff.String()).
			Example("500ms").
			Advanced(),
	}
}

// DynamoConfigFromParsed reads the fields of DynamoFields.
func DynamoConfigFromParsed(conf *service.ParsedConfig) (DynamoConfig, error) {
	var cfg DynamoConfig
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
		return cfg, fmt.Errorf("cache: negative %s %d", dynFieldMaxRetries, cfg.MaxRetries)
	}
	if cfg.MaxBackoff, err = conf.FieldDuration(dynFieldMaxBackoff); err != nil {
		return cfg, err
	}
	if cfg.MaxBackoff <= 0 {
		return cfg, fmt.Errorf("cache: %s must be positive", dynFieldMaxBackoff)
	}
	return cfg, cfg.validate()
}

// CacheConfig configures a Cache.
type CacheConfig struct {
	DynamoConfig
	// TTLAttribute names the expiry attribute. Default "expires_at".
	TTLAttribute string
	// DefaultTTL is the expiry of items set without one. Default 0: never.
	DefaultTTL time.Duration
	// Now is the clock expiry is computed with. Default time.Now.
	Now func() time.Time
}

// Cache is the tidemark_dynamodb Benthos cache: Get, Set, Add (a
// conditional put) and Delete on one DynamoDB table.
type Cache struct {
	client     *dynamodb.Client
	table      string
	ttlAttr    string
	defaultTTL time.Duration
	now        func() time.Time
}

var _ service.Cache = (*Cache)(nil)

func newCacheFromParsed(conf *service.ParsedConfig, _ *service.Resources) (service.Cache, error) {
	dc, err := DynamoConfigFromParsed(conf)
	if err != nil {
		return nil, err
	}
	cfg := CacheConfig{DynamoConfig: dc}
	if cfg.TTLAttribute, err = conf.FieldString(cacheFieldTTLAttribute); err != nil {
		return nil, err
	}
	if conf.Contains(cacheFieldDefaultTTL) {
		if cfg.DefaultTTL, err = conf.FieldDuration(cacheFieldDefaultTTL); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return NewCache(ctx, cfg)
}

func (c CacheConfig) validate() error {
	if err := c.DynamoConfig.validate(); err != nil {
		return err
	}
	switch c.TTLAttribute {
	case attrPK, attrSK, attrValue:
		return fmt.Errorf("cache: ttl_attribute %q is one of the item's own attributes (pk, sk, v)", c.TTLAttribute)
	}
	if c.DefaultTTL < 0 {
		return fmt.Errorf("cache: negative default_ttl %s", c.DefaultTTL)
	}
	return nil
}

// NewCache builds the client (NewDynamoClient), creates the table when
// cfg.Create is set, and returns the cache.
func NewCache(ctx context.Context, cfg CacheConfig) (*Cache, error) {
	if cfg.TTLAttribute == "" {
		cfg.TTLAttribute = DefaultTTLAttribute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	client, err := NewDynamoClient(ctx, cfg.DynamoConfig)
	if err != nil {
		return nil, err
	}
	if cfg.Create {
		if err := EnsureTable(ctx, client, cfg.Table); err != nil {
			return nil, err
		}
	}
	return &Cache{client: client, table: cfg.Table, ttlAttr: cfg.TTLAttribute, defaultTTL: cfg.DefaultTTL, now: cfg.Now}, nil
}

func (c *Cache) key(key string) (item, error) {
	if key == "" {
		return nil, errors.New("cache: empty key")
	}
	if !utf8.ValidString(key) {
		return nil, fmt.Errorf("cache: key %q is not valid UTF-8", key)
	}
	return item{attrPK: avS(key), attrSK: avS(skCache)}, nil
}

// expiry returns the Unix-seconds expiry for ttl (nil: the default), and
// whether the item expires at all.
func (c *Cache) expiry(ttl *time.Duration) (int64, bool) {
	d := c.defaultTTL
	if ttl != nil {
		d = *ttl
	}
	if d <= 0 {
		return 0, false
	}
	at := c.now().Add(d)
	secs := at.Unix()
	if at.Nanosecond() > 0 {
		secs++ // never expire early
	}
	return secs, true
}

// Get returns the value of key, or service.ErrKeyNotFound when it is
// missing or expired. The read is strongly consistent.
func (c *Cache) Get(ctx context.Context, key string) ([]byte, error) {
	k, err := c.key(key)
	if err != nil {
		return nil, err
	}
	out, err := c.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(c.table), Key: k, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("cache: get %q: %w", key, err)
	}
	if out.Item == nil {
		return nil, service.ErrKeyNotFound
	}
	exp, ok, err := getI(out.Item, c.ttlAttr)
	if err != nil {
		return nil, err
	}
	if ok && exp <= c.now().Unix() {
		return nil, service.ErrKeyNotFound
	}
	v, err := getB(out.Item, attrValue)
	if err != nil {
		return nil, err
	}
	if v == nil {
		v = []byte{}
	}
	return v, nil
}

func (c *Cache) item(k item, value []byte, ttl *time.Duration) item {
	it := item{attrPK: k[attrPK], attrSK: k[attrSK], attrValue: avB(value)}
	if exp, ok := c.expiry(ttl); ok {
		it[c.ttlAttr] = avI(exp)
	}
	return it
}

// Set writes key (a cache entry, not progress: it is unconditional).
func (c *Cache) Set(ctx context.Context, key string, value []byte, ttl *time.Duration) error {
	k, err := c.key(key)
	if err != nil {
		return err
	}
	if _, err := c.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(c.table), Item: c.item(k, value, ttl)}); err != nil {
		return fmt.Errorf("cache: set %q: %w", key, err)
	}
	return nil
}

// Add writes key only if it is missing or expired (one conditional
// PutItem); otherwise it returns service.ErrKeyAlreadyExists.
func (c *Cache) Add(ctx context.Context, key string, value []byte, ttl *time.Duration) error {
	k, err := c.key(key)
	if err != nil {
		return err
	}
	e := newExpr()
	cond := fmt.Sprintf("attribute_not_exists(%s) OR %s <= %s", e.n(attrPK), e.n(c.ttlAttr), e.v("now", avI(c.now().Unix())))
	_, err = c.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                 aws.String(c.table),
		Item:                      c.item(k, value, ttl),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  e.names,
		ExpressionAttributeValues: e.vals(),
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return service.ErrKeyAlreadyExists
	}
	if err != nil {
		return fmt.Errorf("cache: add %q: %w", key, err)
	}
	return nil
}

// Delete removes key; a missing key is not an error.
func (c *Cache) Delete(ctx context.Context, key string) error {
	k, err := c.key(key)
	if err != nil {
		return err
	}
	if _, err := c.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(c.table), Key: k}); err != nil {
		return fmt.Errorf("cache: delete %q: %w", key, err)
	}
	return nil
}

// Close implements service.Cache; the client holds nothing to release.
func (c *Cache) Close(context.Context) error { return nil }
