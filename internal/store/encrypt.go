package store

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/tink-crypto/tink-go/v2/daead/subtle"

	"github.com/tidemark/tidemark/internal/reconcile"
)

// CursorKey is one key of cursor encryption: 32 bytes (AES-256) named by an
// id that the stored values carry.
type CursorKey struct {
	ID  string
	Key []byte
}

// MaxKeyIDBytes is the longest key id.
const MaxKeyIDBytes = 32

// SealOverhead is the most bytes encryption adds to a cursor (magic, key
// id, nonce, tag: the format-1 layout, the longer of the two). Backends
// accept cursors of MaxCursorBytes+SealOverhead so that every cursor the
// input accepts can be stored encrypted, in either format.
const SealOverhead = 5 + 1 + MaxKeyIDBytes + nonceSize + 16 // len(sealMagic) is 5

const nonceSize = 12

// The two formats of an encrypted cursor; a stored value that starts with
// neither magic is a plaintext cursor written before encryption was turned
// on, read as is.
//
//   - format 2, written: sealMagic2, the key id's length and the key id,
//     then AES-SIV (RFC 5297, AES-SIV-CMAC with a 512-bit key, Tink's
//     daead/subtle) of the cursor with the partition's associated data: the
//     16-byte synthetic IV followed by the ciphertext. A standard
//     deterministic AEAD: equal (associated data, cursor) pairs encrypt to
//     equal bytes, and nothing else is revealed.
//   - format 1, still read (cursors stored by earlier releases): sealMagic,
//     the key id's length and the key id, a 12-byte nonce, then AES-256-GCM
//     of the cursor with the associated data; the nonce is an HMAC-SHA256
//     of the associated data and the cursor.
var (
	sealMagic  = []byte{0xff, 't', 'm', 'c', '1'}
	sealMagic2 = []byte{0xff, 't', 'm', 'c', '2'}
)

// isSealed reports whether stored starts with the magic of either format.
func isSealed(stored []byte) bool {
	return bytes.HasPrefix(stored, sealMagic2) || bytes.HasPrefix(stored, sealMagic)
}

// cursorCipher encrypts cursors with AES-SIV (format 2) under the active
// key and decrypts either format under any known key. Encryption is
// deterministic, so that equal cursors of a partition encrypt to equal
// bytes and the backends' conditional writes (which compare stored cursors
// byte for byte) keep fencing; a condition on a cursor stored in format 1
// or under an older key is retried with the stored bytes when they decrypt
// to the cursor the writer named (Encrypted).
type cursorCipher struct {
	active string
	keys   map[string]cursorKey
	// digestKey keys the cursor digests of the text this store writes
	// (keyText); derived from the active key.
	digestKey []byte
}

type cursorKey struct {
	// siv encrypts and decrypts format 2.
	siv *subtle.AESSIV
	// aead and nonceKey decrypt (and, in tests, write) format 1.
	aead     cipher.AEAD
	nonceKey []byte
}

func newCursorCipher(keys []CursorKey, active string) (*cursorCipher, error) {
	if len(keys) == 0 {
		return nil, errors.New("cursor encryption needs at least one key")
	}
	c := &cursorCipher{active: active, keys: map[string]cursorKey{}}
	for _, k := range keys {
		if k.ID == "" || len(k.ID) > MaxKeyIDBytes {
			return nil, fmt.Errorf("cursor encryption: key id %q must be 1 to %d bytes", k.ID, MaxKeyIDBytes)
		}
		if len(k.Key) != 32 {
			return nil, fmt.Errorf("cursor encryption: key %s is %d bytes, want 32 (AES-256)", k.ID, len(k.Key))
		}
		if _, dup := c.keys[k.ID]; dup {
			return nil, fmt.Errorf("cursor encryption: key id %s is listed twice", k.ID)
		}
		block, err := aes.NewCipher(derive(k.Key, "tidemark cursor encryption key v1"))
		if err != nil {
			return nil, err
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, err
		}
		sivKey, err := hkdf.Key(sha256.New, k.Key, nil, "tidemark cursor encryption key v2 (AES-SIV-CMAC-512)", subtle.AESSIVKeySize)
		if err != nil {
			return nil, err
		}
		siv, err := subtle.NewAESSIV(sivKey)
		if err != nil {
			return nil, err
		}
		c.keys[k.ID] = cursorKey{siv: siv, aead: aead, nonceKey: derive(k.Key, "tidemark cursor nonce key v1")}
	}
	if c.active == "" && len(keys) == 1 {
		c.active = keys[0].ID
	}
	if _, ok := c.keys[c.active]; !ok {
		return nil, fmt.Errorf("cursor encryption: active key id %q is not among the keys", c.active)
	}
	for _, k := range keys {
		if k.ID == c.active {
			c.digestKey = derive(k.Key, "tidemark cursor digest key v1")
		}
	}
	return c, nil
}

