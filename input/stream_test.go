package input

// Stream tests: the paginated_partitions input inside a real Benthos stream
// (service.NewStreamBuilder), fed by the simulated provider, against the
// in-memory twin and against DynamoDB (dynalite, a fresh table per test; run
// with ./scripts/with-dynalite, the dynamodb subtests skip without it).
//
// Every test ends with the same oracles (harness_test.go):
//   - every generated event id simulated.EventID(p, 1..N) was acknowledged
//     by the output at least once (docs/design.md#invariants, invariant 9,
//     No loss);
//   - every durable checkpoint is at generation > 1 with watermark N;
//   - the promotions the input made form one chain per partition: page
//     order, each from the cursor the previous one wrote, each bound to the
//     durable witness that issued its successor, no gap in positions,
//     watermarks never lower (invariants 1, 2, 3, 9);
//   - every message named a witness that was durable before it left the
//     input (invariant 4).

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/e2etest"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/provider/simulated"
)

var threeParts = []string{"p0", "p1", "p2"}

// streamTimeout is how long a stream gets to complete: generous, a
// deadline turns a hang into a failure and measures nothing.
const streamTimeout = e2etest.Patience

// TestStreamNoFaults is the baseline: every event once, every checkpoint at
// the end of its partition.
func TestStreamNoFaults(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		h := newHarness(t, b, threeParts, 120)
		h.runToCompletion(simConfig{maxBatch: 4}, nil, nil, streamTimeout)
		h.requireAllDelivered()
		h.requireCompleteCheckpoints()
	})
}

// TestStreamExportsChainCountsByTheTable: the chain machine's typed counts
// reach the metrics input/metrics.go names: pages, events and promotions
// are counted, a write that promoted coalesced pages counts once in
// tidemark_promotion_writes, and the normal class first_response is the
// one retry class not exported.
func TestStreamExportsChainCountsByTheTable(t *testing.T) {
	h := newHarness(t, memoryBackend, threeParts, 120)
	h.runToCompletion(simConfig{maxBatch: 4}, nil, nil, streamTimeout)
	h.requireAllDelivered()
	assert.GreaterOrEqual(t, h.metrics.get("tidemark_events_emitted"), int64(3*120))
	assert.Positive(t, h.metrics.get("tidemark_pages_fetched"))
	writes, promoted := h.metrics.get("tidemark_promotion_writes"), h.metrics.get("tidemark_promotions")
	assert.Positive(t, writes)
	assert.GreaterOrEqual(t, promoted, writes, "a write promotes one page or more")
	assert.Zero(t, h.metrics.get("tidemark_retries{first_response}"))
	assert.Zero(t, h.metrics.get("tidemark_parks"))
}

// TestStreamRegisteredComponent runs the component exactly as a user's
// binary does: the global environment (service.NewStreamBuilder), no
// instruments besides the consumer.
func TestStreamRegisteredComponent(t *testing.T) {
	h := newHarness(t, memoryBackend, threeParts, 50)
	b := service.NewStreamBuilder()
	if err := b.SetLoggerYAML("level: none"); err != nil {
		t.Fatal(err)
	}
	if err := b.AddInputYAML(h.inputYAML(simConfig{pageSize: 7, exitWhenComplete: true, faults: "rotate_tokens: true"})); err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	if err := b.AddConsumerFunc(func(_ context.Context, m *service.Message) error {
		id, _ := m.MetaGet(MetaEventID)
		got[id]++ // AddConsumerFunc calls are serial
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	strm, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), streamTimeout)
	defer cancel()
	if err := strm.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if miss := h.missing(got); len(miss) > 0 {
		t.Fatalf("missing events: %v", miss)
	}
	for _, p := range h.parts {
		cp, err := h.st.LoadCheckpoint(ctx, store.Key{Scope: h.scope, Partition: p})
		if err != nil || cp.Watermark.Int != h.n || cp.Generation <= 1 {
			t.Fatalf("%s: checkpoint %+v, %v", p, cp, err)
		}
	}
}

// faultCase is one injected fault of the simulated provider and the
// evidence that it was exercised.
type faultCase struct {
	name   string
	faults string
	// nacks: nack the first delivery of every k-th batch (0: never), so
	// that cursors are fetched again and retry faults can show.
	nacks int
	// exercised returns a description of the evidence, or "" when the
	// fault never fired.
	exercised func(h *harness) string
}

