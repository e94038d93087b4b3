//go:build unix

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/dynalitetest"
	"github.com/tidemark/tidemark/internal/dynamostore"
	"github.com/tidemark/tidemark/internal/e2etest"
	"github.com/tidemark/tidemark/internal/servertest"
	"github.com/tidemark/tidemark/internal/store"
)

// startS3rver starts s3rver (the pinned npm package, an S3-compatible
// server: ListObjectsV2 with encrypted continuation tokens under a fresh IV
// on every answer, so tokens rotate on retries) on 127.0.0.1 with its data
// in a temporary directory. s3rver encrypts its tokens with DES, which
// Node.js 17 and later only offer through OpenSSL's legacy provider.
func startS3rver(t *testing.T) *servertest.Server {
	node, script := servertest.NodeScript(t, "s3rver", "bin/s3rver.js")
	dir := t.TempDir()
	return servertest.Start(t, servertest.Config{
		Name: "s3rver",
		Command: func(ports []int) []string {
			return []string{node, "--openssl-legacy-provider", script, "--address", "127.0.0.1", "--port", strconv.Itoa(ports[0]), "--directory", dir, "--silent"}
		},
		Ready: servertest.HTTPProbe(http.MethodGet, "/", "", http.StatusOK),
	})
}

// s3Put makes a bucket (key "") or an object; s3rver accepts anonymous
// writes.
func s3Put(t *testing.T, base, bucket, key, body string) {
	t.Helper()
	u := base + "/" + bucket
	if key != "" {
		u += "/" + key
	}
	req, err := http.NewRequest(http.MethodPut, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("PUT %s: HTTP %d: %s", u, resp.StatusCode, b)
	}
}

// s3Objects reads the example's output file: objects by bucket/key, and the
// number of torn lines (a kill mid-write).
func s3Objects(t *testing.T, path string) (map[string]int, int) {
	t.Helper()
	return countLines(t, path, func(line []byte) string {
		var o struct {
			Bucket string  `json:"bucket"`
			Key    string  `json:"key"`
			Size   float64 `json:"size"`
		}
		if json.Unmarshal(line, &o) != nil || o.Key == "" {
			return ""
		}
		if want := float64(len("object " + o.Key)); o.Size != want {
			t.Errorf("object %s/%s printed with size %v, want %v", o.Bucket, o.Key, o.Size, want)
		}
		return o.Bucket + "/" + o.Key
	})
}

// TestExampleS3ListingSurvivesKill9 runs http_s3_listing.yaml against
// s3rver: two buckets of objects whose keys sort differently as numbers and
// as bytes, listed in pages of 7 with rotating continuation tokens. The
// first run is killed with SIGKILL once part of the listing is out; the
// second run lists every object that was not durably done, and ends with
// both buckets complete in DynamoDB, without a watermark (a listing
// certifies no key as complete). Every object is printed at least once; the
// checkpoint's applied key is the greatest key, a string position.
func TestExampleS3ListingSurvivesKill9(t *testing.T) {
	tb := dynalitetest.NewTable(t)
	srv := startS3rver(t)
	buckets := map[string][]string{}
	for _, b := range []string{"photos", "logs"} {
		s3Put(t, srv.URL, b, "", "")
		for i := 1; i <= 40; i++ {
			// "img-10" sorts before "img-9" as bytes: positions are keys.
			key := fmt.Sprintf("%s/2026/img-%d.jpg", b, i)
			s3Put(t, srv.URL, b, key, "object "+key)
			buckets[b] = append(buckets[b], key)
		}
	}
	// Listing requests cross a link with 40 ms of latency, so run 1 is
	// still listing when it is killed.
	target, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(40 * time.Millisecond)
		proxy.ServeHTTP(w, r)
	}))
	defer slow.Close()
	out := filepath.Join(t.TempDir(), "objects.jsonl")
	env := e2etest.Env(
		"S3_ENDPOINT="+slow.URL, "S3_BUCKETS=photos, logs", "S3_PAGE_SIZE=3", "S3_OUTPUT="+out,
		"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=S3RVER", "AWS_SECRET_ACCESS_KEY=S3RVER",
		"TIDEMARK_TABLE="+tb.Name, "TIDEMARK_CREATE_TABLE=true", "TIDEMARK_DYNAMODB_ENDPOINT="+dynaliteShield(t, tb.Endpoint),
	)
	bin := e2etest.Connect(t)

	// Run 1, killed once some objects are out but not all.
	cmd := exec.Command(bin, "run", "--log.level", "warn", examplePath(t, "http_s3_listing_once"))
	cmd.Env = env
	first := e2etest.Start(t, "run 1", cmd)
	e2etest.WaitFor(t, e2etest.Patience, "run 1 printed some objects", func() (bool, string) {
		got, _ := s3Objects(t, out)
		return len(got) >= 10 || first.Exited(), fmt.Sprintf("%d objects printed", len(got))
	})
	if first.Exited() {
		t.Fatal("run 1 ended before the kill: the test proved nothing")
	}
	if err := first.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait(e2etest.Patience)
	afterKill, _ := s3Objects(t, out)
	if len(afterKill) >= 80 {
		t.Fatalf("run 1 had printed all %d objects before the kill: the test proved nothing", len(afterKill))
	}

	// Run 2 to its end (exit_when_complete).
	runConnect(t, e2etest.Patience, env, "run", "--log.level", "warn", examplePath(t, "http_s3_listing_once"))
	got, torn := s3Objects(t, out)
	if torn > 1 {
		t.Fatalf("%d torn lines: only the line a kill interrupted may be torn", torn)
	}
	st, err := dynamostore.NewDynamoStore(context.Background(), dynamostore.DynamoConfig{Table: tb.Name, Endpoint: tb.Endpoint})
	if err != nil {
		t.Fatal(err)
	}
	for b, keys := range buckets {
		for _, k := range keys {
			if got[b+"/"+k] == 0 {
				t.Errorf("object %s/%s was never printed (run 1 had printed %d objects)", b, k, len(afterKill))
			}
		}
		last := keys[0]
		for _, k := range keys {
			last = max(last, k)
		}
		cp, err := st.LoadCheckpoint(context.Background(), store.Key{Scope: "s3-listing", Partition: b})
		if err != nil {
			t.Fatal(err)
		}
		if !cp.Complete || !cp.Watermark.IsZero() || cp.Applied != coord.StringPosition(last) || cp.Parked != "" {
			t.Errorf("%s: checkpoint complete=%v watermark %s applied %s parked %q; want complete, applied through %s, no watermark", b, cp.Complete, cp.Watermark, cp.Applied, cp.Parked, last)
		}
	}
	t.Logf("run 1 printed %d objects before the kill; after run 2, %d objects (%d lines in all)", len(afterKill), len(got), sum(got))

	// A third run lists nothing: both buckets are durably complete.
	before := len(got)
	lines := func() int {
		b, _ := os.ReadFile(out)
		return strings.Count(string(b), "\n")
	}
	n := lines()
	runConnect(t, e2etest.Patience, env, "run", "--log.level", "warn", examplePath(t, "http_s3_listing_once"))
	if lines() != n {
		t.Fatalf("a run after both listings completed printed %d more lines (of %d objects)", lines()-n, before)
	}
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
