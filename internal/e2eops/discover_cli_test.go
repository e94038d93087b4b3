package e2eops

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// `connect tidemark discover` and `status --discover` record a discovery
// request for the scope in the checkpoint table (running inputs poll the
// counter); another scope's counter is untouched.
func TestDiscoverCommandRecordsARequest(t *testing.T) {
	e := newEnv(t)
	const scope = "cli-discover"
	out, code := e.cli("", "discover", "--scope", scope)
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "discovery request 1 recorded for scope "+scope)
	out, code = e.cli("", "status", "--scope", scope, "--discover", "--json")
	require.Equal(t, 0, code, out)
	n, err := e.st.DiscoveryRequests(context.Background(), scope)
	require.NoError(t, err)
	assert.Equal(t, uint64(2), n)
	n, err = e.st.DiscoveryRequests(context.Background(), scope+"-other")
	require.NoError(t, err)
	assert.Zero(t, n)
}
