package layers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const module = "github.com/tidemark/tidemark/"

// core lists the packages of the pure core, relative to the module root.
// mayBeAbsent marks a package another change adds (the check starts the
// day it exists).
var core = []struct {
	dir         string
	mayBeAbsent bool
}{
	{dir: "internal/chain"},
	{dir: "internal/reconcile"},
	{dir: "internal/lease"},
	{dir: "internal/membership"},
	{dir: "internal/frontier"},
	{dir: "internal/publish"},
	{dir: "internal/coord"},
	{dir: "internal/store"},
	{dir: "internal/redact"},
	// The boundary between the SDK's coordinates and the core's.
	{dir: "internal/sdkcoord"},
	// The provider SDK's port, values and contract (not its registry,
	// provider/registry, which is Benthos' edge).
	{dir: "provider"},
	{dir: "internal/instance", mayBeAbsent: true},
}

// forbidden reports whether a module may not be a dependency of the core.
func forbidden(modulePath string) bool {
	return strings.HasPrefix(modulePath, "github.com/redpanda-data/") || strings.HasPrefix(modulePath, "github.com/aws/")
}

type listed struct {
	ImportPath string
	Imports    []string
	Module     *struct{ Path string }
}

// goList returns the packages `go list -deps` lists for pkgs, by import
// path.
func goList(t *testing.T, pkgs ...string) map[string]listed {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", append([]string{"list", "-deps", "-json=ImportPath,Imports,Module"}, pkgs...)...)
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list: %s", stderr.String())
	all := map[string]listed{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else {
			require.NoError(t, err)
		}
		all[p.ImportPath] = p
	}
	require.NotEmpty(t, all)
	return all
}

// offending returns, for root, the import chain from root to the first
// package (breadth first) whose module is forbidden; nil when none is.
func offending(all map[string]listed, root string) []string {
	from := map[string]string{root: ""}
	queue := []string{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if m := all[p].Module; m != nil && forbidden(m.Path) {
			var chain []string
			for q := p; q != ""; q = from[q] {
				chain = append([]string{q}, chain...)
			}
			return chain
		}
		for _, imp := range all[p].Imports {
			if _, seen := from[imp]; !seen {
				from[imp] = p
				queue = append(queue, imp)
			}
		}
	}
	return nil
}

// TestThePureCoreImportsNoBenthosAndNoAWS: no package of the pure core
// depends, even transitively, on a module of Benthos (github.com/redpanda-data/)
// or of AWS (github.com/aws/); a failure names the import chain.
func TestThePureCoreImportsNoBenthosAndNoAWS(t *testing.T) {
	var roots []string
	for _, c := range core {
		if _, err := os.Stat(filepath.Join("../..", c.dir)); err != nil {
			require.True(t, c.mayBeAbsent && errors.Is(err, os.ErrNotExist), "core package %s: %v", c.dir, err)
			continue
		}
		roots = append(roots, module+c.dir)
	}
	all := goList(t, roots...)
	for _, r := range roots {
		require.Contains(t, all, r)
		chain := offending(all, r)
		require.Nil(t, chain, "%s depends on a forbidden module: %s", r, strings.Join(chain, " -> "))
	}
}

// TestTheLayerCheckFindsAnEdgeChain: the check is not vacuous; the input,
// an adapter, depends on Benthos, and the chain found starts at it and
// ends in a Benthos package.
func TestTheLayerCheckFindsAnEdgeChain(t *testing.T) {
	root := module + "input"
	chain := offending(goList(t, root), root)
	require.NotEmpty(t, chain)
	require.Equal(t, root, chain[0])
	require.True(t, strings.HasPrefix(chain[len(chain)-1], "github.com/redpanda-data/") || strings.HasPrefix(chain[len(chain)-1], "github.com/aws/"), "chain %v", chain)
}
