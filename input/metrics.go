package input

import (
	"errors"
	"maps"
	"reflect"
	"slices"
	"sync"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/tidemark/tidemark/internal/chain"
	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/store"
)

// chainMetric is how the input exports one of the chain machine's
// observations: the metric's name and its label (empty: unlabelled).
type chainMetric struct {
	name, label string
}

// chainMetrics is the one mapping from the chain machine's observations
// (chain.Count, chain.Metric) to the input's Prometheus counters, their
// names and labels (docs/design.md#metadata-and-metrics). The label's value
// is the count's class (tidemark_retries) or violation kind
// (tidemark_contract_violations). chain.MetricParked moves the
// tidemark_parked_partitions gauge (setParked); the observations listed
// nowhere (holds, refusals, bad responses) are not exported.
var chainMetrics = map[chain.Metric]chainMetric{
	chain.MetricPagesFetched:       {name: "tidemark_pages_fetched"},
	chain.MetricEventsEmitted:      {name: "tidemark_events_emitted"},
	chain.MetricPromotions:         {name: "tidemark_promotions"},
	chain.MetricCASConflicts:       {name: "tidemark_cas_conflicts"},
	chain.MetricFetchErrors:        {name: "tidemark_fetch_errors"},
	chain.MetricMalformed:          {name: "tidemark_malformed_responses"},
	chain.MetricParks:              {name: "tidemark_parks"},
	chain.MetricRestarts:           {name: "tidemark_restarts"},
	chain.MetricRetries:            {name: "tidemark_retries", label: "class"},
	chain.MetricViolations:         {name: "tidemark_contract_violations", label: "kind"},
	chain.MetricIncarnationChanges: {name: "tidemark_incarnation_changes"},
	chain.MetricRereadPasses:       {name: "tidemark_reread_passes"},
	chain.MetricRereadSkipped:      {name: "tidemark_reread_skipped_events"},
}

// inputMetrics are the input's counters; every name starts with tidemark_.
type inputMetrics struct {
	// chain holds a counter per chainMetrics entry.
	chain map[chain.Metric]*service.MetricCounter
	// promotionWrites counts the conditional writes that promoted pages
	// (fewer than tidemark_promotions when coalesced).
	promotionWrites *service.MetricCounter
	// witnessesPruned counts witnesses deleted below durable checkpoints.
	witnessesPruned *service.MetricCounter
	// membershipChanges counts epochs this input wrote.
	membershipChanges *service.MetricCounter
	parked            *service.MetricGauge
	watermark         *service.MetricGauge
	generation        *service.MetricGauge
	frontier          *service.MetricGauge
	lag               *service.MetricGauge
	// frontierWithheld is 1 while the scope's frontier is not proven (no
	// scalar: only the vector), 0 once it is.
	frontierWithheld *service.MetricGauge
	// storeErrors counts the store calls that failed (after the store's
	// own bounded retries) by operation: not a lost condition, not an
	// absent record (storeErrorOps).
	storeErrors *service.MetricCounter

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
		chain:             make(map[chain.Metric]*service.MetricCounter, len(chainMetrics)),
		membershipChanges: m.NewCounter("tidemark_membership_changes"),
		promotionWrites:   m.NewCounter("tidemark_promotion_writes"),
		witnessesPruned:   m.NewCounter("tidemark_witnesses_pruned"),
		parked:            m.NewGauge("tidemark_parked_partitions"),
		watermark:         m.NewGauge("tidemark_partition_watermark", "partition"),
		generation:        m.NewGauge("tidemark_partition_generation", "partition"),
		frontier:          m.NewGauge("tidemark_frontier", "scope"),
		lag:               m.NewGauge("tidemark_partition_lag", "partition"),
		frontierWithheld:  m.NewGauge("tidemark_frontier_withheld", "scope"),
		storeErrors:       m.NewCounter("tidemark_store_errors", "op"),
	}
	for _, k := range slices.Sorted(maps.Keys(chainMetrics)) {
		cm := chainMetrics[k]
		if cm.label != "" {
			im.chain[k] = m.NewCounter(cm.name, cm.label)
		} else {
			im.chain[k] = m.NewCounter(cm.name)
		}
	}
	im.states.gauge = m.NewGauge("tidemark_partitions_in_state", "state") // state.go
	im.parked.Set(0)                                                      // the series exists before anything parks
	// Every counter an alert rule reads exists at 0 from the start, so the
	// first increment is an increase (deploy/prometheus): the unlabelled
	// ones, each contract violation kind and each store operation.
	for _, k := range slices.Sorted(maps.Keys(chainMetrics)) {
		switch cm := chainMetrics[k]; {
		case cm.label == "":
			im.chain[k].Incr(0)
		case k == chain.MetricViolations:
			for v := reconcile.TokensRotated; v <= reconcile.OffsetShapedSuccessor; v++ {
				im.chain[k].Incr(0, v.String())
			}
		}
	}
	for _, op := range storeErrorOps {
		im.storeErrors.Incr(0, op)
	}
	im.membershipChanges.Incr(0)
	im.promotionWrites.Incr(0)
	im.witnessesPruned.Incr(0)
	return im
}

