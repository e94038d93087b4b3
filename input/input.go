package input

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/tidemark/tidemark/internal/chain"
	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/feed"
	"github.com/tidemark/tidemark/internal/instance"
	"github.com/tidemark/tidemark/internal/leasing"
	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/redact"
	"github.com/tidemark/tidemark/internal/runstatus"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/storeconfig"
	"github.com/tidemark/tidemark/provider"
)

// Config is the validated configuration of the input (two-step
// construction: the spec is read into Config, New validates it).
//
// The embedded chain.Config holds the fields every partition's machine
// reads (start_cursor, max_pages_in_flight, max_batch_size, the intervals
// and back-offs, fetch_retries, exit_when_complete, max_restarts,
// coalesce_promotions, promotion_min_pages, promotion_linger, witness_group_pages) and Epoch, the membership epoch read from the store
// at Connect. The spec fills them once; each partition's machine gets a
// copy with its own key, the provider's contract and capabilities, the
// current epoch and its lease (partition.machineConfig).
type Config struct {
	chain.Config

	Scope      string
	Partitions []string
	Discover   bool
	// DiscoveryInterval is how often discovery runs again (0: at connect
	// and on request only).
	DiscoveryInterval time.Duration
	// UnorderedLineage reads children without waiting for their parents.
	UnorderedLineage bool
	// PruneEvery: after this many promoted generations of a partition, the
	// witnesses below its checkpoint's generation are deleted (0: never;
	// storeconfig.PruneEvery).
	PruneEvery uint64
	// MaxBytesInFlight caps the bytes the pages in flight of all the
	// input's partitions hold (byteBudget; 0: DefaultMaxBytesInFlight).
	MaxBytesInFlight int64
	// ExitWhenParkedGrace: with ExitWhenComplete, once every member is
	// complete or parked and at least one is parked, and that held for this
	// long, the input ends and the run fails (runstatus) listing the park
	// reasons. 0: parks never end the input.
	ExitWhenParkedGrace time.Duration
	// FrontierPublishInterval is the shortest time between two
	// publications of the frontier record by this instance: a promotion
	// is published at once when the last one is older (publish.Pacer;
	// 0: never).
	FrontierPublishInterval time.Duration
	// Leases, when set, shares the partitions with the other instances
	// of the scope through leases (lease.go); nil: this instance reads
	// every partition.
	Leases *LeaseConfig
}

