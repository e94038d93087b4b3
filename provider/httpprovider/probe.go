package httpprovider

import (
	"context"
	"errors"

	"github.com/tidemark/tidemark/provider"
)

// ErrNoValidation is returned by ValidateCursor when the config has no
// validate request.
var ErrNoValidation = errors.New("httpprovider: no validate request configured")

// ValidateCursor runs the validate request for cursor exactly as Fetch runs
// it before the first fetch from a stored cursor, and returns its outcome:
// nil when the answer's valid mapping is true, *provider.ExpiredError when
// it is false, ErrNoValidation without a validate request, or the request's
// own failure. It fetches no page. (For `connect tidemark probe`.)
func (p *Provider) ValidateCursor(ctx context.Context, partition string, cursor []byte) error {
	if p.cfg.Validate == nil {
		return ErrNoValidation
	}
	env, err := p.openCursor(partition, cursor)
	if err != nil {
		return err
	}
	return p.validate(ctx, provider.Request{Partition: partition, Cursor: cursor}, env.token(), env.Values)
}

// SourceToken returns the source's own token inside a cursor this provider
// returned: the cursor itself, or for a config with a request sequence
// (bootstrap or pin) the token its envelope carries (nil for a pending
// bootstrap). It is for reports on the token's shape (offset-like
// pagination); the input keeps cursors opaque. (For `connect tidemark
// probe`.)
func (p *Provider) SourceToken(partition string, cursor []byte) []byte {
	env, err := p.openCursor(partition, cursor)
	if err != nil {
		return cursor
	}
	return env.token()
}
