package httpprovider

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/provider"
)

// fastRetries keeps retry tests quick.
const fastRetries = `
  max_retries: 3
  backoff:
    initial_interval: 1ms
    max_interval: 5ms
`

func TestFetchHappyPath(t *testing.T) {
	type seen struct{ method, path, query, auth, part, scope, attempt, body string }
	var got seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = seen{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Authorization"), r.Header.Get("X-Partition"),
			r.Header.Get("X-Scope"), r.Header.Get("X-Attempt"), string(b)}
		w.Header().Set("X-Snapshot", "snap-7")
		fmt.Fprint(w, `{"items":[
			{"id":"a","position":10,"v":"x","fetched":"t1"},
			{"id":7,"position":"11","v":"<y&>","fetched":"t2"},
			{"id":"c","position":12,"v":"z","fetched":"t3"}],
		  "next":"tok-2","more":true,"through":12,"closed":false}`)
	}))
	defer srv.Close()

	p := parseProvider(t, expandEnv(t, `
http:
  url: '${BASE}/parts/${! @partition }/events?after=${! @cursor.escape_url_query() }&wm=${! @watermark }'
  verb: POST
  headers:
    Authorization: Bearer ${TOKEN}
    X-Partition: ${! @partition }
    X-Scope: ${! @scope }
    X-Attempt: ${! @attempt }
  body: '${! {"cursor": @cursor, "watermark": @watermark}.format_json(no_indent: true, escape_html: false) }'
  events: root = this.items
  event_payload: root = this.without("fetched")
  event_semantic: root = this.v
  successor: root = this.next
  has_more: root = this.more
  complete_through: root = this.through
  marker: root = metadata("x-snapshot")
  sealed: root = this.closed
  contract:
    empty_page: final_through_watermark
    positions: dense
    finality: source
`, map[string]string{"BASE": srv.URL, "TOKEN": "s3cr3t-token"}), nil, nil)

	resp, err := p.Fetch(context.Background(), provider.Request{
		Scope: "sc", Partition: "p1", Cursor: []byte("tok 1&"), Watermark: provider.IntegerWatermark(9), Attempt: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	want := seen{"POST", "/parts/p1/events", "after=tok+1%26&wm=9", "Bearer s3cr3t-token", "p1", "sc", "2",
		`{"cursor":"tok 1&","watermark":"9"}`}
	if got != want {
		t.Errorf("request:\ngot  %+v\nwant %+v", got, want)
	}
	wantEvents := []provider.Event{
		{ID: "a", Position: provider.IntPosition(10), Payload: []byte(`{"id":"a","position":10,"v":"x"}`), Semantic: []byte("x")},
		{ID: "7", Position: provider.IntPosition(11), Payload: []byte(`{"id":7,"position":"11","v":"<y&>"}`), Semantic: []byte("<y&>")},
		{ID: "c", Position: provider.IntPosition(12), Payload: []byte(`{"id":"c","position":12,"v":"z"}`), Semantic: []byte("z")},
	}
	if len(resp.Events) != len(wantEvents) {
		t.Fatalf("got %d events, want %d", len(resp.Events), len(wantEvents))
	}
	for i, e := range resp.Events {
		w := wantEvents[i]
		if e.ID != w.ID || e.Position != w.Position || string(e.Payload) != string(w.Payload) || string(e.Semantic) != string(w.Semantic) || e.NoPosition {
			t.Errorf("event %d:\ngot  %+v %s %s\nwant %+v %s %s", i, e, e.Payload, e.Semantic, w, w.Payload, w.Semantic)
		}
	}
	if string(resp.Successor) != "tok-2" || !resp.HasMore || resp.Sealed || string(resp.Marker) != "snap-7" ||
		resp.CompleteThrough != provider.IntegerWatermark(12) {
		t.Errorf("page evidence: successor %q has_more %t sealed %t marker %q complete_through %s",
			resp.Successor, resp.HasMore, resp.Sealed, resp.Marker, resp.CompleteThrough)
	}
	if c := p.Contract(); !c.DensePositions || !c.OrderedPositions || c.EmptyPage != provider.EmptyFinalThroughWatermark {
		t.Errorf("contract: %+v", c)
	}
}

// TestFetchStartCursorIsEmpty pins the metadata at the start: cursor and
// watermark are empty strings (not absent), so `@cursor == ""` works.
func TestFetchStartCursorIsEmpty(t *testing.T) {
	var query string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		query = r.URL.RawQuery
		fmt.Fprint(w, `[]`)
	}))
	defer srv.Close()
	p := parseProvider(t, `
http:
  url: '`+srv.URL+`/?since=${! if @cursor == "" { "0" } else { @cursor } }&wm=${! if @watermark == "" { "none" } else { @watermark } }'
  successor: root = deleted()
`, nil, nil)
	resp := fetch(t, p, "p", "")
	if query != "since=0&wm=none" || len(resp.Events) != 0 || resp.Successor != nil {
		t.Fatalf("query %q, response %+v", query, resp)
	}
}

