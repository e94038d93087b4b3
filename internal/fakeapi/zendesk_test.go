package fakeapi

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type zendeskPage struct {
	Tickets []struct {
		ID        int64  `json:"id"`
		UpdatedAt string `json:"updated_at"`
	} `json:"tickets"`
	AfterCursor string `json:"after_cursor"`
	AfterURL    string `json:"after_url"`
	EndOfStream bool   `json:"end_of_stream"`
}

const zendeskAuth = "Basic YWdlbnRAZXhhbXBsZS5jb20vdG9rZW46c2VjcmV0"

func zendeskGet(t *testing.T, u string) (zendeskPage, answer) {
	t.Helper()
	a := get(t, u, "Authorization", zendeskAuth)
	var p zendeskPage
	if a.status == http.StatusOK {
		a.json(t, &p)
	}
	return p, a
}

// TestZendeskCursorExport: from start_time the export pages with
// after_cursor to end_of_stream; the last page's cursor polls later
// changes, an updated ticket comes again; an empty page at the end repeats
// its cursor.
func TestZendeskCursorExport(t *testing.T) {
	z := NewZendesk(t, zendeskAuth)
	z.SetHoldback(0)
	want := z.Append(12)
	base := z.URL() + "/api/v2/incremental/tickets/cursor.json?per_page=5"
	u := base + "&start_time=0"
	var got []int64
	var p zendeskPage
	for range 10 {
		var a answer
		p, a = zendeskGet(t, u)
		require.Equal(t, http.StatusOK, a.status, "%s", a.body)
		for _, tk := range p.Tickets {
			got = append(got, tk.ID)
		}
		require.Equal(t, base[:strings.Index(base, "?")]+"?cursor="+url.QueryEscape(p.AfterCursor), p.AfterURL)
		u = base + "&cursor=" + url.QueryEscape(p.AfterCursor)
		if p.EndOfStream {
			break
		}
	}
	require.True(t, p.EndOfStream)
	require.Equal(t, want, got)

	empty, _ := zendeskGet(t, u)
	require.Empty(t, empty.Tickets)
	require.True(t, empty.EndOfStream)
	require.Equal(t, p.AfterCursor, empty.AfterCursor, "an empty page at the end repeats its cursor")

	z.Update(want[0])
	again, _ := zendeskGet(t, u)
	require.Len(t, again.Tickets, 1)
	require.Equal(t, want[0], again.Tickets[0].ID)
}

// TestZendeskHoldbackAndStartTime: changes of the last minute are not
// exported, and a start_time within it is refused.
func TestZendeskHoldbackAndStartTime(t *testing.T) {
	z := NewZendesk(t, zendeskAuth)
	z.Append(3)
	p, a := zendeskGet(t, z.URL()+"/api/v2/incremental/tickets/cursor.json?start_time=0")
	require.Equal(t, http.StatusOK, a.status)
	require.Empty(t, p.Tickets, "tickets changed within the minute are not exported yet")
	_, a = zendeskGet(t, z.URL()+"/api/v2/incremental/tickets/cursor.json?start_time="+strconv.FormatInt(time.Now().Unix(), 10))
	require.Equal(t, http.StatusBadRequest, a.status)
}

// TestZendeskCursorMustBeEscaped: a cursor with '+' sent unescaped does
// not decode: 400 InvalidPaginationParameter, as for an expired one.
func TestZendeskCursorMustBeEscaped(t *testing.T) {
	z := NewZendesk(t, zendeskAuth)
	z.SetHoldback(0)
	z.Append(2)
	p, _ := zendeskGet(t, z.URL()+"/api/v2/incremental/tickets/cursor.json?start_time=0&per_page=1")
	require.Contains(t, p.AfterCursor, "+", "cursors use the whole base64 alphabet")
	_, a := zendeskGet(t, z.URL()+"/api/v2/incremental/tickets/cursor.json?cursor="+p.AfterCursor)
	require.Equal(t, http.StatusBadRequest, a.status)
	require.Contains(t, string(a.body), "InvalidPaginationParameter")
	next, a := zendeskGet(t, z.URL()+"/api/v2/incremental/tickets/cursor.json?cursor="+url.QueryEscape(p.AfterCursor))
	require.Equal(t, http.StatusOK, a.status)
	require.Len(t, next.Tickets, 1)

	z.Expire()
	_, a = zendeskGet(t, z.URL()+"/api/v2/incremental/tickets/cursor.json?cursor="+url.QueryEscape(next.AfterCursor))
	require.Equal(t, http.StatusBadRequest, a.status)
	require.Contains(t, string(a.body), "InvalidPaginationParameter")
	require.Equal(t, 2, z.ExpiredAnswers(), "the unescaped cursor and the expired one")
}

func TestZendeskRateLimitAnswer(t *testing.T) {
	z := NewZendesk(t, zendeskAuth)
	rateLimitCase(t, z.Control, z.URL()+"/api/v2/incremental/tickets/cursor.json?start_time=0", "APIRateLimitExceeded", true, "Authorization", zendeskAuth)
}
