package input

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/chain"
	"github.com/tidemark/tidemark/internal/e2etest"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/store/memstore"
	"github.com/tidemark/tidemark/provider"
)

// shardSource is a provider whose partition list changes while the input
// runs: partitions appear, and a partition splits (it is sealed at its
// current end and two children that name it as their parent appear).
// Positions are a global sequence, so a child's are above its parent's.
type shardSource struct {
	mu     sync.Mutex
	next   int64
	order  []string
	shards map[string]*shard
	// Fetches of holdPart from index holdAt on wait until release is
	// closed.
	holdPart string
	holdAt   int
	release  chan struct{}
}

type shard struct {
	parents []string
	events  []int64 // positions
	sealed  bool
}

func newShardSource() *shardSource { return &shardSource{shards: map[string]*shard{}} }

// add creates a partition with n events.
func (s *shardSource) add(name string, n int, parents ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sh := &shard{parents: parents}
	for range n {
		s.next++
		sh.events = append(sh.events, s.next)
	}
	s.shards[name] = sh
	s.order = append(s.order, name)
}

// split seals parent and adds two children of n events each.
func (s *shardSource) split(parent string, n int) (string, string) {
	s.mu.Lock()
	s.shards[parent].sealed = true
	s.mu.Unlock()
	a, b := parent+"-a", parent+"-b"
	s.add(a, n, parent)
	s.add(b, n, parent)
	return a, b
}

func (s *shardSource) ids() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for name, sh := range s.shards {
		for _, pos := range sh.events {
			out = append(out, eventID(name, pos))
		}
	}
	return out
}

func eventID(part string, pos int64) string { return part + "/" + strconv.FormatInt(pos, 10) }

func (s *shardSource) Partitions(context.Context) ([]provider.Partition, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]provider.Partition, 0, len(s.order))
	for _, name := range s.order {
		out = append(out, provider.Partition{Name: name, Parents: slices.Clone(s.shards[name].parents)})
	}
	return out, nil
}

const shardPage = 3

func (s *shardSource) Fetch(ctx context.Context, req provider.Request) (provider.Response, error) {
	time.Sleep(2 * time.Millisecond)
	s.mu.Lock()
	at, _ := strconv.Atoi(string(req.Cursor))
	held := req.Partition == s.holdPart && at >= s.holdAt
	release := s.release
	s.mu.Unlock()
	if held {
		select {
		case <-release:
		case <-ctx.Done():
			return provider.Response{}, ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sh := s.shards[req.Partition]
	if sh == nil {
		return provider.Response{}, &provider.MalformedError{Partition: req.Partition, Reason: "no such shard"}
	}
	from := 0
	if len(req.Cursor) > 0 {
		n, err := strconv.Atoi(string(req.Cursor))
		if err != nil {
			return provider.Response{}, &provider.MalformedError{Partition: req.Partition, Reason: err.Error()}
		}
		from = n
	}
	to := min(from+shardPage, len(sh.events))
	r := provider.Response{Successor: []byte(strconv.Itoa(to))}
	for _, pos := range sh.events[from:to] {
		r.Events = append(r.Events, provider.Event{ID: eventID(req.Partition, pos), Position: provider.IntPosition(pos), Payload: []byte(`{}`)})
	}
	if to > 0 {
		r.CompleteThrough = provider.IntegerWatermark(sh.events[to-1])
	}
	if to == len(sh.events) && sh.sealed {
		r.Sealed, r.Successor = true, nil
	}
	r.HasMore, r.HasMoreKnown = to < len(sh.events), true
	return r, nil
}

func (s *shardSource) Contract() provider.Contract {
	return provider.Contract{EmptyPage: provider.EmptyFinalThroughWatermark, OrderedPositions: true, WatermarkCoversPositions: true, Recovery: provider.RecoveryPark, Finality: provider.FinalitySource}
}

func (s *shardSource) Close(context.Context) error { return nil }

// liveRun is one input over a shardSource with the emitted messages in
// delivery order.
type liveRun struct {
	t   *testing.T
	st  store.Store
	src *shardSource
	in  *paginatedInput
	log *e2etest.SyncBuffer

	mu     sync.Mutex
	seen   []string // event ids in emission order
	epochs map[string]string
}

func startLive(t *testing.T, src *shardSource, lineage bool) *liveRun {
	t.Helper()
	return startLiveOn(t, src, memstore.New(), lineage, nil)
}

// startLiveOn starts an input on st, with leases when lc is set.
func startLiveOn(t *testing.T, src *shardSource, st store.Store, lineage bool, lc *LeaseConfig) *liveRun {
	t.Helper()
	return startLiveWith(t, src, st, lineage, lc, 20*time.Millisecond)
}

// startLiveWith is startLiveOn with the partitions' poll interval.
func startLiveWith(t *testing.T, src *shardSource, st store.Store, lineage bool, lc *LeaseConfig, poll time.Duration) *liveRun {
	t.Helper()
	old := membershipCheckInterval
	membershipCheckInterval = 20 * time.Millisecond
	t.Cleanup(func() { membershipCheckInterval = old })
	r := &liveRun{t: t, st: st, src: src, log: &e2etest.SyncBuffer{}, epochs: map[string]string{}}
	res := service.MockResources(service.MockResourcesOptUseLogger(service.NewLoggerFromSlog(slog.New(slog.NewTextHandler(r.log, &slog.HandlerOptions{Level: slog.LevelInfo})))))
	bi, err := New(Config{
		Scope: "shards", Discover: true, DiscoveryInterval: 50 * time.Millisecond, UnorderedLineage: !lineage,
		Config: chain.Config{
			MaxPagesInFlight: 2, PollInterval: poll, ParkCheckInterval: time.Second, CoalescePromotions: true,
			StoreBackoff: 20 * time.Millisecond, FetchRetries: 3, FetchBackoff: 10 * time.Millisecond,
		},
		FrontierPublishInterval: 20 * time.Millisecond, Leases: lc,
	}, src, r.st, nil, res)
	require.NoError(t, err)
	r.in = bi.(*paginatedInput)
	require.NoError(t, r.in.Connect(t.Context()))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			batch, ack, err := r.in.ReadBatch(ctx)
			if err != nil {
				return
			}
			r.mu.Lock()
			for _, m := range batch {
				id, _ := m.MetaGet(MetaEventID)
				e, _ := m.MetaGet(MetaEpoch)
				r.seen = append(r.seen, id)
				r.epochs[id] = e
			}
			r.mu.Unlock()
			_ = ack(ctx, nil)
		}
	}()
	t.Cleanup(func() {
		cancel()
		cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer ccancel()
		require.NoError(t, r.in.Close(cctx))
		<-done
	})
	return r
}

