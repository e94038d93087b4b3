//go:build unix

package e2e

// Each configuration docs/pagination.md shows for a source paged by
// offset, page number or keyset (config/pagination/*.yaml) runs with the
// built binary against the Offset fake of internal/fakeapi while a row on
// a page already read is deleted, and later another is inserted on a page
// already read. Nothing may be skipped silently: every row is delivered,
// or the run says that it cannot prove completeness and never publishes a
// scalar frontier or marks the partition complete.

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/dynalitetest"
	"github.com/tidemark/tidemark/internal/dynamostore"
	"github.com/tidemark/tidemark/internal/e2etest"
	"github.com/tidemark/tidemark/internal/fakeapi"
	"github.com/tidemark/tidemark/internal/store"
)

// offsetRows and offsetPageSize: ten pages.
const (
	offsetRows     = 100
	offsetPageSize = 10
)

func paginationConfig(t *testing.T, name string) string {
	return filepath.Join(e2etest.ModuleRoot(t), "config", "pagination", name+".yaml")
}

// offsetRun is one run of a pagination config against an Offset fake.
type offsetRun struct {
	fake  *fakeapi.Offset
	table dynalitetest.Table
	scope string
	out   string
	proc  *e2etest.Proc
}

// startOffsetRun starts config against fake (scope "items-<config>").
// mutate is called with the number of each request of kind that arrives
// (1, 2, ...), before it is answered.
func startOffsetRun(t *testing.T, config string, fake *fakeapi.Offset, kind string, mutate func(n int)) *offsetRun {
	t.Helper()
	var mu sync.Mutex
	n := 0
	fake.OnRequest(func(r *http.Request) {
		if !matchesKind(r, kind) {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		n++
		mutate(n)
	})
	run := &offsetRun{fake: fake, table: dynalitetest.NewTable(t), scope: "items-" + config, out: filepath.Join(t.TempDir(), "out.jsonl")}
	env := e2etest.Env(
		"ITEMS_API_URL="+fake.URL(), "ITEMS_PAGE_SIZE="+strconv.Itoa(offsetPageSize), "ITEMS_SCOPE="+run.scope,
		"ITEMS_POLL_INTERVAL=50ms", "ITEMS_OUTPUT="+run.out,
		"TIDEMARK_TABLE="+run.table.Name, "TIDEMARK_CREATE_TABLE=true", "TIDEMARK_DYNAMODB_ENDPOINT="+run.table.Endpoint,
	)
	// No HTTP server: it would listen on every interface.
	cmd := exec.Command(e2etest.Connect(t), "run", "--log.level", "info", "--set", "http.enabled=false", paginationConfig(t, config))
	cmd.Env = env
	run.proc = e2etest.Start(t, config, cmd)
	return run
}

func matchesKind(r *http.Request, kind string) bool {
	q := r.URL.Query()
	switch kind {
	case fakeapi.OffsetByKeyset:
		return q.Has("after_id")
	case fakeapi.OffsetByOffset:
		return q.Has("offset")
	}
	return q.Has("page")
}

// delivered counts the rows printed so far, by id.
func (r *offsetRun) delivered(t *testing.T) map[int64]int {
	t.Helper()
	b, err := os.ReadFile(r.out)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	seen := map[int64]int{}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if m := rowID.FindSubmatch(line); m != nil {
			id, _ := strconv.ParseInt(string(m[1]), 10, 64)
			seen[id]++
		}
	}
	return seen
}

var rowID = regexp.MustCompile(`^\{"id":(\d+),`)

// absent lists the ids of want that were not delivered.
func absent(seen map[int64]int, want []int64) []int64 {
	var out []int64
	for _, id := range want {
		if seen[id] == 0 {
			out = append(out, id)
		}
	}
	return out
}

// without returns ids less drop. A row deleted at the source may be missing
// from the output: when the delete shifts a page, the partition re-reads
// from its start, and the pages it had read but not yet handed to the
// pipeline are dropped with the chain (they were never promoted), so the
// deleted row is delivered only if its page got out before the restart.
// Every row the source still holds is delivered either way.
func without(ids []int64, drop ...int64) []int64 {
	var out []int64
	for _, id := range ids {
		if !slices.Contains(drop, id) {
			out = append(out, id)
		}
	}
	return out
}

