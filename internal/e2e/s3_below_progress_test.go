//go:build unix

package e2e

import (
	"context"
	"encoding/json"
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

	"github.com/tidemark/tidemark/internal/dynalitetest"
	"github.com/tidemark/tidemark/internal/dynamostore"
	"github.com/tidemark/tidemark/internal/e2etest"
	"github.com/tidemark/tidemark/internal/store"
)

// s3Line is one printed object with the frontier metadata the test's
// partition_frontier attached to it.
type s3Line struct {
	Key      string  `json:"key"`
	Frontier *string `json:"frontier"`
	Finality *string `json:"frontier_finality"`
}

// TestS3ListingNoScalarFrontierCoversAKeyWrittenBelowItsProgress runs
// http_s3_listing.yaml against s3rver with a partition_frontier processor
// added. Mid-listing (the fourth page request is held until then) an
// object is written with a key below the listing's progress. A listing is
// not a snapshot: the object is not in this traversal. The shipped example
// maps no complete_through, so no message carries a scalar frontier and
// none is published: nothing claims the missed key. With the example's
// commented append_only_writer assertion switched on (an assertion this
// bucket breaks), the frontier does pass the missed key, and every message
// that carries it names the assertion it rests on.
func TestS3ListingNoScalarFrontierCoversAKeyWrittenBelowItsProgress(t *testing.T) {
	const late = "photos/0000-late.jpg" // sorts before every photos/2026/... key
	for _, tc := range []struct {
		name     string
		asserted bool
	}{{"shipped example", false}, {"append_only_writer assertion switched on", true}} {
		t.Run(tc.name, func(t *testing.T) {
			tb := dynalitetest.NewTable(t)
			srv := startS3rver(t)
			s3Put(t, srv.URL, "photos", "", "")
			var keys []string
			for i := 1; i <= 20; i++ {
				key := fmt.Sprintf("photos/2026/img-%02d.jpg", i)
				s3Put(t, srv.URL, "photos", key, "object "+key)
				keys = append(keys, key)
			}
			// The fourth listing request waits until the late object is
			// written: by then three pages (9 keys) have been listed.
			target, err := url.Parse(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
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
			defer func() {
				select {
				case <-gate:
				default:
					close(gate)
				}
			}()

			cfg := s3ExampleWithFrontier(t, tc.asserted)
			out := filepath.Join(t.TempDir(), "objects.jsonl")
			env := e2etest.Env(
				"S3_ENDPOINT="+held.URL, "S3_BUCKETS=photos", "S3_PAGE_SIZE=3", "S3_OUTPUT="+out,
				"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=S3RVER", "AWS_SECRET_ACCESS_KEY=S3RVER",
				"TIDEMARK_TABLE="+tb.Name, "TIDEMARK_CREATE_TABLE=true", "TIDEMARK_DYNAMODB_ENDPOINT="+tb.Endpoint,
			)
			cmd := exec.Command(e2etest.Connect(t), "run", "--log.level", "warn", cfg)
			cmd.Env = env
			run := e2etest.Start(t, "run", cmd)
			e2etest.WaitFor(t, e2etest.Patience, "the fourth listing request", func() (bool, string) {
				return listed.Load() >= 4, fmt.Sprintf("%d listing requests", listed.Load())
			}, run.Running)
			s3Put(t, srv.URL, "photos", late, "object "+late)
			if tc.asserted {
				// partition_frontier attaches only published frontiers: the
				// pages after the gate carry one past the late key once the
				// first pages' progress is published.
				pst, err := dynamostore.NewDynamoStore(context.Background(), dynamostore.DynamoConfig{Table: tb.Name, Endpoint: tb.Endpoint})
				if err != nil {
					t.Fatal(err)
				}
				e2etest.WaitFor(t, e2etest.Patience, "a published frontier past the late key", func() (bool, string) {
					f, err := pst.LoadFrontier(context.Background(), "s3-listing")
					if err != nil {
						return false, err.Error()
					}
					return !f.Scalar.IsZero() && f.Scalar.Str >= late, "published " + f.Scalar.String()
				}, run.Running)
			}
			close(gate)
			if err := run.Wait(e2etest.Patience); err != nil {
				t.Fatalf("the run did not end cleanly: %v", err)
			}

			lines := s3Lines(t, out)
			printed := map[string]bool{}
			for _, l := range lines {
				printed[l.Key] = true
			}
			for _, k := range keys {
				if !printed[k] {
					t.Errorf("object %s was never printed", k)
				}
			}
			if printed[late] {
				t.Fatalf("%s was delivered: the listing did not pass it before it was written, the test proved nothing", late)
			}
			st, err := dynamostore.NewDynamoStore(context.Background(), dynamostore.DynamoConfig{Table: tb.Name, Endpoint: tb.Endpoint})
			if err != nil {
				t.Fatal(err)
			}
			published, err := st.LoadFrontier(context.Background(), "s3-listing")
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				t.Fatal(err)
			}
			covering := 0
			for _, l := range lines {
				switch {
				case l.Frontier == nil:
				case !tc.asserted:
					t.Errorf("object %s carries the scalar frontier %q: the shipped listing certifies nothing", l.Key, *l.Frontier)
				case *l.Frontier >= late:
					covering++
					if l.Finality == nil || !strings.Contains(*l.Finality, "append_only_writer assertion (photos)") {
						t.Errorf("object %s carries frontier %q past the missed %s without naming the assertion it rests on (tidemark_frontier_finality %v)", l.Key, *l.Frontier, late, l.Finality)
					}
				}
			}
			if !tc.asserted {
				if !published.Scalar.IsZero() {
					t.Errorf("a scalar frontier %s was published; the shipped listing certifies nothing", published.Scalar)
				}
				t.Logf("%d objects printed, %s missed (written below the listing's progress); no scalar frontier attached or published", len(printed), late)
				return
			}
			if covering == 0 {
				t.Errorf("under the assertion no message carried a frontier past %s: the test shows nothing about it", late)
			}
			t.Logf("under the broken assertion %d messages carried a frontier past the missed %s, each naming the assertion; published %s", covering, late, published.Scalar)
		})
	}
}

