package httpprovider

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const incarnationConfig = `
  incarnation:
    url: '%[1]s/${! @partition }/_local/tidemark-incarnation'
    value: root = this.incarnation
    create:
      url: '%[1]s/${! @partition }/_local/tidemark-incarnation'
      verb: PUT
      headers:
        Content-Type: application/json
      body: '${! {"incarnation": @incarnation}.format_json(no_indent: true) }'
  validate_interval: 5s
`

// TestIncarnationMarkerOnPouchDB: against pouchdb-server, the first check
// of a database writes the marker (a _local document, which moves neither
// update_seq nor _changes) and later checks read the same value; a
// database deleted and created again under the same name names another
// incarnation.
func TestIncarnationMarkerOnPouchDB(t *testing.T) {
	srv := startPouchDB(t)
	call(t, http.MethodPut, srv.URL+"/events", "")
	cfg := loadTestdata(t, "pouchdb_changes.yaml", map[string]string{"POUCHDB_URL": srv.URL}) + strings.ReplaceAll(incarnationConfig, "%[1]s", srv.URL)
	p := parseProvider(t, cfg, nil, nil)
	declared, every := p.IncarnationCheck()
	require.True(t, declared)
	assert.Equal(t, 5*time.Second, every)

	first, err := p.Incarnation(context.Background(), "test", "events")
	require.NoError(t, err)
	assert.Regexp(t, `^[0-9a-f]{32}$`, first)
	again, err := p.Incarnation(context.Background(), "test", "events")
	require.NoError(t, err)
	assert.Equal(t, first, again, "the marker is read, not written again")
	assert.Contains(t, string(call(t, http.MethodGet, srv.URL+"/events", "")), `"update_seq":0`, "a _local document does not move update_seq")
	assert.Empty(t, fetch(t, p, "events", "").Events, "nor appear in _changes")

	call(t, http.MethodDelete, srv.URL+"/events", "")
	call(t, http.MethodPut, srv.URL+"/events", "")
	recreated, err := p.Incarnation(context.Background(), "test", "events")
	require.NoError(t, err)
	assert.NotEqual(t, first, recreated, "a recreated database is another incarnation")
}

// TestIncarnationCreateRace: when another writer creates the marker
// between the read and the create (HTTP 409), the read names the one that
// won; without a create request, a source naming none is an error.
func TestIncarnationCreateRace(t *testing.T) {
	var mu sync.Mutex
	reads, creates := 0, 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		switch r.Method {
		case http.MethodGet:
			reads++
			if reads == 1 {
				http.Error(w, `{"error":"not_found"}`, http.StatusNotFound)
				return
			}
			_, _ = w.Write([]byte(`{"incarnation":"theirs"}`))
		case http.MethodPut:
			creates++
			http.Error(w, `{"error":"conflict"}`, http.StatusConflict)
		}
	}))
	t.Cleanup(srv.Close)
	page := "http:\n  url: '" + srv.URL + "/page'\n  successor: root = this.next\n"
	p := parseProvider(t, page+strings.ReplaceAll(incarnationConfig, "%[1]s", srv.URL), nil, nil)
	v, err := p.Incarnation(context.Background(), "test", "db")
	require.NoError(t, err)
	assert.Equal(t, "theirs", v)
	assert.Equal(t, 1, creates)

	noCreate := page + "  incarnation:\n    url: '" + srv.URL + "/none'\n    value: root = this.missing\n"
	q := parseProvider(t, noCreate, nil, nil)
	_, err = q.Incarnation(context.Background(), "test", "db")
	require.ErrorContains(t, err, "names no incarnation")

	plain := parseProvider(t, page, nil, nil)
	declared, _ := plain.IncarnationCheck()
	assert.False(t, declared)
}

// TestIncarnationInAHeaderOfAnEmptyAnswer: an incarnation request whose
// 2xx answer has an empty body (a HEAD request, or a GET answered with no
// content) and names the incarnation in a header is read, not refused as
// a malformed answer; a value mapping that reads the absent body names
// none; a body that is present must still parse.
func TestIncarnationInAHeaderOfAnEmptyAnswer(t *testing.T) {
	var mu sync.Mutex
	gen := "gen-7"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		switch r.URL.Path {
		case "/inc":
			w.Header().Set("X-Incarnation", gen)
			w.WriteHeader(http.StatusOK)
		case "/nocontent":
			w.Header().Set("X-Incarnation", gen)
			w.WriteHeader(http.StatusNoContent)
		case "/garbage":
			w.Header().Set("X-Incarnation", gen)
			_, _ = w.Write([]byte("{not json"))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	page := "http:\n  url: '" + srv.URL + "/page'\n  successor: root = this.next\n"
	read := func(verb, path, value string) (string, error) {
		t.Helper()
		cfg := page + "  incarnation:\n    url: '" + srv.URL + path + "'\n    verb: " + verb + "\n    value: '" + value + "'\n"
		return parseProvider(t, cfg, nil, nil).Incarnation(context.Background(), "test", "db")
	}
	for _, tc := range []struct{ verb, path string }{{"GET", "/inc"}, {"HEAD", "/inc"}, {"GET", "/nocontent"}} {
		v, err := read(tc.verb, tc.path, `root = @"x-incarnation"`)
		require.NoError(t, err, "%s %s", tc.verb, tc.path)
		assert.Equal(t, "gen-7", v, "%s %s", tc.verb, tc.path)
	}
	mu.Lock()
	gen = "gen-8"
	mu.Unlock()
	v, err := read("HEAD", "/inc", `root = @"x-incarnation"`)
	require.NoError(t, err)
	assert.Equal(t, "gen-8", v, "a recreated source names another incarnation")

	_, err = read("GET", "/inc", `root = this.incarnation`)
	require.ErrorContains(t, err, "names no incarnation", "an empty body holds no value in it")
	_, err = read("GET", "/garbage", `root = @"x-incarnation"`)
	require.ErrorContains(t, err, "not one JSON document", "a body that is there must parse")
}
