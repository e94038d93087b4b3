package registry

import (
	"context"
	"testing"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/provider"
)

type nopProvider struct{}

func (nopProvider) Fetch(context.Context, provider.Request) (provider.Response, error) {
	return provider.Response{}, nil
}
func (nopProvider) Contract() provider.Contract {
	return provider.Contract{EmptyPage: provider.EmptyNoEvidence}
}
func (nopProvider) Close(context.Context) error { return nil }

func spec(name string) Spec {
	return Spec{
		Name:   name,
		Fields: []*service.ConfigField{service.NewStringField("x")},
		Build:  func(*service.ParsedConfig, Env) (provider.Provider, error) { return nopProvider{}, nil },
	}
}

// TestRegister: a valid spec joins the registry (listed by name), a watcher
// hears every later registration, and invalid or repeated names are
// refused.
func TestRegister(t *testing.T) {
	calls := 0
	Watch(func() { calls++ })
	require.Equal(t, 1, calls, "Watch calls its function at once")

	require.NoError(t, Register(spec("zz_test_b")))
	require.NoError(t, Register(spec("zz_test_a")))
	require.Equal(t, 3, calls, "and after every registration")
	var names []string
	for _, s := range Registered() {
		names = append(names, s.Name)
	}
	require.Subset(t, names, []string{"zz_test_a", "zz_test_b"})
	require.IsNonDecreasing(t, names)

	require.ErrorContains(t, Register(spec("zz_test_a")), "already registered")
	require.ErrorContains(t, Register(spec("Bad-Name")), "must match")
	noBuild := spec("zz_test_c")
	noBuild.Build = nil
	require.ErrorContains(t, Register(noBuild), "Build is nil")
	noFields := spec("zz_test_d")
	noFields.Fields = nil
	require.ErrorContains(t, Register(noFields), "no fields")
	require.Equal(t, 3, calls, "a refused registration tells no watcher")
}
