package input

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/tidemark/tidemark/internal/chain"
	"github.com/tidemark/tidemark/internal/leasing"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/storeconfig"
	"github.com/tidemark/tidemark/provider"
	"github.com/tidemark/tidemark/provider/registry"
)

// Field names of the paginated_partitions input.
const (
	ppFieldScope             = "scope"
	ppFieldPartitions        = "partitions"
	ppFieldDiscover          = "discover"
	ppFieldDiscoveryInterval = "discovery_interval"
	ppFieldLineage           = "lineage"
	ppFieldCoalesce          = "coalesce_promotions"
	ppFieldPromoteMinPages   = "promotion_min_pages"
	ppFieldPromoteLinger     = "promotion_linger"
	ppFieldWitnessGroupPages = "witness_group_pages"
	ppFieldCompactWitness    = "compact_witness"
	ppFieldStartCursor       = "start_cursor"
	ppFieldMaxPagesInFlight  = "max_pages_in_flight"
	ppFieldMaxBytesInFlight  = "max_bytes_in_flight"
	ppFieldMaxBatchSize      = "max_batch_size"
	ppFieldPollInterval      = "poll_interval"
	ppFieldMaxPollInterval   = "max_poll_interval"
	ppFieldParkCheckInterval = "park_check_interval"
	ppFieldStoreBackoff      = "store_backoff"
	ppFieldFetchRetries      = "fetch_retries"
	ppFieldFetchBackoff      = "fetch_backoff"
	ppFieldExitWhenComplete  = "exit_when_complete"
	ppFieldExitParkedGrace   = "exit_when_parked_grace"
	ppFieldMaxRestarts       = "max_restarts"
	ppFieldCheckpoint        = "checkpoint"
	ppFieldFrontierPublish   = "frontier_publish_interval"
	ppFieldBackend           = "backend"
	ppFieldDynamoDB          = "dynamodb"
	ppFieldLeases            = "leases"
)

