package httpprovider

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/redpanda-data/benthos/v4/public/bloblang"
	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/sdkcoord"
	"github.com/tidemark/tidemark/internal/xmlmap"
	"github.com/tidemark/tidemark/provider"
)

// responseMessage parses a 2xx body and returns the message the mappings
// run against: the JSON (or XML) document with the response headers, the request
// metadata and the status as metadata (later keys win).
func (p *Provider) responseMessage(rq *builtRequest, res *httpResult) (*service.Message, error) {
	msg, _, err := p.parsePage(rq, res, false)
	return msg, err
}

// prePayloads are the payloads of a page's events encoded while the page
// was parsed (the default `root = this` payload of events found at a field
// path): the events array they belong to, and each element's encoding.
type prePayloads struct {
	events   []any
	payloads [][]byte
}

// of returns the payloads when events is the array they were encoded for.
func (pp *prePayloads) of(events []any) ([][]byte, bool) {
	if pp == nil || len(events) == 0 || len(events) != len(pp.events) || &events[0] != &pp.events[0] {
		return nil, false
	}
	return pp.payloads, true
}

// pageMessage is responseMessage for a page of events: with a field-path
// events mapping and the `root = this` payload, the payloads are encoded
// while the body is parsed.
func (p *Provider) pageMessage(rq *builtRequest, res *httpResult) (*service.Message, *prePayloads, error) {
	return p.parsePage(rq, res, true)
}

func (p *Provider) parsePage(rq *builtRequest, res *httpResult, page bool) (*service.Message, *prePayloads, error) {
	if res.tooLarge {
		return nil, nil, rq.malformed(fmt.Sprintf("HTTP %d body is larger than max_response_bytes (%d)", res.status, p.cfg.MaxResponseBytes), nil)
	}
	if len(bytes.TrimSpace(res.body)) == 0 {
		return nil, nil, rq.malformed(fmt.Sprintf("HTTP %d with an empty body", res.status), nil)
	}
	var pre *prePayloads
	var doc any
	var err error
	switch p.cfg.Format {
	case formatXML:
		if doc, err = xmlmap.Parse(res.body, false); err != nil {
			return nil, nil, rq.malformed(fmt.Sprintf("HTTP %d body is not one XML document", res.status), err)
		}
	default:
		d := decoders.Get().(*pageDecoder)
		ev, pl := p.fast.events, p.fast.payload
		track := page && ev != nil && !ev.str && pl != nil && len(pl.path) == 0 && !pl.str
		var ok bool
		if track {
			doc, ok = d.decodeEvents(res.body, true, ev.path)
		} else {
			doc, ok = d.decode(res.body)
		}
		if ok && track && len(d.events) > 0 {
			if payloads, found := d.payloads(d.events); found {
				pre = &prePayloads{events: d.events, payloads: payloads}
			}
		}
		d.release()
		decoders.Put(d)
		if !ok {
			if doc, err = decodeJSON(res.body); err != nil {
				return nil, nil, rq.malformed(fmt.Sprintf("HTTP %d body is not one JSON document", res.status), err)
			}
		}
	}
	return answerMessage(rq, res, doc), pre, nil
}

// answerMessage is the message a mapping of an answer runs against: doc as
// its structured content (`this`), the response headers as metadata,
// lowercased, the request metadata and `@status`.
func answerMessage(rq *builtRequest, res *httpResult, doc any) *service.Message {
	msg := service.NewMessage(nil)
	msg.SetStructured(doc)
	for name, vs := range res.header {
		msg.MetaSetMut(strings.ToLower(name), strings.Join(vs, ", "))
	}
	for _, kv := range rq.meta {
		msg.MetaSetMut(kv[0], kv[1])
	}
	msg.MetaSetMut(metaStatus, int64(res.status))
	return msg
}

// headersMessage is responseMessage for an answer whose value may be in
// its headers alone (the incarnation request: a HEAD, or a 2xx with an
// empty body): an empty body is `this` = null, not a malformed answer; a
// body, when there is one, must parse like any other.
func (p *Provider) headersMessage(rq *builtRequest, res *httpResult) (*service.Message, error) {
	if !res.tooLarge && len(bytes.TrimSpace(res.body)) == 0 {
		return answerMessage(rq, res, nil), nil
	}
	return p.responseMessage(rq, res)
}

// decoders are the fast JSON decoders of responses (pageDecoder).
var decoders = sync.Pool{New: func() any { return new(pageDecoder) }}

