package scale

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tidemark/tidemark/internal/dynamostore"
)

// Options configure a run; see DefaultOptions for every default.
type Options struct {
	Bin      string // bin/connect
	Endpoint string // the local DynamoDB (dynalite)
	Dir      string // configs and logs of the instances
	Sizes    []int  // partitions, run in this order
	// Instances started together (a further one is added in the "add"
	// phase). Default 3.
	Instances int
	// EventsPerPartition of the simulated source (then the partitions are
	// complete and idle). Default 5.
	EventsPerPartition int
	// Budget bounds the whole run: a size whose worst case no longer fits
	// is skipped (and extrapolated). Default 13m.
	Budget time.Duration
	// Phase timeouts: a phase that does not reach its state by then is
	// reported "not ... after <timeout>". Cold covers the start until
	// balanced and every event read.
	Cold, Add, Takeover time.Duration
	// Settle is the pause between the last event read and the idle window;
	// Idle the window itself.
	Settle, Idle time.Duration
	// Poll is the scrape interval of the instances' /metrics while waiting.
	Poll time.Duration
	// Leases is the YAML value of the input's `leases` field. Default "{}".
	Leases string
	// Metric names read from each instance's /metrics.
	OwnedMetric, LostMetric, EventsMetric string
	Prices                                Prices
	// Logf reports progress (default: nothing).
	Logf func(format string, args ...any)
}

// DefaultOptions are the defaults of `make bench-scale`.
func DefaultOptions() Options {
	return Options{
		Bin: "bin/connect", Dir: ".bench/scale", Sizes: []int{1000, 5000, 10000},
		Instances: 3, EventsPerPartition: 5, Budget: 13 * time.Minute,
		Cold: 75 * time.Second, Add: 75 * time.Second, Takeover: 60 * time.Second,
		Settle: 5 * time.Second, Idle: 45 * time.Second, Poll: 2 * time.Second,
		Leases:      "{}",
		OwnedMetric: "tidemark_owned_partitions", LostMetric: "tidemark_leases_lost", EventsMetric: "tidemark_events_emitted",
		Prices: DefaultPrices,
	}
}

// worstCase is the longest one size can take.
func (o Options) worstCase() time.Duration {
	return 30*time.Second + o.Cold + o.Settle + o.Idle + o.Add + o.Takeover + 20*time.Second
}

// Phase is one timed wait.
type Phase struct {
	// Done says the state was reached; Seconds is then the time it took,
	// else the time waited.
	Done    bool    `json:"done"`
	Seconds float64 `json:"seconds"`
	Timeout float64 `json:"timeout_seconds"`
	// Owned is each instance's owned gauge at the end (-1: not running).
	Owned []int  `json:"owned"`
	Note  string `json:"note,omitempty"`
}

// InstanceUsage is one instance's resources over the idle window.
type InstanceUsage struct {
	RSSMiB   float64 `json:"rss_mib"`
	CPUCores float64 `json:"cpu_cores"`
}

// Idle is what the idle window measured.
type Idle struct {
	Seconds float64          `json:"seconds"`
	Counts  Counts           `json:"counts"`
	ByOp    map[string]Rates `json:"by_op"`
	Total   Rates            `json:"total"`
	// LeasesLost is the increase of the instances' leases-lost counters in
	// the window; LeaseLostLines the "lease lost" log lines written in it.
	LeasesLost     float64         `json:"leases_lost"`
	LeaseLostLines int             `json:"lease_lost_lines"`
	Instances      []InstanceUsage `json:"instances"`
	DynaliteCores  float64         `json:"dynalite_cpu_cores"`
	MonthlyUSD     float64         `json:"monthly_usd"`
	LoadAvg        string          `json:"loadavg"`
}

// Sample is one scrape of every instance.
type Sample struct {
	At    float64 `json:"t"` // seconds since the size started
	Owned []int   `json:"owned"`
}

// SizeResult is one size's run.
type SizeResult struct {
	Partitions int `json:"partitions"`
	Instances  int `json:"instances"`
	// Status is "measured", "skipped: ...", "failed: ...".
	Status  string `json:"status"`
	Started string `json:"started,omitempty"`
	LoadAvg string `json:"loadavg,omitempty"`
	Cold    *Phase `json:"cold,omitempty"`
	// ColdAllOwned is the first scrape at which the instances owned every
	// partition between them (nil: never during the cold start).
	ColdAllOwned *Phase   `json:"cold_all_owned,omitempty"`
	EventsRead   *Phase   `json:"events_read,omitempty"`
	Idle         *Idle    `json:"idle,omitempty"`
	AddOne       *Phase   `json:"add_one,omitempty"`
	Takeover     *Phase   `json:"takeover,omitempty"`
	Killed       int      `json:"killed_owned,omitempty"` // partitions the killed instance owned
	LeasesLost   float64  `json:"leases_lost_before_kill"`
	Samples      []Sample `json:"samples,omitempty"`
	Notes        []string `json:"notes,omitempty"`
	Seconds      float64  `json:"seconds"`
}

