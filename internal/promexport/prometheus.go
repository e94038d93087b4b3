// Package promexport is tidemark's `prometheus` metrics exporter for
// Benthos: every metric of the pipeline (tidemark's tidemark_* series
// included) is served in the Prometheus text format at the HTTP server's
// /metrics endpoint, under the names and units Redpanda Connect's own
// `prometheus` exporter uses, so that dashboards and alert rules written
// for Redpanda Connect read a tidemark binary unchanged:
//
//   - names are Benthos' names sanitised to Prometheus' alphabet, with no
//     suffix added: a counter is `input_received`, never
//     `input_received_total`;
//   - timers keep their name (`output_latency_ns`): a summary of
//     nanoseconds by default, a histogram of seconds with
//     `use_histogram_timing: true` (Redpanda Connect's documented
//     conversion);
//   - Go runtime and process series only with `add_go_metrics` and
//     `add_process_metrics`.
//
// The exporter is registered by the binary (cmd/connect calls Register),
// never by the importable plugin package: a program that links Redpanda
// Connect's own exporter keeps it (Benthos keeps the last registration of
// a name without error). Registering the same series twice returns the
// same collector, so components created and closed repeatedly never panic.
package promexport

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/push"
	"github.com/redpanda-data/benthos/v4/public/service"
)

// Name is the name the exporter registers under: the name Redpanda
// Connect's exporter has, so `metrics: {prometheus: {}}` configs carry over.
const Name = "prometheus"

// The fields are Redpanda Connect's prometheus exporter's fields (its
// documentation's field list), plus tidemark's `prefix`.
const (
	fieldUseHistogram      = "use_histogram_timing"
	fieldHistogramBuckets  = "histogram_buckets"
	fieldSummaryObjectives = "summary_quantiles_objectives"
	fieldQuantile          = "quantile"
	fieldError             = "error"
	fieldProcessMetrics    = "add_process_metrics"
	fieldGoMetrics         = "add_go_metrics"
	fieldPushURL           = "push_url"
	fieldPushInterval      = "push_interval"
	fieldPushJobName       = "push_job_name"
	fieldPushBasicAuth     = "push_basic_auth"
	fieldUsername          = "username"
	fieldPassword          = "password"
	fieldFileOutputPath    = "file_output_path"
	fieldPrefix            = "prefix"
)

// pushTimeout bounds one push to a Push Gateway.
const pushTimeout = 30 * time.Second

