package httpprovider

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/tidemark/tidemark/internal/e2etest"
	"github.com/tidemark/tidemark/provider"
)

// testSpec embeds the provider fields the way the paginated_partitions input
// does: an object field named "http".
func testSpec() *service.ConfigSpec {
	return service.NewConfigSpec().Field(service.NewObjectField("http", Fields()...))
}

// parseProvider parses a YAML document holding an `http:` object through
// the spec and builds the provider.
func parseProvider(t *testing.T, yaml string, res *service.Resources, logger *service.Logger) *Provider {
	t.Helper()
	p, err := tryParseProvider(yaml, res, logger)
	if err != nil {
		t.Fatalf("parsing provider config: %v\n%s", err, yaml)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	return p
}

func tryParseProvider(yaml string, res *service.Resources, logger *service.Logger) (*Provider, error) {
	conf, err := testSpec().ParseYAML(yaml, nil)
	if err != nil {
		return nil, err
	}
	if res == nil {
		res = service.MockResources()
	}
	return FromParsed(conf.Namespace("http"), res, logger)
}

// envRef matches Benthos's environment interpolation: ${NAME} and
// ${NAME:default}. spec.ParseYAML does not expand it (the config reader
// does), so tests expand it themselves.
var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(?::([^}]*))?\}`)

func expandEnv(t *testing.T, s string, vars map[string]string) string {
	t.Helper()
	return envRef.ReplaceAllStringFunc(s, func(ref string) string {
		m := envRef.FindStringSubmatch(ref)
		if v, ok := vars[m[1]]; ok {
			return v
		}
		if m[2] != "" {
			return m[2]
		}
		t.Fatalf("config refers to ${%s}, which the test does not set", m[1])
		return ""
	})
}

// loadTestdata reads testdata/name and expands its environment references.
func loadTestdata(t *testing.T, name string, vars map[string]string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return expandEnv(t, string(b), vars)
}

// captureLogger returns a Benthos logger writing every level to a buffer.
func captureLogger() (*service.Logger, *e2etest.SyncBuffer) {
	buf := &e2etest.SyncBuffer{}
	h := slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})
	return service.NewLoggerFromSlog(slog.New(h)), buf
}

func fetch(t *testing.T, p *Provider, partition, cursor string) provider.Response {
	t.Helper()
	resp, err := p.Fetch(context.Background(), provider.Request{Scope: "test", Partition: partition, Cursor: []byte(cursor)})
	if err != nil {
		t.Fatalf("Fetch(%s, cursor %q): %v", partition, cursor, err)
	}
	return resp
}

func ids(resp provider.Response) []string {
	out := make([]string, len(resp.Events))
	for i, e := range resp.Events {
		out[i] = e.ID
	}
	return out
}
