package input

// How the input paces its frontier publisher (publish.Pacer): idle reads
// slow down while nothing changes, and a newer epoch is published at once
// whatever the idle pace.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/chain"
	"github.com/tidemark/tidemark/internal/e2etest"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/provider/simulated"
)

// startPaced runs one input over st (2 partitions of 3 events, polling
// every 10 ms) that publishes every 5 ms, reading its records until the
// test ends.
func startPaced(t *testing.T, st store.Store, scope string) *paginatedInput {
	t.Helper()
	parts := []string{"p0", "p1"}
	prov, err := simulated.New(simulated.Config{Partitions: parts, EventsPerPartition: 3})
	require.NoError(t, err)
	bi, err := New(Config{
		Scope: scope, Partitions: parts,
		Config: chain.Config{
			MaxPagesInFlight: 2, PollInterval: 10 * time.Millisecond, ParkCheckInterval: time.Second, CoalescePromotions: true,
			StoreBackoff: 10 * time.Millisecond, FetchRetries: 3, FetchBackoff: 10 * time.Millisecond,
		},
		FrontierPublishInterval: 5 * time.Millisecond,
	}, prov, st, nil, service.MockResources())
	require.NoError(t, err)
	in := bi.(*paginatedInput)
	require.NoError(t, in.Connect(t.Context()))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			_, ack, err := in.ReadBatch(ctx)
			if err != nil {
				return
			}
			_ = ack(ctx, nil)
		}
	}()
	t.Cleanup(func() {
		cancel()
		cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
		defer ccancel()
		require.NoError(t, in.Close(cctx))
		<-done
	})
	return in
}

// setPublishPace sets the idle pace of the publishers started by the test.
func setPublishPace(t *testing.T, idle, maxIdle time.Duration) {
	oldIdle, oldMax := publishIdleRead, publishMaxIdleRead
	publishIdleRead, publishMaxIdleRead = idle, maxIdle
	t.Cleanup(func() { publishIdleRead, publishMaxIdleRead = oldIdle, oldMax })
}

// Once every partition is caught up and published, the publisher's rounds
// only read (the record's root), and they thin out while nothing changes:
// with idle reads from 5 ms doubling to 80 ms, a second of quiet holds far
// fewer than the 200 reads of a fixed 5 ms pace (a slow machine only
// lowers the count).
func TestIdlePublisherReadsLessOftenWhileNothingChanges(t *testing.T) {
	setPublishPace(t, 5*time.Millisecond, 80*time.Millisecond)
	st := newReadMeter()
	startPaced(t, st, "paced")
	e2etest.WaitFor(t, e2etest.Patience, "both partitions published through their events", func() (bool, string) {
		f, err := st.Store.LoadFrontier(context.Background(), "paced")
		return err == nil && f.Scalar.Int == 3, fmt.Sprintf("%+v %v", f, err)
	})
	time.Sleep(500 * time.Millisecond) // the pace slows to its slowest
	st.take()
	time.Sleep(time.Second)
	items, _ := st.take()
	t.Logf("root reads in one quiet second: %d", items["LoadFrontierHead"])
	require.Positive(t, items["LoadFrontierHead"], "idle rounds still read")
	require.Less(t, items["LoadFrontierHead"], int64(40), "idle rounds at the slowest pace (80 ms): about 12 a second")
}

// A newer epoch (written here by another party) reaches the published
// record without waiting for an idle round: the membership check adopts it
// and wakes the publisher, which publishes the new epoch's record at once.
func TestNewerEpochIsPublishedWithoutWaitingForAnIdleRound(t *testing.T) {
	setPublishPace(t, time.Hour, time.Hour) // no idle round during the test
	old := membershipCheckInterval
	membershipCheckInterval = 20 * time.Millisecond
	t.Cleanup(func() { membershipCheckInterval = old })
	st := newReadMeter()
	startPaced(t, st, "epochs")
	ctx := context.Background()
	e2etest.WaitFor(t, e2etest.Patience, "epoch 1 published through the events", func() (bool, string) {
		f, err := st.Store.LoadFrontier(ctx, "epochs")
		return err == nil && f.Scalar.Int == 3, fmt.Sprintf("%+v %v", f, err)
	})
	m, err := st.Store.LoadMembership(ctx, "epochs")
	require.NoError(t, err)
	m.Epoch++
	_, err = st.Store.SwapMembership(ctx, m.Epoch-1, m)
	require.NoError(t, err)
	e2etest.WaitFor(t, e2etest.Patience, "epoch 2 published", func() (bool, string) {
		f, err := st.Store.LoadFrontier(ctx, "epochs")
		return err == nil && f.Epoch == 2, fmt.Sprintf("%+v %v", f, err)
	})
}