// TestFetchMappingsReadHyphenatedHeaders: successor, has_more and
// complete_through read response headers as lowercased metadata; a header
// name with a hyphen is read with a quoted name (@"x-next-token") or
// metadata("..."), as their field docs say.
func TestFetchMappingsReadHyphenatedHeaders(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Next-Token", "tok-2")
		w.Header().Set("X-Has-More", "true")
		w.Header().Set("X-Complete-Through", "41")
		fmt.Fprint(w, `[{"id":"a","position":41}]`)
	}))
	defer srv.Close()
	p := parseProvider(t, `
http:
  url: `+srv.URL+`/
  successor: root = @"x-next-token" | deleted()
  has_more: root = metadata("x-has-more") == "true"
  complete_through: root = @"x-complete-through".number()
  contract:
    finality: source
`, nil, nil)
	r := fetch(t, p, "p", "")
	assert.Equal(t, "tok-2", string(r.Successor))
	assert.True(t, r.HasMore)
	assert.Equal(t, provider.IntegerWatermark(41), r.CompleteThrough)
}

// TestFetchSuccessorFromLinkHeader maps the successor from response
// metadata: the Link header (as @link) and the status.
func TestFetchSuccessorFromLinkHeader(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		page := r.URL.Query().Get("page")
		switch page {
		case "1":
			w.Header().Add("Link", `<http://x/items?page=1>; rel="first"`)
			w.Header().Add("Link", `<http://x/items?page=2>; rel="next"`)
			fmt.Fprint(w, `[{"id":"a","position":1},{"id":"b","position":2}]`)
		case "2":
			w.Header().Set("Link", `<http://x/items?page=1>; rel="first", <http://x/items?page=1>; rel="prev"`)
			fmt.Fprint(w, `[{"id":"c","position":3}]`)
		default:
			http.Error(w, "no such page", http.StatusNotFound)
		}
	}))
	defer srv.Close()
	p := parseProvider(t, `
http:
  url: '`+srv.URL+`/items?page=${! if @cursor == "" { "1" } else { @cursor } }'
  successor: |
    let next = @link.or("").re_find_all_submatch("<[^>]*[?&]page=([0-9]+)[^>]*>; rel=\"next\"")
    root = if $next.length() > 0 { $next.index(0).index(1) } else { deleted() }
  has_more: root = @status == 200 && @link.or("").contains("rel=\"next\"")
`, nil, nil)
	r1 := fetch(t, p, "p", "")
	if string(r1.Successor) != "2" || !r1.HasMore || strings.Join(ids(r1), ",") != "a,b" {
		t.Fatalf("page 1: successor %q has_more %t ids %v", r1.Successor, r1.HasMore, ids(r1))
	}
	r2 := fetch(t, p, "p", string(r1.Successor))
	if r2.Successor != nil || r2.HasMore || strings.Join(ids(r2), ",") != "c" {
		t.Fatalf("page 2: successor %q has_more %t ids %v", r2.Successor, r2.HasMore, ids(r2))
	}
}

func TestFetchTimestampCoordinate(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"events":[{"uuid":"u1","published":"2026-12-03T06:00:00.5Z"},{"uuid":"u2","published":1796277601}],
		  "through":"2026-12-03T06:00:01Z"}`)
	}))
	defer srv.Close()
	p := parseProvider(t, `
http:
  url: `+srv.URL+`
  events: root = this.events
  event_id: root = this.uuid
  event_position: root = this.published
  successor: root = deleted()
  complete_through: root = this.through
  contract:
    coordinate: timestamp
    finality: source
