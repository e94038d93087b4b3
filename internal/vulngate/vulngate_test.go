package vulngate

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A govulncheck -format json stream (its message kinds, shortened): a
// called stdlib vulnerability (two traces), a called module one, one only
// imported (no function), one only required (no package).
const stream = `{"config":{"protocol_version":"v1.0.0","scanner_name":"govulncheck","scanner_version":"v1.9.0","db":"file:///x","scan_level":"symbol"}}
{"progress":{"message":"Scanning your code"}}
{"osv":{"id":"GO-2026-0001","summary":"s"}}
{"finding":{"osv":"GO-2026-0001","fixed_version":"v1.26.9","trace":[{"module":"stdlib","version":"v1.26.8","package":"net/http","function":"Serve","receiver":"*Server"},{"module":"github.com/tidemark/tidemark","package":"github.com/tidemark/tidemark/bench/scale","function":"Listen"}]}}
{"finding":{"osv":"GO-2026-0001","fixed_version":"v1.26.9","trace":[{"module":"stdlib","version":"v1.26.8","package":"net/http","function":"Get"}]}}
{"finding":{"osv":"GO-2026-0002","fixed_version":"v1.41.0","trace":[{"module":"go.opentelemetry.io/otel","version":"v1.37.0","package":"go.opentelemetry.io/otel/baggage","function":"Parse"}]}}
{"finding":{"osv":"GO-2026-0003","fixed_version":"v1.2.0","trace":[{"module":"example.com/m","version":"v1.0.0","package":"example.com/m/p"}]}}
{"finding":{"osv":"GO-2026-0004","trace":[{"module":"example.com/n","version":"v1.0.0"}]}}
`

func TestCalledKeepsOnlyCalledVulnerabilities(t *testing.T) {
	got, err := Called(strings.NewReader(stream))
	require.NoError(t, err)
	assert.Equal(t, []Finding{
		{ID: "GO-2026-0001", Module: "stdlib", Version: "v1.26.8", Fixed: "v1.26.9", Package: "net/http", Function: "Serve"},
		{ID: "GO-2026-0002", Module: "go.opentelemetry.io/otel", Version: "v1.37.0", Fixed: "v1.41.0", Package: "go.opentelemetry.io/otel/baggage", Function: "Parse"},
	}, got)
	_, err = Called(strings.NewReader(`{"finding":`))
	assert.Error(t, err, "a truncated stream is an error, not a clean scan")
}

func TestGateFailsOnWhatTheAllowListDoesNotExplain(t *testing.T) {
	allow, err := ParseAllow(strings.NewReader("# comment\n\nGO-2026-0001 stdlib, fixed in go1.26.9; toolchain pinned\nGO-2026-0009 gone since\n"))
	require.NoError(t, err)
	findings, err := Called(strings.NewReader(stream))
	require.NoError(t, err)
	explained, unexplained, stale := Gate(findings, allow)
	require.Len(t, explained, 1)
	assert.Equal(t, "GO-2026-0001", explained[0].ID)
	require.Len(t, unexplained, 1)
	assert.Equal(t, "GO-2026-0002", unexplained[0].ID)
	assert.Equal(t, []string{"GO-2026-0009"}, stale)

	_, err = ParseAllow(strings.NewReader("GO-2026-0001\n"))
	assert.ErrorContains(t, err, "has no reason")
}