// Spec is the config spec of the paginated_partitions input, with an
// optional object for every registered provider (registry.Register),
// ordered by name, between `checkpoint` and `leases`.
func Spec() *service.ConfigSpec {
	provs := registry.Registered()
	names := make([]string, len(provs))
	for i, p := range provs {
		names[i] = "`" + p.Name + "`"
	}
	fields := []*service.ConfigField{
		service.NewStringField(ppFieldScope).
			Description("The query scope checkpoints belong to: the same partitions with another filter are another scope.").
			Example("okta-system-log"),
		service.NewStringListField(ppFieldPartitions).
			Description("The partitions to read (the membership of epoch 1).").
			Default([]string{}).Example([]string{"p0", "p1", "p2"}),
		service.NewBoolField(ppFieldDiscover).
			Description("Discover the partitions through the provider instead of `partitions`: at connect, then every `discovery_interval`, and when an operator runs `connect tidemark discover`. A partition that appears joins the membership in a new epoch, proven when it is read from the provider's start (no `start_cursor`); one that vanishes leaves in a new epoch, proven when its checkpoint is complete (sealed and drained). A change without proof still happens: the epoch is unproven, the scalar frontier is withheld and the vector published, with the reason. A complete parent of a listed partition (a split's closed parent) leaves, proven, even while the provider still lists it. Running inputs start reading partitions that join and stop those that leave.").
			Default(false).Example(true),
		service.NewDurationField(ppFieldDiscoveryInterval).
			Description("With `discover`, how often the partitions are listed again and the membership reconciled; 0s lists them only at connect (and on `connect tidemark discover`). Every instance of a scope may run discovery: the membership record changes by compare-and-swap on its epoch, so concurrent rounds write one epoch per change.").
			Default("30s").Example("5s"),
		service.NewStringAnnotatedEnumField(ppFieldLineage, map[string]string{
			lineageParentsFirst: "A partition is not read before each of its parents that is still a member is complete (its checkpoint is complete: sealed, or the last page of a finite traversal promoted). A child's events are emitted after all of its parents', and its coordinates enter the frontier only once its parents' are final.",
			lineageUnordered:    "Parents and children are read at the same time; choose it only when the order across them does not matter downstream.",
		}).
			Description("How partitions with parents (a split or merge reported by discovery) are read.").
			Default(lineageParentsFirst).Example(lineageUnordered).Advanced(),
		service.NewStringField(ppFieldStartCursor).
			Description("The cursor a partition without a checkpoint starts from; empty means the provider's start.").
			Default("").Example(""),
		service.NewIntField(ppFieldMaxPagesInFlight).
			Description("Pages per partition fetched ahead of promotion. Promotions stay strictly in page order. At least 1; a value above 1024 (the hard ceiling) is lowered to 1024 with a warning. The bytes those pages hold are capped by `max_bytes_in_flight` as well.").
			Default(4).Example(8),
		service.NewIntField(ppFieldMaxBytesInFlight).
			Description("The most bytes the pages in flight of all this input's partitions hold (event ids and payloads, cursors, and 1 KiB per event besides for the message and its metadata), from their fetch until their promotion: no page is fetched ahead while they hold this much or more. A partition that holds no page still fetches one, so every partition makes progress, whatever `max_pages_in_flight` says. The budget counts pages as held, not what decoding them costs: measured with 10 MB pages, peak RSS ≈ 60 MB + 8 × max(max_bytes_in_flight, the largest page × the partitions) (a page of the http provider is at most `max_response_bytes`; docs/benchmarks.md, \"Memory with large pages\"): with many partitions and large pages, lower `max_response_bytes` or the page size. Default 64 MiB. Must be positive.").
			Default(DefaultMaxBytesInFlight).Example(16 << 20).Advanced(),
		service.NewIntField(ppFieldMaxBatchSize).
			Description("Split a page into batches of at most this many events; 0 emits each page as one batch.").
			Default(0).Example(50),
		service.NewDurationField(ppFieldPollInterval).
			Description("How long to wait before fetching a cursor again after an empty page without evidence, a page at the end of the data, or a transient error.").
			Default("1s").Example("5s"),
		service.NewDurationField(ppFieldMaxPollInterval).
			Description("Back off the polls of a quiet partition up to this wait. After an answer without events a partition waits `poll_interval`, then twice as long after each further answer without events in a row, up to `max_poll_interval`; an answer with events returns it to `poll_interval`. Transient failures always wait `poll_interval`. The cost of a quiet partition (its polls, their witnesses and checkpoint writes, and the provider's requests) falls by up to `max_poll_interval`/`poll_interval`; the price is latency: the first event after a quiet spell is read up to `max_poll_interval` late, and a quiet partition's complete-through (so the combined frontier, when it is the lowest) advances only when it polls. `0s` (the default), or anything not longer than `poll_interval`: no back-off, every poll waits `poll_interval`.").
			Default("0s").Example("30s").Advanced(),
		service.NewDurationField(ppFieldParkCheckInterval).
			Description("How often a parked partition checks whether an operator unparked it.").
			Default("10s").Example("1m").Advanced(),
		service.NewDurationField(ppFieldStoreBackoff).
			Description("Back-off after a checkpoint store failure (the partition does not advance meanwhile).").
			Default("1s").Example("5s").Advanced(),
		service.NewIntField(ppFieldFetchRetries).
			Description("Retries of one fetch. A transient failure (after the provider's own retries: the http provider's `max_retries`) is retried this many times, then the partition waits a `poll_interval` and tries again, for ever: it never parks on transient failures (its checkpoint notes why it does not advance, at most once a minute: `connect tidemark status` prints it). A malformed answer (a 2xx body that cannot be read or mapped: truncated or not JSON, an HTML page from a proxy, no events array, an event without id or position, a duplicate id or positions out of order in one page, a mapped `has_more` that is true on a page without a successor) is fetched again on the same cursor this many times too: a page gets `fetch_retries`+1 attempts, and the `fetch_retries`+1st malformed answer in a row parks the partition with the reason `malformed page after N attempts` and the last malformation (with the default 5: 6 attempts). An answer that can be read ends the run of malformed answers; transient failures in between neither count nor end it. 0: no retries (a malformed answer parks at once). Expired cursors and permanent failures (an HTTP 4xx other than 429) are never retried here.").
			Default(5).Example(10).Advanced(),
		service.NewDurationField(ppFieldFetchBackoff).
			Description("First back-off between two attempts of one fetch (after a transient failure or a malformed answer); it doubles on every further attempt up to 10s (or up to `fetch_backoff` itself when that is longer), and each wait is drawn between half of it and all of it (jitter). Shutdown interrupts it.").
			Default("100ms").Example("500ms").Advanced(),
		service.NewBoolField(ppFieldCoalesce).
			Description("Promote consecutive delivered pages of a partition with one conditional write. While a promotion is in flight, the pages delivered behind it are promoted together by the next write: from the first page's cursor and generation to the last page's successor, the generation moving by the number of pages, each page's successor still the one its own witness recorded. Each page is still checked as if promoted alone. false: one write per page.").
			Default(true).Example(false).Advanced(),
		service.NewIntField(ppFieldPromoteMinPages).
			Description("With `coalesce_promotions`: a partition's delivered page whose promotion would cover fewer pages than this waits for the pages behind it, as long as the next one is coming (fetched from its successor and awaiting its acknowledgements, or being fetched), at most `promotion_linger`; then one write promotes them all. Waiting costs freshness, never safety: the checkpoint and its complete-through watermark lag by at most `promotion_linger`, and a crash or a stop meanwhile delivers the waiting pages again. In steady state 2 halves the promotion writes (DynamoDB: about 0.5 write units a page fewer). At most " + strconv.Itoa(store.MaxPromotionPages) + "; 1: every page is promoted as soon as it is delivered.").
			Default(chain.PromoteMinPages).Example(1).Example(4).Advanced(),
		service.NewDurationField(ppFieldPromoteLinger).
			Description("The longest a delivered page's promotion waits for the pages behind it (`promotion_min_pages`), from when it could have been written. 0s: never waits.").
			Default(chain.PromoteLinger.String()).Example("0s").Example("200ms").Advanced(),
		service.NewIntField(ppFieldWitnessGroupPages).
			Description("Group commit of response witnesses: a fetched page's witness (written before any of its events is emitted) waits, while the page behind it is being fetched, at most `promotion_linger`, and the witnesses of up to this many consecutive pages are written by one store write before any of their events is emitted. Each page is then exactly as if its witness had been written alone (the same retry classification, receipts and promotion); a crash or a stop before the write emitted nothing of the waiting pages (their retry is a first response). In steady state 2 halves the witness writes (with `promotion_min_pages: 2`, about 1 write a page in all instead of 1.5); it saves DynamoDB write units only when the witnesses are small (a 100-event page's witness is about 1.7 KB: 2 units alone, 4 for two in one item). Waiting delays a page's events by the fetches of the pages behind it in its group (one with the default 2), never more than `promotion_linger`. At most " + strconv.Itoa(store.MaxWitnessGroup) + "; 1: every witness is written alone, at once.").
			Default(chain.WitnessGroupPages).Example(1).Example(4).Advanced(),
		service.NewBoolField(ppFieldCompactWitness).
			Description("Store each event of a response witness as one 32-bit fingerprint of its id and payload digest input (the semantic projection when the provider has one), 4 bytes an event instead of 16 (a 64-bit id hash and a 64-bit payload digest; positions are stored exactly either way). A 100-event page's witness is then about 0.5 KB, so several pages' witnesses written together by `witness_group_pages` share DynamoDB write units: with `witness_group_pages: 4` and `promotion_min_pages: 4`, 0.76 write units and 0.59 writes a page in steady state (BenchmarkStoreCost, docs/design.md, Write units per page; two pages of 0.5 KB are about 1 KB, on the edge of one unit). What it gives up, the collision bound (docs/design.md, Retry classification): two distinct events of one comparison set (the witnesses and receipts of one cursor and generation) share a fingerprint with probability at most n²/2³³ (about 1.2·10⁻⁶ for 100 events, against n²/2⁶⁵), and an event replaced by another at the same position, or whose payload changed, goes unnoticed with probability 2⁻³²; a page two of whose own events share a fingerprint is stored in the 64-bit form. A payload changed under the same id is seen as another event at that position: under ordered positions a receipt conflict, as before; otherwise a divergence. Changing it makes a page fetched before the change and retried after it another response (its events are delivered again, or the partition recovers as its contract says). Witnesses of both forms are always read.").
			Default(false).Example(true).Advanced(),
		service.NewBoolField(ppFieldExitWhenComplete).
			Description("End the input once every partition is complete or caught up. Complete is durable and survives restarts: the provider sealed the partition, or the last page of a finite traversal (no successor, under the http contract's `missing_successor: end_of_traversal`) was promoted (a page whose mapped `has_more` is true is never a last page: it is malformed). Caught up: every page was promoted and an empty page proved there is nothing more, by evidence bound to it (`empty_page` semantics or a snapshot marker) or by a mapped `has_more` that is false. A transient empty page without evidence never ends the input. Useful for exports and the demo.").
			Default(false).Example(true),
		service.NewDurationField(ppFieldExitParkedGrace).
			Description("With `exit_when_complete`: once every partition is complete or parked, and at least one is parked, the input waits this long (an operator may `connect tidemark unpark` meanwhile: the partition resumes and the wait is cancelled), then ends, and the process exits with code 3 after logging and printing every park reason. The same grace bounds an input that cannot start: a checkpoint store that stays down or a cursor stored encrypted under a key the config lacks, retried with back-off meanwhile, ends the run with code 3 and the reason once it has failed this long. 0s: a parked partition (or a store that never answers) keeps the process running until it is unparked (or answers).").
			Default("1m").Example("10s").Example("0s"),
		service.NewIntField(ppFieldMaxRestarts).
			Description("Under `recovery: restart_from_boundary` (and `fresh_snapshot`), how many restarts from a stable boundary a partition makes without getting past where the first of them found it (its applied boundary or complete-through watermark beyond the values it had then) before it parks. Pages promoted in between that only re-read what a restart replays (the pages before a cursor that expires again) are not progress: they reset neither the count nor the back-off. The park reason names the cursor's hash, the answer and where the restarts began. The wait before each restart after the first doubles from `poll_interval`, up to 30s. At least 1.").
			Default(chain.MaxRestarts).Example(3).Advanced(),
		service.NewDurationField(ppFieldFrontierPublish).
			Description("The shortest time between two publications of the scope's frontier record (read by the partition_frontier processor, the frontier_advances input and the status command) by this instance. A promotion of this instance is published at once when the last publication is older, else when it is that old (the promotions in between share one compare-and-swap), and reaches the partition_frontier processors of this process as it is written: the frontier they attach follows a promotion within this interval plus one round (two small reads and the writes). With nothing to publish, the instance reads the membership epoch and the record's root (only its shards that changed), whatever the number of partitions, every second or this interval when longer, then less often while nothing changes anywhere (up to every 30s). 0s disables publishing: with several instances, every instance must publish the partitions it holds.").
			Default("50ms").Example("1s"),
		service.NewObjectField(ppFieldCheckpoint, storeconfig.CheckpointFields()...).
			Description("The checkpoint store."),
	}
	for _, p := range provs {
		f := service.NewObjectField(p.Name, p.Fields...).Description(p.Description).Optional()
		if p.LintRule != "" {
			f = f.LintRule(p.LintRule)
		}
		fields = append(fields, f)
	}
	fields = append(fields,
		service.NewObjectField(ppFieldLeases, leasing.Fields()...).
			Description("Share the partitions with the other instances of this scope through leases on the checkpoint records (across processes with the `dynamodb` backend; the `memory` backend only shares within one process). Absent: this instance reads every partition. Every instance of a scope must use leases, or none. `exit_when_complete` cannot be combined with it.").
			Optional().Default(leasing.ObjectDefault()),
	)
	return service.NewConfigSpec().
		Beta().
		Categories("Services").
		Summary("Reads an event source split into partitions, page by page, and promotes a page's successor cursor only after downstream delivery of that exact page is durable.").
		Description(`
Each partition is fetched with its own opaque pagination cursor. For every page the input records a durable **response witness** (the ordered event identities, positions and payload digests, and the exact successor) before any event leaves the input, classifies retries of the same cursor (exact replay, token rotation, shifted page, unprovable divergence), and moves the partition's checkpoint to the page's successor with one conditional write only after every event of that page was acknowledged by the outputs.

A partition that cannot be advanced safely (unprovable divergence, a page whose answers stay malformed through `+"`fetch_retries`"+` retries, a receipt conflict, an expired cursor without a recovery, a permanent fetch failure) is **parked**: it stops, says why in the log, the `+"`tidemark_parks`"+` metric and its checkpoint record, and the other partitions go on. A park reason starts with its class: `+"`malformed page after N attempts`, `receipt conflict`, `moved event`, `unprovable divergence`, `expired cursor`, `refused promotion`, `permanent fetch failure`, `unstorable witness`"+`.

Delivery is at least once: events may repeat after a retry or a crash, never go missing. Pair it with an idempotent sink (for example the `+"`cache`"+` output over the `+"`tidemark_dynamodb`"+` cache keyed by `+"`tidemark_event_id`"+`).

### Metadata

Every message carries: `+"`tidemark_partition`, `tidemark_scope`, `tidemark_event_id`, `tidemark_position`, `tidemark_generation`, `tidemark_witness`, `tidemark_cursor_hash`, `tidemark_epoch`, `tidemark_retry_class`"+`; with `+"`leases`"+` also the fencing token `+"`tidemark_lease_owner`"+` and `+"`tidemark_lease_counter`"+` (with `+"`tidemark_generation`"+`: an idempotent sink that keeps the highest lease counter per partition can refuse writes from a paused former owner).

`+"`tidemark_epoch`"+` is the membership epoch current for this input when the event was emitted: the epoch read at connect, then every newer epoch (written by discovery here or in another instance, or by an operator's `+"`connect tidemark advance-epoch`"+`) as soon as this input reads it: within about 2 seconds. The `+"`partition_frontier`"+` processor attaches the frontier of the message's own epoch (it re-reads the membership at once for a message of a newer epoch than it knows, and keeps the previous epoch's frontier for messages emitted just before a change), so `+"`tidemark_frontier_epoch`"+` equals `+"`tidemark_epoch`"+`. The partitions an input reads are its current epoch's: a partition that joins starts being read (by some instance, with leases), one that leaves stops.

### Scale-out

With a `+"`leases`"+` object, several instances of the same pipeline share the scope's partitions: each partition's checkpoint record carries a lease (owner and counter), every promotion is conditional on it, and an instance that loses a lease stops that partition at once. See the `+"`leases`"+` fields for timing; metrics `+"`tidemark_owned_partitions`, `tidemark_lease_steals`, `tidemark_leases_lost`"+`.

Exactly one of `+oneOf(names, "and")+` must be set.`).
		Fields(fields...).
		LintRule(lintRule).
		Example("Simulated source into stdout", "Reads three simulated partitions with token rotation and shifted pages, checkpointing in memory.", `
input:
  paginated_partitions:
    scope: demo
    partitions: [ p0, p1, p2 ]
    exit_when_complete: true
    checkpoint:
      backend: memory
    simulated:
      events_per_partition: 500
      page_size: 50
      rotate_tokens: true
      shift_rate: 0.1
output:
  stdout: {}
`).
		Example("Scale-out", "Run this same config on several hosts (each with its own instance_id, or none for a random one): they share the 12 partitions through leases in the DynamoDB table, take over a dead instance's partitions after about lease_period, and fence a paused one.", `
input:
  paginated_partitions:
    scope: orders
    partitions: [ p00, p01, p02, p03, p04, p05, p06, p07, p08, p09, p10, p11 ]
    checkpoint:
      backend: dynamodb
      dynamodb:
        table: tidemark-prod
    leases:
      instance_id: ${HOSTNAME:}
      lease_period: 10s
      renew_interval: 3s
      balance_interval: 5s
    simulated:
      events_per_partition: 0
output:
  stdout: {}
`)
}

