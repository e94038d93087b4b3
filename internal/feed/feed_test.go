package feed

import (
	"testing"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/provider"
)

func TestFinalitiesAreTheLatestKnownBasisPerPartition(t *testing.T) {
	h := NewHub()
	assertion := provider.Basis{Finality: provider.FinalityAppendOnlyWriter}
	h.PublishFinality("s", "a", assertion)
	h.PublishFinality("s", "b", provider.Basis{})
	h.PublishFinality("s", "c", provider.Basis{Finality: provider.FinalityLag, Lag: 5})
	h.PublishFinality("s", "c", provider.Basis{Finality: provider.FinalityLag, Lag: 6})
	got := h.Finalities("s")
	assert.Equal(t, map[string]provider.Basis{"a": assertion, "c": {Finality: provider.FinalityLag, Lag: 6}}, got)
	got["a"] = provider.Basis{Finality: provider.FinalitySource}
	assert.Equal(t, assertion, h.Finalities("s")["a"], "Finalities returned the hub's own map")
}

func TestComponentsOfOneResourcesShareAHubAndOthersDoNot(t *testing.T) {
	res1, res2 := service.MockResources(), service.MockResources()
	assert.Same(t, Of(res1), Of(res1), "the input and the processor of one pipeline")
	assert.NotSame(t, Of(res1), Of(res2), "two pipelines")
	assert.NotSame(t, Of(nil), Of(nil), "a component outside a pipeline shares with nobody")

	Of(res1).Publish("s", "p", coord.Integer(5))
	assert.Len(t, Of(res1).Subscribe("s").Drain(), 1)
	assert.Empty(t, Of(res2).Subscribe("s").Drain(), "a watermark of one pipeline reached another")
}

func TestSubscriptionDrainsWhatWasPublishedBeforeThenOnlyChanges(t *testing.T) {
	h := NewHub()
	h.Publish("s", "a", coord.Integer(1))
	h.Publish("s", "a", coord.Integer(2))
	h.Publish("other", "x", coord.Integer(9))
	sub := h.Subscribe("s")
	assert.Equal(t, []Update{{Partition: "a", Watermark: coord.Integer(2)}}, sub.Drain(), "the latest value per partition, of its scope only")
	assert.Empty(t, sub.Drain())

	h.Publish("s", "b", coord.Integer(7))
	h.Publish("s", "b", coord.Integer(8))
	assert.Equal(t, []Update{{Partition: "b", Watermark: coord.Integer(8)}}, sub.Drain())

	sub.Close()
	h.Publish("s", "c", coord.Integer(1))
	assert.Empty(t, sub.Drain(), "a closed subscription receives nothing")
}

func TestRecordSubscriptionKeepsTheNewestRecord(t *testing.T) {
	h := NewHub()
	h.PublishRecord(store.Frontier{Scope: "s", Epoch: 1, Version: 1})
	sub := h.SubscribeRecords("s")
	assert.Nil(t, sub.Latest(), "records published before subscribing are not replayed")

	h.PublishRecord(store.Frontier{Scope: "s", Epoch: 1, Version: 3})
	h.PublishRecord(store.Frontier{Scope: "s", Epoch: 1, Version: 2})
	h.PublishRecord(store.Frontier{Scope: "other", Epoch: 9, Version: 9})
	got := sub.Latest()
	require.NotNil(t, got)
	assert.Equal(t, uint64(3), got.Version, "an older record arriving late replaced a newer one")
	assert.Nil(t, sub.Latest(), "Latest hands each record once")

	h.PublishRecord(store.Frontier{Scope: "s", Epoch: 2, Version: 1})
	got = sub.Latest()
	require.NotNil(t, got)
	assert.Equal(t, uint64(2), got.Epoch, "a record of a newer epoch is newer whatever its version")

	sub.Close()
	h.PublishRecord(store.Frontier{Scope: "s", Epoch: 3, Version: 1})
	assert.Nil(t, sub.Latest())
}

// A subscriber waits on Wake instead of polling: one token for what was
// published before it subscribed, one however many were published since
// the last receive, none when nothing was.
func TestSubscriptionWakesOnceForWhatWasPublished(t *testing.T) {
	h := NewHub()
	h.Publish("s", "p0", coord.Integer(1))
	sub := h.Subscribe("s")
	defer sub.Close()
	woken := func() bool {
		select {
		case <-sub.Wake():
			return true
		default:
			return false
		}
	}
	require.True(t, woken(), "published before the subscription")
	require.False(t, woken())
	h.Publish("s", "p0", coord.Integer(2))
	h.Publish("s", "p1", coord.Integer(3))
	require.True(t, woken())
	require.False(t, woken(), "one token for both")
	require.Len(t, sub.Drain(), 2)
	h.Publish("other", "p0", coord.Integer(4))
	require.False(t, woken(), "another scope")
}
