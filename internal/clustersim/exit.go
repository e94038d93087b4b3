package clustersim

import "github.com/tidemark/tidemark/internal/instance"

// exit_when_complete (schedules without leases whose setup.exit is set):
// every worker runs the real instance machine (internal/instance, the one
// the input drives without leases) for the exit decision. Its lanes' chain
// machines complete once caught up (chain.Config.ExitWhenComplete) and the
// lane reports it (instance.Completed); every checkpoint a lane's machine
// observes reports its park reason (instance.Parked), as the input's
// observePark does. The instance's Exit ends the worker: none of its lanes
// is stepped again until a crash restarts it. The instance's membership is
// the partitions the worker's lanes read (the sim assigns partitions to
// workers; its StartWorker and StopWorker are the lanes syncLanes keeps);
// exit_when_parked_grace is 0 (a parked partition never ends the worker),
// so a parked lane keeps polling for its unpark.
//
// CheckExit: an Exit that is not a failed run finds every partition of the
// instance's membership complete on the worker's lane and none parked.
// Variant ExitWithParked sets the machine's ExitParked (a parked partition
// counts as complete) and gives the schedule a persistently malformed
// partition, so the worker exits as complete while it is parked.

// exitMode reports whether the workers' exits go through their instance
// machines.
func (s *sim) exitMode() bool { return s.setup.exit && s.lease == nil }

// exitStep runs at the start of every lane step in exit mode: it advances
// the worker's clock, starts its instance machine or has it adopt the
// worker's epoch, and ticks it. It reports whether the worker has exited
// (the step does nothing more).
func (l *lane) exitStep() bool {
	s, w := l.s, l.w
	if w.exited {
		l.note("instance exited")
		return true
	}
	w.ticks++
	switch {
	case w.im == nil:
		w.im = instance.New(instance.Config{Scope: s.scope, ExitWhenComplete: true, ExitParked: s.variant == ExitWithParked})
		s.feedExit(w, l, instance.Start{Now: w.clock(), Membership: w.members()})
	case w.im.Epoch() < w.epoch:
		s.feedExit(w, l, instance.Adopt{Now: w.clock(), Membership: w.members(), Source: "the stored membership"})
	}
	s.feedExit(w, l, instance.Tick{Now: w.clock()})
	return w.exited
}

// feedExit steps w's instance machine in exit mode and performs its
// actions: Exit ends the worker (checked first); the others are the
// lanes' own business (StartWorker, StopWorker, EpochChanged) or need
// nothing here (Wake: ticked at every lane step; no publication interval).
func (s *sim) feedExit(w *worker, l *lane, in instance.Input) {
	if w.im == nil || w.exited {
		return
	}
	for _, a := range w.im.Step(in) {
		switch a := a.(type) {
		case instance.Exit:
			s.instanceExit(w, l, a)
		case instance.ParkedWait:
			l.note("instance of w%d: %s", w.id, a)
		}
	}
}

// instanceExit performs Exit: the worker ends, once CheckExit holds.
func (s *sim) instanceExit(w *worker, l *lane, a instance.Exit) {
	w.exited = true
	s.stats.InstanceExits++
	l.note("instance of w%d: %s", w.id, a)
	if a.Failed {
		return
	}
	for _, p := range w.im.Partitions() {
		for _, x := range w.lanes {
			switch {
			case x.p.name != p:
			case x.parked != "":
				s.oracle.violate(CheckExit, "worker %d's instance exited as complete while partition %s is parked: %s", w.id, p, x.parked)
				return
			case !x.complete:
				s.oracle.violate(CheckExit, "worker %d's instance exited as complete while partition %s is not complete", w.id, p)
				return
			}
		}
	}
}
