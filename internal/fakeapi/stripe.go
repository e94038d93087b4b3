package fakeapi

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Stripe request kinds counted by Served.
const (
	// StripeNewest is a list request without a cursor (the newest events).
	StripeNewest = "newest"
	// StripeStartingAfter pages towards older events.
	StripeStartingAfter = "starting_after"
	// StripeEndingBefore pages towards newer events.
	StripeEndingBefore = "ending_before"
	// StripeCreatedFilter is a request with a `created` filter.
	StripeCreatedFilter = "created_filter"
)

// Stripe is a fake Stripe API serving the events list (GET /v1/events) as
// Stripe's API reference documents it ("List all events", "Pagination",
// "Errors", "Rate limits", "Connect: making API calls for connected
// accounts") (create it with NewStripe).
//
// It follows:
//
//   - A list object `{"object": "list", "url": "/v1/events", "has_more":
//     ..., "data": [...]}`, newest first (by `created`, then by creation
//     order).
//   - `limit` 1 to 100, default 10. `starting_after=<id>` returns the
//     events right after that one in list order (older); `ending_before=<id>`
//     the events right before it (newer: the `limit` events closest to it,
//     still newest first). `has_more` says whether more lie beyond the
//     page in the direction of the request. Both cursors in one request is
//     400 ("You may only specify one of these parameters: ending_before,
//     starting_after."). `created` filters with `created[gt]`, `[gte]`,
//     `[lt]`, `[lte]` or an exact `created`.
//   - A cursor naming an event that never existed is 404 with code
//     `resource_missing` ("No such event: '<id>'") and `param` naming the
//     parameter. A cursor naming an event past the 30-day retention ("List
//     events, going back up to 30 days", API reference) is 400
//     `invalid_request_error` whose message says the event "is no longer
//     available because it's aged out of our retention policy": the words
//     and the status Stripe answers a list call with, as connectors that
//     meet it match them (Stripe's reference does not quote the message;
//     the rest of the fake's message is its own).
//   - `created` is in seconds, so events share it.
//   - Authentication with `Authorization: Bearer <secret key>` (401
//     otherwise); `Stripe-Account: <acct>` reads a connected account (403
//     for an account the fake does not hold).
//   - The rate-limit answer: 429 with an error of code `rate_limit` and no
//     Retry-After (Stripe asks for exponential back-off).
//
// It leaves out: the `type`/`types` filters, `delivery_success`,
// expansions, idempotency, test clocks, API versions (every event says
// 2024-06-20), the event objects' real contents (a charge id only), and
// automatic deletion: retention only happens when Expire says so.
//
// Expire applies the 30-day retention to everything an account holds so
// far (the account stayed quiet for 30 days): those events are gone, and a
// cursor naming one answers 400 "aged out of our retention policy".
type Stripe struct {
	*Control
	key string

	mu       sync.Mutex
	accounts map[string]*stripeAccount
	next     int
}

type stripeAccount struct {
	events []stripeEvent // oldest first
	purged map[string]bool
}

type stripeEvent struct {
	id      string
	created int64
	object  string
	kind    string
}

// NewStripe starts a fake Stripe that demands `Authorization: Bearer <key>`.
func NewStripe(t testing.TB, key string) *Stripe {
	t.Helper()
	s := &Stripe{key: key, accounts: map[string]*stripeAccount{}}
	s.Control = start(t, http.HandlerFunc(s.serve), func(w http.ResponseWriter, _, _ time.Time) time.Time {
		stripeError(w, http.StatusTooManyRequests, "rate_limit", "", "Too many requests hit the API too quickly. We recommend an exponential backoff of your requests.")
		return time.Time{}
	})
	return s
}

// Append creates n events now in account ("" is the platform account)
// and returns their ids, oldest first.
func (s *Stripe) Append(account string, n int) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.accounts[account]
	if a == nil {
		a = &stripeAccount{purged: map[string]bool{}}
		s.accounts[account] = a
	}
	created := time.Now().Unix()
	if len(a.events) > 0 {
		created = max(created, a.events[len(a.events)-1].created)
	}
	out := make([]string, 0, n)
	for range n {
		s.next++
		ev := stripeEvent{
			id:      fmt.Sprintf("evt_1Fake%019d", s.next),
			created: created,
			object:  fmt.Sprintf("ch_3Fake%019d", s.next),
			kind:    []string{"charge.succeeded", "charge.refunded", "payment_intent.created"}[s.next%3],
		}
		a.events = append(a.events, ev)
		out = append(out, ev.id)
	}
	return out
}

// AppendLate creates one event in account whose `created` lies age in the
// past, visible only from now on: an event that becomes visible late and
// sorts before newer events already listed (Stripe documents no bound on
// when an event becomes visible). It takes its place in the list by
// `created`, after the events of the same second. It returns its id.
func (s *Stripe) AppendLate(account string, age time.Duration) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.accounts[account]
	if a == nil {
		a = &stripeAccount{purged: map[string]bool{}}
		s.accounts[account] = a
	}
	s.next++
	ev := stripeEvent{
		id:      fmt.Sprintf("evt_1Fake%019d", s.next),
		created: time.Now().Add(-age).Unix(),
		object:  fmt.Sprintf("ch_3Fake%019d", s.next),
		kind:    "charge.succeeded",
	}
	i := len(a.events)
	for i > 0 && a.events[i-1].created > ev.created {
		i--
	}
	a.events = slices.Insert(a.events, i, ev)
	return ev.id
}

