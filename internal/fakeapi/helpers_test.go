package fakeapi

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// answer is one HTTP exchange with a fake.
type answer struct {
	status int
	header http.Header
	body   []byte
}

func (a answer) json(t *testing.T, v any) {
	t.Helper()
	require.NoError(t, json.Unmarshal(a.body, v), "body %s", a.body)
}

// get sends GET url with the headers (name, value pairs).
func get(t *testing.T, url string, headers ...string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return answer{resp.StatusCode, resp.Header, b}
}

// rateLimitCase checks a fake's rate-limit answer: status 429 while the
// window lasts, a body containing want, the retry time it names (if any)
// at or after the window's end, and the counters.
func rateLimitCase(t *testing.T, c *Control, url string, want string, names bool, headers ...string) {
	t.Helper()
	c.RateLimit(300 * time.Millisecond)
	a := get(t, url, headers...)
	// The window opened when that request arrived, before it returned.
	end := time.Now().Add(300 * time.Millisecond)
	require.Equal(t, http.StatusTooManyRequests, a.status, "%s", a.body)
	require.Contains(t, string(a.body), want)
	second := get(t, url, headers...) // at once: before the time named
	require.Equal(t, http.StatusTooManyRequests, second.status)
	require.Equal(t, 2, c.Throttled())
	if names {
		require.Equal(t, 1, c.Early(), "a request before the named time is early")
	} else {
		require.Equal(t, 0, c.Early(), "an answer naming no time makes no request early")
	}
	for time.Now().Before(end) {
		time.Sleep(time.Until(end))
	}
	require.NotEqual(t, http.StatusTooManyRequests, get(t, url, headers...).status, "the window is over")
}