func (c *Config) validate() error {
	if c.Scope == "" {
		return errors.New("scope must not be empty")
	}
	if len(c.Partitions) == 0 && !c.Discover {
		return errors.New("either partitions or discover: true is required")
	}
	seen := map[string]bool{}
	for _, p := range c.Partitions {
		if p == "" {
			return errors.New("partitions: partition names must not be empty")
		}
		if seen[p] {
			return fmt.Errorf("partitions: partition %q is listed twice", p)
		}
		seen[p] = true
	}
	if c.MaxPagesInFlight < 1 {
		return fmt.Errorf("max_pages_in_flight must be at least 1, got %d", c.MaxPagesInFlight)
	}
	if c.MaxBytesInFlight < 0 {
		return fmt.Errorf("max_bytes_in_flight must be positive, got %d", c.MaxBytesInFlight)
	}
	if c.MaxBatchSize < 0 {
		return fmt.Errorf("max_batch_size must not be negative, got %d", c.MaxBatchSize)
	}
	if len(c.StartCursor) > store.MaxCursorBytes {
		return fmt.Errorf("start_cursor is longer than %d bytes", store.MaxCursorBytes)
	}
	if c.FetchRetries < 0 {
		return fmt.Errorf("fetch_retries must not be negative, got %d", c.FetchRetries)
	}
	if c.DiscoveryInterval < 0 {
		return fmt.Errorf("discovery_interval must not be negative, got %s", c.DiscoveryInterval)
	}
	if c.FrontierPublishInterval < 0 {
		return fmt.Errorf("frontier_publish_interval must not be negative (0s disables publishing), got %s", c.FrontierPublishInterval)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"poll_interval", c.PollInterval}, {"park_check_interval", c.ParkCheckInterval}, {"store_backoff", c.StoreBackoff}, {"fetch_backoff", c.FetchBackoff}} {
		if d.v <= 0 {
			return fmt.Errorf("%s must be positive, got %s", d.name, d.v)
		}
	}
	if c.MaxPollInterval < 0 {
		return fmt.Errorf("max_poll_interval must not be negative (0s: no back-off), got %s", c.MaxPollInterval)
	}
	if c.ExitWhenParkedGrace < 0 {
		return fmt.Errorf("exit_when_parked_grace must not be negative (0s: parked partitions never end the input), got %s", c.ExitWhenParkedGrace)
	}
	if c.MaxRestarts < 0 {
		return fmt.Errorf("max_restarts must be at least 1, got %d", c.MaxRestarts)
	}
	if c.PromoteMinPages < 0 || c.PromoteMinPages > store.MaxPromotionPages {
		return fmt.Errorf("promotion_min_pages must be between 1 and %d, got %d", store.MaxPromotionPages, c.PromoteMinPages)
	}
	if c.WitnessGroupPages < 0 || c.WitnessGroupPages > store.MaxWitnessGroup {
		return fmt.Errorf("witness_group_pages must be between 1 and %d, got %d", store.MaxWitnessGroup, c.WitnessGroupPages)
	}
	if c.PromoteLinger < 0 {
		return fmt.Errorf("promotion_linger must not be negative (0s: never waits), got %s", c.PromoteLinger)
	}
	if c.Epoch == 0 {
		c.Epoch = 1
	}
	if c.Leases != nil {
		if err := c.Leases.Validate(); err != nil {
			return err
		}
		if c.ExitWhenComplete {
			return errors.New("exit_when_complete cannot be combined with leases: an instance cannot tell when the partitions other instances hold are complete")
		}
	}
	return nil
}

// paginatedInput is the paginated_partitions input.
type paginatedInput struct {
	cfg     Config
	prov    provider.Provider
	store   store.Store
	closeSt func(context.Context) error
	log     *service.Logger
	metrics *inputMetrics
	// red is the redaction layer's credentials (the http provider's set,
	// when it has a Redactor; any provider's secrets through
	// provider.Secrets); each partition adds its cursors in a child set.
	red *redact.Set
	// feed hands durable watermarks and published records to the
	// partition_frontier processors of this pipeline (feed.Of its resources).
	feed *feed.Hub

	out        chan emission
	allDone    chan struct{}
	stopWorker context.CancelFunc
	wg         sync.WaitGroup

	mu sync.Mutex
	// members is the current membership (the instance machine's: set at
	// Connect, then by each EpochChanged it returns); workers are the
	// running workers without leases, started and stopped by inst, the
	// instance machine (instance.go; nil with leases), whose timer is
	// instWake.
	members  atomic.Pointer[store.Membership]
	wctx     context.Context
	workers  map[string]context.CancelFunc
	inst     *instance.Machine
	instWake *time.Timer
	// connectFailingSince is when Connect began failing without a success
	// in between (zero: it has not failed); with exit_when_complete, a
	// failure past ExitWhenParkedGrace ends the run.
	connectFailingSince time.Time
	// checkEvery is membershipCheckInterval, read at New; memCache reads
	// the membership for the instance machine's ReadMembership (one at a
	// time).
	checkEvery time.Duration
	memCache   *store.MembershipCache
	attemptSeq atomic.Uint64
	// epochNow is the membership epoch stamped on messages: the epoch read
	// at Connect, then every newer epoch the instance machine adopts.
	epochNow atomic.Uint64
	// pubRounds queues the publication rounds the instance machine asked
	// for (true: the final one) to runPublisher; pubDone is closed when it
	// returned; finalAsked: the final round was asked for (the input ends
	// after it).
	pubRounds   chan bool
	pubDone     chan struct{}
	finalAsked  atomic.Bool
	attemptBase string
	started     bool
	leases      *leasing.Manager // nil without leases
	budget      *byteBudget
	// runner schedules and drives the partitions' workers (runner.go).
	runner *partitionRunner
}