func metricEvidence(name string) func(h *harness) string {
	return func(h *harness) string {
		if n := h.metrics.get(name); n > 0 {
			return fmt.Sprintf("%s = %d", name, n)
		}
		return ""
	}
}

var faultCases = []faultCase{
	{
		// Kinesis-style rotation: a retry returns the same events with
		// another successor; only that response's successor is promoted.
		name: "rotate_tokens", faults: "rotate_tokens: true", nacks: 4,
		exercised: metricEvidence("tidemark_retries{token_rotation}"),
	},
	{
		// The shifted page of docs/design.md#retry-example: a retry
		// returns the page grown by one event.
		name: "shift_rate", faults: "shift_rate: 0.6", nacks: 4,
		exercised: metricEvidence("tidemark_retries{shifted_page}"),
	},
	{
		// Transient empty pages without evidence: no answer, polled again,
		// never promoted (with nacks, also on retries of cursors whose
		// earlier response had events).
		name: "empty_rate", faults: "empty_rate: 0.25", nacks: 4,
		exercised: metricEvidence("tidemark_retries{empty_no_evidence}"),
	},
	{
		// Transient errors, some outlasting fetch_retries.
		name: "transient_error_rate", faults: "transient_error_rate: 0.5",
		exercised: metricEvidence("tidemark_fetch_errors"),
	},
	{
		// Expired cursors: restart right after the durable watermark.
		name: "expire_rate", faults: "expire_rate: 0.15",
		exercised: metricEvidence("tidemark_restarts"),
	},
	{
		// Malformed answers, one in five: each is fetched again on the same
		// cursor (at most malformed_streak = 2 in a row, within
		// fetch_retries = 2), so none parks and nothing is lost.
		name: "malformed_rate", faults: "malformed_rate: 0.2",
		exercised: metricEvidence("tidemark_malformed_responses"),
	},
	{
		// Everything at once, with nacks.
		name: "all", nacks: 5,
		faults: "rotate_tokens: true\nshift_rate: 0.3\nempty_rate: 0.1\ntransient_error_rate: 0.2\nexpire_rate: 0.1\nmalformed_rate: 0.1",
		exercised: func(h *harness) string {
			var out []string
			for _, m := range []string{"tidemark_retries{token_rotation}", "tidemark_retries{shifted_page}", "tidemark_fetch_errors", "tidemark_restarts", "tidemark_malformed_responses"} {
				if h.metrics.get(m) == 0 {
					return ""
				}
				out = append(out, fmt.Sprintf("%s = %d", m, h.metrics.get(m)))
			}
			return strings.Join(out, ", ")
		},
	},
}

// TestStreamFaults: under each injected fault every event id reaches the
// output, no partition parks and the checkpoints end at the end of the
// data.
func TestStreamFaults(t *testing.T) {
	for _, fc := range faultCases {
		t.Run(fc.name, func(t *testing.T) {
			forEachBackend(t, func(t *testing.T, b backend) {
				h := newHarness(t, b, threeParts, 120)
				var consume consumer
				if fc.nacks > 0 {
					consume = nackFirst(fc.nacks)
				}
				h.runToCompletion(simConfig{maxBatch: 4, seed: 7, faults: fc.faults}, consume, nil, streamTimeout)
				h.requireAllDelivered()
				h.requireCompleteCheckpoints()
				require.Zero(t, h.metrics.get("tidemark_parks"), "no fault of this kind parks a partition")
				ev := fc.exercised(h)
				if ev == "" {
					t.Fatalf("the %s fault was never exercised", fc.name)
				}
				t.Logf("fault exercised: %s", ev)
			})
		})
	}
}

