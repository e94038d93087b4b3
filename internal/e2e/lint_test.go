//go:build unix

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/e2etest"
)

// `connect lint` and `connect run` of the binary share one validation: for
// every config of input/testdata/rejected (the same files
// input.TestLintReportsWhatRunRejects checks through the Go API), lint
// fails naming the field and run ends at init with the same message.
func TestBinaryLintReportsWhatRunRejects(t *testing.T) {
	dir := filepath.Join(e2etest.ModuleRoot(t), "input", "testdata", "rejected")
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no rejected configs in %s: %v", dir, err)
	}
	bin := e2etest.Connect(t)
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".yaml"), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			first, _, _ := strings.Cut(string(b), "\n")
			want := strings.TrimPrefix(first, "# want: ")
			// run lints first; --chilled goes on past lint errors, so the
			// component's construction (the run path) is what rejects it.
			for _, args := range [][]string{{"lint", f}, {"run", f}, {"run", "--chilled", f}} {
				res := e2etest.Run(t, e2etest.Patience, exec.Command(bin, args...))
				// Log lines quote the message in logfmt.
				said := strings.Contains(res.Output, want) || strings.Contains(res.Output, strings.ReplaceAll(want, `"`, `\"`))
				if res.Code == 0 || !said {
					t.Errorf("connect %s: exit code %d, want a failure saying %q; output:\n%s", strings.Join(args, " "), res.Code, want, e2etest.Tail(res.Output, 10))
				}
			}
		})
	}
}
