package httpprovider

import (
	"encoding/json"
	"slices"
	"strings"
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
//
// Given the field path of the events array (decodeEvents), it also writes
// each element of that array as appendJSON would encode it (the payload of
// the default `root = this`), while decoding it: TestPageDecoderEncodesEvents
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

	// The events array: its path, whether the decoder is inside one of its
	// elements (encoding), the encoding of what is being encoded, the
	// members of the objects being encoded, and for the array found last
	// at the path, the array and the end of each element's encoding in out.
	track    bool
	want     []string
	encoding bool
	out      []byte
	members  []encMember
	events   []any
	ends     []int
}

// encMember is a member of an object being encoded: its key and where its
// value's encoding lies in out.
type encMember struct {
	key        string
	start, end int
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
	return d.decodeEvents(b, false, nil)
}

// decodeEvents parses b and, with track, encodes the elements of the array
// at the field path want (empty: the document itself); payloads gives
// them.
func (d *pageDecoder) decodeEvents(b []byte, track bool, want []string) (v any, ok bool) {
	d.b, d.i, d.depth = b, 0, 0
	d.stack, d.keys = d.stack[:0], d.keys[:0]
	d.track, d.want, d.encoding, d.out, d.members, d.events, d.ends = track, want, false, d.out[:0], d.members[:0], nil, d.ends[:0]
	if d.names == nil {
		d.names = make(map[string]string, 32)
		d.values = make(map[string]any, 256)
	}
	if len(d.values) >= maxValues {
		clear(d.values)
	}
	d.skipSpace()
	at := -1
	if track {
		at = 0
	}
	v, ok = d.value(at)
	if !ok {
		return nil, false
	}
	d.skipSpace()
	if d.i != len(d.b) {
		return nil, false
	}
	return v, true
}

// payloads returns the encodings of the elements of arr, when arr is the
// array the decoder found last at its events path; each is cut to its
// length. The buffer holding them becomes theirs (the decoder takes a new
// one).
func (d *pageDecoder) payloads(arr []any) ([][]byte, bool) {
	if !d.track || len(arr) != len(d.events) || len(arr) == 0 || &arr[0] != &d.events[0] {
		return nil, false
	}
	buf := d.out
	d.out = make([]byte, 0, cap(buf))
	out := make([][]byte, len(arr))
	start := 0
	for i, end := range d.ends {
		out[i] = buf[start:end:end]
		start = end
	}
	return out, true
}

// release drops the decoder's references to the body and the values (the
// decoder goes back to a pool).
func (d *pageDecoder) release() {
	d.b, d.events, d.want, d.track = nil, nil, nil, false
	if cap(d.out) > 1<<20 {
		d.out = nil
	}
}

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