// Spec is the exporter's config spec.
func Spec() *service.ConfigSpec {
	return service.NewConfigSpec().
		Beta().
		Summary("Serves every metric in the Prometheus text format at the HTTP server's /metrics (and /stats) endpoint, under the names Redpanda Connect's prometheus exporter uses.").
		Description(`The fields are those of Redpanda Connect's `+"`prometheus`"+` exporter, and so are the series: Benthos' own (`+"`input_received`, `output_sent`, `processor_error`, `output_latency_ns`"+`, ...) keep their names, counters get no `+"`_total`"+` suffix, and timers (named `+"`*_ns`"+`) are summaries of nanoseconds, or histograms of seconds with `+"`use_histogram_timing: true`"+`.

Tidemark's series (labels in braces; every series also has Benthos' `+"`label`"+` and `+"`path`"+` labels, and `+"`stream`"+` in streams mode):

- counters of the `+"`paginated_partitions`"+` input: `+"`tidemark_pages_fetched`, `tidemark_events_emitted`, `tidemark_promotions`, `tidemark_promotion_writes`, `tidemark_cas_conflicts`, `tidemark_fetch_errors`, `tidemark_malformed_responses`, `tidemark_parks`, `tidemark_restarts`, `tidemark_retries{class}`, `tidemark_contract_violations{kind}`, `tidemark_incarnation_changes`, `tidemark_reread_passes`, `tidemark_reread_skipped_events`, `tidemark_membership_changes`, `tidemark_witnesses_pruned`, `tidemark_lease_steals{reason}`, `tidemark_leases_lost`, `tidemark_store_errors{op}`"+` (the counters an alert reads exist at 0 from the start);
- gauges: `+"`tidemark_parked_partitions`, `tidemark_partition_watermark{partition}`, `tidemark_partition_generation{partition}`, `tidemark_partition_lag{partition}`, `tidemark_frontier{scope}`, `tidemark_frontier_withheld{scope}`, `tidemark_owned_partitions`, `tidemark_partitions_in_state{state}`"+`.

Dashboards and alert rules over these series ship in deploy/.`).
		Fields(
			service.NewBoolField(fieldUseHistogram).
				Description("Whether to export timing metrics as a histogram; if `false` a summary is used instead. Histogram timings are converted from nanoseconds into seconds (as Redpanda Connect's exporter does); summary timings stay in nanoseconds.").
				Default(false).Advanced(),
			service.NewFloatListField(fieldHistogramBuckets).
				Description("Timing histogram buckets, in seconds. Empty: the Prometheus client's default buckets. Used when `use_histogram_timing` is `true`.").
				Default([]any{}).Advanced(),
			service.NewObjectListField(fieldSummaryObjectives,
				service.NewFloatField(fieldQuantile).Description("Quantile value.").Default(0.0),
				service.NewFloatField(fieldError).Description("Permissible margin of error of the quantile.").Default(0.0),
			).
				Description("The quantiles (and their error margins) of timing summaries. Used when `use_histogram_timing` is `false`.").
				Default([]any{
					map[string]any{fieldQuantile: 0.5, fieldError: 0.05},
					map[string]any{fieldQuantile: 0.9, fieldError: 0.01},
					map[string]any{fieldQuantile: 0.99, fieldError: 0.001},
				}).Advanced(),
			service.NewBoolField(fieldProcessMetrics).
				Description("Whether to export process metrics (CPU, memory, file descriptors: `process_*`) as well.").
				Default(false).Advanced(),
			service.NewBoolField(fieldGoMetrics).
				Description("Whether to export Go runtime metrics (`go_*`) as well.").
				Default(false).Advanced(),
			service.NewURLField(fieldPushURL).
				Description("An optional Prometheus Push Gateway URL (without its `/metrics/job/...` path): metrics are pushed to it when the pipeline stops, and every `push_interval` when that is set. Each push has a 30 s deadline.").
				Optional().Advanced().Example("http://127.0.0.1:9091"),
			service.NewDurationField(fieldPushInterval).
				Description("The period between two pushes to the Push Gateway.").
				Optional().Advanced().Example("30s"),
			service.NewStringField(fieldPushJobName).
				Description("The job name of pushed metrics.").
				Default("benthos_push").Advanced(),
			service.NewObjectField(fieldPushBasicAuth,
				service.NewStringField(fieldUsername).Description("The Basic Authentication username.").Default(""),
				service.NewStringField(fieldPassword).Description("The Basic Authentication password.").Default("").Secret(),
			).Description("The Basic Authentication credentials of the Push Gateway.").Advanced(),
			service.NewStringField(fieldFileOutputPath).
				Description("An optional file to which every metric is written, in the text format, when the pipeline stops.").
				Default("").Advanced(),
			service.NewStringField(fieldPrefix).
				Description("A prefix added to every metric name, before sanitising (tidemark's; Redpanda Connect's exporter has no such field, its `metrics.mapping` renames series).").
				Default("").Example("connect_").Advanced(),
		).
		Example("Prometheus", "Scrape http://127.0.0.1:4195/metrics.", `
http:
  address: 127.0.0.1:4195
metrics:
  prometheus: {}
`).
		Example("Histograms and a Push Gateway", "Timings as histograms of seconds; a short-lived run pushes its metrics when it stops.", `
metrics:
  prometheus:
    use_histogram_timing: true
    histogram_buckets: [ 0.01, 0.1, 1, 10 ]
    push_url: http://127.0.0.1:9091
    push_job_name: tidemark_backfill
`)
}

// Register registers the exporter under Name with env. cmd/connect calls
// it; the plugin package does not (see the package comment).
func Register(env *service.Environment) error {
	return env.RegisterMetricsExporter(Name, Spec(), func(conf *service.ParsedConfig, log *service.Logger) (service.MetricsExporter, error) {
		o, err := optionsFromConfig(conf)
		if err != nil {
			return nil, err
		}
		return NewWithOptions(o, log)
	})
}

// Quantile is one objective of a timing summary.
type Quantile struct{ Quantile, Error float64 }

// Options configure an Exporter; the zero value is Redpanda Connect's
// defaults but for the summary objectives (see DefaultOptions).
type Options struct {
	Prefix          string
	UseHistogram    bool
	Buckets         []float64
	Objectives      []Quantile
	ProcessMetrics  bool
	GoMetrics       bool
	PushURL         string
	PushInterval    time.Duration
	PushJobName     string
	PushUser        string
	PushPassword    string
	FileOutputPath  string
	PushHTTPTimeout time.Duration
}

// DefaultOptions are the defaults of the config spec.
func DefaultOptions() Options {
	return Options{
		Objectives:  []Quantile{{0.5, 0.05}, {0.9, 0.01}, {0.99, 0.001}},
		PushJobName: "benthos_push",
	}
}

