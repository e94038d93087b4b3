package httpprovider

import (
	"encoding/json"
	"unicode/utf8"
)

// pageDecoder parses a response body into the values decodeJSON makes
// (map[string]any, []any, string, json.Number, bool, nil), in one pass and
// with fewer allocations than encoding/json: object members and array
// elements are gathered on a reused stack and copied into maps and slices of
// their exact size, and object keys are interned for the page (the events of
// a page repeat the same keys).
//
// It accepts only what it can decode exactly as encoding/json does: one
// JSON value surrounded by whitespace, strings without escapes being valid
// UTF-8 without control characters. A string with escapes is unquoted by
// encoding/json itself. For anything else (invalid JSON, trailing data, very
// deep nesting) it reports false and the caller runs decodeJSON, which gives
// encoding/json's own result or error. TestPageDecoderMatchesEncodingJSON
// pins the equality.
type pageDecoder struct {
	b     []byte
	i     int
	depth int
	stack []any
	keys  []string
	names map[string]string
	// values are boxed short string values seen before: a page repeats
	// them (types, states, names), and a boxed string costs two
	// allocations.
	values map[string]any
}

// Bounds of the interning: the most keys and values kept, the longest
// value interned.
const (
	maxNames      = 4096
	maxValues     = 4096
	maxValueBytes = 32
)

// maxFastDepth bounds the nesting the fast decoder follows (encoding/json
// refuses beyond 10000; deeper documents go to it).
const maxFastDepth = 1000

// decode parses b. ok is false when the caller must use decodeJSON.
func (d *pageDecoder) decode(b []byte) (v any, ok bool) {
	d.b, d.i, d.depth = b, 0, 0
	d.stack, d.keys = d.stack[:0], d.keys[:0]
	if d.names == nil {
		d.names = make(map[string]string, 32)
		d.values = make(map[string]any, 256)
	}
	if len(d.values) >= maxValues {
		clear(d.values)
	}
	d.skipSpace()
	v, ok = d.value()
	if !ok {
		return nil, false
	}
	d.skipSpace()
	if d.i != len(d.b) {
		return nil, false
	}
	return v, true
}

// release drops the decoder's reference to the body (the decoder goes back
// to a pool).
func (d *pageDecoder) release() { d.b = nil }

func (d *pageDecoder) skipSpace() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *pageDecoder) value() (any, bool) {
	if d.i >= len(d.b) {
		return nil, false
	}
	switch c := d.b[d.i]; {
	case c == '{':
		return d.object()
	case c == '[':
		return d.array()
	case c == '"':
		return d.str(false)
	case c == 't':
		return true, d.literal("true")
	case c == 'f':
		return false, d.literal("false")
	case c == 'n':
		return nil, d.literal("null")
	case c == '-' || ('0' <= c && c <= '9'):
		return d.number()
	}
	return nil, false
}

func (d *pageDecoder) literal(lit string) bool {
	if len(d.b)-d.i < len(lit) || string(d.b[d.i:d.i+len(lit)]) != lit {
		return false
	}
	d.i += len(lit)
	return true
}

// number scans a number literal: the JSON grammar, as encoding/json's
// scanner checks it.
func (d *pageDecoder) number() (any, bool) {
	b, i := d.b, d.i
	start := i
	if b[i] == '-' {
		i++
	}
	if i >= len(b) {
		return nil, false
	}
	switch {
	case b[i] == '0':
		i++
	case '1' <= b[i] && b[i] <= '9':
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	default:
		return nil, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return nil, false
		}
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return nil, false
		}
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	}
	d.i = i
	return json.Number(b[start:i]), true
}

// str scans a string. Without escapes, valid UTF-8 without control
// characters is the string itself; with escapes, encoding/json unquotes it.
// Keys are interned.
func (d *pageDecoder) str(key bool) (any, bool) {
	b := d.b
	start := d.i + 1
	i := start
	escaped, ascii := false, true
	for {
		if i >= len(b) {
			return nil, false
		}
		c := b[i]
		if c == '"' {
			break
		}
		if c < 0x20 {
			return nil, false
		}
		if c == '\\' {
			escaped = true
			i += 2 // the escaped character cannot end the string
			continue
		}
		if c >= utf8.RuneSelf {
			ascii = false
		}
		i++
	}
	raw := b[start:i]
	d.i = i + 1
	if escaped {
		var s string
		if err := json.Unmarshal(b[start-1:i+1], &s); err != nil {
			return nil, false
		}
		return s, true
	}
	if !ascii && !utf8.Valid(raw) {
		return nil, false // encoding/json replaces invalid bytes: let it
	}
	if key {
		if s, ok := d.names[string(raw)]; ok {
			return s, true
		}
		s := string(raw)
		if len(d.names) < maxNames {
			d.names[s] = s
		}
		return s, true
	}
	if len(raw) > maxValueBytes {
		return string(raw), true
	}
	if v, ok := d.values[string(raw)]; ok {
		return v, true
	}
	var v any = string(raw)
	d.values[v.(string)] = v
	return v, true
}

func (d *pageDecoder) object() (any, bool) {
	if d.depth++; d.depth > maxFastDepth {
		return nil, false
	}
	d.i++ // {
	base, kbase := len(d.stack), len(d.keys)
	d.skipSpace()
	if d.i < len(d.b) && d.b[d.i] == '}' {
		d.i++
		d.depth--
		return map[string]any{}, true
	}
	for {
		if d.i >= len(d.b) || d.b[d.i] != '"' {
			return nil, false
		}
		k, ok := d.str(true)
		if !ok {
			return nil, false
		}
		d.skipSpace()
		if d.i >= len(d.b) || d.b[d.i] != ':' {
			return nil, false
		}
		d.i++
		d.skipSpace()
		v, ok := d.value()
		if !ok {
			return nil, false
		}
		d.keys = append(d.keys, k.(string))
		d.stack = append(d.stack, v)
		d.skipSpace()
		if d.i >= len(d.b) {
			return nil, false
		}
		if d.b[d.i] == ',' {
			d.i++
			d.skipSpace()
			continue
		}
		if d.b[d.i] != '}' {
			return nil, false
		}
		d.i++
		break
	}
	m := make(map[string]any, len(d.keys)-kbase)
	for j, k := range d.keys[kbase:] {
		m[k] = d.stack[base+j] // a repeated key: the last one wins, as in encoding/json
	}
	clear(d.stack[base:])
	d.stack, d.keys = d.stack[:base], d.keys[:kbase]
	d.depth--
	return m, true
}

func (d *pageDecoder) array() (any, bool) {
	if d.depth++; d.depth > maxFastDepth {
		return nil, false
	}
	d.i++ // [
	base := len(d.stack)
	d.skipSpace()
	if d.i < len(d.b) && d.b[d.i] == ']' {
		d.i++
		d.depth--
		return []any{}, true
	}
	for {
		v, ok := d.value()
		if !ok {
			return nil, false
		}
		d.stack = append(d.stack, v)
		d.skipSpace()
		if d.i >= len(d.b) {
			return nil, false
		}
		if d.b[d.i] == ',' {
			d.i++
			d.skipSpace()
			continue
		}
		if d.b[d.i] != ']' {
			return nil, false
		}
		d.i++
		break
	}
	arr := make([]any, len(d.stack)-base)
	copy(arr, d.stack[base:])
	clear(d.stack[base:])
	d.stack = d.stack[:base]
	d.depth--
	return arr, true
}