// TestStreamMalformedParks: a partition whose every answer is malformed
// (the simulated provider's persistent fault) is fetched fetch_retries+1
// times (the harness sets fetch_retries: 2), each retry logged at warn with
// the partition and the malformation, then parks with a reason that names
// the class, the attempts, the partition and the last malformation. The
// other partitions complete meanwhile; the parked one stays parked and
// fetches nothing more; an unpark gives its page the whole budget again,
// and it parks again (parking: docs/design.md#failures).
func TestStreamMalformedParks(t *testing.T) {
	const n, pageSize, attempts = 120, 10, 3
	parker := "p1"
	forEachBackend(t, func(t *testing.T, b backend) {
		h := newHarness(t, b, threeParts, n)
		r := h.start(h.build(simConfig{pageSize: pageSize, maxBatch: 4, exitWhenComplete: true,
			faults: fmt.Sprintf("malformed: [ %s ]", parker)}, nil, nil))
		ctx := context.Background()
		key := func(p string) store.Key { return store.Key{Scope: h.scope, Partition: p} }
		parkedNow := func() (store.Checkpoint, bool) {
			cp, err := h.st.LoadCheckpoint(ctx, key(parker))
			return cp, err == nil && cp.Parked != ""
		}

		var parked store.Checkpoint
		e2etest.WaitUntil(t, e2etest.Patience, "the parker parked and the others complete", func() bool {
			cp, ok := parkedNow()
			if !ok {
				return false
			}
			parked = cp
			for _, p := range h.parts {
				if p == parker {
					continue
				}
				cp, err := h.st.LoadCheckpoint(ctx, key(p))
				if err != nil || cp.Watermark.Int != n || cp.Parked != "" {
					return false
				}
			}
			return true
		})
		t.Logf("%s parked at generation %d: %s", parker, parked.Generation, parked.Parked)
		wantPrefix := fmt.Sprintf("malformed page after %d attempts: partition %s, generation 1, cursor none: ", attempts, parker)
		require.True(t, strings.HasPrefix(parked.Parked, wantPrefix), "park reason %q does not start with %q", parked.Parked, wantPrefix)
		assert.Contains(t, parked.Parked, "malformed response: injected", "the reason carries the last malformation")
		assert.Equal(t, uint64(1), parked.Generation, "nothing of the parker was promoted")
		assert.Equal(t, int64(attempts), h.metrics.get("tidemark_malformed_responses"), "every attempt of the page was answered malformed and counted")
		assert.Equal(t, int64(1), h.metrics.get("tidemark_parks"))
		retryLine := fmt.Sprintf("Partition %s: malformed answer ", parker)
		assert.Equal(t, attempts-1, h.logs.Count(retryLine), "each retry is logged with the partition")
		assert.Equal(t, attempts-1, countWarn(h.logs.String(), retryLine), "at warn")

		// The others' events are all delivered while the parker waits, and
		// none of the parker's.
		h.mu.Lock()
		for _, id := range h.missing(h.delivered) {
			assert.True(t, strings.HasPrefix(id, parker+"-"), "event %s of a healthy partition missing while %s is parked", id, parker)
		}
		for id := range h.delivered {
			assert.False(t, strings.HasPrefix(id, parker+"-"), "event %s of the parker delivered", id)
		}
		h.mu.Unlock()
		// Parked stays parked: several park checks (each a read of the
		// checkpoint by the parked worker) later, nothing moved and nothing
		// more was fetched.
		loads := h.rec.loadsOf(key(parker))
		e2etest.WaitFor(t, e2etest.Patience, "three park checks of the parked worker", func() (bool, string) {
			n := h.rec.loadsOf(key(parker)) - loads
			return n >= 3, fmt.Sprintf("%d park checks", n)
		})
		cp, ok := parkedNow()
		require.True(t, ok, "the parker is no longer parked")
		require.Equal(t, parked.Generation, cp.Generation)
		require.Equal(t, parked.Cursor, cp.Cursor)
		assert.Equal(t, int64(attempts), h.metrics.get("tidemark_malformed_responses"), "a parked partition fetches nothing")
		require.False(t, r.finished(), "the stream ended with a parked partition")

		// An unpark: the page gets its whole budget again, and parks again.
		_, err := h.st.SetParked(ctx, key(parker), cp.Cursor, cp.Generation, cp.Lease, "")
		require.NoError(t, err)
		e2etest.WaitFor(t, e2etest.Patience, "the parker parked again", func() (bool, string) {
			parks := h.metrics.get("tidemark_parks")
			_, ok := parkedNow()
			return parks == 2 && ok, fmt.Sprintf("%d parks, parked %v", parks, ok)
		})
		again, _ := parkedNow()
		assert.True(t, strings.HasPrefix(again.Parked, wantPrefix), "second park reason %q", again.Parked)
		assert.Equal(t, int64(2*attempts), h.metrics.get("tidemark_malformed_responses"))
		var others []string
		for _, p := range h.parts {
			if p != parker {
				others = append(others, p)
			}
		}
		h.rec.requireChain(t, h.scope, others, n)
	})
}

