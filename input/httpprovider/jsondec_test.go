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
