// Package promexport registers a `prometheus` metrics exporter with
// Benthos: every metric of the pipeline (tidemark's tidemark_* series
// included) is served in the Prometheus text format at the HTTP server's
// /metrics endpoint.
//
// Names are sanitised to Prometheus' alphabet; counters are exported with
// a _total suffix only when their name lacks one; timers become
// summaries in seconds. Registering the same name twice returns the same
// collector, so components created and closed repeatedly never panic.
package promexport

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redpanda-data/benthos/v4/public/service"
)

const fieldPrefix = "prefix"

func spec() *service.ConfigSpec {
	return service.NewConfigSpec().
		Beta().
		Summary("Serves every metric in the Prometheus text format at the HTTP server's /metrics (and /stats) endpoint.").
		Description("Tidemark's series include tidemark_pages_fetched, tidemark_retries{class}, tidemark_promotions, tidemark_cas_conflicts, tidemark_parked_partitions, tidemark_frontier and tidemark_partition_watermark{partition}.").
		Fields(
			service.NewStringField(fieldPrefix).
				Description("A prefix added to every metric name (before sanitising).").
				Default("").Example("connect_"),
		).
		Example("Prometheus", "Scrape http://127.0.0.1:4195/metrics.", `
http:
  address: 127.0.0.1:4195
metrics:
  prometheus: {}
`)
}

func init() {
	err := service.RegisterMetricsExporter("prometheus", spec(), func(conf *service.ParsedConfig, log *service.Logger) (service.MetricsExporter, error) {
		prefix, err := conf.FieldString(fieldPrefix)
		if err != nil {
			return nil, err
		}
		return New(prefix), nil
	})
	if err != nil {
		panic(err)
	}
}

// Exporter is a Benthos MetricsExporter backed by its own Prometheus
// registry.
type Exporter struct {
	prefix string
	reg    *prometheus.Registry
	mu     sync.Mutex
	byName map[string]prometheus.Collector
}

// New returns an exporter whose metric names start with prefix.
func New(prefix string) *Exporter {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return &Exporter{prefix: prefix, reg: reg, byName: map[string]prometheus.Collector{}}
}

var invalid = regexp.MustCompile(`[^a-zA-Z0-9_:]`)

func (e *Exporter) name(n string) string {
	n = invalid.ReplaceAllString(e.prefix+n, "_")
	if n == "" || (n[0] >= '0' && n[0] <= '9') {
		n = "_" + n
	}
	return n
}

func sanitiseLabels(keys []string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = invalid.ReplaceAllString(k, "_")
	}
	return out
}

// collector returns the collector registered under name, creating it with
// mk when absent.
func (e *Exporter) collector(name string, mk func() prometheus.Collector) prometheus.Collector {
	e.mu.Lock()
	defer e.mu.Unlock()
	if c, ok := e.byName[name]; ok {
		return c
	}
	c := mk()
	if err := e.reg.Register(c); err != nil {
		if are, ok := err.(prometheus.AlreadyRegisteredError); ok {
			c = are.ExistingCollector
		}
	}
	e.byName[name] = c
	return c
}

// NewCounterCtor implements service.MetricsExporter.
func (e *Exporter) NewCounterCtor(name string, labelKeys ...string) service.MetricsExporterCounterCtor {
	n := e.name(name)
	if !strings.HasSuffix(n, "_total") {
		n += "_total"
	}
	c, ok := e.collector(n, func() prometheus.Collector {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: n, Help: "Benthos counter " + name}, sanitiseLabels(labelKeys))
	}).(*prometheus.CounterVec)
	return func(labelValues ...string) service.MetricsExporterCounter {
		if !ok {
			return nopMetric{}
		}
		m, err := c.GetMetricWithLabelValues(labelValues...)
		if err != nil { // another label set owns the name
			return nopMetric{}
		}
		return counter{m}
	}
}

// NewTimerCtor implements service.MetricsExporter.
func (e *Exporter) NewTimerCtor(name string, labelKeys ...string) service.MetricsExporterTimerCtor {
	n := e.name(name) + "_seconds"
	s, ok := e.collector(n, func() prometheus.Collector {
		return prometheus.NewSummaryVec(prometheus.SummaryOpts{
			Name: n, Help: "Benthos timing " + name,
			Objectives: map[float64]float64{0.5: 0.05, 0.9: 0.01, 0.99: 0.001},
		}, sanitiseLabels(labelKeys))
	}).(*prometheus.SummaryVec)
	return func(labelValues ...string) service.MetricsExporterTimer {
		if !ok {
			return nopMetric{}
		}
		m, err := s.GetMetricWithLabelValues(labelValues...)
		if err != nil {
			return nopMetric{}
		}
		return timer{m}
	}
}

// NewGaugeCtor implements service.MetricsExporter.
func (e *Exporter) NewGaugeCtor(name string, labelKeys ...string) service.MetricsExporterGaugeCtor {
	n := e.name(name)
	g, ok := e.collector(n, func() prometheus.Collector {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: n, Help: "Benthos gauge " + name}, sanitiseLabels(labelKeys))
	}).(*prometheus.GaugeVec)
	return func(labelValues ...string) service.MetricsExporterGauge {
		if !ok {
			return nopMetric{}
		}
		m, err := g.GetMetricWithLabelValues(labelValues...)
		if err != nil {
			return nopMetric{}
		}
		return gauge{m}
	}
}

// HandlerFunc serves the registry; Benthos mounts it at /metrics.
func (e *Exporter) HandlerFunc() http.HandlerFunc {
	return promhttp.HandlerFor(e.reg, promhttp.HandlerOpts{}).ServeHTTP
}

// Close implements service.MetricsExporter.
func (e *Exporter) Close(context.Context) error { return nil }

type counter struct{ c prometheus.Counter }

func (c counter) Incr(n int64)          { c.c.Add(float64(n)) }
func (c counter) IncrFloat64(n float64) { c.c.Add(n) }

type gauge struct{ g prometheus.Gauge }

func (g gauge) Set(v int64)          { g.g.Set(float64(v)) }
func (g gauge) SetFloat64(v float64) { g.g.Set(v) }
func (g gauge) Incr(v int64)         { g.g.Add(float64(v)) }
func (g gauge) Decr(v int64)         { g.g.Sub(float64(v)) }

type timer struct{ s prometheus.Observer }

func (t timer) Timing(ns int64) { t.s.Observe(float64(ns) / 1e9) }

type nopMetric struct{}

func (nopMetric) Incr(int64)          {}
func (nopMetric) IncrFloat64(float64) {}
func (nopMetric) Set(int64)           {}
func (nopMetric) Timing(int64)        {}