// New builds the input from plain arguments.
func New(cfg Config, prov provider.Provider, st store.Store, closeStore func(context.Context) error, res *service.Resources) (service.BatchInput, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("paginated_partitions: %w", err)
	}
	if prov == nil || st == nil {
		return nil, errors.New("paginated_partitions: a provider and a checkpoint store are required")
	}
	if cfg.MaxPagesInFlight > MaxPagesInFlightCeiling {
		res.Logger().Warnf("paginated_partitions: max_pages_in_flight %d is above its ceiling, using %d", cfg.MaxPagesInFlight, MaxPagesInFlightCeiling)
		cfg.MaxPagesInFlight = MaxPagesInFlightCeiling
	}
	if cfg.MaxBytesInFlight == 0 {
		cfg.MaxBytesInFlight = DefaultMaxBytesInFlight
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	in := &paginatedInput{
		cfg: cfg, prov: prov, store: st, closeSt: closeStore,
		log:         res.Logger(),
		feed:        feed.Of(res),
		metrics:     newInputMetrics(res.Metrics()),
		out:         make(chan emission),
		allDone:     make(chan struct{}),
		workers:     map[string]context.CancelFunc{},
		checkEvery:  membershipCheckInterval,
		pubRounds:   make(chan bool, 2),
		pubDone:     make(chan struct{}),
		attemptBase: hex.EncodeToString(b[:]),
		budget:      newByteBudget(cfg.MaxBytesInFlight),
		runner:      newPartitionRunner(),
	}
	in.red = redact.New(0)
	if r, ok := prov.(interface{ Redactor() *redact.Set }); ok && r.Redactor() != nil {
		in.red = r.Redactor()
	}
	// A provider of any module registers its secrets through the SDK.
	if s, ok := prov.(provider.Secrets); ok {
		s.RedactWith(in.red)
	}
	if cfg.Leases != nil {
		in.leases = newLeaseManager(in, *cfg.Leases, res)
	} else {
		in.inst = in.newInstance()
	}
	return in, nil
}

func (in *paginatedInput) epoch() uint64 {
	if e := in.epochNow.Load(); e != 0 {
		return e
	}
	return in.cfg.Epoch
}

// newAttemptID returns a locally generated response-attempt id that sorts
// by creation time within this process.
func (in *paginatedInput) newAttemptID() string {
	n := in.attemptSeq.Add(1)
	// fmt.Sprintf("%012x-%s-%08x", ms, attemptBase, n), without fmt: one
	// is made for every fetch, quiet polls included.
	var buf [64]byte
	b := appendHexPadded(buf[:0], uint64(time.Now().UnixMilli()), 12)
	b = append(b, '-')
	b = append(b, in.attemptBase...)
	b = append(b, '-')
	b = appendHexPadded(b, n, 8)
	return string(b)
}

// appendHexPadded appends v in lower-case hexadecimal, zero-padded to at
// least width digits (fmt's %0<width>x).
func appendHexPadded(b []byte, v uint64, width int) []byte {
	var digits [16]byte
	d := strconv.AppendUint(digits[:0], v, 16)
	for range width - len(d) {
		b = append(b, '0')
	}
	return append(b, d...)
}

