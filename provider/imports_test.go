package provider_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// imports lists the packages the non-test Go files of dir import.
func imports(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, e.Name()), nil, parser.ImportsOnly)
		require.NoError(t, err)
		for _, imp := range f.Imports {
			p, err := strconv.Unquote(imp.Path.Value)
			require.NoError(t, err)
			out = append(out, p)
		}
	}
	require.NotEmpty(t, out, "no imports read in %s", dir)
	return out
}

const module = "github.com/tidemark/tidemark/"

// TestInputImportsNoConcreteProvider: the input's config one-of comes from
// the registry; no concrete provider is linked in by the input itself.
func TestInputImportsNoConcreteProvider(t *testing.T) {
	for _, p := range imports(t, "../input") {
		require.NotContains(t, []string{module + "provider/simulated", module + "provider/httpprovider", module + "examples/notesprovider"}, p)
	}
}

// TestExamplesUseThePublicSDKOnly: the guide's provider and the simulated
// provider import no tidemark package but the public SDK (the contract and
// its registry), as a provider in another module must.
func TestExamplesUseThePublicSDKOnly(t *testing.T) {
	for _, dir := range []string{"../examples/notesprovider", "../provider/simulated"} {
		for _, p := range imports(t, dir) {
			if strings.HasPrefix(p, module) {
				require.Contains(t, []string{module + "provider", module + "provider/registry"}, p, "%s imports %s", dir, p)
			}
		}
	}
}

// TestTheSDKImportsNothingOfTheCore: the port, the values a provider
// returns, the contract it declares and the coordinates they use are
// defined in this package, not borrowed from the core: package provider
// imports no tidemark package (the core converts at its boundary,
// internal/sdkcoord), so the core can change without changing the SDK.
func TestTheSDKImportsNothingOfTheCore(t *testing.T) {
	for _, p := range imports(t, ".") {
		require.False(t, strings.HasPrefix(p, module), "package provider imports %s", p)
	}
}
