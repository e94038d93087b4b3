package processor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/feed"
	"github.com/tidemark/tidemark/internal/frontiermeta"
	"github.com/tidemark/tidemark/internal/publish"
	"github.com/tidemark/tidemark/internal/store"
)

// Test helpers shared by the partition_frontier and frontier_advances tests.
// Checkpoints are written only through the store API (CreateCheckpoint,
// Promote, SetParked), i.e. by the same conditional writes the input makes.

var scopeSeq atomic.Int64

// newScope returns a scope name unique in this test process: the in-process
// feed is global, so two tests must never share a scope.
func newScope(t *testing.T) string {
	t.Helper()
	r := strings.NewReplacer("/", "-", " ", "-", "_", "-")
	return fmt.Sprintf("pt%d-%s", scopeSeq.Add(1), r.Replace(t.Name()))
}

// testHubs holds each test scope's feed hub, as the hub of a pipeline's
// resources is shared by its input and processors (scopes are unique per
// test, so tests never share a hub).
var testHubs sync.Map

// hubFor returns the feed hub of scope.
func hubFor(scope string) *feed.Hub {
	h, _ := testHubs.LoadOrStore(scope, feed.NewHub())
	return h.(*feed.Hub)
}

// writer writes checkpoints through the store API and, like the input's
// observeCheckpoint, hands every durable (successfully written) checkpoint
// to the feed hub of its scope.
type writer struct {
	t     *testing.T
	st    store.Store
	scope string
	epoch uint64
}

func (w writer) key(part string) store.Key { return store.Key{Scope: w.scope, Partition: part} }

// create writes the first checkpoint (generation 1, cursor "<part>-1").
func (w writer) create(part string) store.Checkpoint {
	w.t.Helper()
	cp, err := w.st.CreateCheckpoint(context.Background(), store.Checkpoint{
		Key: w.key(part), Cursor: []byte(part + "-1"), Generation: 1, Epoch: max(w.epoch, 1),
	})
	require.NoError(w.t, err)
	hubFor(cp.Scope).Publish(cp.Scope, cp.Partition, cp.Watermark)
	w.publish()
	return cp
}

// promotion is the promotion of part from cp to the next generation with
// watermark wm (0: none).
func (w writer) promotion(cp store.Checkpoint, wm int64) store.Promotion {
	p := store.Promotion{
		Key: cp.Key, FromCursor: cp.Cursor, FromGeneration: cp.Generation,
		To:        []byte(fmt.Sprintf("%s-%d", cp.Partition, cp.Generation+1)),
		WitnessID: fmt.Sprintf("w-%s-%d", cp.Partition, cp.Generation),
		Epoch:     max(w.epoch, 1),
	}
	if wm != 0 {
		p.Watermark = coord.Integer(wm)
	}
	return p
}

// promote reads part's checkpoint and promotes it to watermark wm.
func (w writer) promote(part string, wm int64) store.Checkpoint {
	w.t.Helper()
	cp, err := w.st.LoadCheckpoint(context.Background(), w.key(part))
	require.NoError(w.t, err)
	next, err := w.st.Promote(context.Background(), w.promotion(cp, wm))
	require.NoError(w.t, err)
	hubFor(next.Scope).Publish(next.Scope, next.Partition, next.Watermark)
	w.publish()
	return next
}

// tryPromote makes one promotion and publishes it to the feed only when the
// conditional write won.
func (w writer) tryPromote(p store.Promotion) (store.Checkpoint, error) {
	cp, err := w.st.Promote(context.Background(), p)
	if err == nil {
		hubFor(cp.Scope).Publish(cp.Scope, cp.Partition, cp.Watermark)
		w.publish()
	}
	return cp, err
}

// publish runs one round of the frontier publisher the input runs in
// this process (a fresh one, which reads every checkpoint once) and hands
// the record to this process's processors, as the input does. Without a
// membership record there is nothing to publish.
func (w writer) publish() {
	w.t.Helper()
	_, f, _, err := publish.NewPublisher(w.st, w.scope).Round(context.Background())
	if errors.Is(err, store.ErrNotFound) {
		return
	}
	require.NoError(w.t, err)
	hubFor(f.Scope).PublishRecord(f)
}

// meta is the frontier metadata of one processed message.
type meta struct {
	Frontier    string
	HasFrontier bool
	Epoch       string
	Vector      string
	HeldBy      string
	Reason      string
	HasReason   bool
}

func readMeta(m *service.Message) meta {
	var r meta
	r.Frontier, r.HasFrontier = m.MetaGet(frontiermeta.Frontier)
	r.Epoch, _ = m.MetaGet(frontiermeta.FrontierEpoch)
	r.Vector, _ = m.MetaGet(frontiermeta.FrontierVector)
	r.HeldBy, _ = m.MetaGet(frontiermeta.FrontierHeldBy)
	r.Reason, r.HasReason = m.MetaGet(frontiermeta.FrontierReason)
	return r
}

// process runs one message through p and returns its frontier metadata.
func process(t *testing.T, p *frontierProcessor) meta {
	t.Helper()
	msg := service.NewMessage([]byte(`{}`))
	// Metadata from an upstream processor must not survive when withheld.
	msg.MetaSetMut(frontiermeta.Frontier, "stale-upstream-value")
	msg.MetaSetMut(frontiermeta.FrontierReason, "stale-upstream-reason")
	batch, err := p.Process(context.Background(), msg)
	require.NoError(t, err)
	require.Len(t, batch, 1)
	return readMeta(batch[0])
}

// durableMin is the minimum integer watermark over parts as stored now
// (ok false when one has none).
func durableMin(t *testing.T, st store.Store, scope string, parts []string) (int64, bool) {
	t.Helper()
	var lo int64
	for i, part := range parts {
		cp, err := st.LoadCheckpoint(context.Background(), store.Key{Scope: scope, Partition: part})
		if errors.Is(err, store.ErrNotFound) {
			return 0, false
		}
		require.NoError(t, err)
		if cp.Watermark.IsZero() {
			return 0, false
		}
		require.Equal(t, coord.KindInteger, cp.Watermark.Kind)
		if i == 0 || cp.Watermark.Int < lo {
			lo = cp.Watermark.Int
		}
	}
	return lo, true
}

// sources runs fn once per view source (store, read every time; feed).
func sources(t *testing.T, fn func(t *testing.T, fromFeed bool)) {
	t.Run("source=store", func(t *testing.T) { fn(t, false) })
	t.Run("source=feed", func(t *testing.T) { fn(t, true) })
}

// newView is NewView over st with a refresh of 1ns (every message reads the
// store when the source is the store).
func newView(t *testing.T, st store.Store, scope string, parts []string, fromFeed bool) *frontierProcessor {
	t.Helper()
	p, err := NewView(ViewConfig{Scope: scope, Feed: hubFor(scope), Partitions: parts, FromFeed: fromFeed, Refresh: time.Nanosecond}, st, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	return p
}
