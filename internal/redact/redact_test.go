package redact

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Encodings lists every form a secret must not survive in.
func encodings(v string) map[string]string {
	j, _ := json.Marshal(v)
	return map[string]string{
		"raw":        v,
		"query":      url.QueryEscape(v),
		"path":       url.PathEscape(v),
		"query_low":  strings.ToLower(url.QueryEscape(v)),
		"b64std":     base64.StdEncoding.EncodeToString([]byte(v)),
		"b64url":     base64.URLEncoding.EncodeToString([]byte(v)),
		"b64raw":     base64.RawStdEncoding.EncodeToString([]byte(v)),
		"b64rawurl":  base64.RawURLEncoding.EncodeToString([]byte(v)),
		"json":       string(j[1 : len(j)-1]),
		"json_slash": strings.ReplaceAll(string(j[1:len(j)-1]), "/", `\/`),
		"json_query": func() string { q, _ := json.Marshal(url.QueryEscape(v)); return string(q[1 : len(q)-1]) }(),
	}
}

func TestApplyReplacesEveryEncoding(t *testing.T) {
	for _, secret := range []string{
		"s3cr3t-token",
		"eyJhbGciOi/+==&x=<y>\"z\"",
		"cursor with spaces/and+plus?&=",
		"ünïcödé-cursor",
	} {
		s := New(0)
		s.Add(secret)
		for name, form := range encodings(secret) {
			t.Run(secret+"/"+name, func(t *testing.T) {
				text := "before " + form + " after"
				got := s.Apply(text)
				assert.NotContains(t, got, form)
				assert.Contains(t, got, Mask)
				assert.True(t, strings.HasPrefix(got, "before ") && strings.HasSuffix(got, " after"), got)
			})
		}
	}
}

func TestShortValuesAreNotRegistered(t *testing.T) {
	s := New(0)
	s.Add("asc", "2", "json1")
	assert.Equal(t, "asc 2 json1", s.Apply("asc 2 json1"))
}

func TestChildAppliesItsParent(t *testing.T) {
	root := New(0)
	root.Add("client-secret-1")
	child := root.Child(0)
	child.Add("cursor-abcdef")
	assert.Equal(t, Mask+" "+Mask, child.Apply("client-secret-1 cursor-abcdef"))
	assert.Equal(t, Mask+" cursor-abcdef", root.Apply("client-secret-1 cursor-abcdef"), "a child's values stay in the child")
}

func TestCapacityKeepsTheMostRecentlyAdded(t *testing.T) {
	s := New(2)
	s.Add("value-one", "value-two")
	s.Add("value-one") // refreshed: value-two is now the oldest
	s.Add("value-three")
	assert.Equal(t, Mask+" value-two "+Mask, s.Apply("value-one value-two value-three"))
}

func TestAddCredentialRegistersTheDecodedBasicPassword(t *testing.T) {
	s := New(0)
	s.AddCredential("Basic " + base64.StdEncoding.EncodeToString([]byte("alice:hunter2-pw")))
	got := s.Apply(`{"echo":"Basic YWxpY2U6aHVudGVyMi1wdw==","pw":"hunter2-pw","form":"password=hunter2-pw"}`)
	assert.NotContains(t, got, "hunter2-pw")
	assert.NotContains(t, got, "YWxpY2U6aHVudGVyMi1wdw")
}

func TestErrorKeepsTheCause(t *testing.T) {
	sentinel := errors.New("sentinel")
	s := New(0)
	s.Add("token-12345")
	err := s.Error(fmt.Errorf("got token-12345: %w", sentinel))
	require.Error(t, err)
	assert.Equal(t, "got "+Mask+": sentinel", err.Error())
	assert.ErrorIs(t, err, sentinel)
	plain := errors.New("nothing secret")
	assert.Same(t, plain, s.Error(plain))
	assert.NoError(t, s.Error(nil))
}

func TestNilSetIsANoOp(t *testing.T) {
	var s *Set
	s.Add("whatever-value")
	assert.Equal(t, "whatever-value", s.Apply("whatever-value"))
}

