// Package redacttest finds secrets in text, in every encoding tidemark's
// redaction layer promises to catch. It is written independently of
// redact.Forms so that a form the layer forgets is a test failure, not a
// shared blind spot.
package redacttest

import (
	"encoding/base64"
	"encoding/json"
	"net/url"
	"sort"
	"strings"
)

// Encodings returns v in every encoding it must not appear in, by name:
// raw, URL query and path escaping, base64 (standard and URL alphabets,
// padded and not) and JSON string escaping.
func Encodings(v string) map[string]string {
	j, _ := json.Marshal(v)
	js := string(j[1 : len(j)-1])
	return map[string]string{
		"raw":           v,
		"query-escaped": url.QueryEscape(v),
		"path-escaped":  url.PathEscape(v),
		"base64":        base64.StdEncoding.EncodeToString([]byte(v)),
		"base64url":     base64.URLEncoding.EncodeToString([]byte(v)),
		"base64-raw":    base64.RawStdEncoding.EncodeToString([]byte(v)),
		"base64url-raw": base64.RawURLEncoding.EncodeToString([]byte(v)),
		"json":          js,
	}
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
