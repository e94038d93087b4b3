// Package notesprovider is the example of docs/providers.md: a provider
// for a toy HTTP API that serves notebooks of notes, written against the
// public SDK only (package provider and the Benthos service package), as a
// provider in another module would be.
//
// The API (the fake in fake_test.go serves it):
//
//	GET {base_url}/notebooks                          -> {"notebooks": ["work", "home"]}
//	GET {base_url}/notebooks/{nb}/notes?after=N&limit=L
//	    -> {"notes": [{"seq": N+1, "id": "...", "text": "..."}, ...], "next": "N+L"}
//
// A notebook is a partition. Notes have dense sequence numbers from 1; a
// page lists the notes after `after`, and `next` (absent on the last page)
// is the cursor of the next one. A notebook is an archive: its last page
// ends it. Errors: 410 for a cursor the API no longer honours, 429 and 5xx
// for failures worth retrying, any other status for a request that will
// never succeed.
package notesprovider

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/tidemark/tidemark/provider"
	"github.com/tidemark/tidemark/provider/registry"
)

// Name is the provider's config object in the paginated_partitions input.
const Name = "notes"

// Fields are the fields of the `notes` object.
func Fields() []*service.ConfigField {
	return []*service.ConfigField{
		service.NewURLField("base_url").
			Description("The notes API, e.g. `https://notes.example.com/api`. Required: it also marks the notes provider as the one in use."),
		service.NewIntField("page_size").
			Description("Notes per page (the API's `limit`).").
			Default(50),
		service.NewDurationField("timeout").
			Description("Timeout of one request.").
			Default("10s"),
	}
}

func init() {
	registry.MustRegister(registry.Spec{
		Name:        Name,
		Description: "Read the notebooks of a notes API (the example of docs/providers.md).",
		Fields:      Fields(),
		Build: func(conf *service.ParsedConfig, _ registry.Env) (provider.Provider, error) {
			return FromParsed(conf)
		},
	})
}

// FromParsed builds the provider from its object. It sends nothing (the
// input's lint calls it).
func FromParsed(conf *service.ParsedConfig) (*Provider, error) {
	base, err := conf.FieldURL("base_url")
	if err != nil {
		return nil, err
	}
	size, err := conf.FieldInt("page_size")
	if err != nil {
		return nil, err
	}
	if size < 1 {
		return nil, fmt.Errorf("page_size must be at least 1, got %d", size)
	}
	timeout, err := conf.FieldDuration("timeout")
	if err != nil {
		return nil, err
	}
	return New(base.String(), size, timeout), nil
}

// Provider reads a notes API.
type Provider struct {
	base     string
	pageSize int
	client   *http.Client
}

// New returns a provider of the API at base.
func New(base string, pageSize int, timeout time.Duration) *Provider {
	return &Provider{base: base, pageSize: pageSize, client: &http.Client{Timeout: timeout}}
}

// Contract says what the API guarantees: dense positions (seq), a last
// page without successor that ends the notebook, an empty page only at the
// end, no watermark (so no frontier finality), and no way back from an
// expired cursor but an operator.
func (p *Provider) Contract() provider.Contract {
	return provider.Contract{
		EmptyPage:        provider.EmptyEndOfData,
		DensePositions:   true,
		OrderedPositions: true,
		PositionKind:     provider.KindInteger,
		MissingSuccessor: provider.MissingSuccessorEndsTraversal,
		Recovery:         provider.RecoveryPark,
		Finality:         provider.FinalityNone,
	}
}

type page struct {
	Notes []struct {
		Seq  *int64 `json:"seq"`
		ID   string `json:"id"`
		Text string `json:"text"`
	} `json:"notes"`
	Next *string `json:"next"`
}

// Fetch reads the page of req.Cursor (empty: the notebook's start).
func (p *Provider) Fetch(ctx context.Context, req provider.Request) (provider.Response, error) {
	after := "0"
	if len(req.Cursor) > 0 {
		after = string(req.Cursor)
	}
	u := fmt.Sprintf("%s/notebooks/%s/notes?after=%s&limit=%d", p.base, url.PathEscape(req.Partition), url.QueryEscape(after), p.pageSize)
	body, err := p.get(ctx, req.Partition, u)
	if err != nil {
		return provider.Response{}, err
	}
	var pg page
	if err := json.Unmarshal(body, &pg); err != nil {
		return provider.Response{}, &provider.MalformedError{Partition: req.Partition, Reason: "not a page", Err: err}
	}
	if pg.Notes == nil {
		return provider.Response{}, &provider.MalformedError{Partition: req.Partition, Reason: "no notes array"}
	}
	resp := provider.Response{Events: make([]provider.Event, 0, len(pg.Notes))}
	for _, n := range pg.Notes {
		ev := provider.Event{ID: n.ID, Payload: []byte(n.Text)}
		if n.Seq == nil {
			ev.NoPosition = true // the input rejects the page as malformed
		} else {
			ev.Position = provider.IntPosition(*n.Seq)
		}
		resp.Events = append(resp.Events, ev)
	}
	if pg.Next != nil {
		resp.Successor = []byte(*pg.Next) // exactly as the API issued it
	}
	return resp, nil
}

// Partitions lists the notebooks.
func (p *Provider) Partitions(ctx context.Context) ([]provider.Partition, error) {
	body, err := p.get(ctx, "", p.base+"/notebooks")
	if err != nil {
		return nil, err
	}
	var list struct {
		Notebooks []string `json:"notebooks"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, &provider.MalformedError{Reason: "not a notebook list", Err: err}
	}
	out := make([]provider.Partition, len(list.Notebooks))
	for i, nb := range list.Notebooks {
		out[i] = provider.Partition{Name: nb}
	}
	return out, nil
}

// Close releases idle connections.
func (p *Provider) Close(context.Context) error {
	p.client.CloseIdleConnections()
	return nil
}

// get sends one GET and classifies its failures.
func (p *Provider) get(ctx context.Context, part, u string) ([]byte, error) {
	r, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("notes: %w: %w", provider.ErrPermanent, err)
	}
	res, err := p.client.Do(r)
	if err != nil {
		return nil, fmt.Errorf("notes: %w", err) // transient: the input retries
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("notes: reading the body: %w", err) // transient
	}
	switch s := res.StatusCode; {
	case s >= 200 && s < 300:
		return body, nil
	case s == http.StatusGone:
		return nil, &provider.ExpiredError{Partition: part, Reason: "HTTP 410"}
	case s == http.StatusTooManyRequests || s >= 500:
		return nil, fmt.Errorf("notes: HTTP %d", s) // transient
	default:
		return nil, fmt.Errorf("notes: HTTP %d: %w", s, provider.ErrPermanent)
	}
}

var _ interface {
	provider.Provider
	provider.Lister
} = (*Provider)(nil)
