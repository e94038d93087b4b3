package httpprovider

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"

	"github.com/tidemark/tidemark/internal/coord"
)

// Per-event mappings that only read one field path of the event (`root =
// this`, `root = this.a.b`, `root = this.a.b.string()`) are evaluated on the
// event's structured value directly, without a Bloblang query (which copies
// the message and re-encodes the result). The fast path gives exactly the
// result the mapping would give (TestFastPathMatchesBloblang); whenever it
// cannot be sure (an odd path, a value whose rendering it does not copy),
// it says so and the mapping runs as usual.
//
// Other per-event mappings that read nothing of the message but the event
// itself (no metadata, no content(), no other message of the batch: see
// valueOnly) run as Executor.Query on the event's value, without a message;
// the rest run on a message of the event with the page's metadata.

// fastMappings are the per-event mappings the fast path can evaluate (nil:
// run the mapping), and which per-event mappings read only their value.
type fastMappings struct {
	events, id, position, payload, semantic *plainPath

	valueID, valuePosition, valuePayload, valueSemantic bool
}

func newFastMappings(sources map[string]string) fastMappings {
	get := func(field string) *plainPath {
		if src, ok := sources[field]; ok {
			return parsePlainPath(src)
		}
		return nil
	}
	value := func(field string) bool {
		src, ok := sources[field]
		return ok && valueOnly(src)
	}
	return fastMappings{
		events: get(hpFieldEvents), id: get(hpFieldEventID), position: get(hpFieldEventPosition), payload: get(hpFieldEventPayload), semantic: get(hpFieldEventSemantic),
		valueID: value(hpFieldEventID), valuePosition: value(hpFieldEventPosition), valuePayload: value(hpFieldEventPayload), valueSemantic: value(hpFieldEventSemantic),
	}
}

// messageWords are the Bloblang words that read or write the message beyond
// the value a mapping runs on (metadata, raw content, errors, tracing, other
// messages of the batch) or pull in other files. A mapping holding any of
// them (or an @ metadata reference), anywhere, even inside a string literal,
// runs on a message.
var messageWords = map[string]bool{
	"meta": true, "metadata": true, "root_meta": true, "content": true, "json": true,
	"batch_index": true, "batch_size": true, "tracing_span": true, "tracing_id": true,
	"error": true, "errored": true, "error_source_name": true, "error_source_label": true, "error_source_path": true,
	"from": true, "from_all": true, "import": true,
}

var wordRe = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)

// valueOnly reports whether the mapping src reads nothing but the value it
// runs on, so that Executor.Query on the event's value gives what a query
// on the event's message gives. It errs on the side of false.
func valueOnly(src string) bool {
	if strings.ContainsRune(src, '@') {
		return false
	}
	for _, w := range wordRe.FindAllString(src, -1) {
		if messageWords[w] {
			return false
		}
	}
	return true
}

// plainPath is a recognised field-path mapping.
type plainPath struct {
	path []string
	str  bool // ends in .string()
}

var plainPathRe = regexp.MustCompile(`^\s*root\s*=\s*this((?:\.[A-Za-z_][A-Za-z0-9_]*)*)(\.string\(\))?\s*$`)

// parsePlainPath recognises src; nil when it is anything else.
func parsePlainPath(src string) *plainPath {
	m := plainPathRe.FindStringSubmatch(src)
	if m == nil {
		return nil
	}
	pp := &plainPath{str: m[2] != ""}
	if m[1] != "" {
		pp.path = strings.Split(m[1][1:], ".")
	}
	return pp
}

// lookup returns the value at the path (nil when a field is missing) and
// whether the walk was plain: every step into an object.
func (pp *plainPath) lookup(v any) (any, bool) {
	for _, k := range pp.path {
		switch t := v.(type) {
		case map[string]any:
			v = t[k]
		case nil:
			return nil, false // null.field: leave it to Bloblang
		default:
			return nil, false
		}
	}
	return v, true
}

// id returns the event id when the fast path is exact: a non-empty string,
// a number (its literal: scalarString and .string() agree), or a boolean
// under .string().
func (pp *plainPath) id(v any) (string, bool) {
	x, ok := pp.lookup(v)
	if !ok {
		return "", false
	}
	switch t := x.(type) {
	case string:
		return t, t != ""
	case json.Number:
		return t.String(), t != ""
	case bool:
		if pp.str {
			return strconv.FormatBool(t), true
		}
	}
	return "", false
}

// position returns the event position when the fast path is exact: an
// integral JSON number, or a string (read the same way on both paths).
func (pp *plainPath) position(kind coord.Kind, v any) (coord.Position, bool) {
	if pp.str {
		return coord.Position{}, false
	}
	x, ok := pp.lookup(v)
	if !ok {
		return coord.Position{}, false
	}
	switch t := x.(type) {
	case json.Number:
		switch kind {
		case coord.KindInteger:
			n, err := strconv.ParseInt(t.String(), 10, 64)
			return coord.IntPosition(n), err == nil
		case coord.KindDecimal:
			p, err := coord.DecimalPosition(t.String())
			return p, err == nil
		}
		return coord.Position{}, false
	case string:
		p, err := parsePosition(kind, t)
		return p, err == nil
	}
	return coord.Position{}, false
}

// payload appends the payload bytes to arena and returns them (capacity
// cut to their length, so that nothing appends over the next payload) when
// the fast path is exact. A string is its bytes; without .string(), null, a
// boolean, a number, an object or an array is encoded as Benthos encodes a
// structured message (JSON without HTML escaping, no trailing newline);
// under .string(), a number, a boolean and null are their text, and objects
// and arrays are left to Bloblang.
func (pp *plainPath) payload(arena *[]byte, v any) ([]byte, bool) {
	x, ok := pp.lookup(v)
	if !ok {
		return nil, false
	}
	b := *arena
	if b == nil {
		b = make([]byte, 0, 512) // an empty string's payload is empty, not nil
	}
	start := len(b)
	switch t := x.(type) {
	case string:
		b = append(b, t...)
	case json.Number:
		if !validNumber(string(t)) {
			return nil, false
		}
		b = append(b, t...)
	case nil:
		b = append(b, "null"...)
	case bool:
		b = strconv.AppendBool(b, t)
	case map[string]any, []any:
		if pp.str {
			return nil, false
		}
		if b, ok = appendJSON(b, t); !ok {
			return nil, false
		}
	default:
		return nil, false
	}
	*arena = b
	return b[start:len(b):len(b)], true
}

// events returns the page's event array when the fast path is exact: the
// path leads to an array (the mapping would return a copy of it; the
// provider never modifies it).
func (pp *plainPath) events(doc any) ([]any, bool) {
	if pp.str {
		return nil, false
	}
	x, ok := pp.lookup(doc)
	if !ok {
		return nil, false
	}
	arr, ok := x.([]any)
	return arr, ok
}
