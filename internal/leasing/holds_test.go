package leasing

import (
	"context"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/feed"
	"github.com/tidemark/tidemark/internal/instance"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/store/memstore"
)

// The pipeline's lease check says a message's lease is held only while the
// instance holds that partition under that lease and its heartbeat is
// fresh: a message emitted before a pause longer than the lease gets no
// frontier once the pause ends, whatever ran first after it.
func TestLeaseHoldsOnlyTheHeldLeaseWhileTheHeartbeatIsFresh(t *testing.T) {
	ctx := context.Background()
	mem := memstore.New()
	hub := feed.NewHub()
	lc := Config{Period: time.Second, RenewInterval: 200 * time.Millisecond, BalanceInterval: time.Second, InstanceID: "a"}
	m := New(Host{Scope: "s", Store: mem}, lc, service.MockResources())
	hub.SetLeaseHolder("s", m.Holds)

	// The instance machine starts, renews its heartbeat once (performed
	// here against the store) and runs p's worker under lease l.
	start := time.Now()
	var renew *instance.RenewHeartbeat
	for _, a := range m.im.Step(instance.Start{Now: start, Self: m.Owner(), Membership: instance.Membership{Epoch: 1, Partitions: []string{"p"}}}) {
		if r, ok := a.(instance.RenewHeartbeat); ok {
			renew = &r
		}
	}
	require.NotNil(t, renew)
	got, err := mem.RenewHeartbeat(ctx, renew.Heartbeat, renew.Held)
	require.NoError(t, err)
	m.im.Step(instance.Renewed{Owner: m.Owner(), Start: start, Heartbeat: got})
	l := store.Lease{Owner: m.Owner(), Counter: 7}
	m.holders["p"] = newHolder(store.Key{Scope: "s", Partition: "p"}, l, func(*Holder, string) {})
	m.publishSnapshot()

	require.True(t, hub.Holds("s", "p", l.Owner, 7, start.Add(100*time.Millisecond)), "the held lease, heartbeat fresh")
	require.False(t, hub.Holds("s", "p", l.Owner, 6, start.Add(100*time.Millisecond)), "an older lease of the partition")
	require.False(t, hub.Holds("s", "q", l.Owner, 7, start.Add(100*time.Millisecond)), "a partition not held")
	require.False(t, hub.Holds("s", "p", l.Owner, 7, start.Add(lc.Period)), "a lease period after the last renewal began: the others may have taken it")
	m.holders["p"].Lose("taken over")
	require.False(t, hub.Holds("s", "p", l.Owner, 7, start.Add(100*time.Millisecond)), "a lost lease")
	require.True(t, feed.NewHub().Holds("s", "p", "x", 1, time.Now()), "without leases every message's lease counts as held")
}