func derive(key []byte, label string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(label))
	return m.Sum(nil)
}

func aad(k Key) []byte {
	var b []byte
	b = binary.AppendUvarint(b, uint64(len(k.Scope)))
	b = append(b, k.Scope...)
	return append(b, k.Partition...)
}

// seal encrypts plaintext for partition k under the active key, in format
// 2 (nil and empty stay as they are: the start of a partition; without
// keys, every cursor stays as it is: RefuseSealed).
func (c *cursorCipher) seal(k Key, plaintext []byte) []byte {
	if len(plaintext) == 0 || c.active == "" {
		return plaintext
	}
	ct, err := c.keys[c.active].siv.EncryptDeterministically(plaintext, aad(k))
	if err != nil { // only for plaintexts near 2^63 bytes, refused long before
		panic(err)
	}
	out := make([]byte, 0, len(sealMagic2)+1+len(c.active)+len(ct))
	out = append(out, sealMagic2...)
	out = append(out, byte(len(c.active)))
	out = append(out, c.active...)
	return append(out, ct...)
}

// sealV1 encrypts plaintext in format 1, as releases before format 2 did:
// the tests' stand-in for cursors those releases stored.
func (c *cursorCipher) sealV1(k Key, plaintext []byte) []byte {
	if len(plaintext) == 0 || c.active == "" {
		return plaintext
	}
	ck := c.keys[c.active]
	ad := aad(k)
	m := hmac.New(sha256.New, ck.nonceKey)
	m.Write(binary.AppendUvarint(nil, uint64(len(ad))))
	m.Write(ad)
	m.Write(plaintext)
	nonce := m.Sum(nil)[:nonceSize]
	out := make([]byte, 0, len(sealMagic)+1+len(c.active)+nonceSize+len(plaintext)+ck.aead.Overhead())
	out = append(out, sealMagic...)
	out = append(out, byte(len(c.active)))
	out = append(out, c.active...)
	out = append(out, nonce...)
	return ck.aead.Seal(out, nonce, plaintext, ad)
}

// open decrypts a stored value of partition k; a value without the magic
// prefix is a plaintext cursor stored before encryption and is returned as
// is.
func (c *cursorCipher) open(k Key, stored []byte) ([]byte, error) {
	v2 := bytes.HasPrefix(stored, sealMagic2)
	if !v2 && !bytes.HasPrefix(stored, sealMagic) {
		return stored, nil
	}
	rest := stored[len(sealMagic):] // both magics are 5 bytes
	minBody := nonceSize
	if v2 {
		minBody = aes.BlockSize // the synthetic IV
	}
	if len(rest) < 1 || len(rest) < 1+int(rest[0])+minBody {
		return nil, fmt.Errorf("store: an encrypted cursor of %s is truncated", k)
	}
	id := string(rest[1 : 1+int(rest[0])])
	rest = rest[1+int(rest[0]):]
	ck, ok := c.keys[id]
	if !ok && len(c.keys) == 0 {
		return nil, &SealedCursorError{Key: k, KeyID: id}
	}
	if !ok {
		return nil, fmt.Errorf("store: a cursor of %s is encrypted under key id %q, which cursor_encryption does not list", k, id)
	}
	var plain []byte
	var err error
	if v2 {
		plain, err = ck.siv.DecryptDeterministically(rest, aad(k))
	} else {
		plain, err = ck.aead.Open(nil, rest[:nonceSize], rest[nonceSize:], aad(k))
	}
	if err != nil {
		return nil, fmt.Errorf("store: a cursor of %s does not decrypt under key id %q (wrong key, or the value was altered)", k, id)
	}
	return plain, nil
}

// SealedCursorError is what a store wrapped by RefuseSealed returns for a
// checkpoint or witness whose cursor is stored encrypted: the input has no
// cursor_encryption, so the stored bytes are ciphertext it cannot read,
// and sending them to the source as a cursor (an API that treats an unknown
// cursor as "latest" would skip events silently) is refused.
type SealedCursorError struct {
	Key   Key
	KeyID string // the key id the stored value names
}

func (e *SealedCursorError) Error() string {
	return fmt.Sprintf("store: the cursor of %s (scope %q) is stored encrypted under key id %q and this input has no checkpoint.cursor_encryption: "+
		"the partition does not start rather than send ciphertext to the source as a cursor; configure cursor_encryption with key id %q "+
		"(docs/design.md#cursor-protection-at-rest)", e.Key, e.Key.Scope, e.KeyID, e.KeyID)
}

