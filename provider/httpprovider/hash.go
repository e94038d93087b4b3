package httpprovider

import (
	"github.com/tidemark/tidemark/internal/redact"
)

// maxQuotedBody is the most of a response body an error quotes.
const maxQuotedBody = 256

// redactor removes secrets from text that is about to be put into an error:
// a request's own values (evaluated header values, the cursor, the URL's
// query values and path segments, the successor and any cursor an error
// body carries, the request's signature) and, through its parent, the
// provider's credentials (redact.Set; the provider's Redactor). The zero
// redactor redacts nothing.
type redactor struct{ set *redact.Set }

// newRedactor is a request's redactor under the provider's set.
func newRedactor(parent *redact.Set) redactor { return redactor{parent.Child(0)} }

func (r redactor) add(s string) {
	if r.set != nil {
		r.set.Add(s)
	}
}

func (r redactor) addCredential(header string) {
	if r.set != nil {
		r.set.AddCredential(header)
	}
}

func (r redactor) apply(s string) string { return r.set.Apply(s) }

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
