package leasing

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/lease"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/store/memstore"
)

// creationOrder records the order of CreateCheckpoint calls and the most
// in flight at once.
type creationOrder struct {
	store.Store
	mu             sync.Mutex
	order          []string
	inFlight, most int
}

func (s *creationOrder) CreateCheckpoint(ctx context.Context, cp store.Checkpoint) (store.Checkpoint, error) {
	s.mu.Lock()
	s.order = append(s.order, cp.Partition)
	s.inFlight++
	s.most = max(s.most, s.inFlight)
	s.mu.Unlock()
	time.Sleep(time.Millisecond) // a store round trip, so that calls can overlap
	defer func() {
		s.mu.Lock()
		s.inFlight--
		s.mu.Unlock()
	}()
	return s.Store.CreateCheckpoint(ctx, cp)
}

// Instances that start together on a new scope create the missing
// checkpoints several at a time, each in its own order: they do not all
// race for the same item, one item at a time.
func TestLeaseCreationOfMissingCheckpointsIsConcurrentAndSpread(t *testing.T) {
	parts := make([]string, 200)
	for i := range parts {
		parts[i] = fmt.Sprintf("p%03d", i)
	}
	mem := memstore.New()
	first := map[string][]string{}
	for _, self := range []string{"a#1", "b#1"} {
		st := &creationOrder{Store: mem}
		m := &Manager{
			host: Host{Scope: "s", StartCursor: []byte("start"), Store: st, Epoch: func() uint64 { return 1 }},
			cfg:  Config{RenewInterval: 5 * time.Second},
			log:  service.MockResources().Logger(),
		}
		m.create(context.Background(), self, parts)
		assert.Len(t, st.order, len(parts), "every missing partition is created (or found created)")
		assert.Greater(t, st.most, 1, "creations overlap")
		assert.LessOrEqual(t, st.most, InFlight, "at most InFlight creations in flight")
		first[self] = st.order[:10]
	}
	assert.NotEqual(t, first["a#1"], first["b#1"], "two instances start creating with the same partitions")
	cps, err := mem.ListCheckpoints(context.Background(), "s")
	require.NoError(t, err)
	assert.Len(t, cps, len(parts))
}

// A round creates at most its budget of missing checkpoints, those first
// in the instance's own order (the ones its claims pick first): instances
// started together on a new scope do not each create every checkpoint
// before their first claim.
func TestLeaseReadCreatesAtMostItsBudgetInItsOwnOrder(t *testing.T) {
	parts := make([]string, 100)
	for i := range parts {
		parts[i] = fmt.Sprintf("p%03d", i)
	}
	mem := memstore.New()
	st := &creationOrder{Store: mem}
	m := &Manager{
		host: Host{Scope: "s", StartCursor: []byte("start"), Store: st, Epoch: func() uint64 { return 1 }},
		cfg:  Config{RenewInterval: 5 * time.Second},
		log:  service.MockResources().Logger(),
	}
	cps, err := m.readLeases(context.Background(), "a#1", parts, 30)
	require.NoError(t, err)
	assert.Len(t, cps, 30, "the read returns what exists after this round's creations")
	want := slices.Clone(parts)
	lease.Rendezvous("a#1", want)
	assert.ElementsMatch(t, want[:30], st.order, "the first 30 of a#1's order are created")

	cps, err = m.readLeases(context.Background(), "a#1", parts, 1000)
	require.NoError(t, err)
	assert.Len(t, cps, len(parts), "a later round creates the rest")
}