// RefuseSealed wraps s for an input without cursor encryption: cursors are
// stored as they are (in clear), and a checkpoint or witness whose cursor
// was stored encrypted (by a config or an instance that has the key) is
// never returned as a cursor: reading it fails with *SealedCursorError
// naming the key id and the scope.
func RefuseSealed(s Store) Store {
	return &encryptedStore{Store: s, c: &cursorCipher{keys: map[string]cursorKey{}}}
}

// plainDigest matches the cursor digests reconcile.CursorHash writes.
var plainDigest = regexp.MustCompile(`sha256:[0-9a-f]{16}`)

// keyText returns text (a park reason, a repair's command or previous
// values) with every cursor digest keyed: "sha256:<16 hex>", the plain
// SHA-256 of a cursor that logs show, becomes "hmac:<16 hex>", an
// HMAC-SHA256 of that digest under a key derived from the active cursor
// key. A plain digest of an offset or a timestamp can be found by hashing
// candidates; a keyed one cannot without the key. Without keys
// (RefuseSealed) text is returned as it is.
func (c *cursorCipher) keyText(text string) string {
	if c.digestKey == nil || !strings.Contains(text, "sha256:") {
		return text
	}
	return plainDigest.ReplaceAllStringFunc(text, func(d string) string {
		return KeyedDigest(c.digestKey, d)
	})
}

// keyRepairs returns repairs with the cursor digests of their text keyed
// (keyText); nil stays nil (a promotion that keeps the repair log).
func (c *cursorCipher) keyRepairs(repairs []RepairEntry) []RepairEntry {
	if repairs == nil || c.digestKey == nil {
		return repairs
	}
	out := make([]RepairEntry, len(repairs))
	for i, r := range repairs {
		r.Command = c.keyText(r.Command)
		if r.Previous != nil {
			prev := make(map[string]string, len(r.Previous))
			for k, v := range r.Previous {
				prev[k] = c.keyText(v)
			}
			r.Previous = prev
		}
		out[i] = r
	}
	return out
}

// KeyedDigest is the stored form of a cursor digest d ("sha256:…", as
// reconcile.CursorHash and the logs show it) under digest key k:
// "hmac:" and the first 16 hex digits of HMAC-SHA256(k, d).
func KeyedDigest(k []byte, d string) string {
	m := hmac.New(sha256.New, k)
	m.Write([]byte(d))
	return "hmac:" + hex.EncodeToString(m.Sum(nil))[:16]
}

// IsSealedCursor reports whether a stored cursor value is encrypted (what
// a store not wrapped by Encrypted returns for an encrypted checkpoint or
// witness). Tools that read the raw store use it to refuse, or to say so,
// instead of hashing or comparing ciphertext as if it were a cursor.
func IsSealedCursor(stored []byte) bool { return isSealed(stored) }

// SealedKeyID returns the key id a value stored encrypted names (false
// for a value stored in clear, or one too short to name one).
func SealedKeyID(stored []byte) (string, bool) {
	if !IsSealedCursor(stored) {
		return "", false
	}
	rest := stored[len(sealMagic):]
	if len(rest) < 1 || len(rest) < 1+int(rest[0]) {
		return "", false
	}
	return string(rest[1 : 1+int(rest[0])]), true
}

// IsEncrypted reports whether s encrypts cursors (it is, or wraps, a store
// returned by Encrypted).
func IsEncrypted(s any) bool {
	for s != nil {
		if e, ok := s.(*encryptedStore); ok {
			return e.c.active != ""
		}
		u, ok := s.(interface{ Unwrap() Store })
		if !ok {
			return false
		}
		s = u.Unwrap()
	}
	return false
}

// Encrypted wraps s so that the cursors of checkpoints (Cursor, and a
// promotion's From and To) and of witnesses (InputCursor, Successor) are
// stored encrypted with AES-SIV (format 2, see sealMagic2) under the active
// key of keys, and read back decrypted under whichever listed key
// encrypted them, in either format. Values stored in plaintext (before
// encryption was turned on) are read as they are.
//
// Conditional writes keep fencing: encryption is deterministic (see
// cursorCipher), so a cursor encrypts to the bytes stored for it. After a
// key rotation, or over a cursor stored in format 1, the stored value may
// differ: a write whose condition then fails on the cursor alone is
// retried once with the stored bytes, when they decrypt to the cursor the
// writer named.
func Encrypted(s Store, keys []CursorKey, active string) (Store, error) {
	c, err := newCursorCipher(keys, active)
	if err != nil {
		return nil, err
	}
	return &encryptedStore{Store: s, c: c}, nil
}

