package probe

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/provider"
)

// Facts are what the checks judge: the observation with every page's
// witness built by the core, and the pairs of answers to one cursor
// classified by it.
type Facts struct {
	Obs Observation
	// Walks are the first and the second walk.
	Walks [2][]PageFacts
	// Pairs are the cursors answered twice: each retry with the first
	// walk's page, and each page of the second walk whose cursor is the
	// first walk's at the same step.
	Pairs []Pair
	// Bad are the answers the input could not use (a malformed page, a
	// position of another kind, positions out of order, a duplicate id).
	Bad []BadAnswer
	// Fetched counts the pages answered.
	Fetched int
}

// PageFacts is one page of a walk.
type PageFacts struct {
	Page
	// Label names the page in evidence ("walk 1 page 2").
	Label string
	// Witness is the page's witness as the input builds it (zero when
	// BuildErr is set).
	Witness  reconcile.Witness
	BuildErr error
	// Applied and HasApplied are the applied boundary before the page: the
	// greatest position of the walk's earlier pages, as the input keeps it.
	Applied    coord.Position
	HasApplied bool
	// Continuity is the offset continuity check the input runs on the
	// page (reconcile.CheckContinuity against the walk's page before it);
	// nil when the pagination is not offset or the page cannot be built.
	// Under offset_overlap a page that continues repeats the previous
	// page's last event first (Continuity.Overlap).
	Continuity *reconcile.Continuity
}

// overlap is how many leading events of the page repeat the previous page
// under the overlap check (they are not new events).
func (p PageFacts) overlap() int {
	if p.Continuity == nil || !p.Continuity.Continues {
		return 0
	}
	return min(p.Continuity.Overlap, len(p.Response.Events), len(p.Witness.Events))
}

// newEvents are the page's events after those that repeat the previous
// page under the overlap check.
func (p PageFacts) newEvents() []reconcile.Event { return p.Response.Events[p.overlap():] }

// newWitnessEvents are the witnesses of newEvents.
func (p PageFacts) newWitnessEvents() []reconcile.EventWitness { return p.Witness.Events[p.overlap():] }

// Empty reports whether the page has no events.
func (p PageFacts) Empty() bool { return len(p.Response.Events) == 0 }

// Last is the position of the page's last event (ok false when empty).
func (p PageFacts) Last() (coord.Position, bool) {
	if p.Empty() {
		return coord.Position{}, false
	}
	return p.Response.Events[len(p.Response.Events)-1].Position, true
}

// Max is the greatest position of the page (ok false when empty).
func (p PageFacts) Max() (coord.Position, bool) {
	if p.Empty() {
		return coord.Position{}, false
	}
	m := p.Response.Events[0].Position
	for _, e := range p.Response.Events[1:] {
		m = coord.MaxPosition(m, e.Position)
	}
	return m, true
}

// Pair is one cursor answered twice, classified as the input classifies a
// retry: the first answer is the earlier witness of (cursor, generation),
// all of its events delivered; the second is the retry.
type Pair struct {
	// Label names the pair ("walk 1 page 1 fetched again").
	Label         string
	First, Second PageFacts
	// Class is the core's verdict on the second answer (zero when Idle or
	// Err).
	Verdict reconcile.Verdict
	// Idle: the second answer was empty without evidence (the input polls
	// again; nothing is classified).
	Idle bool
	Err  error
	// inWalk: Second is a page of the second walk (not a retry).
	inWalk bool
	// classified: Classify ran (Err, when set, is its error).
	classified bool
}

// SameEvents reports whether both answers have the same ordered event
// witness.
func (p Pair) SameEvents() bool { return slices.Equal(p.First.Witness.Events, p.Second.Witness.Events) }

// Rotated reports whether both answers have the same events and another
// successor.
func (p Pair) Rotated() bool {
	return p.SameEvents() && !bytes.Equal(p.First.Witness.Successor, p.Second.Witness.Successor)
}

// BadAnswer is an answer the input could not use.
type BadAnswer struct {
	Label string
	Err   error
}

const scope, attempt1, attempt2 = "probe", "first", "again"

