//go:build unix

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/e2etest"
	"github.com/tidemark/tidemark/internal/runstatus"
)

// With exit_when_complete, a partition that parks (every answer of p1 is
// malformed) no longer keeps the process alive for ever: the others
// complete, and after exit_when_parked_grace the binary exits with code
// runstatus.ExitCode, printing the park reason.
func TestExitWhenCompleteWithParkedPartitionFails(t *testing.T) {
	const cfg = `
http:
  enabled: false
logger:
  level: info
  format: logfmt
input:
  paginated_partitions:
    scope: e2e-exit
    partitions: [ p0, p1 ]
    exit_when_complete: true
    exit_when_parked_grace: 500ms
    fetch_retries: 0
    checkpoint:
      backend: memory
    simulated:
      events_per_partition: 20
      page_size: 10
      malformed: [ p1 ]
output:
  drop: {}
`
	path := filepath.Join(t.TempDir(), "exit.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	res := e2etest.Run(t, e2etest.Patience, exec.Command(e2etest.Connect(t), "run", path))
	if res.Code != runstatus.ExitCode {
		t.Fatalf("exit code %d, want %d; output:\n%s", res.Code, runstatus.ExitCode, e2etest.Tail(res.Output, 20))
	}
	want := "tidemark: partition p1 of scope e2e-exit is parked: malformed page after 1 attempt"
	if !strings.Contains(res.Stderr, want) {
		t.Fatalf("stderr does not list the park reason %q:\n%s", want, e2etest.Tail(res.Stderr, 20))
	}
	if strings.Contains(res.Stderr, "partition p0") {
		t.Fatalf("the complete partition p0 is listed as a failure:\n%s", e2etest.Tail(res.Stderr, 20))
	}
}