type encryptedStore struct {
	Store
	c *cursorCipher
}

func (s *encryptedStore) checkpoint(cp Checkpoint, err error) (Checkpoint, error) {
	if err != nil {
		var fe *FenceError
		if errors.As(err, &fe) && fe.Winner != nil {
			w, fe2 := *fe.Winner, *fe
			fe2.Winner = nil
			if plain, oerr := s.c.open(w.Key, w.Cursor); oerr == nil {
				w.Cursor = plain
				fe2.Winner = &w
			}
			return cp, &fe2
		}
		return cp, err
	}
	plain, derr := s.c.open(cp.Key, cp.Cursor)
	if derr != nil {
		return cp, derr
	}
	cp.Cursor = plain
	return cp, nil
}

// storedCursor returns the bytes stored for k when they decrypt to plain
// (nil when they do not, or cannot be read).
func (s *encryptedStore) storedCursor(ctx context.Context, k Key, plain []byte, generation uint64) ([]byte, bool) {
	raw, err := s.Store.LoadCheckpoint(ctx, k)
	if err != nil || raw.Generation != generation {
		return nil, false
	}
	got, err := s.c.open(k, raw.Cursor)
	if err != nil || !bytes.Equal(got, plain) {
		return nil, false
	}
	return raw.Cursor, true
}

func (s *encryptedStore) LoadCheckpoint(ctx context.Context, k Key) (Checkpoint, error) {
	return s.checkpoint(s.Store.LoadCheckpoint(ctx, k))
}

func (s *encryptedStore) CreateCheckpoint(ctx context.Context, c Checkpoint) (Checkpoint, error) {
	if err := CheckCursor("cursor", c.Cursor); err != nil {
		return Checkpoint{}, err
	}
	c.Cursor = s.c.seal(c.Key, c.Cursor)
	return s.checkpoint(s.Store.CreateCheckpoint(ctx, c))
}

func (s *encryptedStore) Promote(ctx context.Context, p Promotion) (Checkpoint, error) {
	if err := CheckCursor("successor", p.To); err != nil {
		return Checkpoint{}, err
	}
	if err := CheckCursor("cursor", p.FromCursor); err != nil {
		return Checkpoint{}, err
	}
	plainFrom := p.FromCursor
	p.Repairs = s.c.keyRepairs(p.Repairs)
	p.FromCursor = s.c.seal(p.Key, p.FromCursor)
	p.To = s.c.seal(p.Key, p.To)
	cp, err := s.Store.Promote(ctx, p)
	if errors.Is(err, ErrFenced) {
		if stored, ok := s.storedCursor(ctx, p.Key, plainFrom, p.FromGeneration); ok && !bytes.Equal(stored, p.FromCursor) {
			p.FromCursor = stored
			cp, err = s.Store.Promote(ctx, p)
		}
	}
	return s.checkpoint(cp, err)
}

func (s *encryptedStore) SetParked(ctx context.Context, k Key, cursor []byte, generation uint64, lease Lease, reason string) (Checkpoint, error) {
	reason = s.c.keyText(reason)
	return s.atCursor(ctx, k, cursor, generation, func(sealed []byte) (Checkpoint, error) {
		return s.Store.SetParked(ctx, k, sealed, generation, lease, reason)
	})
}

func (s *encryptedStore) NoteFailure(ctx context.Context, k Key, cursor []byte, generation uint64, lease Lease, note string) (Checkpoint, error) {
	note = s.c.keyText(note)
	return s.atCursor(ctx, k, cursor, generation, func(sealed []byte) (Checkpoint, error) {
		return s.Store.NoteFailure(ctx, k, sealed, generation, lease, note)
	})
}

// atCursor performs write, a write conditioned on the checkpoint being at
// the plaintext cursor and generation, with the cursor sealed. Sealing is
// deterministic only within one format (a checkpoint written by another
// format, or key, holds other bytes for the same cursor): when the write
// is fenced and the stored bytes decrypt to the same cursor at the same
// generation, it is made once more with the stored bytes.
func (s *encryptedStore) atCursor(ctx context.Context, k Key, cursor []byte, generation uint64, write func(sealed []byte) (Checkpoint, error)) (Checkpoint, error) {
	if err := CheckCursor("cursor", cursor); err != nil {
		return Checkpoint{}, err
	}
	sealed := s.c.seal(k, cursor)
	cp, err := write(sealed)
	if errors.Is(err, ErrFenced) {
		if stored, ok := s.storedCursor(ctx, k, cursor, generation); ok && !bytes.Equal(stored, sealed) {
			cp, err = write(stored)
		}
	}
	return s.checkpoint(cp, err)
}

