package input

// Live membership: the input's partition set is the scope's membership
// record, decided by internal/membership from what the provider lists (or
// the configured partitions) and written by compare-and-swap on its epoch.
// Roles:
//   - reconcile: one discovery round (list, decide, write); at Connect,
//     every discovery_interval and on an operator's request.
//   - adopt: a newer epoch (written here, by another instance or by an
//     operator) becomes the input's: messages carry it from then on, and
//     without leases the workers of partitions that joined start and
//     those of partitions that left stop (with leases the lease manager
//     balances over the new set).
//   - awaitParents: a partition with parents waits until each parent that
//     is still a member is complete (lineage: parents_first).
//   - runPublisher: publish.Publisher's rounds, when the instance machine
//     asks for them (it keeps their pace, publish.Pacer: this process's
//     promotions, the feed, at most once per frontier_publish_interval,
//     and at a slowing pace to follow the published record, read
//     incrementally, when nothing changes here); every checkpoint read
//     once per epoch.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/feed"
	"github.com/tidemark/tidemark/internal/frontier"
	"github.com/tidemark/tidemark/internal/instance"
	"github.com/tidemark/tidemark/internal/membership"
	"github.com/tidemark/tidemark/internal/publish"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/provider"
)

// Values of the lineage field.
const (
	lineageParentsFirst = "parents_first"
	lineageUnordered    = "unordered"
)

// membershipCheckInterval is how often a running input reads the
// membership record and the discovery request counter (a newer epoch and
// an operator's request are acted on within it).
var membershipCheckInterval = 2 * time.Second

// wanted lists the partitions the input should read: the provider's list
// with discover, else the configured partitions.
func (in *paginatedInput) wanted(ctx context.Context) ([]membership.Member, error) {
	if !in.cfg.Discover {
		return membership.Names(in.cfg.Partitions), nil
	}
	l, ok := in.prov.(provider.Lister)
	if !ok {
		return nil, errors.New("discover is set but the provider cannot list partitions")
	}
	found, err := l.Partitions(ctx)
	if err != nil {
		return nil, fmt.Errorf("discovering partitions: %w", err)
	}
	out := make([]membership.Member, len(found))
	for i, p := range found {
		out[i] = membership.Member{Name: p.Name, Parents: p.Parents}
	}
	return out, nil
}

// reconcile runs one discovery round: list, decide, write. A partition
// without a checkpoint is read from the provider's start unless a
// start_cursor is configured: only then is its joining proven by replay.
func (in *paginatedInput) reconcile(ctx context.Context) (store.Membership, error) {
	want, err := in.wanted(ctx)
	if err != nil {
		return store.Membership{}, err
	}
	m, plan, err := membership.Reconcile(ctx, in.store, in.cfg.Scope, want, len(in.cfg.StartCursor) == 0)
	if err != nil {
		return store.Membership{}, err
	}
	if plan.Changed {
		in.metrics.membershipChanges.Incr(1)
		if m.Proven {
			in.log.Infof("Membership of scope %s changed to %s", in.cfg.Scope, plan)
		} else {
			in.log.Warnf("Membership of scope %s changed to %s; the scalar frontier is withheld and the vector published until the proof arrives", in.cfg.Scope, plan)
		}
	}
	return m, nil
}

// adopt makes m the input's membership when it is newer than the current
// one.
func (in *paginatedInput) adopt(m store.Membership, source string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.adoptLocked(m, source)
}

// adoptLocked is adopt under in.mu.
func (in *paginatedInput) adoptLocked(m store.Membership, source string) {
	cur := in.members.Load()
	if cur != nil && m.Epoch <= cur.Epoch {
		return
	}
	in.members.Store(&m)
	in.epochNow.Store(m.Epoch)
	if cur != nil {
		state := "proven"
		if !m.Proven {
			state = "unproven: " + m.Reason
		}
		in.log.Infof("Membership of scope %s: epoch %d (%s) is now this input's (was %d): partitions %v, %s", in.cfg.Scope, m.Epoch, source, cur.Epoch, m.Partitions, state)
	}
	if in.started {
		in.stepInstanceLocked(instance.Adopt{Now: time.Now(), Membership: instance.Membership{Epoch: m.Epoch, Partitions: slices.Clone(m.Partitions)}, Source: source})
	}
}

// memberNames returns the partitions of the current membership.
func (in *paginatedInput) memberNames() []string {
	if m := in.members.Load(); m != nil {
		return m.Partitions
	}
	return nil
}

