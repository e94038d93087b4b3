// Package processor holds the partition_frontier processor and the
// frontier_advances input: how downstream consumers learn how far the
// combined stream is proven complete.
//
// Invariants:
//   - The frontier attached to a message is the minimum of the durable
//     complete-through watermarks of every partition of one membership
//     epoch, computed by internal/frontier; with no comparable coordinate for
//     some partition, or in an unproven epoch, only the vector is attached.
//   - Views are built from durable checkpoints only (the store, or the
//     in-process feed of successful conditional writes), so a view may lag
//     the store, never lead it.
//
// Scalar versus vector, proven and unproven epochs and the metadata keys:
// docs/design.md#frontier-and-membership-epochs and
// docs/design.md#metadata-and-metrics.
package processor

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/feed"
	"github.com/tidemark/tidemark/internal/frontier"
	"github.com/tidemark/tidemark/internal/frontiermeta"
	"github.com/tidemark/tidemark/internal/frontierrec"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/storeconfig"
	"github.com/tidemark/tidemark/provider"
)

const (
	pfFieldScope      = "scope"
	pfFieldPartitions = "partitions"
	pfFieldSource     = "source"
	pfFieldRefresh    = "refresh_interval"
	pfFieldCheckpoint = "checkpoint"
)

func frontierSpec() *service.ConfigSpec {
	return service.NewConfigSpec().
		Beta().
		Categories("Utility").
		Summary("Attaches the combined safe frontier of a paginated_partitions scope (the minimum of its partitions' complete-through watermarks) and its membership epoch to each message, or the per-partition vector when no scalar can be proven.").
		Description(`
Metadata set on every message:

- `+"`tidemark_frontier`"+`: the combined safe frontier, only when proven (absent otherwise);
- `+"`tidemark_frontier_epoch`"+`: the membership epoch the frontier belongs to: the message's own `+"`tidemark_epoch`"+` when it has one (a message of an epoch newer than this processor knows makes it re-read the membership at once; one of the epoch just before the current one gets that epoch's frontier), else the current epoch;
- `+"`tidemark_frontier_vector`"+`: JSON object of every partition's complete-through watermark (`+"`null`"+` where a partition has none);
- `+"`tidemark_frontier_held_by`"+`: comma-separated partitions holding the frontier back;
- `+"`tidemark_frontier_reason`"+`: why the scalar is withheld, when it is;
- `+"`tidemark_frontier_finality`"+`: when the scalar rests on a member whose watermark is not certified by its source, which ones and on what: `+"`append_only_writer assertion (photos); lag 5m0s (p1)`"+` (the contract's `+"`finality`"+`, recorded with each checkpoint and read from the store).

The frontier is computed from the scope's published frontier record only (what the paginated_partitions inputs of every instance published from their durable checkpoints): its root is read every `+"`refresh_interval`"+`, and only the shards that changed; with `+"`source: feed`"+` also each record the input in the same process publishes, as it publishes it. The record is read at once, every shard of it, for the first message of a partition and for the first under a new lease owner, so the frontier attached to a partition's messages never goes back when the partition changes hands (with more than 8,000 partitions, more than 8 shards, only the shards whose version the root shows changed are read: see the design's known gaps). A message the input of this process emitted under a lease it no longer holds (the process was paused longer than the lease, or the partition was taken over) gets no frontier metadata: the new holder may already have attached a lower one. A stale view may lag, never lead. Without a membership record (no input has run) the checkpoints of the configured partitions are read instead.`).
		Fields(
			service.NewStringField(pfFieldScope).
				Description("The scope of the paginated_partitions input.").
				Example("okta-system-log"),
			service.NewStringListField(pfFieldPartitions).
				Description("The partitions of the epoch when the store holds no membership record yet. When the store has one (the input writes it), the record wins.").
				Default([]string{}).Example([]string{"p0", "p1"}),
			service.NewStringAnnotatedEnumField(pfFieldSource, map[string]string{
				"feed":  "The published frontier record, read every `refresh_interval` (every partition of the scope, whichever instance publishes it), and between reads each record the `paginated_partitions` input in this process publishes, as it publishes it. Correct with several instances; this process's partitions show up without waiting for a read.",
				"store": "The published frontier record only, read every `refresh_interval`: for a process without the input.",
			}).
				Description("Where checkpoints come from.").
				Default("feed").Example("store"),
			service.NewDurationField(pfFieldRefresh).
				Description("How often the membership epoch and the published frontier record's root (then only its shards that changed) are read from the store: two small reads when nothing changed, whatever the number of partitions. With several instances it bounds how late the progress of partitions another instance holds is attached here (after that instance published it, within its `frontier_publish_interval`); with `source: feed` the promotions of this process's input arrive without a read, as its publisher writes them.").
				Default("5s").Example("30s"),
			service.NewObjectField(pfFieldCheckpoint, storeconfig.CheckpointFields()...).
				Description("The checkpoint store of the input."),
		).
		Example("Attach the frontier", "Each message gets the frontier of its scope.", `
pipeline:
  processors:
    - partition_frontier:
        scope: demo
        partitions: [ p0, p1, p2 ]
        checkpoint:
          backend: memory
`)
}

