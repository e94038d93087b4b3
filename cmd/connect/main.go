// Command connect is a Redpanda Connect (Benthos v4) binary with the benthos
// pure, pure/extended and io component bundles plus every tidemark component.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/redpanda-data/benthos/v4/public/service"

	_ "github.com/redpanda-data/benthos/v4/public/components/io"
	_ "github.com/redpanda-data/benthos/v4/public/components/pure"
	_ "github.com/redpanda-data/benthos/v4/public/components/pure/extended"

	"github.com/tidemark/tidemark/internal/runstatus"
	_ "github.com/tidemark/tidemark/plugin"
)

func main() {
	code, err := service.RunCLIToCode(context.Background(), service.CLIOptAddCommand(tidemarkCommand()))
	if err != nil {
		fmt.Fprintln(os.Stderr, err.Error())
	}
	// A run that ended by itself but not well (exit_when_complete with
	// parked partitions) exits non-zero, with its reasons.
	if fails := runstatus.Failures(); code == 0 && len(fails) > 0 {
		for _, f := range fails {
			fmt.Fprintln(os.Stderr, "tidemark:", f)
		}
		code = runstatus.ExitCode
	}
	if code != 0 {
		os.Exit(code)
	}
}