// SwapMembership keys the cursor digests of the record's reason (a
// withdrawal names the cursor of the page that showed a contract
// violation) and of its repair log. The record is read back as stored, so
// the frontier a publisher computes from it names the same keyed digests
// as the published record it compares it with: keying here never makes a
// publisher write the same frontier again. The published record is not
// keyed itself: its reason is the membership's, read keyed, and text of
// the frontier core that names no cursor.
func (s *encryptedStore) SwapMembership(ctx context.Context, prevEpoch uint64, next Membership) (Membership, error) {
	next.Reason = s.c.keyText(next.Reason)
	next.Repairs = s.c.keyRepairs(next.Repairs)
	return s.Store.SwapMembership(ctx, prevEpoch, next)
}

func (s *encryptedStore) Unpark(ctx context.Context, k Key, cursor []byte, generation uint64, lease Lease, repairs []RepairEntry) (Checkpoint, error) {
	repairs = s.c.keyRepairs(repairs)
	return s.atCursor(ctx, k, cursor, generation, func(sealed []byte) (Checkpoint, error) {
		return s.Store.Unpark(ctx, k, sealed, generation, lease, repairs)
	})
}

// Unwrap returns the store the cursors are encrypted in (storeconfig's
// Prepare readies a DynamoDB store under it).
func (s *encryptedStore) Unwrap() Store { return s.Store }

func (s *encryptedStore) ListCheckpoints(ctx context.Context, scope string) ([]Checkpoint, error) {
	cps, err := s.Store.ListCheckpoints(ctx, scope)
	if err != nil {
		return nil, err
	}
	for i := range cps {
		if cps[i], err = s.checkpoint(cps[i], nil); err != nil {
			return nil, err
		}
	}
	return cps, nil
}

func (s *encryptedStore) ClaimLease(ctx context.Context, k Key, expect Lease, owner string) (Checkpoint, error) {
	return s.checkpoint(s.Store.ClaimLease(ctx, k, expect, owner))
}

func (s *encryptedStore) ReleaseLease(ctx context.Context, k Key, held Lease) (Checkpoint, error) {
	return s.checkpoint(s.Store.ReleaseLease(ctx, k, held))
}

func (s *encryptedStore) PutWitness(ctx context.Context, w reconcile.Witness) error {
	w, err := s.sealWitness(w)
	if err != nil {
		return err
	}
	return s.Store.PutWitness(ctx, w)
}

// sealWitness checks and seals a witness's input cursor and successor.
func (s *encryptedStore) sealWitness(w reconcile.Witness) (reconcile.Witness, error) {
	if err := CheckCursor("successor", w.Successor); err != nil {
		return w, err
	}
	if err := CheckCursor("input cursor", w.InputCursor); err != nil {
		return w, err
	}
	k := Key{Scope: w.Scope, Partition: w.Partition}
	w.InputCursor = s.c.seal(k, w.InputCursor)
	w.Successor = s.c.seal(k, w.Successor)
	return w, nil
}

var _ WitnessGrouper = (*encryptedStore)(nil)

// PutWitnesses seals each witness's cursors as PutWitness does and stores
// the group in one write when the store under it groups witnesses.
func (s *encryptedStore) PutWitnesses(ctx context.Context, ws []reconcile.Witness) error {
	sealed := make([]reconcile.Witness, len(ws))
	for i, w := range ws {
		var err error
		if sealed[i], err = s.sealWitness(w); err != nil {
			return err
		}
	}
	return PutWitnesses(ctx, s.Store, sealed)
}

func (s *encryptedStore) witnesses(ws []reconcile.Witness, err error) ([]reconcile.Witness, error) {
	if err != nil {
		return nil, err
	}
	for i := range ws {
		k := Key{Scope: ws[i].Scope, Partition: ws[i].Partition}
		if ws[i].InputCursor, err = s.c.open(k, ws[i].InputCursor); err != nil {
			return nil, err
		}
		if ws[i].Successor, err = s.c.open(k, ws[i].Successor); err != nil {
			return nil, err
		}
	}
	return ws, nil
}

func (s *encryptedStore) Witnesses(ctx context.Context, k Key, generation uint64) ([]reconcile.Witness, error) {
	return s.witnesses(s.Store.Witnesses(ctx, k, generation))
}

func (s *encryptedStore) WitnessesFrom(ctx context.Context, k Key, fromGeneration uint64) ([]reconcile.Witness, error) {
	return s.witnesses(s.Store.WitnessesFrom(ctx, k, fromGeneration))
}
