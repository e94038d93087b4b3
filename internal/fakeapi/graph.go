package fakeapi

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Graph request kinds counted by Served.
const (
	// GraphInitialRound is a delta request without a token: the start of a
	// full synchronisation.
	GraphInitialRound = "initial_round"
	// GraphDeltaRound is a request with a $deltatoken: the start of a round
	// of changes.
	GraphDeltaRound = "delta_round"
	// GraphNextPage is a request with a $skiptoken: a further page of a
	// round.
	GraphNextPage = "next_page"
	// GraphEmptyNextPage is an answer with no message and an
	// @odata.nextLink (see SetEmptyPages).
	GraphEmptyNextPage = "empty_next_page"
)

// Graph is a fake Microsoft Graph serving the delta query of the messages
// of a mailbox's inbox (GET /v1.0/users/{id}/mailFolders/inbox/messages/delta)
// as Graph's delta query overview and the message delta reference
// document it (create it with NewGraph).
//
// It follows:
//
//   - A round of pages: every page but the last carries
//     `@odata.nextLink` (with a `$skiptoken`), the last one
//     `@odata.deltaLink` (with a `$deltatoken`); both links are absolute
//     and opaque. The first round (no token) returns every message of the
//     folder; a round started from a deltaLink returns the messages
//     created, changed or deleted since, a deleted one as
//     `{"id": ..., "@removed": {"reason": "deleted"}}`. A message changed
//     again during a round comes again later in the round (Graph: the same
//     item may appear more than once; use the latest). A round reads the
//     changes up to the moment its last page is served.
//   - Page size from `Prefer: odata.maxpagesize=N` (answered with
//     `Preference-Applied`), default 10.
//   - `$select` limits the properties returned: `id`, `@odata.type` and
//     `@odata.etag` always come; `subject`, `from`, `receivedDateTime`,
//     `lastModifiedDateTime` and `isRead` only when selected (all of them
//     without `$select`). lastModifiedDateTime has seconds precision.
//   - An expired or unknown token is `410 Gone` with error code
//     `syncStateNotFound` (the application must start a new full round).
//   - Authentication with `Authorization: Bearer <token>`; anything else
//     is 401 `InvalidAuthenticationToken`. An unknown mailbox is 404
//     `ErrorInvalidUser`; another folder than `inbox` is 404
//     `ErrorItemNotFound`.
//   - The rate-limit answer (throttling): 429 with `Retry-After` in
//     seconds and error code `ApplicationThrottled`.
//   - Every answer carries the `Date` header (Go's server sets it).
//
// It leaves out: folders other than the inbox and their hierarchy,
// `$filter`, `$top` and `changeType`, moves between folders (Graph reports
// them as removals with reason "changed"), the `Location` header some
// resources send with a 410, the 503 and 504 answers of an overloaded
// service, and every message property but the ones above.
//
// Expire makes every token issued so far unknown to the fake (the sync
// state is gone): the next request with one gets the 410.
//
// SetEmptyPages(n) makes every round begin with n pages that carry no
// message and an `@odata.nextLink`, as Graph may answer: "If Microsoft
// Graph returns a @odata.nextLink URL, there are more pages of data to
// retrieve in the session, even if the current response contains an empty
// result" (delta query overview). A client that polls such a page again
// instead of following its link gets the same empty page for ever.
type Graph struct {
	*Control
	token string

	mu         sync.Mutex
	seq        int64 // global change sequence
	epoch      int   // tokens of older epochs are expired
	boxes      map[string][]graphChange
	next       int
	emptyPages int // empty pages with a nextLink at the start of every round
}

type graphChange struct {
	seq     int64
	id      string
	deleted bool
	subject string
	from    string
	at      time.Time // receivedDateTime and lastModifiedDateTime
}

// NewGraph starts a fake Graph that demands `Authorization: Bearer <token>`.
func NewGraph(t testing.TB, token string) *Graph {
	t.Helper()
	g := &Graph{token: token, boxes: map[string][]graphChange{}}
	g.Control = start(t, http.HandlerFunc(g.serve), func(w http.ResponseWriter, now, until time.Time) time.Time {
		nb := retryAfter(w, now, until)
		graphError(w, http.StatusTooManyRequests, "ApplicationThrottled", "Application is over its MailboxConcurrency limit.")
		return nb
	})
	return g
}

