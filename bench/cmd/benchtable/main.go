// Command benchtable turns the output of tidemark's benchmarks (go test
// -bench over ./bench/ and ./internal/frontier/, see scripts/bench) into the
// one markdown table of docs/benchmarks.md ("Latest full run"). Every figure is
// the median of the samples (-count) of its benchmark.
//
// Usage:
//
//	benchtable [-pages N] raw.txt... > results.md
//
// Lines starting with "# machine: " are copied under the table (the
// script's notes on the machine); lines "# loadavg <name>: <loadavg>" give
// the load of benchmarks that do not report it (internal/frontier).
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

type samples map[string][]float64 // unit -> values

type results struct {
	bench   map[string]samples
	loadavg map[string]string
	notes   []string
}

var procSuffix = regexp.MustCompile(`-\d+$`)

func parse(r io.Reader, res *results) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if n, ok := strings.CutPrefix(line, "# machine: "); ok {
			res.notes = append(res.notes, n)
			continue
		}
		if rest, ok := strings.CutPrefix(line, "# loadavg "); ok {
			if name, v, ok := strings.Cut(rest, ": "); ok {
				res.loadavg[name] = strings.TrimSpace(v)
			}
			continue
		}
		if !strings.HasPrefix(line, "Benchmark") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 || len(f)%2 != 0 {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue
		}
		name := procSuffix.ReplaceAllString(f[0], "")
		s := res.bench[name]
		if s == nil {
			s = samples{}
			res.bench[name] = s
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			s[f[i+1]] = append(s[f[i+1]], v)
		}
	}
	return sc.Err()
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	v = slices.Clone(v)
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

// get returns the median of a metric, and whether the benchmark ran.
func (r *results) get(name, unit string) (float64, bool) {
	s, ok := r.bench[name]
	if !ok || len(s[unit]) == 0 {
		return math.NaN(), false
	}
	return median(s[unit]), true
}

// pairedRatio is the median of a/b over the samples of two benchmarks
// run alternately (sample i of each from the same round of -count), or the
// ratio of their medians when the counts differ.
func (r *results) pairedRatio(a, b, unit string) float64 {
	va, vb := r.bench[a][unit], r.bench[b][unit]
	if len(va) == 0 || len(va) != len(vb) {
		x, _ := r.get(a, unit)
		y, _ := r.get(b, unit)
		return x / y
	}
	q := make([]float64, len(va))
	for i := range va {
		q[i] = va[i] / vb[i]
	}
	return median(q)
}

func (r *results) n(name string) int {
	s := r.bench[name]
	m := 0
	for _, v := range s {
		m = max(m, len(v))
	}
	return m
}

