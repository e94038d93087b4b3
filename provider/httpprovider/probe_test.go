package httpprovider

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/provider"
)

// ValidateCursor runs the validate request alone, with the values a
// cursor's envelope pins: valid, invalid after the cluster changed, or
// ErrNoValidation without one; no page is fetched.
func TestValidateCursorRunsTheValidationAlone(t *testing.T) {
	s := newRevisionServer(t)
	p := parseProvider(t, fmt.Sprintf(revisionConfig, s.URL)+fmt.Sprintf(validateConfig, s.URL), nil, nil)
	page1 := fetch(t, p, "range", "")
	ctx := context.Background()
	require.NoError(t, p.ValidateCursor(ctx, "range", page1.Successor))
	s.mu.Lock()
	s.cluster = "c2"
	s.mu.Unlock()
	var exp *provider.ExpiredError
	require.ErrorAs(t, p.ValidateCursor(ctx, "range", page1.Successor), &exp)
	s.mu.Lock()
	assert.Equal(t, 2, s.checks)
	s.mu.Unlock()

	plain := parseProvider(t, fmt.Sprintf(revisionConfig, s.URL), nil, nil)
	assert.ErrorIs(t, plain.ValidateCursor(ctx, "range", page1.Successor), ErrNoValidation)
}

// SourceToken opens an envelope to the source's own token, and returns a
// bare cursor as it is.
func TestSourceTokenOpensTheEnvelope(t *testing.T) {
	s := newRevisionServer(t)
	p := parseProvider(t, fmt.Sprintf(revisionConfig, s.URL), nil, nil)
	page1 := fetch(t, p, "range", "")
	require.True(t, strings.HasPrefix(string(page1.Successor), envelopePrefix), "a pinned traversal's cursor is an envelope")
	env, err := p.openCursor("range", page1.Successor)
	require.NoError(t, err)
	assert.Equal(t, env.token(), p.SourceToken("range", page1.Successor))
	assert.NotContains(t, string(p.SourceToken("range", page1.Successor)), envelopePrefix)
	assert.Equal(t, []byte("bare"), p.SourceToken("range", []byte("bare")))
	assert.Nil(t, p.SourceToken("range", nil))
}
