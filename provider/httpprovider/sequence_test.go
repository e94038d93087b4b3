package httpprovider

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redpanda-data/benthos/v4/public/bloblang"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/provider"
)

// shardServer is a fake shard of records 1..n read through iterators, in
// the manner of Kinesis: POST /iterator opens one (TRIM_HORIZON, or
// AFTER a sequence number), GET /records?it= reads two records and hands
// out the next iterator. Every iterator is new (a counter), as Kinesis's
// are. It records the body of every /iterator request.
type shardServer struct {
	*httptest.Server
	n int

	mu    sync.Mutex
	count int
	boots []map[string]any
	pages []string // the iterators /records was called with
}

func newShardServer(t *testing.T, n int) *shardServer {
	s := &shardServer{n: n}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.count++
		switch r.URL.Path {
		case "/iterator":
			var req map[string]any
			if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			s.boots = append(s.boots, req)
			after := 0
			if req["type"] == "AFTER" {
				after, _ = strconv.Atoi(fmt.Sprint(req["after"]))
			}
			fmt.Fprintf(w, `{"iterator":"it-%d-%d"}`, after, s.count)
		case "/records":
			it := r.URL.Query().Get("it")
			s.pages = append(s.pages, it)
			var after, serial int
			if _, err := fmt.Sscanf(it, "it-%d-%d", &after, &serial); err != nil {
				http.Error(w, `{"__type":"InvalidArgumentException"}`, http.StatusBadRequest)
				return
			}
			var recs []string
			last := after
			for pos := after + 1; pos <= min(after+2, s.n); pos++ {
				recs = append(recs, fmt.Sprintf(`{"seq":"%d","key":"r%d"}`, pos, pos))
				last = pos
			}
			fmt.Fprintf(w, `{"records":[%s],"next":"it-%d-%d"}`, strings.Join(recs, ","), last, s.count)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *shardServer) bootsSeen() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]map[string]any(nil), s.boots...)
}

func (s *shardServer) pagesSeen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.pages...)
}

const shardConfig = `
http:
  url: '%s/records?it=${! @cursor.escape_url_query() }'
  events: root = this.records
  event_id: root = this.key
  event_position: root = this.seq
  successor: root = this.next
  bootstrap:
    url: '%s/iterator'
    verb: POST
    headers:
      Content-Type: application/json
    body: '${! {"shard": @partition, "reason": @reason, "type": if @applied == "" { "TRIM" } else { "AFTER" }, "after": @applied, "after_id": @applied_id, "watermark": @watermark}.format_json(no_indent: true) }'
    cursor: root = this.iterator
  contract:
    tokens_may_rotate: true
    position_type: decimal
    recovery: restart_from_boundary
`

func shardProvider(t *testing.T, s *shardServer) *Provider {
	return parseProvider(t, fmt.Sprintf(shardConfig, s.URL, s.URL), nil, nil)
}

func positions(resp provider.Response) []string {
	out := make([]string, len(resp.Events))
	for i, e := range resp.Events {
		out[i] = e.Position.String()
	}
	return out
}

// The bootstrap opens a traversal at the start (the empty cursor), with
// reason start and nothing applied; the page request is made with the
// token the bootstrap gave. Successors are the provider's envelopes: the
// page after them is fetched without another bootstrap.
func TestBootstrapOpensTheTraversalAtTheStart(t *testing.T) {
	s := newShardServer(t, 5)
	p := shardProvider(t, s)

	page1 := fetch(t, p, "shard-0", "")
	assert.Equal(t, []string{"1", "2"}, positions(page1))
	require.Len(t, s.bootsSeen(), 1)
	assert.Equal(t, map[string]any{"shard": "shard-0", "reason": "start", "type": "TRIM", "after": "", "after_id": "", "watermark": ""}, s.bootsSeen()[0])
	assert.True(t, bytes.HasPrefix(page1.Successor, []byte(envelopePrefix)), "the successor is the provider's envelope: %q", page1.Successor)

	page2 := fetch(t, p, "shard-0", string(page1.Successor))
	assert.Equal(t, []string{"3", "4"}, positions(page2))
	assert.Len(t, s.bootsSeen(), 1, "a successor needs no bootstrap")
	pages := s.pagesSeen()
	require.Len(t, pages, 2)
	assert.True(t, strings.HasPrefix(pages[0], "it-0-"), "page 1 read with the bootstrap's iterator, got %q", pages[0])
	assert.True(t, strings.HasPrefix(pages[1], "it-2-"), "page 2 read with page 1's next iterator, got %q", pages[1])
}

