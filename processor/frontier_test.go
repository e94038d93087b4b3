package processor

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/frontiermeta"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/store/memstore"
	"github.com/tidemark/tidemark/provider"
	"math/rand/v2"
)

// --- configuration -----------------------------------------------------------

func parseFrontier(t *testing.T, yaml string) (*frontierProcessor, error) {
	t.Helper()
	conf, err := frontierSpec().ParseYAML(yaml, nil)
	require.NoError(t, err)
	return frontierFromParsed(conf, service.MockResources())
}

func TestPartitionFrontierSpecParse(t *testing.T) {
	t.Run("defaults", func(t *testing.T) {
		p, err := parseFrontier(t, `
scope: okta
partitions: [ p0, p1 ]
checkpoint:
  backend: memory
`)
		require.NoError(t, err)
		t.Cleanup(func() { _ = p.Close(context.Background()) })
		got := p.cfg
		assert.NotNil(t, got.Feed, "the feed hub of the pipeline's resources")
		got.Feed = nil
		assert.Equal(t, ViewConfig{Scope: "okta", Partitions: []string{"p0", "p1"}, FromFeed: true, Refresh: 5 * time.Second}, got)
		assert.NotNil(t, p.sub, "source: feed (the default) subscribes to the in-process feed")
	})
	t.Run("store source", func(t *testing.T) {
		p, err := parseFrontier(t, `
scope: okta
source: store
refresh_interval: 30ms
checkpoint:
  backend: memory
`)
		require.NoError(t, err)
		t.Cleanup(func() { _ = p.Close(context.Background()) })
		got := p.cfg
		assert.NotNil(t, got.Feed, "the feed hub of the pipeline's resources")
		got.Feed = nil
		assert.Equal(t, ViewConfig{Scope: "okta", Partitions: []string{}, FromFeed: false, Refresh: 30 * time.Millisecond}, got)
		assert.Nil(t, p.sub, "source: store never subscribes to the feed")
	})
	t.Run("empty scope", func(t *testing.T) {
		_, err := parseFrontier(t, `
scope: ""
checkpoint: { backend: memory }
`)
		require.ErrorContains(t, err, "scope must not be empty")
	})
	t.Run("zero refresh interval", func(t *testing.T) {
		_, err := parseFrontier(t, `
scope: s
refresh_interval: 0s
checkpoint: { backend: memory }
`)
		require.ErrorContains(t, err, "refresh_interval must be positive")
	})
	t.Run("missing scope", func(t *testing.T) {
		conf, err := frontierSpec().ParseYAML(`checkpoint: { backend: memory }`, nil)
		if err == nil {
			_, err = frontierFromParsed(conf, service.MockResources())
		}
		require.Error(t, err)
	})
}

// The processor is registered under its name, and the linter of a stream
// refuses an unknown source instead of silently reading the store.
func TestPartitionFrontierRegisteredAndLinted(t *testing.T) {
	b := service.NewStreamBuilder()
	require.NoError(t, b.AddProcessorYAML(`
partition_frontier:
  scope: lint
  partitions: [ a ]
  checkpoint: { backend: memory }
`))
	err := service.NewStreamBuilder().AddProcessorYAML(`
partition_frontier:
  scope: lint
  source: bogus
  checkpoint: { backend: memory }
`)
	require.Error(t, err, "source must be feed or store")
}