`, nil, nil)
	resp := fetch(t, p, "p", "")
	t0 := time.Date(2026, 12, 3, 6, 0, 0, 5e8, time.UTC).UnixNano()
	t1 := time.Date(2026, 12, 3, 6, 0, 1, 0, time.UTC)
	if resp.Events[0].Position.Int != t0 || resp.Events[1].Position.Int != t1.UnixNano() {
		t.Errorf("positions %d %d, want %d %d", resp.Events[0].Position.Int, resp.Events[1].Position.Int, t0, t1.UnixNano())
	}
	if resp.CompleteThrough != provider.TimestampWatermark(t1) {
		t.Errorf("complete_through %s, want %s", resp.CompleteThrough, provider.TimestampWatermark(t1))
	}
}

func TestFetchExpired(t *testing.T) {
	for name, tc := range map[string]struct {
		status int
		body   string
		extra  string
		reason string
	}{
		"410 by default":    {http.StatusGone, `{"error":"token too old"}`, "", "HTTP 410"},
		"configured status": {http.StatusNotFound, `gone`, "    expired_status_codes: [404, 410]\n", "HTTP 404"},
		"body match on 400": {http.StatusBadRequest, `{"error":"etcdserver: mvcc: required revision has been compacted","code":11}`,
			"    expired_body_contains: [\"required revision has been compacted\"]\n", "required revision has been compacted"},
		"body match on 500": {http.StatusInternalServerError, `{"error":{"code":"syncStateNotFound"}}`,
			"    expired_body_contains: [\"syncStateNotFound\"]\n", "syncStateNotFound"},
		"body match ignores case": {http.StatusBadRequest, `{"error":{"code":"SyncStateNotFound"}}`,
			"    expired_body_contains: [\"syncStateNotFound\"]\n", "syncStateNotFound"},
	} {
		t.Run(name, func(t *testing.T) {
			var calls atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				w.WriteHeader(tc.status)
				fmt.Fprint(w, tc.body)
			}))
			defer srv.Close()
			p := parseProvider(t, "http:\n  url: "+srv.URL+"\n  successor: root = this.next\n"+fastRetries+"  contract:\n"+tc.extra, nil, nil)
			_, err := p.Fetch(context.Background(), provider.Request{Partition: "p9", Cursor: []byte("c")})
			var exp *provider.ExpiredError
			if !errors.As(err, &exp) || !errors.Is(err, provider.ErrExpired) {
				t.Fatalf("got %v, want *provider.ExpiredError", err)
			}
			if exp.Partition != "p9" || !strings.Contains(exp.Reason, tc.reason) {
				t.Errorf("ExpiredError %+v, want partition p9 and reason mentioning %q", exp, tc.reason)
			}
			if calls.Load() != 1 {
				t.Errorf("an expired cursor was requested %d times, want once (never retried)", calls.Load())
			}
		})
	}
}

// TestFetchExpiredBodyOnlyOnErrors: a 2xx page whose events happen to
// contain the expiry text is a page, not an expired cursor.
func TestFetchExpiredBodyOnlyOnErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `[{"id":"a","position":1,"msg":"required revision has been compacted"}]`)
	}))
	defer srv.Close()
	p := parseProvider(t, "http:\n  url: "+srv.URL+"\n  successor: root = deleted()\n  contract:\n    expired_body_contains: [\"required revision has been compacted\"]\n", nil, nil)
	if resp := fetch(t, p, "p", "c"); len(resp.Events) != 1 {
		t.Fatalf("got %+v", resp)
	}
}

// TestFetchTransientBodyIsRetried: a 400 whose body names throttling
// (Kinesis's ProvisionedThroughputExceededException, in any case) is
// retried with back-off like a 429 and never returned as permanent; a 400
// with another body stays permanent (one request), and so does a listed
// text on a 2xx-less status when transient_body_contains is empty.
func TestFetchTransientBodyIsRetried(t *testing.T) {
	const throttled = `{"__type":"ProvisionedThroughputExceededException","message":"Rate exceeded for shard shardId-000000000000"}`
	for name, tc := range map[string]struct {
		bodies    []string // answers before a good page
		extra     string
		wantCalls int32
		permanent bool
	}{
		"throttling retried":        {[]string{throttled, throttled}, "  transient_body_contains: [ProvisionedThroughputExceededException]\n", 3, false},
		"match ignores case":        {[]string{throttled}, "  transient_body_contains: [provisionedthroughputexceededexception]\n", 2, false},
		"other 400 stays permanent": {[]string{`{"__type":"InvalidArgumentException"}`}, "  transient_body_contains: [ProvisionedThroughputExceededException]\n", 1, true},
		"not configured: permanent": {[]string{throttled}, "", 1, true},
	} {
		t.Run(name, func(t *testing.T) {
			var calls atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := int(calls.Add(1))
				if n <= len(tc.bodies) {
					w.WriteHeader(http.StatusBadRequest)
					fmt.Fprint(w, tc.bodies[n-1])
					return
				}
				fmt.Fprint(w, `[{"id":"a","position":1}]`)
			}))
			defer srv.Close()
			p := parseProvider(t, "http:\n  url: "+srv.URL+"\n  successor: root = deleted()\n"+fastRetries+tc.extra, nil, nil)
			resp, err := p.Fetch(context.Background(), provider.Request{Partition: "p", Cursor: []byte("c")})
			assert.Equal(t, tc.wantCalls, calls.Load())
			if tc.permanent {
				require.ErrorIs(t, err, provider.ErrPermanent)
				return
			}
			require.NoError(t, err)
			assert.Len(t, resp.Events, 1)
		})
	}
}

func TestFetchRetriesTransientThenSucceeds(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch calls.Add(1) {
		case 1:
			http.Error(w, "boom", http.StatusInternalServerError)
		case 2:
			w.Header().Set("Retry-After", "0")
			http.Error(w, "slow down", http.StatusTooManyRequests)
		case 3:
			http.Error(w, "unavailable", http.StatusServiceUnavailable)
		default:
			fmt.Fprint(w, `[{"id":"a","position":1}]`)
		}
	}))
	defer srv.Close()
	p := parseProvider(t, "http:\n  url: "+srv.URL+"\n  successor: root = deleted()\n"+fastRetries, nil, nil)
	resp := fetch(t, p, "p", "c")
	if calls.Load() != 4 || len(resp.Events) != 1 {
		t.Fatalf("calls %d, events %d; want 4 calls (3 retried failures) and 1 event", calls.Load(), len(resp.Events))
	}
}

func TestFetchRetriesExhausted(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		http.Error(w, "still down", http.StatusBadGateway)
	}))
	defer srv.Close()
	p := parseProvider(t, "http:\n  url: "+srv.URL+"\n  successor: root = deleted()\n"+fastRetries, nil, nil)
	_, err := p.Fetch(context.Background(), provider.Request{Partition: "p", Cursor: []byte("c")})
	var se *StatusError
	if !errors.As(err, &se) || se.Status != http.StatusBadGateway || se.Attempts != 4 || se.Permanent() {
		t.Fatalf("got %v, want a transient *StatusError 502 after 4 attempts", err)
	}
	if errors.Is(err, ErrPermanent) || errors.Is(err, provider.ErrExpired) || errors.Is(err, provider.ErrMalformed) {
		t.Fatalf("exhausted retries must stay transient: %v", err)
	}
	if calls.Load() != 4 {
		t.Fatalf("calls %d, want 4", calls.Load())
	}
}

func TestFetchConnectionErrorIsTransient(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens any more: connection refused
	p := parseProvider(t, "http:\n  url: "+url+"/secret-path?cursor=${! @cursor }\n  successor: root = deleted()\n"+fastRetries, nil, nil)
	_, err := p.Fetch(context.Background(), provider.Request{Partition: "p", Cursor: []byte("raw-cursor-value")})
	if err == nil || errors.Is(err, ErrPermanent) || errors.Is(err, provider.ErrExpired) || errors.Is(err, provider.ErrMalformed) {
		t.Fatalf("got %v, want a transient error", err)
	}
	for _, leak := range []string{"raw-cursor-value", "secret-path"} {
		if strings.Contains(err.Error(), leak) {
			t.Errorf("error leaks %q: %v", leak, err)
		}
	}
	if !strings.Contains(err.Error(), "giving up after 4 attempts") {
		t.Errorf("error does not say it retried: %v", err)
	}
}

func TestFetchTimeoutIsTransient(t *testing.T) {
	release := make(chan struct{})
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		fmt.Fprint(w, `[]`)
	}))
	defer srv.Close()
	defer close(release)
	// The first request never gets an answer: it times out and is retried.
	// Later requests are answered at once, but a loaded machine may still
	// make one miss the timeout: then it is retried too.
	p := parseProvider(t, "http:\n  url: "+srv.URL+"\n  timeout: 200ms\n  successor: root = deleted()\n"+fastRetries, nil, nil)
	fetch(t, p, "p", "c")
	if calls.Load() < 2 {
		t.Fatalf("calls %d, want at least 2 (a timeout, then a retry)", calls.Load())
	}
}

// TestFetchCutConnectionIsTransient: a body cut short by the connection
// (fewer bytes than Content-Length) is a transport failure and retried; only
// a complete body that is not valid JSON is malformed.
func TestFetchCutConnectionIsTransient(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.Header().Set("Content-Length", "100")
			fmt.Fprint(w, `[{"id":"a",`)
			return
		}
		fmt.Fprint(w, `[{"id":"a","position":1}]`)
	}))
	defer srv.Close()
	p := parseProvider(t, "http:\n  url: "+srv.URL+"\n  successor: root = deleted()\n"+fastRetries, nil, nil)
	resp := fetch(t, p, "p", "c")
	if calls.Load() != 2 || len(resp.Events) != 1 {
		t.Fatalf("calls %d events %d", calls.Load(), len(resp.Events))
	}
}

func TestFetchHardStatus(t *testing.T) {
	var calls atomic.Int32
	long := strings.Repeat("x", 1000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprint(w, `{"error":"forbidden","detail":"`+long+`"}`)
	}))
	defer srv.Close()
	p := parseProvider(t, "http:\n  url: "+srv.URL+"\n  successor: root = deleted()\n"+fastRetries, nil, nil)
	_, err := p.Fetch(context.Background(), provider.Request{Partition: "p4", Cursor: []byte("c")})
	var se *StatusError
	if !errors.As(err, &se) || !errors.Is(err, ErrPermanent) || !se.Permanent() {
		t.Fatalf("got %v, want a permanent *StatusError", err)
	}
	if errors.Is(err, provider.ErrMalformed) || errors.Is(err, provider.ErrExpired) {
		t.Fatalf("a 403 is neither malformed nor expired: %v", err)
	}
	if se.Status != 403 || se.Partition != "p4" || !strings.Contains(err.Error(), "403") || !strings.Contains(se.Body, `"error":"forbidden"`) {
		t.Errorf("error lacks status, partition or body: %v", err)
	}
	if len(se.Body) > maxQuotedBody+len("…") {
		t.Errorf("quoted body is %d bytes, want at most %d", len(se.Body), maxQuotedBody)
	}
	if calls.Load() != 1 {
		t.Errorf("a permanent status was requested %d times, want once", calls.Load())
	}
}

// TestFetchSecretsNotLeaked: header values (secrets from ${ENV}) and raw
// cursors never appear in errors or logs, even when the server echoes them.
func TestFetchSecretsNotLeaked(t *testing.T) {
	const secret = "sk-live-0123456789abcdef"
	const cursor = "cursor-with-pii-alice@example.com"
	var mode atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		echo := fmt.Sprintf(`{"auth":%q,"since":%q}`, r.Header.Get("X-Api-Key"), r.URL.Query().Get("since"))
		switch mode.Load().(string) {
		case "400":
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, echo)
		case "410":
			w.WriteHeader(http.StatusGone)
			fmt.Fprint(w, echo)
		case "503":
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, echo)
		case "malformed":
			fmt.Fprint(w, `[{"id":"a","position":"`+secret+`"},{"id":"`+cursor+`"}]`)
		case "ok":
			fmt.Fprint(w, `{"items":[{"id":"a","position":1}],"next":"next-`+cursor+`"}`)
		}
	}))
	defer srv.Close()
	logger, logs := captureLogger()
	p := parseProvider(t, expandEnv(t, `
http:
  url: '${BASE}/events?since=${! @cursor.escape_url_query() }'
  headers:
    X-Api-Key: ${API_KEY}
  events: root = this.items | this
  successor: root = this.next
`+fastRetries, map[string]string{"BASE": srv.URL, "API_KEY": secret}), nil, logger)

	for _, m := range []string{"400", "410", "503", "malformed", "ok"} {
		mode.Store(m)
		_, err := p.Fetch(context.Background(), provider.Request{Partition: "p", Cursor: []byte(cursor)})
		if m == "ok" {
			if err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err == nil {
			t.Fatalf("mode %s: no error", m)
		}
		for _, leak := range []string{secret, cursor, "alice"} {
			if strings.Contains(err.Error(), leak) {
				t.Errorf("mode %s: error leaks %q: %v", m, leak, err)
			}
		}
	}
	for _, leak := range []string{secret, cursor, "alice"} {
		if strings.Contains(logs.String(), leak) {
			t.Errorf("logs leak %q:\n%s", leak, logs.String())
		}
	}
	if !strings.Contains(logs.String(), reconcile.CursorHash([]byte(cursor))) {
		t.Errorf("logs do not name the cursor by its hash %s:\n%s", reconcile.CursorHash([]byte(cursor)), logs.String())
	}
}

func TestFetchRequestBuildFailure(t *testing.T) {
	p := parseProvider(t, `
http:
  url: 'http://127.0.0.1:1/x?c=${! @cursor.parse_json().page }'
  successor: root = deleted()
`, nil, nil)
	_, err := p.Fetch(context.Background(), provider.Request{Partition: "p", Cursor: []byte("not-json-secretish")})
	var re *RequestError
	if !errors.As(err, &re) || !errors.Is(err, ErrPermanent) || re.Field != "url" {
		t.Fatalf("got %v, want a permanent *RequestError on url", err)
	}
	if strings.Contains(err.Error(), "not-json-secretish") {
		t.Errorf("error leaks the cursor: %v", err)
	}
}

func TestFetchMalformed(t *testing.T) {
	huge := `[` + strings.Repeat(`{"id":"a","position":1},`, 100) + `{"id":"a","position":1}]`
	for name, tc := range map[string]struct {
		body    string
		mapping string
		want    string
	}{
		"invalid JSON":            {`{"items": [1, 2,,]}`, "", "not one JSON document"},
		"truncated JSON":          {`[{"id":"a","position":1},{"id":"b"`, "", "truncated JSON"},
		"empty body":              {``, "", "empty body"},
		"two documents":           {`[] []`, "", "data after the first JSON document"},
		"events not an array":     {`{"id":"a"}`, "", "want an array"},
		"events null":             {`{"items":null}`, "  events: root = this.items\n", "null or deleted"},
		"events mapping error":    {`{"items":"x"}`, "  events: root = this.items.map_each(e -> e)\n", "events mapping failed"},
		"missing id":              {`[{"position":1}]`, "", "event 0: missing id"},
		"null id":                 {`[{"id":null,"position":1}]`, "", "event 0: missing id"},
		"object id":               {`[{"id":{"a":1},"position":1}]`, "  event_id: root = this.id\n", "event 0: id is an object"},
		"empty id":                {`[{"id":"","position":1}]`, "", "event 0: empty id"},
		"missing position":        {`[{"id":"a","position":1},{"id":"b"}]`, "", "event 1: missing position"},
		"text position":           {`[{"id":"a","position":"ten"}]`, "", `event 0: position`},
		"fractional position":     {`[{"id":"a","position":1.5}]`, "", `event 0: position`},
		"overflowing position":    {`[{"id":"a","position":92233720368547758070}]`, "", `event 0: position`},
		"boolean position":        {`[{"id":"a","position":true}]`, "", `event 0: position`},
		"deleted payload":         {`[{"id":"a","position":1}]`, "  event_payload: root = deleted()\n", "deleted the payload"},
		"object successor":        {`[]`, "  successor: root = {\"a\":1}\n", "successor is an object"},
		"has_more not a boolean":  {`[]`, "  has_more: root = \"yes\"\n", "has_more is the string"},
		"sealed not a boolean":    {`[]`, "  sealed: root = 1\n", "sealed is"},
		"bad complete_through":    {`[]`, "  complete_through: root = \"soon\"\n  contract:\n    finality: source\n", "complete_through"},
		"array marker":            {`[]`, "  marker: root = [1]\n", "marker is an array"},
		"throwing mapping":        {`[{"id":"a","position":1}]`, "  event_id: root = throw(\"bad event\")\n", "bad event"},
		"body over max":           {huge, "  max_response_bytes: 100\n", "larger than max_response_bytes"},
		"string instead of event": {`["a","b"]`, "", "event 0: missing id"},
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprint(w, tc.body)
			}))
			defer srv.Close()
			yaml := "http:\n  url: " + srv.URL + "\n" + tc.mapping
			if !strings.Contains(tc.mapping, "successor:") {
				yaml += "  successor: root = deleted()\n"
			}
			p := parseProvider(t, yaml, nil, nil)
			_, err := p.Fetch(context.Background(), provider.Request{Partition: "p7", Cursor: []byte("c")})
			var mal *provider.MalformedError
			if !errors.As(err, &mal) || !errors.Is(err, provider.ErrMalformed) {
				t.Fatalf("got %v, want *provider.MalformedError", err)
			}
			if mal.Partition != "p7" || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want partition p7 and %q", err, tc.want)
			}
		})
	}
}

// FuzzMapResponse feeds arbitrary bodies through the mappings: the result
// is a response or a *provider.MalformedError, never a panic or another
// error. `go test` runs the seeds; `go test -fuzz FuzzMapResponse` explores.
func FuzzMapResponse(f *testing.F) {
	for _, seed := range []string{
		`{"items":[{"id":"a","position":1}],"next":"n","through":3}`,
		`{"items":[{"id":1,"position":"2"}],"next":5,"more":true}`,
		`{"items":{}}`, `[`, `"`, `null`, `{"items":[null]}`, `{"items":[[]]}`, `{"items":[{"id":[],"position":{}}]}`,
		`{"items":[{"id":"a","position":1e400}]}`, `{"through":"x"}`, "\x00\xff", `[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]`,
	} {
		f.Add([]byte(seed))
	}
	spec := testSpec()
	conf, err := spec.ParseYAML(`
http:
  url: http://127.0.0.1:1/
  events: root = this.items
  successor: root = this.next
  has_more: root = this.more
  complete_through: root = this.through
  marker: root = this.marker
  sealed: root = this.sealed
  contract:
    finality: source
`, nil)
	if err != nil {
		f.Fatal(err)
	}
	p, err := FromParsed(conf.Namespace("http"), service.MockResources(), nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		rq := &builtRequest{partition: "fz", method: "GET", host: "http://127.0.0.1:1"}
		_, err := p.mapResponse(rq, &httpResult{status: 200, header: http.Header{}, body: body})
		var mal *provider.MalformedError
		if err != nil && !errors.As(err, &mal) {
			t.Fatalf("body %q: %v is not a MalformedError", body, err)
		}
	})
}

func TestRateLimitHonoured(t *testing.T) {
	var (
		mu       sync.Mutex
		accesses int
		requests []int // the access count seen by each request
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		requests = append(requests, accesses)
		n := len(requests)
		mu.Unlock()
		if n == 1 {
			http.Error(w, "retry me", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, `[]`)
	}))
	defer srv.Close()
	res := service.MockResources(service.MockResourcesOptAddRateLimit("quota", func(context.Context) (time.Duration, error) {
		mu.Lock()
		defer mu.Unlock()
		accesses++
		if accesses%2 == 1 {
			return time.Millisecond, nil // every other access asks to wait
		}
		return 0, nil
	}))
	p := parseProvider(t, "http:\n  url: "+srv.URL+"\n  rate_limit: quota\n  successor: root = deleted()\n"+fastRetries, res, nil)
	fetch(t, p, "p", "c")
	mu.Lock()
	defer mu.Unlock()
	// Each request (the failed one and its retry) waited once and was then
	// allowed: accesses 1 (wait), 2 (go), 3 (wait), 4 (go).
	if len(requests) != 2 || requests[0] != 2 || requests[1] != 4 || accesses != 4 {
		t.Fatalf("requests saw access counts %v after %d accesses; want [2 4] after 4", requests, accesses)
	}
}

func TestRateLimitErrorIsTransient(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Error("request made although the rate limit failed")
	}))
	defer srv.Close()
	res := service.MockResources(service.MockResourcesOptAddRateLimit("quota", func(context.Context) (time.Duration, error) {
		return 0, errors.New("quota backend down")
	}))
	p := parseProvider(t, "http:\n  url: "+srv.URL+"\n  rate_limit: quota\n  successor: root = deleted()\n  max_retries: 0\n", res, nil)
	_, err := p.Fetch(context.Background(), provider.Request{Partition: "p"})
	if err == nil || errors.Is(err, ErrPermanent) || !strings.Contains(err.Error(), "quota backend down") {
		t.Fatalf("got %v, want a transient rate limit error", err)
	}
}

