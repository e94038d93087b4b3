//go:build unix

package e2e

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	// The components the binary has (cmd/connect): the example's
	// mappings, rate limit and output must lint as they do there.
	_ "github.com/redpanda-data/benthos/v4/public/components/io"
	_ "github.com/redpanda-data/benthos/v4/public/components/pure"
	_ "github.com/redpanda-data/benthos/v4/public/components/pure/extended"

	"github.com/tidemark/tidemark/internal/fakeapi"
	"github.com/tidemark/tidemark/internal/probe/live"
	"github.com/tidemark/tidemark/provider"
)

// TestExampleOktaSystemLogRestartsAMarginBeforeTheAppliedTime builds the
// provider of okta_system_log.yaml with the input's own code (as the probe
// does) against the Okta fake. The org's first event is published two
// minutes ahead of its persistence time; it is the durable applied
// position. Three events are persisted after it, published before it.
// Okta filters a polling request's `since` by the persistence time, which
// it does not expose and whose relation to `published` it does not
// document, so a restart at `since=<applied>` would not list those three;
// the example restarts OKTA_RESTART_MARGIN (default 10 minutes) before the
// applied time, and following the restart cursor to the head reads all of
// them again (the durable event too: a duplicate, deduplicated downstream
// by tidemark_event_id).
func TestExampleOktaSystemLogRestartsAMarginBeforeTheAppliedTime(t *testing.T) {
	o := fakeapi.NewOkta(t, "00okta-token")
	ahead := o.AppendPublishedAhead(1, 2*time.Minute)
	t.Setenv("OKTA_ORG_URL", o.URL())
	t.Setenv("OKTA_API_TOKEN", "00okta-token")
	t.Setenv("OKTA_PAGE_SIZE", "2")
	t.Setenv("OKTA_REQUESTS_PER_MINUTE", "100000")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tg, err := live.Load(examplePath(t, "okta_system_log"), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close(ctx)
	partition := o.URL()

	first, err := tg.Provider.Fetch(ctx, provider.Request{Scope: tg.Scope, Partition: partition})
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Events) != 1 || first.Events[0].ID != ahead[0] {
		t.Fatalf("the first page has %d events; want the one published ahead", len(first.Events))
	}
	between := o.Append(3)

	cursor, err := tg.Provider.RestartCursor(ctx, provider.Boundary{
		Partition: partition, Applied: first.Events[0].Position, HasApplied: true, AppliedID: ahead[0], Expired: false,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(cursor) == 0 {
		t.Fatal("no restart cursor for an applied position")
	}
	seen := map[string]int{}
	for range 10 {
		r, err := tg.Provider.Fetch(ctx, provider.Request{Scope: tg.Scope, Partition: partition, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range r.Events {
			seen[e.ID]++
		}
		if len(r.Successor) == 0 || bytes.Equal(r.Successor, cursor) {
			break // the head
		}
		cursor = r.Successor
	}
	for _, id := range between {
		if seen[id] == 0 {
			t.Errorf("event %s, persisted after the applied one, was not read from the restart cursor: a restart would skip it", id)
		}
	}
	t.Logf("read from the restart cursor to the head: %d events (%d of them persisted after the applied one)", len(seen), len(between))
}
