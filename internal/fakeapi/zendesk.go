package fakeapi

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Zendesk request kinds counted by Served.
const (
	// ZendeskStartTime is an export request with `start_time` (the first
	// request of an export, or a restart from a time).
	ZendeskStartTime = "start_time"
	// ZendeskCursor is an export request with `cursor`.
	ZendeskCursor = "cursor"
)

// Zendesk is a fake Zendesk Support account serving the cursor-based
// incremental ticket export (GET /api/v2/incremental/tickets/cursor.json)
// as Zendesk's incremental export reference ("Using the Incremental Exports
// API", "Incremental Ticket Export, Cursor Based") documents it (create it
// with NewZendesk).
//
// It follows:
//
//   - The first request names `start_time` (Unix seconds; required when
//     there is no `cursor`, and at least a minute in the past: "data isn't
//     provided for the most recent minute"), later ones `cursor`, the
//     page's `after_cursor`. A page has `tickets`, `after_cursor`,
//     `after_url`, `before_cursor` and `before_url` (null here) and
//     `end_of_stream`; there is no end_time in cursor-based exports.
//   - Tickets come in the order they last changed, each at its latest
//     version: a ticket updated after the cursor passed it comes again
//     (with a new updated_at). Tickets that changed within the hold-back
//     (a minute, see SetHoldback) are not exported yet.
//   - `end_of_stream: true` when the page reaches the newest exportable
//     change; the page still carries an `after_cursor`, the one to poll
//     with later. An empty page at the end repeats the request's cursor
//     (the fake's choice: Zendesk documents only that it is the one to
//     poll with).
//   - `per_page` up to 1000, the default.
//   - Cursors are opaque base64 with `+`, `/` and `=` possible, so they
//     must be escaped in a URL: a cursor that does not decode (a `+` sent
//     unescaped reads as a space) is 400 `InvalidPaginationParameter`.
//   - Authentication with `Authorization: Basic ...`; anything else is 401
//     ("Couldn't authenticate you").
//   - The rate-limit answer: 429 with `Retry-After` in seconds.
//
// It leaves out: sideloads, `exclude_deleted`, archived and deleted
// tickets, `support_type_scope`, the per-minute limit itself (only the
// answer, when RateLimit asks for it), before_cursor paging, and the
// exact error texts (its error bodies have Zendesk's shape, `error` and
// `description`, with the fake's own wording).
//
// Zendesk documents no lifetime of export cursors. Expire makes every
// cursor issued so far unusable: the answer is the 400
// InvalidPaginationParameter Zendesk gives for a cursor it cannot use.
type Zendesk struct {
	*Control
	auth string

	mu       sync.Mutex
	holdback time.Duration
	epoch    int
	stream   []zendeskChange // change order; seq is index+1
	tickets  map[int64]int   // ticket id -> index of its latest change
	next     int64
}

type zendeskChange struct {
	id      int64
	created time.Time
	updated time.Time
	subject string
	status  string
}

// NewZendesk starts a fake account that demands `Authorization: <auth>`
// (for example "Basic " + base64 of "agent@example.com/token:secret").
func NewZendesk(t testing.TB, auth string) *Zendesk {
	t.Helper()
	z := &Zendesk{auth: auth, holdback: time.Minute, tickets: map[int64]int{}}
	z.Control = start(t, http.HandlerFunc(z.serve), func(w http.ResponseWriter, now, until time.Time) time.Time {
		nb := retryAfter(w, now, until)
		zendeskError(w, http.StatusTooManyRequests, "APIRateLimitExceeded", "Number of allowed incremental export API requests per minute exceeded")
		return nb
	})
	return z
}

// SetHoldback sets how long a change stays unexported (Zendesk: a
// minute). Tests shorten it so that a change made now is exported now;
// start_time is then refused only when it is in the future.
func (z *Zendesk) SetHoldback(d time.Duration) {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.holdback = d
}

// Append creates n tickets now and returns their ids.
func (z *Zendesk) Append(n int) []int64 {
	z.mu.Lock()
	defer z.mu.Unlock()
	now := time.Now().UTC().Truncate(time.Second)
	out := make([]int64, 0, n)
	for range n {
		z.next++
		z.record(zendeskChange{id: z.next, created: now, updated: now, subject: fmt.Sprintf("Ticket %d", z.next), status: "new"})
		out = append(out, z.next)
	}
	return out
}

// Update changes ticket id now (its status becomes open): it is exported
// again, at its new position.
func (z *Zendesk) Update(id int64) {
	z.mu.Lock()
	defer z.mu.Unlock()
	i, ok := z.tickets[id]
	if !ok {
		return
	}
	c := z.stream[i]
	c.updated, c.status = time.Now().UTC().Truncate(time.Second), "open"
	z.record(c)
}

func (z *Zendesk) record(c zendeskChange) {
	z.stream = append(z.stream, c)
	z.tickets[c.id] = len(z.stream) - 1
}

// Expire makes every cursor issued so far unusable (400
// InvalidPaginationParameter).
func (z *Zendesk) Expire() {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.epoch++
}

