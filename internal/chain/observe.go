package chain

import (
	"fmt"

	"github.com/tidemark/tidemark/internal/reconcile"
)

// RetryClass is how the machine took a fetched response
// (docs/design.md#retry-classification): one of the classifier's classes
// (reconcile.RetryClass, converted), or an answer that proved nothing and is
// polled again (ClassIdle, ClassEmptyNoEvidence). The zero value is
// invalid.
type RetryClass uint8

const (
	ClassFirstResponse        = RetryClass(reconcile.FirstResponse)
	ClassExactReplay          = RetryClass(reconcile.ExactReplay)
	ClassTokenRotation        = RetryClass(reconcile.TokenRotation)
	ClassShiftedPage          = RetryClass(reconcile.ShiftedPage)
	ClassUnprovableDivergence = RetryClass(reconcile.UnprovableDivergence)
	ClassHeadGrowth           = RetryClass(reconcile.HeadGrowth)
	// ClassIdle: an empty response that loops to its own cursor. The
	// machine's own classes lie far above the classifier's, so a class the
	// classifier adds never takes one of their values (a test pins it).
	ClassIdle RetryClass = 0x80
	// ClassEmptyNoEvidence: an empty response without evidence bound to
	// it.
	ClassEmptyNoEvidence RetryClass = 0x81
)

// classOf is the machine's class of a classifier's class.
func classOf(c reconcile.RetryClass) RetryClass { return RetryClass(c) }

// String is the class's name: the tidemark_retries label, the
// tidemark_retry_class metadata and the traces show it.
func (c RetryClass) String() string {
	switch {
	case reconcile.RetryClass(c).Known():
		return reconcile.RetryClass(c).String()
	case c == ClassIdle:
		return "idle"
	case c == ClassEmptyNoEvidence:
		return "empty_no_evidence"
	}
	return fmt.Sprintf("retry_class(%d)", uint8(c))
}

// Metric is what a Count counts: an observation of the machine. A driver
// maps the ones it exports to its own metrics (the input's table in
// input/metrics.go names the Prometheus metrics, docs/design.md#metadata-and-metrics);
// the simulator adds them to its statistics. The zero value is invalid.
type Metric uint8

const (
	// MetricPagesFetched: a response became a page of the chain.
	MetricPagesFetched Metric = 1 + iota
	// MetricEventsEmitted: N events were emitted.
	MetricEventsEmitted
	// MetricPromotions is counted once per promotion write, with N the
	// pages it promoted (more than one when coalesced).
	MetricPromotions
	// MetricCASConflicts: a promotion lost its compare-and-swap.
	MetricCASConflicts
	// MetricFetchErrors: a fetch failed.
	MetricFetchErrors
	// MetricParks: the partition parked.
	MetricParks
	// MetricRestarts: a restart from a stable boundary.
	MetricRestarts
	// MetricRetries is counted for every response, with its class
	// (Count.Class), first_response included.
	MetricRetries
	// MetricParked moves by N (+1, -1): the partition waits for an unpark.
	MetricParked
	// MetricHolds: a complete head page was held.
	MetricHolds
	// MetricRefusals: a head page's promotion was refused.
	MetricRefusals
	// MetricBadResponses: a response contradicts durable evidence (a
	// receipt conflict, a moved event): park.
	MetricBadResponses
	// MetricMalformed: a malformed answer (Config.FetchRetries): fetched
	// again, or the one that parks the partition.
	MetricMalformed
	// MetricViolations counts contract violations, with the kind
	// (Count.Violation) (docs/design.md#contract-monitors).
	MetricViolations
	// MetricIncarnationChanges counts the incarnation changes a partition
	// recorded: the reset written (docs/design.md#source-incarnations).
	MetricIncarnationChanges
	// MetricRereadPasses counts the re-read passes a partition started
	// (docs/design.md#re-read-windows).
	MetricRereadPasses
	// MetricRereadSkipped counts the events a pass read again and did not
	// emit: a durable receipt shows them delivered.
	MetricRereadSkipped
)

// metricNames name each Metric in traces and goldens: the input's metric
// name for the ones it exports (input/metrics.go holds that mapping).
var metricNames = [...]string{
	MetricPagesFetched:       "tidemark_pages_fetched",
	MetricEventsEmitted:      "tidemark_events_emitted",
	MetricPromotions:         "tidemark_promotions",
	MetricCASConflicts:       "tidemark_cas_conflicts",
	MetricFetchErrors:        "tidemark_fetch_errors",
	MetricParks:              "tidemark_parks",
	MetricRestarts:           "tidemark_restarts",
	MetricRetries:            "tidemark_retries",
	MetricParked:             "tidemark_parked_partitions",
	MetricHolds:              "holds",
	MetricRefusals:           "refusals",
	MetricBadResponses:       "bad_responses",
	MetricMalformed:          "tidemark_malformed_responses",
	MetricViolations:         "tidemark_contract_violations",
	MetricIncarnationChanges: "tidemark_incarnation_changes",
	MetricRereadPasses:       "tidemark_reread_passes",
	MetricRereadSkipped:      "tidemark_reread_skipped_events",
}

func (m Metric) String() string {
	if m > 0 && int(m) < len(metricNames) {
		return metricNames[m]
	}
	return fmt.Sprintf("metric(%d)", uint8(m))
}