// decodeJSON reads exactly one JSON document, keeping numbers exact
// (json.Number), as Benthos itself does.
func decodeJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, errors.New("truncated JSON")
		}
		return nil, err
	}
	var extra json.RawMessage
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("data after the first JSON document")
	}
	return doc, nil
}

// runMapping runs exec against msg. present is false when the mapping
// deletes the root or returns null. A string result comes back as []byte
// (Benthos keeps string and byte results alike, and a null result as the
// bytes "null", which therefore also reads as absent).
func runMapping(msg *service.Message, exec *bloblang.Executor) (v any, present bool, err error) {
	res, err := msg.BloblangQuery(exec)
	if err != nil {
		return nil, false, err
	}
	if res == nil {
		return nil, false, nil
	}
	if res.HasStructured() {
		v, err := res.AsStructured()
		if err != nil {
			return nil, false, err
		}
		return v, v != nil, nil
	}
	b, err := res.AsBytes()
	if err != nil {
		return nil, false, err
	}
	if string(b) == "null" {
		return nil, false, nil
	}
	return b, true, nil
}

// runMappingBytes runs a payload mapping: a string result as is, anything
// else as JSON. present is false when the root is deleted.
func runMappingBytes(msg *service.Message, exec *bloblang.Executor) (b []byte, present bool, err error) {
	res, err := msg.BloblangQuery(exec)
	if err != nil || res == nil {
		return nil, false, err
	}
	b, err = res.AsBytes()
	if err != nil {
		return nil, false, err
	}
	if b == nil {
		return nil, false, errors.New("result cannot be serialized")
	}
	return b, true, nil
}

// runValueMapping runs a per-event mapping that reads only its value
// (valueOnly) with Executor.Query on the event's value, giving what
// runMapping gives on the event's message: a string as []byte, null (and
// the string "null") absent, a mapping that does not assign the root the
// event itself. A failing query runs again on the message, for the
// message's own error.
func runValueMapping(ec *eventContext, exec *bloblang.Executor) (v any, present bool, err error) {
	res, err := exec.Query(ec.raw)
	if err != nil {
		if errors.Is(err, bloblang.ErrRootDeleted) {
			return nil, false, nil
		}
		return runMapping(ec.message(), exec)
	}
	switch t := res.(type) {
	case nil:
		return nil, false, nil
	case string:
		if t == "null" {
			return nil, false, nil
		}
		return []byte(t), true, nil
	case []byte:
		if string(t) == "null" {
			return nil, false, nil
		}
		return t, true, nil
	}
	return res, true, nil
}

// runValueMappingBytes is runMappingBytes for a per-event mapping that
// reads only its value: a string as is, anything else encoded as Benthos
// encodes a structured message (appendJSON where it can, encoding/json
// otherwise), into ec's arena. A failing query, a nil []byte and a value
// encoding/json refuses run again on the message, for its own result.
func runValueMappingBytes(ec *eventContext, exec *bloblang.Executor) (b []byte, present bool, err error) {
	res, err := exec.Query(ec.raw)
	if err != nil {
		if errors.Is(err, bloblang.ErrRootDeleted) {
			return nil, false, nil
		}
		return runMappingBytes(ec.message(), exec)
	}
	switch t := res.(type) {
	case string:
		return []byte(t), true, nil
	case []byte:
		if t != nil {
			return t, true, nil
		}
	default:
		start := len(ec.arena)
		if out, ok := appendJSON(ec.arena, res); ok {
			ec.arena = out
			return out[start:len(out):len(out)], true, nil
		}
		if out := encodeLikeBenthos(res); out != nil {
			return out, true, nil
		}
	}
	return runMappingBytes(ec.message(), exec)
}

// encodeLikeBenthos encodes v as Benthos encodes a structured message: JSON
// without HTML escaping and without the trailing newline; nil when
// encoding/json refuses v.
func encodeLikeBenthos(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil || buf.Len() <= 1 {
		return nil
	}
	return buf.Bytes()[:buf.Len()-1]
}

// mapResponse maps a 2xx response to a provider.Response. Every failure is a
// *provider.MalformedError naming what was wrong.
func (p *Provider) mapResponse(rq *builtRequest, res *httpResult) (provider.Response, error) {
	msg, pre, err := p.pageMessage(rq, res)
	if err != nil {
		return provider.Response{}, err
	}
	return p.mapPage(rq, msg, pre)
}