func (r *liveRun) waitFor(what string, cond func() bool) {
	r.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			r.t.Fatalf("timed out waiting for %s; log:\n%s", what, r.log.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (r *liveRun) delivered(ids []string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range ids {
		if !slices.Contains(r.seen, id) {
			return false
		}
	}
	return true
}

func (r *liveRun) membership() store.Membership {
	m, err := r.st.LoadMembership(r.t.Context(), "shards")
	require.NoError(r.t, err)
	return m
}

// A partition that appears while the input runs joins in a new, proven
// epoch (it is read from its start), is read whole, and its messages carry
// the new epoch; an operator's request makes the input discover it at once.
func TestDiscoveryAddsAPartitionToARunningInput(t *testing.T) {
	src := newShardSource()
	src.add("s0", 10)
	r := startLive(t, src, true)
	r.waitFor("s0 read", func() bool { return r.delivered(src.ids()) })
	require.Equal(t, uint64(1), r.membership().Epoch)

	src.add("s1", 7)
	_, err := r.st.RequestDiscovery(t.Context(), "shards")
	require.NoError(t, err)
	r.waitFor("s1 read", func() bool { return r.delivered(src.ids()) })
	m := r.membership()
	assert.Equal(t, []string{"s0", "s1"}, m.Partitions)
	assert.True(t, m.Proven, m.Reason)
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range r.seen {
		if id[:2] == "s1" {
			assert.Equal(t, strconv.FormatUint(m.Epoch, 10), r.epochs[id], "message %s carries the epoch s1 joined in", id)
		}
	}
	assert.Contains(t, r.log.String(), "Membership of scope shards changed to epoch 2: added [s1]")
}

// A split under parents_first: the parent is read to its end before any
// event of its children is emitted, and once it is complete it leaves the
// membership with proof of sealing although the source still lists it, so
// the run ends in a proven epoch of the children alone whose frontier is
// published.
func TestSplitReadsTheParentToItsEndBeforeTheChildren(t *testing.T) {
	src := newShardSource()
	src.add("s0", 21)
	// s0 is read up to index 9, then held until the split is discovered.
	src.holdPart, src.holdAt, src.release = "s0", 9, make(chan struct{})
	r := startLive(t, src, true)
	r.waitFor("part of s0 read", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.seen) >= 9
	})
	a, b := src.split("s0", 6)
	r.waitFor("the children joining while s0 drains", func() bool {
		m := r.membership()
		return slices.Contains(m.Partitions, a) && slices.Contains(m.Partitions, b) && slices.Contains(m.Partitions, "s0")
	})
	r.waitFor("the children waiting", func() bool {
		return strings.Contains(r.log.String(), fmt.Sprintf("Partition %s waits for its parents [s0] to be complete", a))
	})
	close(src.release)
	r.waitFor("every event", func() bool { return r.delivered(src.ids()) })
	r.waitFor("the parent leaving", func() bool { return !slices.Contains(r.membership().Partitions, "s0") })

	r.mu.Lock()
	lastParent, firstChild := -1, len(r.seen)
	for i, id := range r.seen {
		switch id[:len(a)] {
		case a, b:
			firstChild = min(firstChild, i)
		default:
			lastParent = i
		}
	}
	r.mu.Unlock()
	assert.Less(t, lastParent, firstChild, "every event of s0 is emitted before any of its children")

	m := r.membership()
	assert.Equal(t, []string{a, b}, m.Partitions)
	assert.True(t, m.Proven, m.Reason)
	assert.Equal(t, map[string][]string{a: {"s0"}, b: {"s0"}}, m.Parents)
	r.waitFor("a scalar frontier of the children's epoch", func() bool {
		f, err := r.st.LoadFrontier(t.Context(), "shards")
		return err == nil && f.Epoch == m.Epoch && !f.Scalar.IsZero()
	})
	assert.Contains(t, r.log.String(), "removed [s0] (sealed: [s0])")
}

