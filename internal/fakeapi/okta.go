package fakeapi

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Okta request kinds counted by Served.
const (
	// OktaSince is a page request with `since` (the first request of a
	// traversal, or a restart from a time).
	OktaSince = "since"
	// OktaAfter is a page request following a next link.
	OktaAfter = "after"
)

const (
	oktaRetention = 90 * 24 * time.Hour
	oktaMaxSince  = 180 * 24 * time.Hour
	oktaRateLimit = 600
)

// Okta is a fake Okta org serving the System Log API (GET /api/v1/logs) as
// Okta's System Log API reference and its rate-limit guide document it
// (create it with NewOkta).
//
// It follows:
//
//   - Polling requests only (`until` unset, `sortOrder` ASCENDING, the
//     default): they return every event, filtered by its persistence time
//     (`since` is compared with the time the event was persisted, not with
//     `published`), in persistence order, so pages "may return events out
//     of order according to the published field". An event Append logs is
//     persisted a few milliseconds after it is published; one
//     AppendPublishedAhead logs is published after it is persisted.
//   - `since` defaults to 7 days before now; `since` and `after` are
//     mutually exclusive (400, E0000001); a `since` more than 180 days back
//     is refused (400, E0000053, "The since parameter is over 180 days
//     prior to the current day."). `limit` is 0 to 1000, default 100; any
//     other value is 400 E0000001.
//   - Every answer carries `Link: <request>; rel="self"` and, for polling,
//     `Link: <...after=...>; rel="next"`, also on an empty page: polling
//     has infinitely many pages. At the head, the next link of an empty
//     page is the request itself (the fake's links are canonical, so the
//     link repeats byte for byte). The `after` cursor is opaque (here a
//     persistence millisecond and a sequence number); an `after` that is
//     not one of the fake's is 400 E0000001.
//   - Retention: events published more than 90 days ago are not returned;
//     the query still succeeds ("Queries that exceed the retention period
//     succeed, but only those results that have a published timestamp
//     within the window are returned"). Okta documents no expiry of
//     `after` cursors, and the fake has none: a cursor whose events aged
//     out keeps working.
//   - Authentication with `Authorization: SSWS <token>`; anything else is
//     401 E0000011 ("Invalid token provided").
//   - The rate-limit answer: 429 with errorCode E0000047 ("API call
//     exceeded rate limit due to too many requests.") and the headers
//     X-Rate-Limit-Limit, X-Rate-Limit-Remaining (0) and X-Rate-Limit-Reset
//     (the UTC epoch second the limit resets). Every answer carries the
//     three headers.
//
// It leaves out: bounded requests (`until`, DESCENDING: answered 400
// E0000001), `filter` and `q` (answered 400 E0000001; Okta answers 400 to
// an invalid filter, E0000031 to an unsupported operator and field),
// OAuth 2.0 access tokens, concurrent-request limits, the 30-second query
// timeout, persistence delays beyond a few milliseconds, and most LogEvent
// fields (it returns uuid, published, eventType, version, severity,
// displayMessage, actor, outcome and transaction).
//
// Expire ages every event stored so far past the retention window: the
// one aging answer Okta documents.
type Okta struct {
	*Control
	token string

	mu     sync.Mutex
	events []oktaEvent // persistence order; seq is index+1
	// aged: events[:aged] are past retention (besides those published more
	// than 90 days ago).
	aged int
}

type oktaEvent struct {
	uuid      string
	published time.Time
	persisted time.Time
	eventType string
	actor     string
}

// NewOkta starts a fake org that demands `Authorization: SSWS <token>`.
func NewOkta(t testing.TB, token string) *Okta {
	t.Helper()
	o := &Okta{token: token}
	o.Control = start(t, http.HandlerFunc(o.serve), o.limited)
	return o
}

// Append logs n events now and returns their uuids in persistence order.
func (o *Okta) Append(n int) []string {
	// Published a few milliseconds before persistence, by a varying
	// amount: pages are out of order by published.
	return o.append(n, func(seq int) time.Duration { return -time.Duration(seq%4) * 3 * time.Millisecond })
}

