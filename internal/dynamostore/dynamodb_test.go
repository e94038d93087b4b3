package dynamostore

import (
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/dynalitetest"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/store/storetest"
)

// newTestStore creates a DynamoStore on a fresh dynalite table (skipping,
// or failing in CI, without dynalite).
func newTestStore(t testing.TB, opts ...func(*DynamoConfig)) *DynamoStore {
	t.Helper()
	tb := dynalitetest.NewTable(t)
	cfg := DynamoConfig{Table: tb.Name, Endpoint: tb.Endpoint, Create: true}
	if os.Getenv("AWS_ACCESS_KEY_ID") == "" {
		cfg.ClientOptions = append(cfg.ClientOptions, func(o *dynamodb.Options) {
			o.Credentials = credentials.NewStaticCredentialsProvider("local", "local", "")
		})
	}
	for _, o := range opts {
		o(&cfg)
	}
	s, err := NewDynamoStore(t.Context(), cfg)
	require.NoError(t, err)
	return s
}

// The contract suite against dynalite: the same tests the in-memory twin
// passes (internal/store/mem_test.go).
func TestDynamoStoreContract(t *testing.T) {
	dynalitetest.Endpoint(t)
	storetest.Run(t, func(t *testing.T) store.Store { return previousFormat{newTestStore(t)} })
	t.Run("CursorFinder", func(t *testing.T) {
		storetest.RunCursorFinder(t, func(t *testing.T) store.Store { return newTestStore(t) })
	})
}

// The contract suite, and the cursor-encryption properties, with cursors
// encrypted at rest (store.Encrypted) on dynalite.
func TestDynamoStoreEncryptedContract(t *testing.T) {
	dynalitetest.Endpoint(t)
	keys := []store.CursorKey{{ID: "k1", Key: []byte("0123456789abcdef0123456789abcdef")}}
	newStore := func(t *testing.T) store.Store {
		s, err := store.Encrypted(newTestStore(t), keys, "k1")
		require.NoError(t, err)
		return s
	}
	storetest.Run(t, newStore)
	storetest.RunLease(t, newStore)
	storetest.RunEncrypted(t, func(t *testing.T) store.Store { return newTestStore(t) })
}
