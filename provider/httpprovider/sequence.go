package httpprovider

// A declared request sequence per traversal. Besides its page request a
// source may need:
//
//   - a bootstrap request that opens a traversal and yields its first
//     cursor (Kinesis GetShardIterator before GetRecords), run at the start
//     (empty cursor), and on a restart of the partition (recovery after
//     divergence, reason "resume"; after an expired or invalid cursor,
//     reason "expired") with the durable applied position and its event id;
//   - values pinned by the first answer of a traversal and carried to every
//     later page of it (an etcd revision);
//   - a validation request that may declare a stored cursor invalid before
//     the first fetch from it after start-up (the stream was recreated).
//
// With a bootstrap or pinned values the provider's cursor is an envelope
// (envelopePrefix, then JSON): the source's token, the pinned values, or a
// pending bootstrap with its reason and the applied position it resumes
// after. The core keeps it opaque: the successor a page's promotion writes
// carries the pinned values, so they are as durable as the token. Page
// requests see the token as metadata `cursor` and each pinned value under
// its own name.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/redpanda-data/benthos/v4/public/bloblang"
	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/sdkcoord"
	"github.com/tidemark/tidemark/provider"
)

// Call is one request of a traversal's sequence besides the page request.
// Its fields are interpolated like the page request's (see the package
// documentation) with the metadata the request's own field documents.
type Call struct {
	// URL is required.
	URL *service.InterpolatedString
	// Verb is the HTTP method (zero: GET).
	Verb string
	// Headers are the request's own headers (the page request's are not
	// sent).
	Headers map[string]*service.InterpolatedString
	// Body, when not nil, is sent as the request body.
	Body *service.InterpolatedString
}

func (c Call) withDefaults() Call {
	if c.Verb == "" {
		c.Verb = defaultVerb
	}
	c.Verb = strings.ToUpper(c.Verb)
	return c
}

func (c Call) validate(field string, bad func(string, ...any)) {
	if c.URL == nil {
		bad("%s.url is required", field)
	}
	if !validToken(c.Verb) {
		bad("%s.verb %q is not an HTTP method", field, c.Verb)
	}
	for name := range c.Headers {
		if !validToken(name) {
			bad("%s.headers: %q is not a valid HTTP header name", field, name)
		}
	}
}

// Bootstrap is the request that opens a traversal.
type Bootstrap struct {
	Call
	// Cursor maps the bootstrap's answer to the source's token the first
	// page is fetched with. Required.
	Cursor *bloblang.Executor
}

// Validation is the request that checks a stored cursor.
type Validation struct {
	Call
	// Valid maps the validation's answer to a boolean; false declares the
	// stored cursor invalid. Required.
	Valid *bloblang.Executor
}

// Reasons of a bootstrap (metadata `reason`).
const (
	ReasonStart   = "start"
	ReasonResume  = "resume"
	ReasonExpired = "expired"
)

const metaReason = "reason"

// reservedMeta are the metadata names of the provider itself: pinned
// values may not use them.
var reservedMeta = []string{metaPartition, metaCursor, metaWatermark, metaApplied, metaAppliedID, metaScope, metaAttempt, metaStatus, metaReason}

// envelopePrefix starts every cursor the provider writes when a bootstrap
// or pinned values are configured. A cursor without it (a configured
// start_cursor, an operator's restart cursor, a cursor stored before the
// sequence was configured) is read as a bare token without pinned values.
const envelopePrefix = "tidemark.seq1:"

// envelope is a cursor of a sequenced traversal. Its encoding is
// deterministic (struct fields in order, map keys sorted): the same token
// and values give the same bytes, so an exact replay stays exact.
type envelope struct {
	// Token is the source's token (a token that is not valid UTF-8 is in
	// Bytes instead).
	Token string `json:"t,omitempty"`
	Bytes []byte `json:"tb,omitempty"`
	// Values are the values pinned for the traversal.
	Values map[string]string `json:"v,omitempty"`
	// Boot, when not nil, asks for the bootstrap before the first page.
	Boot *pendingBoot `json:"boot,omitempty"`
}

