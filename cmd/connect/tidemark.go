package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/urfave/cli/v2"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/docgen"
	"github.com/tidemark/tidemark/internal/dynamostore"
	"github.com/tidemark/tidemark/internal/ops"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/storeconfig"
)

// tidemarkCommand is `connect tidemark`: status and repairs of the durable
// state in DynamoDB.
func tidemarkCommand() *cli.Command {
	storeFlags := []cli.Flag{
		&cli.StringFlag{Name: "scope", Required: true, Usage: "the paginated_partitions scope"},
		&cli.StringFlag{Name: "table", Value: dynamostore.DefaultTable, Usage: "the DynamoDB table"},
		&cli.StringFlag{Name: "endpoint", EnvVars: []string{"TIDEMARK_DYNAMODB_ENDPOINT"}, Usage: "DynamoDB endpoint override (dynalite, DynamoDB Local); default: AWS"},
		&cli.StringFlag{Name: "region", Usage: "AWS region; default: the SDK's default chain"},
		&cli.StringSliceFlag{Name: "cursor-key", Usage: "a key of the input's checkpoint.cursor_encryption, as ID=env:VARIABLE or ID=file:PATH (repeat for every key id still stored); with it, status shows the cursor hashes the logs show and restart writes its cursor encrypted"},
		&cli.StringFlag{Name: "cursor-active-key", Usage: "the key id new cursors are encrypted under (cursor_encryption.active_id); default: the last --cursor-key"},
	}
	repairFlags := append(append([]cli.Flag{}, storeFlags...),
		&cli.BoolFlag{Name: "dry-run", Usage: "print the conditional write without making it"},
		&cli.BoolFlag{Name: "yes", Usage: "do not ask for confirmation"},
		&cli.BoolFlag{Name: "force", Usage: "make a repair the stored state refuses (restart of a complete partition, backwards, or to another partition's cursor; a cutover of another kind, below the published frontier or above what the checkpoints prove); the audit entry records it"},
	)
	partitionFlag := &cli.StringFlag{Name: "partition", Required: true, Usage: "the partition to repair"}
	return &cli.Command{
		Name:  "tidemark",
		Usage: "Inspect and repair tidemark checkpoints, witnesses, membership and frontier; probe a source's contract",
		Subcommands: []*cli.Command{
			probeCommand(),
			{
				Name:  "docs",
				Usage: "Write the Markdown reference of tidemark's components (generated from their config specs)",
				Flags: []cli.Flag{&cli.StringFlag{Name: "out", Value: "docs", Usage: "directory to write"}},
				Action: func(c *cli.Context) error {
					pages, err := docgen.Render(service.GlobalEnvironment())
					if err != nil {
						return err
					}
					dir := c.String("out")
					if err := os.MkdirAll(dir, 0o755); err != nil {
						return err
					}
					for name, body := range pages {
						if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
							return err
						}
					}
					fmt.Fprintf(c.App.Writer, "wrote %d pages to %s\n", len(pages), dir)
					return nil
				},
			},
			{
				Name:  "status",
				Usage: "Per-partition checkpoints, the combined frontier with its epoch and the partitions holding it",
				Flags: append(append([]cli.Flag{}, storeFlags...), &cli.BoolFlag{Name: "json", Usage: "print JSON"},
					&cli.BoolFlag{Name: "discover", Usage: "first ask the running inputs of the scope (with discover: true) to discover their partitions now, as `discover` does"}),
				Action: func(c *cli.Context) error {
					st, err := openStore(c)
					if err != nil {
						return err
					}
					if c.Bool("discover") {
						if _, err := st.RequestDiscovery(c.Context, c.String("scope")); err != nil {
							return err
						}
					}
					s, err := ops.ReadStatus(c.Context, st, c.String("scope"))
					if err != nil {
						return err
					}
					if c.Bool("json") {
						return ops.WriteJSON(c.App.Writer, s)
					}
					return ops.WriteTable(c.App.Writer, s)
				},
			},
			{
				Name:  "discover",
				Usage: "Ask the running inputs of the scope (with discover: true) to list their partitions and reconcile the membership now; they act on it within about 2 seconds",
				Flags: append([]cli.Flag{}, storeFlags...),
				Action: func(c *cli.Context) error {
					st, err := openStore(c)
					if err != nil {
						return err
					}
					n, err := st.RequestDiscovery(c.Context, c.String("scope"))
					if err != nil {
						return err
					}
					_, err = fmt.Fprintf(c.App.Writer, "discovery request %d recorded for scope %s\n", n, c.String("scope"))
					return err
				},
			},
			{
				Name:  "unpark",
				Usage: "Clear a parked partition's reason (conditional on its current generation); it resumes from its durable cursor",
				Flags: append(append([]cli.Flag{}, repairFlags...), partitionFlag),
				Action: func(c *cli.Context) error {
					st, err := openStore(c)
					if err != nil {
						return err
					}
					r, err := ops.PlanUnpark(c.Context, st, store.Key{Scope: c.String("scope"), Partition: c.String("partition")}, repairOptions(c))
					if err != nil {
						return err
					}
					return runRepair(c, r)
				},
			},
			{
				Name:  "restart",
				Usage: "Restart a partition from a provider-supported stable boundary cursor (one conditional promotion)",
				Flags: append(append([]cli.Flag{}, repairFlags...), partitionFlag,
					&cli.StringFlag{Name: "cursor", Usage: "the boundary cursor; empty means the provider's start"}),
				Action: func(c *cli.Context) error {
					st, err := openStore(c)
					if err != nil {
						return err
					}
					r, err := ops.PlanRestart(c.Context, st, store.Key{Scope: c.String("scope"), Partition: c.String("partition")}, []byte(c.String("cursor")), repairOptions(c))
					if err != nil {
						return err
					}
					return runRepair(c, r)
				},
			},
			{
				Name:  "advance-epoch",
				Usage: "Record a proven membership cutover as a new epoch (compare-and-swap on the epoch)",
				Flags: append(append([]cli.Flag{}, repairFlags...),
					&cli.StringFlag{Name: "cutover", Required: true, Usage: "the coordinate the cutover is proven through"},
					&cli.StringFlag{Name: "coordinate", Value: "integer", Usage: "integer, timestamp or string"}),
				Action: func(c *cli.Context) error {
					st, err := openStore(c)
					if err != nil {
						return err
					}
					k, err := coord.ParseKind(c.String("coordinate"))
					if err != nil {
						return err
					}
					w, err := coord.Parse(k, c.String("cutover"))
					if err != nil {
						return err
					}
					r, err := ops.PlanAdvanceEpoch(c.Context, st, c.String("scope"), w, repairOptions(c))
					if err != nil {
						return err
					}
					return runRepair(c, r)
				},
			},
		},
	}
}

