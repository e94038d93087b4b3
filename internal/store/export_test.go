package store

// SealV1 encrypts plaintext for k in format 1 under the active key of
// keys, as the releases before format 2 stored cursors: for tests of the
// stores, which cannot write it otherwise.
func SealV1(keys []CursorKey, active string, k Key, plaintext []byte) []byte {
	c, err := newCursorCipher(keys, active)
	if err != nil {
		panic(err)
	}
	return c.sealV1(k, plaintext)
}

// SealMagic2 is the prefix of a cursor stored in format 2.
var SealMagic2 = sealMagic2