// Expire removes every event account holds so far, as the 30-day
// retention would after 30 quiet days.
func (s *Stripe) Expire(account string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.accounts[account]
	if a == nil {
		return
	}
	for _, ev := range a.events {
		a.purged[ev.id] = true
	}
	a.events = nil
}

func stripeError(w http.ResponseWriter, status int, code, param, msg string) {
	e := map[string]any{"type": "invalid_request_error", "message": msg}
	if code != "" {
		e["code"] = code
		e["doc_url"] = "https://stripe.com/docs/error-codes/" + strings.ReplaceAll(code, "_", "-")
	}
	if param != "" {
		e["param"] = param
	}
	writeJSON(w, status, map[string]any{"error": e})
}

func (s *Stripe) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/events" || r.Method != http.MethodGet {
		stripeError(w, http.StatusNotFound, "", "", "Unrecognized request URL ("+r.Method+": "+r.URL.Path+").")
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+s.key {
		stripeError(w, http.StatusUnauthorized, "", "", "Invalid API Key provided.")
		return
	}
	q := r.URL.Query()
	limit := 10
	if q.Has("limit") {
		n, err := strconv.Atoi(q.Get("limit"))
		if err != nil || n < 1 || n > 100 {
			stripeError(w, http.StatusBadRequest, "parameter_invalid_integer", "limit", "This value must be between 1 and 100.")
			return
		}
		limit = n
	}
	if q.Has("starting_after") && q.Has("ending_before") {
		stripeError(w, http.StatusBadRequest, "", "", "You may only specify one of these parameters: ending_before, starting_after.")
		return
	}
	keep, ok := createdFilter(q)
	if !ok {
		stripeError(w, http.StatusBadRequest, "parameter_invalid_integer", "created", "Invalid integer for created.")
		return
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	account := r.Header.Get("Stripe-Account")
	a := s.accounts[account]
	if a == nil {
		stripeError(w, http.StatusForbidden, "", "", fmt.Sprintf("The provided key does not have access to account '%s' (or that account does not exist).", account))
		return
	}
	if q.Has("created") || q.Has("created[gt]") || q.Has("created[gte]") || q.Has("created[lt]") || q.Has("created[lte]") {
		s.count(StripeCreatedFilter)
	}
	// full is the account's list, newest first, before the filters.
	full := make([]stripeEvent, 0, len(a.events))
	for i := len(a.events) - 1; i >= 0; i-- {
		full = append(full, a.events[i])
	}
	filter := func(evs []stripeEvent) []stripeEvent {
		var out []stripeEvent
		for _, ev := range evs {
			if keep(ev.created) {
				out = append(out, ev)
			}
		}
		return out
	}
	anchor := func(param string) (int, bool) {
		id := q.Get(param)
		for i, ev := range full {
			if ev.id == id {
				return i, true
			}
		}
		if a.purged[id] {
			s.countExpired()
			stripeError(w, http.StatusBadRequest, "", param, fmt.Sprintf("The event '%s' is no longer available because it's aged out of our retention policy.", id))
			return 0, false
		}
		stripeError(w, http.StatusNotFound, "resource_missing", param, fmt.Sprintf("No such event: '%s'", id))
		return 0, false
	}
	var page []stripeEvent
	more := false
	switch {
	case q.Has("starting_after"):
		s.count(StripeStartingAfter)
		i, ok := anchor("starting_after")
		if !ok {
			return
		}
		older := filter(full[i+1:])
		page, more = older[:min(limit, len(older))], len(older) > limit
	case q.Has("ending_before"):
		s.count(StripeEndingBefore)
		i, ok := anchor("ending_before")
		if !ok {
			return
		}
		newer := filter(full[:i])
		lo := max(0, len(newer)-limit)
		page, more = newer[lo:], lo > 0
	default:
		s.count(StripeNewest)
		all := filter(full)
		page, more = all[:min(limit, len(all))], len(all) > limit
	}
	data := make([]any, 0, len(page))
	for _, ev := range page {
		data = append(data, ev.json())
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "url": "/v1/events", "has_more": more, "data": data})
}

// createdFilter reads the `created` filters.
func createdFilter(q map[string][]string) (func(int64) bool, bool) {
	type bound struct {
		key string
		ok  func(c, v int64) bool
	}
	var checks []func(int64) bool
	for _, b := range []bound{
		{"created", func(c, v int64) bool { return c == v }},
		{"created[gt]", func(c, v int64) bool { return c > v }},
		{"created[gte]", func(c, v int64) bool { return c >= v }},
		{"created[lt]", func(c, v int64) bool { return c < v }},
		{"created[lte]", func(c, v int64) bool { return c <= v }},
	} {
		vs, present := q[b.key]
		if !present || len(vs) == 0 {
			continue
		}
		v, err := strconv.ParseInt(vs[0], 10, 64)
		if err != nil {
			return nil, false
		}
		ok := b.ok
		checks = append(checks, func(c int64) bool { return ok(c, v) })
	}
	return func(c int64) bool {
		for _, ch := range checks {
			if !ch(c) {
				return false
			}
		}
		return true
	}, true
}

func (ev stripeEvent) json() map[string]any {
	return map[string]any{
		"id":               ev.id,
		"object":           "event",
		"api_version":      "2024-06-20",
		"created":          ev.created,
		"data":             map[string]any{"object": map[string]any{"id": ev.object, "object": "charge"}},
		"livemode":         false,
		"pending_webhooks": 0,
		"request":          map[string]any{"id": nil, "idempotency_key": nil},
		"type":             ev.kind,
	}
}
