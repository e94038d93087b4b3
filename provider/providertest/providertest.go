// Package providertest is the contract suite of tidemark providers: a
// provider's tests run it against the provider wired to a fake of its
// source, as every store runs internal/store/storetest.
//
//	func TestContract(t *testing.T) {
//		providertest.Run(t, func(t *testing.T) providertest.Fixture {
//			fake := newFakeServer(t)
//			return providertest.Fixture{Provider: newProvider(fake.URL), Partitions: []string{"a", "b"}, ...}
//		})
//	}
//
// What it checks is the provider contract of docs/design.md#provider-contract
// and docs/providers.md, as far as a fake can show it:
//   - the contract is one the input can use (Contract.Validate);
//   - every page from a partition's start to its end is one the input
//     accepts (the core's own witness rules: an id and a position of the
//     contract's kind on every event, no id twice, positions strictly
//     increasing under ordered or dense positions), and across pages ids
//     stay unique, ordered positions keep increasing, dense positions skip
//     none and begin at the declared first position (Contract.FirstPosition)
//     when there is one, watermarks keep one kind, and under finality `source` with
//     watermark_covers_positions no event appears at or below a
//     watermark already certified;
//   - the walk enumerates exactly the events the fake holds (Fixture.Events);
//   - a replay of a cursor returns the same events (and the same successor
//     unless tokens may rotate), when the fixture says replays are exact;
//   - a restart cursor (Restarter, under recovery restart_from_boundary or
//     fresh_snapshot) skips no event after the boundary;
//   - a Lister lists the fake's partitions; Incarnations are stable;
//   - failures are classified: an expired cursor is an *ExpiredError, a
//     malformed answer wraps ErrMalformed, a permanent failure wraps
//     ErrPermanent, a transient one is none of them, and the next fetch
//     after a fault answers again (for the faults the fake can inject).
package providertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/provider"
)

// Fault is a failure a fake source can be told to give.
type Fault int

// Faults.
const (
	// FaultTransient: a failure retrying can fix (HTTP 5xx, a reset
	// connection).
	FaultTransient Fault = iota + 1
	// FaultExpired: the source no longer honours the cursor (HTTP 410).
	FaultExpired
	// FaultMalformed: an answer that cannot be read (a truncated body).
	FaultMalformed
	// FaultPermanent: a failure retrying the same request cannot fix (a
	// rejected credential).
	FaultPermanent
)

func (f Fault) String() string {
	switch f {
	case FaultTransient:
		return "transient"
	case FaultExpired:
		return "expired"
	case FaultMalformed:
		return "malformed"
	case FaultPermanent:
		return "permanent"
	}
	return fmt.Sprintf("fault(%d)", int(f))
}

// Fixture is a provider wired to a fake of its source.
type Fixture struct {
	// Provider is the provider under test. Run closes it.
	Provider provider.Provider
	// Partitions are the partitions the fake holds (at least one).
	Partitions []string
	// Events, when not nil, are the ids of the events each partition holds,
	// in source order: a walk from the start must enumerate exactly these.
	Events map[string][]string
	// Replayable declares that fetching a cursor again returns the same
	// events (a fake without injected faults usually does).
	Replayable bool
	// Lists declares that the provider, as configured, lists its
	// partitions (it is a Lister and discovery is set up).
	Lists bool
	// MaxPages bounds a walk of one partition (0: 10000).
	MaxPages int
	// Inject, when not nil, makes the fake answer the next fetch of
	// partition with the fault, once; it returns false for a fault the
	// fake cannot give (that case is skipped).
	Inject func(partition string, f Fault) bool
}

// Factory returns a fresh fixture for each subtest.
type Factory func(t *testing.T) Fixture

