// Package live runs the probe's battery against a live source: it builds
// the http provider from a paginated_partitions config exactly as the
// input builds it (the same spec, FromParsed, rate limits, auth and TLS),
// fetches a bounded number of pages per partition and fills the
// observations internal/probe judges. It reads only: no checkpoint store is
// opened (the config's checkpoint object is never read) and no event is
// emitted anywhere.
package live

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/tidemark/tidemark/input"
	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/probe"
	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/sdkcoord"
	"github.com/tidemark/tidemark/provider"
	"github.com/tidemark/tidemark/provider/httpprovider"
)

// Target is the source a config reads, ready to probe.
type Target struct {
	Scope       string
	Partitions  []string
	Discover    bool
	StartCursor []byte
	// Provider is the http provider built from the config.
	Provider *httpprovider.Provider
	// Declared is the contract the config declares.
	Declared probe.Declared

	closeRes func(context.Context) error
}

// Load reads a config file (environment variables interpolated as `connect
// run` does) and builds the provider of its paginated_partitions input's
// http object, with the config's rate_limit_resources. Warnings of the
// provider (retries) go to logger.
func Load(path string, logger *slog.Logger) (*Target, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	sb := service.NewStreamBuilder()
	if err := sb.SetYAML(string(b)); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	resolved, err := sb.AsYAML()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	top, err := service.NewConfigSpec().Fields(
		service.NewAnyField("input").Optional(),
		service.NewAnyListField("rate_limit_resources").Optional(),
	).ParseYAML(resolved, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	in, err := top.FieldAny("input")
	if err != nil {
		return nil, fmt.Errorf("%s: no input: %w", path, err)
	}
	inMap, _ := in.(map[string]any)
	pp, ok := inMap["paginated_partitions"]
	if !ok {
		return nil, fmt.Errorf("%s: the input is not paginated_partitions", path)
	}
	ppJSON, err := json.Marshal(pp)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	conf, err := input.Spec().ParseYAML(string(ppJSON), nil)
	if err != nil {
		return nil, fmt.Errorf("%s: paginated_partitions: %w", path, err)
	}
	if !conf.Contains("http") {
		return nil, fmt.Errorf("%s: the probe reads the http provider; this input has none", path)
	}

	rb := service.NewResourceBuilder()
	rb.SetLogger(logger)
	if top.Contains("rate_limit_resources") {
		rls, err := top.FieldAnyList("rate_limit_resources")
		if err != nil {
			return nil, fmt.Errorf("%s: rate_limit_resources: %w", path, err)
		}
		for _, rl := range rls {
			v, err := rl.FieldAny()
			if err != nil {
				return nil, err
			}
			j, err := json.Marshal(v)
			if err != nil {
				return nil, err
			}
			if err := rb.AddRateLimitYAML(string(j)); err != nil {
				return nil, fmt.Errorf("%s: rate_limit_resources: %w", path, err)
			}
		}
	}
	res, closeRes, err := rb.Build()
	if err != nil {
		return nil, fmt.Errorf("%s: resources: %w", path, err)
	}
	t := &Target{closeRes: closeRes}
	if err := t.read(conf, res); err != nil {
		_ = closeRes(context.Background())
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

func (t *Target) read(conf *service.ParsedConfig, res *service.Resources) error {
	var err error
	if t.Scope, err = conf.FieldString("scope"); err != nil {
		return err
	}
	if t.Partitions, err = conf.FieldStringList("partitions"); err != nil {
		return err
	}
	if t.Discover, err = conf.FieldBool("discover"); err != nil {
		return err
	}
	start, err := conf.FieldString("start_cursor")
	if err != nil {
		return err
	}
	if start != "" {
		t.StartCursor = []byte(start)
	}
	hc := conf.Namespace("http")
	if t.Provider, err = httpprovider.FromParsed(hc, res, res.Logger()); err != nil {
		return fmt.Errorf("http: %w", err)
	}
	t.Declared = probe.Declared{
		Contract:        t.Provider.Contract(),
		Coordinate:      t.Provider.Coordinate(),
		CompleteThrough: hc.Contains("complete_through"),
		Marker:          hc.Contains("marker"),
		HasMore:         hc.Contains("has_more"),
		Validate:        hc.Contains("validate"),
	}
	t.Declared.Incarnation, _ = t.Provider.IncarnationCheck()
	t.Declared.IncarnationCreate = t.Provider.IncarnationCreates()
	return nil
}

// Close releases the provider and the resources.
func (t *Target) Close(ctx context.Context) error {
	return errors.Join(t.Provider.Close(ctx), t.closeRes(ctx))
}

// PartitionsToProbe are the partitions named (when any), else the
// config's, else, with discover, the provider's listing.
func (t *Target) PartitionsToProbe(ctx context.Context, named []string) ([]string, error) {
	if len(named) > 0 {
		return named, nil
	}
	if len(t.Partitions) > 0 || !t.Discover {
		if len(t.Partitions) == 0 {
			return nil, errors.New("the config names no partitions")
		}
		return t.Partitions, nil
	}
	ps, err := t.Provider.Partitions(ctx)
	if err != nil {
		return nil, fmt.Errorf("discovering partitions: %w", err)
	}
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Name
	}
	return out, nil
}

// Probe runs the battery for one partition: a walk of at most pages pages
// from the start cursor, the first and the last cursor of that walk
// fetched again, a second walk of as many pages, the validate request on
// the first page's successor, and the incarnation request's read before
// walk 1 and after everything else (never its create request: the probe
// writes nothing). Every request has the provider's own timeout and
// retries; ctx bounds the whole.
func (t *Target) Probe(ctx context.Context, partition string, pages int) probe.Observation {
	o := probe.Observation{Partition: partition, Limit: pages}
	o.Incarnation = t.incarnation(ctx, partition)
	o.First = t.walk(ctx, partition, pages)
	if n := len(o.First.Pages); n > 0 {
		for _, i := range []int{0, n - 1} {
			if i == n-1 && n == 1 && len(o.Retries) > 0 {
				break
			}
			p, err := t.fetch(ctx, partition, o.First.Pages[i].Cursor, coord.Watermark{}, 1)
			o.Retries = append(o.Retries, probe.Retry{Of: i, Page: p, Err: err})
		}
		o.Second = t.walk(ctx, partition, n)
		if s := o.First.Pages[0].Response.Successor; len(s) > 0 && t.Declared.Validate {
			o.Validation = probe.Validation{Ran: true, Cursor: s, Err: t.Provider.ValidateCursor(ctx, partition, s)}
		}
		o.Restart = t.restart(ctx, partition, o.First)
	}
	o.IncarnationAfter = t.incarnation(ctx, partition)
	return o
}

// incarnation runs the incarnation request's read, never its create
// request (the probe writes nothing); only the value's hash is kept.
func (t *Target) incarnation(ctx context.Context, partition string) probe.IncarnationRead {
	if !t.Declared.Incarnation {
		return probe.IncarnationRead{}
	}
	v, found, err := t.Provider.ReadIncarnation(ctx, t.Scope, partition)
	return probe.IncarnationRead{Ran: true, Found: found, Hash: reconcile.IncarnationHash(v), Err: err}
}

// restart asks the provider for the restart cursor of the boundary after
// the walk's first page (its greatest position and the id of its last
// event, its complete_through), as the input does after divergence, and
// fetches one page from it. nil when the recovery is park or the walk is
// too short to compare.
func (t *Target) restart(ctx context.Context, partition string, w probe.Walk) *probe.Restart {
	if t.Declared.Contract.Recovery == provider.RecoveryPark || len(w.Pages) < 2 {
		return nil
	}
	first := w.Pages[0].Response
	if len(first.Events) == 0 {
		return nil
	}
	applied := first.Events[0].Position
	for _, e := range first.Events[1:] {
		applied = coord.MaxPosition(applied, e.Position)
	}
	r := &probe.Restart{After: 0, Applied: applied, Watermark: first.CompleteThrough}
	cursor, err := t.Provider.RestartCursor(ctx, provider.Boundary{
		Partition: partition, Watermark: sdkcoord.SDKWatermark(first.CompleteThrough),
		Applied: sdkcoord.SDKPosition(applied), HasApplied: true, AppliedID: first.Events[len(first.Events)-1].ID,
	})
	if err != nil {
		r.Err = err
		return r
	}
	r.Cursor = cursor
	if len(cursor) == 0 {
		return r
	}
	r.Page, r.Err = t.fetch(ctx, partition, cursor, first.CompleteThrough, 0)
	return r
}

func (t *Target) fetch(ctx context.Context, partition string, cursor []byte, wm coord.Watermark, attempt int) (probe.Page, error) {
	resp, err := t.Provider.Fetch(ctx, provider.Request{Scope: t.Scope, Partition: partition, Cursor: cursor, Watermark: sdkcoord.SDKWatermark(wm), Attempt: attempt})
	if err != nil {
		return probe.Page{}, err
	}
	return probe.Page{Cursor: bytes.Clone(cursor), Response: reconcile.FromProvider(resp), Token: t.Provider.SourceToken(partition, resp.Successor)}, nil
}

// walk follows successors from the start cursor for at most limit pages,
// passing the greatest complete_through seen as the request's watermark
// (what the input passes once those pages are promoted).
func (t *Target) walk(ctx context.Context, partition string, limit int) probe.Walk {
	var w probe.Walk
	cursor := t.StartCursor
	var wm coord.Watermark
	for len(w.Pages) < limit {
		p, err := t.fetch(ctx, partition, cursor, wm, 0)
		if err != nil {
			w.End, w.Err = probe.EndError, err
			return w
		}
		w.Pages = append(w.Pages, p)
		r := p.Response
		if ct := r.CompleteThrough; !ct.IsZero() && (wm.IsZero() || wm.Less(ct)) {
			wm = ct
		}
		switch {
		case r.Sealed:
			w.End = probe.EndSealed
			return w
		case len(r.Successor) == 0:
			w.End = probe.EndNoSuccessor
			return w
		case bytes.Equal(r.Successor, cursor):
			w.End = probe.EndHead
			return w
		}
		cursor = r.Successor
	}
	w.End = probe.EndLimit
	return w
}
