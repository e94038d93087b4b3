package input

// The instance without leases: the pure instance machine
// (internal/instance) decides which partitions run, their start and stop
// as the membership changes, publication timing and the exit when every
// partition is complete or parked; this file performs its actions. (With
// leases internal/leasing drives the same machine, with its leases, and
// the input publishes on its own ticker.)

import (
	"context"
	"time"

	"github.com/tidemark/tidemark/internal/instance"
	"github.com/tidemark/tidemark/internal/runstatus"
)

// newInstance returns the machine of an input without leases. Its
// publication timer is off (PublishInterval 0): the input's publisher
// runs a round as soon as this process promotes, paced by publish.Pacer
// (publishFrontier), which the machine does not yet own.
func (in *paginatedInput) newInstance() *instance.Machine {
	return instance.New(instance.Config{
		Scope: in.cfg.Scope, ExitWhenComplete: in.cfg.ExitWhenComplete,
		ParkedGrace: in.cfg.ExitWhenParkedGrace,
	})
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
	case instance.Publish:
		// Not asked for (PublishInterval 0, newInstance).
	case instance.ParkedWait:
		in.log.Warnf("Every partition of scope %s is complete or parked (%d parked): the input ends in %s, as a failed run, unless a partition is unparked", in.cfg.Scope, a.Parked, time.Until(a.At).Round(time.Millisecond))
	case instance.Exit:
		in.allClosed = true
		if in.instWake != nil {
			in.instWake.Stop()
		}
		if a.Failed {
			for _, r := range a.Reasons {
				in.log.Errorf("exit_when_complete: %s", r)
				runstatus.Fail(r)
			}
			in.log.Errorf("exit_when_complete: %d partitions of scope %s stayed parked for exit_when_parked_grace (%s): the run ends as a failure", len(a.Reasons), in.cfg.Scope, in.cfg.ExitWhenParkedGrace)
			close(in.allDone)
			return
		}
		// Every partition is complete: the deletions of witnesses still
		// running finish (each store call has its deadline) before the
		// input ends, so a run that completes leaves none below its
		// checkpoints but the last round's.
		go func() {
			in.prunes.Wait()
			close(in.allDone)
		}()
	case instance.Wake:
		d := max(time.Until(a.At), 0)
		if in.instWake == nil {
			in.instWake = time.AfterFunc(d, func() { in.step(instance.Tick{Now: time.Now()}) })
			return
		}
		in.instWake.Reset(d)
	case instance.EpochChanged:
		// adoptLocked stamped the epoch on the messages already.
	}
}
