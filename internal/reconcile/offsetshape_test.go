package reconcile

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/provider"
)

func TestOffsetShaped(t *testing.T) {
	const api = "https://api.example.com/v1/items"
	link := func(next string) string {
		return `<` + api + `?page=1&per_page=100>; rel="first", <` + next + `>; rel="next", <` + api + `?page=9&per_page=100>; rel="last"`
	}
	for _, tc := range []struct {
		name       string
		request    string
		successor  string
		events     int
		want       OffsetShape // Param "": not offset-shaped
		notInclear []string    // words the description must not hold
	}{
		{name: "offset advanced by the page", request: api + "?offset=100&limit=100", successor: api + "?offset=200&limit=100", events: 100,
			want: OffsetShape{Param: "offset", Step: 100}},
		{name: "page number advanced by one", request: api + "?page=3&per_page=50", successor: api + "?page=4&per_page=50", events: 50,
			want: OffsetShape{Param: "page", Step: 1}},
		{name: "skip, start, from and $skip", request: api + "?$skip=40&$top=20", successor: api + "?$skip=60&$top=20", events: 20,
			want: OffsetShape{Param: "$skip", Step: 20}},
		{name: "parameter names are compared without case", request: api + "?pageNumber=2", successor: api + "?pageNumber=3", events: 10,
			want: OffsetShape{Param: "pageNumber", Step: 1}},
		{name: "parameters reordered", request: api + "?limit=100&offset=100&sort=id", successor: api + "?sort=id&offset=200&limit=100", events: 100,
			want: OffsetShape{Param: "offset", Step: 100}},
		{name: "a successor relative to the request (path)", request: api + "?start=10&rows=10", successor: "/v1/items?rows=10&start=20", events: 10,
			want: OffsetShape{Param: "start", Step: 10}},
		{name: "a successor relative to the request (query only)", request: api + "?skip=10", successor: "?skip=20", events: 10,
			want: OffsetShape{Param: "skip", Step: 10}},
		{name: "both relative", request: "/v1/items?from=30", successor: "/v1/items?from=60", events: 30,
			want: OffsetShape{Param: "from", Step: 30}},
		{name: "an offset the request did not have", request: api + "?limit=100", successor: api + "?limit=100&offset=100", events: 100,
			want: OffsetShape{Param: "offset", Added: true}},
		{name: "Link header values, the rel=next target", request: link(api + "?page=2&per_page=100"), successor: link(api + "?page=3&per_page=100"), events: 100,
			want: OffsetShape{Param: "page", Step: 1, Link: true}},
		{name: "a Link header value after a URL", request: api + "?page=2&per_page=100", successor: `<` + api + `?per_page=100&page=3>; rel="next"`, events: 100,
			want: OffsetShape{Param: "page", Step: 1, Link: true}},
		{name: "a rel list naming next", request: api + "?offset=5", successor: `<` + api + `?offset=10>; rel="prefetch next"`, events: 5,
			want: OffsetShape{Param: "offset", Step: 5, Link: true}},
		{name: "from the start: the offset is the page's event count", request: "", successor: api + "?offset=100&limit=100", events: 100,
			want: OffsetShape{Param: "offset", FromBoundary: true}},
		{name: "from the start: a 1-based offset", request: "", successor: api + "?start=101", events: 100,
			want: OffsetShape{Param: "start", FromBoundary: true}},
		{name: "from the start: page 2 in a Link header", request: "", successor: link(api + "?page=2&per_page=100"), events: 100,
			want: OffsetShape{Param: "page", FromBoundary: true, Link: true}},
		{name: "from a restart token: the offset is the page's event count", request: "since:2024-01-01", successor: api + "?offset=10", events: 10,
			want: OffsetShape{Param: "offset", FromBoundary: true}},

		{name: "an opaque token", request: "eyJvZmZzZXQiOjEwMH0=", successor: "eyJvZmZzZXQiOjIwMH0=", events: 100},
		{name: "bare numbers (a sequence, a key or an offset: the monitor cannot tell)", request: "100", successor: "200", events: 100},
		{name: "a token parameter", request: api + "?cursor=abc", successor: api + "?cursor=abd", events: 10},
		{name: "Okta's after", request: api + "?after=1700000000&limit=10", successor: api + "?after=1700000010&limit=10", events: 10},
		{name: "another parameter changed too", request: api + "?offset=100&sig=aaa", successor: api + "?offset=200&sig=bbb", events: 100},
		{name: "the offset went back", request: api + "?offset=200", successor: api + "?offset=100", events: 100},
		{name: "not an integer", request: api + "?from=2024-01-01", successor: api + "?from=2024-01-02", events: 100},
		{name: "too many digits for a row count (a time in ms)", request: api + "?from=1700000000000", successor: api + "?from=1700000001000", events: 100},
		{name: "another path", request: api + "?page=1", successor: "https://api.example.com/v1/other?page=2", events: 10},
		{name: "another host", request: api + "?page=1", successor: "https://other.example.com/v1/items?page=2", events: 10},
		{name: "a Link header without rel=next", request: api + "?page=1", successor: `<` + api + `?page=2>; rel="prev"`, events: 10},
		{name: "from the start: a value a walk from the start does not reach", request: "", successor: api + "?offset=500", events: 100},
		{name: "from the start: page 3 after a page of one event", request: "", successor: api + "?page=3", events: 1},
		{name: "from the start: an empty page", request: "", successor: api + "?offset=0", events: 0},
		{name: "from the start: no offset parameter", request: "", successor: api + "?after=100", events: 100},
		{name: "not a URL: an opaque token holding a question mark", request: "", successor: "tok?n=100", events: 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := OffsetShaped([]byte(tc.request), []byte(tc.successor), tc.events)
			require.Equal(t, tc.want.Param != "", ok, "%+v", got)
			if !ok {
				return
			}
			assert.Equal(t, tc.want, got)
			assert.Contains(t, got.String(), fmt.Sprintf("%q", tc.want.Param))
			// The description names the parameter, never a value.
			for _, v := range []string{"?", "api.example.com", "per_page", "101", "200", "300"} {
				assert.NotContains(t, got.String(), v)
			}
		})
	}
}

