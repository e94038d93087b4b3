package dynamostore

import (
	"testing"

	"github.com/tidemark/tidemark/internal/dynalitetest"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/store/storetest"
)

// The lease contract against dynalite: the same suite the in-memory twin
// passes (internal/store/lease_test.go).
func TestDynamoStoreLeaseContract(t *testing.T) {
	dynalitetest.Endpoint(t)
	storetest.RunLease(t, func(t *testing.T) store.Store { return newTestStore(t) })
}
