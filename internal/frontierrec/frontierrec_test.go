package frontierrec

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/frontier"
	"github.com/tidemark/tidemark/internal/store"
)

// The membership conversion keeps every field the frontier core reads, the
// unproven partitions and the reason included.
func TestFrontierMembershipKeepsUnprovenAndReason(t *testing.T) {
	m := store.Membership{Scope: "s", Epoch: 3, Partitions: []string{"a", "b"}, Cutover: coord.Integer(90), Proven: false, Reason: "b added without proof", Unproven: []string{"b"}}
	require.Equal(t, frontier.Membership{Epoch: 3, Partitions: []string{"a", "b"}, Cutover: coord.Integer(90), Proven: false, Reason: "b added without proof", Unproven: []string{"b"}}, Membership(m))
}

// A published record round-trips through the core's snapshot; a withheld
// scalar is stored as none and read back as unproven.
func TestFrontierRecordRoundTrip(t *testing.T) {
	for _, snap := range []frontier.Snapshot{
		{Epoch: 2, Scalar: coord.Integer(50), Proven: true, Vector: map[string]coord.Watermark{"a": coord.Integer(50), "b": coord.Integer(70)}, HeldBy: []string{"a"}},
		{Epoch: 3, Vector: map[string]coord.Watermark{"a": coord.Integer(50), "c": {}}, HeldBy: []string{"c"}, Reason: "c has no watermark"},
	} {
		rec := Record("s", snap)
		require.Equal(t, "s", rec.Scope)
		require.Equal(t, snap, Snapshot(rec))
	}
	// A snapshot that carries a scalar it does not prove publishes none.
	rec := Record("s", frontier.Snapshot{Epoch: 4, Scalar: coord.Integer(9), Proven: false, Reason: "unproven"})
	require.True(t, rec.Scalar.IsZero())
	require.False(t, Snapshot(rec).Proven)
}
