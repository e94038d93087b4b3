package store_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/store/memstore"
)

func formatKey() []store.CursorKey {
	k := make([]byte, 32)
	for i := range k {
		k[i] = byte(i)
	}
	return []store.CursorKey{{ID: "2026-01", Key: k}}
}

var formatPartition = store.Key{Scope: "orders", Partition: "p0"}

// A checkpoint stored in format 1 by the previous release: the encrypted
// store reads it, promotes from it (the condition on the stored cursor is
// met with the stored bytes), and stores the successor in format 2; a
// promotion from another cursor is still fenced.
func TestCheckpointStoredInFormat1IsPromoted(t *testing.T) {
	ctx := context.Background()
	raw := memstore.New()
	_, err := raw.CreateCheckpoint(ctx, store.Checkpoint{Key: formatPartition, Cursor: store.SealV1(formatKey(), "", formatPartition, []byte("cursor-abc")), Generation: 1, Epoch: 1})
	require.NoError(t, err)

	s, err := store.Encrypted(raw, formatKey(), "")
	require.NoError(t, err)
	cp, err := s.LoadCheckpoint(ctx, formatPartition)
	require.NoError(t, err)
	assert.Equal(t, "cursor-abc", string(cp.Cursor))

	_, err = s.Promote(ctx, store.Promotion{Key: formatPartition, FromGeneration: 1, FromCursor: []byte("cursor-zzz"), To: []byte("cursor-def"), WitnessID: "w0", Watermark: coord.Integer(1), Epoch: 1})
	require.ErrorIs(t, err, store.ErrFenced, "a promotion from another cursor is fenced")

	cp, err = s.Promote(ctx, store.Promotion{Key: formatPartition, FromGeneration: 1, FromCursor: []byte("cursor-abc"), To: []byte("cursor-def"), WitnessID: "w1", Watermark: coord.Integer(2), Epoch: 1})
	require.NoError(t, err)
	assert.Equal(t, "cursor-def", string(cp.Cursor))
	stored, err := raw.LoadCheckpoint(ctx, formatPartition)
	require.NoError(t, err)
	assert.True(t, bytes.HasPrefix(stored.Cursor, store.SealMagic2), "the successor is stored in format 2")
	assert.NotContains(t, string(stored.Cursor), "cursor-def")
}
