package frontierrec

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The store port does not depend on the frontier core: the conversion
// between them lives here.
func TestStoreDoesNotImportTheFrontierCore(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/tidemark/tidemark/internal/store").CombinedOutput()
	require.NoError(t, err, "%s", out)
	for _, dep := range strings.Fields(string(out)) {
		require.NotEqual(t, "github.com/tidemark/tidemark/internal/frontier", dep, "internal/store depends on the frontier core")
	}
}