// With backend: memory every component of the process shares one store
// (the input's): checkpoints written through it are what the processor
// attaches.
func TestPartitionFrontierMemoryBackendIsShared(t *testing.T) {
	scope := newScope(t)
	yaml := `
scope: ` + scope + `
partitions: [ a, b ]
source: store
refresh_interval: 1ns
checkpoint: { backend: memory }
`
	p1, err := parseFrontier(t, yaml)
	require.NoError(t, err)
	p2, err := parseFrontier(t, yaml)
	require.NoError(t, err)
	require.Same(t, p1.st, p2.st, "backend: memory is the process-wide store")

	w := writer{t: t, st: p1.st.(store.Store), scope: scope}
	w.create("a")
	w.create("b")
	w.promote("a", 7)
	w.promote("b", 5)
	for _, p := range []*frontierProcessor{p1, p2} {
		m := process(t, p)
		assert.True(t, m.HasFrontier)
		assert.Equal(t, "5", m.Frontier)
		assert.Equal(t, "1", m.Epoch)
		assert.JSONEq(t, `{"a":7,"b":5}`, m.Vector)
		assert.Equal(t, "b", m.HeldBy)
		assert.False(t, m.HasReason)
	}
}

// --- the frontier example (docs/design.md#frontier-example) ------------------

// TestFrontierExample_ThroughPartitionFrontier_AThrough120_BThrough90_LateRetryLosesCAS_Then110
// runs the frontier example of docs/design.md#frontier-example through the
// partition_frontier processor over durable checkpoints written with the
// store's conditional writes: A is complete through 120 and B through 90, so
// messages carry 90.
// A late retry of an older A page (promoting from A's generation 1 with the
// watermark 60) loses its compare-and-swap (a *FenceError whose winner is A
// at 120), so the frontier stays 90. When B proves complete through 110 the
// frontier becomes 110. The maximum, 120, never appears.
func TestFrontierExample_ThroughPartitionFrontier_AThrough120_BThrough90_LateRetryLosesCAS_Then110(t *testing.T) {
	sources(t, func(t *testing.T, fromFeed bool) {
		st := memstore.New()
		scope := newScope(t)
		w := writer{t: t, st: st, scope: scope}
		p := newView(t, st, scope, []string{"A", "B"}, fromFeed)

		a1 := w.create("A")
		w.create("B")
		var seen []meta

		// A's older page (from generation 1) certified 60; a later one 120.
		older := w.promotion(a1, 60)
		w.promote("A", 60)
		w.promote("A", 120)

		m := process(t, p)
		seen = append(seen, m)
		assert.False(t, m.HasFrontier, "B has no complete-through watermark yet: the scalar is withheld")
		assert.Equal(t, "B", m.HeldBy)
		assert.JSONEq(t, `{"A":120,"B":null}`, m.Vector)
		assert.Contains(t, m.Reason, "B")

		w.promote("B", 90)
		m = process(t, p)
		seen = append(seen, m)
		assert.Equal(t, meta{Frontier: "90", HasFrontier: true, Epoch: "1", Vector: `{"A":120,"B":90}`, HeldBy: "B"}, m)

		// The late retry of A's older page loses its compare-and-swap.
		retry := older
		retry.To = []byte("A-2-retry")
		retry.WitnessID = "w-A-1-retry"
		_, err := w.tryPromote(retry)
		var fe *store.FenceError
		require.ErrorAs(t, err, &fe)
		require.True(t, errors.Is(err, store.ErrFenced))
		require.NotNil(t, fe.Winner, "the loser reads back the winner")
		assert.Equal(t, uint64(3), fe.Winner.Generation)
		assert.Equal(t, coord.Integer(120), fe.Winner.Watermark)

		m = process(t, p)
		seen = append(seen, m)
		assert.Equal(t, meta{Frontier: "90", HasFrontier: true, Epoch: "1", Vector: `{"A":120,"B":90}`, HeldBy: "B"}, m,
			"the losing retry changes nothing")

		w.promote("B", 110)
		m = process(t, p)
		seen = append(seen, m)
		assert.Equal(t, meta{Frontier: "110", HasFrontier: true, Epoch: "1", Vector: `{"A":120,"B":110}`, HeldBy: "B"}, m)

		for i, m := range seen {
			assert.NotEqual(t, "120", m.Frontier, "message %d: the maximum must never be the frontier", i)
		}
		cp, err := st.LoadCheckpoint(context.Background(), w.key("A"))
		require.NoError(t, err)
		assert.Equal(t, coord.Integer(120), cp.Watermark, "the late retry never lowered A's durable watermark")
	})
}