func (in *paginatedInput) Connect(ctx context.Context) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.started {
		return nil
	}
	// A store that is down (or hangs: every call has a deadline) fails
	// this Connect with the reason; Benthos logs it and connects again
	// with back-off.
	if err := storeconfig.Prepare(ctx, in.store, in.log); err != nil {
		return in.connectFailed(fmt.Errorf("paginated_partitions: %w", err))
	}
	m, err := in.reconcile(ctx)
	if err != nil {
		return in.connectFailed(fmt.Errorf("paginated_partitions: membership of scope %s: %w", in.cfg.Scope, err))
	}
	in.connectFailingSince = time.Time{}
	if len(m.Partitions) == 0 {
		return fmt.Errorf("paginated_partitions: no partitions to read in epoch %d of scope %s", m.Epoch, in.cfg.Scope)
	}
	in.members.Store(&m)
	in.epochNow.Store(m.Epoch)
	in.memCache = store.NewMembershipCache(in.store, in.cfg.Scope)
	wctx, cancel := context.WithCancel(context.Background())
	in.stopWorker = cancel
	in.wctx = wctx
	in.wg.Add(1)
	go func() {
		defer in.wg.Done()
		in.runner.run(wctx)
	}()
	if in.cfg.FrontierPublishInterval > 0 {
		in.wg.Add(1)
		go func() {
			defer in.wg.Done()
			in.runPublisher(wctx)
		}()
	}
	in.started = true
	if c := in.prov.Contract(); c.DensePositions && !c.HasFirstPosition() {
		in.log.Infof("paginated_partitions: scope %s: positions are dense but no first_position is declared, so the first page of a traversal (a fresh start, a new incarnation) is not checked against where the source's positions start: events the source dropped before the first read are skipped without a word (docs/design.md#contract-fields)", in.cfg.Scope)
	}
	if in.leases != nil {
		in.wg.Add(1)
		go func() {
			defer in.wg.Done()
			in.feed.SetLeaseHolder(in.cfg.Scope, in.leases.Holds)
			in.leases.Run(wctx)
		}()
		return nil
	}
	in.stepLocked(instance.Start{Now: time.Now(), Membership: in.startMembership()})
	in.log.Infof("paginated_partitions reading %d partitions of scope %s (epoch %d)", len(m.Partitions), in.cfg.Scope, m.Epoch)
	return nil
}

// connectFailed returns a failed Connect's error, for Benthos to log and
// connect again with back-off. With exit_when_complete a batch job must
// end: once Connect has failed for ExitWhenParkedGrace without a success
// (a store that never comes up, a cursor encrypted under a key the config
// lacks), the run is recorded as failed (exit code 3, with the reason) and
// the input ends instead. Called with in.mu held.
func (in *paginatedInput) connectFailed(err error) error {
	if !in.cfg.ExitWhenComplete || in.cfg.ExitWhenParkedGrace <= 0 {
		return err
	}
	now := time.Now()
	if in.connectFailingSince.IsZero() {
		in.connectFailingSince = now
	}
	if now.Sub(in.connectFailingSince) < in.cfg.ExitWhenParkedGrace {
		return err
	}
	reason := fmt.Sprintf("scope %s: the input could not start for exit_when_parked_grace (%s): %v", in.cfg.Scope, in.cfg.ExitWhenParkedGrace, in.red.Error(err))
	in.log.Errorf("exit_when_complete: %s: the run ends as a failure", reason)
	runstatus.Fail(reason)
	return service.ErrEndOfInput
}

