package httpprovider

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// mutate damages or decorates a JSON text: whitespace, escapes spelled out,
// bytes cut, replaced or added.
func mutate(r *rand.Rand, s string) string {
	switch r.IntN(8) {
	case 0:
		return s
	case 1: // whitespace around the separators
		return strings.NewReplacer(",", " ,\n", ":", "\t: ", "[", "[ ", "}", "\r}").Replace(s)
	case 2: // escapes spelled differently
		return strings.NewReplacer(`a`, `\u0061`, `/`, `\/`, `é`, `\u00e9`, `b`, `\ud83c\udf89`).Replace(s)
	case 3: // cut
		if len(s) > 1 {
			return s[:r.IntN(len(s))]
		}
	case 4: // one byte replaced
		if len(s) > 0 {
			b := []byte(s)
			b[r.IntN(len(b))] = `{}[]",:0-e.\ ntfx`[r.IntN(17)]
			return string(b)
		}
	case 5: // trailing data
		return s + []string{" ", "\n", " 1", "{}", "x", ` "a"`}[r.IntN(6)]
	case 6: // odd bytes inside strings
		return strings.Replace(s, `"`, []string{"\"\xff", "\"\x01", "\"\\", "\"\\x", "\"\\ud800", "\"\\ud800\\u0041", "\"\u2028"}[r.IntN(7)], 1)
	case 7: // repeated keys
		return strings.Replace(s, `{"`, `{"k":1,"k":2,"`, 1)
	}
	return s
}

// Whatever the body, the fast decoder either gives exactly what
// decodeJSON (encoding/json with UseNumber) gives, or declines and
// decodeJSON runs: it never accepts a body encoding/json refuses, and never
// decodes one differently.
func TestPageDecoderMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	var d pageDecoder
	accepted := 0
	cases := []string{
		``, ` `, `null`, `true`, `false`, `0`, `-0`, `01`, `1.`, `1.5e`, `1e+`, `-`, `1E-7`, `[]`, `{}`, `[1,]`, `{"a":1,}`,
		`{"a" 1}`, `{1:2}`, `"\u00"`, `"\uD83D\uDE00"`, `"\uDE00"`, `"x` + "\x7f" + `"`, ` [1, 2 ,3 ] `, "\ufeff{}",
		strings.Repeat("[", 2000) + strings.Repeat("]", 2000), `{"a":{"b":[{"c":null}]}}`, `"tab	inside"`,
	}
	for range 20000 {
		b, err := json.Marshal(randomValue(r, 0))
		require.NoError(t, err)
		cases = append(cases, mutate(r, string(b)))
	}
	for i, c := range cases {
		want, werr := decodeJSON([]byte(c))
		got, ok := d.decode([]byte(c))
		if !ok {
			continue
		}
		accepted++
		require.NoError(t, werr, "case %d: the fast decoder accepted %q, encoding/json refuses it", i, c)
		require.Equal(t, want, got, "case %d: %q", i, c)
	}
	require.Greater(t, accepted, len(cases)/2, "the fast decoder takes most valid bodies")
}