// mapPage maps the message of a 2xx page (pageMessage) to a
// provider.Response; pre are the payloads encoded with the page (nil: none).
func (p *Provider) mapPage(rq *builtRequest, msg *service.Message, pre *prePayloads) (provider.Response, error) {
	var out provider.Response
	var err error
	m := p.cfg.Mappings

	var events []any
	ok := false
	if f := p.fast.events; f != nil {
		if doc, err := msg.AsStructured(); err == nil {
			events, ok = f.events(doc)
		}
	}
	var v any
	var present bool
	if !ok {
		if v, present, err = runMapping(msg, m.Events); err != nil {
			return out, rq.malformed("events mapping failed", err)
		}
		events, ok = v.([]any)
		if !present || !ok {
			return out, rq.malformed(fmt.Sprintf("events mapping returned %s, want an array", describe(v, present)), nil)
		}
	}
	out.Events = make([]provider.Event, 0, len(events))
	ec := eventContext{page: msg}
	ec.pre, _ = pre.of(events)
	if n := len(events); n > 0 && ec.pre == nil && (p.fast.payload != nil || p.fast.valuePayload) {
		// One buffer for the page's encoded payloads, about the body's size.
		ec.arena = make([]byte, 0, p.arenaHint(n))
	}
	for i, raw := range events {
		ec.raw, ec.set = raw, false
		ev, err := p.mapEvent(&ec, i)
		if err != nil {
			return provider.Response{}, rq.malformed(err.Error(), errors.Unwrap(err))
		}
		out.Events = append(out.Events, ev)
	}
	if len(ec.arena) > 0 {
		p.arenaSize.Store(int64(len(ec.arena)))
	}

	if v, present, err = runMapping(msg, m.Successor); err != nil {
		return provider.Response{}, rq.malformed("successor mapping failed", err)
	} else if present {
		if out.Successor, ok = opaque(v); !ok {
			return provider.Response{}, rq.malformed(fmt.Sprintf("successor is %s, want a string", describe(v, present)), nil)
		}
		rq.red.add(string(out.Successor))
	}
	if m.HasMore != nil {
		out.HasMoreKnown = true
		if out.HasMore, err = mapBool(msg, m.HasMore, hpFieldHasMore); err != nil {
			return provider.Response{}, rq.malformed(err.Error(), errors.Unwrap(err))
		}
	}
	if m.Sealed != nil {
		if out.Sealed, err = mapBool(msg, m.Sealed, hpFieldSealed); err != nil {
			return provider.Response{}, rq.malformed(err.Error(), errors.Unwrap(err))
		}
	}
	if m.Marker != nil {
		if v, present, err = runMapping(msg, m.Marker); err != nil {
			return provider.Response{}, rq.malformed("marker mapping failed", err)
		} else if present {
			if out.Marker, ok = opaque(v); !ok {
				return provider.Response{}, rq.malformed(fmt.Sprintf("marker is %s, want a string or number", describe(v, present)), nil)
			}
		}
	}
	if m.CompleteThrough != nil {
		if v, present, err = runMapping(msg, m.CompleteThrough); err != nil {
			return provider.Response{}, rq.malformed("complete_through mapping failed", err)
		} else if present {
			ct, err := parseWatermark(p.cfg.Coordinate, v)
			if err != nil {
				return provider.Response{}, rq.malformed("complete_through", err)
			}
			out.CompleteThrough = sdkcoord.SDKWatermark(ct)
		}
	}
	return out, nil
}

// mappingError is an error whose text is the reason and whose cause is kept
// for MalformedError.Err.
type mappingError struct {
	reason string
	cause  error
}

func (e *mappingError) Error() string { return e.reason }
func (e *mappingError) Unwrap() error { return e.cause }

// eventContext is one event of a page: its structured value, and the
// message a mapping runs against, made only when a mapping needs it.
type eventContext struct {
	page *service.Message // the page's message: metadata
	raw  any
	msg  *service.Message
	set  bool
	// arena holds the page's encoded payloads and projections, each cut to
	// its length.
	arena []byte
	// pre are the payloads encoded while the page was parsed, by event
	// (nil: none).
	pre [][]byte
}

func (ec *eventContext) message() *service.Message {
	if !ec.set {
		if ec.msg == nil {
			ec.msg = ec.page.Copy()
		}
		ec.msg.SetStructured(ec.raw)
		ec.set = true
	}
	return ec.msg
}

