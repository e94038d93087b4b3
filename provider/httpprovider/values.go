package httpprovider

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/tidemark/tidemark/internal/coord"
)

// scalarString renders a mapping result that names something (an id, a
// partition, a cursor) as a string: strings (as []byte), numbers and
// timestamps. Other types are refused.
func scalarString(v any) (string, bool) {
	switch t := v.(type) {
	case []byte:
		return string(t), true
	case string:
		return t, true
	case json.Number:
		return t.String(), true
	case int64:
		return strconv.FormatInt(t, 10), true
	case int:
		return strconv.Itoa(t), true
	case uint64:
		return strconv.FormatUint(t, 10), true
	case float64:
		if math.IsNaN(t) || math.IsInf(t, 0) {
			return "", false
		}
		return strconv.FormatFloat(t, 'f', -1, 64), true
	case time.Time:
		return t.UTC().Format(time.RFC3339Nano), true
	}
	return "", false
}

// opaque turns a successor or marker result into opaque bytes (nil for the
// empty string: no successor).
func opaque(v any) ([]byte, bool) {
	if b, ok := v.([]byte); ok {
		if len(b) == 0 {
			return nil, true
		}
		return b, true
	}
	s, ok := scalarString(v)
	if !ok {
		return nil, false
	}
	if s == "" {
		return nil, true
	}
	return []byte(s), true
}

// parsePosition reads an event position of the declared kind: an int64 from
// a number or numeric string; an unsigned decimal of any length from a
// number or a string of digits; a timestamp (RFC 3339 or Unix seconds) in
// Unix nanoseconds; a string (byte-ordered) only from a string.
func parsePosition(kind coord.Kind, v any) (coord.Position, error) {
	switch kind {
	case coord.KindTimestamp:
		if t, ok := v.(time.Time); ok {
			return coord.TimestampPosition(t), nil
		}
		s, ok := scalarString(v)
		if !ok {
			return coord.Position{}, fmt.Errorf("%s is not a timestamp", describe(v, true))
		}
		return coord.ParsePosition(coord.KindTimestamp, s)
	case coord.KindDecimal:
		var s string
		switch t := v.(type) {
		case string:
			s = t
		case []byte:
			s = string(t)
		case json.Number:
			s = t.String()
		case int64, int, uint64:
			s = fmt.Sprint(t)
		case float64:
			if t != math.Trunc(t) || t < 0 || t >= 1<<53 {
				return coord.Position{}, fmt.Errorf("%v is not an exact unsigned integer; map decimal positions from strings", t)
			}
			s = strconv.FormatFloat(t, 'f', 0, 64)
		default:
			return coord.Position{}, fmt.Errorf("%s is not a decimal", describe(v, true))
		}
		p, err := coord.DecimalPosition(s)
		if err != nil {
			return coord.Position{}, fmt.Errorf("%s is not an unsigned decimal integer", quoteCut(s, 80))
		}
		return p, nil
	case coord.KindString:
		switch t := v.(type) {
		case string:
			return coord.StringPosition(t), nil
		case []byte:
			return coord.StringPosition(string(t)), nil
		}
		return coord.Position{}, fmt.Errorf("%s is not a string (string positions are compared byte by byte; map numbers with .string() only if their text sorts in stream order)", describe(v, true))
	}
	n, err := parseIntPosition(v)
	return coord.IntPosition(n), err
}

func parseIntPosition(v any) (int64, error) {
	switch t := v.(type) {
	case int64:
		return t, nil
	case int:
		return int64(t), nil
	case uint64:
		if t > math.MaxInt64 {
			return 0, fmt.Errorf("%d overflows int64", t)
		}
		return int64(t), nil
	case float64:
		if t != math.Trunc(t) || t < math.MinInt64 || t >= math.MaxInt64 {
			return 0, fmt.Errorf("%v is not an int64", t)
		}
		return int64(t), nil
	case json.Number:
		return parseInt(t.String())
	case []byte:
		return parseInt(string(t))
	case string:
		return parseInt(t)
	}
	return 0, fmt.Errorf("%s is not a number", describe(v, true))
}

func parseInt(s string) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s is not an int64", quoteCut(s, 40))
	}
	return n, nil
}

// parseWatermark reads a complete-through watermark of kind.
func parseWatermark(kind coord.Kind, v any) (coord.Watermark, error) {
	if t, ok := v.(time.Time); ok && kind == coord.KindTimestamp {
		return coord.Timestamp(t), nil
	}
	s, ok := scalarString(v)
	if !ok {
		return coord.Watermark{}, fmt.Errorf("%s is not a %s coordinate", describe(v, true), kind)
	}
	return coord.Parse(kind, s)
}

// describe names a mapping result for an error without quoting large or
// sensitive values.
func describe(v any, present bool) string {
	if !present {
		return "null or deleted"
	}
	switch t := v.(type) {
	case []byte:
		return fmt.Sprintf("the string %s", quoteCut(string(t), 40))
	case json.Number:
		return "the number " + t.String()
	case bool:
		return fmt.Sprintf("the boolean %t", t)
	case []any:
		return fmt.Sprintf("an array of %d elements", len(t))
	case map[string]any:
		return fmt.Sprintf("an object with %d keys", len(t))
	}
	return fmt.Sprintf("a %T", v)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// A value a malformed reason quotes is cut short, but only after the
// request's redactor has seen it whole: a credential or cursor cut in the
// middle is no longer any of its forms, and would pass redaction
// (redact.Set replaces whole forms). quoteCut marks the value in the
// reason; cutQuoted, which builtRequest.malformed runs after redaction,
// quotes each marked value and cuts it to its length.
const (
	cutStart = "\x00cut:"
	cutMid   = "\x01"
	cutEnd   = "\x02"
)

var cutMarkers = strings.NewReplacer("\x00", "", "\x01", "", "\x02", "")

// quoteCut marks s to be quoted and cut to n bytes by cutQuoted (the
// marker bytes are removed from s first, so a value cannot forge them).
func quoteCut(s string, n int) string {
	return cutStart + strconv.Itoa(n) + cutMid + cutMarkers.Replace(s) + cutEnd
}

// cutQuoted replaces every value quoteCut marked in text by the value cut
// to its length and quoted (as %q would); run it after redaction.
func cutQuoted(text string) string {
	var sb strings.Builder
	for {
		i := strings.Index(text, cutStart)
		if i < 0 {
			sb.WriteString(text)
			return sb.String()
		}
		rest := text[i+len(cutStart):]
		m := strings.Index(rest, cutMid)
		e := strings.Index(rest, cutEnd)
		n, err := strconv.Atoi(rest[:max(m, 0)])
		if m < 0 || e < m || err != nil {
			// Not a mark (cannot happen: values cannot forge one):
			// drop the rest rather than show it uncut.
			sb.WriteString(text[:i])
			return sb.String()
		}
		sb.WriteString(text[:i])
		sb.WriteString(strconv.Quote(truncate(rest[m+len(cutMid):e], n)))
		text = rest[e+len(cutEnd):]
	}
}
