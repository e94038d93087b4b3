package input

import (
	"sync"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/tidemark/tidemark/internal/chain"
)

// inputMetrics are the input's counters; every name starts with tidemark_.
type inputMetrics struct {
	pagesFetched *service.MetricCounter
	// promotionWrites counts the conditional writes that promoted pages
	// (fewer than tidemark_promotions when coalesced).
	promotionWrites *service.MetricCounter
	// witnessesPruned counts witnesses deleted below durable checkpoints.
	witnessesPruned *service.MetricCounter
	// membershipChanges counts epochs this input wrote.
	membershipChanges *service.MetricCounter
	// incarnationChanges counts partitions reset into a new source
	// incarnation (docs/design.md#source-incarnations).
	incarnationChanges *service.MetricCounter
	eventsEmitted      *service.MetricCounter
	promotions         *service.MetricCounter
	casConflicts       *service.MetricCounter
	fetchErrors        *service.MetricCounter
	malformed          *service.MetricCounter
	parks              *service.MetricCounter
	restarts           *service.MetricCounter
	retries            *service.MetricCounter
	// violations counts contract violations by kind
	// (docs/design.md#contract-monitors).
	violations *service.MetricCounter
	parked     *service.MetricGauge
	watermark  *service.MetricGauge
	generation *service.MetricGauge
	frontier   *service.MetricGauge
	lag        *service.MetricGauge

	// parkedMu orders the count's changes with the gauge's Sets: two
	// partitions parking at once must not leave the gauge at the first
	// one's count (seen under load: 1 shown, 2 parked).
	parkedMu    sync.Mutex
	parkedCount int64
	// states counts this input's partitions by chain.State (state.go).
	states stateCounts
}

// setParked adjusts the number of parked partitions and sets the gauge to
// it (custom exporters see every Incr/Decr of a gauge as a Set on a fresh
// gauge, so the count is kept here).
func (m *inputMetrics) setParked(delta int64) {
	m.parkedMu.Lock()
	defer m.parkedMu.Unlock()
	m.parkedCount += delta
	m.parked.Set(m.parkedCount)
}

func newInputMetrics(m *service.Metrics) *inputMetrics {
	im := &inputMetrics{
		pagesFetched:       m.NewCounter("tidemark_pages_fetched"),
		membershipChanges:  m.NewCounter("tidemark_membership_changes"),
		incarnationChanges: m.NewCounter(chain.MetricIncarnationChanges),
		promotionWrites:    m.NewCounter("tidemark_promotion_writes"),
		witnessesPruned:    m.NewCounter("tidemark_witnesses_pruned"),
		eventsEmitted:      m.NewCounter("tidemark_events_emitted"),
		promotions:         m.NewCounter("tidemark_promotions"),
		casConflicts:       m.NewCounter("tidemark_cas_conflicts"),
		fetchErrors:        m.NewCounter("tidemark_fetch_errors"),
		malformed:          m.NewCounter("tidemark_malformed_responses"),
		parks:              m.NewCounter("tidemark_parks"),
		restarts:           m.NewCounter("tidemark_restarts"),
		retries:            m.NewCounter("tidemark_retries", "class"),
		violations:         m.NewCounter(chain.MetricViolations, "kind"),
		parked:             m.NewGauge("tidemark_parked_partitions"),
		watermark:          m.NewGauge("tidemark_partition_watermark", "partition"),
		generation:         m.NewGauge("tidemark_partition_generation", "partition"),
		frontier:           m.NewGauge("tidemark_frontier", "scope"),
		lag:                m.NewGauge("tidemark_partition_lag", "partition"),
	}
	im.states.gauge = m.NewGauge("tidemark_partitions_in_state", "state") // state.go
	im.parked.Set(0)                                                      // the series exists before anything parks
	return im
}

func (m *inputMetrics) retryClass(class string) {
	if class == "" || class == "first_response" {
		return
	}
	m.retries.Incr(1, class)
}

// count adds a chain machine's Count to the metric of its name; the
// machine's other observations are not exported.
func (m *inputMetrics) count(c chain.Count) {
	switch c.Metric {
	case chain.MetricPagesFetched:
		m.pagesFetched.Incr(c.N)
	case chain.MetricEventsEmitted:
		m.eventsEmitted.Incr(c.N)
	case chain.MetricPromotions:
		m.promotions.Incr(c.N)
		m.promotionWrites.Incr(1)
	case chain.MetricCASConflicts:
		m.casConflicts.Incr(c.N)
	case chain.MetricFetchErrors:
		m.fetchErrors.Incr(c.N)
	case chain.MetricMalformed:
		m.malformed.Incr(c.N)
	case chain.MetricParks:
		m.parks.Incr(c.N)
	case chain.MetricRestarts:
		m.restarts.Incr(c.N)
	case chain.MetricRetries:
		m.retryClass(c.Label)
	case chain.MetricParked:
		m.setParked(c.N)
	case chain.MetricViolations:
		m.violations.Incr(c.N, c.Label)
	}
}