func TestFetchCancelled(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	p := parseProvider(t, "http:\n  url: "+srv.URL+"\n  successor: root = deleted()\n  backoff:\n    initial_interval: 1h\n    max_interval: 1h\n", nil, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := p.Fetch(ctx, provider.Request{Partition: "p"})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want the context's error", err)
	}
}

// TestRedirectToOtherHostNotFollowed: custom headers (API keys) would be
// forwarded on a redirect, so redirects leave the host only as an error.
func TestRedirectToOtherHostNotFollowed(t *testing.T) {
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("redirect followed to another host with X-Api-Key %q", r.Header.Get("X-Api-Key"))
	}))
	defer other.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/moved" {
			fmt.Fprint(w, `[{"id":"a","position":1}]`)
			return
		}
		if c := r.URL.Query().Get("away"); c != "" {
			http.Redirect(w, r, other.URL+"/steal?token=signed-"+c, http.StatusFound)
			return
		}
		http.Redirect(w, r, "/moved", http.StatusFound)
	}))
	defer srv.Close()
	p := parseProvider(t, "http:\n  url: "+srv.URL+"/x?away=${! @cursor }\n  headers:\n    X-Api-Key: k-123456\n  successor: root = deleted()\n", nil, nil)
	if resp := fetch(t, p, "p", ""); len(resp.Events) != 1 {
		t.Fatalf("same-host redirect: %+v", resp)
	}
	_, err := p.Fetch(context.Background(), provider.Request{Partition: "p", Cursor: []byte("1")})
	var se *StatusError
	if !errors.As(err, &se) || se.Status != http.StatusFound || !se.Permanent() {
		t.Fatalf("got %v, want a permanent *StatusError 302", err)
	}
	// The error (and so the park reason) says where the redirect pointed:
	// the other host, and only a hash of the Location, whose query (a
	// signed token here) the quoted body does not show either.
	assert.Contains(t, err.Error(), "redirected to "+other.URL+" (Location sha256:")
	assert.NotContains(t, err.Error(), "signed-1", "the Location's query values are redacted from the quoted body")
}

