//go:build unix

package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
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

// kinesalite is kinesalite 3.3.3 (the pinned npm package) started through
// scripts/kinesalite-server.js, which binds 127.0.0.1 and moves the
// server's clock 5 minutes forward on SIGUSR2 (every iterator handed out
// before then expires).
type kinesalite struct {
	*servertest.Server
	t        *testing.T
	expiries int               // clock moves so far
	shardOf  map[string]string // data -> the shard PutRecords put it in
}

func startKinesalite(t *testing.T) *kinesalite {
	node, _ := servertest.NodeScript(t, "kinesalite", "index.js")
	script := filepath.Join(servertest.ModuleRoot(t), "scripts", "kinesalite-server.js")
	srv := servertest.Start(t, servertest.Config{
		Name: "kinesalite",
		Command: func(ports []int) []string {
			return []string{node, script, "--host", "127.0.0.1", "--port", strconv.Itoa(ports[0]), "--createStreamMs", "0", "--deleteStreamMs", "0", "--updateStreamMs", "0"}
		},
		Ready: func(ctx context.Context, base string) error {
			_, err := kinesisCall(ctx, base, "ListStreams", `{}`)
			return err
		},
	})
	return &kinesalite{Server: srv, t: t, shardOf: map[string]string{}}
}

// createStream creates a stream of n shards and waits until it is active.
func (k *kinesalite) createStream(stream string, n int) {
	k.t.Helper()
	k.call("CreateStream", fmt.Sprintf(`{"StreamName":%q,"ShardCount":%d}`, stream, n))
	k.waitActive(stream)
}

func (k *kinesalite) waitActive(stream string) {
	k.t.Helper()
	e2etest.WaitFor(k.t, e2etest.Patience, "the stream is active", func() (bool, string) {
		b := k.call("DescribeStreamSummary", fmt.Sprintf(`{"StreamName":%q}`, stream))
		return bytes.Contains(b, []byte(`"StreamStatus":"ACTIVE"`)), string(b)
	})
}

// kinesisEnv is the example's environment against endpoint, with pages of
// 10 records and a discovery every second.
func kinesisEnv(t *testing.T, tb dynalitetest.Table, endpoint, stream, out string) []string {
	return e2etest.Env(
		"KINESIS_ENDPOINT="+endpoint, "KINESIS_STREAM="+stream, "KINESIS_PAGE_SIZE=10", "KINESIS_OUTPUT="+out,
		"KINESIS_POLL_INTERVAL=50ms", "KINESIS_READS_PER_SECOND=1000", "KINESIS_DISCOVERY_INTERVAL=1s",
		"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=local", "AWS_SECRET_ACCESS_KEY=local",
		"TIDEMARK_TABLE="+tb.Name, "TIDEMARK_CREATE_TABLE=true", "TIDEMARK_DYNAMODB_ENDPOINT="+dynaliteShield(t, tb.Endpoint),
	)
}

// kinesisCall makes one Kinesis API call. kinesalite requires an
// Authorization header but does not verify the signature (the provider's
// signing is verified against the SDK's signer in provider/httpprovider).
func kinesisCall(ctx context.Context, base, op, body string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/", strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.1")
	req.Header.Set("X-Amz-Target", "Kinesis_20131202."+op)
	req.Header.Set("X-Amz-Date", time.Now().UTC().Format("20060102T150405Z"))
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=local/20260101/us-east-1/kinesis/aws4_request, SignedHeaders=host;x-amz-date, Signature=00")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: HTTP %d: %s", op, resp.StatusCode, b)
	}
	return b, nil
}

func (k *kinesalite) call(op, body string) []byte {
	k.t.Helper()
	b, err := kinesisCall(context.Background(), k.URL, op, body)
	if err != nil {
		k.t.Fatal(err)
	}
	return b
}

