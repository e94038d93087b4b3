package httpprovider

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"
)

// readBody reads what io.ReadAll over an io.LimitReader reads, whatever
// length the response declares (right, too short, too long, unknown) and
// however the body arrives (one byte at a time included), and passes read
// errors on.
func TestReadBodyReadsWhatReadAllReads(t *testing.T) {
	for _, size := range []int{0, 1, 511, 512, 513, 4096, 70000} {
		body := bytes.Repeat([]byte("0123456789abcdef"), size/16+1)[:size]
		for _, declared := range []int64{-1, 0, int64(size), int64(size) / 2, int64(size) * 2} {
			for _, limit := range []int64{int64(size) + 1, int64(size), int64(size) / 3, 1 << 20} {
				for _, oneByte := range []bool{false, true} {
					var r io.Reader = bytes.NewReader(body)
					var w io.Reader = bytes.NewReader(body)
					if oneByte {
						r, w = iotest.OneByteReader(r), iotest.OneByteReader(w)
					}
					want, werr := io.ReadAll(io.LimitReader(w, limit))
					got, gerr := readBody(r, declared, limit)
					require.Equal(t, werr, gerr)
					require.Equal(t, want, got, "size %d, declared %d, limit %d", size, declared, limit)
				}
			}
		}
	}
	boom := errors.New("connection reset")
	got, err := readBody(io.MultiReader(strings.NewReader("part"), iotest.ErrReader(boom)), 100, 1000)
	require.ErrorIs(t, err, boom)
	require.Equal(t, "part", string(got))
}