// awaitParents waits until every parent of name that is still a member is
// complete (lineage: parents_first); false when ctx ended first.
func (in *paginatedInput) awaitParents(ctx context.Context, name string) bool {
	if in.cfg.UnorderedLineage {
		return true
	}
	var logged []string
	for {
		m := in.members.Load()
		parents := m.Parents[name]
		if len(parents) == 0 {
			return true
		}
		var cps []store.Checkpoint
		readable := true
		for _, p := range parents {
			cp, err := in.store.LoadCheckpoint(ctx, store.Key{Scope: in.cfg.Scope, Partition: p})
			switch {
			case err == nil:
				cps = append(cps, cp)
			case !errors.Is(err, store.ErrNotFound):
				readable = false
				in.log.Debugf("Partition %s: cannot read the checkpoint of its parent %s: %v", name, p, err)
			}
		}
		if readable {
			wait := membership.Waiting(*m, name, cps)
			if len(wait) == 0 {
				if logged != nil {
					in.log.Infof("Partition %s: its parents %v are complete; reading it", name, parents)
				}
				return true
			}
			if !slices.Equal(wait, logged) {
				in.log.Infof("Partition %s waits for its parents %v to be complete (sealed and drained) before it is read (lineage: parents_first)", name, wait)
				logged = wait
			}
		}
		t := time.NewTimer(in.cfg.PollInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
	}
}

// watchMembership runs discovery every discovery_interval (with discover)
// and on an operator's request, and picks up newer epochs, until ctx ends.
func (in *paginatedInput) watchMembership(ctx context.Context) {
	var discover <-chan time.Time
	if in.cfg.Discover && in.cfg.DiscoveryInterval > 0 {
		t := time.NewTicker(in.cfg.DiscoveryInterval)
		defer t.Stop()
		discover = t.C
	}
	check := time.NewTicker(in.checkEvery)
	defer check.Stop()
	seen, _ := in.store.DiscoveryRequests(ctx, in.cfg.Scope)
	// The epoch alone every check; the record (paged at many partitions)
	// only when the epoch changed.
	members := store.NewMembershipCache(in.store, in.cfg.Scope)
	round := func(why string) {
		m, err := in.reconcile(ctx)
		if err != nil {
			if ctx.Err() == nil {
				in.log.Warnf("Membership of scope %s: discovery (%s) failed; the membership stays epoch %d: %v", in.cfg.Scope, why, in.epoch(), in.red.Error(err))
			}
			return
		}
		in.adopt(m, why)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-discover:
			round("discovery_interval")
		case <-check.C:
			if in.cfg.Discover {
				if n, err := in.store.DiscoveryRequests(ctx, in.cfg.Scope); err == nil && n > seen {
					seen = n
					in.log.Infof("Membership of scope %s: discovery requested by an operator", in.cfg.Scope)
					round("requested")
					continue
				}
			}
			if m, err := members.Load(ctx); err == nil {
				in.adopt(m, "read from the store")
				if len(m.Incarnations) > 0 {
					// A new source incarnation awaits its proof (its first
					// certified watermark): offer it, so the scalar comes
					// back as soon as it arrives, with or without discover.
					round("incarnation proof")
				}
			}
		}
	}
}

// Pace of the frontier publisher's rounds without a change in this process
// (the instance machine's publish.Pacer): the first idle round reads the record publishIdleRead
// after the last round (or frontier_publish_interval, when longer), and the
// wait doubles while nothing changes anywhere, up to publishMaxIdleRead.
var (
	publishIdleRead    = time.Second
	publishMaxIdleRead = 30 * time.Second
)

// publication is what the instance machine needs of the publisher: its
// pace (frontier_publish_interval, the idle reads) and how to ask for a
// round (requestPublish).
func (in *paginatedInput) publication() (interval, idle, maxIdle time.Duration) {
	every := in.cfg.FrontierPublishInterval
	idle = max(every, publishIdleRead)
	return every, idle, max(publishMaxIdleRead, idle)
}

// requestPublish hands a round the instance machine asked for to the
// publisher (runPublisher). The machine asks for one round at a time, and
// for the final one at most beside it: the queue holds both, so this never
// blocks.
func (in *paginatedInput) requestPublish(final bool) {
	if final {
		in.finalAsked.Store(true)
	}
	select {
	case in.pubRounds <- final:
	default:
		in.log.Errorf("Frontier of scope %s: a publication round was asked for while two were queued (not performed)", in.cfg.Scope)
	}
}

