package deploy_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/tidemark/tidemark/internal/e2etest"
)

func TestMain(m *testing.M) { e2etest.Main(m) }

// servedConfig runs, in one binary, what the dashboard and the rules read
// (a paginated_partitions input sharing its simulated partitions through
// leases, checkpoints in memory) beside the config of Redpanda Connect's
// metrics documentation example (one input, one mapping processor, one
// output).
const servedConfig = `
http:
  address: 127.0.0.1:%d
metrics:
  prometheus: {}
logger:
  level: warn
input:
  broker:
    inputs:
      - paginated_partitions:
          scope: deploy
          partitions: [ p0, p1 ]
          poll_interval: 50ms
          frontier_publish_interval: 100ms
          checkpoint:
            backend: memory
          leases:
            instance_id: deploy-test
          simulated:
            events_per_partition: 200
            page_size: 20
            latency: 5ms
      - generate:
          interval: 10ms
          mapping: 'root = {"n": counter()}'
pipeline:
  processors:
    - mapping: root = this
output:
  drop: {}
`

type served struct {
	body  string
	names map[string]bool
	types map[string]string // name -> # TYPE
}

// serve runs the binary with servedConfig and returns its /metrics once
// every series in want is there (e2etest.Patience at most).
func serve(t *testing.T, want []string) served {
	t.Helper()
	port := e2etest.FreePort(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "served.yaml")
	require.NoError(t, os.WriteFile(conf, fmt.Appendf(nil, servedConfig, port), 0o600))
	cmd := exec.Command(e2etest.Connect(t), "run", conf)
	cmd.Env = e2etest.Env()
	p := e2etest.Start(t, "connect", cmd)
	defer p.Stop(e2etest.Patience)
	url := fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
	var s served
	e2etest.WaitFor(t, e2etest.Patience, "every series the dashboard and the rules read", func() (bool, string) {
		body, err := e2etest.Scrape(url)
		if err != nil {
			return false, err.Error()
		}
		s = parse(body)
		var missing []string
		for _, n := range want {
			if !s.names[n] {
				missing = append(missing, n)
			}
		}
		return len(missing) == 0, "missing: " + strings.Join(missing, ", ")
	}, p.Running)
	return s
}

var typeLine = regexp.MustCompile(`(?m)^# TYPE (\S+) (\S+)$`)

func parse(body string) served {
	s := served{body: body, names: map[string]bool{}, types: map[string]string{}}
	ms, err := e2etest.ParseMetrics(body)
	if err != nil {
		return s
	}
	for n := range ms {
		s.names[n] = true
	}
	for _, m := range typeLine.FindAllStringSubmatch(body, -1) {
		s.types[m[1]] = m[2]
		s.names[m[1]] = true // a summary's or histogram's own name
	}
	return s
}

// documented reads testdata/redpanda_connect_metrics.txt: every name
// Redpanda Connect documents, and those of its documentation's example.
func documented(t *testing.T) (names, example []string) {
	t.Helper()
	b, err := os.ReadFile("testdata/redpanda_connect_metrics.txt")
	require.NoError(t, err)
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		switch {
		case l == "" || strings.HasPrefix(l, "#"):
		case strings.HasPrefix(l, "example "):
			example = append(example, strings.TrimPrefix(l, "example "))
		default:
			names = append(names, l)
		}
	}
	require.NotEmpty(t, names)
	require.NotEmpty(t, example)
	return names, example
}

// seriesName matches the metric names a query reads: tidemark's and
// Benthos' standard components'.
var seriesName = regexp.MustCompile(`\b((?:tidemark|input|output|processor|buffer|cache|rate_limit|batch)_[a-z_]+)\b`)

