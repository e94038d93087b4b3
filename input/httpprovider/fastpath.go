package httpprovider

import (
	"bytes"
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
// cannot be sure (a number where .string() formats, an odd path), it says so
// and the mapping runs as usual.

// fastMappings are the per-event mappings the fast path can evaluate (nil:
// run the mapping).
type fastMappings struct {
	events, id, position, payload, semantic *plainPath
}

func newFastMappings(sources map[string]string) fastMappings {
	get := func(field string) *plainPath {
		if src, ok := sources[field]; ok {
			return parsePlainPath(src)
		}
		return nil
	}
	return fastMappings{events: get(hpFieldEvents), id: get(hpFieldEventID), position: get(hpFieldEventPosition), payload: get(hpFieldEventPayload), semantic: get(hpFieldEventSemantic)}
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

// id returns the event id when the fast path is exact: a string value.
func (pp *plainPath) id(v any) (string, bool) {
	x, ok := pp.lookup(v)
	if !ok {
		return "", false
	}
	s, ok := x.(string)
	return s, ok && s != ""
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

// payload returns the payload bytes when the fast path is exact: `root =
// this` (or a path to an object or array), encoded as Benthos encodes a
// structured message (JSON without HTML escaping, no trailing newline).
func (pp *plainPath) payload(buf *bytes.Buffer, v any) ([]byte, bool) {
	if pp.str {
		return nil, false
	}
	x, ok := pp.lookup(v)
	if !ok {
		return nil, false
	}
	switch x.(type) {
	case map[string]any, []any:
	default:
		return nil, false
	}
	out, ok := appendJSON(make([]byte, 0, 512), x)
	return out, ok
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
