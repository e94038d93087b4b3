package main

import (
	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/tidemark/tidemark/internal/promexport"
)

// The binary, not the importable plugin package, registers the
// `prometheus` metrics exporter: a program that links tidemark's plugin
// beside Redpanda Connect's components keeps Redpanda Connect's exporter
// (Benthos keeps the last registration of a name, silently).
func init() {
	if err := promexport.Register(service.GlobalEnvironment()); err != nil {
		panic(err)
	}
}