// s3ExampleWithFrontier writes a copy of http_s3_listing.yaml whose
// pipeline attaches the partition_frontier and prints it with each object,
// with the example's commented append_only_writer assertion switched on
// when asserted.
func s3ExampleWithFrontier(t *testing.T, asserted bool) string {
	t.Helper()
	b, err := os.ReadFile(examplePath(t, "http_s3_listing_once"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := string(b)
	replace := func(old, new string) {
		t.Helper()
		if !strings.Contains(cfg, old) {
			t.Fatalf("the example no longer contains %q", old)
		}
		cfg = strings.Replace(cfg, old, new, 1)
	}
	if asserted {
		replace("      # complete_through: ", "      complete_through: ")
		replace("        # ASSERTION (not the default): finality: append_only_writer", "        finality: append_only_writer")
	}
	// partition_frontier attaches only published frontiers: publish often.
	replace("    exit_when_complete: ${EXIT_WHEN_COMPLETE:true}\n", "    exit_when_complete: ${EXIT_WHEN_COMPLETE:true}\n    frontier_publish_interval: 20ms\n")
	replace("pipeline:\n  processors:\n", `pipeline:
  processors:
    - partition_frontier:
        scope: ${S3_SCOPE:s3-listing}
        partitions: [ ${S3_BUCKETS:example-bucket} ]
        checkpoint:
          backend: dynamodb
          dynamodb:
            table: ${TIDEMARK_TABLE:tidemark}
            endpoint: ${TIDEMARK_DYNAMODB_ENDPOINT:}
    - mapping: |
        root = this
        root.frontier = @tidemark_frontier.or(null)
        root.frontier_finality = @tidemark_frontier_finality.or(null)
`)
	path := filepath.Join(t.TempDir(), "s3_listing_with_frontier.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// s3Lines reads the printed objects with their frontier metadata.
func s3Lines(t *testing.T, path string) []s3Line {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []s3Line
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var o s3Line
		if err := json.Unmarshal([]byte(l), &o); err != nil || o.Key == "" {
			t.Fatalf("unreadable line %q: %v", l, err)
		}
		out = append(out, o)
	}
	return out
}
