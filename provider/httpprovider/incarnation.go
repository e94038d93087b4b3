package httpprovider

// Source incarnations (docs/design.md#source-incarnations): a request whose
// answer names the incarnation of a partition's source, a value that
// changes when the source is deleted and created again under the same name
// (a database uuid or creation time, a bucket's creation date, a stream's
// creation timestamp, a cluster id). Where the source has none, the input
// writes a marker itself: when the read finds none (its value mapping gives
// nothing, or it answers HTTP 404) the `create` request writes one with a
// fresh random id (metadata `incarnation`), and the read runs again.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/redpanda-data/benthos/v4/public/bloblang"
	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/provider"
)

// Incarnation is the request that names a partition's source incarnation.
type Incarnation struct {
	Call
	// Value maps the answer to the incarnation (a string, number or
	// boolean); deleted() or null: none (then Create runs). Required.
	Value *bloblang.Executor
	// Create, when not nil, writes the marker the read finds none of.
	Create *Call
}

// defaultValidateInterval is how often a running partition checks its
// incarnation when Config.ValidateInterval is zero.
const defaultValidateInterval = time.Minute

const metaIncarnation = "incarnation"

var _ provider.Incarnations = (*Provider)(nil)

// IncarnationCheck implements provider.Incarnations.
func (p *Provider) IncarnationCheck() (bool, time.Duration) {
	return p.cfg.Incarnation != nil, p.cfg.ValidateInterval
}