// Append delivers n new messages to mailbox's inbox (creating the
// mailbox) and returns their ids.
func (g *Graph) Append(mailbox string, n int) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := time.Now().UTC().Truncate(time.Second)
	out := make([]string, 0, n)
	if _, ok := g.boxes[mailbox]; !ok {
		g.boxes[mailbox] = nil
	}
	for range n {
		g.next++
		g.seq++
		id := "AAMkAGI2" + base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf("%s/%06d", mailbox, g.next)))
		g.boxes[mailbox] = append(g.boxes[mailbox], graphChange{
			seq: g.seq, id: id, at: now,
			subject: fmt.Sprintf("Message %d", g.next),
			from:    fmt.Sprintf("sender%d@example.com", g.next%5),
		})
		out = append(out, id)
	}
	return out
}

// Delete deletes a message of mailbox: delta rounds report it removed.
func (g *Graph) Delete(mailbox, id string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.seq++
	g.boxes[mailbox] = append(g.boxes[mailbox], graphChange{seq: g.seq, id: id, deleted: true, at: time.Now().UTC().Truncate(time.Second)})
}

// SetEmptyPages makes every round (the first one and each one started from
// a deltaLink) begin with n pages without messages, each with an
// @odata.nextLink to the next; 0 (the default): none.
func (g *Graph) SetEmptyPages(n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.emptyPages = n
}

// Expire forgets every sync state: each token issued so far answers 410
// syncStateNotFound.
func (g *Graph) Expire() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.epoch++
}

func graphError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{
		"code": code, "message": msg,
		"innerError": map[string]any{"date": time.Now().UTC().Format("2006-01-02T15:04:05"), "request-id": strconv.FormatInt(time.Now().UnixNano(), 16)},
	}})
}

var graphPath = regexp.MustCompile(`^/v1\.0/users/([^/]+)/mailFolders/([^/]+)/messages/delta$`)

var graphPageSize = regexp.MustCompile(`odata\.maxpagesize=(\d+)`)

