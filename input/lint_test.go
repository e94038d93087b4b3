package input

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/require"
)

// RejectedConfig is one file of testdata/rejected: a pipeline whose
// paginated_partitions config `connect run` rejects, and the message (a
// substring, naming the field's path) both lint and run must give. The
// binary's lint and run are checked on the same files by internal/e2e.
type RejectedConfig struct {
	Name, Path, YAML, Want string
}

// RejectedConfigs reads testdata/rejected (dir is that directory).
func RejectedConfigs(t testing.TB, dir string) []RejectedConfig {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	var out []RejectedConfig
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		first, _, _ := strings.Cut(string(b), "\n")
		want, ok := strings.CutPrefix(first, "# want: ")
		require.True(t, ok, "%s: the first line must be '# want: <message>'", f)
		out = append(out, RejectedConfig{Name: strings.TrimSuffix(filepath.Base(f), ".yaml"), Path: f, YAML: string(b), Want: want})
	}
	return out
}

// Every value run rejects, lint reports, with the same message naming the
// field: negative or zero counts, unparsable and negative durations,
// duplicate partitions, an empty scope, a 2xx expired status, a short
// table name, a URL without a scheme.
func TestLintReportsWhatRunRejects(t *testing.T) {
	for _, tc := range RejectedConfigs(t, "testdata/rejected") {
		t.Run(tc.Name, func(t *testing.T) {
			// The run path: the components are built (FromParsed), no lint.
			sb := service.NewStreamBuilder()
			sb.DisableLinting()
			require.NoError(t, sb.SetYAML(tc.YAML))
			require.NoError(t, sb.SetLoggerYAML("level: none"))
			strm, err := sb.Build()
			require.NoError(t, err)
			// Run builds the components: a rejected config ends it at once
			// (an accepted one would run until the context ends).
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			err = strm.Run(ctx)
			require.Error(t, err, "run must reject it")
			require.Contains(t, err.Error(), tc.Want)

			// The lint path.
			err = service.NewStreamBuilder().SetYAML(tc.YAML)
			require.Error(t, err, "lint must report it")
			require.Contains(t, err.Error(), tc.Want)
		})
	}
}
