package storeconfig

import (
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/dynamostore"
)

// DynamoFields inside an object (as the checkpoint store's config uses
// them) parse to the DynamoConfig the fields document.
func TestDynamoFieldsParse(t *testing.T) {
	spec := service.NewConfigSpec().Field(service.NewObjectField("dynamodb", DynamoFields()...))
	conf, err := spec.ParseYAML("dynamodb: {}", nil)
	require.NoError(t, err)
	cfg, err := DynamoConfigFromParsed(conf.Namespace("dynamodb"))
	require.NoError(t, err)
	require.Equal(t, dynamostore.DynamoConfig{Table: dynamostore.DefaultTable, MaxRetries: dynamostore.DefaultMaxRetries, MaxBackoff: dynamostore.DefaultMaxBackoff, CallTimeout: dynamostore.DefaultCallTimeout}, cfg)
	conf, err = spec.ParseYAML("dynamodb: {table: t-1, max_retries: 0, region: eu-west-1, create: true, endpoint: 'http://h:1', max_backoff: 100ms, call_timeout: 2s}", nil)
	require.NoError(t, err)
	cfg, err = DynamoConfigFromParsed(conf.Namespace("dynamodb"))
	require.NoError(t, err)
	require.Equal(t, dynamostore.DynamoConfig{Table: "t-1", Region: "eu-west-1", Endpoint: "http://h:1", Create: true, MaxRetries: -1, MaxBackoff: 100 * time.Millisecond, CallTimeout: 2 * time.Second}, cfg)

}

// The memory backend of every component of one process is one store.
func TestCheckpointMemoryBackendIsShared(t *testing.T) {
	spec := service.NewConfigSpec().Field(service.NewObjectField("checkpoint", CheckpointFields()...))
	conf, err := spec.ParseYAML("checkpoint: {backend: memory}", nil)
	require.NoError(t, err)
	a, _, err := StoreFromParsed(t.Context(), conf.Namespace("checkpoint"), service.MockResources())
	require.NoError(t, err)
	b, _, err := StoreFromParsed(t.Context(), conf.Namespace("checkpoint"), service.MockResources())
	require.NoError(t, err)
	require.Same(t, a, b)
}