// pendingBoot is a bootstrap a restart asked for.
type pendingBoot struct {
	Reason    string `json:"reason"`
	Applied   string `json:"applied,omitempty"`
	AppliedID string `json:"applied_id,omitempty"`
}

func (e envelope) token() []byte {
	if len(e.Bytes) > 0 {
		return e.Bytes
	}
	if e.Token == "" {
		return nil
	}
	return []byte(e.Token)
}

func withToken(e envelope, token []byte) envelope {
	e.Token, e.Bytes = "", nil
	if utf8.Valid(token) {
		e.Token = string(token)
	} else {
		e.Bytes = token
	}
	return e
}

func encodeEnvelope(e envelope) []byte {
	b, err := json.Marshal(e)
	if err != nil {
		// Strings, bytes and a map of strings always encode.
		panic(fmt.Sprintf("httpprovider: encoding a cursor envelope: %v", err))
	}
	return append([]byte(envelopePrefix), b...)
}

// sequenced reports whether cursors are envelopes.
func (p *Provider) sequenced() bool { return p.cfg.Bootstrap != nil || p.cfg.Pin != nil }

// openCursor reads the cursor of a fetch: an envelope when the provider is
// sequenced and the cursor is one, else a bare token. A cursor that starts
// like an envelope but does not decode cannot be fetched (*RequestError).
func (p *Provider) openCursor(partition string, cursor []byte) (envelope, error) {
	if !p.sequenced() || !bytes.HasPrefix(cursor, []byte(envelopePrefix)) {
		return withToken(envelope{}, cursor), nil
	}
	var e envelope
	dec := json.NewDecoder(bytes.NewReader(cursor[len(envelopePrefix):]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return envelope{}, &RequestError{Partition: partition, Field: "cursor", Err: fmt.Errorf("cursor %s starts like a sequence envelope but does not decode", reconcile.CursorHash(cursor))}
	}
	return e, nil
}

// checked remembers the partitions whose stored cursor needs no
// validation any more in this process: validated, bootstrapped, started
// from the empty cursor, or restarted.
type checked struct {
	mu    sync.Mutex
	parts map[string]bool
}

func (c *checked) has(partition string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.parts[partition]
}

func (c *checked) mark(partition string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.parts == nil {
		c.parts = map[string]bool{}
	}
	c.parts[partition] = true
}

// Fetch fetches one page of req.Partition from req.Cursor: the bootstrap
// first when the traversal starts there, the validation first when the
// cursor is a stored one not yet checked, then the page. See the package
// documentation for the error classes.
func (p *Provider) Fetch(ctx context.Context, req provider.Request) (provider.Response, error) {
	env, err := p.openCursor(req.Partition, req.Cursor)
	if err != nil {
		return provider.Response{}, err
	}
	token, values := env.token(), env.Values
	reason := ""
	if p.cfg.Bootstrap != nil {
		switch {
		case len(req.Cursor) == 0:
			reason = ReasonStart
		case env.Boot != nil:
			reason = env.Boot.Reason
		}
	}
	switch {
	case reason != "":
		if token, values, err = p.bootstrap(ctx, req, reason, env.Boot); err != nil {
			return provider.Response{}, err
		}
		p.checked.mark(req.Partition)
	case len(req.Cursor) == 0:
		p.checked.mark(req.Partition)
	case p.cfg.Validate != nil && !p.checked.has(req.Partition):
		if err := p.validate(ctx, req, token, values); err != nil {
			return provider.Response{}, err
		}
		p.checked.mark(req.Partition)
	}
	resp, values, err := p.fetchPage(ctx, req, token, values)
	if err != nil {
		return provider.Response{}, err
	}
	if p.sequenced() && resp.Successor != nil {
		resp.Successor = encodeEnvelope(withToken(envelope{Values: values}, resp.Successor))
	}
	return resp, nil
}

// valuesMeta is the pinned values as metadata, in name order.
func valuesMeta(values map[string]string) [][2]string {
	names := make([]string, 0, len(values))
	for k := range values {
		names = append(names, k)
	}
	slices.Sort(names)
	out := make([][2]string, 0, len(names))
	for _, k := range names {
		out = append(out, [2]string{k, values[k]})
	}
	return out
}

// fetchPage fetches the page of token with the pinned values. Without
// values and with a pin mapping, the page's own answer pins them: they are
// set on its message before any other mapping runs, so the whole page reads
// as its successors will. It returns the values the traversal carries on.
func (p *Provider) fetchPage(ctx context.Context, req provider.Request, token []byte, values map[string]string) (provider.Response, map[string]string, error) {
	meta := append(requestMeta(req.Scope, req.Partition, token, sdkcoord.Watermark(req.Watermark), req.Attempt), valuesMeta(values)...)
	rq, err := p.build(req.Partition, req.Cursor, meta, p.pageCall())
	if err != nil {
		return provider.Response{}, nil, err
	}
	res, err := p.do(ctx, rq)
	if err != nil {
		return provider.Response{}, nil, err
	}
	msg, pre, err := p.pageMessage(rq, res)
	if err != nil {
		return provider.Response{}, nil, err
	}
	if p.cfg.Pin != nil && len(values) == 0 {
		if values, err = p.pin(rq, msg, "pin"); err != nil {
			return provider.Response{}, nil, err
		}
		for _, kv := range valuesMeta(values) {
			msg.MetaSetMut(kv[0], kv[1])
		}
	}
	resp, err := p.mapPage(rq, msg, pre)
	if err != nil {
		return provider.Response{}, nil, err
	}
	p.log.Debugf("httpprovider: partition %s: cursor %s: HTTP %d, %d events, successor %s",
		req.Partition, reconcile.CursorHash(req.Cursor), res.status, len(resp.Events), successorHash(resp.Successor))
	return resp, values, nil
}

// bootstrap runs the bootstrap request and returns the first token and the
// values its answer pins (none when the pin mapping gives none there: the
// first page pins them then).
func (p *Provider) bootstrap(ctx context.Context, req provider.Request, reason string, boot *pendingBoot) ([]byte, map[string]string, error) {
	b := p.cfg.Bootstrap
	applied, appliedID := "", ""
	if boot != nil {
		applied, appliedID = boot.Applied, boot.AppliedID
	}
	meta := append(requestMeta(req.Scope, req.Partition, nil, sdkcoord.Watermark(req.Watermark), req.Attempt),
		[2]string{metaApplied, applied}, [2]string{metaAppliedID, appliedID}, [2]string{metaReason, reason})
	rq, err := p.build(req.Partition, req.Cursor, meta, callSpec{field: "bootstrap.", verb: b.Verb, url: b.URL, headers: b.Headers, body: b.Body})
	if err != nil {
		return nil, nil, err
	}
	res, err := p.do(ctx, rq)
	if err != nil {
		return nil, nil, err
	}
	msg, err := p.responseMessage(rq, res)
	if err != nil {
		return nil, nil, err
	}
	v, present, err := runMapping(msg, b.Cursor)
	if err != nil {
		return nil, nil, rq.malformed("bootstrap.cursor mapping failed", err)
	}
	token, ok := opaque(v)
	if !present || !ok || len(token) == 0 {
		return nil, nil, rq.malformed(fmt.Sprintf("bootstrap.cursor returned %s, want the first cursor (a non-empty string)", describe(v, present)), nil)
	}
	rq.red.add(string(token))
	var values map[string]string
	if p.cfg.Pin != nil {
		if values, err = p.pin(rq, msg, "pin (over the bootstrap answer)"); err != nil {
			return nil, nil, err
		}
	}
	p.log.Debugf("httpprovider: partition %s: bootstrap (%s): HTTP %d, first cursor %s", req.Partition, reason, res.status, reconcile.CursorHash(token))
	return token, values, nil
}

// pin runs the pin mapping over an answer: deleted or null means "no
// values yet"; otherwise an object of scalars, none under a reserved name.
func (p *Provider) pin(rq *builtRequest, msg *service.Message, what string) (map[string]string, error) {
	v, present, err := runMapping(msg, p.cfg.Pin)
	if err != nil {
		return nil, rq.malformed(what+" mapping failed", err)
	}
	if !present {
		return nil, nil
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, rq.malformed(fmt.Sprintf("%s returned %s, want an object of values", what, describe(v, present)), nil)
	}
	values := make(map[string]string, len(obj))
	for k, x := range obj {
		if k == "" || slices.Contains(reservedMeta, k) {
			return nil, rq.malformed(fmt.Sprintf("%s returned the value name %q, which the provider's own metadata uses", what, k), nil)
		}
		s, ok := scalarString(x)
		if b, isBool := x.(bool); isBool {
			s, ok = fmt.Sprint(b), true
		}
		if !ok {
			return nil, rq.malformed(fmt.Sprintf("%s: value %q is %s, want a string, number or boolean", what, k, describe(x, true)), nil)
		}
		values[k] = s
	}
	if len(values) == 0 {
		return nil, nil
	}
	return values, nil
}

// validate runs the validation request for a stored cursor. An answer
// whose valid mapping is false is an expired cursor: the partition
// recovers as an expired cursor does.
func (p *Provider) validate(ctx context.Context, req provider.Request, token []byte, values map[string]string) error {
	c := p.cfg.Validate
	meta := append(requestMeta(req.Scope, req.Partition, token, sdkcoord.Watermark(req.Watermark), req.Attempt), valuesMeta(values)...)
	rq, err := p.build(req.Partition, req.Cursor, meta, callSpec{field: "validate.", verb: c.Verb, url: c.URL, headers: c.Headers, body: c.Body})
	if err != nil {
		return err
	}
	res, err := p.do(ctx, rq)
	if err != nil {
		return err
	}
	msg, err := p.responseMessage(rq, res)
	if err != nil {
		return err
	}
	v, present, err := runMapping(msg, c.Valid)
	if err != nil {
		return rq.malformed("validate.valid mapping failed", err)
	}
	valid, ok := v.(bool)
	if !present || !ok {
		return rq.malformed(fmt.Sprintf("validate.valid returned %s, want a boolean", describe(v, present)), nil)
	}
	if !valid {
		p.log.Warnf("httpprovider: partition %s: stored cursor %s declared invalid by the validation request", req.Partition, reconcile.CursorHash(req.Cursor))
		return &provider.ExpiredError{Partition: req.Partition, Reason: "the validation request declared the stored cursor invalid (validate.valid is false)"}
	}
	return nil
}

// restartEnvelope is the restart cursor of a sequenced provider for the
// cursor restart_cursor gave ("" when none): that token without pinned
// values (the traversal pins anew), or, when it is empty and a bootstrap is
// configured, a pending bootstrap with the boundary's applied position.
func (p *Provider) restartEnvelope(token string, from provider.Boundary) []byte {
	if token != "" {
		return encodeEnvelope(withToken(envelope{}, []byte(token)))
	}
	if p.cfg.Bootstrap == nil {
		return nil
	}
	boot := &pendingBoot{Reason: ReasonResume}
	if from.Expired {
		boot.Reason = ReasonExpired
	}
	if from.HasApplied {
		boot.Applied, boot.AppliedID = from.Applied.String(), from.AppliedID
	}
	return encodeEnvelope(envelope{Boot: boot})
}
