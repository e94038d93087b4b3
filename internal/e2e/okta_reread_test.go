//go:build unix

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/dynalitetest"
	"github.com/tidemark/tidemark/internal/dynamostore"
	"github.com/tidemark/tidemark/internal/e2etest"
	"github.com/tidemark/tidemark/internal/fakeapi"
	"github.com/tidemark/tidemark/internal/store"
)

// TestExampleOktaSystemLogRereadsItsWindowWithReceipts runs
// okta_system_log.yaml against the Okta fake with a re-read pass at every
// head (OKTA_REREAD_INTERVAL=0s). Each pass restarts with `since` at its
// window's start less the restart margin, so it lists again events the
// org already delivered (the first pass, from the lookback, all of them):
// their durable receipts keep them from being emitted again. Events
// logged between passes are delivered once; every event exactly once;
// the checkpoint records the passes and claims no watermark.
func TestExampleOktaSystemLogRereadsItsWindowWithReceipts(t *testing.T) {
	o := fakeapi.NewOkta(t, "00okta-token")
	want := o.Append(12)
	tb := dynalitetest.NewTable(t)
	out := filepath.Join(t.TempDir(), "events.jsonl")
	env := e2etest.Env("OKTA_ORG_URL="+o.URL(), "OKTA_API_TOKEN=00okta-token", "OKTA_PAGE_SIZE=5",
		"OKTA_POLL_INTERVAL=50ms", "OKTA_REQUESTS_PER_MINUTE=100000", "OKTA_REREAD_INTERVAL=0s",
		"TIDEMARK_TABLE="+tb.Name, "TIDEMARK_CREATE_TABLE=true", "TIDEMARK_DYNAMODB_ENDPOINT="+tb.Endpoint)
	run := runExample(t, "okta", "okta_system_log", env, out)
	delivered := func() map[string]int {
		got, _ := readIDs(t, out, stringField("id"))
		return got
	}
	for round := 0; round < 3; round++ {
		e2etest.WaitFor(t, e2etest.Patience, "every event delivered", func() (bool, string) {
			got := delivered()
			return len(missing(got, want)) == 0, fmt.Sprintf("%d of %d delivered", len(got), len(want))
		}, run.Running)
		// Two more passes (each begins with a `since` request) over what
		// is delivered, then more events.
		passes := o.Served(fakeapi.OktaSince)
		e2etest.WaitUntil(t, e2etest.Patience, "two more re-read passes", func() bool {
			return o.Served(fakeapi.OktaSince) >= passes+2
		}, run.Running)
		want = append(want, o.Append(4)...)
	}
	e2etest.WaitFor(t, e2etest.Patience, "every event delivered", func() (bool, string) {
		got := delivered()
		return len(missing(got, want)) == 0, fmt.Sprintf("%d of %d delivered", len(got), len(want))
	}, run.Running)
	run.Stop(e2etest.Patience)

	got := delivered()
	for _, id := range want {
		assert.Equal(t, 1, got[id], "event %s delivered once", id)
	}
	assert.Len(t, got, len(want))
	st, err := dynamostore.NewDynamoStore(context.Background(), dynamostore.DynamoConfig{Table: tb.Name, Endpoint: tb.Endpoint})
	require.NoError(t, err)
	cp, err := st.LoadCheckpoint(context.Background(), store.Key{Scope: "okta-system-log", Partition: o.URL()})
	require.NoError(t, err)
	assert.True(t, cp.Reread.Started(), "the checkpoint records the passes")
	assert.True(t, cp.Watermark.IsZero(), "no watermark: %s", cp.Watermark)
	assert.Empty(t, cp.Parked)
	t.Logf("%d events, each delivered once, over %d since requests (passes and the first request)", len(want), o.Served(fakeapi.OktaSince))
}
