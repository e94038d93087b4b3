package httpprovider

import (
	"strings"
)

// maxQuotedBody is the most of a response body an error quotes.
const maxQuotedBody = 256

// redactor removes secrets (evaluated header values, the raw cursor) from text
// that is about to be put into an error.
type redactor []string

// minRedactLen avoids redacting (and so mangling) every occurrence of short,
// common values such as "2", "asc" or "json"; secrets are longer.
const minRedactLen = 6

func (r *redactor) add(s string) {
	if len(s) >= minRedactLen {
		*r = append(*r, s)
	}
}

func (r redactor) apply(s string) string {
	for _, secret := range r {
		s = strings.ReplaceAll(s, secret, "[redacted]")
	}
	return s
}

// quote returns at most maxQuotedBody bytes of body, redacted first so that
// a secret cannot survive by straddling the cut, and cut on a UTF-8 boundary.
func (r redactor) quote(body []byte) string {
	s := r.apply(string(body))
	if len(s) <= maxQuotedBody {
		return s
	}
	cut := maxQuotedBody
	for cut > 0 && !utf8Start(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }
