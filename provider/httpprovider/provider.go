package httpprovider

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/redact"
	"github.com/tidemark/tidemark/internal/sdkcoord"
	"github.com/tidemark/tidemark/provider"
)

// Provider is the http provider. It is safe for concurrent use; the input
// keeps at most one Fetch in flight per partition.
type Provider struct {
	cfg     Config
	expired map[int]bool
	client  *http.Client
	auth    *authenticator
	fast    fastMappings
	// arenaSize is the size of the last page's payload buffer (the hint
	// for the next).
	arenaSize atomic.Int64
	log       *service.Logger
	// checked: partitions whose stored cursor needs no validation.
	checked checked
	// red is the redaction layer's set of credentials (Redactor).
	red *redact.Set
	// userinfos are the user info of the proxy and token URLs, registered
	// in red again with every request built.
	userinfos []*url.Userinfo
	// limiter limits each partition's requests (partition_rate_limit;
	// nil: none); shared coalesces identical incarnation reads (limits.go).
	limiter *partitionLimiter
	shared  sharedRequests
}

// Redactor is the set of credentials the provider sends (configured
// secrets, and tokens and Authorization values as they become known). The
// input redacts its logs and park reasons with it (and its cursors); every
// error of the provider is redacted with it already.
func (p *Provider) Redactor() *redact.Set { return p.red }

var (
	_ provider.Provider  = (*Provider)(nil)
	_ provider.Lister    = (*Provider)(nil)
	_ provider.Restarter = (*Provider)(nil)
)

// Contract is the declared contract.
func (p *Provider) Contract() provider.Contract { return p.cfg.Contract }

// Coordinate is the kind of the watermarks (and, for timestamps, of the
// positions) this provider returns. provider.Contract does not carry it.
func (p *Provider) Coordinate() coord.Kind { return p.cfg.Coordinate }

// Close releases idle connections.
func (p *Provider) Close(context.Context) error {
	p.client.CloseIdleConnections()
	return nil
}

// Metadata keys of the request interpolations and the response mappings.
const (
	metaPartition = "partition"
	metaCursor    = "cursor"
	metaWatermark = "watermark"
	metaApplied   = "applied"
	metaAppliedID = "applied_id"
	metaScope     = "scope"
	metaAttempt   = "attempt"
	metaStatus    = "status"
)

// requestMeta is the metadata a request is interpolated with, in the order
// it is set on a response message.
func requestMeta(scope, partition string, cursor []byte, wm coord.Watermark, attempt int) [][2]string {
	w := ""
	if !wm.IsZero() {
		w = wm.String()
	}
	return [][2]string{
		{metaPartition, partition},
		{metaCursor, string(cursor)},
		{metaWatermark, w},
		{metaScope, scope},
		{metaAttempt, strconv.Itoa(attempt)},
	}
}

// appliedMeta is the durable applied position of a boundary and the id of
// the event there, as metadata (empty strings when unknown).
func appliedMeta(from provider.Boundary) [][2]string {
	applied, id := "", ""
	if from.HasApplied {
		applied, id = from.Applied.String(), from.AppliedID
	}
	return [][2]string{{metaApplied, applied}, {metaAppliedID, id}}
}

func metaMessage(meta [][2]string) *service.Message {
	m := service.NewMessage(nil)
	for _, kv := range meta {
		m.MetaSetMut(kv[0], kv[1])
	}
	return m
}

func successorHash(s []byte) string {
	if len(s) == 0 {
		return "none"
	}
	return reconcile.CursorHash(s)
}

// discoveryLabel names partition discovery where errors name a partition.
const discoveryLabel = "(partitions_url)"