// queried returns every series name the dashboard's and the rules'
// expressions read, and those the rules' unit tests feed.
func queried(t *testing.T) (dashboard, rules, ruleTests []string) {
	t.Helper()
	b, err := os.ReadFile("grafana/tidemark.json")
	require.NoError(t, err)
	var dash struct {
		Panels []struct {
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	require.NoError(t, json.Unmarshal(b, &dash))
	var exprs []string
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	for _, v := range dash.Templating.List {
		exprs = append(exprs, v.Definition)
	}
	dashboard = names(exprs)

	b, err = os.ReadFile("prometheus/tidemark.rules.yml")
	require.NoError(t, err)
	var rf struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	require.NoError(t, yaml.Unmarshal(b, &rf))
	exprs = nil
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			exprs = append(exprs, r.Expr)
		}
	}
	rules = names(exprs)

	b, err = os.ReadFile("prometheus/tidemark.rules.test.yml")
	require.NoError(t, err)
	var tf struct {
		Tests []struct {
			InputSeries []struct {
				Series string `yaml:"series"`
			} `yaml:"input_series"`
		} `yaml:"tests"`
	}
	require.NoError(t, yaml.Unmarshal(b, &tf))
	exprs = nil
	for _, tc := range tf.Tests {
		for _, s := range tc.InputSeries {
			exprs = append(exprs, s.Series)
		}
	}
	ruleTests = names(exprs)
	return dashboard, rules, ruleTests
}

func names(exprs []string) []string {
	set := map[string]bool{}
	for _, e := range exprs {
		for _, m := range seriesName.FindAllStringSubmatch(e, -1) {
			set[m[1]] = true
		}
	}
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// TestServedSeries runs the binary once and checks what its /metrics
// serves against Redpanda Connect's documented names and against what
// deploy/ queries.
func TestServedSeries(t *testing.T) {
	dashboard, rules, ruleTests := queried(t)
	require.Contains(t, rules, "tidemark_parked_partitions")
	require.Contains(t, dashboard, "tidemark_frontier")
	docNames, example := documented(t)

	want := slices.Concat(dashboard, rules, ruleTests, example)
	s := serve(t, want)

	t.Run("RedpandaConnectNames", func(t *testing.T) {
		// The example's series are all served, under their names.
		for _, n := range example {
			assert.True(t, s.names[n], "%s (Redpanda Connect's documented example) is not served", n)
		}
		// Every standard component series served is a documented name:
		// no _total, no _seconds, no other rename.
		for n := range s.names {
			if strings.HasPrefix(n, "tidemark_") || !seriesName.MatchString(n) || seriesName.FindString(n) != n {
				continue
			}
			base := n
			for _, suf := range []string{"_sum", "_count", "_bucket"} {
				if b, ok := strings.CutSuffix(n, suf); ok && strings.HasSuffix(b, "_ns") {
					base = b
				}
			}
			assert.Contains(t, docNames, base, "%s is served but is no name Redpanda Connect documents", n)
		}
		// Counters are counters, timers summaries (the exporter's default).
		assert.Equal(t, "counter", s.types["input_received"])
		assert.Equal(t, "counter", s.types["output_sent"])
		assert.Equal(t, "summary", s.types["output_latency_ns"])
		assert.Equal(t, "summary", s.types["processor_latency_ns"])
		assert.NotContains(t, s.body, "_total")
		assert.NotContains(t, s.body, "_ns_seconds")
	})

	t.Run("DashboardAndRulesSeries", func(t *testing.T) {
		for _, set := range []struct {
			what  string
			names []string
		}{{"the dashboard", dashboard}, {"the alert rules", rules}, {"the alert rules' unit tests", ruleTests}} {
			for _, n := range set.names {
				assert.True(t, s.names[n], "%s reads %s, which the binary does not serve", set.what, n)
			}
		}
		// tidemark's series are counters and gauges as the rules treat them.
		for n, typ := range map[string]string{
			"tidemark_parked_partitions": "gauge", "tidemark_frontier": "gauge", "tidemark_frontier_withheld": "gauge",
			"tidemark_contract_violations": "counter", "tidemark_leases_lost": "counter", "tidemark_lease_steals": "counter",
			"tidemark_store_errors": "counter", "tidemark_owned_partitions": "gauge",
		} {
			assert.Equal(t, typ, s.types[n], n)
		}
	})
}
