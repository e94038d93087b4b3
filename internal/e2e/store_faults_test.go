//go:build unix

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/dynalitetest"
	"github.com/tidemark/tidemark/internal/e2etest"
	"github.com/tidemark/tidemark/provider/simulated"
)

// storeFaultConfig reads four simulated partitions into a file with
// checkpoints in DynamoDB reached through a shield the test can hang, with
// a short call_timeout.
const storeFaultConfig = `
http:
  enabled: false
logger:
  level: info
  format: logfmt
shutdown_timeout: 1s
input:
  paginated_partitions:
    scope: e2e-store
    partitions: [ p0, p1, p2, p3 ]
    exit_when_complete: true
    max_pages_in_flight: 2
    poll_interval: 20ms
    store_backoff: 100ms
    fetch_backoff: 5ms
    frontier_publish_interval: 200ms
    checkpoint:
      backend: dynamodb
      dynamodb:
        table: ${TM_TABLE}
        endpoint: ${TM_ENDPOINT}
        create: true
        call_timeout: ${TM_CALL_TIMEOUT}
        max_backoff: 100ms
    simulated:
      events_per_partition: ${TM_EVENTS}
      page_size: 10
      latency: 10ms
      seed: 7
pipeline:
  processors:
    - sleep:
        duration: 2ms
output:
  file:
    path: ${TM_OUT}
    codec: lines
`

const storeFaultEvents = 300 // per partition

const storeCallTimeout = time.Second

func startStoreFaultRun(t *testing.T, endpoint, table, out string) *e2etest.Proc {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "store.yaml")
	if err := os.WriteFile(cfg, []byte(storeFaultConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(e2etest.Connect(t), "run", cfg)
	cmd.Env = e2etest.Env(
		"TM_ENDPOINT="+endpoint, "TM_TABLE="+table, "TM_OUT="+out,
		"TM_EVENTS="+strconv.Itoa(storeFaultEvents), "TM_CALL_TIMEOUT="+storeCallTimeout.String(),
	)
	return e2etest.Start(t, "connect", cmd)
}

// requireAllDelivered checks that the file at out holds every simulated
// event of the four partitions.
func requireAllDelivered(t *testing.T, out string) {
	t.Helper()
	ids, torn := delivered(t, out)
	var missing []string
	for _, part := range partitions {
		for pos := int64(1); pos <= storeFaultEvents; pos++ {
			if ids[simulated.EventID(part, pos)] == 0 {
				missing = append(missing, simulated.EventID(part, pos))
			}
		}
	}
	if len(missing) > 0 || torn > 0 {
		t.Fatalf("%d events never reached the output (e.g. %v), %d torn lines", len(missing), missing[:min(10, len(missing))], torn)
	}
}

// A DynamoDB that accepts requests and answers none for longer than the
// call timeout is reported by a warning naming the operation and the
// partition, and the input resumes by itself once the store answers
// again: every event is delivered and the run ends by itself.
func TestDynamoDBHangThenRecover(t *testing.T) {
	tb := dynalitetest.NewTable(t)
	sh := newShield(t, tb.Endpoint)
	out := filepath.Join(t.TempDir(), "out.jsonl")
	p := startStoreFaultRun(t, sh.url, tb.Name, out)

	e2etest.WaitFor(t, e2etest.Patience, "the first events", func() (bool, string) {
		n := lines(out)
		return n >= 100, fmt.Sprintf("%d lines", n)
	}, p.Running)
	before := p.Out.Len()
	sh.hang()
	hungAt := time.Now()
	var warning string
	e2etest.WaitFor(t, e2etest.Patience, "a warning about the hung store", func() (bool, string) {
		for _, line := range strings.Split(p.Out.Since(before), "\n") {
			if strings.Contains(line, "level=warn") && strings.Contains(line, "got no answer within "+storeCallTimeout.String()) && strings.Contains(line, "Partition p") {
				warning = line
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d requests held", sh.heldRequests())
	}, p.Running)
	warnedAfter := time.Since(hungAt)
	// Hang on for several deadlines in a row: calls retried by the input
	// time out again.
	e2etest.WaitFor(t, e2etest.Patience, "more timeouts after the first", func() (bool, string) {
		n := strings.Count(p.Out.Since(before), "got no answer within")
		return n >= 12, fmt.Sprintf("%d timeouts logged, %d requests held", n, sh.heldRequests())
	}, p.Running)
	held, linesAtRelease := sh.heldRequests(), lines(out)
	hungFor := time.Since(hungAt)
	sh.release()
	t.Logf("store hung for %s (%d requests held, %d lines written); first warning after %s: %s", hungFor.Round(time.Millisecond), held, linesAtRelease, warnedAfter.Round(time.Millisecond), warning)

	if err := p.Wait(2 * e2etest.Patience); err != nil {
		t.Fatalf("the run did not end by itself after the store recovered: %v", err)
	}
	requireAllDelivered(t, out)
}

// A DynamoDB that is down when the input starts does not end the process:
// Connect fails with the reason, Benthos connects again with back-off, and
// once the store is up the run reads everything.
func TestDynamoDBDownAtStartThenUp(t *testing.T) {
	tb := dynalitetest.NewTable(t)
	addr := fmt.Sprintf("127.0.0.1:%d", e2etest.FreePort(t))
	out := filepath.Join(t.TempDir(), "out.jsonl")
	p := startStoreFaultRun(t, "http://"+addr, tb.Name, out)

	e2etest.WaitFor(t, e2etest.Patience, "two failed connects saying why", func() (bool, string) {
		n := p.Out.Count("checkpoint store (DynamoDB table " + tb.Name + ") is not reachable or not ready, retrying")
		return n >= 2, fmt.Sprintf("%d failed connects logged", n)
	}, p.Running)
	newShieldAt(t, tb.Endpoint, addr)
	if err := p.Wait(2 * e2etest.Patience); err != nil {
		t.Fatalf("the run did not end by itself after the store came up: %v", err)
	}
	requireAllDelivered(t, out)
}
