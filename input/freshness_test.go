package input

// Frontier freshness in one process: how long a promotion takes to reach
// the frontier partition_frontier attaches (docs/design.md#publishing).
//
//	go test -run TestPromotionReachesTheAttachedFrontier -v ./input/
//	go test -run '^$' -bench BenchmarkPromotionToAttachedFrontier -benchtime 1x ./input/

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/dynalitetest"
	"github.com/tidemark/tidemark/internal/dynamostore"
	"github.com/tidemark/tidemark/internal/e2etest"
	"github.com/tidemark/tidemark/internal/frontiermeta"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/store/memstore"
	"github.com/tidemark/tidemark/processor"
	"github.com/tidemark/tidemark/provider/simulated"
)

// freshness is what one run measured: for each promotion followed by a
// message, the time from its write to the first message processed after
// it whose attached vector holds it (or more); and the promotions no later
// message carried (the last ones of a partition, say).
type freshness struct {
	latencies []time.Duration
	uncarried int
	messages  int
}

func (f freshness) quantile(q float64) time.Duration {
	s := slices.Clone(f.latencies)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// measureFreshness runs one paginated_partitions input with the spec's
// defaults (frontier_publish_interval included) over st and a
// partition_frontier view (source: feed, refresh_interval's default) on
// the same feed hub, as one pipeline has them, and processes every message
// through the view as it is read. A promotion's time is when the input
// handed it to the feed, right after its conditional write succeeded (a
// subscriber woken by the feed notes it).
func measureFreshness(tb testing.TB, st store.Store, parts, pages int, latency time.Duration) freshness {
	tb.Helper()
	names := make([]string, parts)
	for i := range names {
		names[i] = fmt.Sprintf("p%02d", i)
	}
	const pageSize = 10
	prov, err := simulated.New(simulated.Config{Partitions: names, EventsPerPartition: int64(pages * pageSize), PageSize: pageSize, Latency: latency})
	require.NoError(tb, err)
	conf, err := Spec().ParseYAML("scope: fresh\npartitions: [ p ]\nsimulated: { events_per_partition: 1 }\n", nil)
	require.NoError(tb, err)
	cfg, err := readConfig(conf) // the spec's defaults
	require.NoError(tb, err)
	cfg.Scope, cfg.Partitions, cfg.ExitWhenComplete = "fresh", names, true
	res := service.MockResources()
	bi, err := New(cfg, prov, st, nil, res)
	require.NoError(tb, err)
	in := bi.(*paginatedInput)
	promoted := map[string]map[int64]time.Time{} // partition → watermark → when
	sub := in.feed.Subscribe("fresh")
	defer sub.Close()
	clockCtx, stopClock := context.WithCancel(context.Background())
	clockDone := make(chan struct{})
	go func() {
		defer close(clockDone)
		for {
			select {
			case <-clockCtx.Done():
				return
			case <-sub.Wake():
			}
			now := time.Now()
			for _, u := range sub.Drain() {
				if u.Watermark.IsZero() {
					continue
				}
				if promoted[u.Partition] == nil {
					promoted[u.Partition] = map[int64]time.Time{}
				}
				if _, ok := promoted[u.Partition][u.Watermark.Int]; !ok {
					promoted[u.Partition][u.Watermark.Int] = now
				}
			}
		}
	}()
	view, err := processor.NewView(processor.ViewConfig{Scope: "fresh", FromFeed: true, Refresh: 5 * time.Second, Feed: in.feed}, st, nil)
	require.NoError(tb, err)
	defer view.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), e2etest.Patience)
	defer cancel()
	require.NoError(tb, in.Connect(ctx))
	defer func() {
		cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
		defer ccancel()
		require.NoError(tb, in.Close(cctx))
	}()

	type sighting struct {
		at     time.Time
		vector map[string]*int64
	}
	var seen []sighting
	for {
		batch, ack, err := in.ReadBatch(ctx)
		if err != nil {
			require.ErrorIs(tb, err, service.ErrEndOfInput)
			break
		}
		for _, msg := range batch {
			out, err := view.Process(ctx, msg)
			require.NoError(tb, err)
			now := time.Now()
			raw, _ := out[0].MetaGet(frontiermeta.FrontierVector)
			var v map[string]*int64
			require.NoError(tb, json.Unmarshal([]byte(raw), &v))
			seen = append(seen, sighting{at: now, vector: v})
		}
		require.NoError(tb, ack(ctx, nil))
	}
	stopClock()
	<-clockDone
	var f freshness
	f.messages = len(seen)
	for part, byWM := range promoted {
		for wm, at := range byWM {
			// The first message processed after the promotion whose
			// attached vector holds it.
			i := slices.IndexFunc(seen, func(s sighting) bool {
				w := s.vector[part]
				return !s.at.Before(at) && w != nil && *w >= wm
			})
			if i < 0 {
				f.uncarried++
				continue
			}
			f.latencies = append(f.latencies, seen[i].at.Sub(at))
		}
	}
	return f
}

