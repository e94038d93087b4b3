package cache

import (
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/require"

	_ "github.com/redpanda-data/benthos/v4/public/components/pure"

	"github.com/tidemark/tidemark/internal/dynalitetest"
	"github.com/tidemark/tidemark/internal/dynamostore"
)

func TestCacheSpecParse(t *testing.T) {
	conf, err := cacheSpec().ParseYAML(`
table: tidemark-cache
endpoint: http://127.0.0.1:1
`, nil)
	require.NoError(t, err)
	_, err = newCacheFromParsed(conf, service.MockResources())
	require.NoError(t, err, "building the cache needs no request")
	cfg, err := cacheConfigFromParsed(conf)
	require.NoError(t, err)
	require.Equal(t, "tidemark-cache", cfg.Table)
	require.Equal(t, dynamostore.DefaultTTLAttribute, cfg.TTLAttribute)
	require.Zero(t, cfg.DefaultTTL)

	conf, err = cacheSpec().ParseYAML(`
table: tidemark-cache
region: eu-west-1
endpoint: http://127.0.0.1:1
ttl_attribute: ttl
default_ttl: 72h
max_retries: 0
`, nil)
	require.NoError(t, err)
	cfg, err = cacheConfigFromParsed(conf)
	require.NoError(t, err)
	require.Equal(t, "ttl", cfg.TTLAttribute)
	require.Equal(t, 72*time.Hour, cfg.DefaultTTL)
	require.Equal(t, "eu-west-1", cfg.Region)
	require.Equal(t, -1, cfg.MaxRetries, "max_retries: 0 means no retries")

	for _, bad := range []string{
		"table: ''\nendpoint: http://127.0.0.1:1",              // empty table
		"endpoint: http://x\nmax_retries: -1",                  // negative retries
		"endpoint: http://x\nmax_backoff: 0s",                  // no back-off
		"table: t1\nendpoint: http://127.0.0.1:1",              // name too short
		"table: tbl\nendpoint: http://x\nttl_attribute: pk",    // clashes with the key
		"table: tbl\nendpoint: http://x\ndefault_ttl: -1s",     // negative
		"table: tbl\nendpoint: http://x\ndefault_ttl: forever", // not a duration
	} {
		conf, err := cacheSpec().ParseYAML(bad, nil)
		if err == nil {
			_, err = newCacheFromParsed(conf, service.MockResources())
		}
		require.Error(t, err, bad)
	}
}

// Every field of the spec has a description and an example (the generated
// reference under docs/ relies on both).
func TestCacheSpecDocumented(t *testing.T) {
	found := false
	service.GlobalEnvironment().WalkCaches(func(name string, view *service.ConfigView) {
		if name != CacheName {
			return
		}
		found = true
		data, err := view.TemplateData()
		require.NoError(t, err)
		require.NotEmpty(t, data.Fields)
		for _, f := range data.Fields {
			require.NotEmpty(t, f.Description, f.FullName)
			require.NotEmpty(t, f.Examples, "field %s needs an example", f.FullName)
		}
	})
	require.True(t, found, "%s is registered", CacheName)
}

// fakeClock is a settable clock for expiry tests.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func newTestCache(t *testing.T, clock *fakeClock, defaultTTL time.Duration) *Cache {
	t.Helper()
	tb := dynalitetest.NewTable(t)
	cfg := dynamostore.KVConfig{DynamoConfig: dynamostore.DynamoConfig{Table: tb.Name, Endpoint: tb.Endpoint, Create: true}, DefaultTTL: defaultTTL, Now: clock.now}
	if os.Getenv("AWS_ACCESS_KEY_ID") == "" {
		cfg.ClientOptions = append(cfg.ClientOptions, func(o *dynamodb.Options) {
			o.Credentials = credentials.NewStaticCredentialsProvider("local", "local", "")
		})
	}
	kv, err := dynamostore.NewKV(t.Context(), cfg)
	require.NoError(t, err)
	return &Cache{kv: kv}
}