// Under lineage: unordered the children are read without waiting for the
// parent, which is never sealed here.
func TestUnorderedLineageReadsChildrenAtOnce(t *testing.T) {
	src := newShardSource()
	src.add("s0", 6)
	src.add("s0-a", 4, "s0")
	r := startLive(t, src, false)
	r.waitFor("every event although s0 never completes", func() bool { return r.delivered(src.ids()) })
	assert.NotContains(t, r.log.String(), "waits for its parents")
}

// With leases, two instances share a scope whose membership grows and
// splits: both adopt every epoch, the joining partitions are claimed by one
// of them, every event is delivered, and the parent is read to its end
// before its children.
func TestLeasedInstancesShareALiveMembership(t *testing.T) {
	src := newShardSource()
	src.add("s0", 9)
	src.add("s1", 9)
	src.holdPart, src.holdAt, src.release = "s1", 6, make(chan struct{})
	st := memstore.New()
	lease := func(id string) *LeaseConfig {
		return &LeaseConfig{InstanceID: id, Period: time.Second, RenewInterval: 200 * time.Millisecond, BalanceInterval: 300 * time.Millisecond, MaxSteals: 1}
	}
	a := startLiveOn(t, src, st, true, lease("a"))
	b := startLiveOn(t, src, st, true, lease("b"))
	union := func() map[string]int {
		out := map[string]int{}
		for _, r := range []*liveRun{a, b} {
			r.mu.Lock()
			for i, id := range r.seen {
				if _, ok := out[id]; !ok {
					out[id] = i
				}
			}
			r.mu.Unlock()
		}
		return out
	}
	all := func() bool {
		u := union()
		for _, id := range src.ids() {
			if _, ok := u[id]; !ok {
				return false
			}
		}
		return true
	}
	src.add("s2", 5)
	c1, c2 := src.split("s1", 4)
	_, err := st.RequestDiscovery(t.Context(), "shards")
	require.NoError(t, err)
	a.waitFor("the children joining while s1 drains", func() bool {
		m := a.membership()
		return slices.Contains(m.Partitions, c1) && slices.Contains(m.Partitions, "s1") && slices.Contains(m.Partitions, "s2")
	})
	a.waitFor("both instances adopting it", func() bool {
		e := a.membership().Epoch
		return a.in.epoch() == e && b.in.epoch() == e
	})
	close(src.release)
	a.waitFor("every event", all)
	a.waitFor("s1 leaving", func() bool { return !slices.Contains(a.membership().Partitions, "s1") })
	m := a.membership()
	assert.Equal(t, []string{"s0", c1, c2, "s2"}, m.Partitions)
	assert.True(t, m.Proven, m.Reason)

	// Order: the last s1 event came out before the first child event, in
	// whichever instance read them (one instance holds a partition at a
	// time, and the children are read only after s1 completed durably).
	src.mu.Lock()
	s1 := src.shards["s1"].events
	last := eventID("s1", s1[len(s1)-1])
	src.mu.Unlock()
	u := union()
	for _, c := range []string{c1, c2} {
		src.mu.Lock()
		first := eventID(c, src.shards[c].events[0])
		src.mu.Unlock()
		for _, r := range []*liveRun{a, b} {
			r.mu.Lock()
			li, fi := slices.Index(r.seen, last), slices.Index(r.seen, first)
			r.mu.Unlock()
			if li >= 0 && fi >= 0 {
				assert.Less(t, li, fi, "in one instance, %s came out before %s", last, first)
			}
		}
		assert.Contains(t, u, first)
	}
	cp, err := st.LoadCheckpoint(t.Context(), store.Key{Scope: "shards", Partition: "s1"})
	require.NoError(t, err)
	assert.True(t, cp.Complete, "s1 is complete")
}
