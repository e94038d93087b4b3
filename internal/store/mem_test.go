package store_test

import (
	"testing"

	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/store/storetest"
)

func TestMemStoreContract(t *testing.T) {
	storetest.Run(t, func(*testing.T) store.Store { return store.NewMemStore() })
	storetest.RunCursorFinder(t, func(*testing.T) store.Store { return store.NewMemStore() })
}