func zendeskError(w http.ResponseWriter, status int, code, desc string) {
	writeJSON(w, status, map[string]any{"error": code, "description": desc})
}

func (z *Zendesk) serve(w http.ResponseWriter, r *http.Request) {
	if p := r.URL.Path; p != "/api/v2/incremental/tickets/cursor.json" && p != "/api/v2/incremental/tickets/cursor" {
		zendeskError(w, http.StatusNotFound, "InvalidEndpoint", "Not found")
		return
	}
	if r.Header.Get("Authorization") != z.auth {
		zendeskError(w, http.StatusUnauthorized, "Couldn't authenticate you", "")
		return
	}
	q := r.URL.Query()
	perPage := 1000
	if q.Has("per_page") {
		n, err := strconv.Atoi(q.Get("per_page"))
		if err != nil || n < 1 || n > 1000 {
			zendeskError(w, http.StatusBadRequest, "InvalidPaginationParameter", "per_page must be between 1 and 1000")
			return
		}
		perPage = n
	}
	now := time.Now().UTC()

	z.mu.Lock()
	defer z.mu.Unlock()
	visible := now.Add(-z.holdback)
	var after int // stream[after:] is past the request's position
	switch {
	case q.Has("cursor"):
		seq, ok := z.parseCursor(q.Get("cursor"))
		if !ok || seq > len(z.stream) {
			z.countExpired()
			zendeskError(w, http.StatusBadRequest, "InvalidPaginationParameter", "Invalid cursor")
			return
		}
		after = seq
		z.count(ZendeskCursor)
	case q.Has("start_time"):
		st, err := strconv.ParseInt(q.Get("start_time"), 10, 64)
		if err != nil || st < 0 {
			zendeskError(w, http.StatusBadRequest, "InvalidValue", "start_time must be a Unix epoch time in seconds")
			return
		}
		if time.Unix(st, 0).After(visible) {
			zendeskError(w, http.StatusBadRequest, "InvalidValue", "Too recent start_time. Use a start_time at least one minute in the past")
			return
		}
		for after < len(z.stream) && z.stream[after].updated.Before(time.Unix(st, 0)) {
			after++
		}
		z.count(ZendeskStartTime)
	default:
		zendeskError(w, http.StatusBadRequest, "InvalidValue", "start_time or cursor is required")
		return
	}

	tickets := []any{}
	last, i := after, after
	for ; i < len(z.stream) && len(tickets) < perPage; i++ {
		c := z.stream[i]
		if c.updated.After(visible) {
			break // not exported yet, nor anything after it
		}
		last = i + 1
		if z.tickets[c.id] != i {
			continue // superseded by a later change of the ticket
		}
		tickets = append(tickets, c.json(baseURL(r)))
	}
	end := true
	for j := last; j < len(z.stream) && !z.stream[j].updated.After(visible); j++ {
		if z.tickets[z.stream[j].id] == j {
			end = false
			break
		}
	}
	cursor := z.cursor(last)
	if q.Has("cursor") && last == after {
		cursor = q.Get("cursor") // an empty page repeats its cursor
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"tickets":       tickets,
		"after_cursor":  cursor,
		"after_url":     baseURL(r) + "/api/v2/incremental/tickets/cursor.json?cursor=" + url.QueryEscape(cursor),
		"before_cursor": nil,
		"before_url":    nil,
		"end_of_stream": end,
	})
}

// cursor encodes a stream position like Zendesk's cursors (base64 of
// "<time>.<n>||<seq>|"), with the epoch as the fraction.
func (z *Zendesk) cursor(seq int) string {
	var ts int64
	if seq > 0 {
		ts = z.stream[seq-1].updated.Unix()
	}
	text := fmt.Sprintf("%d.%d||%d|", ts, z.epoch, seq)
	// Aligned to 3 bytes, these end the encoding in "++++////": such
	// cursors break a URL that does not escape them.
	text += strings.Repeat(" ", (3-len(text)%3)%3) + "\xfb\xef\xbe\xff\xff\xff"
	return base64.StdEncoding.EncodeToString([]byte(text))
}

func (z *Zendesk) parseCursor(s string) (int, bool) {
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return 0, false
	}
	head, _, ok := strings.Cut(string(raw), "||")
	rest, _, ok2 := strings.Cut(strings.TrimPrefix(string(raw), head+"||"), "|")
	if !ok || !ok2 {
		return 0, false
	}
	_, ep, _ := strings.Cut(head, ".")
	if ep != strconv.Itoa(z.epoch) {
		return 0, false
	}
	seq, err := strconv.Atoi(rest)
	return seq, err == nil && seq >= 0
}

func (c zendeskChange) json(base string) map[string]any {
	return map[string]any{
		"url":                 fmt.Sprintf("%s/api/v2/tickets/%d.json", base, c.id),
		"id":                  c.id,
		"created_at":          c.created.Format(time.RFC3339),
		"updated_at":          c.updated.Format(time.RFC3339),
		"generated_timestamp": c.updated.Unix(),
		"subject":             c.subject,
		"status":              c.status,
		"requester_id":        1000 + c.id%17,
		"tags":                []string{"fake"},
	}
}
