package fakeapi

import (
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type stripeList struct {
	Object  string `json:"object"`
	HasMore bool   `json:"has_more"`
	Data    []struct {
		ID      string `json:"id"`
		Created int64  `json:"created"`
	} `json:"data"`
}

func stripeGet(t *testing.T, s *Stripe, query string) (stripeList, answer) {
	t.Helper()
	a := get(t, s.URL()+"/v1/events?"+query, "Authorization", "Bearer sk_test_fake", "Stripe-Account", "acct_1")
	var l stripeList
	if a.status == http.StatusOK {
		a.json(t, &l)
		require.Equal(t, "list", l.Object)
	}
	return l, a
}

func stripeIDs(l stripeList) []string {
	var out []string
	for _, d := range l.Data {
		out = append(out, d.ID)
	}
	return out
}

// TestStripeListDirections: the list is newest first; starting_after pages
// to older events, ending_before to newer ones (the page closest to the
// cursor, newest first); has_more tells whether more lie that way.
func TestStripeListDirections(t *testing.T) {
	s := NewStripe(t, "sk_test_fake")
	evs := s.Append("acct_1", 7) // oldest first
	newestFirst := slices.Clone(evs)
	slices.Reverse(newestFirst)

	l, _ := stripeGet(t, s, "limit=3")
	require.Equal(t, newestFirst[:3], stripeIDs(l))
	require.True(t, l.HasMore)
	l, _ = stripeGet(t, s, "limit=3&starting_after="+newestFirst[2])
	require.Equal(t, newestFirst[3:6], stripeIDs(l))
	require.True(t, l.HasMore)
	l, _ = stripeGet(t, s, "limit=3&starting_after="+newestFirst[5])
	require.Equal(t, newestFirst[6:], stripeIDs(l))
	require.False(t, l.HasMore)

	// From the oldest event towards the newest: the 3 right after it.
	l, _ = stripeGet(t, s, "limit=3&ending_before="+evs[0])
	require.Equal(t, []string{evs[3], evs[2], evs[1]}, stripeIDs(l))
	require.True(t, l.HasMore)
	l, _ = stripeGet(t, s, "limit=3&ending_before="+evs[6])
	require.Empty(t, l.Data)
	require.False(t, l.HasMore)
	more := s.Append("acct_1", 1)
	l, _ = stripeGet(t, s, "limit=3&ending_before="+evs[6])
	require.Equal(t, more, stripeIDs(l), "an event created later comes before the newest cursor")

	l, _ = stripeGet(t, s, "limit=100&created[gte]="+strconv.FormatInt(l.Data[0].Created, 10))
	require.Contains(t, stripeIDs(l), more[0])
	require.Equal(t, 1, s.Served(StripeCreatedFilter))
}

func TestStripeErrors(t *testing.T) {
	s := NewStripe(t, "sk_test_fake")
	evs := s.Append("acct_1", 2)
	for _, tc := range []struct {
		name, query string
		status      int
		want        string
	}{
		{"both cursors", "starting_after=" + evs[0] + "&ending_before=" + evs[1], http.StatusBadRequest, "You may only specify one of these parameters"},
		{"limit above 100", "limit=101", http.StatusBadRequest, "limit"},
		{"unknown cursor", "ending_before=evt_unknown", http.StatusNotFound, "resource_missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, a := stripeGet(t, s, tc.query)
			require.Equal(t, tc.status, a.status)
			require.Contains(t, string(a.body), tc.want)
		})
	}
	a := get(t, s.URL()+"/v1/events", "Authorization", "Bearer sk_wrong")
	require.Equal(t, http.StatusUnauthorized, a.status)
	a = get(t, s.URL()+"/v1/events", "Authorization", "Bearer sk_test_fake", "Stripe-Account", "acct_other")
	require.Equal(t, http.StatusForbidden, a.status)
}

// TestStripeRetention: after Expire the account's events are gone and a
// cursor naming one answers 400 "aged out of our retention policy" (an id
// that never existed stays 404 resource_missing, not an expiry); newer
// events list.
func TestStripeRetention(t *testing.T) {
	s := NewStripe(t, "sk_test_fake")
	evs := s.Append("acct_1", 3)
	s.Expire("acct_1")
	for _, param := range []string{"ending_before", "starting_after"} {
		_, a := stripeGet(t, s, param+"="+evs[2])
		require.Equal(t, http.StatusBadRequest, a.status)
		require.Contains(t, string(a.body), "is no longer available because it's aged out of our retention policy")
		require.Contains(t, string(a.body), `"param":"`+param+`"`)
		require.NotContains(t, string(a.body), "resource_missing")
	}
	require.Equal(t, 2, s.ExpiredAnswers())
	_, a := stripeGet(t, s, "ending_before=evt_never")
	require.Equal(t, http.StatusNotFound, a.status)
	require.Equal(t, 2, s.ExpiredAnswers(), "an id that never existed is no expiry")
	later := s.Append("acct_1", 2)
	l, _ := stripeGet(t, s, "")
	require.ElementsMatch(t, later, stripeIDs(l))
}

func TestStripeRateLimitAnswer(t *testing.T) {
	s := NewStripe(t, "sk_test_fake")
	s.Append("", 1)
	rateLimitCase(t, s.Control, s.URL()+"/v1/events", "rate_limit", false, "Authorization", "Bearer sk_test_fake")
	s.RateLimit(time.Second)
	a := get(t, s.URL()+"/v1/events", "Authorization", "Bearer sk_test_fake")
	require.Empty(t, a.header.Get("Retry-After"), "Stripe names no time to come back")
}
