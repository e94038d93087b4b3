package store_test

import (
	"testing"

	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/store/storetest"
)

// The lease contract on the in-memory twin (cache/lease_test.go runs the
// same suite against DynamoDB).
func TestMemStoreLeaseContract(t *testing.T) {
	storetest.RunLease(t, func(*testing.T) store.Store { return store.NewMemStore() })
}
