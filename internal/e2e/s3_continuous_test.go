//go:build unix

package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/dynalitetest"
	"github.com/tidemark/tidemark/internal/dynamostore"
	"github.com/tidemark/tidemark/internal/e2etest"
	"github.com/tidemark/tidemark/internal/store"
)

// s3RefusedToken is the answer S3 (and s3rver, which
// TestExampleS3ListingRestartsOnlyOnARefusedToken checks) gives to a
// continuation token it did not issue for the listing.
const s3RefusedToken = `<?xml version="1.0" encoding="UTF-8"?>
<Error><Code>InvalidArgument</Code><Message>The continuation token provided is incorrect</Message><ArgumentName>continuation-token</ArgumentName><RequestId>4442587FB7D0A2F9</RequestId></Error>`

// TestS3ContinuousListingDeliversAnObjectWrittenBelowItsProgress runs
// http_s3_listing.yaml against s3rver, as shipped and, with a continuation
// token refused mid-listing, under each recovery that restarts
// (restart_from_boundary, fresh_snapshot: both relist from the start).
// Mid-listing (the fourth page request is held until then) an object is
// written with a key below the listing's progress: the traversal does not
// see it, and the first relist that starts after it was written delivers
// it, once (a second relist is held until it is printed: were it left to a
// later one, the test would wait in vain). Then an object already
// delivered is rewritten: it is delivered again (an update). Every other
// object is delivered exactly once (those of the page before a refused
// token at most twice: the restart lists it again); no scalar frontier is published at any
// point (none covers the late object before it is delivered, nor after),
// no watermark is claimed; the checkpoint records the passes.
func TestS3ContinuousListingDeliversAnObjectWrittenBelowItsProgress(t *testing.T) {
	for _, tc := range []struct {
		name, recovery string
		refuse         bool
	}{
		{"shipped", "restart_from_boundary", false},
		{"refused token/restart_from_boundary", "restart_from_boundary", true},
		{"refused token/fresh_snapshot", "fresh_snapshot", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testS3ContinuousLate(t, tc.recovery, tc.refuse)
		})
	}
}

