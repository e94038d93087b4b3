package input_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/input"
	"github.com/tidemark/tidemark/internal/chain"
	"github.com/tidemark/tidemark/internal/e2etest"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/store/memstore"
	"github.com/tidemark/tidemark/provider"
)

// The secrets of echoingProvider: one known when it is built, one it
// learns at its first fetch, and a Basic credential.
const (
	sdkAPIKey   = "sdk-ap1-k3y/0123456789"
	sdkLearned  = "sdk-l3arned+t0ken=42"
	sdkUser     = "sdk-user"
	sdkPassword = "sdk-p4ssw0rd!"
)

// echoingProvider is a provider written against the public SDK only (as
// one in another module): its source refuses every request and echoes the
// request's secrets in the refusal.
type echoingProvider struct {
	mu  sync.Mutex
	red provider.Redactor
}

func (p *echoingProvider) RedactWith(r provider.Redactor) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.red = r
	r.Add(sdkAPIKey)
	r.AddCredential(basic())
}

func basic() string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(sdkUser+":"+sdkPassword))
}

func (p *echoingProvider) Fetch(_ context.Context, req provider.Request) (provider.Response, error) {
	p.mu.Lock()
	red := p.red
	p.mu.Unlock()
	if red != nil {
		red.Add(sdkLearned) // a secret learned after the input started
	}
	return provider.Response{}, fmt.Errorf("%w: partition %s: 401 from the source: key=%s token=%s authorization=%q user:password=%s:%s",
		provider.ErrPermanent, req.Partition, sdkAPIKey, sdkLearned, basic(), sdkUser, sdkPassword)
}

func (*echoingProvider) Contract() provider.Contract {
	return provider.Contract{EmptyPage: provider.EmptyNoEvidence}
}

func (*echoingProvider) Close(context.Context) error { return nil }

// TestAnOutsideProviderGetsItsSecretsRedacted: a provider outside the
// module registers its secrets through provider.Secrets (those it holds
// and one it learns later); when its source echoes them in a refusal, the
// park reason the input writes to the store shows none of them.
func TestAnOutsideProviderGetsItsSecretsRedacted(t *testing.T) {
	st := memstore.New()
	cfg := input.Config{
		Scope: "sdk-secrets", Partitions: []string{"p"},
		Config: chain.Config{
			MaxPagesInFlight: 1, MaxBatchSize: 1,
			PollInterval: 2 * time.Millisecond, ParkCheckInterval: 5 * time.Millisecond,
			StoreBackoff: 5 * time.Millisecond, FetchBackoff: time.Millisecond,
		},
	}
	in, err := input.New(cfg, &echoingProvider{}, st, nil, service.MockResources())
	require.NoError(t, err)
	require.NoError(t, in.Connect(t.Context()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, in.Close(ctx))
	})

	var reason string
	e2etest.WaitFor(t, e2etest.Patience, "the partition to park", func() (bool, string) {
		c, err := st.LoadCheckpoint(t.Context(), store.Key{Scope: "sdk-secrets", Partition: "p"})
		if err != nil {
			return false, err.Error()
		}
		reason = c.Parked
		return reason != "", "not parked"
	})
	require.Contains(t, reason, "401 from the source", "the reason is the provider's error")
	require.Contains(t, reason, "[redacted]")
	for _, secret := range []string{sdkAPIKey, sdkLearned, sdkPassword, sdkUser + ":" + sdkPassword, strings.TrimPrefix(basic(), "Basic ")} {
		require.NotContains(t, reason, secret)
	}
}
