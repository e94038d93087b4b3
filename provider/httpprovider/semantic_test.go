package httpprovider

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/provider"
)

// A constant event_semantic (payload changes do not matter to the source's
// contract) gives every event of a page the same digest, whatever its
// payload, so the DynamoDB store writes the page's digest once (8 bytes an
// event, docs/design.md "Write units per page"); an empty constant too.
func TestConstantEventSemanticSharesOneDigest(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"items":[{"id":"a","position":1,"v":"x"},{"id":"b","position":2,"v":"y"},{"id":"c","position":3,"v":{"z":[1]}}],"next":"n"}`)
	}))
	defer srv.Close()
	for _, semantic := range []string{`root = ""`, `root = "constant"`} {
		t.Run(semantic, func(t *testing.T) {
			p := parseProvider(t, fmt.Sprintf(`
http:
  url: %s
  events: root = this.items
  event_semantic: '%s'
  successor: root = this.next
  contract:
    empty_page: no_evidence
    positions: dense
    finality: source
`, srv.URL, semantic), nil, nil)
			resp, err := p.Fetch(context.Background(), provider.Request{Scope: "sc", Partition: "p1", Cursor: []byte("c")})
			require.NoError(t, err)
			require.Len(t, resp.Events, 3)
			events := reconcile.FromProvider(resp).Events
			digest := reconcile.EventOf(events[0]).Digest
			for i, e := range events {
				require.NotNil(t, resp.Events[i].Semantic, "a constant projection is a projection, not the payload")
				require.Equal(t, digest, reconcile.EventOf(e).Digest)
			}
			require.NotEqual(t, reconcile.HashPayload(resp.Events[0].Payload), digest)
		})
	}
}
