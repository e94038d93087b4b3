package clustersim

// CheckMonitor: the contract monitors (docs/design.md#contract-monitors)
// report only what the model did. The model keeps its contract except for
// its rogue token rotations and, in a few schedules, one partition's
// regressing watermarks (part.regress), and a recreated source (recreate)
// whose restarted positions answer an old cursor below what it certified
// before, or late positions below it (a partition that declares its
// incarnation leaves that to the monitors and the incarnation check before
// its recovery); a report of any
// other kind, or a regression in a schedule whose model neither regressed
// nor recreated a source, is a false alarm.
// (That a regression withdraws the scalar and loses nothing is checked by
// the other checks: no scalar is published in the unproven epoch it
// writes, and every event below durable progress has an outcome.)
const CheckMonitor Check = "monitor"

// checkMonitors runs CheckMonitor at the end of a schedule.
func (s *sim) checkMonitors() {
	switch {
	case s.stats.FalseAlarms > 0:
		s.oracle.violate(CheckMonitor, "the monitors reported %d contract violations of kinds the model never commits", s.stats.FalseAlarms)
	case s.stats.LateSeen > 0 && s.stats.Recreates == 0:
		s.oracle.violate(CheckMonitor, "the monitors reported %d late positions, and the model recreated no source", s.stats.LateSeen)
	case s.stats.RegressionsSeen > 0 && s.stats.Regressions == 0 && s.stats.Recreates == 0:
		s.oracle.violate(CheckMonitor, "the monitors reported %d regressing watermarks, and the model served none (and recreated no source)", s.stats.RegressionsSeen)
	}
}
