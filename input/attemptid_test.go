package input

import (
	"fmt"
	"math"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// appendHexPadded writes what fmt's %0<width>x writes, for every width
// and value, shorter and longer than the width.
func TestAppendHexPaddedIsFmtZeroPaddedHex(t *testing.T) {
	for _, v := range []uint64{0, 1, 9, 10, 15, 16, 255, 0xabcdef, 1 << 32, uint64(time.Now().UnixMilli()), math.MaxUint32, math.MaxUint64} {
		for _, width := range []int{0, 1, 8, 12, 16, 20} {
			require.Equal(t, fmt.Sprintf("%0*x", width, v), string(appendHexPadded([]byte("x-"), v, width)[2:]), "value %d, width %d", v, width)
		}
	}
}

// An attempt id is the millisecond clock, the input's base and a sequence
// number, as fmt.Sprintf("%012x-%s-%08x") spells them, and no two are
// alike.
func TestAttemptIDsKeepTheirFormat(t *testing.T) {
	in := &paginatedInput{attemptBase: "b4se"}
	before := time.Now().UnixMilli()
	first := in.newAttemptID()
	in.attemptSeq.Store(0xfffffffe)
	a, b := in.newAttemptID(), in.newAttemptID()
	after := time.Now().UnixMilli()
	require.Regexp(t, `^[0-9a-f]{12}-b4se-00000001$`, first)
	re := regexp.MustCompile(`^([0-9a-f]{12})-b4se-([0-9a-f]{8,})$`)
	for _, id := range []string{first, a, b} {
		m := re.FindStringSubmatch(id)
		require.NotNil(t, m, id)
		var ms int64
		_, err := fmt.Sscanf(m[1], "%x", &ms)
		require.NoError(t, err)
		require.True(t, ms >= before && ms <= after, "%s: clock %d not in [%d, %d]", id, ms, before, after)
	}
	require.Equal(t, "ffffffff", a[len(a)-8:])
	require.Equal(t, "100000000", b[len(b)-9:])
}