func TestOffsetShapedBoundsWhatItParses(t *testing.T) {
	long := "https://api.example.com/items?" + strings.Repeat("a", maxShapeBytes) + "=1&offset="
	_, ok := OffsetShaped([]byte(long+"100"), []byte(long+"200"), 100)
	assert.False(t, ok, "a cursor longer than maxShapeBytes is not read")
}

func TestMonitorOffsetShapedSuccessor(t *testing.T) {
	const (
		req  = "https://api.example.com/items?offset=100&limit=100"
		next = "https://api.example.com/items?offset=200&limit=100"
	)
	page := func() Response {
		var evs []Event
		for i := range 100 {
			evs = append(evs, ev(fmt.Sprintf("e%d", 101+i), int64(101+i)))
		}
		return resp(next, evs...)
	}
	for _, tc := range []struct {
		name       string
		pagination provider.Pagination
		request    string
		want       bool
	}{
		{name: "undeclared (token, the default) pagination", pagination: provider.PaginationToken, request: req, want: true},
		{name: "from the start cursor", pagination: provider.PaginationToken, request: "", want: false}, // 200 is not where a walk from the start stands after 100 events
		{name: "pagination offset declared", pagination: provider.PaginationOffset, request: req},
		{name: "pagination keyset declared: the parameter is a key", pagination: provider.PaginationKeyset, request: req},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := with(sparse, func(c *Contract) {
				c.Pagination = tc.pagination
				c.OffsetUnproven = tc.pagination == provider.PaginationOffset
			})
			got := Monitor(MonitorInput{Contract: c, Witness: build(t, c, tc.request, 4, "b1", page())})
			if !tc.want {
				assert.Empty(t, got)
				return
			}
			require.Len(t, got, 1)
			v := got[0]
			assert.Equal(t, OffsetShapedSuccessor, v.Kind)
			assert.Equal(t, part, v.Partition)
			assert.Contains(t, v.String(), `contract violation offset_shaped_successor: partition p1: generation 4 cursor sha256:`)
			assert.Contains(t, v.Evidence, `query parameter "offset", advanced by 100`)
			assert.Contains(t, v.Evidence, "declare pagination: offset")
			assert.Contains(t, v.Evidence, "docs/pagination.md")
			for _, clear := range []string{"api.example.com", "offset=", "limit"} {
				assert.NotContains(t, v.Evidence, clear, "cursors and their values appear only as hashes")
			}
		})
	}
}
