package httpprovider

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/provider"
)

// Each partition has its own window under partition_rate_limit: a
// partition that used its count waits for its window's end while another
// partition starts at once, and a window unused for an interval is
// pruned once the map is full.
func TestPartitionRateLimitIsPerPartition(t *testing.T) {
	l := newPartitionLimiter(PartitionRateLimit{Count: 2, Interval: time.Second})
	t0 := time.Unix(1000, 0)
	assert.Zero(t, l.reserve("a", t0))
	assert.Zero(t, l.reserve("a", t0.Add(100*time.Millisecond)))
	assert.Equal(t, 800*time.Millisecond, l.reserve("a", t0.Add(200*time.Millisecond)), "a's third request in its window waits for the window's end")
	assert.Zero(t, l.reserve("b", t0.Add(200*time.Millisecond)), "b is not limited by a")
	assert.Zero(t, l.reserve("a", t0.Add(time.Second)), "a's next window")

	for i := range maxPartitionWindows {
		l.reserve(fmt.Sprintf("p%d", i), t0.Add(time.Second))
	}
	l.reserve("late", t0.Add(3*time.Second))
	assert.LessOrEqual(t, len(l.win), 2, "windows unused for an interval are pruned once the map is full")

	for _, bad := range []string{"5", "0/1s", "5/0s", "x/1s", "5/soon"} {
		_, err := ParsePartitionRateLimit(bad)
		assert.Error(t, err, bad)
	}
	got, err := ParsePartitionRateLimit("5/1s")
	require.NoError(t, err)
	assert.Equal(t, PartitionRateLimit{Count: 5, Interval: time.Second}, got)
}

// With partition_rate_limit, a partition's page request takes its own
// window and skips the rate_limit resource; the incarnation request
// (not a partition's own) still accesses the resource.
func TestPartitionRateLimitLeavesTheResourceToTheOtherRequests(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/inc" {
			fmt.Fprint(w, `{"created":1}`)
			return
		}
		fmt.Fprint(w, `[]`)
	}))
	t.Cleanup(srv.Close)
	var mu sync.Mutex
	accesses := 0
	res := service.MockResources(service.MockResourcesOptAddRateLimit("account", func(context.Context) (time.Duration, error) {
		mu.Lock()
		defer mu.Unlock()
		accesses++
		return 0, nil
	}))
	p := parseProvider(t, "http:\n  url: "+srv.URL+"/page\n  rate_limit: account\n  partition_rate_limit: 5/1s\n  successor: root = deleted()\n  incarnation:\n    url: "+srv.URL+"/inc\n    value: root = this.created\n", res, nil)
	_, err := p.Fetch(context.Background(), provider.Request{Scope: "s", Partition: "shard-1"})
	require.NoError(t, err)
	mu.Lock()
	assert.Zero(t, accesses, "the page request skips the rate_limit resource")
	mu.Unlock()
	assert.Equal(t, 1, p.limiter.win["shard-1"].used, "the page request took the partition's window")
	_, err = p.Incarnation(context.Background(), "s", "shard-1")
	require.NoError(t, err)
	mu.Lock()
	assert.Equal(t, 1, accesses, "the incarnation request accesses the rate_limit resource")
	mu.Unlock()
}

// Partitions that send the very same incarnation request (a Kinesis
// stream's DescribeStreamSummary for all its shards) share it, but never
// one that began before they asked: b and c, asking while a's request is
// in flight, share the next request, which begins after a's ends; three
// checks, two requests, and each answer from a request that began after
// its call.
func TestIdenticalIncarnationReadsShareTheNextRequest(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		mine := n
		mu.Unlock()
		if mine == 1 {
			<-release
		}
		fmt.Fprintf(w, `{"request":%d}`, mine)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(unblock) // first: a failed test does not leave request 1 held
	p := parseProvider(t, "http:\n  url: "+srv.URL+"/page\n  successor: root = deleted()\n  incarnation:\n    url: "+srv.URL+"/stream\n    value: root = this.request\n", nil, nil)

	got := make(map[string]string)
	var gmu sync.Mutex
	var wg sync.WaitGroup
	check := func(part string) {
		defer wg.Done()
		v, err := p.Incarnation(context.Background(), "s", part)
		assert.NoError(t, err)
		gmu.Lock()
		got[part] = v
		gmu.Unlock()
	}
	wg.Add(1)
	go check("shard-a")
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return n == 1 })
	wg.Add(2)
	go check("shard-b")
	go check("shard-c")
	waitFor(t, func() bool {
		p.shared.mu.Lock()
		defer p.shared.mu.Unlock()
		for _, f := range p.shared.flights {
			return f.next != nil && f.next.waiters == 2
		}
		return false
	})
	unblock()
	wg.Wait()
	assert.Equal(t, map[string]string{"shard-a": "1", "shard-b": "2", "shard-c": "2"}, got)
	mu.Lock()
	assert.Equal(t, 2, n, "three checks, two requests")
	mu.Unlock()
	p.shared.mu.Lock()
	assert.Empty(t, p.shared.flights, "nothing kept once no request is in flight")
	p.shared.mu.Unlock()
}

// waitFor polls cond until it holds (a state the test waits for, never a
// duration it asserts).
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("the state never came")
		}
		time.Sleep(time.Millisecond)
	}
}
