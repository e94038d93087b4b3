// Package registry puts providers into the paginated_partitions input: a
// provider registers its config object (Benthos config fields and how to
// build the provider from them) from its package's init function, and the
// input builds its one-of from the registered specs. It is the SDK's edge to
// Benthos: package provider (the port, the values and the contract) imports
// no Benthos, so the core that names those types builds without the
// framework.
package registry

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/tidemark/tidemark/provider"
)

// Spec registers a provider: the name of its config object in the
// paginated_partitions input, the object's fields, and how to build the
// provider from them. A provider registers itself from an init function
// (see Register); the input's config then has an optional object named
// Name with these fields, and exactly one provider object must be set.
type Spec struct {
	// Name is the config object's name (`http`, `simulated`): lower case
	// letters, digits and underscores, starting with a letter.
	Name string
	// Description is the object's description in the input's reference.
	Description string
	// Fields are the object's fields. At least one field must be required
	// (no default) or the object must be recognisable otherwise: an
	// optional object with all defaults is indistinguishable from absent.
	Fields []*service.ConfigField
	// LintRule, when set, is a Bloblang lint rule of the object (its
	// `this` is the object), run by `connect lint`.
	LintRule string
	// Build reads the object (conf is its namespace) and builds the
	// provider. It must send nothing: the input's lint runs it to check a
	// config. Errors name the field at fault.
	Build func(conf *service.ParsedConfig, env Env) (provider.Provider, error)
	// LintResources, when set, returns the mock resources Build needs when
	// the input's lint runs it (the config's resources are not visible to
	// a component's lint rule): for example a rate limit the object names.
	LintResources func(conf *service.ParsedConfig) []service.MockResourcesOptFn
}

// Env is what Build receives besides its own object.
type Env struct {
	// Resources are the pipeline's resources (logger, metrics, rate
	// limits, ...); mock resources when the input's lint builds it.
	Resources *service.Resources
	// Partitions is the input's `partitions` field (the configured
	// partitions; empty with `discover`).
	Partitions []string
}

var nameRE = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

var reg = struct {
	sync.Mutex
	specs    map[string]Spec
	watchers []func()
}{specs: map[string]Spec{}}

// Register adds a provider. Call it from an init function of the
// provider's package; a binary links the provider in by importing that
// package (a blank import, as cmd/connect does through package plugin).
// Registering a name twice, or an invalid Spec, is an error.
func Register(s Spec) error {
	switch {
	case !nameRE.MatchString(s.Name):
		return fmt.Errorf("provider: name %q must match %s", s.Name, nameRE)
	case s.Build == nil:
		return fmt.Errorf("provider %s: Build is nil", s.Name)
	case len(s.Fields) == 0:
		return fmt.Errorf("provider %s: no fields", s.Name)
	}
	reg.Lock()
	if _, ok := reg.specs[s.Name]; ok {
		reg.Unlock()
		return fmt.Errorf("provider %s: already registered", s.Name)
	}
	reg.specs[s.Name] = s
	watchers := slices.Clone(reg.watchers)
	reg.Unlock()
	for _, w := range watchers {
		w()
	}
	return nil
}

// MustRegister is Register that panics on error (for init functions).
func MustRegister(s Spec) {
	if err := Register(s); err != nil {
		panic(err)
	}
}

// Registered returns the registered providers, ordered by name.
func Registered() []Spec {
	reg.Lock()
	defer reg.Unlock()
	out := make([]Spec, 0, len(reg.specs))
	for _, s := range reg.specs {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b Spec) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Watch calls fn now and after every later Register. The input uses it to
// (re-)register its config spec with every provider linked in, whatever
// order the packages' init functions run in.
func Watch(fn func()) {
	reg.Lock()
	reg.watchers = append(reg.watchers, fn)
	reg.Unlock()
	fn()
}
