package clustersim

import "github.com/tidemark/tidemark/provider"

// offsetOverlap pages by offset over sparse positions with the overlap
// check (docs/pagination.md): every page after the first begins with the
// previous page's last event. With probability offsetShift an earlier page
// lost or gained a row and the page begins elsewhere, one event late
// included: the event that slid onto a page already read is then in no
// answer, and only reconcile.CheckContinuity, run by the partition machine,
// keeps the consumer from skipping it (the oracle's no-loss check would
// see the skip). An honest offset API answers no empty page where rows
// exist, so the profile serves none (no glitch, no quiet page): the check
// treats an empty answer to a successor as a shift.
var offsetOverlap = profile{name: "offset-overlap",
	contract: provider.Contract{EmptyPage: provider.EmptyNoEvidence, OrderedPositions: true, Pagination: provider.PaginationOffset, OffsetOverlap: true,
		Recovery: provider.RecoveryRestartFromBoundary},
	offsetShift: .15, shift: .2, transient: .04, garbage: .003, malformed: .02, gap: 3, pageSize: 3}

func init() { otherProfiles = append(otherProfiles, offsetOverlap) }

// offsetPage shapes the page [i, j) of an offset-paged profile. The page
// from the partition's start (i == 0) is a boundary and has no overlap;
// every other begins with the event before i (the previous page's last,
// since a successor points just past it), at the head as the only event.
// Under offsetShift it begins one event late (the event at i is lost to
// the reader), at i (the overlap is gone) or one event early (a row was
// inserted before it).
func (p *part) offsetPage(i, j int) (int, int, fetchNote) {
	if i == 0 {
		return i, j, ""
	}
	if !p.chance(p.prof.offsetShift) {
		return i - 1, j, ""
	}
	n := len(p.events)
	switch k := p.rng.IntN(4); {
	case k <= 1 && i+1 < n:
		return i + 1, max(j, min(i+2, n)), "offset-shift-late"
	case k == 2 && i < n:
		return i, max(j, i+1), "offset-shift-lost-overlap"
	case k == 3 && i >= 2:
		return i - 2, j, "offset-shift-early"
	}
	return i - 1, j, ""
}
