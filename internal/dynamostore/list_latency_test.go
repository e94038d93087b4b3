package dynamostore

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/store"
)

// BenchmarkListCheckpointsDynalite measures one ListCheckpoints of 1,000
// partitions with 36-character names (the partition-index Query and ten
// BatchGetItems of 100 consistent reads, one after the other): the figure
// the scale simulation's dynalite model is checked against
// (internal/clustersim.DynaliteModel, docs/scale.md).
func BenchmarkListCheckpointsDynalite(b *testing.B) {
	rc := NewRequestCounter()
	s := newTestStore(b, func(c *DynamoConfig) { c.ClientOptions = append(c.ClientOptions, rc.Option()) })
	const parts = 1000
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range parts {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			createAt(b, s, store.Key{Scope: "bench", Partition: fmt.Sprintf("%08x-0000-4000-8000-%012x", uint32(i)*2654435761, i)}, "C0")
		})
	}
	wg.Wait()
	rc.Reset()
	for b.Loop() {
		cps, err := s.ListCheckpoints(b.Context(), "bench")
		require.NoError(b, err)
		require.Len(b, cps, parts)
	}
	b.ReportMetric(float64(rc.Total())/float64(b.N), "requests/op")
}