// A restart with restart_cursor "" asks for the bootstrap, recorded in the
// restart cursor itself: reason expired after an expired cursor, resume
// after divergence, each with the durable applied position and its event
// id; the traversal resumes right after the applied record. A restart
// cursor that restart_cursor gives is fetched without a bootstrap.
func TestBootstrapRunsOnRestartWithTheAppliedPosition(t *testing.T) {
	applied := provider.Boundary{Partition: "shard-0", Watermark: provider.IntegerWatermark(3), Applied: mustDecimal(t, "3"), HasApplied: true, AppliedID: "r3"}
	for _, tc := range []struct {
		name    string
		from    provider.Boundary
		want    map[string]any
		records []string
	}{
		{"expired", withExpired(applied, true),
			map[string]any{"shard": "shard-0", "reason": "expired", "type": "AFTER", "after": "3", "after_id": "r3", "watermark": "3"}, []string{"4", "5"}},
		{"divergence", withExpired(applied, false),
			map[string]any{"shard": "shard-0", "reason": "resume", "type": "AFTER", "after": "3", "after_id": "r3", "watermark": "3"}, []string{"4", "5"}},
		{"nothing applied", provider.Boundary{Partition: "shard-0", Expired: true},
			map[string]any{"shard": "shard-0", "reason": "expired", "type": "TRIM", "after": "", "after_id": "", "watermark": ""}, []string{"1", "2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newShardServer(t, 5)
			p := shardProvider(t, s)
			cur, err := p.RestartCursor(context.Background(), tc.from)
			require.NoError(t, err)
			require.NotEmpty(t, cur, "the restart cursor records the bootstrap it needs")
			assert.Empty(t, s.bootsSeen(), "RestartCursor makes no request")

			resp, err := p.Fetch(context.Background(), provider.Request{Scope: "test", Partition: "shard-0", Cursor: cur, Watermark: tc.from.Watermark})
			require.NoError(t, err)
			assert.Equal(t, tc.records, positions(resp))
			require.Len(t, s.bootsSeen(), 1)
			assert.Equal(t, tc.want, s.bootsSeen()[0])

			// A retry of the restart cursor (a crash before its page was
			// promoted) runs the bootstrap again and reads the same records.
			again, err := p.Fetch(context.Background(), provider.Request{Scope: "test", Partition: "shard-0", Cursor: cur, Watermark: tc.from.Watermark, Attempt: 1})
			require.NoError(t, err)
			assert.Equal(t, tc.records, positions(again))
			assert.Len(t, s.bootsSeen(), 2)
			assert.NotEqual(t, resp.Successor, again.Successor, "the bootstrap hands out a new iterator per call: tokens rotate")
		})
	}

	t.Run("restart_cursor gives a token", func(t *testing.T) {
		s := newShardServer(t, 5)
		p := parseProvider(t, fmt.Sprintf(shardConfig, s.URL, s.URL)+"    restart_cursor: '${! \"it-\" + @applied + \"-0\" }'\n", nil, nil)
		cur, err := p.RestartCursor(context.Background(), applied)
		require.NoError(t, err)
		resp := fetch(t, p, "shard-0", string(cur))
		assert.Equal(t, []string{"4", "5"}, positions(resp))
		assert.Empty(t, s.bootsSeen(), "restart_cursor's own token needs no bootstrap")
		assert.Equal(t, []string{"it-3-0"}, s.pagesSeen())
	})
}

func withExpired(b provider.Boundary, expired bool) provider.Boundary {
	b.Expired = expired
	return b
}

func mustDecimal(t *testing.T, s string) provider.Position {
	t.Helper()
	p, err := provider.DecimalPosition(s)
	require.NoError(t, err)
	return p
}