// value decodes the value at d.i; at is how many steps of the events path
// lead to it (-1: it is off the path).
func (d *pageDecoder) value(at int) (any, bool) {
	if d.i >= len(d.b) {
		return nil, false
	}
	switch c := d.b[d.i]; {
	case c == '{':
		return d.object(at)
	case c == '[':
		if d.track && at == len(d.want) && !d.encoding {
			return d.eventsArray()
		}
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
	if d.encoding {
		d.out = append(d.out, lit...)
	}
	return true
}

// eventsArray decodes the array at the events path, encoding each element
// into d.out, one after the other (their ends in d.ends). A later array at
// the same path (a repeated key) replaces it, as in the decoded document.
func (d *pageDecoder) eventsArray() (any, bool) {
	if d.depth++; d.depth > maxFastDepth {
		return nil, false
	}
	d.i++ // [
	base := len(d.stack)
	d.out, d.ends, d.events = d.out[:0], d.ends[:0], nil
	d.skipSpace()
	if d.i < len(d.b) && d.b[d.i] == ']' {
		d.i++
		d.depth--
		return []any{}, true
	}
	d.encoding = true
	defer func() { d.encoding = false }()
	for {
		v, ok := d.value(-1)
		if !ok {
			return nil, false
		}
		d.ends = append(d.ends, len(d.out))
		d.stack = append(d.stack, v)
		more, ok := d.afterElement(']')
		if !ok {
			return nil, false
		}
		if !more {
			break
		}
	}
	arr := make([]any, len(d.stack)-base)
	copy(arr, d.stack[base:])
	clear(d.stack[base:])
	d.stack = d.stack[:base]
	d.events = arr
	d.depth--
	return arr, true
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
	if d.encoding {
		d.out = append(d.out, b[start:i]...)
	}
	return json.Number(b[start:i]), true
}

// str scans a string (see scanStr) and, inside an events element, encodes
// it (keys are encoded by their object). A string without escapes whose
// bytes are all ASCII (no quote, backslash or control character either:
// scanStr refuses those unescaped) is its own encoding: its bytes in the
// body, quotes included, are copied as they are.
func (d *pageDecoder) str(key bool) (any, bool) {
	start := d.i
	v, plain, ok := d.scanStr(key)
	if ok && d.encoding && !key {
		if plain {
			d.out = append(d.out, d.b[start:d.i]...)
		} else {
			d.out = appendJSONString(d.out, v.(string))
		}
	}
	return v, ok
}

// scanStr scans a string. Without escapes, valid UTF-8 without control
// characters is the string itself; with escapes, encoding/json unquotes it.
// Keys are interned. plain is whether the string had no escapes and only
// ASCII bytes (then its quoted bytes in the body are its JSON encoding).
func (d *pageDecoder) scanStr(key bool) (v any, plain, ok bool) {
	b := d.b
	start := d.i + 1
	i := start
	escaped, ascii := false, true
	for {
		if i >= len(b) {
			return nil, false, false
		}
		c := b[i]
		if c == '"' {
			break
		}
		if c < 0x20 {
			return nil, false, false
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
			return nil, false, false
		}
		return s, false, true
	}
	if !ascii && !utf8.Valid(raw) {
		return nil, false, false // encoding/json replaces invalid bytes: let it
	}
	if key {
		if s, ok := d.names[string(raw)]; ok {
			return s, ascii, true
		}
		s := string(raw)
		if len(d.names) < maxNames {
			d.names[s] = s
		}
		return s, ascii, true
	}
	if len(raw) > maxValueBytes {
		return string(raw), ascii, true
	}
	if v, ok := d.values[string(raw)]; ok {
		return v, ascii, true
	}
	v = string(raw)
	d.values[v.(string)] = v
	return v, ascii, true
}

func (d *pageDecoder) object(at int) (any, bool) {
	if d.depth++; d.depth > maxFastDepth {
		return nil, false
	}
	d.i++ // {
	base, kbase, mbase, obase := len(d.stack), len(d.keys), len(d.members), len(d.out)
	d.skipSpace()
	if d.i < len(d.b) && d.b[d.i] == '}' {
		d.i++
		d.depth--
		if d.encoding {
			d.out = append(d.out, "{}"...)
		}
		return map[string]any{}, true
	}
	for {
		if d.i >= len(d.b) || d.b[d.i] != '"' {
			return nil, false
		}
		kv, ok := d.str(true)
		if !ok {
			return nil, false
		}
		k := kv.(string)
		d.skipSpace()
		if d.i >= len(d.b) || d.b[d.i] != ':' {
			return nil, false
		}
		d.i++
		d.skipSpace()
		next := -1
		if at >= 0 && at < len(d.want) && k == d.want[at] {
			next = at + 1
		}
		vstart := len(d.out)
		v, ok := d.value(next)
		if !ok {
			return nil, false
		}
		d.keys = append(d.keys, k)
		d.stack = append(d.stack, v)
		if d.encoding {
			d.members = append(d.members, encMember{k, vstart, len(d.out)})
		}
		more, ok := d.afterElement('}')
		if !ok {
			return nil, false
		}
		if !more {
			break
		}
	}
	m := make(map[string]any, len(d.keys)-kbase)
	for j, k := range d.keys[kbase:] {
		m[k] = d.stack[base+j] // a repeated key: the last one wins, as in encoding/json
	}
	clear(d.stack[base:])
	d.stack, d.keys = d.stack[:base], d.keys[:kbase]
	if d.encoding {
		d.encodeObject(mbase, obase)
	}
	d.depth--
	return m, true
}

// encodeObject replaces the encodings of an object's member values
// (d.out[obase:], in document order, d.members[mbase:]) by the object's
// encoding: members sorted by key, a repeated key once with its last value.
func (d *pageDecoder) encodeObject(mbase, obase int) {
	ms := d.members[mbase:]
	slices.SortStableFunc(ms, func(x, y encMember) int { return strings.Compare(x.key, y.key) })
	tmp := len(d.out)
	d.out = append(d.out, '{')
	first := true
	for j, m := range ms {
		if j+1 < len(ms) && ms[j+1].key == m.key {
			continue // the last of equal keys wins
		}
		if !first {
			d.out = append(d.out, ',')
		}
		first = false
		d.out = appendJSONString(d.out, m.key)
		d.out = append(d.out, ':')
		d.out = append(d.out, d.out[m.start:m.end]...)
	}
	d.out = append(d.out, '}')
	n := copy(d.out[obase:], d.out[tmp:])
	d.out = d.out[:obase+n]
	d.members = d.members[:mbase]
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
		if d.encoding {
			d.out = append(d.out, "[]"...)
		}
		return []any{}, true
	}
	if d.encoding {
		d.out = append(d.out, '[')
	}
	for {
		v, ok := d.value(-1)
		if !ok {
			return nil, false
		}
		d.stack = append(d.stack, v)
		more, ok := d.afterElement(']')
		if !ok {
			return nil, false
		}
		if !more {
			break
		}
		if d.encoding {
			d.out = append(d.out, ',')
		}
	}
	if d.encoding {
		d.out = append(d.out, ']')
	}
	arr := make([]any, len(d.stack)-base)
	copy(arr, d.stack[base:])
	clear(d.stack[base:])
	d.stack = d.stack[:base]
	d.depth--
	return arr, true
}

// afterElement reads what follows an array element or an object member:
// a comma (more follows; the spaces after it are skipped too) or the
// closing byte close (the end). Anything else, or the end of the input, is
// not ok.
func (d *pageDecoder) afterElement(close byte) (more, ok bool) {
	d.skipSpace()
	if d.i >= len(d.b) {
		return false, false
	}
	switch d.b[d.i] {
	case ',':
		d.i++
		d.skipSpace()
		return true, true
	case close:
		d.i++
		return false, true
	}
	return false, false
}