// The input's spec has an object per registered provider, and providers
// register from their own init functions, which may run before or after
// this one: the input registers now and again after every later provider
// registration (the Benthos environment keeps the last registration of a
// name). The lint rule's function parses with the latest spec.
func init() {
	registry.Watch(registerInput)
}

func registerInput() {
	spec := Spec()
	lintSpec.Store(spec)
	err := service.RegisterBatchInput("paginated_partitions", spec, func(conf *service.ParsedConfig, mgr *service.Resources) (service.BatchInput, error) {
		return FromParsed(conf, mgr)
	})
	if err != nil {
		panic(err)
	}
}

// FromParsed reads the spec and builds the input.
func FromParsed(conf *service.ParsedConfig, mgr *service.Resources) (service.BatchInput, error) {
	c, prov, err := configFromParsed(conf, mgr)
	if err != nil {
		return nil, fmt.Errorf("paginated_partitions: %w", err)
	}
	st, closeSt, err := storeconfig.StoreFromParsed(context.Background(), conf.Namespace(ppFieldCheckpoint), mgr)
	if err != nil {
		_ = prov.Close(context.Background())
		return nil, fmt.Errorf("paginated_partitions: checkpoint: %w", err)
	}
	if !store.IsEncrypted(st) {
		// Without cursor_encryption, a cursor another config or instance
		// stored encrypted is refused, never sent to the source.
		st = store.RefuseSealed(st)
	}
	return New(c, prov, st, closeSt, mgr)
}