// BenchmarkDecodePage compares the fast decoder with encoding/json on the
// 100-event page of BenchmarkMapPage.
func BenchmarkDecodePage(b *testing.B) {
	page := benchPage(100)
	b.Run("fast", func(b *testing.B) {
		var d pageDecoder
		b.ReportAllocs()
		b.SetBytes(int64(len(page)))
		for b.Loop() {
			if _, ok := d.decode(page); !ok {
				b.Fatal("declined")
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(page)))
		for b.Loop() {
			if _, err := decodeJSON(page); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// The payloads the decoder encodes while parsing are exactly appendJSON's
// encoding of the events it decoded, wherever the events array is (the
// document itself, a field, a nested field), whatever the events are, with
// whitespace, escapes and repeated keys; an array at the path that a
// repeated key overrides is not taken for the events.
func TestPageDecoderEncodesEvents(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	var d pageDecoder
	checked := 0
	for i := range 5000 {
		var events []string
		for range r.IntN(5) {
			b, err := json.Marshal(randomValue(r, 0))
			require.NoError(t, err)
			events = append(events, mutate(r, string(b)))
		}
		arr := "[" + strings.Join(events, " , ") + "]"
		var body string
		var want []string
		switch i % 4 {
		case 0:
			body = arr
		case 1:
			body, want = `{"next":"n","items":`+arr+`}`, []string{"items"}
		case 2:
			body, want = `{"data":{"x":1,"items":`+arr+`},"n":2}`, []string{"data", "items"}
		case 3: // a repeated key: the second array wins
			body, want = `{"items":[1,2],"items":`+arr+`}`, []string{"items"}
		}
		doc, ok := d.decodeEvents([]byte(body), true, want)
		if !ok {
			continue
		}
		got, _ := (&plainPath{path: want}).lookup(doc)
		evs, isArr := got.([]any)
		require.True(t, isArr, "body %q", body)
		payloads, found := d.payloads(evs)
		if len(evs) == 0 {
			require.False(t, found)
			continue
		}
		require.True(t, found, "body %q", body)
		for j, e := range evs {
			enc, ok := appendJSON(nil, e)
			require.True(t, ok)
			require.Equal(t, string(enc), string(payloads[j]), "body %q, event %d", body, j)
			require.Equal(t, len(payloads[j]), cap(payloads[j]), "each payload is cut to its length")
		}
		checked++
	}
	require.Greater(t, checked, 1000)

	doc, ok := d.decodeEvents([]byte(`{"a":{"items":[{"x":1}]},"a":{"items":"no"}}`), true, []string{"a", "items"})
	require.True(t, ok)
	_, found := d.payloads([]any{doc})
	require.False(t, found, "an array the document no longer holds is not the events array")
}

// Events of every JSON type (strings are their own bytes, not their JSON
// encoding) map alike with the payloads encoded while parsing and with the
// mappings run on the message.
func TestPrePayloadsMatchBloblang(t *testing.T) {
	cfg := `
http:
  url: http://127.0.0.1:1/p
  events: root = this.items
  event_id: root = "x"
  event_position: root = 1
  successor: root = deleted()
  contract:
    empty_page: no_evidence
    recovery: park
`
	fast, err := tryParseProvider(cfg, nil, nil)
	require.NoError(t, err)
	slow, err := tryParseProvider(cfg, nil, nil)
	require.NoError(t, err)
	slow.fast = fastMappings{}
	r := rand.New(rand.NewPCG(9, 10))
	for i := range 2000 {
		var items []string
		for range 1 + r.IntN(4) {
			b, err := json.Marshal(randomValue(r, 0))
			require.NoError(t, err)
			items = append(items, string(b))
		}
		page := []byte(`{"items":[` + strings.Join(items, ",") + `]}`)
		rq := &builtRequest{partition: "p"}
		want, werr := slow.mapResponse(rq, &httpResult{status: 200, body: page})
		got, gerr := fast.mapResponse(rq, &httpResult{status: 200, body: page})
		require.Equal(t, werr == nil, gerr == nil, "page %d %s: slow %v, fast %v", i, page, werr, gerr)
		require.Equal(t, want, got, "page %d: %s", i, page)
	}
}

// A string value of an event is written as its own body bytes only when
// those are its encoding (no escapes, ASCII only); every other string is
// re-encoded: the payload equals appendJSON's encoding of the event for
// each kind of string, and of key.
func TestPageDecoderEncodesStringsOfEveryKind(t *testing.T) {
	for _, c := range []struct{ name, s string }{
		{"plain ASCII", `"user.session.start"`},
		{"empty", `""`},
		{"HTML characters (not escaped)", `"<a href='x'>&amp;</a>"`},
		{"DEL", "\"a\x7fb\""},
		{"slash", `"a/b"`},
		{"escaped slash", `"a\/b"`},
		{"escaped quote and backslash", `"say \"hi\" \\ bye"`},
		{"escaped control characters", `"tab\there\nnew line\u0001"`},
		{"escaped letter", `"\u0061bc"`},
		{"non-ASCII", `"café ünïcødé 🎉"`},
		{"line separator raw", "\"a\u2028b\u2029c\""},
		{"line separator escaped", `"a\u2028b"`},
		{"surrogate pair escaped", `"\ud83c\udf89"`},
		{"long ASCII (not interned)", `"` + strings.Repeat("x", 100) + `"`},
		{"long non-ASCII", `"` + strings.Repeat("é", 40) + `"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var d pageDecoder
			body := `{"items":[{"v":` + c.s + `,` + c.s + `:1,"n":{"w":[` + c.s + `]}}]}`
			doc, ok := d.decodeEvents([]byte(body), true, []string{"items"})
			require.True(t, ok, "the fast decoder takes %s", body)
			evs, _ := (&plainPath{path: []string{"items"}}).lookup(doc)
			payloads, found := d.payloads(evs.([]any))
			require.True(t, found)
			want, ok := appendJSON(nil, evs.([]any)[0])
			require.True(t, ok)
			require.Equal(t, string(want), string(payloads[0]))
			var std any
			require.NoError(t, json.Unmarshal([]byte(body), &std))
			require.Equal(t, std.(map[string]any)["items"].([]any)[0].(map[string]any)["v"], evs.([]any)[0].(map[string]any)["v"], "the value is the string encoding/json decodes")
		})
	}
}

// FuzzPageDecoderMatchesGeneralPath feeds arbitrary bodies to the fast
// decoder with an events path: when it takes a body, its value is what
// decodeJSON (encoding/json) gives and each event's payload is appendJSON's
// encoding of the event; when it declines, decodeJSON decides. `go test`
// runs the seeds; `go test -fuzz FuzzPageDecoderMatchesGeneralPath ./provider/httpprovider/`
// explores.
func FuzzPageDecoderMatchesGeneralPath(f *testing.F) {
	for _, seed := range []string{
		`{"items":[{"id":"evt-1","position":1,"actor":{"id":"u-1","type":"User","detail":null},"target":[{"id":"a","detailEntry":{"m":"SAML_2_0"}}],"tags":["a","b"],"ok":true,"score":1.5}],"next":"2"}`,
		`{"items":[{"s":"<a href='x'>&amp;</a>","d":"a` + "\x7f" + `b","u":"café 🎉","l":"a` + "\u2028" + `b"}]}`,
		`{"items":[{"e":"say \"hi\" \\ \/ \u0061 \ud83c\udf89","t":"tab\there"}]}`,
		`{"items":[{"k":1,"k":2,"b":{"z":1,"a":2}}]}`,
		`{"items":[{"x":"` + strings.Repeat("y", 40) + `"}]}`,
		`{"items":[]}`, `{"items":[1,"a",null,[],{}]}`, `{"items":"no"}`, `[`, `{"items":[{"a":"\xff"}]}`, `{"items":[{"a":"` + "\x01" + `"}]}`,
	} {
		f.Add([]byte(seed))
	}
	want := []string{"items"}
	f.Fuzz(func(t *testing.T, body []byte) {
		var d pageDecoder
		doc, ok := d.decodeEvents(body, true, want)
		if !ok {
			return
		}
		std, err := decodeJSON(body)
		if err != nil {
			t.Fatalf("the fast decoder took %q, encoding/json refuses it: %v", body, err)
		}
		require.Equal(t, std, doc, "body %q", body)
		got, _ := (&plainPath{path: want}).lookup(doc)
		evs, isArr := got.([]any)
		if !isArr || len(evs) == 0 {
			return
		}
		payloads, found := d.payloads(evs)
		require.True(t, found, "body %q", body)
		for j, e := range evs {
			enc, ok := appendJSON(nil, e)
			require.True(t, ok)
			require.Equal(t, string(enc), string(payloads[j]), "body %q, event %d", body, j)
		}
	})
}