// strictEscape is Python's quote(safe=""): every byte outside RFC 3986's
// unreserved set as %XX. It is written here apart from the package's
// percentEscape so the test checks the package against its own reading of
// the encoders, not against itself.
func strictEscape(v string, keep func(byte) bool) string {
	var sb strings.Builder
	for _, c := range []byte(v) {
		if keep(c) {
			sb.WriteByte(c)
		} else {
			fmt.Fprintf(&sb, "%%%02X", c)
		}
	}
	return sb.String()
}

func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~", c) >= 0
}

// lowerEscapes writes the hex digits of every %XX escape in lower case, as
// some servers and libraries echo them.
func lowerEscapes(s string) string {
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			sb.WriteByte('%')
			sb.WriteString(strings.ToLower(s[i+1 : i+3]))
			i += 2
			continue
		}
		sb.WriteByte(s[i])
	}
	return sb.String()
}

// promisedForms are the forms docs/design.md#redaction promises a
// registered value does not survive in.
func promisedForms(v string) map[string]string {
	forms := encodings(v)
	forms["strict"] = strictEscape(v, unreserved)
	forms["strict_low"] = lowerEscapes(strictEscape(v, unreserved))
	forms["encodeURIComponent"] = strictEscape(v, func(c byte) bool { return unreserved(c) || strings.IndexByte("!*'()", c) >= 0 })
	forms["encodeURIComponent_low"] = lowerEscapes(forms["encodeURIComponent"])
	forms["query_hexlow"] = lowerEscapes(url.QueryEscape(v))
	forms["path_hexlow"] = lowerEscapes(url.PathEscape(v))
	forms["strict_twice"] = strictEscape(strictEscape(v, unreserved), unreserved)
	return forms
}

// TestRegisteredCursorsNeverSurviveInAPromisedForm generates cursors of the
// characters that encoders treat differently (space, "+", "=", "/", "&",
// "%", quotes, braces of JSON cursors, non-ASCII) and checks that none
// survives Apply in any form the docs promise, and that the text around it
// is kept.
func TestRegisteredCursorsNeverSurviveInAPromisedForm(t *testing.T) {
	alphabet := []rune("abcXYZ019 +=/&%?#:@\"{}[],'!*()~-_.ü€日")
	rng := rand.New(rand.NewPCG(7, 11))
	for i := 0; i < 500; i++ {
		n := MinLen + rng.IntN(24)
		r := make([]rune, n)
		for j := range r {
			r[j] = alphabet[rng.IntN(len(alphabet))]
		}
		cursor := string(r)
		s := New(0)
		s.Add(cursor)
		for name, form := range promisedForms(cursor) {
			text := "<<" + form + ">>"
			got := s.Apply(text)
			if strings.Contains(got, form) || !strings.HasPrefix(got, "<<") || !strings.HasSuffix(got, ">>") {
				t.Fatalf("cursor %q in form %s (%q) survives: %q", cursor, name, form, got)
			}
		}
	}
}

func TestAddUserinfoRegistersTheBasicCredentialGoDerives(t *testing.T) {
	u, err := url.Parse("http://admin-user:p%40ss%20w0rd@127.0.0.1:5984/db")
	require.NoError(t, err)
	s := New(0)
	s.AddUserinfo(u.User)
	// What net/http sends for a URL with user info (Client.send, and the
	// transport's Proxy-Authorization for a proxy URL).
	req, err := http.NewRequest(http.MethodGet, u.String(), nil)
	require.NoError(t, err)
	req.SetBasicAuth(u.User.Username(), func() string { p, _ := u.User.Password(); return p }())
	header := req.Header.Get("Authorization")
	echo := fmt.Sprintf("401 for %s: header %q, decoded %q, password %q, url %s",
		u.Redacted(), header, "admin-user:p@ss w0rd", "p@ss w0rd", u.String())
	got := s.Apply(echo)
	for _, secret := range []string{"p@ss w0rd", "p%40ss%20w0rd", strings.TrimPrefix(header, "Basic "), "admin-user:p@ss"} {
		assert.NotContains(t, got, secret)
	}
	s.AddUserinfo(nil) // no user info: nothing to add, no panic
}
