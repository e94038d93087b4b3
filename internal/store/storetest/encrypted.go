package storetest

import (
	"bytes"
	"github.com/stretchr/testify/assert"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/publish"
	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/store"
)

// RunEncrypted checks store.Encrypted over a backend: newRaw returns an
// empty backend store. Cursors and successors are never stored in clear,
// fencing holds (equal cursors encrypt equal), a key rotation keeps
// reading and fencing what older keys wrote, and plaintext written before
// encryption was turned on is read and promoted from.
func RunEncrypted(t *testing.T, newRaw func(t *testing.T) store.Store) {
	keys := func(ids ...string) []store.CursorKey {
		var out []store.CursorKey
		for _, id := range ids {
			out = append(out, store.CursorKey{ID: id, Key: bytes.Repeat([]byte(id[:1]), 32)})
		}
		return out
	}
	secret := []byte("secret-cursor-0001")
	next := []byte("secret-successor-0002")

	t.Run("KeyedDigestsAtRest", func(t *testing.T) {
		// A park reason and a repair's audit entry name cursors by their
		// plain SHA-256 digest (reconcile.CursorHash, as logs show them),
		// which can be found by hashing candidate offsets or times: at
		// rest they are keyed, and the same digest keys the same way.
		raw := newRaw(t)
		s, err := store.Encrypted(raw, keys("a"), "a")
		require.NoError(t, err)
		plain := reconcile.CursorHash([]byte("1000"))
		cp := create(t, s, key, "C0")
		parked, err := s.SetParked(ctx(t), key, cp.Cursor, cp.Generation, store.Lease{}, "expired cursor "+plain+" at generation 1")
		require.NoError(t, err)
		stored, err := raw.LoadCheckpoint(ctx(t), key)
		require.NoError(t, err)
		require.NotContains(t, stored.Parked, plain)
		require.Contains(t, stored.Parked, "expired cursor hmac:")
		assert.Equal(t, stored.Parked, parked.Parked, "the reason read back is the one stored")
		keyed := strings.TrimSuffix(strings.TrimPrefix(stored.Parked, "expired cursor "), " at generation 1")
		// A failure note too.
		noted, err := s.NoteFailure(ctx(t), key, cp.Cursor, cp.Generation, store.Lease{}, "fetches of cursor "+plain+" fail")
		require.NoError(t, err)
		stored, err = raw.LoadCheckpoint(ctx(t), key)
		require.NoError(t, err)
		assert.Equal(t, "fetches of cursor "+keyed+" fail", stored.Failing)
		assert.Equal(t, stored.Failing, noted.Failing)
		entry := repairEntry(1, "restart --partition p0 --cursor "+plain)
		entry.Previous["cursor"] = plain
		cp, err = s.Unpark(ctx(t), key, cp.Cursor, cp.Generation, store.Lease{}, []store.RepairEntry{entry})
		require.NoError(t, err)
		stored, err = raw.LoadCheckpoint(ctx(t), key)
		require.NoError(t, err)
		require.Len(t, stored.Repairs, 1)
		assert.Equal(t, "restart --partition p0 --cursor "+keyed, stored.Repairs[0].Command)
		assert.Equal(t, keyed, stored.Repairs[0].Previous["cursor"])
		assert.Equal(t, stored.Repairs, cp.Repairs)
		// Another key keys it otherwise; without keys nothing is keyed.
		other, err := store.Encrypted(newRaw(t), keys("b"), "b")
		require.NoError(t, err)
		cpb := create(t, other, key, "C0")
		pb, err := other.SetParked(ctx(t), key, cpb.Cursor, cpb.Generation, store.Lease{}, plain)
		require.NoError(t, err)
		assert.NotEqual(t, keyed, pb.Parked)
		plainStore := store.RefuseSealed(newRaw(t))
		cpp := create(t, plainStore, key, "C0")
		pp, err := plainStore.SetParked(ctx(t), key, cpp.Cursor, cpp.Generation, store.Lease{}, plain)
		require.NoError(t, err)
		assert.Equal(t, plain, pp.Parked)
	})

	t.Run("KeyedMembershipReasonPublishedOnce", func(t *testing.T) {
		// A withdrawal's reason names the cursor of the page that showed
		// the violation: the membership record keys it, the frontier a
		// publisher derives from the record carries the keyed digest, and
		// a second round finds nothing to publish (no republish loop).
		raw := newRaw(t)
		s, err := store.Encrypted(raw, keys("a"), "a")
		require.NoError(t, err)
		plain := reconcile.CursorHash([]byte("1000"))
		const scope = "keyed-membership"
		_, err = s.SwapMembership(ctx(t), 0, store.Membership{Scope: scope, Epoch: 1, Partitions: []string{"p"}, Proven: true})
		require.NoError(t, err)
		reason := "withdrawn: partition p: contract violation late_position at generation 3 cursor " + plain
		m, err := s.SwapMembership(ctx(t), 1, store.Membership{Scope: scope, Epoch: 2, Partitions: []string{"p"}, Unproven: []string{"p"}, Reason: reason,
			Repairs: []store.RepairEntry{repairEntry(1, "advance-epoch --cutover 5 (cursor "+plain+")")}})
		require.NoError(t, err)
		stored, err := raw.LoadMembership(ctx(t), scope)
		require.NoError(t, err)
		require.NotContains(t, stored.Reason, plain)
		require.Contains(t, stored.Reason, "cursor hmac:")
		require.NotContains(t, stored.Repairs[0].Command, plain)
		assert.Equal(t, stored.Reason, m.Reason, "the record read back is the one stored")

		pub := publish.NewPublisher(s, scope)
		_, f, _, err := pub.Round(ctx(t))
		require.NoError(t, err)
		require.Contains(t, f.Reason, "cursor hmac:", "the frontier's reason is the membership's, keyed")
		rf, err := raw.LoadFrontier(ctx(t), scope)
		require.NoError(t, err)
		require.NotContains(t, rf.Reason, plain)
		r, err := pub.Prepare(ctx(t))
		require.NoError(t, err)
		assert.Nil(t, r.Next, "the next round publishes nothing: the computed frontier equals the stored one")
		// A fresh publisher (another instance) agrees.
		r, err = publish.NewPublisher(s, scope).Prepare(ctx(t))
		require.NoError(t, err)
		assert.Nil(t, r.Next)
	})

	t.Run("NoPlaintextAtRest", func(t *testing.T) {
		raw := newRaw(t)
		s, err := store.Encrypted(raw, keys("a"), "a")
		require.NoError(t, err)
		cp := create(t, s, key, string(secret))
		require.Equal(t, secret, cp.Cursor)
		require.NoError(t, s.PutWitness(ctx(t), reconcile.Witness{Scope: key.Scope, Partition: key.Partition, Generation: 1, AttemptID: "w1", InputCursor: secret, Successor: next, Disposition: reconcile.Pending}))
		cp = promote(t, s, promotion(cp, string(next), "w1"))
		require.Equal(t, next, cp.Cursor)

		stored, err := raw.LoadCheckpoint(ctx(t), key)
		require.NoError(t, err)
		require.NotContains(t, string(stored.Cursor), string(next))
		ws, err := raw.WitnessesFrom(ctx(t), key, 0)
		require.NoError(t, err)
		require.Len(t, ws, 1)
		for _, b := range [][]byte{ws[0].InputCursor, ws[0].Successor} {
			require.NotContains(t, string(b), "secret-")
		}
		got, err := s.WitnessesFrom(ctx(t), key, 0)
		require.NoError(t, err)
		require.Equal(t, secret, got[0].InputCursor)
		require.Equal(t, next, got[0].Successor)
	})

	t.Run("FencingComparesEqualCursors", func(t *testing.T) {
		s, err := store.Encrypted(newRaw(t), keys("a"), "a")
		require.NoError(t, err)
		cp := create(t, s, key, string(secret))
		promote(t, s, promotion(cp, string(next), "w1"))
		// A stale writer (the old cursor and generation) is fenced.
		_, err = s.Promote(ctx(t), promotion(cp, "other", "w2"))
		require.ErrorIs(t, err, store.ErrFenced)
		var fe *store.FenceError
		require.ErrorAs(t, err, &fe)
		require.NotNil(t, fe.Winner)
		require.Equal(t, next, fe.Winner.Cursor, "the winner is read back decrypted")
	})

	t.Run("RotationKeepsReadingAndFencing", func(t *testing.T) {
		raw := newRaw(t)
		old, err := store.Encrypted(raw, keys("a"), "a")
		require.NoError(t, err)
		cp := create(t, old, key, string(secret))
		_, err = old.SetParked(ctx(t), key, cp.Cursor, cp.Generation, store.Lease{}, "")
		require.NoError(t, err)

		rotated, err := store.Encrypted(raw, keys("a", "b"), "b")
		require.NoError(t, err)
		got, err := rotated.LoadCheckpoint(ctx(t), key)
		require.NoError(t, err)
		require.Equal(t, secret, got.Cursor, "the old key still decrypts")
		parked, err := rotated.SetParked(ctx(t), key, got.Cursor, got.Generation, store.Lease{}, "parked for a test")
		require.NoError(t, err, "a conditional write on a cursor sealed under the old key")
		require.Equal(t, "parked for a test", parked.Parked)
		_, err = rotated.SetParked(ctx(t), key, parked.Cursor, parked.Generation, store.Lease{}, "")
		require.NoError(t, err)
		cp2 := promote(t, rotated, promotion(got, string(next), "w1"))
		require.Equal(t, next, cp2.Cursor)
		_, err = rotated.Promote(ctx(t), promotion(got, "stale", "w2"))
		require.ErrorIs(t, err, store.ErrFenced, "a stale writer is still fenced after a rotation")

		onlyNew, err := store.Encrypted(raw, keys("b"), "b")
		require.NoError(t, err)
		back, err := onlyNew.LoadCheckpoint(ctx(t), key)
		require.NoError(t, err, "the promotion re-encrypted under the new key")
		require.Equal(t, next, back.Cursor)
		onlyOld, err := store.Encrypted(raw, keys("a"), "a")
		require.NoError(t, err)
		_, err = onlyOld.LoadCheckpoint(ctx(t), key)
		require.ErrorContains(t, err, `key id "b"`)
	})

	t.Run("PlaintextWrittenBeforeEncryption", func(t *testing.T) {
		raw := newRaw(t)
		cp := create(t, raw, key, string(secret))
		s, err := store.Encrypted(raw, keys("a"), "a")
		require.NoError(t, err)
		got, err := s.LoadCheckpoint(ctx(t), key)
		require.NoError(t, err)
		require.Equal(t, cp, got)
		cp2 := promote(t, s, promotion(got, string(next), "w1"))
		require.Equal(t, next, cp2.Cursor)
		stored, err := raw.LoadCheckpoint(ctx(t), key)
		require.NoError(t, err)
		require.NotContains(t, string(stored.Cursor), string(next))
	})

	t.Run("LargestCursor", func(t *testing.T) {
		s, err := store.Encrypted(newRaw(t), keys("a"), "a")
		require.NoError(t, err)
		cp := create(t, s, key, "")
		big := randomBytes(7, store.MaxCursorBytes)
		got := promote(t, s, promotion(cp, string(big), "w1"))
		require.Equal(t, big, got.Cursor)
		_, err = s.Promote(ctx(t), promotion(got, string(randomBytes(8, store.MaxCursorBytes+1)), "w2"))
		require.ErrorIs(t, err, store.ErrInvalid)
	})
}