func (r *offsetRun) waitDelivered(t *testing.T, want []int64) {
	t.Helper()
	e2etest.WaitFor(t, e2etest.Patience, "every expected row delivered", func() (bool, string) {
		a := absent(r.delivered(t), want)
		return len(a) == 0, fmt.Sprintf("%d rows missing, e.g. %v", len(a), a[:min(5, len(a))])
	}, r.proc.Running)
}

func (r *offsetRun) store(t *testing.T) store.Store {
	t.Helper()
	st, err := dynamostore.NewDynamoStore(context.Background(), dynamostore.DynamoConfig{Table: r.table.Name, Endpoint: r.table.Endpoint})
	require.NoError(t, err)
	return st
}

func (r *offsetRun) checkpoint(t *testing.T) store.Checkpoint {
	t.Helper()
	cp, err := r.store(t).LoadCheckpoint(context.Background(), store.Key{Scope: r.scope, Partition: "items"})
	require.NoError(t, err)
	return cp
}

// requireNoScalarFrontier: no scalar frontier was ever published (the
// frontier record, if any, carries none).
func (r *offsetRun) requireNoScalarFrontier(t *testing.T) {
	t.Helper()
	f, err := r.store(t).LoadFrontier(context.Background(), r.scope)
	if err != nil {
		require.ErrorIs(t, err, store.ErrNotFound)
		return
	}
	assert.True(t, f.Scalar.IsZero(), "no scalar frontier: %+v", f)
}

// Offset pages with the overlap check: the delete of 20 (page 1) when page
// 3 is requested, and the insert of 15 (page 1) when a later page is, each
// shift the page being requested; the check sees it and the partition
// re-reads from its start. Every row is delivered, the inserted one too,
// the partition completes, and the run exits 0.
func TestOffsetOverlapDeliversEveryRowAcrossADeleteAndAnInsertOnAnEarlierPage(t *testing.T) {
	fake := fakeapi.NewOffset(t, 10)
	original := fake.Append(offsetRows)
	run := startOffsetRun(t, "offset_overlap", fake, fakeapi.OffsetByOffset, func(n int) {
		switch n {
		case 3:
			fake.Delete(20)
		case 8:
			fake.Insert(15)
		}
	})
	require.NoError(t, run.proc.Wait(e2etest.Patience), "the run ends on its own (exit_when_complete)\n%s", run.proc.Out.Tail(30))
	seen := run.delivered(t)
	assert.Empty(t, absent(seen, append(without(original, 20), 15)), "every row the source holds, the inserted one included")
	cp := run.checkpoint(t)
	assert.True(t, cp.Complete, "the traversal completes")
	assert.Empty(t, cp.Parked)
	log := run.proc.Out.String()
	assert.GreaterOrEqual(t, strings.Count(log, "offset overlap check"), 2, "both shifts were seen and recovered from:\n%s", e2etest.Tail(log, 20))
}

// Page numbers over dense ids: the delete of 5 (page 1) when page 3 is
// requested makes page 3 start at 22, not 21: coverage rule (b) refuses
// it and the partition re-reads from page 1, delivering 21. Under dense
// ids an insert can only append: 101, added while the walk runs, is read
// on the last page.
func TestOffsetDensePageNumbersDeliverEveryRowAcrossADeleteOnAnEarlierPage(t *testing.T) {
	fake := fakeapi.NewOffset(t, 1)
	original := fake.Append(offsetRows)
	run := startOffsetRun(t, "page_dense", fake, fakeapi.OffsetByPage, func(n int) {
		switch n {
		case 3:
			fake.Delete(5)
		case 6:
			fake.Append(1)
		}
	})
	require.NoError(t, run.proc.Wait(e2etest.Patience), "the run ends on its own (exit_when_complete)\n%s", run.proc.Out.Tail(30))
	seen := run.delivered(t)
	assert.Empty(t, absent(seen, append(without(original, 5), 101)), "every row the source holds, the appended one included")
	cp := run.checkpoint(t)
	assert.True(t, cp.Complete, "the traversal completes")
	assert.Contains(t, run.proc.Out.String(), "coverage rule (b)", "the shift was seen")
}

