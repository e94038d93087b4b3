package httpprovider

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/tidemark/tidemark/provider/providertest"
)

// contractFake is a paginated JSON API on 127.0.0.1: partition p holds
// events p-1..p-n at dense positions 1..n, pages of pageSize after the
// cursor `after` (the last position read), each certifying the partition
// complete through its last position; at the end an empty page certifies
// it through n. A fault armed for a partition answers its next request.
type contractFake struct {
	n, pageSize int
	mu          sync.Mutex
	armed       map[string]providertest.Fault
}

func (f *contractFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	part := strings.TrimPrefix(r.URL.Path, "/parts/")
	f.mu.Lock()
	fault := f.armed[part]
	delete(f.armed, part)
	f.mu.Unlock()
	if providertest.WriteHTTPFault(w, fault, `{"items":[{"id":"x","posi`) {
		return
	}
	after, _ := strconv.Atoi(r.URL.Query().Get("after"))
	end := min(after+f.pageSize, f.n)
	var items []string
	for pos := after + 1; pos <= end; pos++ {
		items = append(items, fmt.Sprintf(`{"id":"%s-%d","position":%d,"v":"payload %d"}`, part, pos, pos, pos))
	}
	fmt.Fprintf(w, `{"items":[%s],"next":"%d","through":%d}`, strings.Join(items, ","), end, end)
}

// TestProviderContract runs the provider contract suite against the http
// provider with a representative config (JSON pages, a successor token, a
// certified watermark, dense positions, restarts from the watermark) over contractFake.
func TestProviderContract(t *testing.T) {
	providertest.Run(t, func(t *testing.T) providertest.Fixture {
		fake := &contractFake{n: 10, pageSize: 4, armed: map[string]providertest.Fault{}}
		srv := httptest.NewServer(fake)
		t.Cleanup(srv.Close)
		p, err := tryParseProvider(`
http:
  url: '`+srv.URL+`/parts/${! @partition }?after=${! @cursor.escape_url_query() }'
  events: root = this.items
  successor: root = this.next
  complete_through: root = this.through
  max_retries: 0
  contract:
    empty_page: final_through_watermark
    positions: dense
    finality: source
    watermark_covers_positions: true
    recovery: restart_from_boundary
    restart_cursor: ${! @watermark }
`, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		events := map[string][]string{}
		for _, part := range []string{"a", "b"} {
			for pos := 1; pos <= fake.n; pos++ {
				events[part] = append(events[part], fmt.Sprintf("%s-%d", part, pos))
			}
		}
		return providertest.Fixture{
			Provider: p, Partitions: []string{"a", "b"}, Events: events, Replayable: true,
			Inject: func(part string, f providertest.Fault) bool {
				fake.mu.Lock()
				defer fake.mu.Unlock()
				fake.armed[part] = f
				return true
			},
		}
	})
}
