//go:build unix

package e2e

// `connect tidemark probe` run on every config/examples/http_*.yaml against
// its local server (pouchdb-server, s3rver, etcd, kinesalite, the
// Kubernetes fake of internal/fakeapi), started here on 127.0.0.1: the exit
// status and the key findings of each. The probe needs no DynamoDB: the
// checkpoint endpoint points where nothing listens.

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/e2etest"
	"github.com/tidemark/tidemark/internal/fakeapi"
	"github.com/tidemark/tidemark/internal/servertest"
)

// noDynamoDB is a DynamoDB endpoint nothing listens on.
const noDynamoDB = "TIDEMARK_DYNAMODB_ENDPOINT=http://127.0.0.1:1"

// probeFinding is one finding as the probe prints it.
type probeFinding struct{ declared, verdict, evidence string }

// runProbe runs the probe on an example and returns its findings by field
// (the first partition's), its output and its exit code.
func runProbe(t *testing.T, example string, env []string, args ...string) (map[string]probeFinding, string, int) {
	t.Helper()
	cmd := exec.Command(e2etest.Connect(t), append([]string{"tidemark", "probe", filepath.Join("config", "examples", example+".yaml")}, args...)...)
	cmd.Dir = e2etest.ModuleRoot(t)
	cmd.Env = append(env, noDynamoDB)
	res := e2etest.Run(t, e2etest.Patience, cmd)
	t.Logf("connect tidemark probe %s: exit %d\n%s", example, res.Code, res.Output)
	return parseProbe(t, res.Stdout), res.Stdout, res.Code
}

// parseProbe reads the findings of the first partition: a line
// "  <verdict>  <field>: <declared>" followed by its evidence line.
func parseProbe(t *testing.T, out string) map[string]probeFinding {
	t.Helper()
	fs := map[string]probeFinding{}
	sc := bufio.NewScanner(strings.NewReader(out))
	var last string
	partitions := 0
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "partition ") && strings.Contains(line, "walk 1:") {
			partitions++
			continue
		}
		if partitions != 1 || !strings.HasPrefix(line, "  ") {
			continue
		}
		trimmed := strings.TrimSpace(line)
		for _, v := range []string{"supported", "contradicted", "cannot tell"} {
			if rest, ok := strings.CutPrefix(trimmed, v+" "); ok && strings.HasPrefix(line, "  "+v) {
				field, declared, _ := strings.Cut(strings.TrimSpace(rest), ": ")
				fs[field] = probeFinding{declared: declared, verdict: v}
				last = field
				trimmed = ""
				break
			}
		}
		if trimmed != "" && last != "" {
			f := fs[last]
			f.evidence = trimmed
			fs[last] = f
			last = ""
		}
	}
	if len(fs) == 0 {
		t.Fatalf("no finding in the probe's output:\n%s", out)
	}
	return fs
}

// expectFindings checks verdicts (and an evidence fragment after a "|").
func expectFindings(t *testing.T, fs map[string]probeFinding, want map[string]string) {
	t.Helper()
	for field, w := range want {
		verdict, evidence, _ := strings.Cut(w, "|")
		f, ok := fs[field]
		if !ok {
			t.Errorf("no finding for %s", field)
			continue
		}
		if f.verdict != verdict || !strings.Contains(f.evidence, evidence) {
			t.Errorf("%s (%s): %s, %q; want %s with %q", field, f.declared, f.verdict, f.evidence, verdict, evidence)
		}
	}
}

// expectExit: exit 1 exactly when a finding is contradicted, else 0.
func expectExit(t *testing.T, fs map[string]probeFinding, code int) {
	t.Helper()
	want := 0
	for _, f := range fs {
		if f.verdict == "contradicted" {
			want = 1
		}
	}
	if code != want {
		t.Errorf("exit code %d, want %d", code, want)
	}
}

// TestProbeCoversEveryHTTPExample: each config/examples/http_*.yaml has a
// probe test below.
func TestProbeCoversEveryHTTPExample(t *testing.T) {
	covered := map[string]bool{"http_couchdb_changes": true, "http_s3_listing": true, "http_s3_listing_once": true, "http_etcd_range": true, "http_kinesis_shard": true, "http_kubernetes_list": true}
	files, err := filepath.Glob(filepath.Join(e2etest.ModuleRoot(t), "config", "examples", "http_*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		if strings.HasSuffix(name, "_benthos_test") {
			continue
		}
		if !covered[name] {
			t.Errorf("%s has no probe test in probe_test.go", name)
		}
	}
}

