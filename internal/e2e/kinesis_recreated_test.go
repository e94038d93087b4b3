//go:build unix

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/dynalitetest"
	"github.com/tidemark/tidemark/internal/dynamostore"
	"github.com/tidemark/tidemark/internal/e2etest"
	"github.com/tidemark/tidemark/internal/store"
)

// creationTimestamp is the stream's StreamCreationTimestamp as
// DescribeStreamSummary answers it (kinesalite: whole seconds).
func (k *kinesalite) creationTimestamp(stream string) float64 {
	k.t.Helper()
	var out struct {
		StreamDescriptionSummary struct{ StreamCreationTimestamp float64 }
	}
	b := k.call("DescribeStreamSummary", fmt.Sprintf(`{"StreamName":%q}`, stream))
	if err := json.Unmarshal(b, &out); err != nil {
		k.t.Fatalf("DescribeStreamSummary: %s (%v)", b, err)
	}
	return out.StreamDescriptionSummary.StreamCreationTimestamp
}

// TestExampleKinesisShardRecreatedStream runs http_kinesis_shard.yaml
// (discovery every second, the stream's incarnation its
// StreamCreationTimestamp, checked every 500ms) against kinesalite: a
// stream of one shard with 20 records is read, then split (its 20 next
// records go to the two children, shardId-000000000001 and -2, read once
// the parent is complete). Then the stream is deleted and created again
// under the same name with three shards: their ids are shardId-000000000000
// (the old stream's sealed, complete parent) to -2 (its children, whose
// stored iterators and sequence numbers belong to the old stream), and 60
// records are put into them, shard 0 (whose id a complete shard of the
// old stream had) and another among them. Every record of the new
// stream is delivered, in its own shard: the complete shard 0 is reopened
// by its interval check and read from TRIM_HORIZON, never skipped as
// complete; shards 1 and 2 are reset into the new incarnation before any
// page of the new stream read through an old iterator is emitted.
func TestExampleKinesisShardRecreatedStream(t *testing.T) {
	tb := dynalitetest.NewTable(t)
	k := startKinesalite(t)
	const stream = "audit"
	k.createStream(stream, 1)
	k.put(stream, 0, 20)
	// Every request goes through the gate, which holds them while the
	// stream is deleted and created again (no request sees it missing).
	g := newCouchGate(t, k.URL)

	out := filepath.Join(t.TempDir(), "records.jsonl")
	cmd := exec.Command(e2etest.Connect(t), "run", "--log.level", "info", examplePath(t, "http_kinesis_shard"))
	cmd.Env = append(kinesisEnv(t, tb, g.url, stream, out), "KINESIS_VALIDATE_INTERVAL=500ms")
	run := e2etest.Start(t, "run", cmd)
	printed := func() map[string][]kinesisLine {
		ls, _ := kinesisLines(t, out)
		got := map[string][]kinesisLine{}
		for _, l := range ls {
			got[l.Data] = append(got[l.Data], l)
		}
		return got
	}
	waitPrinted := func(what string, from, to int) {
		e2etest.WaitFor(t, e2etest.Patience, what, func() (bool, string) {
			got := printed()
			var miss []string
			for i := from; i < to; i++ {
				if d := fmt.Sprintf("data-%04d", i); len(got[d]) == 0 {
					miss = append(miss, d)
				}
			}
			return len(miss) == 0, fmt.Sprintf("missing %v", miss)
		}, run.Running)
	}
	waitPrinted("the old stream's first 20 records printed", 0, 20)

	const parent = "shardId-000000000000"
	k.call("SplitShard", fmt.Sprintf(`{"StreamName":%q,"ShardToSplit":%q,"NewStartingHashKey":"170141183460469231731687303715884105728"}`, stream, parent))
	k.waitActive(stream)
	k.put(stream, 20, 40)
	waitPrinted("the children's records printed", 20, 40)
	st, err := dynamostore.NewDynamoStore(context.Background(), dynamostore.DynamoConfig{Table: tb.Name, Endpoint: tb.Endpoint})
	if err != nil {
		t.Fatal(err)
	}
	e2etest.WaitFor(t, e2etest.Patience, "the old stream's shard 0 durably complete", func() (bool, string) {
		cp, err := st.LoadCheckpoint(context.Background(), store.Key{Scope: "kinesis-shards", Partition: parent})
		return err == nil && cp.Complete && cp.Incarnation != "", fmt.Sprintf("checkpoint %+v, %v", cp, err)
	}, run.Running)

	// Delete and create the stream again, with no request in between.
	created := k.creationTimestamp(stream)
	g.set(true, false)
	k.call("DeleteStream", fmt.Sprintf(`{"StreamName":%q}`, stream))
	e2etest.WaitFor(t, e2etest.Patience, "the stream deleted", func() (bool, string) {
		b := k.call("ListStreams", `{}`)
		return !strings.Contains(string(b), `"`+stream+`"`), string(b)
	})
	// kinesalite's creation time has whole seconds: the new stream must
	// show another one.
	e2etest.WaitFor(t, e2etest.Patience, "a new second since the old stream's creation", func() (bool, string) {
		return float64(time.Now().Unix()) > created, fmt.Sprintf("created at %v", created)
	})
	k.createStream(stream, 3)
	if now := k.creationTimestamp(stream); now == created {
		t.Fatalf("the recreated stream has the old creation time %v: the test proves nothing", now)
	}
	k.put(stream, 100, 160)
	perShard := map[string]int{}
	for i := 100; i < 160; i++ {
		perShard[k.shardOf[fmt.Sprintf("data-%04d", i)]]++
	}
	if perShard[parent] == 0 || len(perShard) < 2 {
		t.Fatalf("the new stream's records went to shards %v; want some in %s (complete in the old stream) and in another", perShard, parent)
	}
	g.set(false, false)

	t.Cleanup(func() {
		if t.Failed() {
			for _, l := range strings.Split(run.Out.String(), "\n") {
				if strings.Contains(l, "shardId-000000000000") || strings.Contains(l, "embership") {
					t.Log(l)
				}
			}
		}
	})
	waitPrinted("every record of the new stream printed", 100, 160)
	if !run.Stop(10 * time.Second) {
		t.Log("the run did not stop gracefully; killed")
	}
	for d, ls := range printed() {
		for _, l := range ls {
			if want := k.shardOf[d]; l.Shard != want {
				t.Errorf("record %s printed as of shard %s; it is in %s", d, l.Shard, want)
			}
		}
	}
	if n := run.Out.Count("source incarnation changed"); n < 3 {
		t.Errorf("the log names %d incarnation changes; want one for each of the three shards:\n%s", n, run.Out.Tail(60))
	}
	if n := run.Out.Count("which is not a member of epoch"); n > 0 {
		t.Errorf("the membership was refused %d times for an incarnation change of a partition that left:\n%s", n, run.Out.Tail(60))
	}
	t.Logf("new stream's records by shard %v; %d incarnation changes logged", perShard, run.Out.Count("source incarnation changed"))
}