// thousands formats an integer with thousands separators.
func thousands(v float64) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	s := strconv.FormatInt(int64(math.Round(v)), 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func f2(v float64) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// machine describes the CPU other than the benchmark's during a benchmark.
func (r *results) machine(names ...string) string {
	var others, dyn, bench, load []float64
	for _, n := range names {
		if v, ok := r.get(n, "cpu-others-cores"); ok {
			others = append(others, v)
		}
		if v, ok := r.get(n, "cpu-dynalite-cores"); ok {
			dyn = append(dyn, v)
		}
		if v, ok := r.get(n, "cpu-bench-cores"); ok {
			bench = append(bench, v)
		}
		if v, ok := r.get(n, "load1"); ok {
			load = append(load, v)
		}
	}
	if len(load) == 0 {
		return "n/a"
	}
	parts := []string{fmt.Sprintf("load1 %s", f2(median(load)))}
	if len(bench) > 0 {
		parts = append(parts, fmt.Sprintf("bench %s", f2(median(bench))))
	}
	if len(dyn) > 0 {
		parts = append(parts, fmt.Sprintf("dynalite %s", f2(median(dyn))))
	}
	if len(others) > 0 {
		parts = append(parts, fmt.Sprintf("others %s", f2(median(others))))
	}
	return strings.Join(parts, ", ")
}

// excess formats how far a ratio is over its target ("< 0.01" when it
// would round to zero).
func excess(d float64) string {
	if d < 0.005 {
		return "< 0.01"
	}
	return f2(d)
}

type row struct{ num, measure, config, result, target, machine string }

func verdict(ok bool, miss string) string {
	if ok {
		return "met"
	}
	return "**missed** " + miss
}

func main() {
	flag.Parse()
	res := &results{bench: map[string]samples{}, loadavg: map[string]string{}}
	if flag.NArg() == 0 {
		if err := parse(os.Stdin, res); err != nil {
			fmt.Fprintln(os.Stderr, "benchtable:", err)
			os.Exit(1)
		}
	}
	for _, p := range flag.Args() {
		f, err := os.Open(p)
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchtable:", err)
			os.Exit(1)
		}
		err = parse(f, res)
		f.Close()
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchtable:", err)
			os.Exit(1)
		}
	}
	var rows []row
	ps := []int{1, 4, 16, 64}
	targets := map[int]float64{16: 0.90, 64: 0.80}

	// 1. Throughput vs limit.
	for _, p := range ps {
		name := fmt.Sprintf("BenchmarkThroughput/store=dynamodb/P=%d", p)
		ev, ok := res.get(name, "events/s")
		if !ok {
			continue
		}
		lim, _ := res.get(name, "limit-events/s")
		ratio, _ := res.get(name, "ratio")
		target := "-"
		if t, ok := targets[p]; ok {
			target = fmt.Sprintf("ratio >= %s: %s", f2(t), verdict(ratio >= t, fmt.Sprintf("by %s", f2(t-ratio))))
		}
		rows = append(rows, row{"1", "throughput vs limit", fmt.Sprintf("P=%d, DynamoDB store (dynalite), 20 ms/fetch, 100 events/page, output acks at once", p),
			fmt.Sprintf("%s events/s of %s = **%s**", thousands(ev), thousands(lim), f2(ratio)), target, res.machine(name)})
	}

	// 2. Checkpoint overhead.
	for _, p := range ps {
		plain := fmt.Sprintf("BenchmarkPlainRead/P=%d", p)
		mem := fmt.Sprintf("BenchmarkThroughput/store=memory/P=%d", p)
		dyn := fmt.Sprintf("BenchmarkThroughput/store=dynamodb/P=%d", p)
		pe, ok := res.get(plain, "events/s")
		if !ok {
			continue
		}
		pr, _ := res.get(plain, "ratio")
		me, _ := res.get(mem, "events/s")
		mr, _ := res.get(mem, "ratio")
		de, _ := res.get(dyn, "events/s")
		dr, _ := res.get(dyn, "ratio")
		rows = append(rows, row{"2", "checkpoint overhead", fmt.Sprintf("P=%d: plain read (no checkpoint, one goroutine per partition) / pipeline with memory store / with DynamoDB (dynalite)", p),
			fmt.Sprintf("%s (%s) / %s (%s) / %s (%s) events/s (ratio to limit); memory/plain **%s**, DynamoDB/plain **%s**",
				thousands(pe), f2(pr), thousands(me), f2(mr), thousands(de), f2(dr), f2(me/pe), f2(de/pe)),
			"-", res.machine(plain, mem, dyn)})
	}
	for _, st := range []string{"memory+5ms", "memory+10ms"} {
		var parts []string
		var names []string
		for _, p := range ps {
			name := fmt.Sprintf("BenchmarkThroughput/store=%s/P=%d", st, p)
			if r, ok := res.get(name, "ratio"); ok {
				parts = append(parts, fmt.Sprintf("P=%d **%s**", p, f2(r)))
				names = append(names, name)
			}
		}
		if len(parts) == 0 {
			continue
		}
		lat := strings.TrimPrefix(st, "memory+")
		rows = append(rows, row{"2", "store latency", fmt.Sprintf("memory store + %s per request (DynamoDB-like latency, no throughput ceiling)", lat),
			"ratio to limit: " + strings.Join(parts, ", "), "-", res.machine(names...)})
	}
	for _, p := range []int{16, 64} {
		name := fmt.Sprintf("BenchmarkStoreCeiling/store=dynamodb/P=%d", p)
		pg, ok := res.get(name, "pages/s")
		if !ok {
			continue
		}
		mr, _ := res.get(name, "max-ratio")
		rows = append(rows, row{"2", "store ceiling", fmt.Sprintf("dynalite alone, %d writers, witness PutItem + promotion UpdateItem per page", p),
			fmt.Sprintf("%s pages/s: caps the ratio at P=%d to **%s**", thousands(pg), p, f2(mr)), "-", res.machine(name)})
	}

	// 3. Store cost.
	for _, c := range []struct{ name, label string }{
		{"BenchmarkStoreCost/steady", "steady state: P=4, 200 pages each, 5 ms/fetch, no faults (counted between the last partition's first fetch and the first end of data)"},
		{"BenchmarkStoreCost/steady-no-wait", "the same with promotion_min_pages 1 (a delivered page does not wait for the page behind it)"},
		{"BenchmarkStoreCost/steady-shared-digest", "steady state with a constant semantic projection (`event_semantic: root = \"\"`: payload changes do not matter), so each witness stores one digest"},
		{"BenchmarkStoreCost/load-p64", "under load: P=64, 40 pages each, 20 ms/fetch, no faults, against dynalite's ceiling (acknowledgements run ahead of promotions, which coalesce)"},
		{"BenchmarkStoreCost/retries", "during retries: the same with rotating tokens, shift_rate 0.5 and every 10th batch nacked (each nack re-fetches the page and classifies the retry)"},
	} {
		w, ok := res.get(c.name, "page-writes/page")
		if !ok {
			continue
		}
		rd, _ := res.get(c.name, "page-reads/page")
		wcu, _ := res.get(c.name, "WCU/page")
		var kinds []string
		for _, k := range []string{"witness-put", "promotion", "receipt", "disposition", "witness-query", "checkpoint-get", "witness-get"} {
			if v, ok := res.get(c.name, k+"/page"); ok && v > 0 {
				kinds = append(kinds, fmt.Sprintf("%s %s", k, f2(v)))
			}
		}
		var extra []string
		if v, ok := res.get(c.name, "witness-item-bytes"); ok {
			pw, _ := res.get(c.name, "promotion-WCU")
			extra = append(extra, fmt.Sprintf("witness item %s bytes, promotion %s WCU", thousands(v), f2(pw)))
		}
		if v, ok := res.get(c.name, "nacks/page"); ok && v > 0 {
			extra = append(extra, fmt.Sprintf("%s nacks/page", f2(v)))
		}
		if v, ok := res.get(c.name, "record-requests/s"); ok {
			extra = append(extra, fmt.Sprintf("plus frontier publication %s requests/s", f2(v)))
		}
		if v, ok := res.get(c.name, "startup-requests/partition"); ok {
			extra = append(extra, fmt.Sprintf("start-up %s requests/partition", f2(v)))
		}
		target := "-"
		if strings.HasSuffix(c.name, "load-p64") {
			target = fmt.Sprintf("writes <= 1.2: %s; WCU <= 2: %s; reads 0: %s",
				verdict(w <= 1.205, fmt.Sprintf("by %s", f2(w-1.2))), verdict(wcu <= 2.005, fmt.Sprintf("by %s", f2(wcu-2))), verdict(rd < 0.005, fmt.Sprintf("(%s)", f2(rd))))
		}
		rows = append(rows, row{"3", "DynamoDB cost per 100-event page", c.label,
			fmt.Sprintf("**%s writes, %s WCU, %s reads** (%s); %s", f2(w), f2(wcu), f2(rd), strings.Join(kinds, ", "), strings.Join(extra, "; ")),
			target, res.machine(c.name)})
	}

	// 4. Frontier.
	for _, p := range []string{"10000", "100000"} {
		name := "BenchmarkTrackerUpdate/P=" + p
		ns, ok := res.get(name, "ns/op")
		if !ok {
			continue
		}
		al, _ := res.get(name, "allocs/op")
		by, _ := res.get(name, "B/op")
		m := "n/a"
		if l, ok := res.loadavg["frontier"]; ok {
			m = "loadavg " + l
		}
		rows = append(rows, row{"4", "frontier update", fmt.Sprintf("internal/frontier BenchmarkTrackerUpdate, %s partitions", thousands(mustFloat(p))),
			fmt.Sprintf("**%s ns/op**, %s allocs/op, %s B/op", strconv.FormatFloat(ns, 'f', 1, 64), thousands(al), thousands(by)), "O(log P)", m})
	}

	// 5. Memory.
	for _, backend := range []string{"memory", "dynamodb"} {
		a := fmt.Sprintf("BenchmarkPeakRSS/backend=%s/events=1000000", backend)
		b := fmt.Sprintf("BenchmarkPeakRSS/backend=%s/events=4000000", backend)
		ra, oka := res.get(a, "peak-RSS-MB")
		rb, okb := res.get(b, "peak-RSS-MB")
		if !oka && !okb {
			continue
		}
		ea, _ := res.get(a, "events/s")
		eb, _ := res.get(b, "events/s")
		h1, _ := res.get(b, "peak-RSS-1st-half-MB")
		h2, _ := res.get(b, "peak-RSS-2nd-half-MB")
		growth, halves := rb/ra, h2/h1
		// Flat: the second half of the long run peaks no higher than its
		// first half (10% slack for the garbage collector's timing).
		target := fmt.Sprintf("independent of run length: %s", verdict(halves <= 1.10, fmt.Sprintf("(x%s from the 1st to the 2nd half of the 4M run)", f2(halves))))
		rows = append(rows, row{"5", "peak RSS of bin/connect", fmt.Sprintf("64 partitions, no latency, default max_pages_in_flight, output drop, %s backend", backend),
			fmt.Sprintf("1M events: **%s MB** (%s events/s); 4M events: **%s MB** (%s events/s), x%s; 4M run by halves: %s MB then %s MB", f2(ra), thousands(ea), f2(rb), thousands(eb), f2(growth), f2(h1), f2(h2)),
			target, res.machine(a, b)})
	}

	// 6. The http provider against a plain Benthos pipeline.
	for _, p := range []int{1, 16, 64} {
		plain := fmt.Sprintf("BenchmarkVsPlain/P=%d/pipeline=plain", p)
		pw, ok := res.get(plain, "wall-s")
		if !ok {
			continue
		}
		pc, _ := res.get(plain, "cpu-us/event")
		pe, _ := res.get(plain, "events/s")
		lim, _ := res.get(plain, "limit-events/s")
		parts := []string{fmt.Sprintf("plain: %s s wall, %s CPU-µs/event, %s events/s of %s", f2(pw), f2(pc), thousands(pe), thousands(lim))}
		names := []string{plain}
		target := "-"
		for _, st := range []string{"memory", "dynamodb"} {
			name := fmt.Sprintf("BenchmarkVsPlain/P=%d/pipeline=tidemark-%s", p, st)
			tw, ok := res.get(name, "wall-s")
			if !ok {
				continue
			}
			names = append(names, name)
			tc, _ := res.get(name, "cpu-us/event")
			wr, cr := res.pairedRatio(name, plain, "wall-s"), res.pairedRatio(name, plain, "cpu-us/event")
			parts = append(parts, fmt.Sprintf("tidemark, %s store: %s s, %s CPU-µs/event: wall **x%s**, CPU/event **x%s**", st, f2(tw), f2(tc), f2(wr), f2(cr)))
			if st == "memory" && p >= 16 {
				target = fmt.Sprintf("memory store: CPU/event <= x%s: %s; wall <= x%s: %s",
					f2(vsCPUTarget), verdict(cr <= vsCPUTarget, "by "+excess(cr-vsCPUTarget)), f2(vsWallTarget), verdict(wr <= vsWallTarget, "by "+excess(wr-vsWallTarget)))
			}
		}
		rows = append(rows, row{"6", "http provider vs plain Benthos", fmt.Sprintf("P=%d, one local page server (100 nested events/page, 20 ms/page, JSON), output drop; plain = bench/plain_http.yaml, tidemark = bench/tidemark_http.yaml", p),
			strings.Join(parts, "; "), target, res.machine(names...)})
	}

	fmt.Println("| # | measure | configuration | result | target | machine (CPU cores: bench, dynalite, other sessions) |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, r := range rows {
		fmt.Printf("| %s | %s | %s | %s | %s | %s |\n", r.num, r.measure, r.config, r.result, r.target, r.machine)
	}
	res.sideBySide(os.Stdout)
	samplesN := 0
	for name := range res.bench {
		samplesN = max(samplesN, res.n(name))
	}
	fmt.Printf("\nMedians of %d run(s) per figure. limit = P x 100 events / 20 ms.\n", samplesN)
	for _, n := range res.notes {
		fmt.Println(n)
	}
}

