package bench

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/tidemark/tidemark/provider"
)

// incarnationProvider declares an incarnation for every partition of the
// source it wraps (docs/design.md#source-incarnations) and counts the
// incarnation requests: those a partition makes before its first fetch
// (start-up: the check when it starts, and again after recording its
// first incarnation) and those after (the bracket: the check every
// emission waits for, which also covers the promotions, and the interval
// check); and the fetches answered with events (pages).
type incarnationProvider struct {
	provider.Provider
	latency time.Duration

	mu      sync.Mutex
	fetched map[string]bool
	c       incarnationCounts
}

type incarnationCounts struct {
	Startup, Bracket, Pages int64
}

func newIncarnationProvider(p provider.Provider, latency time.Duration) *incarnationProvider {
	return &incarnationProvider{Provider: p, latency: latency, fetched: map[string]bool{}}
}

// IncarnationCheck: declared, checked every minute while reading (the
// spec's default validate_interval; no run lasts that long).
func (p *incarnationProvider) IncarnationCheck() (bool, time.Duration) { return true, time.Minute }

// Incarnation answers after the source's latency (the request is one more
// round trip to it), never another value.
func (p *incarnationProvider) Incarnation(ctx context.Context, _, partition string) (string, error) {
	t := time.NewTimer(p.latency)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return "", ctx.Err()
	case <-t.C:
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fetched[partition] {
		p.c.Bracket++
	} else {
		p.c.Startup++
	}
	return "bench-incarnation-1", nil
}

func (p *incarnationProvider) Fetch(ctx context.Context, req provider.Request) (provider.Response, error) {
	p.mu.Lock()
	p.fetched[req.Partition] = true
	p.mu.Unlock()
	r, err := p.Provider.Fetch(ctx, req)
	if err == nil && len(r.Events) > 0 {
		p.mu.Lock()
		p.c.Pages++
		p.mu.Unlock()
	}
	return r, err
}

func (p *incarnationProvider) counts() incarnationCounts {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.c
}

// BenchmarkIncarnationBracket measures what the incarnation bracket costs
// (docs/design.md#source-incarnations): the incarnation requests per page
// fetched with events, at P=16, 100-event pages, the request as slow as a
// page. With a declared incarnation no page is emitted before a check that
// began after its answer arrived; one check covers every page whose answer
// had arrived by then, and it also covers the page's promotion. Each case
// runs three times: without an incarnation (throughput), with one in the
// previous release's order (a page emitted at once, checked before its
// promotion: chain.Config.EmitBeforeCheck, the baseline), and bracketed.
// Reported: incarnation-requests/page (after each partition's first
// fetch), the baseline's, their difference (extra-requests/page),
// startup-incarnation-requests/partition, and the three throughputs.
//   - p16-memory: the memory store, 20 ms a page;
//   - p16-slowstore: the memory store answering in 10 ms and 5 ms a page,
//     so answers fetched ahead arrive while a witness is written and share
//     its page's check.
func BenchmarkIncarnationBracket(b *testing.B) {
	cases := []struct {
		name string
		spec runSpec
	}{
		{"p16-memory", runSpec{Partitions: 16, Pages: 50, PageSize: benchPageSize, Latency: 20 * time.Millisecond, Store: "memory"}},
		{"p16-slowstore", runSpec{Partitions: 16, Pages: 50, PageSize: benchPageSize, Latency: 5 * time.Millisecond, Store: "memory+10ms"}},
	}
	perPage := func(b *testing.B, r runResult) float64 {
		n := r.Incarnation
		if n == nil || n.Pages == 0 {
			b.Fatal("no page fetched with events")
		}
		return float64(n.Bracket) / float64(n.Pages)
	}
	rate := func(r runResult) float64 { return float64(r.Delivered) / r.Wall.Seconds() }
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			plain := runPipeline(b, c.spec) // without an incarnation, once
			old := c.spec
			old.Incarnation, old.EmitBeforeCheck = true, true
			before := runPipeline(b, old) // the previous release's order, once
			spec := c.spec
			spec.Incarnation = true
			r := loop(b, func() runResult { return runPipeline(b, spec) })
			n := r.Incarnation
			b.ReportMetric(perPage(b, r), "incarnation-requests/page")
			b.ReportMetric(perPage(b, before), "incarnation-requests/page-before")
			b.ReportMetric(perPage(b, r)-perPage(b, before), "extra-requests/page")
			b.ReportMetric(float64(n.Startup)/float64(spec.Partitions), "startup-incarnation-requests/partition")
			b.ReportMetric(rate(r), "events/s")
			b.ReportMetric(rate(before), "events/s-before")
			b.ReportMetric(rate(plain), "events/s-without-incarnation")
			b.Logf("bracketed: %d pages with events, %d incarnation requests after the first fetch, %d before, wall %v; previous order: %d pages, %d requests, wall %v; without an incarnation: wall %v",
				n.Pages, n.Bracket, n.Startup, r.Wall.Round(time.Millisecond),
				before.Incarnation.Pages, before.Incarnation.Bracket, before.Wall.Round(time.Millisecond), plain.Wall.Round(time.Millisecond))
		})
	}
}
