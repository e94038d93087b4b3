// Package linkheader parses the value of an HTTP Link header (RFC 8288,
// section 3) and registers the Bloblang function tidemark_parse_link_header
// that examples use to follow rel="next" instead of regular expressions.
package linkheader

import (
	"errors"
	"fmt"
	"strings"

	"github.com/redpanda-data/benthos/v4/public/bloblang"
)

// Link is one link-value of a Link header.
type Link struct {
	// Target is the URI-Reference between < and >, as written (relative
	// references are not resolved: the header's base is the request's
	// URL, which the caller has).
	Target string
	// Rels are the link relation types of the rel parameter, lower-cased
	// (they compare case-insensitively); empty without rel.
	Rels []string
	// Params are the other parameters, names lower-cased, quoted values
	// unquoted; the first occurrence of a name wins (RFC 8288 section 3).
	Params map[string]string
}

// MaxLinks bounds the links one header value may hold.
const MaxLinks = 256

// Parse parses a Link header field value: link-values separated by
// commas, each `<target>` followed by `;`-separated parameters whose
// values are tokens or quoted strings (commas and semicolons inside quotes
// or inside the target are part of them).
func Parse(value string) ([]Link, error) {
	var links []Link
	s := value
	for {
		s = strings.TrimLeft(s, " \t,")
		if s == "" {
			return links, nil
		}
		if len(links) == MaxLinks {
			return nil, fmt.Errorf("link header: more than %d links", MaxLinks)
		}
		if s[0] != '<' {
			return nil, fmt.Errorf("link header: a link-value starts with '<', found %q", prefix(s))
		}
		end := strings.IndexByte(s, '>')
		if end < 0 {
			return nil, errors.New("link header: unterminated '<' target")
		}
		l := Link{Target: strings.TrimSpace(s[1:end]), Params: map[string]string{}}
		s = s[end+1:]
		for {
			s = strings.TrimLeft(s, " \t")
			if s == "" || s[0] == ',' {
				break
			}
			if s[0] != ';' {
				return nil, fmt.Errorf("link header: expected ';' or ',' after a link's target or parameter, found %q", prefix(s))
			}
			s = strings.TrimLeft(s[1:], " \t")
			i := strings.IndexAny(s, "=;, \t")
			if i < 0 {
				i = len(s)
			}
			name := strings.ToLower(s[:i])
			s = strings.TrimLeft(s[i:], " \t")
			if name == "" {
				if s != "" && s[0] == ';' {
					continue // an empty parameter: `;;`
				}
				return nil, fmt.Errorf("link header: a parameter without a name before %q", prefix(s))
			}
			val := ""
			if s != "" && s[0] == '=' {
				var err error
				if val, s, err = paramValue(strings.TrimLeft(s[1:], " \t")); err != nil {
					return nil, err
				}
			}
			if _, seen := l.Params[name]; seen || name == "rel" && l.Rels != nil {
				continue
			}
			if name == "rel" {
				l.Rels = strings.Fields(strings.ToLower(val))
				if l.Rels == nil {
					l.Rels = []string{}
				}
				continue
			}
			l.Params[name] = val
		}
		links = append(links, l)
	}
}

// paramValue reads a token or a quoted string at the start of s and
// returns it with the rest.
func paramValue(s string) (val, rest string, err error) {
	if s == "" || s[0] != '"' {
		i := strings.IndexAny(s, ";, \t")
		if i < 0 {
			i = len(s)
		}
		return s[:i], s[i:], nil
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			if i+1 < len(s) {
				i++
				b.WriteByte(s[i])
			}
		case '"':
			return b.String(), s[i+1:], nil
		default:
			b.WriteByte(c)
		}
	}
	return "", "", errors.New("link header: unterminated quoted string")
}

func prefix(s string) string {
	if len(s) > 20 {
		return s[:20] + "..."
	}
	return s
}

// ByRel maps each relation type to the target of the first link that
// has it.
func ByRel(links []Link) map[string]string {
	out := map[string]string{}
	for _, l := range links {
		for _, r := range l.Rels {
			if _, ok := out[r]; !ok {
				out[r] = l.Target
			}
		}
	}
	return out
}

// FunctionName is the Bloblang function's name: tidemark's own, so that it
// never shadows a function of Redpanda Connect.
const FunctionName = "tidemark_parse_link_header"

func init() {
	spec := bloblang.NewPluginSpec().
		Category("Parsing").
		Description("Parses an HTTP `Link` header value (RFC 8288) into an object that maps each link relation type (lower-cased) to the target of the first link that has it, so that a mapping follows `rel=\"next\"` as `tidemark_parse_link_header(@link).next`. Targets are returned as written: a relative reference is relative to the request's URL. A value that is null or empty gives `{}`; one that is not a Link header is an error.").
		Param(bloblang.NewAnyParam("value").Description("The header's value (a string, or null when the response has none)."))
	spec = spec.Example("Follow the next page", `root.next = tidemark_parse_link_header(this.link).next`,
		[2]string{`{"link":"<https://api.example.com/items?page=3>; rel=\"next\", <https://api.example.com/items?page=9>; rel=\"last\""}`, `{"next":"https://api.example.com/items?page=3"}`},
		[2]string{`{"link":null}`, `{"next":null}`})
	if err := bloblang.RegisterFunctionV2(FunctionName, spec, func(args *bloblang.ParsedParams) (bloblang.Function, error) {
		v, err := args.Get("value")
		if err != nil {
			return nil, err
		}
		return func() (any, error) {
			var s string
			switch t := v.(type) {
			case nil:
				return map[string]any{}, nil
			case string:
				s = t
			case []byte:
				s = string(t)
			default:
				return nil, fmt.Errorf("%s: expected a string, got %T", FunctionName, v)
			}
			links, err := Parse(s)
			if err != nil {
				return nil, err
			}
			out := map[string]any{}
			for r, t := range ByRel(links) {
				out[r] = t
			}
			return out, nil
		}, nil
	}); err != nil {
		panic(err)
	}
}