// A promotion of this process reaches the frontier partition_frontier
// attaches to the messages after it, without waiting for a periodic
// publication: the latency is reported (a measurement, not asserted: the
// machine is shared); what is asserted is that the messages after the
// first promotions carry them at all.
func TestPromotionReachesTheAttachedFrontier(t *testing.T) {
	f := measureFreshness(t, memstore.New(), 4, 40, 10*time.Millisecond)
	require.NotEmpty(t, f.latencies, "no promotion reached the attached frontier of a later message (%d messages, %d promotions never carried)", f.messages, f.uncarried)
	require.Greater(t, len(f.latencies), f.uncarried, "most promotions are followed by messages that carry them")
	t.Logf("promotion to attached frontier, %d promotions over %d messages (%d not carried by any later message): p50 %v, p99 %v, max %v",
		len(f.latencies), f.messages, f.uncarried, f.quantile(0.5), f.quantile(0.99), f.quantile(1))
}

// BenchmarkPromotionToAttachedFrontier reports the promotion-to-attached
// latency quantiles of one process at the defaults (the target:
// p99 ≤ 100 ms), 16 partitions with a page every 10 ms each, on the memory
// store and on DynamoDB (dynalite: run with ./scripts/with-dynalite; the
// case is skipped without it).
func BenchmarkPromotionToAttachedFrontier(b *testing.B) {
	for _, kind := range []string{"memory", "dynamodb"} {
		b.Run("store="+kind, func(b *testing.B) {
			var all freshness
			for range b.N {
				var st store.Store = memstore.New()
				if kind == "dynamodb" {
					tbl := dynalitetest.NewTable(b)
					ds, err := dynamostore.NewDynamoStore(b.Context(), dynamostore.DynamoConfig{Table: tbl.Name, Endpoint: tbl.Endpoint, Create: true})
					if err != nil {
						b.Fatal(err)
					}
					st = ds
				}
				f := measureFreshness(b, st, 16, 50, 10*time.Millisecond)
				all.latencies = append(all.latencies, f.latencies...)
				all.uncarried += f.uncarried
				all.messages += f.messages
			}
			if len(all.latencies) == 0 {
				b.Fatal("no promotion reached an attached frontier")
			}
			b.ReportMetric(float64(all.quantile(0.5).Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(all.quantile(0.99).Microseconds())/1000, "p99-ms")
			b.ReportMetric(float64(all.quantile(1).Microseconds())/1000, "max-ms")
			b.ReportMetric(float64(len(all.latencies)), "promotions")
		})
	}
}

// A pipeline whose partitions finish within a second (the input and
// partition_frontier in one stream, the spec's defaults) carries a frontier
// on its later messages: promotions are published as they happen, not at
// the next tick of a one-second publication clock, and the processor
// learns the record from the pipeline's feed.
func TestPipelineFinishingWithinASecondCarriesAFrontier(t *testing.T) {
	scope := fmt.Sprintf("fresh-pipeline-%d", time.Now().UnixNano()) // the memory backend is process-wide
	b := service.NewStreamBuilder()
	require.NoError(t, b.SetLoggerYAML("level: none"))
	require.NoError(t, b.AddInputYAML(`
paginated_partitions:
  scope: `+scope+`
  partitions: [ p0, p1, p2 ]
  exit_when_complete: true
  checkpoint: { backend: memory }
  simulated:
    events_per_partition: 80
    page_size: 8
    latency: 20ms
`))
	require.NoError(t, b.AddProcessorYAML(`
partition_frontier:
  scope: `+scope+`
  checkpoint: { backend: memory }
`))
	var frontiers []string // per message in output order; "" when none
	require.NoError(t, b.AddConsumerFunc(func(_ context.Context, m *service.Message) error {
		f, _ := m.MetaGet(frontiermeta.Frontier)
		frontiers = append(frontiers, f) // AddConsumerFunc calls are serial
		return nil
	}))
	strm, err := b.Build()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), streamTimeout)
	defer cancel()
	start := time.Now()
	require.NoError(t, strm.Run(ctx))
	took := time.Since(start)
	require.Len(t, frontiers, 3*80)
	carried := 0
	for _, f := range frontiers {
		if f != "" {
			carried++
		}
	}
	t.Logf("the pipeline ran %v; %d of %d messages carried a frontier", took.Round(time.Millisecond), carried, len(frontiers))
	last := frontiers[len(frontiers)-1]
	require.NotEmpty(t, last, "the last message carries a frontier")
	require.Positive(t, carried)
}
