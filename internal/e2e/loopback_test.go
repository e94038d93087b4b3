//go:build unix

package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/tidemark/tidemark/internal/e2etest"
)

// envDefault is Benthos's environment interpolation ${NAME:default}; a
// shipped config is judged as it runs with nothing set.
var envDefault = regexp.MustCompile(`\$\{[A-Za-z_][A-Za-z0-9_]*(?::([^}]*))?\}`)

// Every shipped pipeline (config/examples/ and config/pagination/) keeps
// Benthos's HTTP API (health checks, /metrics) off by default and, when
// enabled, on loopback: a config without an `http` block would bind
// 0.0.0.0:4195, reachable from the network.
func TestShippedConfigsBindLoopback(t *testing.T) {
	root := e2etest.ModuleRoot(t)
	var files []string
	for _, dir := range []string{"config/examples", "config/pagination"} {
		m, err := filepath.Glob(filepath.Join(root, dir, "*.yaml"))
		require.NoError(t, err)
		for _, f := range m {
			if !strings.HasSuffix(f, "_benthos_test.yaml") {
				files = append(files, f)
			}
		}
	}
	require.NotEmpty(t, files)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			raw, err := os.ReadFile(f)
			require.NoError(t, err)
			text := envDefault.ReplaceAllStringFunc(string(raw), func(ref string) string {
				return envDefault.FindStringSubmatch(ref)[1]
			})
			var conf struct {
				HTTP *struct {
					Enabled *bool  `yaml:"enabled"`
					Address string `yaml:"address"`
				} `yaml:"http"`
			}
			require.NoError(t, yaml.Unmarshal([]byte(text), &conf))
			require.NotNil(t, conf.HTTP, "no http block: Benthos would bind 0.0.0.0:4195")
			require.NotNil(t, conf.HTTP.Enabled, "http.enabled is not set")
			assert.False(t, *conf.HTTP.Enabled, "the HTTP API is on by default")
			assert.True(t, strings.HasPrefix(conf.HTTP.Address, "127.0.0.1:"), "http.address %q is not loopback", conf.HTTP.Address)
		})
	}
}
