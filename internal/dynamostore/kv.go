package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// DefaultTTLAttribute is the default name of the expiry attribute of KV
// entries.
const DefaultTTLAttribute = "expires_at"

var (
	// ErrKeyNotFound is returned by KV.Get for a missing or expired key.
	ErrKeyNotFound = errors.New("dynamostore: kv: key not found")
	// ErrKeyExists is returned by KV.Add when the key holds an unexpired
	// value.
	ErrKeyExists = errors.New("dynamostore: kv: key already exists")
)

// KVConfig configures a Cache.
type KVConfig struct {
	DynamoConfig
	// TTLAttribute names the expiry attribute. Default "expires_at".
	TTLAttribute string
	// DefaultTTL is the expiry of items set without one. Default 0: never.
	DefaultTTL time.Duration
	// Now is the clock expiry is computed with. Default time.Now.
	Now func() time.Time
}

// KV is Get, Set, Add (a conditional put) and Delete of cache entries on
// one DynamoDB table, the items behind the tidemark_dynamodb cache.
type KV struct {
	client     *dynamodb.Client
	table      string
	ttlAttr    string
	defaultTTL time.Duration
	now        func() time.Time

	// ensure: the table is still to be created (KVConfig.Create) before
	// the next operation; ensureMu serialises the attempts.
	ensureMu sync.Mutex
	ensure   bool
}

// Validate reports a config no KV can be built from.
func (c KVConfig) Validate() error {
	if err := c.DynamoConfig.Validate(); err != nil {
		return err
	}
	switch c.TTLAttribute {
	case attrPK, attrSK, attrValue:
		return fmt.Errorf("dynamostore: kv: ttl_attribute %q is one of the item's own attributes (pk, sk, v)", c.TTLAttribute)
	}
	if c.DefaultTTL < 0 {
		return fmt.Errorf("dynamostore: kv: negative default_ttl %s", c.DefaultTTL)
	}
	return nil
}

// NewKV builds the client (NewDynamoClient) and returns the KV; it sends
// no request. When cfg.Create is set the table is created (EnsureTable) at
// the first operation, and again at the next one after a failure, so a
// store that is down when the pipeline starts fails its first uses with a
// clear error instead of ending the process.
func NewKV(ctx context.Context, cfg KVConfig) (*KV, error) {
	if cfg.TTLAttribute == "" {
		cfg.TTLAttribute = DefaultTTLAttribute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	client, err := NewDynamoClient(ctx, cfg.DynamoConfig)
	if err != nil {
		return nil, err
	}
	return &KV{client: client, table: cfg.Table, ttlAttr: cfg.TTLAttribute, defaultTTL: cfg.DefaultTTL, now: cfg.Now, ensure: cfg.Create}, nil
}

// ready creates the table on the first operation of a KV configured to
// create it (and again after a failed attempt); the others pass at once.
func (c *KV) ready(ctx context.Context) error {
	c.ensureMu.Lock()
	defer c.ensureMu.Unlock()
	if !c.ensure {
		return nil
	}
	if err := EnsureTable(ctx, c.client, c.table); err != nil {
		return fmt.Errorf("dynamostore: kv: table %s is not reachable or not ready (tried again at the next operation): %w", c.table, err)
	}
	c.ensure = false
	return nil
}

func (c *KV) key(key string) (item, error) {
	if key == "" {
		return nil, errors.New("dynamostore: kv: empty key")
	}
	if !utf8.ValidString(key) {
		return nil, fmt.Errorf("dynamostore: kv: key %q is not valid UTF-8", key)
	}
	return item{attrPK: avS(key), attrSK: avS(skCache)}, nil
}

// expiry returns the Unix-seconds expiry for ttl (nil: the default), and
// whether the item expires at all.
func (c *KV) expiry(ttl *time.Duration) (int64, bool) {
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

// Get returns the value of key, or ErrKeyNotFound when it is
// missing or expired. The read is strongly consistent.
func (c *KV) Get(ctx context.Context, key string) ([]byte, error) {
	if err := c.ready(ctx); err != nil {
		return nil, err
	}
	k, err := c.key(key)
	if err != nil {
		return nil, err
	}
	out, err := c.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(c.table), Key: k, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("dynamostore: kv: get %q: %w", key, err)
	}
	if out.Item == nil {
		return nil, ErrKeyNotFound
	}
	exp, ok, err := getI(out.Item, c.ttlAttr)
	if err != nil {
		return nil, err
	}
	if ok && exp <= c.now().Unix() {
		return nil, ErrKeyNotFound
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

func (c *KV) item(k item, value []byte, ttl *time.Duration) item {
	it := item{attrPK: k[attrPK], attrSK: k[attrSK], attrValue: avB(value)}
	if exp, ok := c.expiry(ttl); ok {
		it[c.ttlAttr] = avI(exp)
	}
	return it
}

// Set writes key (a cache entry, not progress: it is unconditional).
func (c *KV) Set(ctx context.Context, key string, value []byte, ttl *time.Duration) error {
	if err := c.ready(ctx); err != nil {
		return err
	}
	k, err := c.key(key)
	if err != nil {
		return err
	}
	if _, err := c.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(c.table), Item: c.item(k, value, ttl)}); err != nil {
		return fmt.Errorf("dynamostore: kv: set %q: %w", key, err)
	}
	return nil
}

// Add writes key only if it is missing or expired (one conditional
// PutItem); otherwise it returns ErrKeyExists.
func (c *KV) Add(ctx context.Context, key string, value []byte, ttl *time.Duration) error {
	if err := c.ready(ctx); err != nil {
		return err
	}
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
		return ErrKeyExists
	}
	if err != nil {
		return fmt.Errorf("dynamostore: kv: add %q: %w", key, err)
	}
	return nil
}

// Delete removes key; a missing key is not an error.
func (c *KV) Delete(ctx context.Context, key string) error {
	if err := c.ready(ctx); err != nil {
		return err
	}
	k, err := c.key(key)
	if err != nil {
		return err
	}
	if _, err := c.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(c.table), Key: k}); err != nil {
		return fmt.Errorf("dynamostore: kv: delete %q: %w", key, err)
	}
	return nil
}

// Close releases nothing: the client holds no resources.
func (c *KV) Close(context.Context) error { return nil }