// --- a stale view lags, never leads --------------------------------------------

// With source: store, a promotion made after the last read of the store is
// not visible until the next refresh: the view lags. It never leads: the
// attached frontier never exceeds the durable minimum.
func TestPartitionFrontierStaleStoreViewLagsNeverLeads(t *testing.T) {
	st := memstore.New()
	scope := newScope(t)
	w := writer{t: t, st: st, scope: scope}
	w.create("A")
	w.create("B")
	w.promote("A", 50)
	w.promote("B", 40)

	p, err := NewView(ViewConfig{Scope: scope, Feed: hubFor(scope), Partitions: []string{"A", "B"}, Refresh: time.Hour}, st, nil)
	require.NoError(t, err)
	m := process(t, p)
	assert.Equal(t, "40", m.Frontier)
	assert.Equal(t, "B", m.HeldBy)

	w.promote("B", 70)
	w.promote("A", 60)
	m = process(t, p)
	assert.Equal(t, "40", m.Frontier, "the promotions after the last refresh are not visible yet")
	assert.JSONEq(t, `{"A":50,"B":40}`, m.Vector)
	lo, ok := durableMin(t, st, scope, []string{"A", "B"})
	require.True(t, ok)
	assert.LessOrEqual(t, mustInt(t, m.Frontier), lo, "a stale view lags the durable minimum, never leads it")

	// The refresh interval elapses.
	p.mu.Lock()
	p.lastStore = p.lastStore.Add(-time.Hour)
	p.lastMembers = p.lastMembers.Add(-time.Hour)
	p.mu.Unlock()
	m = process(t, p)
	assert.Equal(t, "60", m.Frontier, "the next refresh shows the durable state")
	assert.Equal(t, "A", m.HeldBy)
	assert.JSONEq(t, `{"A":60,"B":70}`, m.Vector)

	// In real time too: with a short interval the promotion shows up.
	p2, err := NewView(ViewConfig{Scope: scope, Feed: hubFor(scope), Partitions: []string{"A", "B"}, Refresh: 20 * time.Millisecond}, st, nil)
	require.NoError(t, err)
	assert.Equal(t, "60", process(t, p2).Frontier)
	w.promote("A", 65)
	require.Eventually(t, func() bool { return process(t, p2).Frontier == "65" }, 5*time.Second, 5*time.Millisecond)
}

func mustInt(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	require.NoError(t, err, "frontier %q", s)
	return n
}