func TestPartitions(t *testing.T) {
	var body atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/shards" || r.Header.Get("Authorization") != "Bearer t0k3n-xyz" {
			http.Error(w, "wrong request", http.StatusBadRequest)
			return
		}
		fmt.Fprint(w, body.Load().(string))
	}))
	defer srv.Close()
	p := parseProvider(t, `
http:
  url: `+srv.URL+`/events
  headers:
    Authorization: Bearer t0k3n-xyz
  successor: root = deleted()
  partitions_url: `+srv.URL+`/shards
  partitions_mapping: root = this.shards.map_each(s -> s.id)
`, nil, nil)
	body.Store(`{"shards":[{"id":"a"},{"id":2},{"id":"c"}]}`)
	got, err := p.Partitions(context.Background())
	if err != nil || !reflect.DeepEqual(got, []provider.Partition{{Name: "a"}, {Name: "2"}, {Name: "c"}}) {
		t.Fatalf("Partitions = %v, %v", got, err)
	}
	for _, bad := range []string{`{"shards":[{"id":"a"},{"id":"a"}]}`, `{"shards":[]}`, `{"shards":[{"id":""}]}`, `{"shards":{}}`, `{`} {
		body.Store(bad)
		_, err := p.Partitions(context.Background())
		if !errors.Is(err, provider.ErrMalformed) {
			t.Errorf("Partitions on %s: %v, want malformed", bad, err)
		}
	}
}