func (g *Graph) serve(w http.ResponseWriter, r *http.Request) {
	m := graphPath.FindStringSubmatch(r.URL.Path)
	if m == nil || r.Method != http.MethodGet {
		graphError(w, http.StatusBadRequest, "BadRequest", "Unsupported request")
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+g.token {
		graphError(w, http.StatusUnauthorized, "InvalidAuthenticationToken", "Access token is empty or invalid.")
		return
	}
	mailbox, folder := m[1], m[2]
	if !strings.EqualFold(folder, "inbox") {
		graphError(w, http.StatusNotFound, "ErrorItemNotFound", "The specified object was not found in the store.")
		return
	}
	size := 10
	if pm := graphPageSize.FindStringSubmatch(r.Header.Get("Prefer")); pm != nil {
		if n, err := strconv.Atoi(pm[1]); err == nil && n > 0 {
			size = min(n, 1000)
			w.Header().Set("Preference-Applied", "odata.maxpagesize="+strconv.Itoa(size))
		}
	}
	q := r.URL.Query()

	g.mu.Lock()
	defer g.mu.Unlock()
	changes, ok := g.boxes[mailbox]
	if !ok {
		graphError(w, http.StatusNotFound, "ErrorInvalidUser", fmt.Sprintf("The requested user '%s' is invalid.", mailbox))
		return
	}
	var base, after int64
	initial := false
	empties := g.emptyPages // empty pages still to serve before the round's first
	switch {
	case q.Has("$skiptoken"):
		kind, b, a, ok := g.parseToken(q.Get("$skiptoken"))
		if !ok || (kind != 'i' && kind != 's' && kind != 'E' && kind != 'e') {
			g.expired(w)
			return
		}
		base, after, initial = b, a, kind == 'i' || kind == 'E'
		empties = 0
		if kind == 'E' || kind == 'e' {
			// An empty page's link: a, the empty pages left, before the
			// round's first page after base.
			after, empties = b, int(a)
		}
		g.count(GraphNextPage)
	case q.Has("$deltatoken"):
		kind, b, _, ok := g.parseToken(q.Get("$deltatoken"))
		if !ok || kind != 'd' {
			g.expired(w)
			return
		}
		base, after = b, b
		g.count(GraphDeltaRound)
	default:
		initial = true
		g.count(GraphInitialRound)
	}

	// The latest change of each message after base, in change order.
	latest := map[string]graphChange{}
	for _, c := range changes {
		if c.seq > base {
			latest[c.id] = c
		}
	}
	var round []graphChange
	for _, c := range latest {
		if c.seq > after && !(initial && c.deleted) {
			round = append(round, c)
		}
	}
	slices.SortFunc(round, func(a, b graphChange) int { return int(a.seq - b.seq) })
	page := round[:min(size, len(round))]

	selected := map[string]bool{}
	if s := q.Get("$select"); s != "" {
		for _, f := range strings.Split(s, ",") {
			selected[strings.TrimSpace(f)] = true
		}
	}
	value := make([]any, 0, len(page))
	for _, c := range page {
		value = append(value, c.json(selected))
	}
	// Links keep $select and carry the token, with Graph's literal `$`.
	link := func(param, token string) string {
		l := baseURL(r) + r.URL.Path + "?"
		if q.Has("$select") {
			l += "$select=" + url.QueryEscape(q.Get("$select")) + "&"
		}
		return l + param + "=" + url.QueryEscape(token)
	}
	body := map[string]any{
		"@odata.context": "https://graph.microsoft.com/v1.0/$metadata#Collection(message)",
		"value":          value,
	}
	if empties > 0 {
		// An empty page of the session, whatever the round holds.
		kind := byte('e')
		if initial {
			kind = 'E'
		}
		body["value"] = []any{}
		body["@odata.nextLink"] = link("$skiptoken", g.token36(kind, base, int64(empties-1)))
		g.count(GraphEmptyNextPage)
		writeJSON(w, http.StatusOK, body)
		return
	}
	if len(round) > len(page) {
		kind := byte('s')
		if initial {
			kind = 'i'
		}
		body["@odata.nextLink"] = link("$skiptoken", g.token36(kind, base, page[len(page)-1].seq))
	} else {
		body["@odata.deltaLink"] = link("$deltatoken", g.token36('d', g.seq, 0))
	}
	writeJSON(w, http.StatusOK, body)
}

func (g *Graph) expired(w http.ResponseWriter) {
	g.countExpired()
	graphError(w, http.StatusGone, "syncStateNotFound", "The sync state generation is not found. Delta tokens may be invalid or expired.")
}

// token36 is an opaque token: kind ('i' a page of the first round, 's' a
// page of a later round, 'd' a delta token; 'E' and 'e' an empty page's
// link in the first or a later round, whose second number is the count of
// empty pages left), epoch and two sequence numbers.
func (g *Graph) token36(kind byte, a, b int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf("%c.%d.%d.%d", kind, g.epoch, a, b)))
}

// parseToken reads a token of the current epoch (ok false for any other).
func (g *Graph) parseToken(s string) (kind byte, a, b int64, ok bool) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return 0, 0, 0, false
	}
	parts := strings.Split(string(raw), ".")
	if len(parts) != 4 || len(parts[0]) != 1 || parts[1] != strconv.Itoa(g.epoch) {
		return 0, 0, 0, false
	}
	a, errA := strconv.ParseInt(parts[2], 10, 64)
	b, errB := strconv.ParseInt(parts[3], 10, 64)
	return parts[0][0], a, b, errA == nil && errB == nil
}

func (c graphChange) json(selected map[string]bool) map[string]any {
	m := map[string]any{"@odata.type": "#microsoft.graph.message", "id": c.id}
	if c.deleted {
		m["@removed"] = map[string]any{"reason": "deleted"}
		return m
	}
	m["@odata.etag"] = fmt.Sprintf(`W/"CQAAABYAAAA%d"`, c.seq)
	all := len(selected) == 0
	at := c.at.Format("2006-01-02T15:04:05Z")
	for name, v := range map[string]any{
		"subject":              c.subject,
		"from":                 map[string]any{"emailAddress": map[string]any{"name": strings.TrimSuffix(c.from, "@example.com"), "address": c.from}},
		"receivedDateTime":     at,
		"lastModifiedDateTime": at,
		"isRead":               false,
	} {
		if all || selected[name] {
			m[name] = v
		}
	}
	return m
}
