package fakeapi

import (
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var nextLink = regexp.MustCompile(`<([^>]*)>; rel="next"`)

func oktaPage(t *testing.T, o *Okta, u string) (uuids []string, next string, a answer) {
	t.Helper()
	a = get(t, u, "Authorization", "SSWS tok")
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	var evs []struct {
		UUID      string `json:"uuid"`
		Published string `json:"published"`
	}
	a.json(t, &evs)
	for _, e := range evs {
		_, err := time.Parse(time.RFC3339Nano, e.Published)
		require.NoError(t, err)
		uuids = append(uuids, e.UUID)
	}
	var links []string
	for _, l := range a.header.Values("Link") {
		if m := nextLink.FindStringSubmatch(l); m != nil {
			links = append(links, m[1])
		}
	}
	require.Len(t, links, 1, "a polling answer carries exactly one next link: %v", a.header.Values("Link"))
	return uuids, links[0], a
}

// TestOktaPollingFollowsNextLinksToAnEmptyHead: following next links from
// a since request reads every event once, in persistence order; at the head
// the page is empty and its next link is the request itself; an event
// logged later comes on that link.
func TestOktaPollingFollowsNextLinksToAnEmptyHead(t *testing.T) {
	o := NewOkta(t, "tok")
	want := o.Append(23)
	u := o.URL() + "/api/v1/logs?limit=5&sortOrder=ASCENDING&since=" + url.QueryEscape(time.Now().Add(-time.Hour).Format(time.RFC3339))
	var got []string
	for range 10 {
		ids, next, _ := oktaPage(t, o, u)
		if len(ids) == 0 {
			require.Equal(t, u, next, "the empty head page links to itself")
			break
		}
		got = append(got, ids...)
		u = next
	}
	require.Equal(t, want, got)
	more := o.Append(2)
	ids, _, _ := oktaPage(t, o, u)
	require.Equal(t, more, ids)
	require.Equal(t, 1, o.Served(OktaSince))
}

func TestOktaRequestValidation(t *testing.T) {
	o := NewOkta(t, "tok")
	o.Append(1)
	base := o.URL() + "/api/v1/logs?"
	for _, tc := range []struct {
		name, query, auth string
		status            int
		code              string
	}{
		{"wrong token", "", "SSWS nope", http.StatusUnauthorized, "E0000011"},
		{"limit above 1000", "limit=1001", "SSWS tok", http.StatusBadRequest, "E0000001"},
		{"since and after together", "since=2026-01-01T00:00:00Z&after=1_1", "SSWS tok", http.StatusBadRequest, "E0000001"},
		{"since older than 180 days", "since=" + url.QueryEscape(time.Now().Add(-181*24*time.Hour).Format(time.RFC3339)), "SSWS tok", http.StatusBadRequest, "E0000053"},
		{"bounded request", "until=2026-01-01T00:00:00Z", "SSWS tok", http.StatusBadRequest, "E0000001"},
		{"a cursor the org never issued", "after=garbage", "SSWS tok", http.StatusBadRequest, "E0000001"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := get(t, base+tc.query, "Authorization", tc.auth)
			require.Equal(t, tc.status, a.status)
			var e struct {
				ErrorCode string `json:"errorCode"`
			}
			a.json(t, &e)
			require.Equal(t, tc.code, e.ErrorCode)
		})
	}
}

// TestOktaRetentionKeepsCursors: events aged past retention are not
// returned, the query still succeeds, and the cursor into them still leads
// to the events after them.
func TestOktaRetentionKeepsCursors(t *testing.T) {
	o := NewOkta(t, "tok")
	o.Append(3)
	_, next, _ := oktaPage(t, o, o.URL()+"/api/v1/logs?limit=1")
	o.Expire()
	later := o.Append(2)
	var got []string
	for range 5 {
		ids, n, _ := oktaPage(t, o, next)
		got, next = append(got, ids...), n
	}
	require.Equal(t, later, got, "the aged events are skipped, the later ones follow")
	require.Zero(t, o.ExpiredAnswers(), "Okta has no expiry answer")
}

func TestOktaRateLimitAnswer(t *testing.T) {
	o := NewOkta(t, "tok")
	o.Append(1)
	o.RateLimit(1500 * time.Millisecond)
	a := get(t, o.URL()+"/api/v1/logs", "Authorization", "SSWS tok")
	require.Equal(t, http.StatusTooManyRequests, a.status)
	require.Contains(t, string(a.body), "E0000047")
	reset, err := strconv.ParseInt(a.header.Get("X-Rate-Limit-Reset"), 10, 64)
	require.NoError(t, err)
	require.False(t, time.Unix(reset, 0).Before(time.Now().Add(time.Second)), "the reset second is the end of the window, rounded up")
	require.Equal(t, "0", a.header.Get("X-Rate-Limit-Remaining"))

	fresh := NewOkta(t, "tok")
	rateLimitCase(t, fresh.Control, fresh.URL()+"/api/v1/logs", "E0000047", true, "Authorization", "SSWS tok")
}

// TestOktaSinceFiltersByPersistenceTime: `since` is compared with the time
// an event was persisted, not with its `published`: after an event
// published ahead of its persistence, a polling request with `since` at
// that `published` does not return the events persisted in between, and
// one with `since` before their persistence does.
func TestOktaSinceFiltersByPersistenceTime(t *testing.T) {
	o := NewOkta(t, "tok")
	ahead := o.AppendPublishedAhead(1, 2*time.Minute)
	between := o.Append(3)
	first, _, a := oktaPage(t, o, o.URL()+"/api/v1/logs?since="+url.QueryEscape(time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)))
	require.Equal(t, append(ahead, between...), first)
	var evs []struct {
		Published string `json:"published"`
	}
	a.json(t, &evs)
	published := evs[0].Published
	p, err := time.Parse(time.RFC3339Nano, published)
	require.NoError(t, err)
	require.True(t, p.After(time.Now()), "published %s lies ahead", published)

	at, _, _ := oktaPage(t, o, o.URL()+"/api/v1/logs?since="+url.QueryEscape(published))
	require.Empty(t, at, "nothing was persisted at or after the published time ahead")
	before, _, _ := oktaPage(t, o, o.URL()+"/api/v1/logs?since="+url.QueryEscape(p.Add(-10*time.Minute).Format(time.RFC3339Nano)))
	require.Equal(t, append(ahead, between...), before)
}