// Property: while writers race to promote partitions (including late
// retries from stale generations, which lose), every frontier attached to a
// message is at most the durable minimum read after it, and the frontiers
// never decrease.
func TestPartitionFrontierPropertyNeverExceedsDurableMinimum(t *testing.T) {
	sources(t, func(t *testing.T, fromFeed bool) {
		st := memstore.New()
		scope := newScope(t)
		parts := []string{"p0", "p1", "p2", "p3"}
		w := writer{t: t, st: st, scope: scope}
		for _, part := range parts {
			w.create(part)
		}
		p := newView(t, st, scope, parts, fromFeed)

		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		var lost, won sync.Map
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(g), 42))
				for ctx.Err() == nil {
					part := parts[rng.IntN(len(parts))]
					cp, err := st.LoadCheckpoint(ctx, store.Key{Scope: scope, Partition: part})
					if err != nil {
						continue
					}
					if rng.IntN(4) == 0 && cp.Generation > 1 {
						// A late retry from an older generation.
						cp.Generation--
					}
					step := int64(rng.IntN(5))
					pr := w.promotion(cp, cp.Watermark.Int+step)
					if _, err := w.tryPromote(pr); err != nil {
						lost.Store(part, true)
					} else {
						won.Store(part, true)
					}
					time.Sleep(time.Duration(rng.IntN(200)) * time.Microsecond)
				}
			}()
		}
		defer func() { cancel(); wg.Wait() }()

		var last int64 = -1
		scalars := 0
		deadline := time.Now().Add(500 * time.Millisecond)
		for i := 0; i < 3000 && time.Now().Before(deadline); i++ {
			m := process(t, p)
			lo, ok := durableMin(t, st, scope, parts)
			if !m.HasFrontier {
				require.Equal(t, int64(-1), last, "once attached, the frontier is never withdrawn within the epoch")
				continue
			}
			scalars++
			f := mustInt(t, m.Frontier)
			require.True(t, ok, "a frontier %d while a partition has no durable watermark", f)
			require.LessOrEqual(t, f, lo, "frontier %d leads the durable minimum %d", f, lo)
			require.GreaterOrEqual(t, f, last, "frontier went back from %d to %d", last, f)
			last = f
		}
		cancel()
		wg.Wait()
		// Once the writers stopped, a fresh read shows exactly the minimum.
		m := process(t, p)
		lo, ok := durableMin(t, st, scope, parts)
		if ok {
			assert.Equal(t, strconv.FormatInt(lo, 10), m.Frontier)
		}
		assert.Positive(t, scalars, "the run produced scalars")
		_, anyLost := lost.Load(parts[0])
		t.Logf("scalars checked: %d, last frontier %d, some retry of p0 lost: %v", scalars, last, anyLost)
	})
}

// --- membership ---------------------------------------------------------------

// An unproven membership epoch withholds the scalar: no tidemark_frontier,
// the vector and the reason are attached. The proof arriving as a new epoch
// brings the scalar back.
func TestPartitionFrontierUnprovenMembershipWithholdsScalar(t *testing.T) {
	sources(t, func(t *testing.T, fromFeed bool) {
		ctx := context.Background()
		st := memstore.New()
		scope := newScope(t)
		w := writer{t: t, st: st, scope: scope}
		for part, wm := range map[string]int64{"A": 100, "B": 80, "C": 120} {
			w.create(part)
			w.promote(part, wm)
		}
		_, err := st.SwapMembership(ctx, 0, store.Membership{Scope: scope, Epoch: 1, Partitions: []string{"A", "B"}, Proven: true})
		require.NoError(t, err)
		w.publish()
		p := newView(t, st, scope, nil, fromFeed)

		m := process(t, p)
		assert.Equal(t, meta{Frontier: "80", HasFrontier: true, Epoch: "1", Vector: `{"A":100,"B":80}`, HeldBy: "B"}, m,
			"C's checkpoint is not a member of epoch 1")

		_, err = st.SwapMembership(ctx, 1, store.Membership{
			Scope: scope, Epoch: 2, Partitions: []string{"A", "B", "C"}, Cutover: coord.Integer(80),
			Proven: false, Reason: "add C: no proof of coverage", Unproven: []string{"C"},
		})
		require.NoError(t, err)
		w.publish()
		m = process(t, p)
		assert.False(t, m.HasFrontier, "no scalar in an unproven epoch")
		assert.Equal(t, "2", m.Epoch)
		assert.JSONEq(t, `{"A":100,"B":80,"C":120}`, m.Vector)
		assert.True(t, m.HasReason)
		assert.Contains(t, m.Reason, "membership unproven")
		assert.Contains(t, m.Reason, "add C: no proof of coverage")
		assert.Equal(t, "B", m.HeldBy)

		// Promotions inside the unproven epoch still never yield a scalar.
		w.epoch = 2
		w.promote("B", 130)
		m = process(t, p)
		assert.False(t, m.HasFrontier)
		assert.JSONEq(t, `{"A":100,"B":130,"C":120}`, m.Vector)

		_, err = st.SwapMembership(ctx, 2, store.Membership{Scope: scope, Epoch: 3, Partitions: []string{"A", "B", "C"}, Cutover: coord.Integer(80), Proven: true})
		require.NoError(t, err)
		w.publish()
		m = process(t, p)
		assert.Equal(t, meta{Frontier: "100", HasFrontier: true, Epoch: "3", Vector: `{"A":100,"B":130,"C":120}`, HeldBy: "A"}, m)
	})
}

