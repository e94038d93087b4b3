package chainstore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/chain"
	"github.com/tidemark/tidemark/internal/chain/chainstore"
	"github.com/tidemark/tidemark/internal/membership"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/store/memstore"
)

// afterRecord runs between an incarnation change's two writes: once, after
// the first membership swap through it succeeds.
type afterRecord struct {
	store.Store
	hook func()
}

func (s *afterRecord) SwapMembership(ctx context.Context, prev uint64, next store.Membership) (store.Membership, error) {
	m, err := s.Store.SwapMembership(ctx, prev, next)
	if err == nil && s.hook != nil {
		h := s.hook
		s.hook = nil
		h()
	}
	return m, err
}

// Two writers find the same incarnation change of one partition and
// interleave its two writes: the first records epoch 2, the second epoch 3,
// the first resets the checkpoint at 2, and the second's reset is refused.
// The second writes its reset again from the checkpoint as it now is, so
// the checkpoint carries the epoch the record names and the change can be
// proven; a checkpoint that moved anywhere else is left to its writer.
func TestRefusedResetIntoTheSameIncarnationIsWrittenAgainUnderTheRecordedEpoch(t *testing.T) {
	ctx := context.Background()
	key := store.Key{Scope: "s", Partition: "db"}
	change := membership.IncarnationChange{Partition: "db", From: "sha256:aaaa", To: "sha256:bbbb", Why: "test"}
	for _, tc := range []struct {
		name string
		// between writes the first writer's second write (or another).
		between func(t *testing.T, st store.Store, old store.Checkpoint)
		owed    bool
	}{
		{"the first writer reset at its older epoch", func(t *testing.T, st store.Store, old store.Checkpoint) {
			_, err := st.Promote(ctx, resetFrom(old, 2))
			require.NoError(t, err)
		}, true},
		{"the old incarnation promoted a page meanwhile", func(t *testing.T, st store.Store, old store.Checkpoint) {
			_, err := st.Promote(ctx, store.Promotion{Key: key, FromCursor: old.Cursor, FromGeneration: old.Generation, To: []byte("next"), WitnessID: "a0002", Incarnation: "sha256:aaaa", Epoch: 1})
			require.NoError(t, err)
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := memstore.New()
			_, err := st.SwapMembership(ctx, 0, store.Membership{Scope: "s", Epoch: 1, Partitions: []string{"db"}, Proven: true})
			require.NoError(t, err)
			cp, err := st.CreateCheckpoint(ctx, store.Checkpoint{Key: key, Cursor: []byte("start"), Generation: 1, Epoch: 1})
			require.NoError(t, err)
			old, err := st.Promote(ctx, store.Promotion{Key: key, FromCursor: cp.Cursor, FromGeneration: cp.Generation, To: cp.Cursor, WitnessID: "incarnation:sha256:aaaa", Incarnation: "sha256:aaaa", Epoch: 1})
			require.NoError(t, err)

			first, err := membership.RecordIncarnation(ctx, st, "s", change)
			require.NoError(t, err)
			require.Equal(t, uint64(2), first.Epoch)

			racing := &afterRecord{Store: st, hook: func() { tc.between(t, st, old) }}
			r := chainstore.Reincarnate(ctx, racing, chain.Reincarnate{Key: key, From: change.From, To: change.To, Why: change.Why, Reset: resetFrom(old, 0)})
			require.Equal(t, uint64(3), r.Epoch, "the second writer recorded its own epoch")
			m, err := st.LoadMembership(ctx, "s")
			require.NoError(t, err)
			require.Equal(t, uint64(3), m.Incarnations["db"])
			now, err := st.LoadCheckpoint(ctx, key)
			require.NoError(t, err)
			if !tc.owed {
				require.ErrorIs(t, r.Err, store.ErrFenced)
				assert.Equal(t, "sha256:aaaa", now.Incarnation, "the other writer's checkpoint is left as it is")
				return
			}
			require.NoError(t, r.Err)
			assert.Equal(t, "sha256:bbbb", r.Checkpoint.Incarnation)
			assert.Equal(t, uint64(3), r.Checkpoint.IncarnationEpoch, "the checkpoint carries the epoch the record names")
			assert.Equal(t, r.Checkpoint, now)
			assert.Equal(t, []byte("start"), now.Cursor, "read from the start of the new incarnation")
		})
	}
}

// resetFrom is the reset into sha256:bbbb of checkpoint cp at epoch e.
func resetFrom(cp store.Checkpoint, e uint64) store.Promotion {
	return store.Promotion{
		Key: cp.Key, FromCursor: cp.Cursor, FromGeneration: cp.Generation, To: []byte("start"),
		WitnessID: "incarnation:sha256:bbbb", Incarnation: "sha256:bbbb", Reset: true, Epoch: e,
	}
}