// Run runs every size of o in turn.
func Run(ctx context.Context, o Options) []SizeResult {
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	deadline := time.Now().Add(o.Budget)
	var out []SizeResult
	for _, p := range o.Sizes {
		if ctx.Err() != nil {
			out = append(out, SizeResult{Partitions: p, Instances: o.Instances, Status: "skipped: interrupted"})
			continue
		}
		if left := time.Until(deadline); left < o.worstCase() {
			out = append(out, SizeResult{Partitions: p, Instances: o.Instances,
				Status: fmt.Sprintf("skipped: %s of the %s budget left, a size may take %s", left.Round(time.Second), o.Budget, o.worstCase())})
			o.Logf("size %d: skipped (budget)", p)
			continue
		}
		out = append(out, runSize(ctx, o, p))
	}
	return out
}

// PartitionNames are n distinct 36-character names shaped like UUIDs (a
// tenant id), the same for every run.
func PartitionNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		h := sha256.Sum256(fmt.Appendf(nil, "partition-%d", i))
		x := fmt.Sprintf("%x", h[:16])
		out[i] = x[0:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:32]
	}
	return out
}

const instanceConfig = `http:
  enabled: true
  address: 127.0.0.1:%[1]d
logger:
  level: warn
  format: logfmt
  add_timestamp: true
metrics:
  prometheus: {}
input:
  paginated_partitions:
    scope: bench-scale
    partitions: [ %[2]s ]
    checkpoint:
      backend: dynamodb
      dynamodb:
        table: %[3]s
        endpoint: %[4]s
        region: us-east-1
    leases: %[5]s
    simulated:
      events_per_partition: %[6]d
output:
  drop: {}
`

// instance is one bin/connect process.
type instance struct {
	id      string
	port    int
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	err     error
}

func (in *instance) running() bool {
	select {
	case <-in.done:
		return false
	default:
		return true
	}
}

func (in *instance) metricsURL() string { return fmt.Sprintf("http://127.0.0.1:%d/metrics", in.port) }

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// childEnv is the harness's environment with dummy AWS credentials where
// unset (dynalite accepts any).
func childEnv() []string {
	env := os.Environ()
	for _, kv := range []string{"AWS_ACCESS_KEY_ID=local", "AWS_SECRET_ACCESS_KEY=local", "AWS_REGION=us-east-1"} {
		if k, _, _ := strings.Cut(kv, "="); os.Getenv(k) == "" {
			env = append(env, kv)
		}
	}
	return env
}

func startInstance(o Options, dir, id, table, endpoint string, names []string) (*instance, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = `"` + n + `"`
	}
	cfg := fmt.Sprintf(instanceConfig, port, strings.Join(quoted, ", "), table, endpoint, o.Leases, o.EventsPerPartition)
	cfgPath := filepath.Join(dir, id+".yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, id+".log")
	lf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(o.Bin, "run", cfgPath)
	cmd.Env = childEnv()
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, err
	}
	in := &instance{id: id, port: port, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		in.err = cmd.Wait()
		lf.Close()
		close(in.done)
	}()
	return in, nil
}

// kill sends sig to the instance's process group.
func (in *instance) kill(sig syscall.Signal) {
	if in.running() {
		_ = syscall.Kill(-in.cmd.Process.Pid, sig)
	}
}

// stop ends the instance: SIGTERM, then SIGKILL after grace.
func (in *instance) stop(grace time.Duration) {
	in.kill(syscall.SIGTERM)
	select {
	case <-in.done:
	case <-time.After(grace):
		in.kill(syscall.SIGKILL)
		<-in.done
	}
}

func (in *instance) lostLines() int {
	b, err := os.ReadFile(in.logPath)
	if err != nil {
		return 0
	}
	return strings.Count(string(b), "lease lost")
}

