package leasing

import (
	"context"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/instance"
	"github.com/tidemark/tidemark/internal/store/memstore"
)

// With leases the instance machine times the publisher too: the manager
// asks the host (Perform) for each round the machine decides (the first at once,
// one after a durable promotion the host posts), and the machine hears the
// round's answer through Post. The idle reads are an hour apart here, so
// the second round is the promotion's.
func TestManagerAsksTheHostForThePublicationRoundsTheMachineTimes(t *testing.T) {
	rounds := make(chan bool, 4)
	host := Host{
		Scope: "s", Store: memstore.New(),
		Membership: func() instance.Membership { return instance.Membership{Epoch: 1, Partitions: []string{"p1"}} },
		Epoch:      func() uint64 { return 1 },
		Launch: func(ctx context.Context, _ string, _ *Holder, done func()) {
			go func() {
				<-ctx.Done()
				done()
			}()
		},
		Instance: instance.Config{PublishInterval: time.Millisecond, PublishIdle: time.Hour, PublishMaxIdle: time.Hour},
		Perform: func(a instance.Action) {
			if p, ok := a.(instance.Publish); ok {
				rounds <- p.Final
			}
		},
	}
	m := New(host, DefaultConfig(), service.MockResources())
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		m.Run(ctx)
	}()
	defer func() {
		cancel()
		<-ran
	}()
	next := func(why string) bool {
		t.Helper()
		select {
		case final := <-rounds:
			return final
		case <-time.After(30 * time.Second):
			t.Fatalf("no publication round asked for: %s", why)
		}
		return false
	}
	require.False(t, next("the first round runs at once"), "not the final round")
	start := time.Now()
	m.Post(instance.Published{Now: time.Now(), Start: start, Active: true, Epoch: 1})
	m.Post(instance.Promoted{Now: time.Now(), Partition: "p1", Generation: 2})
	require.False(t, next("a durable promotion is published"), "not the final round")
}