// put appends records data-<from>..data-<to-1> to the stream's one shard
// and returns their sequence numbers by data.
func (k *kinesalite) put(stream string, from, to int) map[string]string {
	k.t.Helper()
	seqs := map[string]string{}
	for start := from; start < to; start += 100 {
		var recs []string
		var datas []string
		for i := start; i < min(start+100, to); i++ {
			d := fmt.Sprintf("data-%04d", i)
			datas = append(datas, d)
			recs = append(recs, fmt.Sprintf(`{"Data":%q,"PartitionKey":"pk-%d"}`, base64.StdEncoding.EncodeToString([]byte(d)), i%7))
		}
		b := k.call("PutRecords", fmt.Sprintf(`{"StreamName":%q,"Records":[%s]}`, stream, strings.Join(recs, ",")))
		var out struct {
			FailedRecordCount int
			Records           []struct{ SequenceNumber, ShardId string }
		}
		if err := json.Unmarshal(b, &out); err != nil || out.FailedRecordCount != 0 || len(out.Records) != len(datas) {
			k.t.Fatalf("PutRecords: %s (%v)", b, err)
		}
		for i, r := range out.Records {
			seqs[datas[i]] = r.SequenceNumber
			k.shardOf[datas[i]] = r.ShardId
		}
	}
	return seqs
}

// expireIterators moves kinesalite's clock past the iterators' lifetime.
func (k *kinesalite) expireIterators() {
	k.t.Helper()
	if err := k.Signal(syscall.SIGUSR2); err != nil {
		k.t.Fatal(err)
	}
	// The signal is handled asynchronously: an iterator handed out now
	// must already be expired for GetRecords. Wait for the server's own
	// report of it.
	e2etest.WaitFor(k.t, e2etest.Patience, "kinesalite moved its clock", func() (bool, string) {
		n := strings.Count(k.Output(), "clock moved forward")
		return n > k.expiries, fmt.Sprintf("%d clock moves", n)
	})
	k.expiries++
}

// kinesisLine is one line of the example's output.
type kinesisLine struct {
	Shard          string `json:"shard"`
	SequenceNumber string `json:"sequence_number"`
	Data           string `json:"data"`
}

func kinesisLines(t *testing.T, path string) ([]kinesisLine, int) {
	return decodeLines(t, path, func(l kinesisLine) bool { return l.Data != "" })
}