func optionsFromConfig(conf *service.ParsedConfig) (Options, error) {
	o := DefaultOptions()
	var err error
	if o.Prefix, err = conf.FieldString(fieldPrefix); err != nil {
		return o, err
	}
	if o.UseHistogram, err = conf.FieldBool(fieldUseHistogram); err != nil {
		return o, err
	}
	if o.Buckets, err = conf.FieldFloatList(fieldHistogramBuckets); err != nil {
		return o, err
	}
	if len(o.Buckets) == 0 {
		o.Buckets = nil
	}
	objs, err := conf.FieldObjectList(fieldSummaryObjectives)
	if err != nil {
		return o, err
	}
	o.Objectives = o.Objectives[:0]
	for _, obj := range objs {
		q, err := obj.FieldFloat(fieldQuantile)
		if err != nil {
			return o, err
		}
		e, err := obj.FieldFloat(fieldError)
		if err != nil {
			return o, err
		}
		if q < 0 || q > 1 || e < 0 || e > 1 {
			return o, fmt.Errorf("%s: quantile %v with error %v: both must lie in [0, 1]", fieldSummaryObjectives, q, e)
		}
		o.Objectives = append(o.Objectives, Quantile{q, e})
	}
	if o.ProcessMetrics, err = conf.FieldBool(fieldProcessMetrics); err != nil {
		return o, err
	}
	if o.GoMetrics, err = conf.FieldBool(fieldGoMetrics); err != nil {
		return o, err
	}
	if conf.Contains(fieldPushURL) {
		u, err := conf.FieldURL(fieldPushURL)
		if err != nil {
			return o, err
		}
		o.PushURL = u.String()
	}
	if conf.Contains(fieldPushInterval) {
		if o.PushInterval, err = conf.FieldDuration(fieldPushInterval); err != nil {
			return o, err
		}
		if o.PushInterval <= 0 {
			return o, fmt.Errorf("%s must be positive", fieldPushInterval)
		}
	}
	if o.PushJobName, err = conf.FieldString(fieldPushJobName); err != nil {
		return o, err
	}
	if o.PushUser, err = conf.FieldString(fieldPushBasicAuth, fieldUsername); err != nil {
		return o, err
	}
	if o.PushPassword, err = conf.FieldString(fieldPushBasicAuth, fieldPassword); err != nil {
		return o, err
	}
	if o.FileOutputPath, err = conf.FieldString(fieldFileOutputPath); err != nil {
		return o, err
	}
	return o, nil
}

// Exporter is a Benthos MetricsExporter backed by its own Prometheus
// registry.
type Exporter struct {
	o      Options
	log    *service.Logger
	reg    *prometheus.Registry
	mu     sync.Mutex
	byName map[string]prometheus.Collector

	pusher   *push.Pusher
	stop     chan struct{}
	stopped  chan struct{}
	closeOne sync.Once
}

// New returns an exporter with the default options and prefix.
func New(prefix string) *Exporter {
	o := DefaultOptions()
	o.Prefix = prefix
	e, err := NewWithOptions(o, nil)
	if err != nil { // only push options can fail, and there are none
		panic(err)
	}
	return e
}

// NewWithOptions returns an exporter configured by o; log (may be nil)
// receives push failures.
func NewWithOptions(o Options, log *service.Logger) (*Exporter, error) {
	reg := prometheus.NewRegistry()
	if o.GoMetrics {
		reg.MustRegister(collectors.NewGoCollector())
	}
	if o.ProcessMetrics {
		reg.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	e := &Exporter{o: o, log: log, reg: reg, byName: map[string]prometheus.Collector{}}
	if o.PushURL != "" {
		timeout := o.PushHTTPTimeout
		if timeout <= 0 {
			timeout = pushTimeout
		}
		e.pusher = push.New(o.PushURL, o.PushJobName).Gatherer(reg).Client(&http.Client{Timeout: timeout})
		if o.PushUser != "" || o.PushPassword != "" {
			e.pusher = e.pusher.BasicAuth(o.PushUser, o.PushPassword)
		}
		if o.PushInterval > 0 {
			e.stop, e.stopped = make(chan struct{}), make(chan struct{})
			go e.pushEvery(o.PushInterval)
		}
	}
	return e, nil
}

func (e *Exporter) pushEvery(d time.Duration) {
	defer close(e.stopped)
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-e.stop:
			return
		case <-t.C:
			if err := e.pusher.Push(); err != nil && e.log != nil {
				e.log.Warnf("prometheus: push to the Push Gateway failed: %v", err)
			}
		}
	}
}

