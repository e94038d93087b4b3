package frontier

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/tidemark/tidemark/internal/coord"
)

// VectorJSON renders a vector as a JSON object with sorted keys; a
// partition without a watermark is null, an integer watermark a number, any
// other kind its string form.
func VectorJSON(v map[string]coord.Watermark) string {
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		w := v[k]
		switch w.Kind {
		case coord.KindNone:
			b.WriteString("null")
		case coord.KindInteger:
			b.WriteString(strconv.FormatInt(w.Int, 10))
		default:
			vb, _ := json.Marshal(w.String())
			b.Write(vb)
		}
	}
	b.WriteByte('}')
	return b.String()
}