// Run runs the contract suite: each check in a subtest of its own, with a
// fresh fixture. The checks of optional behaviour (replays, Restarter,
// Lister, Incarnations, faults) run only where the fixture and the provider
// have it.
func Run(t *testing.T, newFixture Factory) {
	t.Helper()
	fixture := func(t *testing.T) Fixture {
		fx := newFixture(t)
		require.NotNil(t, fx.Provider, "fixture without a provider")
		require.NotEmpty(t, fx.Partitions, "fixture without partitions")
		t.Cleanup(func() { require.NoError(t, fx.Provider.Close(context.Background()), "Close") })
		return fx
	}
	check := func(name string, fn func(Fixture) error) {
		t.Run(name, func(t *testing.T) { require.NoError(t, fn(fixture(t))) })
	}
	probe := fixture(t)
	check("contract is usable", CheckContract)
	check("walk from the start", CheckWalk)
	if probe.Replayable {
		check("replay of a cursor", CheckReplay)
	}
	if _, ok := probe.Provider.(provider.Restarter); ok && restarts(probe.Provider.Contract()) {
		check("restart skips nothing after the boundary", CheckRestart)
	}
	if _, ok := probe.Provider.(provider.Lister); ok && probe.Lists {
		check("lister lists the partitions", CheckLister)
	}
	if inc, ok := probe.Provider.(provider.Incarnations); ok {
		if declared, _ := inc.IncarnationCheck(); declared {
			check("incarnations are stable", CheckIncarnations)
		}
	}
	if probe.Inject != nil {
		for _, f := range []Fault{FaultTransient, FaultExpired, FaultMalformed, FaultPermanent} {
			check("fault "+f.String()+" is classified", func(fx Fixture) error { return CheckFault(fx, f) })
		}
	}
}

// restarts reports whether c's recovery asks the provider for restart
// cursors.
func restarts(c provider.Contract) bool {
	return c.Recovery == provider.RecoveryRestartFromBoundary || c.Recovery == provider.RecoveryFreshSnapshot
}

// CheckContract checks that the contract is one the input can use.
func CheckContract(fx Fixture) error {
	c := fx.Provider.Contract()
	if err := c.Validate(); err != nil {
		return err
	}
	return c.ValidPositionKind()
}

// CheckWalk walks every partition from its start and, when Fixture.Events
// is set, compares what it enumerated with the fake's events.
func CheckWalk(fx Fixture) error {
	for _, part := range fx.Partitions {
		w, err := walk(fx, part)
		if err != nil {
			return err
		}
		if fx.Events != nil && !slices.Equal(fx.Events[part], w.ids()) {
			return fmt.Errorf("partition %s: the walk enumerated %v, the fake holds %v (in source order)", part, w.ids(), fx.Events[part])
		}
	}
	return nil
}

// CheckReplay fetches every cursor of a walk again: the same events and
// watermark, and the same successor unless tokens may rotate.
func CheckReplay(fx Fixture) error {
	c := fx.Provider.Contract()
	for _, part := range fx.Partitions {
		w, err := walk(fx, part)
		if err != nil {
			return err
		}
		for _, pg := range w.pages {
			again, err := fx.Provider.Fetch(context.Background(), provider.Request{Partition: part, Cursor: pg.cursor, Attempt: 1})
			switch {
			case err != nil:
				return fmt.Errorf("partition %s: replay: %w", part, err)
			case !slices.Equal(eventsOf(pg.resp), eventsOf(again)):
				return fmt.Errorf("partition %s: a replay returned %v, the first fetch %v", part, eventsOf(again), eventsOf(pg.resp))
			case pg.resp.CompleteThrough != again.CompleteThrough:
				return fmt.Errorf("partition %s: a replay certified %s, the first fetch %s", part, again.CompleteThrough, pg.resp.CompleteThrough)
			case !c.TokensMayRotate && !bytes.Equal(pg.resp.Successor, again.Successor):
				return fmt.Errorf("partition %s: without tokens_may_rotate a replay returned another successor", part)
			}
		}
	}
	return nil
}