var invalid = regexp.MustCompile(`[^a-zA-Z0-9_:]`)

func (e *Exporter) name(n string) string {
	n = invalid.ReplaceAllString(e.o.Prefix+n, "_")
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
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			c = are.ExistingCollector
		}
	}
	e.byName[name] = c
	return c
}

// NewCounterCtor implements service.MetricsExporter. The name is kept
// (no _total suffix), as Redpanda Connect exports it.
func (e *Exporter) NewCounterCtor(name string, labelKeys ...string) service.MetricsExporterCounterCtor {
	n := e.name(name)
	c, ok := e.collector(n, func() prometheus.Collector {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: n, Help: "Benthos Counter metric"}, sanitiseLabels(labelKeys))
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

// NewTimerCtor implements service.MetricsExporter: a summary of
// nanoseconds, or a histogram of seconds with UseHistogram; the name is
// kept either way.
func (e *Exporter) NewTimerCtor(name string, labelKeys ...string) service.MetricsExporterTimerCtor {
	n := e.name(name)
	if e.o.UseHistogram {
		h, ok := e.collector(n, func() prometheus.Collector {
			buckets := e.o.Buckets
			if len(buckets) == 0 {
				buckets = prometheus.DefBuckets
			}
			return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: n, Help: "Benthos Timing metric", Buckets: buckets}, sanitiseLabels(labelKeys))
		}).(*prometheus.HistogramVec)
		return func(labelValues ...string) service.MetricsExporterTimer {
			if !ok {
				return nopMetric{}
			}
			m, err := h.GetMetricWithLabelValues(labelValues...)
			if err != nil {
				return nopMetric{}
			}
			return timer{m, 1e-9}
		}
	}
	s, ok := e.collector(n, func() prometheus.Collector {
		obj := make(map[float64]float64, len(e.o.Objectives))
		for _, q := range e.o.Objectives {
			obj[q.Quantile] = q.Error
		}
		return prometheus.NewSummaryVec(prometheus.SummaryOpts{Name: n, Help: "Benthos Timing metric", Objectives: obj}, sanitiseLabels(labelKeys))
	}).(*prometheus.SummaryVec)
	return func(labelValues ...string) service.MetricsExporterTimer {
		if !ok {
			return nopMetric{}
		}
		m, err := s.GetMetricWithLabelValues(labelValues...)
		if err != nil {
			return nopMetric{}
		}
		return timer{m, 1}
	}
}

// NewGaugeCtor implements service.MetricsExporter.
func (e *Exporter) NewGaugeCtor(name string, labelKeys ...string) service.MetricsExporterGaugeCtor {
	n := e.name(name)
	g, ok := e.collector(n, func() prometheus.Collector {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: n, Help: "Benthos Gauge metric"}, sanitiseLabels(labelKeys))
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

// Close implements service.MetricsExporter: it stops the periodic pushes,
// pushes once more, and writes file_output_path.
func (e *Exporter) Close(context.Context) error {
	var errs []error
	e.closeOne.Do(func() {
		if e.stop != nil {
			close(e.stop)
			<-e.stopped
		}
		if e.pusher != nil {
			if err := e.pusher.Push(); err != nil {
				errs = append(errs, fmt.Errorf("prometheus: push to the Push Gateway: %w", err))
			}
		}
		if e.o.FileOutputPath != "" {
			if err := prometheus.WriteToTextfile(e.o.FileOutputPath, e.reg); err != nil {
				errs = append(errs, fmt.Errorf("prometheus: %s: %w", fieldFileOutputPath, err))
			}
		}
	})
	return errors.Join(errs...)
}

type counter struct{ c prometheus.Counter }

func (c counter) Incr(n int64)          { c.c.Add(float64(n)) }
func (c counter) IncrFloat64(n float64) { c.c.Add(n) }

type gauge struct{ g prometheus.Gauge }

func (g gauge) Set(v int64)          { g.g.Set(float64(v)) }
func (g gauge) SetFloat64(v float64) { g.g.Set(v) }
func (g gauge) Incr(v int64)         { g.g.Add(float64(v)) }
func (g gauge) Decr(v int64)         { g.g.Sub(float64(v)) }

// timer observes a duration in nanoseconds times unit (1: nanoseconds;
// 1e-9: seconds).
type timer struct {
	s    prometheus.Observer
	unit float64
}

func (t timer) Timing(ns int64) { t.s.Observe(float64(ns) * t.unit) }

type nopMetric struct{}

func (nopMetric) Incr(int64)          {}
func (nopMetric) IncrFloat64(float64) {}
func (nopMetric) Set(int64)           {}
func (nopMetric) Timing(int64)        {}