func init() {
	err := service.RegisterProcessor("partition_frontier", frontierSpec(), func(conf *service.ParsedConfig, mgr *service.Resources) (service.Processor, error) {
		return frontierFromParsed(conf, mgr)
	})
	if err != nil {
		panic(err)
	}
}

func frontierFromParsed(conf *service.ParsedConfig, mgr *service.Resources) (*frontierProcessor, error) {
	scope, err := conf.FieldString(pfFieldScope)
	if err != nil {
		return nil, err
	}
	parts, err := conf.FieldStringList(pfFieldPartitions)
	if err != nil {
		return nil, err
	}
	source, err := conf.FieldString(pfFieldSource)
	if err != nil {
		return nil, err
	}
	refresh, err := conf.FieldDuration(pfFieldRefresh)
	if err != nil {
		return nil, err
	}
	st, closeSt, err := storeconfig.StoreFromParsed(context.Background(), conf.Namespace(pfFieldCheckpoint), mgr)
	if err != nil {
		return nil, err
	}
	return NewView(ViewConfig{Scope: scope, Partitions: parts, FromFeed: source == "feed", Refresh: refresh, Feed: feed.Of(mgr)}, st, closeSt)
}

// ViewConfig configures a frontier view.
type ViewConfig struct {
	Scope      string
	Partitions []string
	FromFeed   bool
	Refresh    time.Duration
	// Feed is the hub this process's paginated_partitions input publishes
	// to (feed.Of of the pipeline's resources); with FromFeed and no Feed,
	// a hub of its own that nothing publishes to.
	Feed *feed.Hub
}

// frontierProcessor keeps a frontier.Tracker fed with the published
// frontier record (published.go): what it attaches was durably published,
// so that the frontier attached to a partition's messages never goes back,
// whichever instance holds the partition.
type frontierProcessor struct {
	cfg     ViewConfig
	st      store.ScopeProgress
	closeSt func(context.Context) error

	mu         sync.Mutex
	tracker    *frontier.Tracker
	membership store.Membership
	// prev is the tracker of the epoch before membership's, for messages
	// an input emitted before it adopted the new epoch.
	prev *frontier.Tracker
	// bases is each partition's watermark finality basis, as its stored
	// checkpoint records it.
	bases map[string]provider.Basis
	sub   *feed.Subscription
	// records brings the records this process's publisher writes.
	records     *feed.RecordSubscription
	members     *store.MembershipCache
	published   *store.FrontierCache
	configured  bool // no membership record: the configured partitions, from the checkpoints
	owners      map[string]string
	lastStore   time.Time
	lastMembers time.Time
}

// NewView builds the processor from its parts (the Benthos constructor
// and tests).
func NewView(cfg ViewConfig, st store.ScopeProgress, closeSt func(context.Context) error) (*frontierProcessor, error) {
	if cfg.Scope == "" {
		return nil, errors.New("partition_frontier: scope must not be empty")
	}
	if cfg.Refresh <= 0 {
		return nil, errors.New("partition_frontier: refresh_interval must be positive")
	}
	p := &frontierProcessor{
		cfg: cfg, st: st, closeSt: closeSt, bases: map[string]provider.Basis{}, owners: map[string]string{},
		members:   store.NewMembershipCache(st, cfg.Scope),
		published: store.NewFrontierCache(st, cfg.Scope),
	}
	if cfg.FromFeed {
		if p.cfg.Feed == nil {
			p.cfg.Feed = feed.NewHub()
		}
		p.sub = p.cfg.Feed.Subscribe(cfg.Scope)
		p.records = p.cfg.Feed.SubscribeRecords(cfg.Scope)
	}
	return p, nil
}

