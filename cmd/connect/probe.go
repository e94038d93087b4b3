package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/tidemark/tidemark/internal/probe"
	"github.com/tidemark/tidemark/internal/probe/live"
)

// Exit codes of `connect tidemark probe`.
const (
	probeExitContradicted = 1
	probeExitFailed       = 2
)

// probeCommand is `connect tidemark probe CONFIG`: a bounded, read-only
// battery against the live source of a paginated_partitions config with an
// http provider (docs/probe.md).
func probeCommand() *cli.Command {
	return &cli.Command{
		Name:      "probe",
		Usage:     "Check a config's declared contract against its live source with a bounded, read-only battery of its own requests (no checkpoint store, nothing emitted); exits 1 when a declared field is contradicted",
		ArgsUsage: "CONFIG",
		Flags: []cli.Flag{
			&cli.StringSliceFlag{Name: "partition", Usage: "probe only this partition (repeatable); default: the config's partitions, or its discovered ones"},
			&cli.IntFlag{Name: "pages", Value: 5, Usage: "at most this many pages per walk of a partition"},
			&cli.DurationFlag{Name: "timeout", Value: 2 * time.Minute, Usage: "deadline of the whole probe (each request also has the provider's own timeout)"},
		},
		Action: func(c *cli.Context) error {
			opts, err := probeOptions(c)
			if err != nil {
				return cli.Exit(fmt.Sprintf("%v\nusage: connect tidemark probe CONFIG [--partition P] [--pages N] [--timeout D]", err), probeExitFailed)
			}
			ctx, cancel := context.WithTimeout(c.Context, opts.timeout)
			defer cancel()
			logger := slog.New(slog.NewTextHandler(c.App.ErrWriter, &slog.HandlerOptions{Level: slog.LevelWarn}))
			t, err := live.Load(opts.config, logger)
			if err != nil {
				return cli.Exit(fmt.Sprintf("probe: %v", err), probeExitFailed)
			}
			defer func() { _ = t.Close(context.Background()) }()
			parts, err := t.PartitionsToProbe(ctx, opts.partitions)
			if err != nil {
				return cli.Exit(fmt.Sprintf("probe: %v", err), probeExitFailed)
			}
			out := c.App.Writer
			fmt.Fprintf(out, "probe %s: scope %s, %d partition(s), at most %d pages per walk (read-only: no checkpoint store, nothing emitted)\n",
				opts.config, t.Scope, len(parts), opts.pages)
			contradicted, answered := false, false
			for _, p := range parts {
				o := t.Probe(ctx, p, opts.pages)
				fs := probe.Evaluate(t.Declared, o)
				if err := probe.Write(out, o, fs); err != nil {
					return err
				}
				contradicted = contradicted || probe.AnyContradicted(fs)
				answered = answered || len(o.First.Pages) > 0
			}
			switch {
			case contradicted:
				return cli.Exit("probe: the source's answers contradict a declared contract field (see above)", probeExitContradicted)
			case !answered:
				return cli.Exit("probe: no partition answered a page", probeExitFailed)
			}
			return nil
		},
	}
}

type probeOpts struct {
	config     string
	partitions []string
	pages      int
	timeout    time.Duration
}

// probeOptions reads the flags given before CONFIG (parsed by cli) and
// after it (urfave/cli stops at the first argument, so they are parsed
// here, with the same names).
func probeOptions(c *cli.Context) (probeOpts, error) {
	o := probeOpts{partitions: c.StringSlice("partition"), pages: c.Int("pages"), timeout: c.Duration("timeout")}
	args := c.Args().Slice()
	if len(args) == 0 {
		return o, errors.New("probe: CONFIG is missing")
	}
	o.config = args[0]
	fs := flag.NewFlagSet("probe", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Func("partition", "", func(s string) error { o.partitions = append(o.partitions, s); return nil })
	fs.IntVar(&o.pages, "pages", o.pages, "")
	fs.DurationVar(&o.timeout, "timeout", o.timeout, "")
	if err := fs.Parse(args[1:]); err != nil {
		return o, fmt.Errorf("probe: %w", err)
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("probe: one CONFIG only, got also %q", fs.Args())
	}
	if o.pages < 1 {
		return o, errors.New("probe: --pages must be at least 1")
	}
	return o, nil
}
