package memstore_test

import (
	"testing"

	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/store/memstore"
	"github.com/tidemark/tidemark/internal/store/storetest"
)

// The in-memory twin passes the same contract suites as the DynamoDB store
// (internal/dynamostore runs them against dynalite).
func TestContract(t *testing.T) {
	storetest.Run(t, func(*testing.T) store.Store { return memstore.New() })
	storetest.RunCursorFinder(t, func(*testing.T) store.Store { return memstore.New() })
}

func TestLeaseContract(t *testing.T) {
	storetest.RunLease(t, func(*testing.T) store.Store { return memstore.New() })
}

func TestHeartbeatContract(t *testing.T) {
	storetest.RunHeartbeat(t, func(*testing.T) store.Store { return memstore.New() })
}
