package dynamostore

import (
	"os"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/dynalitetest"
)

// fakeClock is a settable clock for expiry tests.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newTestKV(t *testing.T, clock *fakeClock, defaultTTL time.Duration) *KV {
	t.Helper()
	tb := dynalitetest.NewTable(t)
	cfg := KVConfig{DynamoConfig: DynamoConfig{Table: tb.Name, Endpoint: tb.Endpoint, Create: true}, DefaultTTL: defaultTTL, Now: clock.now}
	if os.Getenv("AWS_ACCESS_KEY_ID") == "" {
		cfg.ClientOptions = append(cfg.ClientOptions, func(o *dynamodb.Options) {
			o.Credentials = credentials.NewStaticCredentialsProvider("local", "local", "")
		})
	}
	kv, err := NewKV(t.Context(), cfg)
	require.NoError(t, err)
	return kv
}

// Expired items count as missing (dynalite, like DynamoDB Local, never
// deletes them) and Add may overwrite them.
func TestCacheTTL(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1_764_741_600, 500)}
	c := newTestKV(t, clock, time.Hour)
	ctx := t.Context()

	ttl := 10 * time.Second
	require.NoError(t, c.Set(ctx, "short", []byte("v1"), &ttl))
	require.NoError(t, c.Add(ctx, "default", []byte("d1"), nil))
	raw, err := c.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(c.table), Key: item{attrPK: avS("short"), attrSK: avS(skCache)}, ConsistentRead: aws.Bool(true)})
	require.NoError(t, err)
	exp, ok, err := getI(raw.Item, DefaultTTLAttribute)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, clock.now().Unix()+11, exp, "expiry rounds up to whole seconds, never early")

	clock.add(10 * time.Second)
	_, err = c.Get(ctx, "short")
	require.NoError(t, err, "not expired yet")
	require.ErrorIs(t, c.Add(ctx, "short", []byte("v2"), &ttl), ErrKeyExists)

	clock.add(time.Second)
	_, err = c.Get(ctx, "short")
	require.ErrorIs(t, err, ErrKeyNotFound, "expired")
	require.NoError(t, c.Add(ctx, "short", []byte("v2"), &ttl), "add over an expired item")
	v, err := c.Get(ctx, "short")
	require.NoError(t, err)
	require.Equal(t, []byte("v2"), v)

	_, err = c.Get(ctx, "default")
	require.NoError(t, err)
	clock.add(time.Hour)
	_, err = c.Get(ctx, "default")
	require.ErrorIs(t, err, ErrKeyNotFound, "default_ttl applies")

	zero := time.Duration(0)
	require.NoError(t, c.Set(ctx, "forever", []byte("f"), &zero))
	clock.add(1000 * time.Hour)
	_, err = c.Get(ctx, "forever")
	require.NoError(t, err, "a zero TTL never expires")
}