// A cursor that is not an envelope (a configured start_cursor, an
// operator's restart cursor) is the source's token itself; one that starts
// like an envelope but does not decode cannot be fetched (permanent: the
// partition parks rather than sends garbage).
func TestSequencedProviderReadsBareAndRefusesCorruptCursors(t *testing.T) {
	s := newShardServer(t, 5)
	p := shardProvider(t, s)
	resp := fetch(t, p, "shard-0", "it-1-0")
	assert.Equal(t, []string{"2", "3"}, positions(resp))
	assert.Empty(t, s.bootsSeen())

	_, err := p.Fetch(context.Background(), provider.Request{Scope: "test", Partition: "shard-0", Cursor: []byte(envelopePrefix + `{"t":`)})
	var rerr *RequestError
	require.ErrorAs(t, err, &rerr)
	assert.ErrorIs(t, err, ErrPermanent)
	assert.Equal(t, "cursor", rerr.Field)
}

// Envelopes are deterministic: the same token and values always encode to
// the same bytes (so an exact replay stays one), and a token that is not
// valid UTF-8 survives exactly.
func TestEnvelopeEncodingIsDeterministicAndExact(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  envelope
	}{
		{"token and values", withToken(envelope{Values: map[string]string{"z": "1", "a": "2", "m": "3"}}, []byte("tok"))},
		{"binary token", withToken(envelope{}, []byte{0xff, 0x00, 'x'})},
		{"pending bootstrap", envelope{Boot: &pendingBoot{Reason: ReasonExpired, Applied: "49590338271490256608559692538361571095921575989136588898", AppliedID: "k1"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := encodeEnvelope(tc.env), encodeEnvelope(tc.env)
			assert.Equal(t, a, b)
			p := &Provider{cfg: Config{Pin: mustMapping(t, `root = {}`)}}
			got, err := p.openCursor("p", a)
			require.NoError(t, err)
			assert.Equal(t, tc.env, got)
		})
	}
}

// revisionServer is a fake key range with revisions, in the manner of
// etcd: POST /range {"after": key, "revision": r} lists two keys after key
// at revision r (the current revision when r is absent); the header of
// every answer names the current revision. A write moves the current
// revision and changes a value.
type revisionServer struct {
	*httptest.Server
	mu      sync.Mutex
	rev     int
	history map[string][]rv // per key, values by revision
	bodies  []map[string]any
	checks  int
	cluster string
}

type rv struct {
	rev   int
	value string
}

func newRevisionServer(t *testing.T) *revisionServer {
	s := &revisionServer{history: map[string][]rv{}, cluster: "c1"}
	for _, k := range []string{"k1", "k2", "k3", "k4", "k5"} {
		s.write(k, "v1")
	}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		b, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/status" {
			s.checks++
			fmt.Fprintf(w, `{"cluster":%q}`, s.cluster)
			return
		}
		var req map[string]any
		if err := json.Unmarshal(b, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.bodies = append(s.bodies, req)
		at := s.rev
		if v, ok := req["revision"]; ok {
			at, _ = strconv.Atoi(fmt.Sprint(v))
		}
		after, _ := req["after"].(string)
		var kvs []string
		more := false
		for _, k := range []string{"k1", "k2", "k3", "k4", "k5"} {
			if k <= after {
				continue
			}
			if len(kvs) == 2 {
				more = true
				break
			}
			val := ""
			for _, h := range s.history[k] {
				if h.rev <= at {
					val = h.value
				}
			}
			kvs = append(kvs, fmt.Sprintf(`{"key":%q,"value":%q}`, k, val))
		}
		fmt.Fprintf(w, `{"header":{"revision":"%d","cluster":%q},"kvs":[%s],"more":%t}`, s.rev, s.cluster, strings.Join(kvs, ","), more)
	}))
	t.Cleanup(s.Close)
	return s
}

// write sets a key's value at the next revision.
func (s *revisionServer) write(k, v string) {
	s.rev++
	s.history[k] = append(s.history[k], rv{s.rev, v})
}

func (s *revisionServer) writeLocked(k, v string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.write(k, v)
}

const revisionConfig = `
http:
  url: '%s/range'
  verb: POST
  body: '${! {"after": @cursor, "revision": @pinned_revision | deleted()}.format_json(no_indent: true) }'
  events: root = this.kvs
  event_id: root = this.key
  event_position: root = this.key
  event_payload: 'root = this.assign({"revision": @pinned_revision})'
  successor: 'root = if this.more { this.kvs.index(-1).key } else { deleted() }'
  marker: root = @pinned_revision
  pin: 'root = {"pinned_revision": this.header.revision, "cluster": this.header.cluster}'
  contract:
    empty_page: end_of_data
    position_type: string
    coordinate: string
    missing_successor: end_of_traversal
    snapshot_marker: true
    recovery: fresh_snapshot
`

