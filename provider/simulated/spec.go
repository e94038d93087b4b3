package simulated

import (
	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/tidemark/tidemark/provider"
	"github.com/tidemark/tidemark/provider/registry"
)

const (
	fldEventsPerPartition = "events_per_partition"
	fldPageSize           = "page_size"
	fldLatency            = "latency"
	fldSeed               = "seed"
	fldRotateTokens       = "rotate_tokens"
	fldShiftRate          = "shift_rate"
	fldEmptyRate          = "empty_rate"
	fldTransientRate      = "transient_error_rate"
	fldMalformedRate      = "malformed_rate"
	fldMalformedStreak    = "malformed_streak"
	fldMalformed          = "malformed"
	fldExpireRate         = "expire_rate"
	fldStall              = "stall"
	fldStallFetches       = "stall_fetches"
	fldIdle               = "idle"
)

// Fields are the fields of the `simulated` provider object of the
// paginated_partitions input. The partition list is the input's own
// `partitions` field.
func Fields() []*service.ConfigField {
	return []*service.ConfigField{
		service.NewIntField(fldEventsPerPartition).
			Description("Events in each partition; 0 means unbounded. Required: it also marks the simulated provider as the one in use.").
			Example(100000),
		service.NewIntField(fldPageSize).
			Description("Events per page.").
			Default(100).Example(50),
		service.NewDurationField(fldLatency).
			Description("Latency of every fetch.").
			Default("0s").Example("20ms"),
		service.NewIntField(fldSeed).
			Description("Seed of every injected fault: the same seed gives the same run.").
			Default(1).Example(42),
		service.NewBoolField(fldRotateTokens).
			Description("Return a fresh successor token on every fetch (Kinesis-style rotation); the contract then allows rotation.").
			Default(false).Example(true),
		service.NewFloatField(fldShiftRate).
			Description("Probability that a retry of a cursor returns a page grown by one event (a shifted page).").
			Default(0.0).Example(0.1).Advanced(),
		service.NewFloatField(fldEmptyRate).
			Description("Probability of a transient empty page with no completeness evidence.").
			Default(0.0).Example(0.05).Advanced(),
		service.NewFloatField(fldTransientRate).
			Description("Probability of a transient fetch error.").
			Default(0.0).Example(0.05).Advanced(),
		service.NewFloatField(fldMalformedRate).
			Description("Probability of a malformed answer (a transient fault: each attempt is drawn again, and at most `malformed_streak` answers in a row for one cursor position are malformed).").
			Default(0.0).Example(0.01).Advanced(),
		service.NewIntField(fldMalformedStreak).
			Description("Most malformed answers `malformed_rate` gives one cursor position in a row; the next attempt can be read. While it is at most the input's `fetch_retries`, no page parks on them. 0 means no bound.").
			Default(2).Example(3).Advanced(),
		service.NewStringListField(fldMalformed).
			Description("Partitions whose every answer is malformed (a persistent fault: they park once the input's `fetch_retries` are spent).").
			Default([]string{}).Example([]string{"p1"}).Advanced(),
		service.NewFloatField(fldExpireRate).
			Description("Probability that a cursor has expired.").
			Default(0.0).Example(0.01).Advanced(),
		service.NewStringListField(fldStall).
			Description("Partitions that answer only empty pages without evidence (they hold the frontier back).").
			Default([]string{}).Example([]string{"p2"}),
		service.NewIntField(fldStallFetches).
			Description("Stalled partitions recover after this many fetches; 0 means never.").
			Default(0).Example(50).Advanced(),
		service.NewStringListField(fldIdle).
			Description("Partitions without events whose empty pages are final through an advancing heartbeat watermark.").
			Default([]string{}).Example([]string{"p3"}),
	}
}

// FromParsed reads the `simulated` object (conf is its namespace).
func FromParsed(conf *service.ParsedConfig, partitions []string) (*Provider, error) {
	var (
		c   Config
		err error
	)
	c.Partitions = partitions
	var n int
	if n, err = conf.FieldInt(fldEventsPerPartition); err != nil {
		return nil, err
	}
	c.EventsPerPartition = int64(n)
	if c.PageSize, err = conf.FieldInt(fldPageSize); err != nil {
		return nil, err
	}
	if c.Latency, err = conf.FieldDuration(fldLatency); err != nil {
		return nil, err
	}
	if n, err = conf.FieldInt(fldSeed); err != nil {
		return nil, err
	}
	c.Seed = uint64(n)
	if c.RotateTokens, err = conf.FieldBool(fldRotateTokens); err != nil {
		return nil, err
	}
	for fld, dst := range map[string]*float64{
		fldShiftRate: &c.ShiftRate, fldEmptyRate: &c.EmptyRate, fldTransientRate: &c.TransientErrorRate,
		fldMalformedRate: &c.MalformedRate, fldExpireRate: &c.ExpireRate,
	} {
		if *dst, err = conf.FieldFloat(fld); err != nil {
			return nil, err
		}
	}
	if c.Stall, err = conf.FieldStringList(fldStall); err != nil {
		return nil, err
	}
	if c.StallFetches, err = conf.FieldInt(fldStallFetches); err != nil {
		return nil, err
	}
	if c.MalformedStreak, err = conf.FieldInt(fldMalformedStreak); err != nil {
		return nil, err
	}
	if c.Malformed, err = conf.FieldStringList(fldMalformed); err != nil {
		return nil, err
	}
	if c.Idle, err = conf.FieldStringList(fldIdle); err != nil {
		return nil, err
	}
	return New(c)
}

// Name is the name of the provider's object in the paginated_partitions
// input.
const Name = "simulated"

func init() {
	registry.MustRegister(registry.Spec{
		Name:        Name,
		Description: "An embedded deterministic source with injectable faults, for demos, tests and benchmarks.",
		Fields:      Fields(),
		Build: func(conf *service.ParsedConfig, env registry.Env) (provider.Provider, error) {
			return FromParsed(conf, env.Partitions)
		},
	})
}
