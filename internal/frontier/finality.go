package frontier

import (
	"slices"
	"strings"

	"github.com/tidemark/tidemark/provider"
)

// FinalityNote names the members of s whose durable watermark rests on a
// basis other than the source's own certification (an append-only writer
// assertion, a lag; see provider.Contract.Basis), grouped by basis and
// sorted: "append_only_writer assertion (a, b); lag 5m0s (c)". bases maps a
// partition to the basis its checkpoint records; unknown (zero) and
// certified (source) bases are left out. It is "" when s has no proven scalar or no such member: a
// frontier that rests on an assertion says so wherever it is published.
func FinalityNote(s Snapshot, bases map[string]provider.Basis) string {
	if !s.hasScalar() {
		return ""
	}
	by := map[string][]string{}
	for p := range s.Vector {
		if b := bases[p]; !b.IsZero() && !b.Certified() {
			by[b.String()] = append(by[b.String()], p)
		}
	}
	keys := make([]string, 0, len(by))
	for b := range by {
		keys = append(keys, b)
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	for _, b := range keys {
		ps := by[b]
		slices.Sort(ps)
		parts = append(parts, b+" ("+strings.Join(ps, ", ")+")")
	}
	return strings.Join(parts, "; ")
}