// Keyset pages: the delete of 20 and the insert of 15 on page 1 move
// nothing; every row is delivered, rows appended at the head too. 15 was
// created below the reader's progress and is not in this traversal: the
// run claims nothing about it: the partition never completes, no watermark
// is written and no scalar frontier published.
func TestOffsetKeysetDeliversEveryRowAndClaimsNothingBelowItsProgress(t *testing.T) {
	fake := fakeapi.NewOffset(t, 10)
	original := fake.Append(offsetRows)
	run := startOffsetRun(t, "keyset", fake, fakeapi.OffsetByKeyset, func(n int) {
		switch n {
		case 3:
			fake.Delete(20)
		case 6:
			fake.Insert(15)
			fake.Append(2) // 1010, 1020 at the head
		}
	})
	run.waitDelivered(t, append(original, 1010, 1020))
	polls := fake.Served(fakeapi.OffsetByKeyset)
	e2etest.WaitUntil(t, e2etest.Patience, "the head polled again", func() bool {
		return fake.Served(fakeapi.OffsetByKeyset) >= polls+3
	}, run.proc.Running)
	run.proc.Stop(e2etest.Patience)
	seen := run.delivered(t)
	assert.Zero(t, seen[15], "a row created below the keyset's progress is not in this traversal")
	cp := run.checkpoint(t)
	assert.False(t, cp.Complete, "a head-polled keyset never completes")
	assert.True(t, cp.Watermark.IsZero(), "no watermark: %s", cp.Watermark)
	assert.Empty(t, cp.Parked)
	run.requireNoScalarFrontier(t)
}

// Offset pages through the server's Link header, declared offset_unproven:
// the delete of 20 (page 1) when page 3 is requested slides 210 onto page
// 2, already read, and 210 is never delivered: the loss the declaration
// admits; 15, inserted on page 1 when page 6 is requested, is not either.
// The run says so at start, writes no watermark, publishes no scalar
// frontier and never completes.
func TestOffsetUnprovenSaysItCannotProveCompletenessAndClaimsNone(t *testing.T) {
	fake := fakeapi.NewOffset(t, 10)
	original := fake.Append(offsetRows)
	run := startOffsetRun(t, "offset_unproven", fake, fakeapi.OffsetByOffset, func(n int) {
		switch n {
		case 3:
			fake.Delete(20)
		case 6:
			fake.Insert(15) // slides 510 back onto page 6: a duplicate
		}
	})
	var rest []int64
	for _, id := range original {
		if id != 210 {
			rest = append(rest, id)
		}
	}
	run.waitDelivered(t, rest)
	polls := fake.Served(fakeapi.OffsetByOffset)
	e2etest.WaitUntil(t, e2etest.Patience, "the last page polled again", func() bool {
		return fake.Served(fakeapi.OffsetByOffset) >= polls+3
	}, run.proc.Running)
	run.proc.Stop(e2etest.Patience)
	log := run.proc.Out.String()
	assert.Contains(t, log, "Partition items cannot prove completeness")
	assert.Contains(t, log, "offset_unproven")
	seen := run.delivered(t)
	assert.Zero(t, seen[210], "210 slid onto page 2 after it was read: the declared loss")
	assert.Zero(t, seen[15], "15 was inserted on a page already read")
	cp := run.checkpoint(t)
	assert.False(t, cp.Complete)
	assert.True(t, cp.Watermark.IsZero(), "no watermark: %s", cp.Watermark)
	run.requireNoScalarFrontier(t)
}

// Without offset_unproven, lint refuses offset pagination over sparse
// positions with no overlap check, and the docs' configs lint clean and
// appear in docs/pagination.md word for word.
func TestOffsetPaginationConfigsLintAndAreTheDocs(t *testing.T) {
	root := e2etest.ModuleRoot(t)
	docs, err := os.ReadFile(filepath.Join(root, "docs", "pagination.md"))
	require.NoError(t, err)
	files, err := filepath.Glob(filepath.Join(root, "config", "pagination", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		runConnect(t, e2etest.Patience, e2etest.Env(), "lint", f)
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		assert.Contains(t, string(docs), "```yaml\n"+string(b)+"```", "%s is shown in docs/pagination.md as it is", filepath.Base(f))
	}
	b, err := os.ReadFile(paginationConfig(t, "offset_unproven"))
	require.NoError(t, err)
	silent := strings.Replace(string(b), "        offset_unproven: true\n", "", 1)
	require.NotEqual(t, string(b), silent)
	cmd := exec.Command(e2etest.Connect(t), "lint", writeConfig(t, silent))
	cmd.Env = e2etest.Env()
	res := e2etest.Run(t, e2etest.Patience, cmd)
	assert.NotZero(t, res.Code, "lint refuses offset pagination that skips silently")
	assert.Contains(t, res.Stdout+res.Stderr, "cannot prove that a page continues the previous one")
}