// The first page of a traversal pins the revision it was served at; every
// mapping of that page already sees it, and every later page is requested
// at it (carried in the successor envelope), so writes during the
// traversal stay invisible. A new traversal (the empty cursor, or a
// fresh_snapshot restart) pins anew.
func TestPinnedValuesHoldForTheWholeTraversal(t *testing.T) {
	s := newRevisionServer(t)
	p := parseProvider(t, fmt.Sprintf(revisionConfig, s.URL), nil, nil)

	read := func(cursor string) (values []string, markers []string) {
		t.Helper()
		for page := 0; ; page++ {
			require.Less(t, page, 10, "the traversal does not end")
			resp := fetch(t, p, "range", cursor)
			markers = append(markers, string(resp.Marker))
			for _, e := range resp.Events {
				var kv struct{ Key, Value, Revision string }
				require.NoError(t, json.Unmarshal(e.Payload, &kv))
				values = append(values, kv.Key+"="+kv.Value+"@"+kv.Revision)
			}
			if resp.Successor == nil {
				return values, markers
			}
			if page == 0 {
				// Writes after the first page: invisible at the pin.
				s.writeLocked("k2", "v2")
				s.writeLocked("k4", "v2")
			}
			cursor = string(resp.Successor)
		}
	}
	values, markers := read("")
	assert.Equal(t, []string{"k1=v1@5", "k2=v1@5", "k3=v1@5", "k4=v1@5", "k5=v1@5"}, values)
	assert.Equal(t, []string{"5", "5", "5"}, markers, "the first page's mappings see the value it pinned")
	s.mu.Lock()
	bodies := append([]map[string]any(nil), s.bodies...)
	s.mu.Unlock()
	require.Len(t, bodies, 3)
	assert.NotContains(t, bodies[0], "revision", "the first page is read at the current revision")
	assert.Equal(t, "5", bodies[1]["revision"])
	assert.Equal(t, "5", bodies[2]["revision"])

	cur, err := p.RestartCursor(context.Background(), provider.Boundary{Partition: "range", Expired: true})
	require.NoError(t, err)
	assert.Nil(t, cur, "without a bootstrap, fresh_snapshot restarts at the start")
	values, markers = read(string(cur))
	assert.Equal(t, []string{"k1=v1@7", "k2=v2@7", "k3=v1@7", "k4=v2@7", "k5=v1@7"}, values, "the new traversal pins the current revision")
	assert.Equal(t, []string{"7", "7", "7"}, markers)
}

// With a bootstrap, pin runs over the bootstrap's answer; the first page is
// already requested with the pinned values.
func TestPinOverTheBootstrapAnswer(t *testing.T) {
	s := newRevisionServer(t)
	cfg := strings.Replace(fmt.Sprintf(revisionConfig, s.URL), "  pin:", fmt.Sprintf(`  bootstrap:
    url: '%s/range'
    verb: POST
    body: '{"after":"~"}'
    cursor: root = "k0"
  pin:`, s.URL), 1)
	p := parseProvider(t, cfg, nil, nil)
	resp := fetch(t, p, "range", "")
	assert.Equal(t, []string{"k1", "k2"}, ids(resp))
	assert.Equal(t, "5", string(resp.Marker))
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Len(t, s.bodies, 2)
	assert.Equal(t, map[string]any{"after": "~"}, s.bodies[0], "the bootstrap")
	assert.Equal(t, map[string]any{"after": "k0", "revision": "5"}, s.bodies[1], "the first page, at the revision the bootstrap's answer pinned")
}

