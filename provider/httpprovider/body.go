package httpprovider

import "io"

// maxPresize bounds the buffer readBody allocates before reading.
const maxPresize = 8 << 20

// readBody reads at most limit bytes of r, as io.ReadAll(io.LimitReader(r,
// limit)) does, into a buffer sized from the declared length (when known;
// within the limit and maxPresize, a declared length being only a claim)
// instead of growing it from 512 bytes.
func readBody(r io.Reader, declared, limit int64) ([]byte, error) {
	size := int64(512)
	if declared > 0 {
		size = min(declared+1, limit, maxPresize) // +1: the read that sees the end
	}
	b := make([]byte, 0, size)
	lr := io.LimitReader(r, limit)
	for {
		n, err := lr.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			if err == io.EOF { // as io.ReadAll: Read returns io.EOF itself
				return b, nil
			}
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
}