// An unproven record without a reason still explains itself.
func TestPartitionFrontierUnprovenWithoutReason(t *testing.T) {
	st := memstore.New()
	scope := newScope(t)
	w := writer{t: t, st: st, scope: scope}
	w.create("A")
	w.promote("A", 5)
	_, err := st.SwapMembership(context.Background(), 0, store.Membership{Scope: scope, Epoch: 4, Partitions: []string{"A"}})
	require.NoError(t, err)
	w.publish()
	m := process(t, newView(t, st, scope, nil, false))
	assert.False(t, m.HasFrontier)
	assert.Equal(t, "4", m.Epoch)
	assert.JSONEq(t, `{"A":5}`, m.Vector)
	assert.Contains(t, m.Reason, "membership epoch 4 is unproven")
}

// Without a membership record the configured partitions are epoch 1; a
// partition without a checkpoint holds the frontier back.
func TestPartitionFrontierConfiguredPartitionsWithoutRecord(t *testing.T) {
	st := memstore.New()
	scope := newScope(t)
	w := writer{t: t, st: st, scope: scope}
	w.create("A")
	w.promote("A", 9)
	m := process(t, newView(t, st, scope, []string{"A", "B"}, false))
	assert.False(t, m.HasFrontier)
	assert.Equal(t, "1", m.Epoch)
	assert.JSONEq(t, `{"A":9,"B":null}`, m.Vector)
	assert.Equal(t, "B", m.HeldBy)
	assert.Contains(t, m.Reason, "1 of 2 partitions have no complete-through watermark: B")

	// No record and no configured partitions: the processor fails the message.
	p, err := NewView(ViewConfig{Scope: newScope(t), Refresh: time.Second}, st, nil)
	require.NoError(t, err)
	_, err = p.Process(context.Background(), service.NewMessage(nil))
	require.ErrorContains(t, err, "no membership record and no partitions are configured")
}

// Partitions whose watermarks have different coordinate kinds have no
// comparable coordinate: the vector only, never a scalar manufactured from
// them.
func TestPartitionFrontierIncomparableCoordinates(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	scope := newScope(t)
	w := writer{t: t, st: st, scope: scope}
	a := w.create("A")
	b := w.create("B")
	pa := w.promotion(a, 0)
	pa.Watermark = coord.Integer(10)
	_, err := st.Promote(ctx, pa)
	require.NoError(t, err)
	pb := w.promotion(b, 0)
	ts := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	pb.Watermark = coord.Timestamp(ts)
	_, err = st.Promote(ctx, pb)
	require.NoError(t, err)

	m := process(t, newView(t, st, scope, []string{"A", "B"}, false))
	assert.False(t, m.HasFrontier)
	assert.JSONEq(t, `{"A":10,"B":"2026-01-02T03:04:05Z"}`, m.Vector)
	assert.Contains(t, m.Reason, "no comparable coordinate")
	assert.Empty(t, m.HeldBy)
}