func (in *paginatedInput) ReadBatch(ctx context.Context) (service.MessageBatch, service.AckFunc, error) {
	select {
	case e := <-in.out:
		return e.batch, e.ack, nil
	case <-in.allDone:
		return nil, nil, service.ErrEndOfInput
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
}

func (in *paginatedInput) Close(ctx context.Context) error {
	in.mu.Lock()
	stop := in.stopWorker
	if in.instWake != nil {
		in.instWake.Stop()
	}
	in.mu.Unlock()
	if stop != nil {
		stop()
	}
	in.wg.Wait()
	var errs []error
	if err := in.prov.Close(ctx); err != nil {
		errs = append(errs, err)
	}
	if in.closeSt != nil {
		if err := in.closeSt(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// partitionDone records a completed partition (the instance machine ends
// the input once every member is complete, with exit_when_complete).
func (in *paginatedInput) partitionDone(p *partition) {
	in.step(instance.Completed{Partition: p.key.Partition})
}

// observePark tells the instance machine which partitions are parked,
// from every checkpoint a partition loads or promotes, for
// exit_when_complete.
func (in *paginatedInput) observePark(cp store.Checkpoint) {
	if !in.cfg.ExitWhenComplete {
		return
	}
	in.step(instance.Parked{Partition: cp.Partition, Reason: cp.Parked})
}

// observeCheckpoint is called with every checkpoint a partition loads or
// promotes.
func (in *paginatedInput) observeCheckpoint(cp store.Checkpoint) {
	in.metrics.generation.Set(int64(cp.Generation), cp.Partition)
	if k := cp.Watermark.Kind; k == coord.KindInteger || k == coord.KindTimestamp {
		in.metrics.watermark.Set(cp.Watermark.Int, cp.Partition)
	}
	// The basis first: a view that drains the watermark finds its basis.
	in.feed.PublishFinality(cp.Scope, cp.Partition, cp.Finality)
	in.feed.Publish(cp.Scope, cp.Partition, cp.Watermark)
	// Then the instance machine: a publication round is due (it drains
	// the feed) and the witnesses below may be deleted; the deletion is
	// asked for before a checkpoint that completes the last partition
	// ends the input (observePark), which waits for it.
	in.stepInstance(instance.Promoted{Now: time.Now(), Partition: cp.Partition, Generation: cp.Generation})
	in.observePark(cp)
}

// fetchWithRetry fetches a page, retrying transient failures with
// exponential back-off. Expired cursors, malformed answers and permanent
// failures are returned at once: the partition's machine recovers from an
// expired cursor, fetches a malformed answer's cursor again after its own
// back-off (up to fetch_retries times in a row, then parks) and parks on a
// permanent failure.
func (in *paginatedInput) fetchWithRetry(ctx context.Context, p *partition, req provider.Request) (resp provider.Response, err error) {
	retry := in.cfg.FetchRetry()
	for {
		resp, err = in.prov.Fetch(ctx, req)
		if err == nil || ctx.Err() != nil {
			return resp, err
		}
		f := chain.FetchTransient
		if errors.Is(err, provider.ErrExpired) || errors.Is(err, provider.ErrMalformed) || errors.Is(err, provider.ErrPermanent) {
			f = chain.FetchPermanent // any class but transient: the machine's
		}
		backoff, again := retry.Retry(f)
		if !again {
			return resp, err
		}
		p.log.Debugf("Partition %s: transient fetch failure (try %d): %v", p.key.Partition, retry.Tries(), p.red.Error(err))
		t := time.NewTimer(equalJitter(backoff))
		select {
		case <-ctx.Done():
			t.Stop()
			return resp, ctx.Err()
		case <-t.C:
		}
	}
}

// Metadata keys set on every emitted message.
const (
	MetaPartition  = "tidemark_partition"
	MetaScope      = "tidemark_scope"
	MetaEventID    = "tidemark_event_id"
	MetaPosition   = "tidemark_position"
	MetaGeneration = "tidemark_generation"
	MetaWitness    = "tidemark_witness"
	MetaCursorHash = "tidemark_cursor_hash"
	MetaEpoch      = "tidemark_epoch"
	MetaRetryClass = "tidemark_retry_class"
)

func (in *paginatedInput) message(p *partition, e chain.Emit, i int) *service.Message {
	m := service.NewMessage(e.Events[i].Payload)
	m.MetaSetMut(MetaPartition, p.key.Partition)
	m.MetaSetMut(MetaScope, p.key.Scope)
	m.MetaSetMut(MetaEventID, e.Events[i].ID)
	m.MetaSetMut(MetaPosition, e.Witnessed[i].Position.String())
	m.MetaSetMut(MetaGeneration, strconv.FormatUint(e.Generation, 10))
	m.MetaSetMut(MetaWitness, e.Attempt)
	m.MetaSetMut(MetaCursorHash, cursorHash(e.Cursor))
	m.MetaSetMut(MetaEpoch, strconv.FormatUint(in.epoch(), 10))
	m.MetaSetMut(MetaRetryClass, e.Class.String())
	leaseMeta(p, m)
	return m
}

// cursorHash is how raw cursors appear in logs and metadata.
func cursorHash(c []byte) string { return reconcile.CursorHash(c) }