func TestCacheOperations(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1_764_741_600, 0)}
	c := newTestCache(t, clock, 0)
	ctx := t.Context()

	_, err := c.Get(ctx, "missing")
	require.ErrorIs(t, err, service.ErrKeyNotFound)

	require.NoError(t, c.Add(ctx, "evt-1", []byte("first"), nil))
	require.ErrorIs(t, c.Add(ctx, "evt-1", []byte("second"), nil), service.ErrKeyAlreadyExists)
	v, err := c.Get(ctx, "evt-1")
	require.NoError(t, err)
	require.Equal(t, []byte("first"), v, "a refused add leaves the value")

	require.NoError(t, c.Set(ctx, "evt-1", []byte{0, 0xff}, nil))
	v, err = c.Get(ctx, "evt-1")
	require.NoError(t, err)
	require.Equal(t, []byte{0, 0xff}, v)

	require.NoError(t, c.Set(ctx, "empty", nil, nil))
	v, err = c.Get(ctx, "empty")
	require.NoError(t, err)
	require.Empty(t, v)

	require.NoError(t, c.Delete(ctx, "evt-1"))
	_, err = c.Get(ctx, "evt-1")
	require.ErrorIs(t, err, service.ErrKeyNotFound)
	require.NoError(t, c.Delete(ctx, "evt-1"), "deleting a missing key is not an error")
	require.NoError(t, c.Add(ctx, "evt-1", []byte("again"), nil))

	_, err = c.Get(ctx, "")
	require.Error(t, err)
	require.Error(t, c.Set(ctx, "bad\xff", nil, nil))
}

// The idempotent sink of the component's documentation: the stock cache
// output keyed by event id. Six messages carrying three ids (every event
// delivered twice, as a replay would) leave exactly three entries.
func TestCacheIdempotentSinkStream(t *testing.T) {
	tb := dynalitetest.NewTable(t)
	if os.Getenv("AWS_ACCESS_KEY_ID") == "" {
		t.Setenv("AWS_ACCESS_KEY_ID", "local")
		t.Setenv("AWS_SECRET_ACCESS_KEY", "local")
	}
	sb := service.NewStreamBuilder()
	require.NoError(t, sb.SetYAML(fmt.Sprintf(`
input:
  generate:
    count: 6
    interval: ""
    mapping: |
      let n = count("tidemark-sink-test") %% 3
      root = {"id": "evt-%%d".format($n), "n": $n}
output:
  cache:
    target: events
    key: '${! this.id }'
    # Benthos v4.60.0 initialises cache resources lazily, writing under a
    # read lock (internal/manager/live_resources.go:81); concurrent writers
    # race there under -race. One writer keeps this test about the sink.
    max_in_flight: 1
cache_resources:
  - label: events
    %s:
      table: %s
      endpoint: %s
      create: true
logger:
  level: none
`, CacheName, tb.Name, tb.Endpoint)))
	stream, err := sb.Build()
	require.NoError(t, err)
	require.NoError(t, stream.Run(t.Context()))

	client, err := dynalitetest.Client(t.Context(), tb.Endpoint)
	require.NoError(t, err)
	out, err := client.Scan(t.Context(), &dynamodb.ScanInput{TableName: aws.String(tb.Name), ConsistentRead: aws.Bool(true)})
	require.NoError(t, err)
	var keys []string
	for _, it := range out.Items {
		k, ok := it["pk"].(*types.AttributeValueMemberS)
		require.True(t, ok, "pk is a string")
		keys = append(keys, k.Value)
	}
	require.ElementsMatch(t, []string{"evt-0", "evt-1", "evt-2"}, keys)
}

// A cache that creates its table sends no request when it is built: a
// store that is down when the pipeline starts fails the cache's first
// operations with an error naming the table, and each later operation
// tries to create the table again, instead of ending the process at
// start-up.
func TestCacheCreatesItsTableAtFirstUseNotAtConstruction(t *testing.T) {
	conf, err := cacheSpec().ParseYAML(`
table: tidemark-cache
endpoint: http://127.0.0.1:1
create: true
max_retries: 0
`, nil)
	require.NoError(t, err)
	c, err := newCacheFromParsed(conf, service.MockResources())
	require.NoError(t, err, "a store that is down does not fail the cache's construction")
	for range 2 {
		err = c.Add(t.Context(), "evt-1", []byte("x"), nil)
		require.Error(t, err)
		require.Contains(t, err.Error(), "table tidemark-cache is not reachable or not ready (tried again at the next operation)")
	}
}
