package input

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/feed"
	"github.com/tidemark/tidemark/internal/frontier"
	"github.com/tidemark/tidemark/internal/store"
)

// ensureMembership reads the scope's membership record and, when the
// configured partition set differs, plans the change as a new epoch (one
// compare-and-swap on the record). A partition added without a checkpoint
// and without a start cursor reads its whole range from the provider's
// start: that replay is its proof of coverage. A removed partition has no
// recorded seal, so its removal is unproven: the new epoch withholds the
// scalar frontier until an operator proves the cutover.
func (in *paginatedInput) ensureMembership(ctx context.Context, parts []string) (store.Membership, error) {
	want := slices.Clone(parts)
	slices.Sort(want)
	for try := 0; ; try++ {
		cur, err := in.store.LoadMembership(ctx, in.cfg.Scope)
		if errors.Is(err, store.ErrNoCheckpoint) {
			first := store.Membership{Scope: in.cfg.Scope, Epoch: 1, Partitions: want, Proven: true}
			m, err := in.store.SwapMembership(ctx, 0, first)
			if errors.Is(err, store.ErrFenced) && try < 3 {
				continue
			}
			return m, err
		}
		if err != nil {
			return store.Membership{}, err
		}
		if slices.Equal(cur.Partitions, want) {
			return cur, nil
		}
		published := cur.Cutover
		if f, err := in.store.LoadFrontier(ctx, in.cfg.Scope); err == nil && f.Epoch == cur.Epoch && !f.Scalar.IsZero() {
			published = f.Scalar
		}
		var adds []frontier.AddProof
		var removes []frontier.RemoveProof
		for _, p := range want {
			if slices.Contains(cur.Partitions, p) {
				continue
			}
			_, err := in.store.LoadCheckpoint(ctx, store.Key{Scope: in.cfg.Scope, Partition: p})
			fresh := errors.Is(err, store.ErrNoCheckpoint) && len(in.cfg.StartCursor) == 0
			adds = append(adds, frontier.AddProof{Partition: p, Replayed: fresh})
		}
		for _, p := range cur.Partitions {
			if !slices.Contains(want, p) {
				removes = append(removes, frontier.RemoveProof{Partition: p})
			}
		}
		next := frontier.PlanChange(cur.FrontierMembership(), published, adds, removes)
		rec := store.Membership{
			Scope: in.cfg.Scope, Epoch: next.Epoch, Partitions: next.Partitions, Cutover: next.Cutover,
			Proven: next.Proven, Reason: next.Reason, Unproven: next.Unproven,
		}
		m, err := in.store.SwapMembership(ctx, cur.Epoch, rec)
		if errors.Is(err, store.ErrFenced) && try < 3 {
			continue
		}
		if err != nil {
			return store.Membership{}, fmt.Errorf("advancing membership of %s to epoch %d: %w", in.cfg.Scope, next.Epoch, err)
		}
		if !m.Proven {
			in.log.Warnf("Membership of scope %s changed to epoch %d without proof: %s; the scalar frontier is withheld, the vector is published", in.cfg.Scope, m.Epoch, m.Reason)
		} else {
			in.log.Infof("Membership of scope %s changed to epoch %d", in.cfg.Scope, m.Epoch)
		}
		return m, nil
	}
}

// publishFrontier keeps the scope's published frontier record up to date:
// every interval it recomputes the combined frontier of the epoch from the
// durable checkpoints of every partition of the scope (a store read, so
// partitions other instances hold count; the in-process feed adds this
// process's writes between reads) and advances the record by a
// compare-and-swap on its version when the core's publication rule allows.
// A publisher whose view is behind the record publishes nothing until its
// reads catch up: the record's scalar and vector never go down.
func (in *paginatedInput) publishFrontier(ctx context.Context, m store.Membership, every time.Duration) {
	sub := feed.Subscribe(in.cfg.Scope)
	defer sub.Close()
	t, err := frontier.NewTrackerFor(m.FrontierMembership())
	if err != nil {
		in.log.Errorf("Frontier of scope %s not published: %v", in.cfg.Scope, err)
		return
	}
	if cps, err := in.store.ListCheckpoints(ctx, in.cfg.Scope); err == nil {
		for _, cp := range cps {
			_, _ = t.Apply(cp.Partition, cp.Watermark)
		}
	}
	var prev store.Frontier
	loaded := false
	tick := time.NewTicker(every)
	defer tick.Stop()
	publish := func(ctx context.Context) {
		// An epoch advanced by an operator or another instance is picked up
		// here, within one interval: the frontier is computed for it and
		// messages carry it from now on.
		if cur, err := in.store.LoadMembership(ctx, in.cfg.Scope); err == nil && cur.Epoch > m.Epoch {
			nt, err := frontier.NewTrackerFor(cur.FrontierMembership())
			if err != nil {
				in.log.Errorf("Membership of scope %s: epoch %d cannot be tracked: %v", in.cfg.Scope, cur.Epoch, err)
				return
			}
			in.log.Infof("Membership of scope %s: epoch %d picked up (was %d): partitions %v, proven %v", in.cfg.Scope, cur.Epoch, m.Epoch, cur.Partitions, cur.Proven)
			t, m, loaded = nt, cur, false
			in.epochNow.Store(cur.Epoch)
		}
		for _, u := range sub.Drain() {
			_, _ = t.Apply(u.Partition, u.Watermark)
		}
		cps, err := in.store.ListCheckpoints(ctx, in.cfg.Scope)
		if err != nil {
			in.log.Warnf("Frontier of scope %s: cannot read the checkpoints: %v", in.cfg.Scope, err)
			return
		}
		for _, cp := range cps {
			_, _ = t.Apply(cp.Partition, cp.Watermark) // other epochs' partitions are unknown here
		}
		if !loaded {
			f, err := in.store.LoadFrontier(ctx, in.cfg.Scope)
			if err != nil && !errors.Is(err, store.ErrNoCheckpoint) {
				in.log.Warnf("Frontier of scope %s: cannot read the published record: %v", in.cfg.Scope, err)
				return
			}
			prev, loaded = f, true
		}
		snap := t.Frontier()
		in.recordFrontierMetrics(snap)
		pub, ok := frontier.NextPublication(prev.Snapshot(), snap)
		if !ok {
			return
		}
		next := store.FrontierRecord(in.cfg.Scope, pub)
		f, err := in.store.PublishFrontier(ctx, prev, next)
		switch {
		case err == nil:
			if frontier.ScalarAdvanced(prev.Snapshot(), pub) {
				in.log.Infof("Scope %s is complete through %s (epoch %d)", in.cfg.Scope, pub.Scalar, pub.Epoch)
			}
			prev = f
		case errors.Is(err, store.ErrFenced):
			loaded = false // another publisher won: re-read
		default:
			in.log.Warnf("Frontier of scope %s not published: %v", in.cfg.Scope, err)
			loaded = false
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-in.allDone:
			// Every partition is complete: publish the final frontier.
			fctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			publish(fctx)
			cancel()
			return
		case <-tick.C:
			publish(ctx)
		}
	}
}

// recordFrontierMetrics exports the frontier (integer and timestamp
// coordinates) and each partition's lag behind the most advanced one.
func (in *paginatedInput) recordFrontierMetrics(snap frontier.Snapshot) {
	if snap.Proven && (snap.Scalar.Kind == coord.KindInteger || snap.Scalar.Kind == coord.KindTimestamp) {
		in.metrics.frontier.Set(snap.Scalar.Int, in.cfg.Scope)
	}
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