// CheckRestart asks a Restarter for the cursor after the middle event of
// each partition's walk: its page must hold the next event.
func CheckRestart(fx Fixture) error {
	r := fx.Provider.(provider.Restarter)
	for _, part := range fx.Partitions {
		w, err := walk(fx, part)
		if err != nil {
			return err
		}
		evs := w.events()
		if len(evs) < 2 {
			continue
		}
		at, next := evs[len(evs)/2-1], evs[len(evs)/2]
		cur, err := r.RestartCursor(context.Background(), provider.Boundary{
			Partition: part, Watermark: provider.Watermark(at.Position), Applied: at.Position, HasApplied: true, AppliedID: at.ID,
		})
		if err != nil {
			return fmt.Errorf("partition %s: restart cursor: %w", part, err)
		}
		resp, err := fx.Provider.Fetch(context.Background(), provider.Request{Partition: part, Cursor: cur, Watermark: provider.Watermark(at.Position)})
		if err != nil {
			return fmt.Errorf("partition %s: fetch of the restart cursor: %w", part, err)
		}
		if !slices.Contains(idsOf(resp.Events), next.ID) {
			return fmt.Errorf("partition %s: a restart after %s must replay %s, the next event; its page holds %v", part, at.ID, next.ID, idsOf(resp.Events))
		}
	}
	return nil
}

// CheckLister checks that a Lister lists the fake's partitions.
func CheckLister(fx Fixture) error {
	got, err := fx.Provider.(provider.Lister).Partitions(context.Background())
	if err != nil {
		return err
	}
	names := make([]string, len(got))
	for i, p := range got {
		names[i] = p.Name
	}
	slices.Sort(names)
	want := slices.Sorted(slices.Values(fx.Partitions))
	if !slices.Equal(names, want) {
		return fmt.Errorf("listed %v, the fake holds %v", names, want)
	}
	return nil
}

// CheckIncarnations checks that each partition's incarnation is not empty
// and stable while the fake is.
func CheckIncarnations(fx Fixture) error {
	inc := fx.Provider.(provider.Incarnations)
	for _, part := range fx.Partitions {
		a, err := inc.Incarnation(context.Background(), "providertest", part)
		if err != nil {
			return err
		}
		b, err := inc.Incarnation(context.Background(), "providertest", part)
		if err != nil {
			return err
		}
		if a == "" || a != b {
			return fmt.Errorf("partition %s: incarnations %q then %q: never empty, stable while the source is", part, a, b)
		}
	}
	return nil
}

// CheckFault injects f once into the first partition's next fetch: the
// fetch fails with f's class, and the following fetch answers (the page of
// a clean fetch, when replays are exact). A fault the fake cannot give
// passes.
func CheckFault(fx Fixture, f Fault) error {
	part := fx.Partitions[0]
	clean, err := fx.Provider.Fetch(context.Background(), provider.Request{Partition: part})
	if err != nil {
		return fmt.Errorf("clean fetch: %w", err)
	}
	if !fx.Inject(part, f) {
		return nil
	}
	_, err = fx.Provider.Fetch(context.Background(), provider.Request{Partition: part, Attempt: 1})
	if err == nil {
		return fmt.Errorf("a %s fault answered a page, not an error", f)
	}
	if err := classified(err, f); err != nil {
		return err
	}
	again, err := fx.Provider.Fetch(context.Background(), provider.Request{Partition: part, Attempt: 2})
	if err != nil {
		return fmt.Errorf("the fetch after a one-time %s fault: %w", f, err)
	}
	if fx.Replayable && !slices.Equal(eventsOf(clean), eventsOf(again)) {
		return fmt.Errorf("the fetch after a %s fault returned %v, a clean fetch %v", f, eventsOf(again), eventsOf(clean))
	}
	return nil
}

// classified reports err when it is not classified as f.
func classified(err error, f Fault) error {
	var exp *provider.ExpiredError
	isExp, isMal, isPerm := errors.As(err, &exp), errors.Is(err, provider.ErrMalformed), errors.Is(err, provider.ErrPermanent)
	ok := false
	switch f {
	case FaultTransient:
		ok = !errors.Is(err, provider.ErrExpired) && !isMal && !isPerm
	case FaultExpired:
		ok = isExp && !isMal && !isPerm
	case FaultMalformed:
		ok = isMal && !isExp && !isPerm
	case FaultPermanent:
		ok = isPerm && !isExp && !isMal
	}
	if !ok {
		return fmt.Errorf("a %s fault gave %v (expired %v, malformed %v, permanent %v): misclassified", f, err, isExp, isMal, isPerm)
	}
	return nil
}

// page is one fetch of a walk.
type page struct {
	cursor []byte
	resp   provider.Response
}

type walked struct{ pages []page }