// countWarn counts the log lines at warn level that contain substr.
func countWarn(logs, substr string) int {
	n := 0
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, "level=WARN") && strings.Contains(l, substr) {
			n++
		}
	}
	return n
}

// TestStreamNacks: a consumer returns an error for some batches the first
// time it sees them (a nack); those events come again and nothing is lost.
func TestStreamNacks(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		h := newHarness(t, b, threeParts, 120)
		nacked := map[string]bool{}
		inner := nackFirst(3)
		consume := func(batch service.MessageBatch) error {
			err := inner(batch)
			if err != nil {
				for _, id := range eventIDs(batch) {
					nacked[id] = true // consumer calls are serial
				}
			}
			return err
		}
		h.runToCompletion(simConfig{maxBatch: 4, pageSize: 10}, consume, nil, streamTimeout)
		if len(nacked) == 0 {
			t.Fatal("no batch was nacked")
		}
		h.requireAllDelivered()
		h.requireCompleteCheckpoints()
		t.Logf("%d events nacked once, all redelivered", len(nacked))
	})
}

// TestStreamRejectOutput: a `switch` output that sends some events to a
// `reject` output the first time they are read (their retry class is
// first_response) and everything else to the sink. The rejected batches are
// nacked, fetched again (the retry is an exact replay), delivered.
func TestStreamRejectOutput(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		h := newHarness(t, b, threeParts, 120)
		out := `
switch:
  cases:
    - check: '@tidemark_position.number() % 7 == 3 && @tidemark_retry_class == "first_response"'
      output:
        reject: 'injected rejection of ${! @tidemark_event_id }'
    - output:
        test_collect: {}
`
		strm := h.buildWith(simConfig{maxBatch: 4, pageSize: 10, exitWhenComplete: true}, nil, nil, out)
		h.wait(h.start(strm), streamTimeout)
		if n := h.logs.Count("the page will be fetched again"); n == 0 {
			t.Fatal("the input never saw a nack")
		}
		h.requireAllDelivered()
		h.requireCompleteCheckpoints()
		if n := h.metrics.get("tidemark_retries{exact_replay}"); n == 0 {
			t.Fatal("no retry was classified as an exact replay")
		}
	})
}