// TestProbeCouchDBChanges: a database of 8 changes read in pages of 3 up to
// its head: last_seq on the empty head page is the source's own watermark
// (finality: source), the same cursor answers the same page. The
// incarnation marker is absent at first: the probe says the input creates
// it at start and does not create it (it is still absent after the
// probe); once it exists the probe reads it, the same before and after.
func TestProbeCouchDBChanges(t *testing.T) {
	srv := startPouchDB(t)
	couch(t, http.MethodPut, srv.URL+"/orders", "")
	var docs []string
	for i := 1; i <= 8; i++ {
		docs = append(docs, fmt.Sprintf(`{"_id":"orders-%d","n":%d}`, i, i))
	}
	couch(t, http.MethodPost, srv.URL+"/orders/_bulk_docs", `{"docs":[`+strings.Join(docs, ",")+`]}`)
	env := e2etest.Env("COUCHDB_URL="+srv.URL, "COUCHDB_DATABASES=orders", "COUCHDB_PAGE_SIZE=3")
	fs, out, code := runProbe(t, "http_couchdb_changes", env)
	expectExit(t, fs, code)
	if code != 0 {
		t.Errorf("exit %d, want 0", code)
	}
	if !strings.Contains(out, "8 events, ended at the head") {
		t.Errorf("walk 1 did not read the 8 changes to the head")
	}
	expectFindings(t, fs, map[string]string{
		"response":          "supported|",
		"positions":         "supported|strictly increasing",
		"complete_through":  "supported|never going back",
		"finality":          "supported|had no events and carried complete_through 8",
		"empty_page":        "supported|was empty and carried complete_through 8",
		"tokens_may_rotate": "supported|the same successor",
		"retries":           "supported|exact_replay",
		"pagination":        "supported|keyset",
		"restart_cursor":    "supported|answered from position 4",
		"incarnation":       "cannot tell|no marker yet; the input creates it at start",
	})
	marker := srv.URL + "/orders/_local/tidemark-incarnation"
	if res, err := http.Get(marker); err != nil {
		t.Fatal(err)
	} else {
		res.Body.Close()
		if res.StatusCode != http.StatusNotFound {
			t.Errorf("GET the incarnation marker after the probe: HTTP %d, want 404 (the probe must not create it)", res.StatusCode)
		}
	}
	couch(t, http.MethodPut, marker, `{"incarnation":"0f3c"}`)
	fs, _, code = runProbe(t, "http_couchdb_changes", env)
	expectExit(t, fs, code)
	expectFindings(t, fs, map[string]string{
		"incarnation": "supported|incarnation sha256:",
	})
	if !strings.Contains(fs["incarnation"].evidence, "the same before walk 1 and after the probe") {
		t.Errorf("incarnation: %q does not say it was read twice alike", fs["incarnation"].evidence)
	}
}

// s3Listing starts s3rver with a bucket of 12 objects and returns the
// environment of http_s3_listing_once.yaml and http_s3_listing.yaml, listing in pages of 5.
func s3Listing(t *testing.T) []string {
	t.Helper()
	srv := startS3rver(t)
	s3Put(t, srv.URL, "photos", "", "")
	for i := 1; i <= 12; i++ {
		key := fmt.Sprintf("2026/img-%02d.jpg", i)
		s3Put(t, srv.URL, "photos", key, "object "+key)
	}
	return e2etest.Env("S3_ENDPOINT="+srv.URL, "S3_BUCKETS=photos", "S3_PAGE_SIZE=5",
		"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=S3RVER", "AWS_SECRET_ACCESS_KEY=S3RVER")
}

// TestProbeS3Listing: a bucket of 12 objects listed in pages of 5 with
// s3rver's rotating continuation tokens; the example maps no
// complete_through, so it claims no finality.
func TestProbeS3Listing(t *testing.T) {
	fs, _, code := runProbe(t, "http_s3_listing_once", s3Listing(t))
	expectExit(t, fs, code)
	if code != 0 {
		t.Errorf("exit %d, want 0", code)
	}
	expectFindings(t, fs, map[string]string{
		"response":          "supported|",
		"position_type":     "supported|as string",
		"positions":         "supported|strictly increasing",
		"complete_through":  "supported|not mapped",
		"finality":          "supported|claims nothing",
		"tokens_may_rotate": "supported|another successor",
		"missing_successor": "supported|ended the traversal",
		"pagination":        "supported|opaque tokens",
		"restart_cursor":    "supported|answered from position 2026/img-06.jpg",
		"incarnation":       "cannot tell|no incarnation request",
	})
}