// TestPartitionsOwnHeaders: with partitions_headers the list request sends
// only those (Kinesis's ListShards target), never the page request's
// headers, whose interpolation of an empty partition would fail or lie.
func TestPartitionsOwnHeaders(t *testing.T) {
	var targets []string
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		targets = append(targets, r.Header.Get("X-Amz-Target")+"|"+r.Header.Get("X-Page-Only"))
		mu.Unlock()
		fmt.Fprint(w, `{"Shards":[{"ShardId":"s0"}]}`)
	}))
	defer srv.Close()
	p := parseProvider(t, `
http:
  url: `+srv.URL+`/
  verb: POST
  headers:
    X-Amz-Target: Kinesis_20131202.GetRecords
    X-Page-Only: '${! @partition }'
  successor: root = deleted()
  partitions_url: `+srv.URL+`/
  partitions_verb: POST
  partitions_headers:
    X-Amz-Target: Kinesis_20131202.ListShards
  partitions_mapping: root = this.Shards.map_each(s -> s.ShardId)
`, nil, nil)
	got, err := p.Partitions(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []provider.Partition{{Name: "s0"}}, got)
	assert.Equal(t, []string{"Kinesis_20131202.ListShards|"}, targets, "the list request sends partitions_headers only")
}

// A split's children name their parent: entries may be objects with a name
// and parents; a child naming itself, or an entry without a name, is a
// malformed list.
func TestPartitionsWithLineage(t *testing.T) {
	var body atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, body.Load().(string))
	}))
	defer srv.Close()
	p := parseProvider(t, `
http:
  url: `+srv.URL+`/events
  successor: root = deleted()
  partitions_url: `+srv.URL+`/shards
  partitions_mapping: 'root = this.Shards.map_each(s -> {"name": s.ShardId, "parents": [s.ParentShardId, s.AdjacentParentShardId].filter(p -> p != null)})'
`, nil, nil)
	body.Store(`{"Shards":[{"ShardId":"s0"},{"ShardId":"s1","ParentShardId":"s0"},{"ShardId":"s2","ParentShardId":"s0"},{"ShardId":"s3","ParentShardId":"s1","AdjacentParentShardId":"s2"}]}`)
	got, err := p.Partitions(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []provider.Partition{{Name: "s0"}, {Name: "s1", Parents: []string{"s0"}}, {Name: "s2", Parents: []string{"s0"}}, {Name: "s3", Parents: []string{"s1", "s2"}}}, got)
	for _, bad := range []string{`{"Shards":[{"ShardId":"s1","ParentShardId":"s1"}]}`, `{"Shards":[{"ParentShardId":"s0"}]}`} {
		body.Store(bad)
		_, err := p.Partitions(context.Background())
		require.ErrorIs(t, err, provider.ErrMalformed, bad)
	}
}

