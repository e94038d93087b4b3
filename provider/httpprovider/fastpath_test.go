package httpprovider

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var oddStrings = []string{"", "plain", `q"uote`, `back\slash`, "<tag>&amp;", "tab\tnew\nline\r", "\x00\x01\x1f\x7f", "é ü 漢字 🎉", "\u2028\u2029", "bad\xffutf8", "\xed\xa0\x80", "a/b"}

func randomValue(r *rand.Rand, depth int) any {
	switch k := r.IntN(9); {
	case k == 0:
		return nil
	case k == 1:
		return r.IntN(2) == 0
	case k <= 3:
		return oddStrings[r.IntN(len(oddStrings))]
	case k == 4:
		return json.Number([]string{"0", "-1", "12.50", "1e10", "-0.0", "123456789012345678901234567890", "3.14E-2"}[r.IntN(7)])
	case k <= 6 && depth < 4:
		n := r.IntN(4)
		arr := make([]any, n)
		for i := range arr {
			arr[i] = randomValue(r, depth+1)
		}
		return arr
	case depth < 4:
		m := map[string]any{}
		for range r.IntN(5) {
			m[oddStrings[r.IntN(len(oddStrings))]+fmt.Sprint(r.IntN(3))] = randomValue(r, depth+1)
		}
		return m
	}
	return "leaf"
}

// The fast encoder writes exactly the bytes Benthos writes for the same
// structured value: payload digests depend on it.
func TestAppendJSONMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 20000 {
		v := randomValue(r, 0)
		got, ok := appendJSON(nil, v)
		require.True(t, ok)
		require.Equal(t, string(encodeLikeBenthos(v)), string(got), "value %d: %#v", i, v)
	}
	_, ok := appendJSON(nil, json.Number("not a number"))
	require.False(t, ok, "an invalid number literal is left to encoding/json (which refuses it)")
}

// The fast path, and the mappings run on the event's value alone, give
// exactly the events the Bloblang mappings run on the event's message give,
// for pages of odd events (numeric, boolean, missing and empty ids;
// numeric, string, fractional and missing positions; nested payloads;
// payloads of every JSON type), and fail where they fail.
func TestFastPathMatchesBloblang(t *testing.T) {
	config := func(extra string) string {
		return `
http:
  url: http://127.0.0.1:1/p
  events: root = this.items
  successor: root = this.next | deleted()
` + extra + `  contract:
    empty_page: no_evidence
    recovery: park
`
	}
	for _, tc := range []struct {
		extra string
		// plain: the id mapping takes the fast path; value: the payload
		// mapping reads nothing but the event (plain paths do not either).
		plain, value bool
	}{
		{"", true, true},
		{"  event_id: root = this.id\n  event_position: root = this.position\n", true, true},
		{"  event_id: root = this.meta.key.string()\n  event_position: root = this.meta.seq\n  event_payload: root = this.body\n  event_semantic: root = this.body\n", true, true},
		{"  event_position: root = this.position\n  coordinate: timestamp\n", true, true},
		{"  event_payload: root = this.position\n  event_semantic: root = this.id.string()\n", true, true},
		{"  event_payload: root = this.body.string()\n  event_semantic: root = this.meta\n", true, true},
		{"  event_payload: root = this.body.or(@status)\n  event_semantic: 'root = this.body.or(metadata(\"status\"))'\n", true, false},
		{"  event_id: root = this.id.string().uppercase()\n  event_position: root = this.position + 0\n  event_payload: root = this.without(\"body\")\n", false, true},
		{"  event_id: 'root = this.id.or(\"x\")'\n  event_payload: 'root = if this.id == \"a\" { \"A\" }'\n  event_semantic: root = this.body.not_null()\n", false, true},
		{"  event_position: root = this.position.number()\n  event_payload: root = this.body.type()\n  event_semantic: 'root = if this.id == 7 { deleted() } else { this.position }'\n", true, true},
	} {
		extra := tc.extra
		fast, err := tryParseProvider(config(extra), nil, nil)
		require.NoError(t, err)
		slow, err := tryParseProvider(config(extra), nil, nil)
		require.NoError(t, err)
		slow.fast = fastMappings{}
		require.Equal(t, tc.plain, fast.fast.id != nil, "the fast path is selected for %q", extra)
		require.Equal(t, tc.value, fast.fast.valuePayload, "the payload mapping runs on the value alone for %q", extra)

		r := rand.New(rand.NewPCG(3, 4))
		ids := []any{"a", "", 7, 12.5, nil, true, "x\"y"}
		positions := []any{1, 2, -3, "4", "2026-12-03T10:00:00Z", 1.5, "x", nil, 1e3, "1700000000"}
		for i := range 3000 {
			var items []string
			for range 1 + r.IntN(3) {
				ev := map[string]any{"body": randomValue(r, 1)}
				if id := ids[r.IntN(len(ids))]; id != nil {
					ev["id"] = id
					ev["meta"] = map[string]any{"key": id, "seq": positions[r.IntN(len(positions))]}
				}
				if p := positions[r.IntN(len(positions))]; p != nil {
					ev["position"] = p
				}
				b, err := json.Marshal(ev)
				require.NoError(t, err)
				items = append(items, string(b))
			}
			page := []byte(`{"items":[` + strings.Join(items, ",") + `],"next":"n"}`)
			rq := &builtRequest{partition: "p"}
			want, werr := slow.mapResponse(rq, &httpResult{status: 200, body: page})
			got, gerr := fast.mapResponse(rq, &httpResult{status: 200, body: page})
			require.Equal(t, werr == nil, gerr == nil, "page %d %s: slow %v, fast %v", i, page, werr, gerr)
			if werr == nil {
				require.Equal(t, want, got, "page %d: %s", i, page)
			}
		}
	}
}