func openStore(c *cli.Context) (store.Store, error) {
	keys, active, err := cursorKeys(c.StringSlice("cursor-key"), c.String("cursor-active-key"))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(c.Context, 30*time.Second)
	defer cancel()
	st, err := dynamostore.NewDynamoStore(ctx, dynamostore.DynamoConfig{Table: c.String("table"), Endpoint: c.String("endpoint"), Region: c.String("region")})
	if err != nil || len(keys) == 0 {
		return st, err
	}
	return store.Encrypted(st, keys, active)
}

// cursorKeys parses the --cursor-key flags (ID=env:VARIABLE or
// ID=file:PATH) and the active key id (default: the last key).
func cursorKeys(flags []string, active string) ([]store.CursorKey, string, error) {
	var keys []store.CursorKey
	for _, f := range flags {
		id, src, ok := strings.Cut(f, "=")
		kind, where, ok2 := strings.Cut(src, ":")
		if !ok || !ok2 || id == "" || where == "" || (kind != "env" && kind != "file") {
			return nil, "", fmt.Errorf("--cursor-key %q: want ID=env:VARIABLE or ID=file:PATH", f)
		}
		var env, file string
		if kind == "env" {
			env = where
		} else {
			file = where
		}
		k, err := storeconfig.LoadCursorKey(id, env, file)
		if err != nil {
			return nil, "", fmt.Errorf("--cursor-key: %w", err)
		}
		keys = append(keys, k)
	}
	if active == "" && len(keys) > 0 {
		active = keys[len(keys)-1].ID
	}
	if active != "" && !slices.ContainsFunc(keys, func(k store.CursorKey) bool { return k.ID == active }) {
		return nil, "", fmt.Errorf("--cursor-active-key %q is not one of the --cursor-key ids", active)
	}
	return keys, active, nil
}

// repairOptions are the repair's --force and its operator: now, the OS
// user and the host, for the audit entry.
func repairOptions(c *cli.Context) ops.Options {
	o := ops.Options{Force: c.Bool("force"), Operator: ops.Operator{Time: time.Now(), User: "unknown", Host: "unknown"}}
	if u, err := user.Current(); err == nil && u.Username != "" {
		o.Operator.User = u.Username
	} else if name := os.Getenv("USER"); name != "" {
		o.Operator.User = name
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		o.Operator.Host = h
	}
	return o
}

// runRepair confirms and applies r, printing the state before and after
// (never a raw cursor) and the audit entry written with it.
func runRepair(c *cli.Context, r ops.Repair) error {
	out := c.App.Writer
	if c.Bool("dry-run") {
		fmt.Fprintln(out, "dry run: would", r.Describe)
		fmt.Fprintln(out, "before:", r.Before)
		return nil
	}
	if !c.Bool("yes") {
		fmt.Fprintf(out, "About to %s.\nProceed? [y/N] ", r.Describe)
		line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
			return errors.New("aborted")
		}
	}
	after, err := r.Apply(c.Context)
	if err != nil {
		if ops.IsFenced(err) {
			return fmt.Errorf("the state changed since it was read (a worker or another operator wrote first); the repair was not applied: %w", err)
		}
		return err
	}
	fmt.Fprintln(out, "done:", r.Describe)
	fmt.Fprintln(out, "before:", r.Before)
	fmt.Fprintln(out, "after: ", after)
	fmt.Fprintln(out, "audit:", ops.DescribeRepair(r.Entry))
	return nil
}
