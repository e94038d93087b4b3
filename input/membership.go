package input

// Live membership: the input's partition set is the scope's membership
// record, decided by internal/membership from what the provider lists (or
// the configured partitions) and written by compare-and-swap on its epoch.
// The instance machine (internal/instance) decides when the membership is
// read and discovery runs, which epoch is adopted, and when a child of a
// split may start (lineage); this file performs its calls and its epoch
// changes. Roles:
//   - reconcile: one discovery round (list, decide, write); at Connect,
//     and when the machine asks (instance.Discover: every
//     discovery_interval, on an operator's request, while a source
//     incarnation awaits its proof).
//   - readMembership: the membership record (the epoch every check, the
//     record when it changed) and the discovery request counter
//     (instance.ReadMembership, every membershipCheckInterval).
//   - adopt: a membership read elsewhere (the frontier publisher) offered
//     to the machine; adopted: a newer epoch the machine adopted becomes
//     the input's (instance.EpochChanged): messages carry it from then on
//     (the machine starts and stops the workers, or with leases balances
//     over the new set).
//   - readParents: the checkpoints of a child's parents, until the
//     machine finds them complete (instance.ReadParents; lineage:
//     parents_first).
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

// adopt offers m, read from source, to the instance machine, which adopts
// it when its epoch is newer (adopted performs the change).
func (in *paginatedInput) adopt(m store.Membership, source string) {
	in.stepInstance(instance.Adopt{Now: time.Now(), Membership: machineMembership(m), Source: source, Record: m})
}

// machineMembership is m as the instance machine reads it.
func machineMembership(m store.Membership) instance.Membership {
	return instance.Membership{Epoch: m.Epoch, Partitions: slices.Clone(m.Partitions), Parents: m.Parents}
}

// startMembership is the membership the instance machine starts with (read
// and reconciled at Connect).
func (in *paginatedInput) startMembership() instance.Membership {
	return machineMembership(*in.members.Load())
}

// adopted performs the machine's EpochChanged: the epoch it adopted
// becomes the input's (its record, its epoch on the messages).
func (in *paginatedInput) adopted(a instance.EpochChanged) {
	m := a.Record
	in.members.Store(&m)
	in.epochNow.Store(m.Epoch)
	state := "proven"
	if !m.Proven {
		state = "unproven: " + m.Reason
	}
	in.log.Infof("Membership of scope %s: epoch %d (%s) is now this input's (was %d): partitions %v, %s", in.cfg.Scope, m.Epoch, a.Source, a.Previous, m.Partitions, state)
}

// readMembership performs ReadMembership: with discover, the scope's
// discovery request counter, then the membership (the epoch alone, the
// record, paged at many partitions, only when the epoch changed).
func (in *paginatedInput) readMembership(ctx context.Context) instance.MembershipRead {
	var r instance.MembershipRead
	if in.cfg.Discover {
		n, err := in.store.DiscoveryRequests(ctx, in.cfg.Scope)
		r.Requests, r.RequestsRead = n, err == nil
	}
	m, err := in.memCache.Load(ctx)
	r.Now, r.Err = time.Now(), err
	if err == nil {
		r.Membership, r.Record, r.Incarnations = machineMembership(m), m, len(m.Incarnations) > 0
	}
	return r
}

// discover performs Discover: one discovery round.
func (in *paginatedInput) discover(ctx context.Context, why string) instance.Discovered {
	if why == "requested" {
		in.log.Infof("Membership of scope %s: discovery requested by an operator", in.cfg.Scope)
	}
	m, err := in.reconcile(ctx)
	if err != nil {
		if ctx.Err() == nil {
			in.log.Warnf("Membership of scope %s: discovery (%s) failed; the membership stays epoch %d: %v", in.cfg.Scope, why, in.epoch(), in.red.Error(err))
		}
		return instance.Discovered{Now: time.Now(), Why: why, Err: err}
	}
	return instance.Discovered{Now: time.Now(), Why: why, Membership: machineMembership(m), Record: m}
}

// readParents performs ReadParents: the checkpoint of each parent (a
// parent without one is not complete).
func (in *paginatedInput) readParents(ctx context.Context, a instance.ReadParents) instance.ParentsRead {
	r := instance.ParentsRead{Partition: a.Partition}
	for _, p := range a.Parents {
		cp, err := in.store.LoadCheckpoint(ctx, store.Key{Scope: in.cfg.Scope, Partition: p})
		switch {
		case err == nil:
			r.Checkpoints = append(r.Checkpoints, cp)
		case !errors.Is(err, store.ErrNotFound):
			in.log.Debugf("Partition %s: cannot read the checkpoint of its parent %s: %v", a.Partition, p, err)
			r.Err = err
		}
	}
	r.Now = time.Now()
	return r
}

// lineageWait logs what a child waits for (LineageWait).
func (in *paginatedInput) lineageWait(a instance.LineageWait) {
	if len(a.Waiting) == 0 {
		in.log.Infof("Partition %s: its parents are complete; reading it", a.Partition)
		return
	}
	in.log.Infof("Partition %s waits for its parents %v to be complete (sealed and drained) before it is read (lineage: parents_first)", a.Partition, a.Waiting)
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
// when the instance machine asks for them (it times them from this
// process's durable checkpoints, instance.Promoted, and the rounds'
// answers, instance.Published); each round drains what the in-process
// feed got meanwhile (the holder of a partition publishes it). It ends
// with ctx, or after the final round (closing pubDone either way).
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