func TestBackoffBounds(t *testing.T) {
	p := &Provider{cfg: Config{Backoff: Backoff{Initial: 100 * time.Millisecond, Max: time.Second}}}
	for attempt := range 10 {
		full := min(100*time.Millisecond<<attempt, time.Second)
		for range 50 {
			d := p.backoff(attempt, 0)
			if d < full/2 || d > full {
				t.Fatalf("attempt %d: wait %s outside [%s, %s]", attempt, d, full/2, full)
			}
		}
	}
	if d := p.backoff(0, 500*time.Millisecond); d < 500*time.Millisecond {
		t.Errorf("Retry-After ignored: %s", d)
	}
	if d := p.backoff(0, time.Hour); d != time.Second {
		t.Errorf("Retry-After not capped at max_interval: %s", d)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if d := parseRetryAfter("Thu, 01 Jan 2026 00:00:05 GMT", now); d != 5*time.Second {
		t.Errorf("Retry-After date: %s", d)
	}
	if d := parseRetryAfter("soon", now); d != 0 {
		t.Errorf("Retry-After garbage: %s", d)
	}
}

// TestFetchMalformedIsNotRetriedHere: against a server on 127.0.0.1 whose
// first answers to one cursor are a truncated JSON body and an HTML page
// with status 200, each Fetch makes exactly one request and returns the
// *provider.MalformedError at once (max_retries is for transient failures
// only: the input's fetch_retries is a malformed page's one budget), naming
// the partition and what was wrong; the next Fetch of the same cursor reads
// the good answer as if nothing had happened.
func TestFetchMalformedIsNotRetriedHere(t *testing.T) {
	bodies := []string{
		`{"items":[{"id":"a","position":1},{"id":"b","posi`,
		"<html><body><h1>502 Bad Gateway</h1></body></html>",
		`{"items":[{"id":"a","position":1},{"id":"b","position":2}],"next":"c2"}`,
	}
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := int(calls.Add(1)) - 1
		assert.Equal(t, "c1", r.URL.Query().Get("cursor"))
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, bodies[min(i, len(bodies)-1)])
	}))
	defer srv.Close()
	require.True(t, strings.HasPrefix(srv.Listener.Addr().String(), "127.0.0.1:"), "the server listens on the loopback: %s", srv.Listener.Addr())
	p := parseProvider(t, pageConfig(srv.URL, fastRetries), nil, nil)

	for i, want := range []string{"truncated JSON", "not one JSON document"} {
		_, err := p.Fetch(context.Background(), provider.Request{Partition: "p3", Cursor: []byte("c1"), Attempt: i})
		var mal *provider.MalformedError
		require.ErrorAs(t, err, &mal, "answer %d", i)
		require.ErrorIs(t, err, provider.ErrMalformed)
		assert.Equal(t, "p3", mal.Partition)
		assert.Contains(t, err.Error(), want)
		assert.EqualValues(t, i+1, calls.Load(), "answer %d: one request, no retry of a malformed body", i)
	}
	resp, err := p.Fetch(context.Background(), provider.Request{Partition: "p3", Cursor: []byte("c1"), Attempt: 2})
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b"}, ids(resp))
	assert.Equal(t, "c2", string(resp.Successor))
	assert.EqualValues(t, 3, calls.Load())
}

