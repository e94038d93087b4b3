package providertest_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/provider"
	"github.com/tidemark/tidemark/provider/providertest"
)

// fakeProvider serves one partition "a" of positions 1..n, pageSize per
// page, with the flaw the test names.
type fakeProvider struct {
	n, pageSize int64
	flaw        string
	fault       providertest.Fault
	// startFetches counts the fetches of the start cursor.
	startFetches int
}

func (p *fakeProvider) Contract() provider.Contract {
	return provider.Contract{
		EmptyPage: provider.EmptyFinalThroughWatermark, DensePositions: true, OrderedPositions: true,
		Finality: provider.FinalitySource, WatermarkCoversPositions: true, Recovery: provider.RecoveryRestartFromBoundary,
		FirstPosition: provider.IntPosition(1),
	}
}

func (p *fakeProvider) Close(context.Context) error { return nil }

func (p *fakeProvider) Fetch(_ context.Context, req provider.Request) (provider.Response, error) {
	if f := p.fault; f != 0 {
		p.fault = 0
		switch {
		case p.flaw == "misclassified":
			return provider.Response{}, errors.New("410 gone")
		case f == providertest.FaultTransient:
			return provider.Response{}, errors.New("503")
		case f == providertest.FaultExpired:
			return provider.Response{}, &provider.ExpiredError{Partition: req.Partition, Reason: "410"}
		case f == providertest.FaultMalformed:
			return provider.Response{}, &provider.MalformedError{Partition: req.Partition, Reason: "truncated"}
		default:
			return provider.Response{}, fmt.Errorf("401: %w", provider.ErrPermanent)
		}
	}
	start := int64(1)
	if len(req.Cursor) == 0 {
		p.startFetches++
	} else {
		start, _ = strconv.ParseInt(string(req.Cursor), 10, 64)
	}
	if p.flaw == "first page cut" && len(req.Cursor) == 0 {
		start = 3 // retention dropped the first two events
	}
	end := min(start+p.pageSize-1, p.n)
	var r provider.Response
	for pos := start; pos <= end; pos++ {
		id, at := "a-"+strconv.FormatInt(pos, 10), pos
		switch {
		case p.flaw == "duplicate id" && pos == 4:
			id = "a-1"
		case p.flaw == "gap" && pos >= 4:
			at = pos + 1
		case p.flaw == "replay differs" && p.startFetches > 1 && pos == 1:
			id = "a-other"
		}
		r.Events = append(r.Events, provider.Event{ID: id, Position: provider.IntPosition(at), Payload: []byte("x")})
	}
	r.Successor = []byte(strconv.FormatInt(end+1, 10))
	r.CompleteThrough = provider.IntegerWatermark(end)
	if p.flaw == "watermark ahead" && start == 1 {
		r.CompleteThrough = provider.IntegerWatermark(end + 1)
	}
	return r, nil
}

func (p *fakeProvider) RestartCursor(_ context.Context, from provider.Boundary) ([]byte, error) {
	next := from.Applied.Int + 1
	if p.flaw == "restart skips" {
		next++
	}
	return []byte(strconv.FormatInt(next, 10)), nil
}

func fixture(p *fakeProvider) providertest.Fixture {
	ids := make([]string, 0, p.n)
	for pos := int64(1); pos <= p.n; pos++ {
		ids = append(ids, "a-"+strconv.FormatInt(pos, 10))
	}
	return providertest.Fixture{
		Provider: p, Partitions: []string{"a"}, Events: map[string][]string{"a": ids}, Replayable: true,
		Inject: func(_ string, f providertest.Fault) bool { p.fault = f; return true },
	}
}

// TestRunPassesAFaithfulProvider: the suite passes a provider that keeps
// the contract.
func TestRunPassesAFaithfulProvider(t *testing.T) {
	providertest.Run(t, func(*testing.T) providertest.Fixture { return fixture(&fakeProvider{n: 10, pageSize: 3}) })
}

// TestChecksCatchBrokenProviders: each check fails a provider that breaks
// the promise it checks.
func TestChecksCatchBrokenProviders(t *testing.T) {
	for _, tc := range []struct {
		flaw  string
		check func(providertest.Fixture) error
		want  string
	}{
		{"duplicate id", providertest.CheckWalk, "appears twice"},
		{"gap", providertest.CheckWalk, "dense positions skip none"},
		{"first page cut", providertest.CheckWalk, "the first event of a walk from the start is at position 3, not at the declared first position 1"},
		{"watermark ahead", providertest.CheckWalk, "at or below the watermark"},
		{"replay differs", providertest.CheckReplay, "a replay returned"},
		{"restart skips", providertest.CheckRestart, "must replay a-6"},
		{"misclassified", func(fx providertest.Fixture) error { return providertest.CheckFault(fx, providertest.FaultExpired) }, "misclassified"},
	} {
		t.Run(tc.flaw, func(t *testing.T) {
			err := tc.check(fixture(&fakeProvider{n: 10, pageSize: 3, flaw: tc.flaw}))
			require.ErrorContains(t, err, tc.want)
		})
	}
	t.Run("events the fake holds but the walk missed", func(t *testing.T) {
		fx := fixture(&fakeProvider{n: 10, pageSize: 3})
		fx.Events["a"] = append(fx.Events["a"], "a-11")
		require.ErrorContains(t, providertest.CheckWalk(fx), "the walk enumerated")
	})
}