// TestStreamOutOfOrderAcks: an output with several writes in flight whose
// acks are released in reversed or shuffled order (some nacked). Promotions
// must still happen strictly in page order (the recorder's chain check) and
// nothing may be skipped.
func TestStreamOutOfOrderAcks(t *testing.T) {
	orders := []struct {
		name    string
		order   func(rng *rand.Rand, ws []*heldWrite)
		nackPct int
	}{
		{"reversed", func(_ *rand.Rand, ws []*heldWrite) { slices.Reverse(ws) }, 0},
		{"shuffled", func(rng *rand.Rand, ws []*heldWrite) {
			rng.Shuffle(len(ws), func(i, j int) { ws[i], ws[j] = ws[j], ws[i] })
		}, 0},
		{"shuffled_with_nacks", func(rng *rand.Rand, ws []*heldWrite) {
			rng.Shuffle(len(ws), func(i, j int) { ws[i], ws[j] = ws[j], ws[i] })
		}, 15},
	}
	for _, o := range orders {
		t.Run(o.name, func(t *testing.T) {
			forEachBackend(t, func(t *testing.T, b backend) {
				h := newHarness(t, b, threeParts, 120)
				hold := newHoldOutput(16)
				t.Cleanup(hold.stop)
				r := h.start(h.build(simConfig{maxBatch: 3, pageSize: 10, maxPagesInFlight: 4, exitWhenComplete: true, faults: "rotate_tokens: true"}, nil, hold))
				rng := rand.New(rand.NewPCG(42, uint64(len(o.name))))
				nacks := 0
				nackedOnce := map[string]bool{}
				// The first release reorders a full window of held writes
				// (several of one partition among them, since the input has
				// far more batches in flight than the output): out-of-order
				// acks are then certain, whatever the machine's speed.
				e2etest.WaitFor(t, e2etest.Patience, "a full window of held writes", func() (bool, string) {
					n := hold.pendingCount()
					return n >= hold.maxInFlight, fmt.Sprintf("%d of %d writes held", n, hold.maxInFlight)
				})
				deadline := time.Now().Add(streamTimeout)
				for !r.finished() {
					if time.Now().After(deadline) {
						t.Fatalf("stream did not complete\n%s", h.progress())
					}
					if hold.waitPending(hold.maxInFlight, 15*time.Millisecond) == 0 {
						continue
					}
					hold.releaseAll(func(ws []*heldWrite) { o.order(rng, ws) }, func(w *heldWrite) error {
						key := strings.Join(eventIDs(w.batch), ",")
						if o.nackPct > 0 && !nackedOnce[key] && rng.IntN(100) < o.nackPct {
							nackedOnce[key] = true
							nacks++
							return fmt.Errorf("injected nack")
						}
						return nil
					})
				}
				h.wait(r, time.Second)
				inv := hold.inversions()
				if inv == 0 {
					t.Fatal("no two batches of one partition were acknowledged out of order")
				}
				h.requireAllDelivered()
				h.requireCompleteCheckpoints()
				writes, pages := 0, uint64(0)
				for _, p := range h.parts {
					for _, pr := range h.rec.promotionsOf(store.Key{Scope: h.scope, Partition: p}) {
						writes++
						pages += max(pr.p.Pages, 1)
					}
				}
				if o.name == "reversed" && pages <= uint64(writes) {
					// A head page acknowledged after the pages behind it is
					// promoted together with them.
					t.Fatalf("%d promotion writes for %d pages: reversed acks were never coalesced", writes, pages)
				}
				t.Logf("%d out-of-order ack pairs, %d nacks, %d promotion writes for %d pages", inv, nacks, writes, pages)
			})
		})
	}
}

// TestStreamHardStopRestart: a stream is stopped while its output hangs on
// batches it never acknowledges (StopWithin expires: Benthos drops the
// outstanding acks). A new stream on the same store resumes from the
// durable cursor, and the union of what both runs delivered is everything.
// On a hard stop Benthos never calls the outstanding acks
// (docs/design.md#benthos-semantics).
func TestStreamHardStopRestart(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		h := newHarness(t, b, threeParts, 120)
		cfg := simConfig{maxBatch: 3, pageSize: 10, maxPagesInFlight: 3, exitWhenComplete: true}

		// Run 1: ack the first writes, then hang.
		hold := newHoldOutput(8)
		t.Cleanup(hold.stop)
		r1 := h.start(h.build(cfg, nil, hold))
		running := func() error {
			if r1.finished() {
				return fmt.Errorf("run 1 finished before the hard stop")
			}
			return nil
		}
		acked := 0
		e2etest.WaitFor(t, e2etest.Patience, "15 writes of run 1 acknowledged", func() (bool, string) {
			if hold.pendingCount() > 0 {
				acked += hold.releaseAll(func([]*heldWrite) {}, func(*heldWrite) error { return nil })
			}
			return acked >= 15, fmt.Sprintf("%d acknowledged", acked)
		}, running)
		e2etest.WaitFor(t, e2etest.Patience, "a write outstanding at the hard stop", func() (bool, string) {
			return hold.pendingCount() > 0, "no write held"
		}, running)
		e2etest.WaitUntil(t, e2etest.Patience, "a promotion in run 1", func() bool {
			for _, p := range h.parts {
				if len(h.rec.promotionsOf(store.Key{Scope: h.scope, Partition: p})) > 0 {
					return true
				}
			}
			return false
		})
		stopStart := time.Now()
		err := r1.strm.StopWithin(300 * time.Millisecond)
		t.Logf("run 1: %d batches acked, %d writes outstanding; StopWithin returned %v after %s",
			acked, hold.waitPending(0, 0), err, time.Since(stopStart).Round(time.Millisecond))
		// Nothing of run 1 may still write when run 2 starts.
		e2etest.WaitUntil(t, e2etest.Patience, "run 1's input to close", func() bool { return h.closed.Load() == 1 })

		// The durable state run 2 must resume from.
		ctx := context.Background()
		durable := map[string]store.Checkpoint{}
		for _, p := range h.parts {
			cp, err := h.st.LoadCheckpoint(ctx, store.Key{Scope: h.scope, Partition: p})
			if err != nil {
				t.Fatal(err)
			}
			durable[p] = cp
			if cp.Watermark.Int >= h.n {
				t.Fatalf("%s already complete after run 1: the hard stop tested nothing", p)
			}
		}
		before := map[string]int{}
		for p := range durable {
			before[p] = len(h.rec.promotionsOf(store.Key{Scope: h.scope, Partition: p}))
		}

		// Run 2: a plain consumer, to completion.
		h.runToCompletion(cfg, nil, nil, streamTimeout)
		h.requireAllDelivered()
		h.requireCompleteCheckpoints()
		h.mu.Lock()
		run1, run2 := h.perRun[0], h.perRun[1]
		h.mu.Unlock()
		for _, p := range h.parts {
			cp := durable[p]
			// Progress resumes from the durable cursor: run 2's first
			// promotion starts there...
			proms := h.rec.promotionsOf(store.Key{Scope: h.scope, Partition: p})
			if len(proms) <= before[p] {
				t.Fatalf("%s: run 2 promoted nothing", p)
			}
			first := proms[before[p]].p
			if first.FromGeneration != cp.Generation || string(first.FromCursor) != string(cp.Cursor) {
				t.Fatalf("%s: run 2 started from generation %d cursor %q, the durable checkpoint was %d %q",
					p, first.FromGeneration, first.FromCursor, cp.Generation, cp.Cursor)
			}
			// ...and does not go back before it.
			for pos := int64(1); cp.HasApplied && pos <= cp.Applied.Int; pos++ {
				if id := simulated.EventID(p, pos); run2[id] > 0 {
					t.Fatalf("%s: run 2 delivered %s again although the durable applied boundary was %d", p, id, cp.Applied.Int)
				}
			}
			t.Logf("%s: durable after run 1: generation %d applied %d; run 1 delivered %d of its events, run 2 %d",
				p, cp.Generation, cp.Applied.Int, countPrefix(run1, p+"-"), countPrefix(run2, p+"-"))
		}
	})
}