// A pin mapping must give an object of scalars, none under the provider's
// own metadata names; anything else is a malformed response.
func TestPinRefusesWhatItCannotCarry(t *testing.T) {
	s := newRevisionServer(t)
	for _, tc := range []struct{ name, pin, reason string }{
		{"reserved name", `root = {"cursor": this.header.revision}`, `value name "cursor"`},
		{"not an object", `root = this.header.revision`, "want an object"},
		{"nested value", `root = {"h": this.header}`, `value "h"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := strings.Replace(fmt.Sprintf(revisionConfig, s.URL), `  pin: 'root = {"pinned_revision": this.header.revision, "cluster": this.header.cluster}'`, "  pin: '"+tc.pin+"'", 1)
			p := parseProvider(t, cfg, nil, nil)
			_, err := p.Fetch(context.Background(), provider.Request{Scope: "test", Partition: "range"})
			var mal *provider.MalformedError
			require.ErrorAs(t, err, &mal)
			assert.Contains(t, mal.Reason, tc.reason)
		})
	}
}

const validateConfig = `
  validate:
    url: '%s/status'
    verb: POST
    body: '{}'
    valid: root = this.cluster == @cluster
`

// The validation request runs before the first fetch from a stored cursor
// after start-up, and only then: a new provider (a new process) validates
// the cursor its checkpoint holds once, the successors of its own pages
// need nothing. A cursor declared invalid is an expired cursor; it is
// validated again on the next fetch (an unparked partition), while the
// cursor a restart moves to is not validated.
func TestValidationChecksAStoredCursorOnce(t *testing.T) {
	s := newRevisionServer(t)
	cfg := fmt.Sprintf(revisionConfig, s.URL) + fmt.Sprintf(validateConfig, s.URL)
	first := parseProvider(t, cfg, nil, nil)
	page1 := fetch(t, first, "range", "")
	page2 := fetch(t, first, "range", string(page1.Successor))
	s.mu.Lock()
	assert.Zero(t, s.checks, "a traversal started in this process is not validated")
	s.mu.Unlock()

	// A restart of the process: the stored cursor is page 2's successor.
	stored := string(page2.Successor)
	second := parseProvider(t, cfg, nil, nil)
	page3 := fetch(t, second, "range", stored)
	assert.Equal(t, []string{"k5"}, ids(page3))
	fetch(t, second, "range", stored)
	s.mu.Lock()
	assert.Equal(t, 1, s.checks, "the stored cursor is validated once")
	// The cluster is recreated under the same name.
	s.cluster = "c2"
	s.mu.Unlock()

	third := parseProvider(t, cfg, nil, nil)
	for attempt := range 2 {
		_, err := third.Fetch(context.Background(), provider.Request{Scope: "test", Partition: "range", Cursor: []byte(stored), Attempt: attempt})
		var exp *provider.ExpiredError
		require.ErrorAs(t, err, &exp, "attempt %d", attempt)
		assert.Contains(t, exp.Reason, "validation request declared the stored cursor invalid")
	}
	s.mu.Lock()
	assert.Equal(t, 3, s.checks, "an invalid cursor stays unchecked: every fetch validates it again")
	s.mu.Unlock()

	cur, err := third.RestartCursor(context.Background(), provider.Boundary{Partition: "range", Expired: true})
	require.NoError(t, err)
	fresh := fetch(t, third, "range", string(cur))
	next := fetch(t, third, "range", string(fresh.Successor))
	assert.Equal(t, []string{"k3", "k4"}, ids(next))
	s.mu.Lock()
	assert.Equal(t, 3, s.checks, "the restart's traversal is not validated")
	s.mu.Unlock()
}

// bootstrap, pin and validate are checked like the page request.
func TestSequenceConfigValidation(t *testing.T) {
	for _, tc := range []struct{ name, extra, want string }{
		{"bootstrap without cursor", "  bootstrap:\n    url: http://127.0.0.1:1/b\n", "field 'cursor' is required"},
		{"bootstrap with a bad verb", "  bootstrap:\n    url: http://127.0.0.1:1/b\n    verb: 'NOT A VERB'\n    cursor: root = this.c\n", "bootstrap.verb"},
		{"bootstrap with a bad header", "  bootstrap:\n    url: http://127.0.0.1:1/b\n    headers:\n      'bad name': x\n    cursor: root = this.c\n", "bootstrap.headers"},
		{"validate without valid", "  validate:\n    url: http://127.0.0.1:1/v\n", "field 'valid' is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tryParseProvider(pageConfig("http://127.0.0.1:1", tc.extra), nil, nil)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func mustMapping(t *testing.T, src string) *bloblang.Executor {
	t.Helper()
	exec, err := bloblang.Parse(src)
	require.NoError(t, err)
	return exec
}