func (p *Provider) mapEvent(ec *eventContext, i int) (provider.Event, error) {
	m := p.cfg.Mappings
	var ev provider.Event
	if f := p.fast.id; f != nil {
		if id, ok := f.id(ec.raw); ok {
			ev.ID = id
		}
	}
	if ev.ID == "" {
		if err := p.mapID(ec, i, &ev); err != nil {
			return ev, err
		}
	}
	fastPos := false
	if f := p.fast.position; f != nil {
		var pos coord.Position
		pos, fastPos = f.position(sdkcoord.Kind(p.cfg.Contract.PositionKind), ec.raw)
		ev.Position = sdkcoord.SDKPosition(pos)
	}
	if !fastPos {
		v, present, err := p.runEvent(ec, m.EventPosition, p.fast.valuePosition)
		if err != nil {
			return ev, &mappingError{fmt.Sprintf("event %d: event_position mapping failed", i), err}
		}
		if !present {
			return ev, &mappingError{fmt.Sprintf("event %d: missing position", i), nil}
		}
		pos, err := parsePosition(sdkcoord.Kind(p.cfg.Contract.PositionKind), v)
		if err != nil {
			return ev, &mappingError{fmt.Sprintf("event %d: position", i), err}
		}
		ev.Position = sdkcoord.SDKPosition(pos)
	}
	fastPayload := false
	if _, isString := ec.raw.(string); ec.pre != nil && !isString {
		// A string event is its own bytes, not its JSON encoding.
		ev.Payload, fastPayload = ec.pre[i], true
	} else if f := p.fast.payload; f != nil {
		ev.Payload, fastPayload = f.payload(&ec.arena, ec.raw)
	}
	if !fastPayload {
		var present bool
		var err error
		if ev.Payload, present, err = p.runEventBytes(ec, m.EventPayload, p.fast.valuePayload); err != nil {
			return ev, &mappingError{fmt.Sprintf("event %d: event_payload mapping failed", i), err}
		} else if !present {
			return ev, &mappingError{fmt.Sprintf("event %d: event_payload mapping deleted the payload", i), nil}
		}
	}
	if m.EventSemantic != nil {
		fastSem := false
		if f := p.fast.semantic; f != nil {
			ev.Semantic, fastSem = f.payload(&ec.arena, ec.raw)
		}
		if !fastSem {
			var present bool
			var err error
			if ev.Semantic, present, err = p.runEventBytes(ec, m.EventSemantic, p.fast.valueSemantic); err != nil {
				return ev, &mappingError{fmt.Sprintf("event %d: event_semantic mapping failed", i), err}
			} else if !present {
				return ev, &mappingError{fmt.Sprintf("event %d: event_semantic mapping deleted the projection", i), nil}
			}
		}
	}
	return ev, nil
}

// runEvent runs a per-event mapping: on the event's value when it reads
// only that, on the event's message otherwise.
func (p *Provider) runEvent(ec *eventContext, exec *bloblang.Executor, valueOnly bool) (any, bool, error) {
	if valueOnly {
		return runValueMapping(ec, exec)
	}
	return runMapping(ec.message(), exec)
}

// runEventBytes is runEvent for the payload and projection mappings.
func (p *Provider) runEventBytes(ec *eventContext, exec *bloblang.Executor, valueOnly bool) ([]byte, bool, error) {
	if valueOnly {
		return runValueMappingBytes(ec, exec)
	}
	return runMappingBytes(ec.message(), exec)
}

// arenaHint is the initial size of a page's payload buffer: the page's
// previous total, or 512 bytes an event.
func (p *Provider) arenaHint(events int) int {
	if h := int(p.arenaSize.Load()); h > 0 {
		return h + h/8
	}
	return 512 * events
}

// mapID runs the event_id mapping.
func (p *Provider) mapID(ec *eventContext, i int, ev *provider.Event) error {
	v, present, err := p.runEvent(ec, p.cfg.Mappings.EventID, p.fast.valueID)
	if err != nil {
		return &mappingError{fmt.Sprintf("event %d: event_id mapping failed", i), err}
	}
	if !present {
		return &mappingError{fmt.Sprintf("event %d: missing id", i), nil}
	}
	id, ok := scalarString(v)
	if !ok {
		return &mappingError{fmt.Sprintf("event %d: id is %s, want a string or number", i, describe(v, present)), nil}
	}
	if id == "" {
		return &mappingError{fmt.Sprintf("event %d: empty id", i), nil}
	}
	ev.ID = id
	return nil
}

func mapBool(msg *service.Message, exec *bloblang.Executor, field string) (bool, error) {
	v, present, err := runMapping(msg, exec)
	if err != nil {
		return false, &mappingError{field + " mapping failed", err}
	}
	if !present {
		return false, nil
	}
	b, ok := v.(bool)
	if !ok {
		return false, &mappingError{fmt.Sprintf("%s is %s, want a boolean", field, describe(v, present)), nil}
	}
	return b, nil
}