// AppendPublishedAhead logs n events now whose `published` lies ahead of
// their persistence time by ahead (stamped by a clock ahead of the log
// store's), and returns their uuids. Okta documents no relation between
// `published` and the internal persistence time that `since` filters
// polling requests on, so the fake lets a test put them in this order: a
// polling request with `since` at such an event's `published` does not
// return the events persisted in between.
func (o *Okta) AppendPublishedAhead(n int, ahead time.Duration) []string {
	return o.append(n, func(int) time.Duration { return ahead })
}

// append logs n events, the published time of event seq being its
// persistence time plus offset(seq).
func (o *Okta) append(n int, offset func(seq int) time.Duration) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]string, 0, n)
	for range n {
		seq := len(o.events) + 1
		persisted := time.Now().UTC().Truncate(time.Millisecond)
		if len(o.events) > 0 {
			if last := o.events[len(o.events)-1].persisted; !persisted.After(last) {
				persisted = last.Add(time.Millisecond)
			}
		}
		published := persisted.Add(offset(seq))
		ev := oktaEvent{
			uuid:      fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", 0x0c7a, seq>>16&0xffff, seq>>4&0xfff, seq&0xfff, seq),
			published: published,
			persisted: persisted,
			eventType: []string{"user.session.start", "user.authentication.sso", "policy.evaluate_sign_on"}[seq%3],
			actor:     fmt.Sprintf("user%d@example.com", seq%7),
		}
		o.events = append(o.events, ev)
		out = append(out, ev.uuid)
	}
	return out
}

// Expire moves every event stored so far past the 90-day retention window:
// they are no longer returned, and the cursors pointing into them still
// work.
func (o *Okta) Expire() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.aged = len(o.events)
}

func (o *Okta) limited(w http.ResponseWriter, now, until time.Time) time.Time {
	reset := time.Unix(until.Add(time.Second-time.Nanosecond).Unix(), 0)
	o.rateHeaders(w, 0, reset)
	oktaError(w, http.StatusTooManyRequests, "E0000047", "API call exceeded rate limit due to too many requests.")
	return reset
}

func (o *Okta) rateHeaders(w http.ResponseWriter, remaining int, reset time.Time) {
	h := w.Header()
	h.Set("X-Rate-Limit-Limit", strconv.Itoa(oktaRateLimit))
	h.Set("X-Rate-Limit-Remaining", strconv.Itoa(remaining))
	h.Set("X-Rate-Limit-Reset", strconv.FormatInt(reset.Unix(), 10))
}

func oktaError(w http.ResponseWriter, status int, code, summary string) {
	writeJSON(w, status, map[string]any{
		"errorCode":    code,
		"errorSummary": summary,
		"errorLink":    code,
		"errorId":      "oae" + strconv.FormatInt(time.Now().UnixNano(), 36),
		"errorCauses":  []any{},
	})
}