// Partitions lists the partitions from partitions_url (partitions_verb and
// partitions_body, with the configured headers and authentication, retried
// like Fetch), following partitions_successor page by page when it is set.
// It returns ErrNoDiscovery when partitions_url is not configured, and
// *provider.MalformedError when the pages do not give a non-empty list of
// distinct, non-empty names. An entry is a name (string or number) or an
// object {"name": ..., "parents": [...]} naming the partitions it descends
// from.
func (p *Provider) Partitions(ctx context.Context) ([]provider.Partition, error) {
	if p.cfg.PartitionsURL == nil {
		return nil, ErrNoDiscovery
	}
	var names []provider.Partition
	seen := map[string]bool{}
	var cursor []byte
	visited := map[string]bool{}
	for page := 0; ; page++ {
		if page >= maxPartitionPages {
			return nil, &provider.MalformedError{Partition: discoveryLabel, Reason: fmt.Sprintf("the partition list has more than %d pages", maxPartitionPages)}
		}
		meta := requestMeta("", "", cursor, coord.Watermark{}, 0)
		headers := p.cfg.Headers
		if p.cfg.PartitionsHeaders != nil {
			headers = p.cfg.PartitionsHeaders
		}
		rq, err := p.build(discoveryLabel, cursor, meta, callSpec{field: "partitions_", verb: p.cfg.PartitionsVerb, url: p.cfg.PartitionsURL, headers: headers, body: p.cfg.PartitionsBody})
		if err != nil {
			return nil, err
		}
		res, err := p.do(ctx, rq)
		if err != nil {
			return nil, err
		}
		msg, err := p.responseMessage(rq, res)
		if err != nil {
			return nil, err
		}
		v, present, err := runMapping(msg, p.cfg.PartitionsMapping)
		if err != nil {
			return nil, rq.malformed("partitions_mapping failed", err)
		}
		arr, ok := v.([]any)
		if !present || !ok {
			return nil, rq.malformed(fmt.Sprintf("partitions_mapping returned %s, want an array of names", describe(v, present)), nil)
		}
		for i, e := range arr {
			part, why := listedPartition(e)
			if why != "" {
				return nil, rq.malformed(fmt.Sprintf("partition %d is %s, %s", i, describe(e, true), why), nil)
			}
			if seen[part.Name] {
				return nil, rq.malformed(fmt.Sprintf("partition %q is listed twice", part.Name), nil)
			}
			seen[part.Name] = true
			names = append(names, part)
		}
		if p.cfg.PartitionsSuccessor == nil {
			break
		}
		next, present, err := runMapping(msg, p.cfg.PartitionsSuccessor)
		if err != nil {
			return nil, rq.malformed("partitions_successor failed", err)
		}
		if !present || next == nil {
			break
		}
		c, ok := opaque(next)
		if !ok {
			return nil, rq.malformed(fmt.Sprintf("partitions_successor is %s, want a string", describe(next, present)), nil)
		}
		if len(c) == 0 {
			break
		}
		if visited[string(c)] {
			return nil, rq.malformed("partitions_successor returned a cursor of the list a second time", nil)
		}
		visited[string(c)] = true
		cursor = c
	}
	if len(names) == 0 {
		return nil, &provider.MalformedError{Partition: discoveryLabel, Reason: "partitions_mapping returned no partitions"}
	}
	return names, nil
}

// listedPartition reads one entry of partitions_mapping's array: a name,
// or an object with a name and its parents. why is not empty when the
// entry is not one of those.
func listedPartition(e any) (provider.Partition, string) {
	const want = "want a non-empty string or number, or an object with a non-empty name and an array of parents"
	if obj, ok := e.(map[string]any); ok {
		name, ok := scalarString(obj["name"])
		if !ok || name == "" {
			return provider.Partition{}, want
		}
		part := provider.Partition{Name: name}
		switch ps := obj["parents"].(type) {
		case nil:
		case []any:
			for _, pv := range ps {
				pn, ok := scalarString(pv)
				if !ok || pn == "" || pn == name {
					return provider.Partition{}, "with a parent that is not a non-empty name other than its own"
				}
				part.Parents = append(part.Parents, pn)
			}
		default:
			return provider.Partition{}, want
		}
		return part, ""
	}
	name, ok := scalarString(e)
	if !ok || name == "" {
		return provider.Partition{}, want
	}
	return provider.Partition{Name: name}, ""
}

// maxPartitionPages bounds a paginated partition list (a list that never
// ends is a malformed answer, not a reason to loop).
const maxPartitionPages = 10000

// RestartCursor returns the stable-boundary cursor of contract.restart_cursor
// for the partition, interpolated with the partition, its durable watermark,
// its durable applied position (metadata `applied`, empty when none) and
// the id of the event there (`applied_id`, empty when unknown) (nil, the
// partition's start, when restart_cursor is empty or not set). A failing
// interpolation is a *RequestError.
//
// With a bootstrap or pin mapping configured the cursor is an envelope:
// restart_cursor's token without pinned values, or, when restart_cursor
// gives the empty string and a bootstrap is configured, a pending bootstrap
// with reason `expired` (from.Expired) or `resume` and the boundary's
// applied position and event id. The cursor a restart moves to is never
// validated (it is not a stored one).
func (p *Provider) RestartCursor(_ context.Context, from provider.Boundary) ([]byte, error) {
	partition, durable := from.Partition, from.Watermark
	p.checked.mark(partition)
	s := ""
	if p.cfg.RestartCursor != nil {
		meta := append(requestMeta("", partition, nil, sdkcoord.Watermark(durable), 0), appliedMeta(from)...)
		var err error
		if s, err = p.cfg.RestartCursor.TryString(metaMessage(meta)); err != nil {
			return nil, &RequestError{Partition: partition, Field: "contract.restart_cursor", Err: err}
		}
	}
	cursor := []byte(s)
	if p.sequenced() {
		cursor = p.restartEnvelope(s, from)
	}
	if len(cursor) == 0 {
		return nil, nil
	}
	p.log.Infof("httpprovider: partition %s: restart cursor %s (durable watermark %s)", partition, reconcile.CursorHash(cursor), durable)
	return cursor, nil
}