// TestExampleKinesisShardSurvivesKill9AndExpiredIterators runs
// http_kinesis_shard.yaml against kinesalite: a stream of one shard with
// 300 records, read in pages of 10 through GetShardIterator (the bootstrap)
// and GetRecords. Run 1 is killed with SIGKILL mid-shard; then every
// iterator handed out so far expires (the server's clock moves 5 minutes
// on), so run 2's stored cursor is refused with ExpiredIteratorException
// and the bootstrap resumes AFTER_SEQUENCE_NUMBER the durable applied
// sequence number: nothing durably applied before the kill is printed again,
// nothing is missing. At the head, the polled iterator expires again and
// the records put afterwards arrive all the same. The checkpoint's applied
// position is the last record's 56-digit sequence number, a decimal, and
// its applied id that record's id.
func TestExampleKinesisShardSurvivesKill9AndExpiredIterators(t *testing.T) {
	tb := dynalitetest.NewTable(t)
	k := startKinesalite(t)
	const stream = "audit"
	k.createStream(stream, 1)
	seqs := k.put(stream, 0, 300)
	for d, s := range seqs {
		if len(s) < 56 {
			t.Fatalf("record %s has sequence number %q: shorter than Kinesis's 56 digits", d, s)
		}
	}

	// Requests cross a link with 20 ms of latency, so run 1 is still
	// reading when it is killed.
	_, link := newGate(t, k.URL, 20*time.Millisecond)
	out := filepath.Join(t.TempDir(), "records.jsonl")
	env := e2etest.Env(
		"KINESIS_ENDPOINT="+link, "KINESIS_STREAM="+stream, "KINESIS_PAGE_SIZE=10", "KINESIS_OUTPUT="+out,
		"KINESIS_POLL_INTERVAL=50ms", "KINESIS_READS_PER_SECOND=1000",
		"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=local", "AWS_SECRET_ACCESS_KEY=local",
		"TIDEMARK_TABLE="+tb.Name, "TIDEMARK_CREATE_TABLE=true", "TIDEMARK_DYNAMODB_ENDPOINT="+dynaliteShield(t, tb.Endpoint),
	)
	bin := e2etest.Connect(t)
	printed := func() map[string]int {
		ls, _ := kinesisLines(t, out)
		got := map[string]int{}
		for _, l := range ls {
			if l.Shard != "shardId-000000000000" || seqs[l.Data] != "" && seqs[l.Data] != l.SequenceNumber {
				t.Fatalf("line %+v: record %s has sequence number %s", l, l.Data, seqs[l.Data])
			}
			got[l.Data]++
		}
		return got
	}
	st, err := dynamostore.NewDynamoStore(context.Background(), dynamostore.DynamoConfig{Table: tb.Name, Endpoint: tb.Endpoint})
	if err != nil {
		t.Fatal(err)
	}
	key := store.Key{Scope: "kinesis-shards", Partition: "shardId-000000000000"}

	// Run 1, killed mid-shard.
	cmd := exec.Command(bin, "run", "--log.level", "warn", examplePath(t, "http_kinesis_shard"))
	cmd.Env = env
	first := e2etest.Start(t, "run 1", cmd)
	e2etest.WaitFor(t, e2etest.Patience, "run 1 printed some records", func() (bool, string) {
		return len(printed()) >= 60, fmt.Sprintf("%d records", len(printed()))
	}, first.Running)
	if err := first.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait(e2etest.Patience)
	afterKill := printed()
	if len(afterKill) >= 300 {
		t.Fatalf("run 1 had printed all %d records before the kill: the test proved nothing", len(afterKill))
	}
	cp, err := st.LoadCheckpoint(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if !cp.HasApplied || cp.Applied.Kind != coord.KindDecimal {
		t.Fatalf("after the kill: checkpoint applied %v (kind %s); want a decimal sequence number", cp.Applied, cp.Applied.Kind)
	}
	durable := cp.Applied

	// Every iterator handed out so far expires, the stored one included.
	k.expireIterators()

	// Run 2 resumes after the durable applied sequence number.
	cmd = exec.Command(bin, "run", "--log.level", "warn", examplePath(t, "http_kinesis_shard"))
	cmd.Env = env
	second := e2etest.Start(t, "run 2", cmd)
	e2etest.WaitFor(t, e2etest.Patience, "run 2 printed every record", func() (bool, string) {
		return len(printed()) == 300, fmt.Sprintf("%d of 300 records", len(printed()))
	}, second.Running)
	if n := second.Out.Count("ExpiredIteratorException"); n == 0 {
		t.Fatalf("run 2 never met an expired iterator: the test proved nothing\n%s", second.Out.Tail(40))
	}
	got := printed()
	for d, s := range seqs {
		p, err := coord.DecimalPosition(s)
		if err != nil {
			t.Fatal(err)
		}
		if !durable.Less(p) && got[d] != 1 {
			t.Errorf("record %s (sequence %s, at or before the durable applied %s) printed %d times; want once: the restart resumes after the applied position", d, s, durable, got[d])
		}
	}

	// At the head the polled iterator expires too: records put after that
	// arrive all the same.
	e2etest.WaitFor(t, e2etest.Patience, "run 2 promoted the last page", func() (bool, string) {
		cp, err := st.LoadCheckpoint(context.Background(), key)
		return err == nil && cp.AppliedID == seqs["data-0299"], fmt.Sprintf("applied %s (id %q), %v", cp.Applied, cp.AppliedID, err)
	}, second.Running)
	expiredBefore := second.Out.Count("ExpiredIteratorException")
	k.expireIterators()
	// A GetRecords in flight while the clock moves hands out an iterator
	// issued after the move, which has not expired; on a busy machine that
	// can be the one the shard then polls with. Move the clock again until
	// the head poll meets an expired iterator.
	movedAt := time.Now()
	e2etest.WaitFor(t, e2etest.Patience, "run 2 met the expired head iterator", func() (bool, string) {
		n := second.Out.Count("ExpiredIteratorException")
		if n == expiredBefore && time.Since(movedAt) > 5*time.Second {
			k.expireIterators()
			movedAt = time.Now()
		}
		return n > expiredBefore, fmt.Sprintf("%d expiries", n)
	}, second.Running)
	more := k.put(stream, 300, 320)
	for d, s := range more {
		seqs[d] = s
	}
	e2etest.WaitFor(t, e2etest.Patience, "run 2 printed the records put after the expiry", func() (bool, string) {
		return len(printed()) == 320, fmt.Sprintf("%d of 320 records", len(printed()))
	}, second.Running)
	e2etest.WaitFor(t, e2etest.Patience, "the last record is durably applied", func() (bool, string) {
		cp, err := st.LoadCheckpoint(context.Background(), key)
		return err == nil && cp.AppliedID == seqs["data-0319"], fmt.Sprintf("applied %s (id %q), %v", cp.Applied, cp.AppliedID, err)
	}, second.Running)
	if !second.Stop(10 * time.Second) {
		t.Log("run 2 did not stop gracefully; killed")
	}

	_, torn := kinesisLines(t, out)
	if torn > 1 {
		t.Fatalf("%d torn lines: only the line a kill interrupted may be torn", torn)
	}
	cp, err = st.LoadCheckpoint(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	last, err := coord.DecimalPosition(seqs["data-0319"])
	if err != nil {
		t.Fatal(err)
	}
	if cp.Applied != last || cp.AppliedID != seqs["data-0319"] || cp.Parked != "" {
		t.Errorf("checkpoint applied %s (id %q) parked %q; want the last record %s", cp.Applied, cp.AppliedID, cp.Parked, last)
	}
	t.Logf("run 1 printed %d records before the kill (durable through %s); %d lines in all", len(afterKill), durable, sum(printed()))
}

// sparseShards is a proxy in front of kinesalite that answers GetRecords
// the way AWS documents it may for a sparse range of a shard: "If there are
// no records available in the portion of the shard that the iterator
// points to, GetRecords returns an empty list. It might take multiple calls
// to get to a portion of the shard that contains records." Every iterator
// kinesalite hands out first answers an empty page, behind the head
// (MillisBehindLatest 1000), whose NextShardIterator ("sparse:" and the
// iterator) leads on to kinesalite's own answer. The same iterator asked
// again answers the same empty page: only following NextShardIterator
// reaches the records.
func sparseShards(t *testing.T, upstream string) (string, *atomic.Int64) {
	target, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	var empties atomic.Int64
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var req struct{ ShardIterator string }
		if r.Header.Get("X-Amz-Target") == "Kinesis_20131202.GetRecords" && json.Unmarshal(body, &req) == nil {
			if rest, ok := strings.CutPrefix(req.ShardIterator, "sparse:"); ok {
				// Past the sparse portion: kinesalite's own answer.
				body = bytes.Replace(body, []byte(req.ShardIterator), []byte(rest), 1)
			} else {
				empties.Add(1)
				w.Header().Set("Content-Type", "application/x-amz-json-1.1")
				fmt.Fprintf(w, `{"Records":[],"NextShardIterator":%q,"MillisBehindLatest":1000}`, "sparse:"+req.ShardIterator)
				return
			}
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &empties
}

// TestExampleKinesisShardFollowsEmptyPagesBehindTheHead runs
// http_kinesis_shard.yaml against a shard of 60 records behind a proxy that
// answers every iterator's first GetRecords with an empty page behind the
// head (sparseShards). The example follows each empty page's
// NextShardIterator (empty_page: follow_successor) and prints every record
// once; re-polling the same iterator (empty_page: no_evidence) printed none.
func TestExampleKinesisShardFollowsEmptyPagesBehindTheHead(t *testing.T) {
	tb := dynalitetest.NewTable(t)
	k := startKinesalite(t)
	const stream = "sparse"
	k.createStream(stream, 1)
	seqs := k.put(stream, 0, 60)
	link, empties := sparseShards(t, k.URL)

	out := filepath.Join(t.TempDir(), "records.jsonl")
	cmd := exec.Command(e2etest.Connect(t), "run", "--log.level", "warn", examplePath(t, "http_kinesis_shard"))
	cmd.Env = kinesisEnv(t, tb, link, stream, out)
	run := e2etest.Start(t, "run", cmd)
	printed := func() map[string]int {
		ls, _ := kinesisLines(t, out)
		got := map[string]int{}
		for _, l := range ls {
			got[l.Data]++
		}
		return got
	}
	e2etest.WaitFor(t, e2etest.Patience, "every record printed", func() (bool, string) {
		return len(printed()) == len(seqs), fmt.Sprintf("%d of %d records", len(printed()), len(seqs))
	}, run.Running)
	st, err := dynamostore.NewDynamoStore(context.Background(), dynamostore.DynamoConfig{Table: tb.Name, Endpoint: tb.Endpoint})
	if err != nil {
		t.Fatal(err)
	}
	key := store.Key{Scope: "kinesis-shards", Partition: "shardId-000000000000"}
	e2etest.WaitFor(t, e2etest.Patience, "the last record is durably applied", func() (bool, string) {
		cp, err := st.LoadCheckpoint(context.Background(), key)
		return err == nil && cp.AppliedID == seqs["data-0059"], fmt.Sprintf("applied %s (id %q), %v", cp.Applied, cp.AppliedID, err)
	}, run.Running)
	if !run.Stop(10 * time.Second) {
		t.Log("the run did not stop gracefully; killed")
	}
	for d, n := range printed() {
		if seqs[d] == "" || n != 1 {
			t.Errorf("record %s printed %d times; want once", d, n)
		}
	}
	if empties.Load() < 6 {
		t.Fatalf("the proxy answered %d empty pages; want one before each of the 6 pages at least: the test proved nothing", empties.Load())
	}
	t.Logf("%d empty pages behind the head followed", empties.Load())
}

// TestExampleKinesisShardSplitReadsChildrenAfterParent runs
// http_kinesis_shard.yaml (discovery every second, lineage parents_first)
// against a stream of one shard with 100 records. Mid-run the shard is
// split (SplitShard at the middle of the hash key range) and 100 more
// records are put, into the two children. Every record of the parent and
// of the children is printed, and every parent record before any child
// record: the children are discovered and read only once the parent is
// read to its end (sealed: no NextShardIterator).
func TestExampleKinesisShardSplitReadsChildrenAfterParent(t *testing.T) {
	tb := dynalitetest.NewTable(t)
	k := startKinesalite(t)
	const stream = "split"
	k.createStream(stream, 1)
	seqs := k.put(stream, 0, 100)

	_, link := newGate(t, k.URL, 10*time.Millisecond)
	out := filepath.Join(t.TempDir(), "records.jsonl")
	cmd := exec.Command(e2etest.Connect(t), "run", "--log.level", "warn", examplePath(t, "http_kinesis_shard"))
	cmd.Env = kinesisEnv(t, tb, link, stream, out)
	run := e2etest.Start(t, "run", cmd)
	lines := func() []kinesisLine {
		ls, _ := kinesisLines(t, out)
		return ls
	}
	e2etest.WaitFor(t, e2etest.Patience, "the parent's first records printed", func() (bool, string) {
		return len(lines()) >= 30, fmt.Sprintf("%d lines", len(lines()))
	}, run.Running)

	const parent = "shardId-000000000000"
	k.call("SplitShard", fmt.Sprintf(`{"StreamName":%q,"ShardToSplit":%q,"NewStartingHashKey":"170141183460469231731687303715884105728"}`, stream, parent))
	k.waitActive(stream)
	for d, s := range k.put(stream, 100, 200) {
		seqs[d] = s
	}
	children := map[string]bool{}
	for i := 100; i < 200; i++ {
		sh := k.shardOf[fmt.Sprintf("data-%04d", i)]
		if sh == parent {
			t.Fatalf("record %d went to the parent after the split", i)
		}
		children[sh] = true
	}
	if len(children) != 2 {
		t.Fatalf("the records after the split went to shards %v; want the two children", children)
	}

	e2etest.WaitFor(t, e2etest.Patience, "every record printed", func() (bool, string) {
		seen := map[string]bool{}
		for _, l := range lines() {
			seen[l.Data] = true
		}
		return len(seen) == 200, fmt.Sprintf("%d of 200 records", len(seen))
	}, run.Running)
	if !run.Stop(10 * time.Second) {
		t.Log("the run did not stop gracefully; killed")
	}

	lastParent, firstChild := -1, -1
	for i, l := range lines() {
		if want := k.shardOf[l.Data]; l.Shard != want || seqs[l.Data] != l.SequenceNumber {
			t.Fatalf("line %d %+v: record %s is in shard %s with sequence number %s", i, l, l.Data, want, seqs[l.Data])
		}
		if l.Shard == parent {
			lastParent = i
		} else if firstChild < 0 {
			firstChild = i
		}
	}
	if firstChild < 0 || lastParent > firstChild {
		t.Fatalf("the last parent record is line %d, the first child record line %d: the children must be read after the parent", lastParent, firstChild)
	}
	t.Logf("parent records on lines 0-%d, children's from line %d; %d lines", lastParent, firstChild, len(lines()))
}
