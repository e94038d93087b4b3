// Command benchscale is tidemark's scale benchmark (docs/scale.md): three
// bin/connect processes share N simulated partitions through leases
// (`leases: {}`, every default) on dynalite, behind a proxy that counts the
// DynamoDB requests by operation. For each size it measures the time to
// balance after a cold start, the idle requests/s by operation with read and
// write units, the leases lost while idle, RSS and CPU per instance, the time
// to balance after adding a fourth instance and the takeover after kill -9
// of one; then it fits the per-request model and predicts the sizes it did
// not measure.
//
// Usage (dynalite from scripts/with-dynalite):
//
//	./scripts/with-dynalite go run ./bench/cmd/benchscale [-sizes 1000,5000,10000] [-budget 13m] [-out .bench]
//
// It writes <out>/scale.md (also printed) and <out>/scale.json (every
// figure, the owned counts of every scrape), and keeps each instance's
// config and log under <out>/scale/<size>/. `benchscale -render
// .bench/scale.json -out DIR` re-renders a saved run (model and table)
// without running anything.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tidemark/tidemark/bench/scale"
)

func main() {
	o := scale.DefaultOptions()
	sizes := flag.String("sizes", "1000,5000,10000", "partition counts, run in this order")
	out := flag.String("out", ".bench", "directory of scale.md, scale.json and the instances' configs and logs")
	flag.StringVar(&o.Bin, "bin", o.Bin, "the bin/connect to run")
	flag.StringVar(&o.Endpoint, "endpoint", os.Getenv("TIDEMARK_DYNAMODB_ENDPOINT"), "the local DynamoDB (default $TIDEMARK_DYNAMODB_ENDPOINT, set by scripts/with-dynalite)")
	flag.IntVar(&o.Instances, "instances", o.Instances, "instances started together")
	flag.IntVar(&o.EventsPerPartition, "events", o.EventsPerPartition, "events per partition of the simulated source")
	flag.DurationVar(&o.Budget, "budget", o.Budget, "the whole run; a size whose worst case no longer fits is skipped and extrapolated")
	flag.DurationVar(&o.Cold, "cold", o.Cold, "timeout of the cold start (balanced and every event read)")
	flag.DurationVar(&o.Add, "add", o.Add, "timeout of balancing after adding an instance")
	flag.DurationVar(&o.Takeover, "takeover", o.Takeover, "timeout of the takeover after kill -9")
	flag.DurationVar(&o.Settle, "settle", o.Settle, "pause between the last event read and the idle window")
	flag.DurationVar(&o.Idle, "idle", o.Idle, "the idle window")
	flag.DurationVar(&o.Poll, "poll", o.Poll, "scrape interval of the instances' /metrics while waiting")
	flag.StringVar(&o.Leases, "leases", o.Leases, "YAML value of the input's leases field")
	flag.StringVar(&o.OwnedMetric, "owned-metric", o.OwnedMetric, "gauge of the partitions an instance owns")
	flag.StringVar(&o.LostMetric, "lost-metric", o.LostMetric, "counter of the leases an instance lost")
	flag.StringVar(&o.EventsMetric, "events-metric", o.EventsMetric, "counter of the events an instance emitted")
	flag.Float64Var(&o.Prices.WritePerMillion, "price-write", o.Prices.WritePerMillion, "assumed USD per million write request units")
	flag.Float64Var(&o.Prices.ReadPerMillion, "price-read", o.Prices.ReadPerMillion, "assumed USD per million read request units")
	render := flag.String("render", "", "only re-render this scale.json (its model and markdown) into -out, running nothing")
	flag.Parse()
	if *render != "" {
		b, err := os.ReadFile(*render)
		if err != nil {
			fail(err.Error())
		}
		rep := &scale.Report{}
		if err := json.Unmarshal(b, rep); err != nil {
			fail(fmt.Sprintf("%s: %v", *render, err))
		}
		rep.BuildModel()
		write(*out, rep)
		return
	}
	if o.Endpoint == "" {
		fail("no DynamoDB endpoint: run me through scripts/with-dynalite (or pass -endpoint)")
	}
	o.Sizes = nil
	for s := range strings.SplitSeq(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(strings.ReplaceAll(s, "_", "")))
		if err != nil || n <= 0 {
			fail(fmt.Sprintf("-sizes: %q is not a positive number", s))
		}
		o.Sizes = append(o.Sizes, n)
	}
	bin, err := filepath.Abs(o.Bin)
	if err != nil {
		fail(err.Error())
	}
	if _, err := os.Stat(bin); err != nil {
		fail(fmt.Sprintf("%s: %v (build it: go build -o bin/connect ./cmd/connect)", o.Bin, err))
	}
	o.Bin = bin
	o.Dir = filepath.Join(*out, "scale")
	o.Logf = func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "benchscale %s: %s\n", time.Now().UTC().Format("15:04:05"), fmt.Sprintf(format, args...))
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep := &scale.Report{
		Command: "./scripts/with-dynalite go run ./bench/cmd/benchscale " + strings.Join(os.Args[1:], " "),
		Machine: machine(),
		Started: time.Now().UTC().Format("2006-01-02 15:04 UTC"),
		Prices:  o.Prices,
		Options: fmt.Sprintf("%d instances, %d events a partition, leases: %s, phase timeouts cold %s / add %s / takeover %s, idle window %s after %s, scrape every %s",
			o.Instances, o.EventsPerPartition, o.Leases, o.Cold, o.Add, o.Takeover, o.Idle, o.Settle, o.Poll),
	}
	rep.Results = scale.Run(ctx, o)
	rep.Finished = time.Now().UTC().Format("15:04 UTC")
	rep.BuildModel()

	write(*out, rep)
}

// write writes out/scale.md and out/scale.json and prints the markdown.
func write(out string, rep *scale.Report) {
	if err := os.MkdirAll(out, 0o755); err != nil {
		fail(err.Error())
	}
	md := rep.Markdown()
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		fail(err.Error())
	}
	if err := os.WriteFile(filepath.Join(out, "scale.md"), []byte(md), 0o644); err != nil {
		fail(err.Error())
	}
	if err := os.WriteFile(filepath.Join(out, "scale.json"), append(js, '\n'), 0o644); err != nil {
		fail(err.Error())
	}
	fmt.Println(md)
	fmt.Fprintf(os.Stderr, "benchscale: wrote %s and %s\n", filepath.Join(out, "scale.md"), filepath.Join(out, "scale.json"))
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "benchscale:", msg)
	os.Exit(2)
}

// machine describes the host: CPUs, Go, dynalite, load.
func machine() string {
	model := "?"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				model = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	dyn := "?"
	if b, err := os.ReadFile("node_modules/dynalite/package.json"); err == nil {
		var p struct {
			Version string `json:"version"`
		}
		if json.Unmarshal(b, &p) == nil {
			dyn = p.Version
		}
	}
	return fmt.Sprintf("%d CPUs (%s), %s, dynalite %s, loadavg %s at the start", runtime.NumCPU(), model, runtime.Version(), dyn, scale.LoadAvg())
}