// A message carries the frontier of the epoch it was emitted under: one
// from an input already in a newer epoch makes a lagging view re-read the
// membership at once, and one from an input still in the previous epoch
// gets that epoch's frontier as last published.
func TestPartitionFrontierAttachesTheFrontierOfTheMessagesEpoch(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	scope := newScope(t)
	w := writer{t: t, st: st, scope: scope}
	for part, wm := range map[string]int64{"A": 100, "B": 80, "C": 120} {
		w.create(part)
		w.promote(part, wm)
	}
	_, err := st.SwapMembership(ctx, 0, store.Membership{Scope: scope, Epoch: 1, Partitions: []string{"A", "B"}, Proven: true})
	require.NoError(t, err)
	w.publish()
	// The store is re-read only hourly; the in-process feed brings this
	// process's checkpoints at once.
	p, err := NewView(ViewConfig{Scope: scope, Feed: hubFor(scope), FromFeed: true, Refresh: time.Hour}, st, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close(ctx) })
	withEpoch := func(e string) meta {
		msg := service.NewMessage([]byte(`{}`))
		msg.MetaSetMut("tidemark_epoch", e)
		batch, err := p.Process(ctx, msg)
		require.NoError(t, err)
		return readMeta(batch[0])
	}
	assert.Equal(t, "1", withEpoch("1").Epoch)

	// Epoch 2 drops B; the view would not re-read it for an hour.
	_, err = st.SwapMembership(ctx, 1, store.Membership{Scope: scope, Epoch: 2, Partitions: []string{"A", "C"}, Cutover: coord.Integer(80), Proven: true})
	require.NoError(t, err)
	w.publish()
	assert.Equal(t, "1", withEpoch("1").Epoch, "a message of epoch 1 before the view moved")
	m := withEpoch("2")
	assert.Equal(t, meta{Frontier: "100", HasFrontier: true, Epoch: "2", Vector: `{"A":100,"C":120}`, HeldBy: "A"}, m, "a message of epoch 2 moves the view at once")

	// A message the input emitted under epoch 1 after that still gets
	// epoch 1's frontier as last published: B, no member of epoch 2, is
	// published no more, so epoch 1's frontier stays where it was.
	w.promote("B", 90)
	assert.Equal(t, meta{Frontier: "80", HasFrontier: true, Epoch: "1", Vector: `{"A":100,"B":80}`, HeldBy: "B"}, withEpoch("1"))
	assert.Equal(t, "2", process(t, p).Epoch, "a message without an epoch gets the current frontier")
}

// A frontier that rests on a member whose watermark is an append-only
// writer assertion (or a lag) says so in tidemark_frontier_finality; one
// resting on source-certified watermarks only carries no such key.
func TestPartitionFrontierNamesTheFinalityItRestsOn(t *testing.T) {
	st := memstore.New()
	scope := newScope(t)
	w := writer{t: t, st: st, scope: scope}
	for part, basis := range map[string]provider.Basis{"A": {Finality: provider.FinalityAppendOnlyWriter}, "B": {Finality: provider.FinalitySource}} {
		cp := w.create(part)
		p := w.promotion(cp, 50)
		p.Finality = basis
		_, err := w.tryPromote(p)
		require.NoError(t, err)
	}
	p, err := NewView(ViewConfig{Scope: scope, Feed: hubFor(scope), Partitions: []string{"A", "B"}, Refresh: time.Hour}, st, nil)
	require.NoError(t, err)
	msg := service.NewMessage([]byte(`{}`))
	msg.MetaSetMut(frontiermeta.FrontierFinality, "stale-upstream-value")
	batch, err := p.Process(context.Background(), msg)
	require.NoError(t, err)
	got, ok := batch[0].MetaGet(frontiermeta.FrontierFinality)
	require.True(t, ok)
	assert.Equal(t, "append_only_writer assertion (A)", got)

	st2 := memstore.New()
	w2 := writer{t: t, st: st2, scope: newScope(t)}
	w2.create("A")
	w2.promote("A", 5)
	p2, err := NewView(ViewConfig{Scope: w2.scope, Feed: hubFor(w2.scope), Partitions: []string{"A"}, Refresh: time.Hour}, st2, nil)
	require.NoError(t, err)
	batch, err = p2.Process(context.Background(), msg)
	require.NoError(t, err)
	_, ok = batch[0].MetaGet(frontiermeta.FrontierFinality)
	assert.False(t, ok, "no note when no member rests on an assertion or a lag")
}