func (o *Okta) serve(w http.ResponseWriter, r *http.Request) {
	now := time.Now().UTC()
	o.rateHeaders(w, oktaRateLimit-1, time.Unix(now.Add(time.Minute).Unix(), 0))
	if r.URL.Path != "/api/v1/logs" {
		oktaError(w, http.StatusNotFound, "E0000022", "The endpoint does not support the provided HTTP method")
		return
	}
	if r.Method != http.MethodGet {
		oktaError(w, http.StatusMethodNotAllowed, "E0000022", "The endpoint does not support the provided HTTP method")
		return
	}
	if r.Header.Get("Authorization") != "SSWS "+o.token {
		oktaError(w, http.StatusUnauthorized, "E0000011", "Invalid token provided")
		return
	}
	q := r.URL.Query()
	invalid := func(field, why string) {
		oktaError(w, http.StatusBadRequest, "E0000001", fmt.Sprintf("Api validation failed: '%s': %s", field, why))
	}
	for _, p := range []string{"until", "filter", "q"} {
		if q.Has(p) {
			invalid(p, "the fake serves polling requests only")
			return
		}
	}
	if s := q.Get("sortOrder"); s != "" && s != "ASCENDING" {
		invalid("sortOrder", "the fake serves polling requests only (ASCENDING)")
		return
	}
	limit := 100
	if q.Has("limit") {
		n, err := strconv.Atoi(q.Get("limit"))
		if err != nil || n < 0 || n > 1000 {
			invalid("limit", "must be an integer between 0 and 1000")
			return
		}
		limit = n
	}
	if q.Has("since") && q.Has("after") {
		invalid("since", "since and after are mutually exclusive")
		return
	}

	o.mu.Lock()
	defer o.mu.Unlock()
	var from int // events[from:] are after the request's position
	kind := OktaAfter
	if q.Has("after") {
		seq, ok := parseOktaAfter(q.Get("after"))
		if !ok || seq > len(o.events) {
			invalid("after", "not a valid cursor")
			return
		}
		from = seq
	} else {
		kind = OktaSince
		since := now.Add(-7 * 24 * time.Hour)
		if q.Has("since") {
			t, err := time.Parse(time.RFC3339Nano, q.Get("since"))
			if err != nil {
				invalid("since", "The date format in your query is not recognized. Please enter dates using ISO8601 string format.")
				return
			}
			since = t
		}
		if since.Before(now.Add(-oktaMaxSince)) {
			oktaError(w, http.StatusBadRequest, "E0000053", "Invalid parameter: The since parameter is over 180 days prior to the current day.")
			return
		}
		for from < len(o.events) && o.events[from].persisted.Before(since) {
			from++
		}
	}
	o.count(kind)

	horizon := now.Add(-oktaRetention)
	page := []any{}
	last := from
	for i := from; i < len(o.events) && len(page) < limit; i++ {
		last = i + 1
		ev := o.events[i]
		if ev.published.Before(horizon) || i < o.aged {
			continue // past retention: not returned
		}
		page = append(page, ev.json(i+1))
	}
	self := baseURL(r) + r.URL.RequestURI()
	w.Header().Add("Link", "<"+self+">; rel=\"self\"")
	w.Header().Add("Link", "<"+o.nextLink(r, q, last)+">; rel=\"next\"")
	writeJSON(w, http.StatusOK, page)
}

// nextLink is the canonical link to the events after seq: the same link
// for the same position, so polling at the head repeats the request.
func (o *Okta) nextLink(r *http.Request, q url.Values, seq int) string {
	var ms int64
	if seq > 0 {
		ms = o.events[seq-1].persisted.UnixMilli()
	}
	v := "sortOrder=ASCENDING&after=" + url.QueryEscape(fmt.Sprintf("%d_%d", ms, seq))
	if q.Has("limit") {
		v = "limit=" + url.QueryEscape(q.Get("limit")) + "&" + v
	}
	return baseURL(r) + "/api/v1/logs?" + v
}

func parseOktaAfter(s string) (int, bool) {
	_, seq, ok := strings.Cut(s, "_")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(seq)
	return n, err == nil && n >= 0
}

func (ev oktaEvent) json(seq int) map[string]any {
	return map[string]any{
		"uuid":           ev.uuid,
		"published":      ev.published.Format("2006-01-02T15:04:05.000Z"),
		"eventType":      ev.eventType,
		"version":        "0",
		"severity":       "INFO",
		"displayMessage": "Fake event " + strconv.Itoa(seq),
		"actor": map[string]any{
			"id":          fmt.Sprintf("00u%017d", seq%7),
			"type":        "User",
			"alternateId": ev.actor,
			"displayName": strings.TrimSuffix(ev.actor, "@example.com"),
		},
		"outcome":     map[string]any{"result": "SUCCESS"},
		"transaction": map[string]any{"type": "WEB", "id": fmt.Sprintf("W%019d", seq)},
	}
}
