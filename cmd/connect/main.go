// Command connect is a Redpanda Connect (Benthos v4) binary with the benthos
// pure, pure/extended and io component bundles plus every tidemark component.
package main

import (
	"context"

	"github.com/redpanda-data/benthos/v4/public/service"

	_ "github.com/redpanda-data/benthos/v4/public/components/io"
	_ "github.com/redpanda-data/benthos/v4/public/components/pure"
	_ "github.com/redpanda-data/benthos/v4/public/components/pure/extended"

	_ "github.com/tidemark/tidemark/plugin"
)

func main() {
	service.RunCLI(context.Background(), service.CLIOptAddCommand(tidemarkCommand()))
}