// refresh brings the tracker up to date: from the store every
// refresh_interval, or at once when force is set. Callers hold p.mu.
func (p *frontierProcessor) refresh(ctx context.Context, now time.Time, force bool) error {
	if p.tracker == nil {
		// The table (with `create: true`) is created at first use, not at
		// construction: a store down at start fails messages, not the process.
		if err := storeconfig.Prepare(ctx, p.st, nil); err != nil {
			return fmt.Errorf("partition_frontier: %w", err)
		}
	}
	if p.tracker == nil || force || now.Sub(p.lastMembers) >= p.cfg.Refresh {
		if err := p.refreshMembership(ctx); err != nil && p.tracker == nil {
			return err
		}
		p.lastMembers = now
	}
	if p.cfg.FromFeed {
		if f := p.records.Latest(); f != nil && !p.configured {
			p.applyRecord(*f) // published by this process: durable
		}
		for part, basis := range p.cfg.Feed.Finalities(p.cfg.Scope) {
			p.bases[part] = basis
		}
		if p.configured {
			// Without a membership record no input publishes: the feed of
			// this process's conditional writes, and the checkpoints.
			for _, u := range p.sub.Drain() {
				p.apply(u.Partition, u.Watermark)
			}
		} else {
			p.sub.Drain()
		}
	}
	if !force && now.Sub(p.lastStore) < p.cfg.Refresh && !p.lastStore.IsZero() {
		return nil
	}
	if p.configured {
		if err := p.readCheckpoints(ctx, p.tracker); err != nil {
			return err
		}
		p.lastStore = now
		return nil
	}
	f, changed, err := p.published.Refresh(ctx)
	switch {
	case store.IsNotPublished(err):
	case err != nil:
		return fmt.Errorf("partition_frontier: reading the published frontier of %s: %w", p.cfg.Scope, err)
	case changed:
		p.applyRecord(f)
	}
	p.lastStore = now
	return nil
}

// readCheckpoints applies every checkpoint of the scope to t (a scope
// without a membership record: no input publishes its frontier).
func (p *frontierProcessor) readCheckpoints(ctx context.Context, t *frontier.Tracker) error {
	cps, err := p.st.ListCheckpoints(ctx, p.cfg.Scope)
	if err != nil {
		return fmt.Errorf("partition_frontier: reading checkpoints of %s: %w", p.cfg.Scope, err)
	}
	for _, cp := range cps {
		_, _ = t.Apply(cp.Partition, cp.Watermark)
		p.bases[cp.Partition] = cp.Finality
	}
	return nil
}

// applyRecord feeds a published record's vector to the tracker of its
// epoch (the current one or the one before).
func (p *frontierProcessor) applyRecord(f store.Frontier) {
	var t *frontier.Tracker
	switch {
	case f.Epoch == p.tracker.Epoch():
		t = p.tracker
	case p.prev != nil && f.Epoch == p.prev.Epoch():
		t = p.prev
	default:
		return
	}
	for part, w := range f.Vector {
		_, _ = t.Apply(part, w)
	}
}

// apply feeds a durable watermark to the current tracker and the previous
// epoch's.
func (p *frontierProcessor) apply(partition string, w coord.Watermark) {
	_, _ = p.tracker.Apply(partition, w)
	if p.prev != nil {
		_, _ = p.prev.Apply(partition, w)
	}
}

// refreshMembership (re)builds the tracker when the membership epoch
// changes.
func (p *frontierProcessor) refreshMembership(ctx context.Context) error {
	m, err := p.members.Load(ctx)
	configured := false
	switch {
	case errors.Is(err, store.ErrNotFound):
		if len(p.cfg.Partitions) == 0 {
			return fmt.Errorf("partition_frontier: scope %s has no membership record and no partitions are configured", p.cfg.Scope)
		}
		m = store.Membership{Scope: p.cfg.Scope, Epoch: 1, Partitions: p.cfg.Partitions, Proven: true}
		configured = true
	case err != nil:
		return fmt.Errorf("partition_frontier: reading membership of %s: %w", p.cfg.Scope, err)
	}
	if p.tracker != nil && m.Epoch == p.membership.Epoch && configured == p.configured {
		return nil
	}
	t, err := frontier.NewTrackerFor(frontierrec.Membership(m))
	if err != nil {
		return fmt.Errorf("partition_frontier: membership epoch %d: %w", m.Epoch, err)
	}
	if configured {
		if err := p.readCheckpoints(ctx, t); err != nil {
			return err
		}
	} else {
		// The finality bases of the checkpoints, once per epoch; the
		// watermarks attached come from the published record only.
		if cps, err := p.st.ListCheckpoints(ctx, p.cfg.Scope); err == nil {
			for _, cp := range cps {
				p.bases[cp.Partition] = cp.Finality
			}
		}
	}
	if p.tracker != nil && m.Epoch == p.membership.Epoch+1 && !configured && !p.configured {
		p.prev = p.tracker
	} else {
		p.prev = nil
	}
	p.tracker, p.membership, p.configured = t, m, configured
	if !configured {
		// The published record of the new epoch, read whole.
		p.published.Reset()
		f, _, err := p.published.Refresh(ctx)
		if err == nil {
			p.applyRecord(f)
		}
	}
	return nil
}

