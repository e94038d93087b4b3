//go:build unix

// Package e2e drives the real connect binary (cmd/connect) end to end:
// built by the test, run as a child process against dynalite, killed with
// SIGKILL, restarted. Run with ./scripts/with-dynalite go test ./internal/e2e/
// (without dynalite the tests skip; with CI or TIDEMARK_REQUIRE_DYNALITE set
// they fail).
//
// A restart after kill -9 of the binary mid-page loses nothing: an
// end-to-end test that really kills the process (the No loss invariant).
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/dynalitetest"
	"github.com/tidemark/tidemark/internal/dynamostore"
	"github.com/tidemark/tidemark/internal/e2etest"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/provider/simulated"
)

// killConfig is the pipeline under test: four simulated partitions with
// fetch latency, token rotation, shifted pages and transient errors,
// checkpoints in DynamoDB, every event written as one line to a file. A run
// from scratch takes a few seconds. Pages of 10 events leave the input as
// batches of 4, and a sleep in the pipeline makes delivery slower than
// fetching, so up to max_pages_in_flight pages per partition are in flight
// most of the time and a kill lands inside a page: some of its batches in
// the file, the page not promoted.
const killConfig = `
http:
  enabled: false
logger:
  level: ${TM_LOG_LEVEL:info}
  format: logfmt
shutdown_timeout: 1s
input:
  paginated_partitions:
    scope: e2e-kill
    partitions: [ p0, p1, p2, p3 ]
    exit_when_complete: true
    max_pages_in_flight: 4
    max_batch_size: 4
    poll_interval: 20ms
    store_backoff: 50ms
    fetch_backoff: 5ms
    frontier_publish_interval: 200ms
    checkpoint:
      backend: dynamodb
      dynamodb:
        table: ${TM_TABLE}
        endpoint: ${TIDEMARK_DYNAMODB_ENDPOINT}
        create: true
    simulated:
      events_per_partition: ${TM_EVENTS}
      page_size: 10
      latency: ${TM_LATENCY:40ms}
      seed: ${TM_SEED}
      rotate_tokens: true
      shift_rate: 0.2
      transient_error_rate: 0.05
pipeline:
  threads: 2
  processors:
    - sleep:
        duration: ${TM_SLEEP:10ms}
output:
  file:
    path: ${TM_OUT}
    codec: lines
`

var partitions = []string{"p0", "p1", "p2", "p3"}

const eventsPerPartition = 200

// startConnect starts one run of the pipeline; the test's cleanup kills it.
func startConnect(t *testing.T, bin, cfg, endpoint, table, out string, seed uint64, run int) *e2etest.Proc {
	t.Helper()
	cmd := exec.Command(bin, "run", cfg)
	cmd.Env = e2etest.Env(
		"TIDEMARK_DYNAMODB_ENDPOINT="+endpoint,
		"TM_TABLE="+table,
		"TM_OUT="+out,
		"TM_EVENTS="+strconv.Itoa(eventsPerPartition),
		"TM_SEED="+strconv.FormatUint(seed, 10),
	)
	return e2etest.Start(t, fmt.Sprintf("run %d", run), cmd)
}

// lines returns the number of complete lines in the output file.
func lines(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return bytes.Count(b, []byte("\n"))
}

// delivered reads the event ids written to one output file. A torn last
// line (a kill during a write) does not count: only what the file holds
// whole was delivered.
func delivered(t *testing.T, path string) (map[string]int, int) {
	t.Helper()
	return countLines(t, path, func(line []byte) string {
		var ev struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(line, &ev) != nil {
			return ""
		}
		return ev.ID
	})
}

// countLines counts the lines of the output file at path by the key keyOf
// gives each ("": a torn line, a kill during a write): what the file holds
// whole, by key, and the number of torn lines. A missing file holds
// nothing.
func countLines(t *testing.T, path string, keyOf func(line []byte) string) (map[string]int, int) {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return map[string]int{}, 0
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, torn := map[string]int{}, 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20) // a line as long as a page's payload
	for sc.Scan() {
		k := keyOf(sc.Bytes())
		if k == "" {
			torn++
			continue
		}
		got[k]++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return got, torn
}

