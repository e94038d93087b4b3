package fakeapi

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type graphPage struct {
	Value []struct {
		ID           string         `json:"id"`
		Subject      *string        `json:"subject"`
		LastModified *string        `json:"lastModifiedDateTime"`
		Removed      map[string]any `json:"@removed"`
	} `json:"value"`
	Next  string `json:"@odata.nextLink"`
	Delta string `json:"@odata.deltaLink"`
}

func graphGet(t *testing.T, u string) (graphPage, answer) {
	t.Helper()
	a := get(t, u, "Authorization", "Bearer tok", "Prefer", "odata.maxpagesize=4")
	var p graphPage
	if a.status == http.StatusOK {
		a.json(t, &p)
	}
	return p, a
}

// graphRound follows nextLinks from u to the round's deltaLink.
func graphRound(t *testing.T, u string) (ids []string, removed []string, delta string) {
	t.Helper()
	for range 100 {
		p, a := graphGet(t, u)
		require.Equal(t, http.StatusOK, a.status, "%s", a.body)
		require.NotEmpty(t, a.header.Get("Date"))
		for _, v := range p.Value {
			if v.Removed != nil {
				removed = append(removed, v.ID)
			} else {
				ids = append(ids, v.ID)
			}
		}
		require.False(t, p.Next != "" && p.Delta != "", "a page carries a nextLink or a deltaLink, never both")
		if p.Delta != "" {
			return ids, removed, p.Delta
		}
		require.NotEmpty(t, p.Next)
		u = p.Next
	}
	t.Fatal("the round never ended")
	return
}

// TestGraphDeltaRounds: the first round pages every message with nextLinks
// and ends with a deltaLink; the deltaLink's round returns what changed
// since (new messages, removals); an unchanged mailbox gives an empty page
// with a deltaLink.
func TestGraphDeltaRounds(t *testing.T) {
	g := NewGraph(t, "tok")
	first := g.Append("ada@example.com", 10)
	start := g.URL() + "/v1.0/users/ada@example.com/mailFolders/inbox/messages/delta?$select=subject,lastModifiedDateTime"
	ids, removed, delta := graphRound(t, start)
	require.Equal(t, first, ids)
	require.Empty(t, removed)

	more := g.Append("ada@example.com", 3)
	g.Delete("ada@example.com", first[0])
	ids, removed, delta = graphRound(t, delta)
	require.Equal(t, more, ids)
	require.Equal(t, []string{first[0]}, removed)

	ids, removed, _ = graphRound(t, delta)
	require.Empty(t, ids)
	require.Empty(t, removed)
	require.Equal(t, 1, g.Served(GraphInitialRound))
}

// TestGraphSelect: $select limits the properties; id always comes.
func TestGraphSelect(t *testing.T) {
	g := NewGraph(t, "tok")
	g.Append("ada@example.com", 1)
	p, _ := graphGet(t, g.URL()+"/v1.0/users/ada@example.com/mailFolders/inbox/messages/delta?$select=subject")
	require.Len(t, p.Value, 1)
	require.NotNil(t, p.Value[0].Subject)
	require.Nil(t, p.Value[0].LastModified, "lastModifiedDateTime only comes when selected")
	require.NotEmpty(t, p.Value[0].ID)
}

// TestGraphExpiredTokenIsGone: after Expire, a deltaLink and a nextLink
// answer 410 syncStateNotFound; a new round without a token works.
func TestGraphExpiredTokenIsGone(t *testing.T) {
	g := NewGraph(t, "tok")
	g.Append("ada@example.com", 6)
	start := g.URL() + "/v1.0/users/ada@example.com/mailFolders/inbox/messages/delta"
	p, _ := graphGet(t, start)
	require.NotEmpty(t, p.Next)
	_, _, delta := graphRound(t, start)
	g.Expire()
	for _, u := range []string{p.Next, delta} {
		_, a := graphGet(t, u)
		require.Equal(t, http.StatusGone, a.status)
		require.Contains(t, string(a.body), "syncStateNotFound")
	}
	require.Equal(t, 2, g.ExpiredAnswers())
	ids, _, _ := graphRound(t, start)
	require.Len(t, ids, 6)
}

func TestGraphRateLimitAnswer(t *testing.T) {
	g := NewGraph(t, "tok")
	g.Append("ada@example.com", 1)
	u := g.URL() + "/v1.0/users/ada@example.com/mailFolders/inbox/messages/delta"
	rateLimitCase(t, g.Control, u, "ApplicationThrottled", true, "Authorization", "Bearer tok")
	g.RateLimit(1500 * time.Millisecond)
	_, a := graphGet(t, u)
	require.Equal(t, "2", a.header.Get("Retry-After"), "Retry-After names the end of the window in whole seconds")
}

// TestGraphEmptyPagesCarryNextLinks: with SetEmptyPages, every round begins
// with that many pages without messages, each with a nextLink; following
// them reaches the round's messages and its deltaLink, while fetching such
// a page again answers the same empty page (a client that polls it instead
// of following it never gets further).
func TestGraphEmptyPagesCarryNextLinks(t *testing.T) {
	g := NewGraph(t, "tok")
	g.SetEmptyPages(3)
	first := g.Append("ada@example.com", 6)
	start := g.URL() + "/v1.0/users/ada@example.com/mailFolders/inbox/messages/delta?$select=subject,lastModifiedDateTime"

	p, a := graphGet(t, start)
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	require.Empty(t, p.Value)
	require.NotEmpty(t, p.Next)
	require.Empty(t, p.Delta)
	again, _ := graphGet(t, p.Next)
	same, _ := graphGet(t, p.Next)
	require.Empty(t, again.Value)
	require.Equal(t, again, same, "an empty page fetched again is the same empty page")

	ids, removed, delta := graphRound(t, start)
	require.Equal(t, first, ids)
	require.Empty(t, removed)
	require.Equal(t, 3+3, g.Served(GraphEmptyNextPage), "three fetched by hand, then the round's three")

	// A later round (from the deltaLink) begins with empty pages too, and
	// a quiet one ends with an empty page carrying the deltaLink.
	more := g.Append("ada@example.com", 2)
	ids, _, delta = graphRound(t, delta)
	require.Equal(t, more, ids)
	ids, _, _ = graphRound(t, delta)
	require.Empty(t, ids)
}