func testS3ContinuousLate(t *testing.T, recovery string, refuse bool) {
	const late = "photos/0000-late.jpg" // sorts before every photos/2026/... key
	const rewritten = "photos/2026/img-05.jpg"
	tb := dynalitetest.NewTable(t)
	srv := startS3rver(t)
	s3Put(t, srv.URL, "photos", "", "")
	var keys []string
	for i := 1; i <= 20; i++ {
		key := fmt.Sprintf("photos/2026/img-%02d.jpg", i)
		s3Put(t, srv.URL, "photos", key, "object "+key)
		keys = append(keys, key)
	}
	target, err := url.Parse(srv.URL)
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(target)
	var listed, refused, relistsAfterWrite atomic.Int64
	var written atomic.Bool
	gate := make(chan struct{})     // the fourth request waits for the late object
	released := make(chan struct{}) // a second relist after the write waits for its delivery
	var openGate, release sync.Once
	defer openGate.Do(func() { close(gate) })
	defer release.Do(func() { close(released) })
	held := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := listed.Add(1)
		if refuse && n == 2 && r.URL.Query().Has("continuation-token") {
			refused.Add(1)
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, s3RefusedToken)
			return
		}
		if n == 4 {
			select {
			case <-gate:
			case <-r.Context().Done():
				return
			}
		}
		if written.Load() && !r.URL.Query().Has("continuation-token") && relistsAfterWrite.Add(1) >= 2 {
			select {
			case <-released:
			case <-r.Context().Done():
				return
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	defer held.Close()

	out := filepath.Join(t.TempDir(), "objects.jsonl")
	env := e2etest.Env(
		"S3_ENDPOINT="+held.URL, "S3_BUCKETS=photos", "S3_PAGE_SIZE=3", "S3_OUTPUT="+out,
		"S3_POLL_INTERVAL=100ms", "S3_RELIST_INTERVAL=500ms", "S3_RECOVERY="+recovery,
		"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=S3RVER", "AWS_SECRET_ACCESS_KEY=S3RVER",
		"TIDEMARK_TABLE="+tb.Name, "TIDEMARK_CREATE_TABLE=true", "TIDEMARK_DYNAMODB_ENDPOINT="+tb.Endpoint,
	)
	cmd := exec.Command(e2etest.Connect(t), "run", "--log.level", "info", examplePath(t, "http_s3_listing"))
	cmd.Env = env
	run := e2etest.Start(t, "run", cmd)
	e2etest.WaitFor(t, e2etest.Patience, "the fourth listing request", func() (bool, string) {
		return listed.Load() >= 4, fmt.Sprintf("%d listing requests", listed.Load())
	}, run.Running)
	s3Put(t, srv.URL, "photos", late, "object "+late)
	written.Store(true)
	openGate.Do(func() { close(gate) })
	st, err := dynamostore.NewDynamoStore(context.Background(), dynamostore.DynamoConfig{Table: tb.Name, Endpoint: tb.Endpoint})
	require.NoError(t, err)
	// noScalar fails the test on a published scalar frontier: none may
	// cover the late object before its delivery (nor claim anything after).
	noScalar := func() {
		t.Helper()
		f, err := st.LoadFrontier(context.Background(), "s3-listing-continuous")
		if err == nil {
			require.True(t, f.Scalar.IsZero(), "a scalar frontier was published: %+v", f)
		} else {
			require.ErrorIs(t, err, store.ErrNotFound)
		}
	}

	printed := func() map[string]int {
		b, err := os.ReadFile(out)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		n := map[string]int{}
		if len(strings.TrimSpace(string(b))) == 0 {
			return n
		}
		for _, l := range s3Lines(t, out) {
			n[l.Key]++
		}
		return n
	}
	e2etest.WaitFor(t, e2etest.Patience, "the late object delivered by the first relist after it was written", func() (bool, string) {
		noScalar()
		p := printed()
		return p[late] > 0, fmt.Sprintf("%d objects printed, %d relists started after the write", len(p), relistsAfterWrite.Load())
	}, run.Running)
	release.Do(func() { close(released) })
	s3Put(t, srv.URL, "photos", rewritten, "object rewritten")
	e2etest.WaitFor(t, e2etest.Patience, "the rewritten object delivered again", func() (bool, string) {
		noScalar()
		p := printed()
		return p[rewritten] > 1, fmt.Sprintf("%s printed %d times", rewritten, p[rewritten])
	}, run.Running)
	// Two more relists: nothing more is delivered.
	before := listed.Load()
	e2etest.WaitUntil(t, e2etest.Patience, "two more relists", func() bool {
		return listed.Load() >= before+2*7+2
	}, run.Running)
	run.Stop(e2etest.Patience)

	p := printed()
	for _, k := range keys {
		want := 1
		if k == rewritten {
			want = 2
		}
		if refuse {
			// Pages read before the refused token (the first, and with
			// pages in flight the ones fetched ahead of it): the restart
			// lists them again, and their objects are delivered again when
			// the restart came before their receipts were written
			// (duplicates, never a gap; at most once more each).
			assert.GreaterOrEqual(t, p[k], want, "object %s", k)
			assert.LessOrEqual(t, p[k], want+1, "object %s", k)
			continue
		}
		assert.Equal(t, want, p[k], "object %s", k)
	}
	assert.Equal(t, 1, p[late], "the object written below the progress, once")
	if refuse {
		assert.Equal(t, int64(1), refused.Load(), "one continuation token refused")
	}
	cp, err := st.LoadCheckpoint(context.Background(), store.Key{Scope: "s3-listing-continuous", Partition: "photos"})
	require.NoError(t, err)
	assert.True(t, cp.Reread.Started(), "the checkpoint records the passes")
	assert.False(t, cp.Complete, "a continuous listing never completes")
	assert.True(t, cp.Watermark.IsZero(), "no watermark: %s", cp.Watermark)
	assert.Empty(t, cp.Parked)
	noScalar()
}
