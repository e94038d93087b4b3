package input

import (
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The config linter accepts discover: true without partitions, and names
// the mistake (not a Bloblang error) when neither is given.
func TestLintDiscoverWithoutPartitions(t *testing.T) {
	const base = `
paginated_partitions:
  scope: lint
  checkpoint: { backend: memory }
  simulated: { events_per_partition: 3 }
`
	// Discovery needs a provider that lists partitions (the simulated one
	// cannot: run rejects it, and so does lint).
	const discovering = `
paginated_partitions:
  scope: lint
  checkpoint: { backend: memory }
  http:
    url: 'http://127.0.0.1:1/p/${! @partition }'
    partitions_url: 'http://127.0.0.1:1/partitions'
    successor: root = this.next | deleted()
    contract: { empty_page: end_of_data, positions: ordered, coordinate: integer }
`
	for _, tc := range []struct {
		name, extra, err string
	}{
		{name: "discover without partitions", extra: "  discover: true\n"},
		{name: "discover with the simulated provider", extra: "  discover: true\n", err: "simulated: at least one partition is required"},
		{name: "partitions", extra: "  partitions: [ a ]\n"},
		{name: "neither", err: "either partitions or discover: true is required"},
		{name: "empty partitions", extra: "  partitions: []\n", err: "either partitions or discover: true is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conf := base
			if tc.name == "discover without partitions" {
				conf = discovering
			}
			err := service.NewStreamBuilder().AddInputYAML(conf + tc.extra)
			if tc.err == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.err)
			assert.NotContains(t, err.Error(), "failed assignment")
		})
	}
}

// max_pages_in_flight has one policy for its lower bound: below 1 the
// config is refused, naming the field (the partition machine asserts it,
// chain.New, and never raises it silently).
func TestMaxPagesInFlightBelowOneIsRefused(t *testing.T) {
	const base = `
paginated_partitions:
  scope: lint
  checkpoint: { backend: memory }
  simulated: { events_per_partition: 3 }
  partitions: [ a ]
`
	for _, tc := range []struct{ value, err string }{
		{"1", ""},
		{"0", "max_pages_in_flight must be at least 1, got 0"},
		{"-2", "max_pages_in_flight must be at least 1, got -2"},
	} {
		t.Run(tc.value, func(t *testing.T) {
			err := service.NewStreamBuilder().AddInputYAML(base + "  max_pages_in_flight: " + tc.value + "\n")
			if tc.err == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.err)
		})
	}
}

// max_poll_interval reaches the partition machine as it is written, is off
// by default, and a negative one is refused with its field's name.
func TestMaxPollIntervalReachesTheMachine(t *testing.T) {
	for _, tc := range []struct {
		name string
		yaml string
		want time.Duration
		err  string
	}{
		{"default: no back-off", "", 0, ""},
		{"written", "max_poll_interval: 30s\n", 30 * time.Second, ""},
		{"negative", "max_poll_interval: -1s\n", 0, "max_poll_interval must not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conf, err := Spec().ParseYAML("scope: s\npartitions: [ p0 ]\nsimulated:\n  events_per_partition: 1\n"+tc.yaml, nil)
			require.NoError(t, err)
			c, err := readConfig(conf)
			require.NoError(t, err)
			err = c.validate()
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, c.MaxPollInterval)
		})
	}
}

// promotion_min_pages and promotion_linger reach the partition machine as
// written, wait for a second page for at most 50ms by default, and values
// out of range are refused with their field's name.
func TestPromotionWaitReachesTheMachine(t *testing.T) {
	for _, tc := range []struct {
		name     string
		yaml     string
		minPages int
		linger   time.Duration
		err      string
	}{
		{"default: two pages, 50ms", "", 2, 50 * time.Millisecond, ""},
		{"written", "promotion_min_pages: 4\npromotion_linger: 200ms\n", 4, 200 * time.Millisecond, ""},
		{"no wait", "promotion_min_pages: 1\n", 1, 50 * time.Millisecond, ""},
		{"zero pages", "promotion_min_pages: 0\n", 0, 0, "promotion_min_pages must be at least 1"},
		{"too many pages", "promotion_min_pages: 1025\n", 0, 0, "promotion_min_pages must be between 1 and 1024"},
		{"negative linger", "promotion_linger: -1ms\n", 0, 0, "promotion_linger must not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conf, err := Spec().ParseYAML("scope: s\npartitions: [ p0 ]\nsimulated:\n  events_per_partition: 1\n"+tc.yaml, nil)
			require.NoError(t, err)
			c, err := readConfig(conf)
			if err == nil {
				err = c.validate()
			}
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.minPages, c.PromoteMinPages)
			assert.Equal(t, tc.linger, c.PromoteLinger)
		})
	}
}

// witness_group_pages reaches the machine: its default, a written value
// and the refused ones.
func TestWitnessGroupPagesReachesTheMachine(t *testing.T) {
	for _, tc := range []struct {
		name  string
		yaml  string
		pages int
		err   string
	}{
		{"default: two pages", "", 2, ""},
		{"written", "witness_group_pages: 8\n", 8, ""},
		{"alone", "witness_group_pages: 1\n", 1, ""},
		{"zero", "witness_group_pages: 0\n", 0, "witness_group_pages must be at least 1"},
		{"too many", "witness_group_pages: 9\n", 0, "witness_group_pages must be between 1 and 8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conf, err := Spec().ParseYAML("scope: s\npartitions: [ p0 ]\nsimulated:\n  events_per_partition: 1\n"+tc.yaml, nil)
			require.NoError(t, err)
			c, err := readConfig(conf)
			if err == nil {
				err = c.validate()
			}
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.pages, c.WitnessGroupPages)
		})
	}
}