// The targets of the side-by-side comparison (memory store, P=16 and 64).
const (
	vsCPUTarget  = 1.15
	vsWallTarget = 1.05
)

// sideBySide prints BenchmarkVsPlain as one table: per P, the plain
// pipeline and tidemark with each store, their wall, CPU per event (and
// both as paired ratios to plain), peak RSS and store writes per page.
func (r *results) sideBySide(w io.Writer) {
	type pipe struct{ name, label string }
	pipes := []pipe{{"plain", "plain Redpanda Connect (bench/plain_http.yaml)"}, {"tidemark-memory", "tidemark, memory store"}, {"tidemark-dynamodb", "tidemark, DynamoDB store (dynalite)"}}
	var lines []string
	var verdicts []string
	for _, p := range []int{1, 16, 64} {
		plain := fmt.Sprintf("BenchmarkVsPlain/P=%d/pipeline=plain", p)
		if _, ok := r.get(plain, "wall-s"); !ok {
			continue
		}
		for _, pp := range pipes {
			name := fmt.Sprintf("BenchmarkVsPlain/P=%d/pipeline=%s", p, pp.name)
			wall, ok := r.get(name, "wall-s")
			if !ok {
				continue
			}
			cpu, _ := r.get(name, "cpu-us/event")
			rss, _ := r.get(name, "peak-RSS-MB")
			load, _ := r.get(name, "load1")
			others, _ := r.get(name, "cpu-others-cores")
			ratios, writes, wcu := "-", "-", "-"
			if pp.name != "plain" {
				cr, wr := r.pairedRatio(name, plain, "cpu-us/event"), r.pairedRatio(name, plain, "wall-s")
				ratios = fmt.Sprintf("**x%s** / x%s", f2(cr), f2(wr))
				if pp.name == "tidemark-memory" && p >= 16 {
					verdicts = append(verdicts, fmt.Sprintf("P=%d: CPU <= x%s %s, wall <= x%s %s", p,
						f2(vsCPUTarget), verdict(cr <= vsCPUTarget, "by "+excess(cr-vsCPUTarget)), f2(vsWallTarget), verdict(wr <= vsWallTarget, "by "+excess(wr-vsWallTarget))))
				}
			}
			switch pp.name {
			case "plain":
				if v, ok := r.get(name, "cache-writes/page"); ok {
					writes = f2(v) + " (memory cache)"
				}
			case "tidemark-memory":
				writes = "(memory)"
			case "tidemark-dynamodb":
				if v, ok := r.get(name, "writes/page"); ok {
					writes = f2(v)
				}
				if v, ok := r.get(name, "WCU/page"); ok {
					wcu = f2(v)
				}
			}
			lines = append(lines, fmt.Sprintf("| %d | %s | %s | %s | %s | %s | %s | %s | load1 %s, others %s |",
				p, pp.label, f2(wall), f2(cpu), ratios, f2(rss), writes, wcu, f2(load), f2(others)))
		}
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Side by side: one local page server, 100 nested events (about 1 KB each) a page, 20 ms a page, output drop; medians, ratios paired per round.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| P | pipeline | wall s | CPU µs/event | CPU / wall vs plain | peak RSS MB | store writes/page | WCU/page | machine (cores) |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
	if len(verdicts) > 0 {
		fmt.Fprintf(w, "\nTargets (memory store): %s.\n", strings.Join(verdicts, "; "))
	}
	fmt.Fprintln(w, "Store writes/page: every write request of the run (start-up, membership and frontier records included) over its pages, counted by a metering proxy in front of dynalite; WCU/page: the write units dynalite reported for them.")
}

func mustFloat(s string) float64 {
	v, _ := strconv.ParseFloat(s, 64)
	return v
}
