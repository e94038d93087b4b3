package store

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// formatKey is the key the stored vectors below were written with: bytes
// 0..31, id "2026-01".
func formatKey() []CursorKey {
	k := make([]byte, 32)
	for i := range k {
		k[i] = byte(i)
	}
	return []CursorKey{{ID: "2026-01", Key: k}}
}

var formatPartition = Key{Scope: "orders", Partition: "p0"}

// Cursors stored by the release before format 2 (AES-256-GCM with an
// HMAC-derived nonce), written by that release's seal with formatKey for
// formatPartition: they must keep decrypting.
var storedV1 = map[string]string{
	"cursor-abc": "ff746d633107323032362d303123dfc9e0755d44f7696397d30c29ec478aa0739a0ebc4930aef6628cd4d2bd797e81e321534f",
	"https://api.example.com/items?after=17&limit=100": "ff746d633107323032362d30317647a6e44cc242c2e354fc5dbe8ef70a74b9e005c605bd13cf523d72939ab45f8237a519d619485169035bef24052dbf79ef6c7ad6042b108b3e328b6f23085921a6984044477bc86624195a",
}

// storedV2 pins format 2 (AES-SIV under the HKDF-derived key) for the same
// key and partition: a change of derivation or layout would strand every
// cursor stored in it.
var storedV2 = map[string]string{
	"cursor-abc": "ff746d633207323032362d3031a05ddab7cb3dd6a09bbfd708b8f563b1c42c09e9e86ce6cf4a50",
}

func TestFormat1CursorsStillDecrypt(t *testing.T) {
	c, err := newCursorCipher(formatKey(), "")
	require.NoError(t, err)
	for plain, h := range storedV1 {
		stored, err := hex.DecodeString(h)
		require.NoError(t, err)
		require.True(t, IsSealedCursor(stored))
		got, err := c.open(formatPartition, stored)
		require.NoError(t, err, plain)
		assert.Equal(t, plain, string(got))
		// The format-1 writer kept for tests writes the same bytes.
		assert.Equal(t, stored, c.sealV1(formatPartition, []byte(plain)))
		// Bound to its partition: another one's associated data refuses it.
		_, err = c.open(Key{Scope: "orders", Partition: "p1"}, stored)
		assert.Error(t, err)
	}
}

func TestFormat2IsAESSIV(t *testing.T) {
	c, err := newCursorCipher(formatKey(), "")
	require.NoError(t, err)
	for plain, h := range storedV2 {
		sealed := c.seal(formatPartition, []byte(plain))
		assert.Equal(t, h, hex.EncodeToString(sealed), "format 2 of %q", plain)
	}
	plain := []byte("https://api.example.com/items?after=17&limit=100")
	sealed := c.seal(formatPartition, plain)
	assert.True(t, bytes.HasPrefix(sealed, sealMagic2), "new cursors are written in format 2")
	assert.Equal(t, len(sealMagic2)+1+len("2026-01")+16+len(plain), len(sealed), "magic, key id, synthetic IV, ciphertext")
	assert.LessOrEqual(t, len(sealed)-len(plain), SealOverhead)
	assert.NotContains(t, string(sealed), "after=17")
	assert.Equal(t, sealed, c.seal(formatPartition, plain), "deterministic: conditional writes compare the bytes")
	assert.NotEqual(t, sealed, c.seal(Key{Scope: "orders", Partition: "p1"}, plain), "bound to the partition")
	got, err := c.open(formatPartition, sealed)
	require.NoError(t, err)
	assert.Equal(t, plain, got)

	// Altered, truncated, or read under another key or partition: refused.
	for name, v := range map[string][]byte{
		"a flipped bit":    flip(sealed, len(sealed)-1),
		"a flipped IV bit": flip(sealed, len(sealMagic2)+1+len("2026-01")),
		"truncated":        sealed[:len(sealMagic2)+1+len("2026-01")+10],
	} {
		_, err := c.open(formatPartition, v)
		assert.Error(t, err, name)
	}
	_, err = c.open(Key{Scope: "orders", Partition: "p1"}, sealed)
	assert.Error(t, err)
	other, err := newCursorCipher([]CursorKey{{ID: "2026-01", Key: bytes.Repeat([]byte{7}, 32)}}, "")
	require.NoError(t, err)
	_, err = other.open(formatPartition, sealed)
	assert.ErrorContains(t, err, "does not decrypt")

	// Without keys (RefuseSealed) either format is refused by key id.
	none := &cursorCipher{keys: map[string]cursorKey{}}
	for _, v := range [][]byte{sealed, c.sealV1(formatPartition, plain)} {
		_, err := none.open(formatPartition, v)
		var se *SealedCursorError
		require.True(t, errors.As(err, &se))
		assert.Equal(t, "2026-01", se.KeyID)
	}
}

func flip(b []byte, i int) []byte {
	out := bytes.Clone(b)
	out[i] ^= 1
	return out
}
