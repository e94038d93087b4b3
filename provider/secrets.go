package provider

// Redactor is the input's redaction layer as a provider sees it. Every
// value added is replaced by "[redacted]", in every form a server or a
// library may echo it in (raw, URL query and path escaping,
// percent-encoding, base64 in both alphabets, JSON string escaping), in
// every text the input lets out of the process: its errors, log lines, park
// reasons written to the store and `status`. Values shorter than six bytes
// are ignored (too common to replace, too short to be a secret). It is safe
// for concurrent use.
type Redactor interface {
	// Add registers secret values (an API key, a password, a token).
	Add(values ...string)
	// AddCredential registers an HTTP credential header value ("Basic
	// ...", "Bearer ..."): the value whole, the credential after its
	// scheme, and for Basic the decoded "user:password" and the password.
	AddCredential(header string)
}

// Secrets is implemented by a provider whose requests carry secrets
// (credentials, tokens, signed URLs) that a source or a library may echo in
// an error. The input calls RedactWith once, before its first Fetch, with
// its redaction layer: the provider adds the secrets it holds then, and
// keeps r to add any secret it learns later (a refreshed access token) as
// it learns it. Cursors need not be added: the input redacts every cursor
// it fetches with.
type Secrets interface {
	RedactWith(r Redactor)
}
