// Package redact is tidemark's one redaction layer: the values the input
// sends as credentials (configured header values, basic auth, OAuth2 client
// secrets and access tokens, JWTs, AWS session tokens) and the cursors it
// reads with are registered in a Set as they become known, and every text
// that leaves the process (an error, a log line, a park reason written to
// the store) goes through Set.Apply first, which replaces each registered
// value in every form a server or a library may echo it in (Forms: raw,
// URL query and path escaping, base64 standard and URL alphabets with and
// without padding, JSON string escaping).
//
// Sets nest: a Child applies its own values and then its parent's, so a
// request's values (its cursor, its SigV4 signature) live only as long as
// the request while the process's credentials are shared by every request.
// A Set with a capacity keeps the values most recently added (Add of a
// known value refreshes it), so a long run does not grow it.
//
// The package imports only the standard library.
package redact

import (
	"encoding/base64"
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"sync"
)

// Mask replaces every registered value.
const Mask = "[redacted]"

// MinLen is the shortest value registered: shorter ones ("2", "asc",
// "json") are too common to replace without mangling the text around them,
// and too short to be a credential.
const MinLen = 6

// Forms returns v and the encodings in which a server or library may echo
// it, longest first, each at least MinLen bytes: raw, URL query escaping
// (url.QueryEscape), path escaping (url.PathEscape) and strict
// percent-encoding (RFC 3986's unreserved set kept, as Python's
// quote(safe="") writes it, and as JavaScript's encodeURIComponent does),
// once or twice, with upper- or lower-case hex digits, base64 in the
// standard and URL alphabets with and without padding, and the JSON string
// escaping of each of the raw and URL-escaped forms (with and without HTML
// escaping, and with "/" escaped as "\/"). Nil when v is shorter than
// MinLen.
func Forms(v string) []string {
	if len(v) < MinLen {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	add := func(s string) {
		if len(s) >= MinLen && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	textual := []string{v, url.QueryEscape(v), url.PathEscape(v), percentEscape(v, strictUnreserved), percentEscape(v, componentUnreserved)}
	for _, s := range textual {
		add(s)
		add(lowerHex(s))        // lower-case percent escapes
		add(strings.ToLower(s)) // a server that lower-cases the whole echo
		for _, j := range jsonForms(s) {
			add(j)
		}
	}
	// URL escaping applied twice (a server quoting an escaped request
	// URI in an escaped form).
	for _, s := range textual[1:] {
		add(url.QueryEscape(s))
		add(url.PathEscape(s))
		add(percentEscape(s, strictUnreserved))
	}
	b := []byte(v)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		add(enc.EncodeToString(b))
	}
	// Longest first: where two forms overlap, the longer wins.
	slices.SortStableFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}

// strictUnreserved is RFC 3986's unreserved set: what Python's
// quote(safe="") and most strict encoders leave as it is.
const strictUnreserved = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~"

// componentUnreserved is what JavaScript's encodeURIComponent leaves as it
// is (RFC 3986's unreserved set and !*'()).
const componentUnreserved = strictUnreserved + "!*'()"

// percentEscape escapes every byte of v outside keep as %XX (upper-case
// hex): the strict percent-encoding that Go's url.QueryEscape (which writes
// a space as "+") and url.PathEscape (which keeps "+", "=", ":", "@", "&")
// do not produce.
func percentEscape(v, keep string) string {
	const hex = "0123456789ABCDEF"
	var sb strings.Builder
	sb.Grow(len(v) * 3)
	for i := 0; i < len(v); i++ {
		c := v[i]
		if strings.IndexByte(keep, c) >= 0 {
			sb.WriteByte(c)
			continue
		}
		sb.WriteByte('%')
		sb.WriteByte(hex[c>>4])
		sb.WriteByte(hex[c&15])
	}
	return sb.String()
}

// lowerHex is s with the hex digits of its percent escapes in lower case
// (%2f for %2F), the rest of s unchanged.
func lowerHex(s string) string {
	b := []byte(s)
	for i := 0; i+2 < len(b); i++ {
		if b[i] != '%' || !isHex(b[i+1]) || !isHex(b[i+2]) {
			continue
		}
		for _, j := range []int{i + 1, i + 2} {
			if 'A' <= b[j] && b[j] <= 'F' {
				b[j] += 'a' - 'A'
			}
		}
		i += 2
	}
	return string(b)
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// jsonForms is s inside a JSON string, as encoding/json writes it (with and
// without HTML escaping) and with "/" escaped as some encoders do.
func jsonForms(s string) []string {
	var out []string
	for _, html := range []bool{true, false} {
		var sb strings.Builder
		enc := json.NewEncoder(&sb)
		enc.SetEscapeHTML(html)
		if err := enc.Encode(s); err != nil {
			continue
		}
		q := strings.TrimSuffix(sb.String(), "\n")
		q = q[1 : len(q)-1]
		out = append(out, q)
		if strings.Contains(q, "/") {
			out = append(out, strings.ReplaceAll(q, "/", `\/`))
		}
	}
	return out
}

// Set is a set of values to redact. It is safe for concurrent use. The zero
// Set is not usable; use New or Child.
type Set struct {
	parent   *Set
	capacity int

	mu   sync.Mutex
	tick uint64
	vals map[string]uint64 // value -> last time it was added
	rep  *strings.Replacer // nil: rebuild before the next Apply
}

// New returns an empty Set that keeps at most capacity values (0: no
// limit).
func New(capacity int) *Set { return &Set{capacity: capacity, vals: map[string]uint64{}} }

// Child returns an empty Set whose Apply also applies s (s may be nil).
func (s *Set) Child(capacity int) *Set {
	c := New(capacity)
	c.parent = s
	return c
}

// Add registers values (those shorter than MinLen are ignored). With a
// capacity, the least recently added value leaves when a new one would
// exceed it.
func (s *Set) Add(values ...string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range values {
		if len(v) < MinLen {
			continue
		}
		s.tick++
		if _, ok := s.vals[v]; ok {
			s.vals[v] = s.tick
			continue
		}
		s.vals[v] = s.tick
		s.rep = nil
		if s.capacity > 0 && len(s.vals) > s.capacity {
			oldest, at := "", ^uint64(0)
			for k, t := range s.vals {
				if t < at {
					oldest, at = k, t
				}
			}
			delete(s.vals, oldest)
		}
	}
}

// AddBytes registers a value held as bytes (a cursor).
func (s *Set) AddBytes(v []byte) {
	if len(v) >= MinLen {
		s.Add(string(v))
	}
}

// AddCredential registers an HTTP credential header value (Authorization,
// Proxy-Authorization): the value whole, its credentials after the scheme
// ("Basic ", "Bearer "), and, for Basic, the decoded "user:password" and
// the password.
func (s *Set) AddCredential(header string) {
	s.Add(header)
	scheme, cred, ok := strings.Cut(header, " ")
	if !ok {
		return
	}
	cred = strings.TrimSpace(cred)
	s.Add(cred)
	if strings.EqualFold(scheme, "basic") {
		if dec, err := base64.StdEncoding.DecodeString(cred); err == nil {
			s.Add(string(dec))
			if _, pass, ok := strings.Cut(string(dec), ":"); ok {
				s.Add(pass)
			}
		}
	}
}

// AddUserinfo registers the user info of a URL (http://user:pass@host/):
// the user name, the password, "user:password" and, in every form, the
// Basic credential Go's HTTP client derives from them and sends as
// Authorization (for a request URL) or Proxy-Authorization (for a proxy
// URL) after the request's own headers were read. A nil u adds nothing.
func (s *Set) AddUserinfo(u *url.Userinfo) {
	if u == nil {
		return
	}
	user := u.Username()
	pass, _ := u.Password()
	s.Add(u.String(), user, pass)
	s.AddCredential("Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass)))
}

// Apply returns text with every form of every registered value (of s and
// its parents) replaced by Mask.
func (s *Set) Apply(text string) string {
	for ; s != nil; s = s.parent {
		if r := s.replacer(); r != nil {
			text = r.Replace(text)
		}
	}
	return text
}

// Bytes is Apply for a byte slice.
func (s *Set) Bytes(b []byte) string { return s.Apply(string(b)) }

func (s *Set) replacer() *strings.Replacer {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rep != nil || len(s.vals) == 0 {
		return s.rep
	}
	var forms []string
	for v := range s.vals {
		forms = append(forms, Forms(v)...)
	}
	// Longest first across values too (a value may contain another).
	slices.SortFunc(forms, func(a, b string) int {
		if len(a) != len(b) {
			return len(b) - len(a)
		}
		return strings.Compare(a, b)
	})
	forms = slices.Compact(forms)
	pairs := make([]string, 0, 2*len(forms))
	for _, f := range forms {
		pairs = append(pairs, f, Mask)
	}
	s.rep = strings.NewReplacer(pairs...)
	return s.rep
}

// Error returns err with its message redacted (nil for nil). The result
// unwraps to err, so errors.Is and errors.As still see the cause.
func (s *Set) Error(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	red := s.Apply(msg)
	if red == msg {
		return err
	}
	return &Err{Msg: red, Cause: err}
}

// Err is an error whose message was redacted; Cause keeps the original for
// errors.Is and errors.As (never print Cause).
type Err struct {
	Msg   string
	Cause error
}

func (e *Err) Error() string { return e.Msg }
func (e *Err) Unwrap() error { return e.Cause }