// storeCallOps names, by the type name of a partition's chain action, the
// store call that chainstore.Do makes for it: the op label of
// tidemark_store_errors. TestStoreErrorsCoverEveryChainstoreCall reads
// chainstore.Do's cases and fails on one missing here.
var storeCallOps = map[string]string{
	"Load": "load", "PutWitness": "put_witness", "PutWitnesses": "put_witnesses", "RecordReceipt": "record_receipt", "Abandon": "abandon",
	"Promote": "promote", "Resolve": "resolve", "Park": "park", "NoteFailure": "note_failure",
	"Reincarnate": "reincarnate", "WaitUnparked": "wait_unparked", "LoadReceipts": "load_receipts",
	"PutReceipts": "put_receipts", "PruneReceipts": "prune_receipts", "Withdraw": "withdraw",
}

// storeErrorOps are the op labels of tidemark_store_errors: a partition
// worker's store calls (storeCallOps), and the publication of the scope's
// frontier.
var storeErrorOps = append(slices.Sorted(maps.Values(storeCallOps)), "publish_frontier")

// storeCall names the store call a partition's action a makes (an
// element of storeErrorOps), or "" for an action that is no store call.
func storeCall(a chain.Action) string {
	if a == nil {
		return ""
	}
	return storeCallOps[reflect.TypeOf(a).Name()]
}

// storeResultErr is the error of a store call's answer to the machine.
func storeResultErr(in chain.Input) error {
	switch r := in.(type) {
	case chain.Loaded:
		return r.Err
	case chain.WitnessStored:
		return r.Err
	case chain.ReceiptStored:
		return r.Err
	case chain.Abandoned:
		return r.Err
	case chain.Promoted:
		return r.Err
	case chain.Resolved:
		return r.Err
	case chain.Parked:
		return r.Err
	case chain.FailureNoted:
		return r.Err
	case chain.Reincarnated:
		return r.Err
	case chain.ParkChecked:
		return r.Err
	case chain.ReceiptsLoaded:
		return r.Err
	case chain.ReceiptsStored:
		return r.Err
	case chain.ReceiptsPruned:
		return r.Err
	case chain.Withdrawn:
		return r.Err
	}
	return nil
}

// isStoreFailure reports whether err is a failed store call: not a lost
// condition (contention, counted as tidemark_cas_conflicts where it is a
// promotion's), not an absent record, not a refused argument.
func isStoreFailure(err error) bool {
	return err != nil && !errors.Is(err, store.ErrFenced) && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrInvalid)
}

// storeFailureOp is the op label of the answer in to a partition's store
// call a when that answer is a failure, else "".
func storeFailureOp(a chain.Action, in chain.Input) string {
	if op := storeCall(a); op != "" && isStoreFailure(storeResultErr(in)) {
		return op
	}
	return ""
}

// storeCalled counts the answer in of a partition's store call a when it
// is a failure.
func (m *inputMetrics) storeCalled(a chain.Action, in chain.Input) {
	if op := storeFailureOp(a, in); op != "" {
		m.storeErrors.Incr(1, op)
	}
}

// count adds a chain machine's Count to its metric (chainMetrics); the
// machine's other observations are not exported. Every retry class is
// exported but first_response (the normal case).
func (m *inputMetrics) count(c chain.Count) {
	switch c.Metric {
	case chain.MetricParked:
		m.setParked(c.N)
		return
	case chain.MetricRetries:
		if c.Class == 0 || c.Class == chain.ClassFirstResponse {
			return
		}
	case chain.MetricPromotions:
		m.promotionWrites.Incr(1)
	}
	ctr, ok := m.chain[c.Metric]
	if !ok {
		return
	}
	if chainMetrics[c.Metric].label != "" {
		ctr.Incr(c.N, c.Label())
		return
	}
	ctr.Incr(c.N)
}
