package simulated_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/provider/providertest"
	"github.com/tidemark/tidemark/provider/simulated"
)

// TestProviderContract runs the provider contract suite against the
// simulated source, with and without rotating tokens (the source is its own
// fake: no faults are injected, so every replay is exact).
func TestProviderContract(t *testing.T) {
	for _, rotate := range []bool{false, true} {
		t.Run(fmt.Sprintf("rotate_tokens=%v", rotate), func(t *testing.T) {
			providertest.Run(t, func(t *testing.T) providertest.Fixture {
				parts := []string{"p0", "p1", "p2"}
				p, err := simulated.New(simulated.Config{Partitions: parts, EventsPerPartition: 23, PageSize: 5, Seed: 7, RotateTokens: rotate})
				require.NoError(t, err)
				events := map[string][]string{}
				for _, part := range parts {
					for pos := int64(1); pos <= 23; pos++ {
						events[part] = append(events[part], simulated.EventID(part, pos))
					}
				}
				return providertest.Fixture{Provider: p, Partitions: parts, Events: events, Replayable: true, Lists: true}
			})
		})
	}
}
