package clustersim

import (
	"bytes"
	"strings"

	"github.com/tidemark/tidemark/internal/chain"
	"github.com/tidemark/tidemark/internal/store"
)

// CheckMonitor: the contract monitors (docs/design.md#contract-monitors)
// report only what the model did. The model keeps its contract except for
// its rogue token rotations and, in a few schedules, one partition's
// regressing watermarks (part.regress), and a recreated source (recreate)
// whose restarted positions answer an old cursor below what it certified
// before, or late positions below it, or a snapshot marker value the old
// incarnation carried with other events (a partition that declares its
// incarnation leaves that to the monitors and the incarnation check
// before its recovery); a report of any other kind, or a regression in a
// schedule whose model neither regressed nor recreated a source, is a
// false alarm.
// (That a regression withdraws the scalar and loses nothing is checked by
// the other checks: no scalar is published in the unproven epoch it
// writes, and every event below durable progress has an outcome.)
// In a few schedules one partition's provider pages by offset though its
// contract does not say so (part.offsetURLs): offset_shaped_successor
// reports are expected of those schedules only, and the page must be
// refused: a promotion of the successor of a page read by an offset URL,
// grown only by its offset, fails the check (oracle.offsetPromotion).
const CheckMonitor Check = "monitor"

// checkMonitors runs CheckMonitor at the end of a schedule.
func (s *sim) checkMonitors() {
	switch {
	case s.stats.FalseAlarms > 0:
		s.oracle.violate(CheckMonitor, "the monitors reported %d contract violations of kinds the model never commits", s.stats.FalseAlarms)
	case s.stats.LateSeen > 0 && s.stats.Recreates == 0:
		s.oracle.violate(CheckMonitor, "the monitors reported %d late positions, and the model recreated no source", s.stats.LateSeen)
	case s.stats.UnstableSeen > 0 && s.stats.Recreates == 0:
		s.oracle.violate(CheckMonitor, "the monitors reported %d unstable snapshot markers, and the model recreated no source", s.stats.UnstableSeen)
	case s.stats.OffsetShapedSeen > 0 && s.setup.offsetShaped == "":
		s.oracle.violate(CheckMonitor, "the monitors reported %d offset-shaped successors, and no provider of the model pages by offset undeclared", s.stats.OffsetShapedSeen)
	case s.stats.RegressionsSeen > 0 && s.stats.Regressions == 0 && s.stats.Recreates == 0:
		s.oracle.violate(CheckMonitor, "the monitors reported %d regressing watermarks, and the model served none (and recreated no source)", s.stats.RegressionsSeen)
	}
}

// offsetPromotion runs CheckMonitor on a promotion that took effect: for a
// partition whose provider pages by offset undeclared (part.offsetURLs),
// the successor of a page read by an offset URL that differs from it only
// by a greater offset (the same session and nonce: the model's own
// reading of its cursors, not the monitor's) must never be promoted: the
// monitor refuses that page. Restarts and repairs write boundaries.
func (o *oracle) offsetPromotion(pr store.Promotion) {
	p := o.s.part(pr.Key.Partition)
	if p == nil || !p.offsetURLs || strings.HasPrefix(pr.WitnessID, chain.RestartWitnessPrefix) || strings.HasPrefix(pr.WitnessID, chain.RepairWitnessPrefix) {
		return
	}
	if !bytes.HasPrefix(pr.FromCursor, []byte(offsetURLBase)) || !bytes.HasPrefix(pr.To, []byte(offsetURLBase)) {
		return
	}
	from, err1 := decodeCursor(pr.FromCursor)
	to, err2 := decodeCursor(pr.To)
	if err1 == nil && err2 == nil && to.next > from.next && to.session == from.session && to.nonce == from.nonce {
		o.violate(CheckMonitor, "partition %s: promoted g%d %s -> %s (witness %s): the successor of a page read by an offset the contract does not declare", p.name, pr.FromGeneration, curString(pr.FromCursor), curString(pr.To), pr.WitnessID)
	}
}
