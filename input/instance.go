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
	"time"

	"github.com/tidemark/tidemark/internal/instance"
	"github.com/tidemark/tidemark/internal/runstatus"
)

// newInstance returns the machine of an input without leases.
func (in *paginatedInput) newInstance() *instance.Machine {
	c := instance.Config{
		Scope: in.cfg.Scope, ExitWhenComplete: in.cfg.ExitWhenComplete,
		ParkedGrace: in.cfg.ExitWhenParkedGrace,
	}
	c.PublishInterval, c.PublishIdle, c.PublishMaxIdle = in.publication()
	return instance.New(c)
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

// stepInstanceLocked is stepInstance with in.mu held (the lease manager's
// loop never takes it).
func (in *paginatedInput) stepInstanceLocked(inp instance.Input) {
	if in.leases != nil {
		in.leases.Post(inp)
		return
	}
	in.stepLocked(inp)
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
		in.requestPublish(a.Final)
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
			// What is durable is published (the final round) first.
			go func() {
				if in.finalAsked.Load() {
					<-in.pubDone
				}
				close(in.allDone)
			}()
			return
		}
		// Every partition is complete: the deletions of witnesses still
		// running finish (each store call has its deadline) before the
		// input ends, so a run that completes leaves none below its
		// checkpoints but the last round's; and the final frontier is
		// published (runPublisher, under its own deadline).
		go func() {
			in.prunes.Wait()
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
	case instance.EpochChanged:
		// adoptLocked stamped the epoch on the messages already.
	}
}