func countPrefix(m map[string]int, prefix string) int {
	n := 0
	for id := range m {
		if strings.HasPrefix(id, prefix) {
			n++
		}
	}
	return n
}

// TestStreamRandomized draws configurations from a seed (pages in flight,
// batch size, page size, every retry fault of the simulated provider) and
// drives each with an output that holds several writes, acknowledges them
// in a random order and nacks some, then applies the same oracles.
// TIDEMARK_STREAM_SEED=<n> runs that one seed (both backends);
// TIDEMARK_STREAM_SEEDS=<count> runs seeds 1..count (a soak).
func TestStreamRandomized(t *testing.T) {
	seeds := []uint64{}
	if s := os.Getenv("TIDEMARK_STREAM_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, v)
	} else {
		count := uint64(24)
		if s := os.Getenv("TIDEMARK_STREAM_SEEDS"); s != "" {
			v, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			count = v
		}
		for s := uint64(1); s <= count; s++ {
			seeds = append(seeds, s)
		}
	}
	for _, seed := range seeds {
		rng := rand.New(rand.NewPCG(seed, 0x737472))
		cfg := simConfig{
			pageSize:         1 + rng.IntN(15),
			maxBatch:         rng.IntN(6),
			maxPagesInFlight: 1 + rng.IntN(6),
			seed:             seed,
			exitWhenComplete: true,
		}
		var faults []string
		if rng.IntN(2) == 0 {
			faults = append(faults, "rotate_tokens: true")
		}
		for _, f := range []string{"shift_rate", "empty_rate", "transient_error_rate", "expire_rate"} {
			if rng.IntN(2) == 0 {
				faults = append(faults, fmt.Sprintf("%s: %.2f", f, rng.Float64()*0.3))
			}
		}
		if rng.IntN(3) == 0 {
			// Transient: at most malformed_streak (2) in a row for one
			// position, within the harness's fetch_retries (2): no park.
			faults = append(faults, fmt.Sprintf("malformed_rate: %.2f", rng.Float64()*0.3))
		}
		cfg.faults = strings.Join(faults, "\n")
		n := int64(20 + rng.IntN(80))
		inFlight := 1 + rng.IntN(12)
		nackPct := rng.IntN(25)
		desc := fmt.Sprintf("seed %d: %d events, page %d, batch %d, pages in flight %d, output in flight %d, nack %d%%, faults [%s]",
			seed, n, cfg.pageSize, cfg.maxBatch, cfg.maxPagesInFlight, inFlight, nackPct, strings.ReplaceAll(cfg.faults, "\n", ", "))
		backendsFor := []backend{memoryBackend}
		if seed%6 == 0 || len(seeds) == 1 {
			backendsFor = backends
		}
		for _, b := range backendsFor {
			t.Run(fmt.Sprintf("seed=%d/%s", seed, b), func(t *testing.T) {
				t.Cleanup(func() {
					if t.Failed() {
						t.Logf("%s\nrerun: TIDEMARK_STREAM_SEED=%d ./scripts/with-dynalite go test -run TestStreamRandomized ./input/", desc, seed)
					}
				})
				h := newHarness(t, b, threeParts, n)
				hold := newHoldOutput(inFlight)
				r := h.start(h.build(cfg, nil, hold))
				t.Cleanup(hold.stop)
				ackRng := rand.New(rand.NewPCG(seed, 0x61636b))
				nackedOnce := map[string]bool{}
				deadline := time.Now().Add(streamTimeout)
				unparks := 0
				for !r.finished() {
					if time.Now().After(deadline) {
						t.Fatalf("%s: stream did not complete\n%s", desc, h.progress())
					}
					unparks += h.unparkAll()
					if hold.waitPending(1+ackRng.IntN(inFlight), 10*time.Millisecond) == 0 {
						continue
					}
					hold.releaseAll(func(ws []*heldWrite) {
						ackRng.Shuffle(len(ws), func(i, j int) { ws[i], ws[j] = ws[j], ws[i] })
					}, func(w *heldWrite) error {
						key := strings.Join(eventIDs(w.batch), ",")
						if !nackedOnce[key] && ackRng.IntN(100) < nackPct {
							nackedOnce[key] = true
							return fmt.Errorf("injected nack")
						}
						return nil
					})
				}
				h.wait(r, time.Second)
				h.requireAllDelivered()
				h.requireCompleteCheckpoints()
				if unparks > 0 {
					t.Logf("%d partitions unparked", unparks)
				}
			})
		}
	}
}