// snapshotFor returns the frontier of the epoch a message was emitted
// under (its tidemark_epoch), so that a message never carries two epochs:
// a message of a newer epoch than this view's makes it re-read the
// membership at once; one of the epoch just before gets that epoch's
// frontier as last published. Without an epoch on the message (not from
// paginated_partitions) the current frontier is attached; so is it for a
// message older than that (an input that has not read the store for
// several epochs), whose tidemark_frontier_epoch then differs.
//
// handOff is set for the first message of a partition this view sees and
// for one whose lease owner differs from the previous message's: the
// view reads the published record at once, so a new holder attaches at
// least what the previous holder attached (it attached only published
// watermarks, and the record never goes back within an epoch).
func (p *frontierProcessor) snapshotFor(ctx context.Context, epoch uint64, handOff bool) (frontier.Snapshot, string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if handOff && !p.configured && p.published != nil {
		// Read every shard, not only those whose version the root moved:
		// the previous holder may have attached entries of a shard written
		// ahead of the root, which this view loaded before that write.
		p.published.RereadShards(handOffShardReads)
	}
	if err := p.refresh(ctx, now, (handOff && !p.configured) || epoch > p.membership.Epoch); err != nil {
		return frontier.Snapshot{}, "", err
	}
	snap := p.tracker.Frontier()
	if p.prev != nil && epoch == p.prev.Epoch() {
		snap = p.prev.Frontier()
	}
	return snap, frontier.FinalityNote(snap, p.bases), nil
}

// handOff reports whether msg is the first of its partition this view
// sees, or the first under another lease owner; it records the owner.
func (p *frontierProcessor) handOff(msg *service.Message) bool {
	part, ok := msg.MetaGet(metaPartition)
	if !ok {
		return false
	}
	owner, _ := msg.MetaGet(metaLeaseOwner)
	p.mu.Lock()
	defer p.mu.Unlock()
	last, seen := p.owners[part]
	if seen && last == owner {
		return false
	}
	p.owners[part] = owner
	return true
}

func (p *frontierProcessor) Process(ctx context.Context, msg *service.Message) (service.MessageBatch, error) {
	if !p.leaseHeld(msg) {
		// Emitted under a lease this process no longer holds (its
		// heartbeat went stale, or the partition was taken over): the new
		// holder may have attached a lower frontier already, so this
		// late message carries none rather than one that goes back.
		return service.MessageBatch{msg}, nil
	}
	var epoch uint64
	if e, ok := msg.MetaGet(metaEpoch); ok {
		epoch, _ = strconv.ParseUint(e, 10, 64)
	}
	snap, note, err := p.snapshotFor(ctx, epoch, p.handOff(msg))
	if err != nil {
		return nil, err
	}
	frontiermeta.Set(msg, snap)
	frontiermeta.SetFinality(msg, note)
	return service.MessageBatch{msg}, nil
}

// leaseHeld reports whether msg, when the input emitted it under a lease,
// is still under a lease this process holds (the pipeline's feed hub asks
// the input); true for a message without a lease.
func (p *frontierProcessor) leaseHeld(msg *service.Message) bool {
	owner, ok := msg.MetaGet(metaLeaseOwner)
	if !ok || owner == "" || p.cfg.Feed == nil {
		return true
	}
	part, _ := msg.MetaGet(metaPartition)
	c, _ := msg.MetaGet(metaLeaseCounter)
	counter, _ := strconv.ParseUint(c, 10, 64) // none: 0, which no held lease has
	return p.cfg.Feed.Holds(p.cfg.Scope, part, owner, counter, time.Now())
}

// handOffShardReads bounds the shards a hand-off reads whole (at most this
// many, 1,000 partitions each): a record with more reads only the shards
// its root shows changed (docs/design.md, "Known gaps").
const handOffShardReads = 8

// The paginated_partitions input's metadata keys read here.
const (
	metaEpoch        = "tidemark_epoch"
	metaPartition    = "tidemark_partition"
	metaLeaseOwner   = "tidemark_lease_owner"
	metaLeaseCounter = "tidemark_lease_counter"
)

func (p *frontierProcessor) Close(ctx context.Context) error {
	if p.sub != nil {
		p.sub.Close()
	}
	if p.records != nil {
		p.records.Close()
	}
	if p.closeSt != nil {
		return p.closeSt(ctx)
	}
	return nil
}