// firstError is the message of the instance's first level=error log line
// ("" when none), cut to 300 bytes.
func (in *instance) firstError() string {
	b, err := os.ReadFile(in.logPath)
	if err != nil {
		return ""
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if !strings.Contains(line, "level=error") {
			continue
		}
		msg := line
		if _, m, ok := strings.Cut(line, `msg="`); ok {
			msg, _, _ = strings.Cut(m, `" `)
		}
		if len(msg) > 300 {
			msg = msg[:300] + "…"
		}
		return msg
	}
	return ""
}

// firstErrors are the distinct first errors of the instances' logs, each
// with the instances that logged it.
func firstErrors(insts []*instance) []string {
	var msgs []string
	who := map[string][]string{}
	for _, in := range insts {
		if e := in.firstError(); e != "" {
			if who[e] == nil {
				msgs = append(msgs, e)
			}
			who[e] = append(who[e], in.id)
		}
	}
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = fmt.Sprintf("%s logged %q", strings.Join(who[m], ", "), m)
	}
	return out
}

func (in *instance) logTail(n int) string {
	b, err := os.ReadFile(in.logPath)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Gauge values of an instance that is not a count.
const (
	notRunning = -1 // the process has ended
	noAnswer   = -2 // its /metrics did not answer
)

// state is one scrape of every instance (notRunning, noAnswer, or the
// values).
type state struct {
	owned, lost, events []float64
}

func (s state) ownedInts() []int {
	out := make([]int, len(s.owned))
	for i, v := range s.owned {
		out[i] = int(v)
	}
	return out
}

// Balanced says whether the running instances own every one of p
// partitions and none holds more than its share, ceil(p/running). owned
// holds notRunning (-1) for an instance that has ended, and noAnswer (-2)
// for one whose /metrics did not answer (then nothing is known: false).
func Balanced(owned []int, p int) bool {
	n, sum, most := 0, 0, 0
	for _, v := range owned {
		if v == noAnswer {
			return false
		}
		if v < 0 {
			continue
		}
		n++
		sum += v
		most = max(most, v)
	}
	return n > 0 && sum == p && most <= (p+n-1)/n
}

// AllOwned says whether the running instances own all p partitions (false
// while one of them does not answer).
func AllOwned(owned []int, p int) bool {
	sum := 0
	for _, v := range owned {
		if v == noAnswer {
			return false
		}
		if v > 0 {
			sum += v
		}
	}
	return sum == p
}

type sizeRun struct {
	o     Options
	p     int
	start time.Time
	insts []*instance
	res   *SizeResult
}

func (r *sizeRun) scrape(ctx context.Context) state {
	st := state{}
	for _, in := range r.insts {
		owned, lost, events := float64(notRunning), float64(notRunning), float64(notRunning)
		if in.running() {
			owned, lost, events = noAnswer, noAnswer, noAnswer
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			m, err := Scrape(sctx, in.metricsURL(), r.o.OwnedMetric, r.o.LostMetric, r.o.EventsMetric)
			cancel()
			if err == nil {
				owned, lost, events = m[r.o.OwnedMetric], m[r.o.LostMetric], m[r.o.EventsMetric]
			}
		}
		st.owned = append(st.owned, owned)
		st.lost = append(st.lost, lost)
		st.events = append(st.events, events)
	}
	r.res.Samples = append(r.res.Samples, Sample{At: time.Since(r.start).Seconds(), Owned: st.ownedInts()})
	return st
}

var errExited = errors.New("an instance exited")

// exited reports an instance that ended although it was not stopped.
func (r *sizeRun) exited(alive []*instance) error {
	for _, in := range alive {
		if !in.running() {
			return fmt.Errorf("%w: %s (%v); its log ends:\n%s", errExited, in.id, in.err, in.logTail(15))
		}
	}
	return nil
}

// wait scrapes every Poll until cond holds, the timeout passes, ctx ends or
// an instance of alive exits.
func (r *sizeRun) wait(ctx context.Context, timeout time.Duration, alive []*instance, cond func(state) bool) (*Phase, state, error) {
	t0 := time.Now()
	ph := &Phase{Timeout: timeout.Seconds()}
	for {
		st := r.scrape(ctx)
		ph.Owned = st.ownedInts()
		ph.Seconds = time.Since(t0).Seconds()
		if cond(st) {
			ph.Done = true
			return ph, st, nil
		}
		if err := r.exited(alive); err != nil {
			return ph, st, err
		}
		if time.Since(t0) >= timeout {
			return ph, st, nil
		}
		select {
		case <-ctx.Done():
			return ph, st, ctx.Err()
		case <-time.After(r.o.Poll):
		}
	}
}

func sum(vs []float64) float64 {
	var s float64
	for _, v := range vs {
		if v > 0 {
			s += v
		}
	}
	return s
}

func runSize(ctx context.Context, o Options, p int) (res SizeResult) {
	res = SizeResult{Partitions: p, Instances: o.Instances, Started: time.Now().UTC().Format(time.RFC3339), LoadAvg: LoadAvg()}
	r := &sizeRun{o: o, p: p, start: time.Now(), res: &res}
	defer func() { res.Seconds = time.Since(r.start).Seconds() }()
	o.Logf("size %d: starting (loadavg %s)", p, res.LoadAvg)
	fail := func(err error) SizeResult {
		res.Status = "failed: " + err.Error()
		o.Logf("size %d: %s", p, res.Status)
		return res
	}

	dir := filepath.Join(o.Dir, fmt.Sprint(p))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fail(err)
	}
	table := fmt.Sprintf("bench_scale_%d_%d", p, time.Now().Unix())
	client, err := dynamostore.NewDynamoClient(ctx, dynamostore.DynamoConfig{Table: table, Endpoint: o.Endpoint, Region: "us-east-1"})
	if err != nil {
		return fail(err)
	}
	if err := dynamostore.EnsureTable(ctx, client, table); err != nil {
		return fail(err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		_, _ = client.DeleteTable(dctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	}()
	proxy := NewProxy(o.Endpoint)
	proxyURL, stopProxy, err := proxy.Listen()
	if err != nil {
		return fail(err)
	}
	defer stopProxy()

	names := PartitionNames(p)
	defer func() {
		var wg sync.WaitGroup
		for _, in := range r.insts {
			wg.Go(func() { in.stop(15 * time.Second) })
		}
		wg.Wait()
	}()
	for i := range o.Instances {
		in, err := startInstance(o, dir, fmt.Sprintf("i%d", i+1), table, proxyURL, names)
		if err != nil {
			return fail(err)
		}
		r.insts = append(r.insts, in)
	}
	first := slices.Clone(r.insts)

	// Cold start: balanced, then every event read.
	var allOwned *Phase
	ph, _, err := r.wait(ctx, o.Cold, first, func(s state) bool {
		if owned := s.ownedInts(); allOwned == nil && AllOwned(owned, p) {
			allOwned = &Phase{Done: true, Seconds: time.Since(r.start).Seconds(), Owned: owned}
		}
		return Balanced(s.ownedInts(), p)
	})
	res.Cold, res.ColdAllOwned = ph, allOwned
	if err != nil {
		return fail(err)
	}
	o.Logf("size %d: cold start %s (%s)", p, describePhase(ph, "balanced"), describePhase(allOwned, "all owned"))
	if !ph.Done {
		for _, e := range firstErrors(r.insts) {
			res.Notes = append(res.Notes, "cold start: "+e)
		}
	}
	want := float64(p * o.EventsPerPartition)
	// Every event is read within the cold start's timeout, and at least
	// a few polls after the balance.
	left := max(o.Cold-time.Since(r.start), 5*o.Poll)
	ph, _, err = r.wait(ctx, left, first, func(s state) bool { return sum(s.events) >= want })
	ph.Seconds = time.Since(r.start).Seconds()
	res.EventsRead = ph
	if err != nil {
		return fail(err)
	}
	if !ph.Done {
		ph.Note = fmt.Sprintf("%d events of %d partitions not all read", int(want), p)
	}
	o.Logf("size %d: events read: %v after %.0f s", p, ph.Done, ph.Seconds)

	// Idle window.
	if err := sleepCtx(ctx, o.Settle); err != nil {
		return fail(err)
	}
	idle, err := r.idle(ctx, proxy)
	if err != nil {
		return fail(err)
	}
	res.Idle = idle
	if idle.DynaliteCores >= 0.8 {
		res.Notes = append(res.Notes, fmt.Sprintf("dynalite used %.2f cores during the idle window (it runs on one): the idle rates are bounded by the local server, the demand may be higher", idle.DynaliteCores))
	}
	o.Logf("size %d: idle %.1f requests/s, %.1f read units/s, %.1f write units/s, %.0f leases lost, $%.0f/month",
		p, idle.Total.Requests, idle.Total.ReadUnits, idle.Total.BillableWriteUnits(), idle.LeasesLost, idle.MonthlyUSD)

	// One more instance.
	st := r.scrape(ctx)
	res.LeasesLost = sum(st.lost)
	in, err := startInstance(o, dir, fmt.Sprintf("i%d", o.Instances+1), table, proxyURL, names)
	if err != nil {
		return fail(err)
	}
	r.insts = append(r.insts, in)
	ph, _, err = r.wait(ctx, o.Add, r.insts, func(s state) bool { return Balanced(s.ownedInts(), p) })
	res.AddOne = ph
	if err != nil {
		return fail(err)
	}
	o.Logf("size %d: add one %s", p, describePhase(ph, "balanced"))

	// kill -9 of the first instance.
	st = r.scrape(ctx)
	res.Killed = int(st.owned[0])
	victim := r.insts[0]
	victim.kill(syscall.SIGKILL)
	<-victim.done
	alive := r.insts[1:]
	ph, _, err = r.wait(ctx, o.Takeover, alive, func(s state) bool { return AllOwned(s.ownedInts(), p) })
	res.Takeover = ph
	if err != nil {
		return fail(err)
	}
	o.Logf("size %d: takeover of %d partitions %s", p, res.Killed, describePhase(ph, "all owned"))
	res.Status = "measured"
	return res
}

// idle measures the idle window: requests through the proxy, leases lost,
// CPU and RSS of every instance and of dynalite.
func (r *sizeRun) idle(ctx context.Context, proxy *Proxy) (*Idle, error) {
	dynPid := 0
	if u, err := url.Parse(r.o.Endpoint); err == nil {
		dynPid = FindDynalite(u.Port())
	}
	st0 := r.scrape(ctx)
	lines0 := 0
	for _, in := range r.insts {
		lines0 += in.lostLines()
	}
	cpu0 := make([]ProcStat, len(r.insts))
	for i, in := range r.insts {
		cpu0[i], _ = ReadProc(in.cmd.Process.Pid)
	}
	dyn0, _ := ReadProc(dynPid)
	c0 := proxy.Snapshot()
	t0 := time.Now()
	if err := sleepCtx(ctx, r.o.Idle); err != nil {
		return nil, err
	}
	c1 := proxy.Snapshot()
	secs := time.Since(t0).Seconds()
	dyn1, _ := ReadProc(dynPid)
	id := &Idle{Seconds: secs, LoadAvg: LoadAvg()}
	for i, in := range r.insts {
		s1, err := ReadProc(in.cmd.Process.Pid)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", in.id, err)
		}
		id.Instances = append(id.Instances, InstanceUsage{RSSMiB: float64(s1.RSSBytes) / (1 << 20), CPUCores: (s1.CPUSeconds - cpu0[i].CPUSeconds) / secs})
	}
	if dynPid != 0 {
		id.DynaliteCores = (dyn1.CPUSeconds - dyn0.CPUSeconds) / secs
	}
	if err := r.exited(r.insts); err != nil {
		return nil, err
	}
	st1 := r.scrape(ctx)
	for i := range st1.lost {
		if st0.lost[i] < 0 || st1.lost[i] < 0 {
			return nil, fmt.Errorf("%s: its /metrics did not answer at both ends of the idle window", r.insts[i].id)
		}
		id.LeasesLost += st1.lost[i] - st0.lost[i]
	}
	for _, in := range r.insts {
		id.LeaseLostLines += in.lostLines()
	}
	id.LeaseLostLines -= lines0
	id.Counts = c1.Sub(c0)
	id.ByOp = map[string]Rates{}
	for op, c := range id.Counts {
		id.ByOp[op] = RatesOf(c, secs)
	}
	id.Total = RatesOf(id.Counts.Total(), secs)
	id.MonthlyUSD = MonthlyUSD(id.Total, r.o.Prices)
	return id, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// describePhase is "balanced after 12 s" or "not balanced after 75 s
// ([a b c])".
func describePhase(ph *Phase, what string) string {
	if ph == nil {
		return "never " + what
	}
	if ph.Done {
		return fmt.Sprintf("%s after %.0f s %s", what, ph.Seconds, ownedList(ph.Owned))
	}
	return fmt.Sprintf("not %s after %.0f s (%v)", what, ph.Seconds, ownedList(ph.Owned))
}

func ownedList(owned []int) string {
	parts := make([]string, len(owned))
	for i, v := range owned {
		switch v {
		case notRunning:
			parts[i] = "–"
		case noAnswer:
			parts[i] = "?"
		default:
			parts[i] = fmt.Sprint(v)
		}
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