// configFromParsed reads and checks every field: the input's own (Config
// and its validate), the checkpoint object's (storeconfig.ValidateCheckpoint)
// and the provider's (built, which validates it; nothing is sent). The run
// path (FromParsed) and the lint rule (lint.go) share it, so `connect lint`
// reports everything `connect run` rejects. Errors name the field's path.
func configFromParsed(conf *service.ParsedConfig, mgr *service.Resources) (Config, provider.Provider, error) {
	c, err := readConfig(conf)
	if err != nil {
		return c, nil, err
	}
	check := c
	if err := check.validate(); err != nil {
		return c, nil, err
	}
	if err := storeconfig.ValidateCheckpoint(conf.Namespace(ppFieldCheckpoint)); err != nil {
		return c, nil, fmt.Errorf("%s: %w", ppFieldCheckpoint, err)
	}
	p, err := chosenProvider(conf)
	if err != nil {
		return c, nil, err
	}
	prov, err := p.Build(conf.Namespace(p.Name), registry.Env{Resources: mgr, Partitions: c.Partitions})
	if err != nil {
		return c, nil, fmt.Errorf("%s: %w", p.Name, err)
	}
	return c, prov, nil
}

// chosenProvider returns the registered provider whose object conf sets:
// exactly one must be.
func chosenProvider(conf *service.ParsedConfig) (registry.Spec, error) {
	provs := registry.Registered()
	if len(provs) == 0 {
		return registry.Spec{}, errNoProvider
	}
	var set []registry.Spec
	names := make([]string, len(provs))
	for i, p := range provs {
		names[i] = p.Name
		if conf.Contains(p.Name) {
			set = append(set, p)
		}
	}
	if len(set) != 1 {
		return registry.Spec{}, fmt.Errorf("exactly one of %s must be set", oneOf(names, "or"))
	}
	return set[0], nil
}