// Witnesses below the durable checkpoint are deleted as the partitions
// advance (the memory backend at once; DynamoDB with witness_cleanup:
// prune), so what is stored stays bounded by the pages in flight, not by
// the run's length; every event is still delivered exactly as the chain
// check demands.
func TestStreamPrunesWitnessesBelowTheCheckpoint(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		h := newHarness(t, b, threeParts, 150)
		if b == dynamoBackend {
			h.ckYAML += "\nwitness_cleanup: prune"
		}
		h.runToCompletion(simConfig{maxBatch: 4, pageSize: 5, seed: 3}, nil, nil, streamTimeout)
		h.requireAllDelivered()
		h.requireCompleteCheckpoints()
		for _, p := range h.parts {
			k := store.Key{Scope: h.scope, Partition: p}
			cp, err := h.st.LoadCheckpoint(t.Context(), k)
			require.NoError(t, err)
			// The input ends after the deletions running (each catches up
			// with the checkpoints durable meanwhile): the store holds at
			// most the generations of one prune interval.
			ws, err := h.st.WitnessesFrom(t.Context(), k, 0)
			require.NoError(t, err)
			every := uint64(1)
			if b == dynamoBackend {
				every = 16
			}
			for _, w := range ws {
				require.GreaterOrEqual(t, w.Generation+every+1, cp.Generation,
					"%s: witness %s of generation %d is still stored under the checkpoint at generation %d", p, w.AttemptID, w.Generation, cp.Generation)
			}
			require.Less(t, len(ws), int(cp.Generation)-1, "%s: %d witnesses stored after %d generations: none was deleted", p, len(ws), cp.Generation)
		}
		require.Positive(t, h.metrics.get("tidemark_witnesses_pruned"))
	})
}