func checkpoints(t *testing.T, st store.Store) map[string]store.Checkpoint {
	t.Helper()
	out := map[string]store.Checkpoint{}
	for _, p := range partitions {
		cp, err := st.LoadCheckpoint(context.Background(), store.Key{Scope: "e2e-kill", Partition: p})
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("checkpoint of %s: %v", p, err)
		}
		out[p] = cp
	}
	return out
}

// TestKill9 runs the binary, kills it with SIGKILL at seeded random moments
// while pages are in flight, restarts it each time, and finally lets it run
// to completion. The union of the event ids the file output holds across
// all runs must be every generated id, and every DynamoDB checkpoint must
// end at watermark N. At least one kill must land inside a page (events in
// the file past the durable checkpoint): when none of the random moments
// did, further runs are killed at a moment observed to be inside a page.
// TIDEMARK_E2E_SEED=<n> reruns one schedule.
func TestKill9(t *testing.T) {
	tb := dynalitetest.NewTable(t)
	seed := uint64(20260101)
	if s := os.Getenv("TIDEMARK_E2E_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("TIDEMARK_E2E_SEED: %v", err)
		}
		seed = v
	}
	t.Logf("seed %d (rerun: TIDEMARK_E2E_SEED=%d ./scripts/with-dynalite go test -run TestKill9 ./internal/e2e/)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0x6b696c6c))

	bin := e2etest.Connect(t)
	// The processes reach dynalite through the shield: a SIGKILL mid-request
	// would crash dynalite itself (see dynaliteShield).
	shield := dynaliteShield(t, tb.Endpoint)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "kill.yaml")
	if err := os.WriteFile(cfg, []byte(killConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := dynamostore.NewDynamoStore(context.Background(), dynamostore.DynamoConfig{Table: tb.Name, Endpoint: tb.Endpoint, Create: true})
	if err != nil {
		t.Fatal(err)
	}

	// ahead counts the events of ids past the durable applied boundary of
	// their partition in cps: written by pages not yet promoted.
	ahead := func(ids map[string]int, cps map[string]store.Checkpoint) int {
		n := 0
		for _, part := range partitions {
			cp := cps[part]
			for id := range ids {
				if pos, ok := positionOf(id, part); ok && (!cp.HasApplied || pos > cp.Applied.Int) {
					n++
				}
			}
		}
		return n
	}

	const kills = 6     // at random moments
	const targeted = 10 // at most, when no random kill landed inside a page
	union := map[string]int{}
	midPage, runs := 0, 0
	for i := 0; i < kills || (midPage == 0 && i < kills+targeted); i++ {
		out := filepath.Join(dir, fmt.Sprintf("run%d.jsonl", i))
		p := startConnect(t, bin, cfg, shield, tb.Name, out, seed, i)
		runs++
		// Wait for the first events of this run.
		e2etest.WaitFor(t, e2etest.Patience, fmt.Sprintf("the first output of run %d", i), func() (bool, string) {
			return lines(out) > 0 || p.Exited(), "no output yet"
		})
		var how string
		if i < kills {
			// A random moment.
			delay := time.Duration(20+rng.IntN(1000)) * time.Millisecond
			time.Sleep(delay)
			how = fmt.Sprintf("killed %s after its first output", delay)
		} else {
			// A moment inside a page: the file holds events the durable
			// checkpoints do not cover yet.
			e2etest.WaitFor(t, e2etest.Patience, fmt.Sprintf("run %d to write events past the durable checkpoints", i), func() (bool, string) {
				ids, _ := delivered(t, out)
				n := ahead(ids, checkpoints(t, st))
				return n > 0 || p.Exited(), fmt.Sprintf("%d events written, none past the durable checkpoints", len(ids))
			})
			how = "killed inside a page"
		}
		if p.Exited() {
			how = fmt.Sprintf("exited by itself (%v) before its kill", p.Err())
		} else {
			if err := p.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			<-p.Done()
			ws, ok := p.Cmd.ProcessState.Sys().(syscall.WaitStatus)
			switch {
			case ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL:
			case ok && ws.Exited() && ws.ExitStatus() == 0:
				// It completed (exit_when_complete) between the check above
				// and the signal: a clean end, not a kill.
				how = "exited by itself just before its kill"
			default:
				t.Fatalf("run %d did not die of SIGKILL: %v", i, p.Err())
			}
		}
		ids, torn := delivered(t, out)
		for id, c := range ids {
			union[id] += c
		}
		// Events written past the durable applied boundary: their pages were
		// in flight at the kill (the file got them, the checkpoint did not).
		cps := checkpoints(t, st)
		// No loss at the moment of the kill: every event at or below a
		// partition's durable applied boundary is in some file already.
		for _, part := range partitions {
			cp := cps[part]
			for pos := int64(1); cp.HasApplied && pos <= cp.Applied.Int; pos++ {
				if id := simulated.EventID(part, pos); union[id] == 0 {
					t.Fatalf("run %d: %s: the durable checkpoint (generation %d) is applied through %d, but event %s was never written to the output",
						i, part, cp.Generation, cp.Applied.Int, id)
				}
			}
		}
		var state []string
		for _, part := range partitions {
			cp := cps[part]
			state = append(state, fmt.Sprintf("%s gen %d applied %d", part, cp.Generation, cp.Applied.Int))
		}
		n := ahead(ids, cps)
		if n > 0 {
			midPage++
		}
		t.Logf("run %d: %s; %d events written (%d torn lines), %d of them past the durable checkpoints; %s",
			i, how, len(ids), torn, n, strings.Join(state, ", "))
	}
	// The last run goes to the end: exit_when_complete.
	out := filepath.Join(dir, "final.jsonl")
	p := startConnect(t, bin, cfg, shield, tb.Name, out, seed, runs)
	runs++
	if err := p.Wait(2 * e2etest.Patience); err != nil {
		t.Fatalf("final run: %v", err)
	}
	ids, torn := delivered(t, out)
	if torn > 0 {
		t.Fatalf("the final run, which was not killed, wrote %d torn lines", torn)
	}
	for id, c := range ids {
		union[id] += c
	}

	var missing []string
	total := 0
	for _, part := range partitions {
		for pos := int64(1); pos <= eventsPerPartition; pos++ {
			id := simulated.EventID(part, pos)
			if union[id] == 0 {
				missing = append(missing, id)
			}
		}
	}
	for _, c := range union {
		total += c
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		t.Fatalf("%d events never reached the file output across %d runs, e.g. %v", len(missing), runs, missing[:min(20, len(missing))])
	}
	if midPage == 0 {
		t.Fatal("no kill landed while pages were in flight, not even the targeted ones: the test proved nothing")
	}
	for part, cp := range checkpoints(t, st) {
		if cp.Watermark != coord.Integer(eventsPerPartition) || cp.Applied.Int != eventsPerPartition || cp.Parked != "" || cp.Generation <= 1 {
			t.Fatalf("%s: final checkpoint generation %d watermark %s applied %d parked %q; want watermark %d",
				part, cp.Generation, cp.Watermark, cp.Applied.Int, cp.Parked, eventsPerPartition)
		}
	}
	t.Logf("%d runs (%d killed mid-page): all %d events delivered, %d lines in total (%d duplicates); every checkpoint at watermark %d",
		runs, midPage, len(partitions)*eventsPerPartition, total, total-len(union), eventsPerPartition)
}

// positionOf parses the simulated id "<partition>-<position>".
func positionOf(id, part string) (int64, bool) {
	rest, ok := strings.CutPrefix(id, part+"-")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(rest, 10, 64)
	return n, err == nil
}