// errNoProvider: no provider package is linked in.
var errNoProvider = errors.New("no provider is registered (link one in with a blank import, e.g. of package github.com/tidemark/tidemark/plugin)")

// oneOf phrases a choice among names: "a", "a or b", "a, b or c" (with the
// conjunction given).
func oneOf(names []string, conj string) string {
	switch len(names) {
	case 0:
		return ""
	case 1:
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " " + conj + " " + names[len(names)-1]
}

// readConfig reads the input's own fields into Config.
func readConfig(conf *service.ParsedConfig) (Config, error) {
	var c Config
	var err error
	if c.Scope, err = conf.FieldString(ppFieldScope); err != nil {
		return c, err
	}
	if c.Partitions, err = conf.FieldStringList(ppFieldPartitions); err != nil {
		return c, err
	}
	if c.Discover, err = conf.FieldBool(ppFieldDiscover); err != nil {
		return c, err
	}
	if c.DiscoveryInterval, err = conf.FieldDuration(ppFieldDiscoveryInterval); err != nil {
		return c, err
	}
	var lin string
	if lin, err = conf.FieldString(ppFieldLineage); err != nil {
		return c, err
	}
	c.UnorderedLineage = lin == lineageUnordered
	var coalesce bool
	if coalesce, err = conf.FieldBool(ppFieldCoalesce); err != nil {
		return c, err
	}
	c.CoalescePromotions = coalesce
	if c.PromoteMinPages, err = conf.FieldInt(ppFieldPromoteMinPages); err != nil {
		return c, err
	}
	if c.PromoteMinPages < 1 {
		return c, fmt.Errorf("%s must be at least 1, got %d", ppFieldPromoteMinPages, c.PromoteMinPages)
	}
	if c.PromoteLinger, err = conf.FieldDuration(ppFieldPromoteLinger); err != nil {
		return c, err
	}
	if c.WitnessGroupPages, err = conf.FieldInt(ppFieldWitnessGroupPages); err != nil {
		return c, err
	}
	if c.CompactWitness, err = conf.FieldBool(ppFieldCompactWitness); err != nil {
		return c, err
	}
	if c.WitnessGroupPages < 1 {
		return c, fmt.Errorf("%s must be at least 1, got %d", ppFieldWitnessGroupPages, c.WitnessGroupPages)
	}
	if c.PruneEvery, err = storeconfig.PruneEvery(conf.Namespace(ppFieldCheckpoint)); err != nil {
		return c, err
	}
	var start string
	if start, err = conf.FieldString(ppFieldStartCursor); err != nil {
		return c, err
	}
	if start != "" {
		c.StartCursor = []byte(start)
	}
	if c.MaxPagesInFlight, err = conf.FieldInt(ppFieldMaxPagesInFlight); err != nil {
		return c, err
	}
	if c.MaxBatchSize, err = conf.FieldInt(ppFieldMaxBatchSize); err != nil {
		return c, err
	}
	maxBytes, err := conf.FieldInt(ppFieldMaxBytesInFlight)
	if err != nil {
		return c, err
	}
	if maxBytes <= 0 {
		return c, fmt.Errorf("%s must be positive, got %d", ppFieldMaxBytesInFlight, maxBytes)
	}
	c.MaxBytesInFlight = int64(maxBytes)
	for _, fd := range []struct {
		fld string
		dst *time.Duration
	}{
		{ppFieldPollInterval, &c.PollInterval}, {ppFieldMaxPollInterval, &c.MaxPollInterval}, {ppFieldParkCheckInterval, &c.ParkCheckInterval},
		{ppFieldStoreBackoff, &c.StoreBackoff}, {ppFieldFetchBackoff, &c.FetchBackoff},
		{ppFieldFrontierPublish, &c.FrontierPublishInterval},
	} {
		if *fd.dst, err = conf.FieldDuration(fd.fld); err != nil {
			return c, err
		}
	}
	if c.FetchRetries, err = conf.FieldInt(ppFieldFetchRetries); err != nil {
		return c, err
	}
	if c.ExitWhenComplete, err = conf.FieldBool(ppFieldExitWhenComplete); err != nil {
		return c, err
	}
	if c.ExitWhenParkedGrace, err = conf.FieldDuration(ppFieldExitParkedGrace); err != nil {
		return c, err
	}
	if c.MaxRestarts, err = conf.FieldInt(ppFieldMaxRestarts); err != nil {
		return c, err
	}
	if c.MaxRestarts < 1 {
		return c, fmt.Errorf("%s must be at least 1, got %d", ppFieldMaxRestarts, c.MaxRestarts)
	}
	if c.Leases, err = leasing.ConfigFromParsed(conf.Namespace(ppFieldLeases)); err != nil {
		return c, err
	}
	return c, nil
}
