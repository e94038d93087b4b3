package httpprovider

import (
	"fmt"
	"strings"
	"testing"
)

// benchPage is a JSON page of n events shaped like an audit log entry.
func benchPage(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"items":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":"evt-%07d","position":%d,"actor":{"id":"u-%d","type":"User","name":"Some <Body> & co"},"action":"user.session.start","outcome":{"result":"SUCCESS"},"published":"2026-12-03T10:00:%02d.123Z","tags":["a","b"],"score":%d.5}`, i, 1000+i, i%17, i%60, i)
	}
	b.WriteString(`],"next":"tok-2"}`)
	return []byte(b.String())
}

// BenchmarkMapPage measures the CPU the provider spends mapping one
// 100-event JSON page (parse, events, id, position, payload, successor):
// plain field paths, the defaults, and general Bloblang mappings.
func BenchmarkMapPage(b *testing.B) {
	for _, tc := range []struct{ name, extra string }{
		{"plain-paths", "  event_id: root = this.id\n  event_position: root = this.position\n"},
		{"defaults", ""},
		{"bloblang", "  event_id: 'root = this.id.string().uppercase()'\n  event_position: root = this.position + 0\n  event_payload: root = this.without(\"tags\")\n"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			p, err := tryParseProvider(`
http:
  url: http://127.0.0.1:1/p
  events: root = this.items
  successor: root = this.next
`+tc.extra+`  contract:
    empty_page: no_evidence
    recovery: park
`, nil, nil)
			if err != nil {
				b.Fatal(err)
			}
			page := benchPage(100)
			rq := &builtRequest{partition: "p"}
			b.ReportAllocs()
			b.SetBytes(int64(len(page)))
			for b.Loop() {
				resp, err := p.mapResponse(rq, &httpResult{status: 200, body: page})
				if err != nil || len(resp.Events) != 100 {
					b.Fatal(err)
				}
			}
		})
	}
}
