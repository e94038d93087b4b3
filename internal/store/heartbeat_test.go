package store_test

import (
	"testing"

	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/store/storetest"
)

// The heartbeat contract on the in-memory twin
// (internal/dynamostore/heartbeat_test.go runs the same suite against
// DynamoDB).
func TestMemStoreHeartbeatContract(t *testing.T) {
	storetest.RunHeartbeat(t, func(*testing.T) store.Store { return store.NewMemStore() })
}
