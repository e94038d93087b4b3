package linkheader

import (
	"strings"
	"testing"

	"github.com/redpanda-data/benthos/v4/public/bloblang"
	// parse_form_url_encoded, as in the binary.
	_ "github.com/redpanda-data/benthos/v4/public/components/pure"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		want        map[string]string // ByRel
		links       int
	}{
		{"empty", "", map[string]string{}, 0},
		{"GitHub", `<https://api.github.com/repositories/1/issues?page=2>; rel="next", <https://api.github.com/repositories/1/issues?page=5>; rel="last"`,
			map[string]string{"next": "https://api.github.com/repositories/1/issues?page=2", "last": "https://api.github.com/repositories/1/issues?page=5"}, 2},
		{"Okta, two headers joined", `<https://x.okta.com/api/v1/logs?limit=2>; rel="self", <https://x.okta.com/api/v1/logs?limit=2&after=abc>; rel="next"`,
			map[string]string{"self": "https://x.okta.com/api/v1/logs?limit=2", "next": "https://x.okta.com/api/v1/logs?limit=2&after=abc"}, 2},
		{"token rel, no quotes, odd spacing", `<?cursor=b>;rel=next ,<?cursor=a> ; rel = prev`, map[string]string{"next": "?cursor=b", "prev": "?cursor=a"}, 2},
		{"several rels, case-insensitive", `<https://h/p?after=9>; REL="Next Last"`, map[string]string{"next": "https://h/p?after=9", "last": "https://h/p?after=9"}, 1},
		{"commas and semicolons in the target and in quotes", `<https://h/p?ids=1,2;3>; title="a, b; c"; rel="next", <https://h/q>; rel="prev"`,
			map[string]string{"next": "https://h/p?ids=1,2;3", "prev": "https://h/q"}, 2},
		{"escaped quote", `<https://h/1>; title="say \"hi\", then"; rel="next"`, map[string]string{"next": "https://h/1"}, 1},
		{"the first link of a rel wins", `<https://h/1>; rel="next", <https://h/2>; rel="next"`, map[string]string{"next": "https://h/1"}, 2},
		{"the first rel parameter of a link wins", `<https://h/1>; rel="next"; rel="prev"`, map[string]string{"next": "https://h/1"}, 1},
		{"no rel", `<https://h/1>; title="x"`, map[string]string{}, 1},
		{"rel next in another parameter is no relation", `<https://h/1>; title="rel=\"next\""; rel="prev"`, map[string]string{"prev": "https://h/1"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			links, err := Parse(tc.value)
			require.NoError(t, err)
			assert.Len(t, links, tc.links)
			assert.Equal(t, tc.want, ByRel(links))
		})
	}
	links, err := Parse(`<https://h/p?ids=1,2;3>; title="a, b; c"; rel="next"; hreflang=en`)
	require.NoError(t, err)
	assert.Equal(t, []Link{{Target: "https://h/p?ids=1,2;3", Rels: []string{"next"}, Params: map[string]string{"title": "a, b; c", "hreflang": "en"}}}, links)
}

func TestParseRefusesWhatIsNoLinkHeader(t *testing.T) {
	for _, v := range []string{
		`https://h/1; rel="next"`,
		`<https://h/1; rel="next"`,
		`<https://h/1>; title="unterminated`,
		`<https://h/1> rel="next"`,
		`<https://h/1>; ="next"`,
		strings.Repeat("<h>, ", MaxLinks+1),
	} {
		_, err := Parse(v)
		assert.Error(t, err, "%q", v)
	}
}

// The Bloblang function, as the examples use it.
func TestBloblangFunction(t *testing.T) {
	exe, err := bloblang.Parse(`root.next = tidemark_parse_link_header(this.link).next
root.page = tidemark_parse_link_header(this.link).next.parse_url().raw_query.parse_form_url_encoded().page | null
root.has_more = tidemark_parse_link_header(this.link).next != null`)
	require.NoError(t, err)
	for _, tc := range []struct {
		in   any
		want map[string]any
	}{
		{map[string]any{"link": `<https://api/items?page=3&per_page=10>; rel="next", <https://api/items?page=9>; rel="last"`},
			map[string]any{"next": "https://api/items?page=3&per_page=10", "page": "3", "has_more": true}},
		{map[string]any{"link": `<https://api/items?page=9>; rel="last"`}, map[string]any{"next": nil, "page": nil, "has_more": false}},
		{map[string]any{"link": nil}, map[string]any{"next": nil, "page": nil, "has_more": false}},
	} {
		got, err := exe.Query(tc.in)
		require.NoError(t, err)
		assert.Equal(t, tc.want, got)
	}
	_, err = exe.Query(map[string]any{"link": "not a link header"})
	assert.ErrorContains(t, err, "link header")
	_, err = exe.Query(map[string]any{"link": 7})
	assert.ErrorContains(t, err, "expected a string")
}