// runPublisher performs the frontier publisher's rounds (publish.Publisher)
// when the instance machine asks for them, and tells the machine of every
// durable promotion of this process (the in-process feed: the holder of a
// partition publishes it), which times the rounds (instance.Promoted,
// instance.Published). It ends with ctx, or after the final round (closing
// pubDone either way).
func (in *paginatedInput) runPublisher(ctx context.Context) {
	defer close(in.pubDone)
	sub := in.feed.Subscribe(in.cfg.Scope)
	defer sub.Close()
	pub := publish.NewPublisher(in.store, in.cfg.Scope)
	final := func() {
		// Every partition is complete: the final frontier, under its own
		// deadline (the run's context may end meanwhile).
		fctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		in.publishRound(fctx, sub, pub)
	}
	for {
		select {
		case <-ctx.Done():
			select {
			case last := <-in.pubRounds:
				if last {
					final()
				}
			default:
			}
			return
		case <-sub.Wake():
			in.stepInstance(instance.Promoted{Now: time.Now()})
		case last := <-in.pubRounds:
			if last {
				final()
				return
			}
			in.stepInstance(in.publishRound(ctx, sub, pub))
		}
	}
}

// publishRound runs one round of the publisher: the promotions of this
// process the feed handed over since the last round, then
// publish.Publisher's reads and conditional write. Each record written is
// handed to the partition_frontier processors of this process (in.feed),
// which attach only published watermarks; a newer epoch read is adopted.
// It returns the round's answer for the instance machine.
func (in *paginatedInput) publishRound(ctx context.Context, sub *feed.Subscription, pub *publish.Publisher) instance.Published {
	start := time.Now()
	for _, u := range sub.Drain() {
		pub.Observe(u.Partition, u.Watermark)
	}
	r, f, advanced, err := pub.Round(ctx)
	if r.Membership.Epoch > 0 {
		in.adopt(r.Membership, "read by the frontier publisher")
	}
	in.recordFrontierMetrics(r.Snapshot)
	switch {
	case err == nil:
		if r.Next != nil {
			in.feed.PublishRecord(f)
			in.log.Debugf("Scope %s: published frontier version %d (epoch %d, scalar %s, %d partitions, held by %v, %s)", in.cfg.Scope, f.Version, f.Epoch, f.Scalar, len(f.Vector), f.HeldBy, f.Reason)
		}
		if advanced {
			in.log.Infof("Scope %s is complete through %s (epoch %d)", in.cfg.Scope, f.Scalar, f.Epoch)
		}
	case errors.Is(err, store.ErrFenced):
		// Another publisher won: what this process knows is still to be
		// published, after re-reading the record (the machine's pace).
	case ctx.Err() == nil:
		in.log.Warnf("Frontier of scope %s not published: %v", in.cfg.Scope, err)
		if isStoreFailure(err) {
			in.metrics.storeErrors.Incr(1, "publish_frontier")
		}
	}
	return instance.Published{
		Now: time.Now(), Start: start,
		Active: err != nil || r.Next != nil || r.EpochChanged || r.RecordChanged,
		Fenced: errors.Is(err, store.ErrFenced), Epoch: pub.Epoch(),
	}
}

// recordFrontierMetrics exports the frontier (integer and timestamp
// coordinates) and each partition's lag behind the most advanced one.
func (in *paginatedInput) recordFrontierMetrics(snap frontier.Snapshot) {
	if snap.Proven && (snap.Scalar.Kind == coord.KindInteger || snap.Scalar.Kind == coord.KindTimestamp) {
		in.metrics.frontier.Set(snap.Scalar.Int, in.cfg.Scope)
	}
	withheld := int64(1)
	if snap.Proven && !snap.Scalar.IsZero() {
		withheld = 0
	}
	in.metrics.frontierWithheld.Set(withheld, in.cfg.Scope)
	var top coord.Watermark
	for _, w := range snap.Vector {
		if (w.Kind == coord.KindInteger || w.Kind == coord.KindTimestamp) && (top.IsZero() || top.Less(w)) {
			top = w
		}
	}
	if top.IsZero() {
		return
	}
	for p, w := range snap.Vector {
		if w.Kind == top.Kind {
			in.metrics.lag.Set(top.Int-w.Int, p)
		}
	}
}