func TestParseRateLimitReset(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		header http.Header
		want   time.Duration
	}{
		{"Okta's reset epoch second", http.Header{"X-Rate-Limit-Reset": {fmt.Sprint(now.Unix() + 3)}}, 3 * time.Second},
		{"the X-RateLimit spelling", http.Header{"X-Ratelimit-Reset": {fmt.Sprint(now.Unix() + 2)}}, 2 * time.Second},
		{"a reset in the past", http.Header{"X-Rate-Limit-Reset": {fmt.Sprint(now.Unix() - 1)}}, 0},
		{"a small number is not an epoch time", http.Header{"X-Rate-Limit-Reset": {"30"}}, 0},
		{"garbage", http.Header{"X-Rate-Limit-Reset": {"soon"}}, 0},
		{"absent", http.Header{}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, parseRateLimitReset(tc.header, now))
		})
	}
}

// TestRateLimitResetHonoured: a 429 whose X-Rate-Limit-Reset names the
// next epoch second is retried no earlier than that second.
func TestRateLimitResetHonoured(t *testing.T) {
	var mu sync.Mutex
	var reset time.Time
	var early bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		now := time.Now()
		switch {
		case reset.IsZero():
			reset = time.Unix(now.Unix()+1, 0)
			w.Header().Set("X-Rate-Limit-Reset", fmt.Sprint(reset.Unix()))
			http.Error(w, `{"errorCode":"E0000047"}`, http.StatusTooManyRequests)
		case now.Before(reset):
			early = true
			http.Error(w, `{"errorCode":"E0000047"}`, http.StatusTooManyRequests)
		default:
			fmt.Fprint(w, `[{"id":"a","position":1}]`)
		}
	}))
	defer srv.Close()
	p := parseProvider(t, "http:\n  url: "+srv.URL+"\n  successor: root = deleted()\n  max_retries: 3\n  backoff:\n    initial_interval: 1ms\n    max_interval: 5s\n", nil, nil)
	resp := fetch(t, p, "p", "c")
	require.Len(t, resp.Events, 1)
	mu.Lock()
	defer mu.Unlock()
	require.False(t, early, "a retry came before the reset second")
}

// backoff.max_elapsed_time ends the retries of one fetch before
// max_retries does once that much time has passed since its first
// request; the error stays transient.
func TestFetchRetriesEndAtMaxElapsedTime(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		http.Error(w, "still down", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	p := parseProvider(t, "http:\n  url: "+srv.URL+"\n  successor: root = deleted()\n  max_retries: 2000\n  backoff:\n    initial_interval: 1ms\n    max_interval: 2ms\n    max_elapsed_time: 50ms\n", nil, nil)
	_, err := p.Fetch(context.Background(), provider.Request{Partition: "p", Cursor: []byte("c")})
	var se *StatusError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, http.StatusServiceUnavailable, se.Status)
	assert.False(t, se.Permanent(), "exhausted retries stay transient")
	assert.Less(t, se.Attempts, 2001, "max_elapsed_time ended the retries, not max_retries")
	assert.Equal(t, int32(se.Attempts), calls.Load())
	assert.Greater(t, se.Attempts, 1, "it retried until then")
}

// A config of the previous release (backoff without max_elapsed_time)
// parses unchanged: max_elapsed_time is 0s, and max_retries alone bounds
// the retries, as before.
func TestBackoffOfThePreviousReleaseIsUnchanged(t *testing.T) {
	p := parseProvider(t, "http:\n  url: http://127.0.0.1:1/x\n  successor: root = deleted()\n"+fastRetries, nil, nil)
	assert.Equal(t, Backoff{Initial: time.Millisecond, Max: 5 * time.Millisecond}, p.cfg.Backoff)
	assert.Equal(t, 3, p.cfg.MaxRetries)
	p = parseProvider(t, "http:\n  url: http://127.0.0.1:1/x\n  successor: root = deleted()\n", nil, nil)
	assert.Equal(t, Backoff{Initial: 500 * time.Millisecond, Max: 10 * time.Second}, p.cfg.Backoff, "the defaults")
}
