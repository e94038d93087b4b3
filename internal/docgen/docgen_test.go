package docgen_test

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/docgen"
	"github.com/tidemark/tidemark/internal/promexport"
	_ "github.com/tidemark/tidemark/plugin"
)

// The binary registers the prometheus exporter (cmd/connect), the plugin
// package does not: the pages document what the binary has.
func init() {
	if err := promexport.Register(service.GlobalEnvironment()); err != nil {
		panic(err)
	}
}

// TestDocsAreCurrent fails when docs/ differs from what the config specs
// generate: run `make docs` and commit the result.
func TestDocsAreCurrent(t *testing.T) {
	pages, err := docgen.Render(service.GlobalEnvironment())
	require.NoError(t, err)
	dir := filepath.Join("..", "..", "docs")
	var want []string
	for name, body := range pages {
		want = append(want, name)
		got, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err, "docs/%s is missing: run `make docs`", name)
		require.Equal(t, string(body), string(got), "docs/%s is stale: run `make docs` and commit it", name)
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var have []string
	for _, e := range entries {
		have = append(have, e.Name())
	}
	want = append(want, docgen.HandWritten...)
	sort.Strings(want)
	require.Equal(t, want, have, "docs/ holds pages no component generates")
}

func TestEveryFieldHasADescription(t *testing.T) {
	env := service.GlobalEnvironment()
	check := func(typ string) func(string, *service.ConfigView) {
		return func(name string, v *service.ConfigView) {
			for _, n := range docgen.Components[typ] {
				if n != name {
					continue
				}
				data, err := v.TemplateData()
				require.NoError(t, err)
				require.NotEmpty(t, data.Summary, "%s %s has no summary", typ, name)
				for _, f := range data.Fields {
					require.NotEmpty(t, f.Description, "%s %s: field %s has no description", typ, name, f.FullName)
					if f.Type != "object" {
						require.True(t, len(f.Examples) > 0 || f.DefaultMarshalled != "", "%s %s: field %s has neither an example nor a default", typ, name, f.FullName)
					}
				}
			}
		}
	}
	env.WalkInputs(check("input"))
	env.WalkProcessors(check("processor"))
	env.WalkCaches(check("cache"))
	env.WalkMetrics(check("metrics"))
}

// Every enumerated field of a tidemark component documents each of its
// values with what it promises, and the generated page shows them.
func TestEveryEnumeratedFieldListsItsValuesAndPromises(t *testing.T) {
	env := service.GlobalEnvironment()
	pages, err := docgen.Render(env)
	require.NoError(t, err)
	enums := 0
	check := func(typ string) func(string, *service.ConfigView) {
		return func(name string, v *service.ConfigView) {
			for _, n := range docgen.Components[typ] {
				if n != name {
					continue
				}
				data, err := v.TemplateData()
				require.NoError(t, err)
				page := string(pages[typ+"_"+name+".md"])
				for _, f := range data.Fields {
					if len(f.Options) > 0 && len(f.AnnotatedOptions) == 0 {
						t.Errorf("%s %s: field %s lists values %v without saying what each promises", typ, name, f.FullName, f.Options)
					}
					for _, o := range f.AnnotatedOptions {
						enums++
						assert.NotEmpty(t, strings.TrimSpace(o[1]), "%s: value %s has no summary", f.FullName, o[0])
						assert.Contains(t, page, "| `"+o[0]+"` | "+o[1]+" |", "%s: value %s is not in the generated page", f.FullName, o[0])
					}
				}
			}
		}
	}
	env.WalkInputs(check("input"))
	env.WalkProcessors(check("processor"))
	env.WalkCaches(check("cache"))
	env.WalkMetrics(check("metrics"))
	require.Greater(t, enums, 20, "the contract's enumerations are walked")
}