// TestProbeS3ListingContinuous: the continuous listing (positions the
// objects' LastModified, unordered; the last page is the head, polled) on
// the same bucket: no finality is claimed, and the re-read window's
// restart cursor (the empty cursor: every pass relists from the start)
// answers.
func TestProbeS3ListingContinuous(t *testing.T) {
	fs, _, code := runProbe(t, "http_s3_listing", s3Listing(t))
	expectExit(t, fs, code)
	if code != 0 {
		t.Errorf("exit %d, want 0", code)
	}
	expectFindings(t, fs, map[string]string{
		"response":          "supported|",
		"position_type":     "supported|as timestamp",
		"finality":          "supported|claims nothing",
		"tokens_may_rotate": "supported|another successor",
		"incarnation":       "cannot tell|no incarnation request",
	})
}

// s3ListingWith writes http_s3_listing_once.yaml with its complete_through line
// (each page's own last key) uncommented and the given finality declared,
// into a temporary directory, and returns its path.
func s3ListingWith(t *testing.T, finality string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e2etest.ModuleRoot(t), "config", "examples", "http_s3_listing_once.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := string(b)
	if finality == "source" {
		// connect lint refuses `.index(-1).Key` under finality: source (a
		// best-effort static rule); `.get("Key")` passes it, and only the
		// values show what it is.
		cfg = strings.Replace(cfg, `this.index(-1).Key, this.type() == "object" => this.Key`, `this.index(-1).get("Key"), this.type() == "object" => this.get("Key")`, 1)
	}
	for old, repl := range map[string]string{
		"      # complete_through: ": "      complete_through: ",
		"        # ASSERTION (not the default): finality: append_only_writer\n": "        finality: " + finality + "\n",
	} {
		if !strings.Contains(cfg, old) {
			t.Fatalf("http_s3_listing_once.yaml has no %q", old)
		}
		cfg = strings.Replace(cfg, old, repl, 1)
	}
	path := filepath.Join(t.TempDir(), "s3_listing_"+finality+".yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestProbeFindsSelfCertifiedWatermark: the S3 listing with the page's own
// last key mapped as complete_through. Declared finality: source (spelled
// so that connect lint's static rule does not see it), the probe reports
// finality contradicted (a page's own last position certifies nothing),
// exit 1; declared as the example's comment offers it
// (append_only_writer), it cannot tell, exit 0.
func TestProbeFindsSelfCertifiedWatermark(t *testing.T) {
	env := s3Listing(t)
	for _, tc := range []struct {
		finality, want string
		code           int
	}{
		{"source", "contradicted|a page's own last position certifies nothing", 1},
		{"append_only_writer", "cannot tell|rests on this assertion alone", 0},
	} {
		t.Run(tc.finality, func(t *testing.T) {
			cmd := exec.Command(e2etest.Connect(t), "tidemark", "probe", s3ListingWith(t, tc.finality))
			cmd.Env = append(env, noDynamoDB)
			res := e2etest.Run(t, e2etest.Patience, cmd)
			t.Logf("connect tidemark probe (S3 listing, complete_through mapped, finality %s): exit %d\n%s", tc.finality, res.Code, res.Output)
			fs := parseProbe(t, res.Stdout)
			expectExit(t, fs, res.Code)
			expectFindings(t, fs, map[string]string{
				"finality":         tc.want,
				"complete_through": "supported|each page's own last position",
			})
			if res.Code != tc.code {
				t.Errorf("exit %d, want %d", res.Code, tc.code)
			}
		})
	}
}

// TestProbeEtcdRange: 10 keys of one prefix read in pages of 3 at one
// pinned revision: the marker is stable, the validate request (cluster id,
// revision and raft term against the pinned ones) accepts a fresh cursor,
// the last page ends the traversal.
func TestProbeEtcdRange(t *testing.T) {
	srv := startEtcd(t)
	c := &etcdClient{t: t, base: srv.URL}
	for i := 1; i <= 10; i++ {
		c.put(fmt.Sprintf("config/key-%02d", i), fmt.Sprintf("value %d", i))
	}
	fs, _, code := runProbe(t, "http_etcd_range", e2etest.Env("ETCD_URL="+srv.URL, "ETCD_PREFIXES=config", "ETCD_PAGE_SIZE=3"))
	expectExit(t, fs, code)
	expectFindings(t, fs, map[string]string{
		"response":          "supported|",
		"snapshot_marker":   "supported|under the same marker had the same events",
		"missing_successor": "supported|ended the traversal",
		"has_more":          "supported|",
		"validate":          "supported|accepted cursor sha256:",
		"retries":           "supported|",
		"restart_cursor":    "supported|the partition's start",
		"complete_through":  "supported|not mapped",
		"finality":          "supported|claims nothing",
		"pagination":        "supported|opaque tokens",
	})
	if code != 0 {
		t.Errorf("exit %d, want 0", code)
	}
}

// TestProbeKinesisShard: the stream's one shard discovered by ListShards,
// 10 records read in pages of 4 from TRIM_HORIZON through the bootstrap:
// every GetRecords answer hands out a new iterator, and the empty pages at
// the head are followed (follow_successor), claiming nothing.
func TestProbeKinesisShard(t *testing.T) {
	k := startKinesalite(t)
	const stream = "audit"
	k.call("CreateStream", fmt.Sprintf(`{"StreamName":%q,"ShardCount":1}`, stream))
	e2etest.WaitFor(t, e2etest.Patience, "the stream is active", func() (bool, string) {
		b := k.call("DescribeStreamSummary", fmt.Sprintf(`{"StreamName":%q}`, stream))
		return bytes.Contains(b, []byte(`"StreamStatus":"ACTIVE"`)), string(b)
	})
	k.put(stream, 0, 10)
	fs, out, code := runProbe(t, "http_kinesis_shard", e2etest.Env("KINESIS_ENDPOINT="+k.URL, "KINESIS_STREAM="+stream, "KINESIS_PAGE_SIZE=4",
		"KINESIS_READS_PER_SECOND=1000", "AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=local", "AWS_SECRET_ACCESS_KEY=local"))
	expectExit(t, fs, code)
	expectFindings(t, fs, map[string]string{
		"response":          "supported|",
		"position_type":     "supported|as decimal",
		"positions":         "supported|strictly increasing",
		"tokens_may_rotate": "supported|another successor",
		"empty_page":        "supported|follows its successor",
		"complete_through":  "supported|not mapped",
		"finality":          "supported|claims nothing",
		"pagination":        "supported|opaque tokens",
		"restart_cursor":    "supported|none of the",
		"incarnation":       "supported|the same before walk 1 and after the probe",
	})
	if !strings.Contains(out, "1 partition(s)") || !strings.Contains(out, "partition shardId-000000000000: walk 1:") {
		t.Errorf("the shard was not discovered by ListShards")
	}
	if code != 0 {
		t.Errorf("exit %d, want 0", code)
	}
}

// TestProbeKubernetesList: a namespace of 12 ConfigMaps listed in chunks of
// 5 from one snapshot (resourceVersion): the marker is stable, has_more
// (metadata.continue present) agrees with the successor, and the last
// chunk ends the traversal.
func TestProbeKubernetesList(t *testing.T) {
	k := fakeapi.NewKubernetes(t, "k8s-token")
	k.Create("team-a", "cm", 12)
	fs, _, code := runProbe(t, "http_kubernetes_list", e2etest.Env("KUBERNETES_URL="+k.URL(), "KUBERNETES_TOKEN=k8s-token",
		"KUBERNETES_NAMESPACES=team-a", "KUBERNETES_PAGE_SIZE=5"))
	expectExit(t, fs, code)
	expectFindings(t, fs, map[string]string{
		"response":          "supported|",
		"snapshot_marker":   "supported|under the same marker had the same events",
		"missing_successor": "supported|ended the traversal",
		"has_more":          "supported|agreed with the successor",
		"complete_through":  "supported|not mapped",
		"finality":          "supported|claims nothing",
		"pagination":        "supported|opaque tokens",
		"restart_cursor":    "supported|the partition's start",
	})
	if code != 0 {
		t.Errorf("exit %d, want 0", code)
	}
}

// TestProbeFindsPageNumberPagination: json-server paged by page number
// (`_page`, the next page from the Link header) over sparse ids, with the
// contract of provider/httpprovider/testdata/json_server_pages.yaml
// (positions ordered, not dense, pagination not declared: token): the
// successors are page numbers, which the probe reports as contradicting
// pagination token (a delete on an earlier page would slide an event onto a
// page already read, unseen), exit 1.
func TestProbeFindsPageNumberPagination(t *testing.T) {
	node, script := servertest.NodeScript(t, "json-server", "lib/cli/bin.js")
	dir := t.TempDir()
	var items []string
	for id := 10; id <= 120; id += 10 {
		items = append(items, fmt.Sprintf(`{"id":%d}`, id))
	}
	if err := os.WriteFile(filepath.Join(dir, "db.json"), []byte(`{"items":[`+strings.Join(items, ",")+`]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := servertest.Start(t, servertest.Config{
		Name: "json-server",
		Dir:  dir,
		Command: func(ports []int) []string {
			return []string{node, script, "--host", "127.0.0.1", "--port", strconv.Itoa(ports[0]), "--quiet", "db.json"}
		},
		Ready: servertest.HTTPProbe(http.MethodGet, "/db", "", http.StatusOK),
	})
	httpObject, err := os.ReadFile(filepath.Join(e2etest.ModuleRoot(t), "provider", "httpprovider", "testdata", "json_server_pages.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var indented []string
	for _, l := range strings.Split(string(httpObject), "\n") {
		if !strings.HasPrefix(l, "#") {
			indented = append(indented, "    "+l)
		}
	}
	cfg := "input:\n  paginated_partitions:\n    scope: json-server\n    partitions: [ items ]\n    checkpoint: { backend: memory }\n" +
		strings.Join(indented, "\n") + "\noutput:\n  drop: {}\n"
	path := filepath.Join(dir, "pages.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(e2etest.Connect(t), "tidemark", "probe", path)
	cmd.Env = e2etest.Env("JSON_SERVER_URL=" + srv.URL)
	res := e2etest.Run(t, e2etest.Patience, cmd)
	t.Logf("connect tidemark probe (json-server): exit %d\n%s", res.Code, res.Output)
	fs := parseProbe(t, res.Stdout)
	expectExit(t, fs, res.Code)
	expectFindings(t, fs, map[string]string{
		"pagination": "contradicted|page numbers (each grew by one: 1, 1), not token successors",
		"positions":  "supported|strictly increasing",
	})
	if res.Code != 1 {
		t.Errorf("exit %d, want 1", res.Code)
	}
}

// TestProbePaginationConfigs: the probe on each config/pagination/*.yaml
// against the Offset fake (ten pages of 10 rows, ids 10 apart; 1 apart for
// page_dense): the overlap check passes on a quiet source, catches a
// delete on a page already read in the walk it happens in (supported: the
// check did its job), and contradicts a successor that is not one row
// early (the overlap config with `- 1` removed: every traversal would
// restart, exit 1); offset_unproven says it claims no completeness, dense
// page numbers lean on the positions, keyset successors are recognised.
func TestProbePaginationConfigs(t *testing.T) {
	tests := []struct {
		name, config string
		step         int64
		deleteAt     int // delete row 20 when this offset request arrives (0: never)
		edit         [2]string
		want         string
		code         int
	}{
		{name: "offset_overlap", config: "offset_overlap", step: 10, want: "supported|the overlap check passed on 8 pages after the first: each began"},
		// The delete also makes the retry of walk 1 page 1 omit row 20,
		// which retries judges on its own: the exit code is not pinned.
		{name: "offset_overlap with a delete during walk 1", config: "offset_overlap", step: 10, deleteAt: 3, want: "supported|caught a shift once (walk 1 page 3", code: -1},
		{name: "offset_overlap with a successor not one row early", config: "offset_overlap", step: 10, edit: [2]string{"this.length() - 1", "this.length()"}, want: "contradicted|it failed in every walk", code: 1},
		{name: "offset_unproven", config: "offset_unproven", step: 10, want: "supported|claims no completeness"},
		{name: "page_dense", config: "page_dense", step: 1, want: "supported|offset over dense positions"},
		{name: "keyset", config: "keyset", step: 10, want: "supported|(keyset)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fake := fakeapi.NewOffset(t, tc.step)
			fake.Append(100)
			n := 0
			fake.OnRequest(func(r *http.Request) {
				if r.URL.Query().Has("offset") {
					n++
					if n == tc.deleteAt {
						fake.Delete(20)
					}
				}
			})
			path := paginationConfig(t, tc.config)
			if tc.edit[0] != "" {
				b, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Contains(b, []byte(tc.edit[0])) {
					t.Fatalf("%s has no %q", path, tc.edit[0])
				}
				path = filepath.Join(t.TempDir(), tc.config+".yaml")
				if err := os.WriteFile(path, bytes.Replace(b, []byte(tc.edit[0]), []byte(tc.edit[1]), 1), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.Command(e2etest.Connect(t), "tidemark", "probe", path)
			cmd.Env = e2etest.Env("ITEMS_API_URL="+fake.URL(), "ITEMS_PAGE_SIZE=10", noDynamoDB)
			res := e2etest.Run(t, e2etest.Patience, cmd)
			t.Logf("connect tidemark probe %s: exit %d\n%s", tc.name, res.Code, res.Output)
			fs := parseProbe(t, res.Stdout)
			expectExit(t, fs, res.Code)
			expectFindings(t, fs, map[string]string{"pagination": tc.want})
			if tc.code >= 0 && res.Code != tc.code {
				t.Errorf("exit %d, want %d", res.Code, tc.code)
			}
		})
	}
}
