package input

// The instance without leases: the pure instance machine
// (internal/instance) decides which partitions run, their start and stop
// as the membership changes, publication timing and the exit when every
// partition is complete or parked; this file performs its actions. (With
// leases internal/leasing drives the same machine, with its leases; in
// both modes the machine times the publisher's rounds, which runPublisher
// performs.)

import (
	"context"
	"fmt"
	"time"

	"github.com/tidemark/tidemark/internal/instance"
	"github.com/tidemark/tidemark/internal/runstatus"
	"github.com/tidemark/tidemark/internal/store"
)

// instanceConfig is the instance machine's configuration of this input,
// but its leases.
func (in *paginatedInput) instanceConfig() instance.Config {
	c := instance.Config{
		Scope: in.cfg.Scope, ExitWhenComplete: in.cfg.ExitWhenComplete,
		ParkedGrace:     in.cfg.ExitWhenParkedGrace,
		MembershipCheck: in.checkEvery, Discover: in.cfg.Discover, DiscoveryInterval: in.cfg.DiscoveryInterval,
		UnorderedLineage: in.cfg.UnorderedLineage, ParentsPoll: in.cfg.PollInterval,
		PruneEvery: in.cfg.PruneEvery,
	}
	c.PublishInterval, c.PublishIdle, c.PublishMaxIdle = in.publication()
	return c
}

// newInstance returns the machine of an input without leases.
func (in *paginatedInput) newInstance() *instance.Machine {
	return instance.New(in.instanceConfig())
}

// performIO performs the instance machine's actions of both modes beyond
// its workers and leases (with leases the lease manager hands them over):
// the epoch it adopted at once, the rest on a goroutine of its own each
// (the machine asks for one membership call, one publication round and
// one deletion per partition at a time, and reads the parents only of the
// partitions that wait), whose answer is stepped back. It never blocks.
func (in *paginatedInput) performIO(a instance.Action) {
	ctx := in.wctx
	if ctx == nil || ctx.Err() != nil {
		if p, ok := a.(instance.Publish); ok && p.Final {
			in.requestPublish(true) // under its own deadline
		}
		return
	}
	switch a := a.(type) {
	case instance.EpochChanged:
		in.adopted(a)
	case instance.LineageWait:
		in.lineageWait(a)
	case instance.Publish:
		in.requestPublish(a.Final)
	case instance.ReadMembership, instance.Discover, instance.ReadParents, instance.Prune:
		in.wg.Go(func() { in.stepInstance(in.call(ctx, a)) })
	}
}

// call performs one of the machine's store (or provider) calls and
// returns its answer.
func (in *paginatedInput) call(ctx context.Context, a instance.Action) instance.Input {
	switch a := a.(type) {
	case instance.ReadMembership:
		return in.readMembership(ctx)
	case instance.Discover:
		return in.discover(ctx, a.Why)
	case instance.ReadParents:
		return in.readParents(ctx, a)
	case instance.Prune:
		return in.prune(ctx, a)
	}
	panic(fmt.Sprintf("paginated_partitions: not a call of the instance machine: %T", a))
}

// prune performs Prune: the witnesses below a durable generation, which
// nothing reads again (store.WitnessStore.PruneWitnesses), beside the
// partition's worker; a failure is logged and retried at a later
// checkpoint (the machine's chain.Pruning decides).
func (in *paginatedInput) prune(ctx context.Context, a instance.Prune) instance.Pruned {
	n, err := in.store.PruneWitnesses(ctx, store.Key{Scope: in.cfg.Scope, Partition: a.Partition}, a.Below)
	switch {
	case err == nil:
		in.metrics.witnessesPruned.Incr(int64(n))
	case ctx.Err() == nil:
		in.log.Warnf("Partition %s: deleting the witnesses below generation %d failed (retried later): %v", a.Partition, a.Below, err)
	}
	return instance.Pruned{Partition: a.Partition, Below: a.Below, Err: err}
}

// stepInstance feeds the instance machine one input: with leases through
// the lease manager's loop (leasing.Manager.Post), without under in.mu.
func (in *paginatedInput) stepInstance(inp instance.Input) {
	if in.leases != nil {
		in.leases.Post(inp)
		return
	}
	in.step(inp)
}

// stepLocked feeds the instance machine one input and performs its
// actions (in.mu held; nothing here waits for I/O).
func (in *paginatedInput) stepLocked(inp instance.Input) {
	if in.inst == nil {
		return
	}
	for _, a := range in.inst.Step(inp) {
		in.performLocked(a)
	}
}

// step is stepLocked taking in.mu.
func (in *paginatedInput) step(inp instance.Input) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.stepLocked(inp)
}

func (in *paginatedInput) performLocked(a instance.Action) {
	switch a := a.(type) {
	case instance.StartWorker:
		if in.wctx == nil || in.wctx.Err() != nil {
			return
		}
		name := a.Partition
		ctx, cancel := context.WithCancel(in.wctx)
		in.workers[name] = cancel
		in.wg.Add(1)
		newPartition(in, name).launch(ctx, func() {
			// The machine hears of it on its own goroutine: done may run
			// under in.mu (a worker that ends before it starts).
			in.wg.Go(func() { in.step(instance.WorkerStopped{Partition: name}) })
			cancel()
			in.wg.Done()
		})
	case instance.StopWorker:
		if cancel := in.workers[a.Partition]; cancel != nil {
			in.log.Infof("Partition %s of scope %s: its worker stops: %s", a.Partition, in.cfg.Scope, a.Reason)
			cancel()
			delete(in.workers, a.Partition)
		}
	case instance.ParkedWait:
		in.log.Warnf("Every partition of scope %s is complete or parked (%d parked): the input ends in %s, as a failed run, unless a partition is unparked", in.cfg.Scope, a.Parked, time.Until(a.At).Round(time.Millisecond))
	case instance.Exit:
		if in.instWake != nil {
			in.instWake.Stop()
		}
		if a.Failed {
			for _, r := range a.Reasons {
				in.log.Errorf("exit_when_complete: %s", r)
				runstatus.Fail(r)
			}
			in.log.Errorf("exit_when_complete: %d partitions of scope %s stayed parked for exit_when_parked_grace (%s): the run ends as a failure", len(a.Reasons), in.cfg.Scope, in.cfg.ExitWhenParkedGrace)
		}
		// The machine waited for the deletions of witnesses in flight; the
		// final frontier (what is durable, also of a failed run) is
		// published (runPublisher, under its own deadline) before the
		// input ends.
		go func() {
			if in.finalAsked.Load() {
				<-in.pubDone
			}
			close(in.allDone)
		}()
	case instance.Wake:
		d := max(time.Until(a.At), 0)
		if in.instWake == nil {
			in.instWake = time.AfterFunc(d, func() { in.step(instance.Tick{Now: time.Now()}) })
			return
		}
		in.instWake.Reset(d)
	default:
		in.performIO(a)
	}
}
