package httpprovider

import (
	"context"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/tidemark/tidemark/provider"
	"github.com/tidemark/tidemark/provider/registry"
)

// Name is the name of the provider's object in the paginated_partitions
// input.
const Name = "http"

func init() {
	registry.MustRegister(registry.Spec{
		Name:        Name,
		Description: "Fetch pages from an HTTP API.",
		Fields:      Fields(),
		LintRule:    ObjectLint(),
		Build: func(conf *service.ParsedConfig, env registry.Env) (provider.Provider, error) {
			return FromParsed(conf, env.Resources, env.Resources.Logger())
		},
		LintResources: lintResources,
	})
}

// lintResources gives the input's lint the rate limit the object names:
// the config's resources are not visible to a lint rule, and the run
// checks the name.
func lintResources(conf *service.ParsedConfig) []service.MockResourcesOptFn {
	name, _ := conf.FieldString(hpFieldRateLimit)
	if name == "" {
		return nil
	}
	return []service.MockResourcesOptFn{
		service.MockResourcesOptAddRateLimit(name, func(context.Context) (time.Duration, error) { return 0, nil }),
	}
}