// Incarnation implements provider.Incarnations: the read, and when it
// finds none and a create request is configured, the create with a fresh
// random id followed by the read again (another instance may have written
// its own marker first; the read names the one that won).
func (p *Provider) Incarnation(ctx context.Context, scope, partition string) (string, error) {
	inc := p.cfg.Incarnation
	if inc == nil {
		return "", errors.New("httpprovider: no incarnation request is configured")
	}
	v, found, err := p.readIncarnation(ctx, scope, partition)
	if err != nil || found || inc.Create == nil {
		if err == nil && !found {
			return "", fmt.Errorf("httpprovider: partition %s: the incarnation request names no incarnation and no incarnation.create request is configured", partition)
		}
		return v, err
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	c := inc.Create
	meta := append(requestMeta(scope, partition, nil, coord.Watermark{}, 0), [2]string{metaIncarnation, id})
	rq, err := p.build(partition, nil, meta, callSpec{field: "incarnation.create.", verb: c.Verb, url: c.URL, headers: c.Headers, body: c.Body})
	if err != nil {
		return "", err
	}
	res, err := p.do(ctx, rq)
	var se *StatusError
	switch {
	case errors.As(err, &se) && se.Status == http.StatusConflict:
		// Another writer created it first: read theirs.
	case err != nil:
		return "", err
	default:
		p.log.Infof("httpprovider: partition %s: no incarnation marker found; created one (HTTP %d)", partition, res.status)
	}
	v, found, err = p.readIncarnation(ctx, scope, partition)
	if err == nil && !found {
		return "", fmt.Errorf("httpprovider: partition %s: the incarnation request names no incarnation, even after incarnation.create", partition)
	}
	return v, err
}

// ReadIncarnation runs only the incarnation read, never the create request
// (it writes nothing): the value, and found false when the source names
// none yet (HTTP 404, or the value mapping gives nothing). For read-only
// callers (`connect tidemark probe`).
func (p *Provider) ReadIncarnation(ctx context.Context, scope, partition string) (string, bool, error) {
	if p.cfg.Incarnation == nil {
		return "", false, errors.New("httpprovider: no incarnation request is configured")
	}
	return p.readIncarnation(ctx, scope, partition)
}

// IncarnationCreates reports whether an incarnation.create request is
// configured (the input writes the marker when the read finds none).
func (p *Provider) IncarnationCreates() bool {
	return p.cfg.Incarnation != nil && p.cfg.Incarnation.Create != nil
}

// readIncarnation runs the read: found is false when the answer is HTTP
// 404 or the value mapping gives nothing.
func (p *Provider) readIncarnation(ctx context.Context, scope, partition string) (string, bool, error) {
	inc := p.cfg.Incarnation
	rq, err := p.build(partition, nil, requestMeta(scope, partition, nil, coord.Watermark{}, 0), callSpec{field: "incarnation.", verb: inc.Verb, url: inc.URL, headers: inc.Headers, body: inc.Body})
	if err != nil {
		return "", false, err
	}
	res, err := p.do(ctx, rq)
	var se *StatusError
	if errors.As(err, &se) && se.Status == http.StatusNotFound {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	// The value may be in a header alone (a HEAD request, an empty 2xx
	// body): an empty body is `this` = null, not a malformed answer.
	msg, err := p.headersMessage(rq, res)
	if err != nil {
		return "", false, err
	}
	v, present, err := runMapping(msg, inc.Value)
	if err != nil {
		return "", false, rq.malformed("incarnation.value mapping failed", err)
	}
	if !present || v == nil {
		return "", false, nil
	}
	s, ok := scalarString(v)
	if b, isBool := v.(bool); isBool {
		s, ok = fmt.Sprint(b), true
	}
	if !ok || s == "" {
		return "", false, rq.malformed(fmt.Sprintf("incarnation.value returned %s, want a non-empty string, number or boolean", describe(v, present)), nil)
	}
	return s, true, nil
}

// Field names of the incarnation request.
const (
	hpFieldIncarnation       = "incarnation"
	hpFieldIncarnationValue  = "value"
	hpFieldIncarnationCreate = "create"
	hpFieldValidateInterval  = "validate_interval"
)

const (
	incarnationMeta       = "`partition` and `scope` (`cursor`, `watermark` empty, `attempt` 0)"
	incarnationCreateMeta = "`partition`, `scope` and `incarnation` (a fresh random id, 32 hex digits, to write as the marker)"
)

// incarnationFields are the fields of the incarnation request and its
// check interval.
func incarnationFields() []*service.ConfigField {
	create := callFields("marker write", incarnationCreateMeta,
		`${COUCHDB_URL}/${! @partition }/_local/tidemark-incarnation`,
		`${! {"incarnation": @incarnation}.format_json(no_indent: true) }`,
		map[string]any{"Content-Type": "application/json"})
	return []*service.ConfigField{
		service.NewObjectField(hpFieldIncarnation, append(callFields("incarnation request", incarnationMeta,
			`${COUCHDB_URL}/${! @partition }/_local/tidemark-incarnation`,
			`{}`,
			map[string]any{"Accept": "application/json"}),
			service.NewBloblangField(hpFieldIncarnationValue).
				Description("Mapping from the incarnation request's answer (a 2xx body with the response headers, `@status` and the request metadata; an empty body, as a `HEAD` request answers, is `this` = null, so a value in a header is read as `root = @\"x-header\"`) to the incarnation: a string, number or boolean that changes when the source is deleted and created again under the same name (stored on the checkpoint only as its hash). `deleted()` or null, or an HTTP 404 answer, means the source names none yet: then `create` runs, if configured, and the request runs again; without `create` that is an error (retried). Anything else is a malformed response.").
				Example(`root = this.incarnation`).
				Example(`root = this.StreamDescriptionSummary.StreamCreationTimestamp`),
			service.NewObjectField(hpFieldIncarnationCreate, create...).
				Description("An optional request that writes the marker the incarnation request reads, for sources that name no incarnation of their own: it runs when the read finds none, with a fresh random id as metadata `incarnation`, then the read runs again (an HTTP 409 answer means another instance wrote its marker first; the read names the one that won). The marker must be deleted with the source and must not travel with its data (CouchDB `_local` documents are neither replicated nor kept when the database is deleted), and it must lie outside every partition's filter: no page request of any partition may list it (an object under a listed prefix or a record of a read stream would be delivered as an event and move its partition's positions). A source with nowhere to write such a marker declares no incarnation and accepts the limits of docs/design.md#source-incarnations: a recreated source is then noticed only where its positions go back, a `validate` request declares the cursor invalid or the old cursor is refused as expired.").
				Optional().
				Example(map[string]any{
					hpFieldURL:     "${COUCHDB_URL}/${! @partition }/_local/tidemark-incarnation",
					hpFieldVerb:    "PUT",
					hpFieldHeaders: map[string]any{"Content-Type": "application/json"},
					hpFieldBody:    `${! {"incarnation": @incarnation}.format_json(no_indent: true) }`,
				}),
		)...).
			Description("An optional request that names the incarnation of a partition's source (docs/design.md#source-incarnations): a database uuid or creation time, a bucket's creation date, a stream's creation timestamp, a cluster id, or a marker the input writes itself (`create`). The input checks it when a partition starts (at start-up, when a lease is taken, after every restart or divergence, after an unpark), before every promotion write (a page is promoted only after a check asked after it arrived) and every `validate_interval` while it reads, and records it on the checkpoint (the first one seen with a write of its own; every promotion carries it). Before every recovery from divergence, an expired cursor or a refused promotion it is checked again, and a response whose positions went back where the contract says they never do (`positions: ordered`) is evidence of a new incarnation too. A changed incarnation is a membership change, never a silent continuation: the old incarnation leaves, the new one joins in a new, unproven membership epoch and is read from the partition's start (the checkpoint is reset with one conditional write that clears its watermark and applied position), and the scalar frontier is withheld until the new incarnation certifies a watermark of its own (a source without watermarks: until a page of it is promoted); `connect tidemark status` says why. A failing request is retried like a page request; the partition does not read until its incarnation is known.").
			Optional().
			Advanced().
			Example(map[string]any{
				hpFieldURL:              "${COUCHDB_URL}/${! @partition }/_local/tidemark-incarnation",
				hpFieldIncarnationValue: `root = this.incarnation`,
				hpFieldIncarnationCreate: map[string]any{
					hpFieldURL:     "${COUCHDB_URL}/${! @partition }/_local/tidemark-incarnation",
					hpFieldVerb:    "PUT",
					hpFieldHeaders: map[string]any{"Content-Type": "application/json"},
					hpFieldBody:    `${! {"incarnation": @incarnation}.format_json(no_indent: true) }`,
				},
			}),
		service.NewDurationField(hpFieldValidateInterval).
			Description("How often a reading partition checks its source incarnation (`incarnation`), besides at its start, when a lease is taken, after every restart or divergence and before every promotion write. Pages read from a source recreated since the last check may be delivered under its old cursor (never promoted: the check before the promotion sees the change; their events are read again from the new incarnation's start, as duplicates); a shorter interval resets the partition sooner, at the cost of one request per partition per interval. Ignored without `incarnation`.").
			Default(defaultValidateInterval.String()).
			Example("30s").
			Advanced(),
	}
}

// incarnationFromParsed reads incarnation and validate_interval into c.
func incarnationFromParsed(conf *service.ParsedConfig, c *Config) error {
	var err error
	if c.ValidateInterval, err = conf.FieldDuration(hpFieldValidateInterval); err != nil {
		return err
	}
	if !conf.Contains(hpFieldIncarnation) {
		return nil
	}
	ic := conf.Namespace(hpFieldIncarnation)
	call, err := callFromParsed(ic)
	if err != nil {
		return err
	}
	inc := &Incarnation{Call: call}
	if inc.Value, err = ic.FieldBloblang(hpFieldIncarnationValue); err != nil {
		return err
	}
	if ic.Contains(hpFieldIncarnationCreate) {
		cc, err := callFromParsed(ic.Namespace(hpFieldIncarnationCreate))
		if err != nil {
			return err
		}
		inc.Create = &cc
	}
	c.Incarnation = inc
	return nil
}

// incarnationDefaults sets the defaults of the incarnation request.
func (c *Config) incarnationDefaults() {
	if c.ValidateInterval == 0 {
		c.ValidateInterval = defaultValidateInterval
	}
	if c.Incarnation != nil {
		inc := *c.Incarnation
		inc.Call = inc.Call.withDefaults()
		if inc.Create != nil {
			cr := inc.Create.withDefaults()
			inc.Create = &cr
		}
		c.Incarnation = &inc
	}
}

// incarnationValidate reports what is wrong with the incarnation request.
func (c Config) incarnationValidate(bad func(string, ...any)) {
	if c.ValidateInterval < 0 {
		bad("validate_interval must not be negative")
	}
	inc := c.Incarnation
	if inc == nil {
		return
	}
	inc.Call.validate("incarnation", bad)
	if inc.Value == nil {
		bad("incarnation.value mapping is required")
	}
	if inc.Create != nil {
		inc.Create.validate("incarnation.create", bad)
	}
}
