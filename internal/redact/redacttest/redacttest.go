// Package redacttest finds secrets in text, in every encoding tidemark's
// redaction layer promises to catch. It is written independently of
// redact.Forms so that a form the layer forgets is a test failure, not a
// shared blind spot.
package redacttest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strings"
)

// Encodings returns v in every encoding it must not appear in, by name:
// raw, URL query and path escaping, strict percent-encoding (RFC 3986's
// unreserved characters kept, as Python's quote(safe="") and JavaScript's
// encodeURIComponent write it) with upper- and lower-case hex digits,
// base64 (standard and URL alphabets, padded and not) and JSON string
// escaping.
func Encodings(v string) map[string]string {
	j, _ := json.Marshal(v)
	js := string(j[1 : len(j)-1])
	return map[string]string{
		"raw":            v,
		"query-escaped":  url.QueryEscape(v),
		"path-escaped":   url.PathEscape(v),
		"base64":         base64.StdEncoding.EncodeToString([]byte(v)),
		"base64url":      base64.URLEncoding.EncodeToString([]byte(v)),
		"base64-raw":     base64.RawStdEncoding.EncodeToString([]byte(v)),
		"base64url-raw":  base64.RawURLEncoding.EncodeToString([]byte(v)),
		"json":           js,
		"strict-escaped": strictEscape(v, "%02X"),
		"strict-lower":   strictEscape(v, "%02x"),
		"query-lower":    lowerEscapes(url.QueryEscape(v)),
	}
}

// strictEscape writes every byte of v outside RFC 3986's unreserved set as
// "%" and the byte in format hex.
func strictEscape(v, hex string) string {
	var sb strings.Builder
	for _, c := range []byte(v) {
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~", c) >= 0 {
			sb.WriteByte(c)
			continue
		}
		sb.WriteString("%" + fmt.Sprintf(hex, c))
	}
	return sb.String()
}

// lowerEscapes is s with the hex digits of its %XX escapes in lower case.
func lowerEscapes(s string) string {
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			sb.WriteString("%" + strings.ToLower(s[i+1:i+3]))
			i += 2
			continue
		}
		sb.WriteByte(s[i])
	}
	return sb.String()
}

// Leaks returns "name/encoding" for every secret (by name) found in text in
// any of its Encodings, sorted; nil when none is.
func Leaks(text string, secrets map[string]string) []string {
	var out []string
	for name, v := range secrets {
		seen := map[string]bool{}
		for enc, form := range Encodings(v) {
			if seen[form] {
				continue
			}
			seen[form] = true
			if strings.Contains(text, form) {
				out = append(out, name+"/"+enc)
			}
		}
	}
	sort.Strings(out)
	return out
}
