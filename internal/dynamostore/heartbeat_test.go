package dynamostore

import (
	"testing"

	"github.com/tidemark/tidemark/internal/dynalitetest"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/store/storetest"
)

// The heartbeat contract against dynalite: the same suite the in-memory
// twin passes (internal/store/heartbeat_test.go).
func TestDynamoStoreHeartbeatContract(t *testing.T) {
	dynalitetest.Endpoint(t)
	storetest.RunHeartbeat(t, func(t *testing.T) store.Store { return newTestStore(t) })
}
