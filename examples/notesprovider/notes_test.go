package notesprovider_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	_ "github.com/redpanda-data/benthos/v4/public/components/pure"
	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/examples/notesprovider"
	"github.com/tidemark/tidemark/provider/providertest"

	// The tidemark components, as a binary links them (the input among
	// them); notesprovider registers itself by being imported.
	_ "github.com/tidemark/tidemark/plugin"
)

// TestProviderContract runs the provider contract suite against the notes
// provider and the fake API: three notebooks, one of them empty, pages of 3.
func TestProviderContract(t *testing.T) {
	providertest.Run(t, func(t *testing.T) providertest.Fixture {
		fake, url := newFakeAPI(t, map[string]int{"work": 10, "home": 3, "empty": 0})
		return providertest.Fixture{
			Provider:   notesprovider.New(url, 3, 5*time.Second),
			Partitions: fake.order,
			Events:     map[string][]string{"work": fake.ids("work"), "home": fake.ids("home"), "empty": nil},
			Replayable: true,
			Lists:      true,
			Inject:     fake.arm,
		}
	})
}

// TestInputReadsNotebooks runs the paginated_partitions input with a
// `notes` object (the registry put it in the input's config) over the fake
// API: every note arrives, and the input ends once every notebook's last
// page is promoted.
func TestInputReadsNotebooks(t *testing.T) {
	fake, url := newFakeAPI(t, map[string]int{"work": 10, "home": 4})
	b := service.NewStreamBuilder()
	require.NoError(t, b.SetLoggerYAML("level: none"))
	require.NoError(t, b.AddInputYAML(fmt.Sprintf(`
paginated_partitions:
  scope: notes-example
  partitions: [ work, home ]
  exit_when_complete: true
  checkpoint:
    backend: memory
  notes:
    base_url: %s
    page_size: 3
`, url)))
	got := map[string]int{}
	require.NoError(t, b.AddConsumerFunc(func(_ context.Context, m *service.Message) error {
		id, _ := m.MetaGet("tidemark_event_id")
		got[id]++ // AddConsumerFunc calls are serial
		return nil
	}))
	strm, err := b.Build()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, strm.Run(ctx))
	for _, nb := range []string{"work", "home"} {
		for _, id := range fake.ids(nb) {
			require.Positive(t, got[id], "note %s was delivered", id)
		}
	}
	require.Len(t, got, 14, "only the fake's notes were delivered")
}

// TestLintKnowsTheNotesObject: the input's one-of comes from the registry,
// so a config with both `notes` and `simulated` is refused, naming notes
// among the choices.
func TestLintKnowsTheNotesObject(t *testing.T) {
	err := service.NewStreamBuilder().AddInputYAML(`
paginated_partitions:
  scope: s
  partitions: [ a ]
  checkpoint:
    backend: memory
  notes:
    base_url: http://127.0.0.1:1
  simulated:
    events_per_partition: 1
`)
	require.ErrorContains(t, err, "exactly one of http, notes or simulated must be set")
}