func (w walked) events() []provider.Event {
	var out []provider.Event
	for _, p := range w.pages {
		out = append(out, p.resp.Events...)
	}
	return out
}

func (w walked) ids() []string { return idsOf(w.events()) }

// walk fetches part from its start, page after page, checking each page
// and the pages together, until a page is sealed, has no successor, is
// empty, or answers its own cursor again.
func walk(fx Fixture, part string) (walked, error) {
	c := fx.Provider.Contract()
	ordered := c.OrderedPositions || c.DensePositions
	covers := c.Finality == provider.FinalitySource && c.WatermarkCoversPositions
	limit := fx.MaxPages
	if limit == 0 {
		limit = 10000
	}
	var (
		w         walked
		cursor    []byte
		seen      = map[string]bool{}
		last      coord.Position
		certified coord.Watermark
	)
	for n := 0; n < limit; n++ {
		resp, err := fx.Provider.Fetch(context.Background(), provider.Request{Scope: "providertest", Partition: part, Cursor: cursor})
		if err != nil {
			return w, fmt.Errorf("partition %s: page %d: %w", part, n, err)
		}
		// The core's own rules for one page (in the core's coordinates, as
		// the input converts it): what the input accepts.
		core := reconcile.FromProvider(resp)
		if _, err := reconcile.Build(reconcile.BuildInput{Scope: "providertest", Partition: part, InputCursor: cursor, AttemptID: fmt.Sprintf("a%06d", n), Response: core, Contract: c}); err != nil {
			return w, fmt.Errorf("partition %s: page %d is not one the input accepts: %w", part, n, err)
		}
		for _, e := range core.Events {
			switch {
			case seen[e.ID]:
				return w, fmt.Errorf("partition %s: page %d: event id %s appears twice in a walk (ids are stable and unique)", part, n, e.ID)
			case ordered && !last.IsZero() && e.Position.Compare(last) <= 0:
				return w, fmt.Errorf("partition %s: page %d: ordered positions must increase across pages: %s after %s", part, n, e.Position, last)
			case c.HasFirstPosition() && last.IsZero() && e.Position != reconcile.FirstPosition(c):
				return w, fmt.Errorf("partition %s: page %d: the first event of a walk from the start is at position %s, not at the declared first position %s", part, n, e.Position, c.FirstPosition)
			case c.DensePositions && !last.IsZero() && !isNext(last, e.Position):
				return w, fmt.Errorf("partition %s: page %d: dense positions skip none: %s after %s", part, n, e.Position, last)
			case covers && !certified.IsZero() && !certified.Less(e.Position.AsWatermark()):
				return w, fmt.Errorf("partition %s: page %d: event %s at %s is at or below the watermark %s certified before", part, n, e.ID, e.Position, certified)
			}
			seen[e.ID] = true
			last = e.Position
		}
		if ct := core.CompleteThrough; !ct.IsZero() {
			if !certified.IsZero() && certified.Kind != ct.Kind {
				return w, fmt.Errorf("partition %s: page %d: watermark %s of another kind than %s", part, n, ct, certified)
			}
			if certified.IsZero() || certified.Less(ct) {
				certified = ct
			}
		}
		w.pages = append(w.pages, page{cursor: cursor, resp: resp})
		if resp.Sealed || len(resp.Successor) == 0 || len(resp.Events) == 0 || bytes.Equal(resp.Successor, cursor) {
			return w, nil
		}
		cursor = resp.Successor
	}
	return w, fmt.Errorf("partition %s: no end after %d pages", part, limit)
}

func isNext(prev, p coord.Position) bool {
	want, ok := prev.Next()
	return ok && p.Compare(want) == 0
}

type eventView struct {
	ID       string
	Position string
	Payload  string
}

func eventsOf(r provider.Response) []eventView {
	out := make([]eventView, len(r.Events))
	for i, e := range r.Events {
		out[i] = eventView{ID: e.ID, Position: e.Position.String(), Payload: string(e.Payload)}
	}
	return out
}

func idsOf(evs []provider.Event) []string {
	out := make([]string, 0, len(evs))
	for _, e := range evs {
		out = append(out, e.ID)
	}
	return out
}
