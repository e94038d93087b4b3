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
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/dynalitetest"
	"github.com/tidemark/tidemark/internal/dynamostore"
	"github.com/tidemark/tidemark/internal/e2etest"
	"github.com/tidemark/tidemark/internal/store"
)

// TestS3ContinuousListingDeliversAnObjectWrittenBelowItsProgress runs
// s3_listing_continuous.yaml against s3rver. Mid-listing (the fourth page
// request is held until then) an object is written with a key below the
// listing's progress: the first traversal does not see it, and a later
// relist delivers it, once. Then an object already delivered is rewritten:
// it is delivered again (an update). Every other object is delivered
// exactly once; nothing claims a frontier (no watermark, no scalar
// frontier published); the checkpoint records the passes.
func TestS3ContinuousListingDeliversAnObjectWrittenBelowItsProgress(t *testing.T) {
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
	var listed atomic.Int64
	gate := make(chan struct{})
	held := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if listed.Add(1) == 4 {
			<-gate
		}
		proxy.ServeHTTP(w, r)
	}))
	defer held.Close()
	opened := false
	defer func() {
		if !opened {
			close(gate)
		}
	}()

	out := filepath.Join(t.TempDir(), "objects.jsonl")
	env := e2etest.Env(
		"S3_ENDPOINT="+held.URL, "S3_BUCKETS=photos", "S3_PAGE_SIZE=3", "S3_OUTPUT="+out,
		"S3_POLL_INTERVAL=100ms", "S3_RELIST_INTERVAL=500ms",
		"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=S3RVER", "AWS_SECRET_ACCESS_KEY=S3RVER",
		"TIDEMARK_TABLE="+tb.Name, "TIDEMARK_CREATE_TABLE=true", "TIDEMARK_DYNAMODB_ENDPOINT="+tb.Endpoint,
	)
	cmd := exec.Command(e2etest.Connect(t), "run", "--log.level", "info", examplePath(t, "s3_listing_continuous"))
	cmd.Env = env
	run := e2etest.Start(t, "run", cmd)
	e2etest.WaitFor(t, e2etest.Patience, "the fourth listing request", func() (bool, string) {
		return listed.Load() >= 4, fmt.Sprintf("%d listing requests", listed.Load())
	}, run.Running)
	s3Put(t, srv.URL, "photos", late, "object "+late)
	close(gate)
	opened = true

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
	e2etest.WaitFor(t, e2etest.Patience, "the late object delivered", func() (bool, string) {
		p := printed()
		return p[late] > 0, fmt.Sprintf("%d objects printed", len(p))
	}, run.Running)
	s3Put(t, srv.URL, "photos", rewritten, "object rewritten")
	e2etest.WaitFor(t, e2etest.Patience, "the rewritten object delivered again", func() (bool, string) {
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
		assert.Equal(t, want, p[k], "object %s", k)
	}
	assert.Equal(t, 1, p[late], "the object written below the progress, once")
	st, err := dynamostore.NewDynamoStore(context.Background(), dynamostore.DynamoConfig{Table: tb.Name, Endpoint: tb.Endpoint})
	require.NoError(t, err)
	cp, err := st.LoadCheckpoint(context.Background(), store.Key{Scope: "s3-listing-continuous", Partition: "photos"})
	require.NoError(t, err)
	assert.True(t, cp.Reread.Started(), "the checkpoint records the passes")
	assert.False(t, cp.Complete, "a continuous listing never completes")
	assert.True(t, cp.Watermark.IsZero(), "no watermark: %s", cp.Watermark)
	assert.Empty(t, cp.Parked)
	f, err := st.LoadFrontier(context.Background(), "s3-listing-continuous")
	if err == nil {
		assert.True(t, f.Scalar.IsZero(), "no scalar frontier: %+v", f)
	} else {
		require.ErrorIs(t, err, store.ErrNotFound)
	}
}
