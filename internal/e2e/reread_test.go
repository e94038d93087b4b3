//go:build unix

package e2e

// The keyset worked config with a re-read window
// (config/pagination/keyset_reread.yaml) against the Offset fake, whose
// ids a test can assign out of order: a row inserted below the reader's
// progress, within the window, is delivered by the next pass, once; the
// rows a durable receipt shows delivered are not emitted again.

import (
	"context"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/dynalitetest"
	"github.com/tidemark/tidemark/internal/e2etest"
	"github.com/tidemark/tidemark/internal/fakeapi"
	"github.com/tidemark/tidemark/internal/store"
)

// startRereadRun runs keyset_reread.yaml against fake with a window of
// window ids, a pass at every head (reread_interval 0s) and recovery.
func startRereadRun(t *testing.T, fake *fakeapi.Offset, window int, recovery, finality string, mutate func(r *http.Request)) *offsetRun {
	t.Helper()
	fake.OnRequest(func(r *http.Request) {
		if matchesKind(r, fakeapi.OffsetByKeyset) {
			mutate(r)
		}
	})
	run := &offsetRun{fake: fake, table: dynalitetest.NewTable(t), scope: "items-reread-" + recovery + "-" + finality, out: filepath.Join(t.TempDir(), "out.jsonl")}
	env := e2etest.Env(
		"ITEMS_API_URL="+fake.URL(), "ITEMS_PAGE_SIZE="+strconv.Itoa(offsetPageSize), "ITEMS_SCOPE="+run.scope,
		"ITEMS_POLL_INTERVAL=50ms", "ITEMS_OUTPUT="+run.out,
		"ITEMS_REREAD_WINDOW="+strconv.Itoa(window), "ITEMS_REREAD_INTERVAL=0s", "ITEMS_RECOVERY="+recovery, "ITEMS_FINALITY="+finality,
		"TIDEMARK_TABLE="+run.table.Name, "TIDEMARK_CREATE_TABLE=true", "TIDEMARK_DYNAMODB_ENDPOINT="+run.table.Endpoint,
	)
	cmd := exec.Command(e2etest.Connect(t), "run", "--log.level", "info", "--set", "http.enabled=false", paginationConfig(t, "keyset_reread"))
	cmd.Env = env
	run.proc = e2etest.Start(t, "keyset_reread", cmd)
	return run
}

// Ids 10..1000 are read, and read again by the first pass (from the
// start: nothing bounds what appeared behind the first walk); when the
// second pass begins, rows are inserted below the progress: 975 within the
// window of 100 ids behind the boundary 1000, and (finality none only) 15,
// far below it. The next pass delivers 975, once; 15 is not read (the
// window says how far back a row may appear); every row is delivered
// exactly once. The checkpoint records the pass, and receipts at or below
// the window's start are pruned. Under finality none no watermark is
// claimed; under finality lag the watermark is the previous pass's
// boundary less the window (1000 - 100), named "reread lag 100".
func TestKeysetRereadWindowDeliversARowInsertedBelowTheProgressWithinTheWindow(t *testing.T) {
	for _, tc := range []struct{ recovery, finality string }{
		{"restart_from_boundary", "none"},
		{"fresh_snapshot", "none"},
		{"restart_from_boundary", "lag"},
	} {
		t.Run(tc.recovery+"/"+tc.finality, func(t *testing.T) {
			fake := fakeapi.NewOffset(t, 10)
			original := fake.Append(offsetRows)
			var once sync.Once
			var mu sync.Mutex
			at900 := 0
			headed := make(chan struct{})
			run := startRereadRun(t, fake, 100, tc.recovery, tc.finality, func(r *http.Request) {
				// The third request after 900: the walk's last page, the
				// first pass's (from the start), then the second pass's
				// first request: the rows appear now, below the progress.
				mu.Lock()
				defer mu.Unlock()
				if r.URL.Query().Get("after_id") == "900" {
					at900++
				}
				if at900 == 3 {
					once.Do(func() {
						fake.Insert(975)
						if tc.finality == "none" {
							fake.Insert(15) // beyond the window: breaks a declared bound
						}
						close(headed)
					})
				}
			})
			run.waitDelivered(t, append(original, 975))
			<-headed
			polls := fake.Served(fakeapi.OffsetByKeyset)
			e2etest.WaitUntil(t, e2etest.Patience, "several passes after the insert", func() bool {
				return fake.Served(fakeapi.OffsetByKeyset) >= polls+12
			}, run.proc.Running)
			run.proc.Stop(e2etest.Patience)
			seen := run.delivered(t)
			for _, id := range append(original, 975) {
				assert.Equal(t, 1, seen[id], "row %d delivered once", id)
			}
			assert.Zero(t, seen[15], "15 appeared further below the boundary than the window")
			cp := run.checkpoint(t)
			assert.True(t, cp.Reread.Started(), "the checkpoint records the pass: %+v", cp.Reread)
			assert.Equal(t, coord.IntPosition(1000), cp.Reread.Mark)
			if assert.True(t, cp.Reread.HasFrom) {
				assert.Equal(t, coord.IntPosition(900), cp.Reread.From)
			}
			assert.Empty(t, cp.Parked)
			rs, err := run.store(t).Receipts(context.Background(), store.Key{Scope: run.scope, Partition: "items"}, coord.Position{}, false)
			require.NoError(t, err)
			for _, r := range rs {
				assert.False(t, r.Position.Less(coord.IntPosition(900)), "receipt at %s below the window's start was pruned", r.Position)
			}
			assert.NotEmpty(t, rs, "the window's receipts are kept")
			if tc.finality == "none" {
				assert.True(t, cp.Watermark.IsZero(), "finality none claims nothing: %s", cp.Watermark)
				run.requireNoScalarFrontier(t)
			} else {
				assert.Equal(t, coord.Integer(900), cp.Watermark, "the previous pass's boundary less the window")
				assert.Equal(t, "reread lag 100", cp.Finality.String())
			}
			log := run.proc.Out.String()
			assert.Contains(t, log, "starts a re-read pass")
		})
	}
}
