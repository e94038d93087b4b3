package fakeapi

import (
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Control is what every fake shares: the listener on 127.0.0.1, an
// optional latency per request, the rate-limit window and its bookkeeping,
// and request counters.
type Control struct {
	srv *httptest.Server

	mu         sync.Mutex
	latency    time.Duration
	limitUntil time.Time            // requests before it get the rate-limit answer
	limitNext  time.Duration        // RateLimit armed: the window opens at the next request
	notBefore  map[string]time.Time // by path: the latest time a rate-limit answer named
	throttled  int
	early      int
	requests   int
	expired    int
	served     map[string]int
	onRequest  func(*http.Request)
}

// limitAnswer writes an API's rate-limit answer for a window ending at
// until and returns the time the answer tells the client to wait for (zero
// when the API names none).
type limitAnswer func(w http.ResponseWriter, now, until time.Time) time.Time

// start serves h behind the control's latency and rate limit on
// 127.0.0.1, stopped when t ends.
func start(t testing.TB, h http.Handler, limited limitAnswer) *Control {
	t.Helper()
	c := &Control{served: map[string]int{}, notBefore: map[string]time.Time{}}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.requests++
		lat := c.latency
		now := time.Now()
		if c.limitNext > 0 {
			c.limitUntil, c.limitNext = now.Add(c.limitNext), 0
		}
		if now.Before(c.limitUntil) {
			c.throttled++
			if now.Before(c.notBefore[r.URL.Path]) {
				c.early++
			}
			if nb := limited(w, now, c.limitUntil); nb.After(c.notBefore[r.URL.Path]) {
				c.notBefore[r.URL.Path] = nb
			}
			c.mu.Unlock()
			return
		}
		hook := c.onRequest
		c.mu.Unlock()
		if hook != nil {
			hook(r)
		}
		if lat > 0 {
			select {
			case <-time.After(lat):
			case <-r.Context().Done():
				return
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(c.srv.Close)
	return c
}

// URL is the fake's base URL, http://127.0.0.1:<port>.
func (c *Control) URL() string { return c.srv.URL }

// SetLatency delays every answer (rate-limit answers excepted) by d.
func (c *Control) SetLatency(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.latency = d
}

// RateLimit answers every request for a window with the API's rate-limit
// answer (see each fake). The window opens at the next request that
// arrives (however long the client takes to start) and lasts window.
// Answers that name a time to come back name the end of the window, rounded
// up to the whole second the API's header carries.
func (c *Control) RateLimit(window time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.limitNext = window
}

// OnRequest calls fn with every request that is not rate-limited, before
// it is answered (nil: none). A test uses it to act at the moment a request
// arrives, before the answer can have any effect.
func (c *Control) OnRequest(fn func(*http.Request)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onRequest = fn
}

// Throttled is how many rate-limit answers were served.
func (c *Control) Throttled() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.throttled
}

// Early is how many requests arrived before the time an earlier rate-limit
// answer to the same path (the same partition of the examples) told the
// client to wait for: a client honouring the answer makes none.
func (c *Control) Early() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.early
}

// Requests is how many requests arrived, rate-limited ones included.
func (c *Control) Requests() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.requests
}

// ExpiredAnswers is how many expiry answers the fake served.
func (c *Control) ExpiredAnswers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.expired
}

// Served is how many requests of an API-specific kind were answered (each
// fake names its kinds).
func (c *Control) Served(kind string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.served[kind]
}

func (c *Control) count(kind string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.served[kind]++
}

func (c *Control) countExpired() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expired++
}

// retryAfter sets Retry-After to the whole seconds until until (at least
// one) and returns the time it names.
func retryAfter(w http.ResponseWriter, now, until time.Time) time.Time {
	secs := max(1, int(math.Ceil(until.Sub(now).Seconds())))
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	return now.Add(time.Duration(secs) * time.Second)
}

// writeJSON writes v as a JSON body with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// baseURL is the scheme and host a request reached the fake at.
func baseURL(r *http.Request) string { return "http://" + r.Host }