// Derive builds the facts of an observation.
func Derive(d Declared, o Observation) *Facts {
	fx := &Facts{Obs: o}
	for wi, w := range []Walk{o.First, o.Second} {
		var applied coord.Position
		has := false
		for i, p := range w.Pages {
			pf := buildPage(d, o.Partition, fmt.Sprintf("walk %d page %d", wi+1, i+1), p, attempt1)
			pf.Applied, pf.HasApplied = applied, has
			if pf.BuildErr != nil && !errors.Is(pf.BuildErr, reconcile.ErrLoop) {
				fx.Bad = append(fx.Bad, BadAnswer{pf.Label, pf.BuildErr})
			}
			if m, ok := pf.Max(); ok {
				if has {
					m = coord.MaxPosition(m, applied)
				}
				applied, has = m, true
			}
			if d.Contract.Pagination == provider.PaginationOffset && pf.BuildErr == nil {
				in := reconcile.ContinuityInput{Contract: d.Contract, Witness: pf.Witness, Boundary: i == 0}
				if i > 0 {
					if prev := fx.Walks[wi][i-1]; prev.BuildErr == nil && len(prev.Witness.Events) > 0 {
						in.Previous, in.HasPrevious = prev.Witness.Events[len(prev.Witness.Events)-1], true
					}
				}
				ct := reconcile.CheckContinuity(in)
				pf.Continuity = &ct
			}
			fx.Walks[wi] = append(fx.Walks[wi], pf)
			fx.Fetched++
		}
		if errors.Is(w.Err, provider.ErrMalformed) {
			fx.Bad = append(fx.Bad, BadAnswer{fmt.Sprintf("walk %d page %d", wi+1, len(w.Pages)+1), w.Err})
		}
	}
	first := fx.Walks[0]
	for _, r := range o.Retries {
		if r.Of < 0 || r.Of >= len(first) {
			continue
		}
		label := first[r.Of].Label + " fetched again"
		if r.Err != nil {
			if errors.Is(r.Err, provider.ErrMalformed) {
				fx.Bad = append(fx.Bad, BadAnswer{label, r.Err})
			}
			continue
		}
		fx.Fetched++
		p := pairOf(d, o.Partition, label, first[r.Of], r.Page)
		if err := p.Second.BuildErr; err != nil && !errors.Is(err, reconcile.ErrLoop) {
			fx.Bad = append(fx.Bad, BadAnswer{label, err})
		}
		fx.Pairs = append(fx.Pairs, p)
	}
	for i, s := range fx.Walks[1] {
		if i < len(first) && bytes.Equal(s.Cursor, first[i].Cursor) {
			p := pairOf(d, o.Partition, fmt.Sprintf("walk 2 page %d (the cursor of walk 1 page %d)", i+1, i+1), first[i], s.Page)
			p.inWalk = true
			fx.Pairs = append(fx.Pairs, p)
		}
	}
	return fx
}

func buildPage(d Declared, partition, label string, p Page, attempt string) PageFacts {
	if partition == "" {
		partition = "(unnamed)"
	}
	w, err := reconcile.Build(reconcile.BuildInput{
		Scope: scope, Partition: partition, InputCursor: p.Cursor, AttemptID: attempt,
		Response: p.Response, Contract: d.Contract,
	})
	return PageFacts{Page: p, Label: label, Witness: w, BuildErr: err}
}

// pairOf classifies again, a second answer to first's cursor, the way the
// input's chain does (internal/chain reconcile): an empty answer without
// evidence is no answer (the input records nothing for it and polls
// again), so a pair with one is Idle; otherwise reconcile.Classify against
// the first answer, whose events all have a durable outcome. An answer
// that cannot be built is reported by Derive (Bad), and the pair is not
// classified (Err).
func pairOf(d Declared, partition, label string, first PageFacts, again Page) Pair {
	s := buildPage(d, partition, label, again, attempt2)
	s.Applied, s.HasApplied = first.Applied, first.HasApplied
	p := Pair{Label: label, First: first, Second: s}
	noAnswer := func(pf PageFacts) bool {
		return errors.Is(pf.BuildErr, reconcile.ErrLoop) ||
			(pf.BuildErr == nil && len(pf.Witness.Events) == 0 && !reconcile.CanPromote(d.Contract, pf.Witness).Complete)
	}
	switch {
	case noAnswer(first) || noAnswer(s):
		p.Idle = true
		return p
	case first.BuildErr != nil:
		p.Err = first.BuildErr
		return p
	case s.BuildErr != nil:
		p.Err = s.BuildErr
		return p
	}
	prior := first.Witness.Clone()
	prior.AckedThrough = len(prior.Events)
	v, err := reconcile.Classify(reconcile.ClassifyInput{
		Contract: d.Contract, Applied: first.Applied, HasApplied: first.HasApplied,
		Prior: []reconcile.Witness{prior}, Witness: s.Witness,
	})
	p.Verdict, p.Err, p.classified = v, err, true
	return p
}

// allPages are the pages of both walks and the retries' second answers.
func (fx *Facts) allPages() []PageFacts {
	out := append(append([]PageFacts(nil), fx.Walks[0]...), fx.Walks[1]...)
	for _, p := range fx.Pairs {
		if !p.inWalk {
			out = append(out, p.Second)
		}
	}
	return out
}
