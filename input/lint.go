package input

import (
	"context"
	"encoding/json"
	"sync/atomic"

	"github.com/redpanda-data/benthos/v4/public/bloblang"
	"github.com/redpanda-data/benthos/v4/public/service"
)

// lintFunction is the Bloblang function the input's LintRule calls with the
// component's config: it runs configFromParsed, the checks of the run path,
// and returns what they reject as lint messages, so `connect lint` and
// `connect run` share one validation.
const lintFunction = "tidemark_paginated_partitions_lint"

// lintRule is the input's LintRule.
const lintRule = `root = ` + lintFunction + `(this)`

// Registered before any init function (package variables are initialised
// first): Spec() parses the lint rule, which must find the function.
var _ = registerLintFunction()

func registerLintFunction() bool {
	spec := bloblang.NewPluginSpec().
		Description("Internal to the paginated_partitions input's config linter: the messages of what `connect run` would reject in a paginated_partitions config.").
		Param(bloblang.NewAnyParam("config"))
	err := bloblang.RegisterFunctionV2(lintFunction, spec, func(args *bloblang.ParsedParams) (bloblang.Function, error) {
		v, err := args.Get("config")
		if err != nil {
			return nil, err
		}
		return func() (any, error) { return lintMessages(v), nil }, nil
	})
	if err != nil {
		panic(err)
	}
	return true
}

// lintSpec is the input's spec as last registered (registerInput).
var lintSpec atomic.Pointer[service.ConfigSpec]

// lintMessages parses a paginated_partitions config (as the lint rule sees
// it: the component's object) with the input's spec and returns what
// configFromParsed rejects (none when the config is fine, or when it does
// not parse: Benthos's own linter reports those errors).
func lintMessages(v any) []any {
	b, err := json.Marshal(dropNulls(v))
	if err != nil {
		return nil
	}
	conf, err := lintSpec.Load().ParseYAML(string(b), nil)
	if err != nil {
		return nil
	}
	var opts []service.MockResourcesOptFn
	if p, err := chosenProvider(conf); err == nil && p.LintResources != nil {
		// Resources are the whole config's: lint cannot see them, run
		// checks them.
		opts = p.LintResources(conf.Namespace(p.Name))
	}
	_, prov, err := configFromParsed(conf, service.MockResources(opts...))
	if prov != nil {
		_ = prov.Close(context.Background())
	}
	if err != nil {
		return []any{err.Error()}
	}
	return nil
}

// dropNulls removes the null members of the objects in v (the linter hands
// an empty list over as null), so the spec's defaults apply to them as they
// do when run parses the same YAML.
func dropNulls(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			if e != nil {
				out[k] = dropNulls(e)
			}
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = dropNulls(e)
		}
		return out
	}
	return v
}
