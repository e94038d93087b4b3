//go:build unix

package e2e

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/fakeapi"
)

func memberInt(v int64) *int64 { return &v }

// TestMembershipOraclesCatchViolations: the oracles of the live membership
// test accept a run that keeps the rules and name the line that breaks one.
func TestMembershipOraclesCatchViolations(t *testing.T) {
	events := []fakeapi.ShardEvent{
		{ID: "a:1", Partition: "a", Pos: 1}, {ID: "b:2", Partition: "b", Pos: 2},
		{ID: "a:3", Partition: "a", Pos: 3}, {ID: "x:4", Partition: "x", Pos: 4},
		{ID: "b:5", Partition: "b", Pos: 5},
	}
	vec := map[string]*int64{"a": memberInt(3), "b": memberInt(2)}
	line := func(id, part string, at int64, frontier *int64, epoch uint64) memberLine {
		return memberLine{ID: id, Partition: part, At: at, Epoch: epoch, Frontier: frontier, FrontierEpoch: epoch, Vector: vec}
	}
	errText := "no membership"
	for _, tc := range []struct {
		name      string
		outs      map[string][]memberLine
		frontier  string // violation substring of memberFrontierOracle ("" none)
		monotone  string
		epochBack int
		lineage   string
		checked   int
		withError int
	}{
		{
			name: "a frontier of delivered events; x is no member",
			outs: map[string][]memberLine{
				"i1": {line("a:1", "a", 10, nil, 1), line("a:3", "a", 30, memberInt(2), 1)},
				"i2": {line("b:2", "b", 20, nil, 1), line("b:5", "b", 50, memberInt(4), 1)},
			},
			checked: 2, lineage: "",
		},
		{
			name: "a frontier above an undelivered member event",
			outs: map[string][]memberLine{
				"i1": {line("a:1", "a", 10, nil, 1), line("a:3", "a", 30, memberInt(2), 1)},
			},
			frontier: "event b:2 at position 2 of member b was first delivered at 0", checked: 1,
		},
		{
			name: "a frontier covering the message's own event",
			outs: map[string][]memberLine{
				"i1": {line("a:1", "a", 10, memberInt(1), 1)},
			},
			frontier: "event a:1 at position 1 of member a was first delivered at 10", checked: 1,
		},
		{
			name: "a frontier attached before the event was delivered elsewhere",
			outs: map[string][]memberLine{
				"i1": {line("a:1", "a", 10, nil, 1), line("a:3", "a", 15, memberInt(2), 1)},
				"i2": {line("b:2", "b", 20, nil, 1)},
			},
			frontier: "event b:2 at position 2 of member b was first delivered at 20", checked: 1,
		},
		{
			name: "a frontier lowered within an epoch",
			outs: map[string][]memberLine{
				"i1": {line("a:1", "a", 10, nil, 1), line("b:2", "b", 20, nil, 1), line("a:3", "a", 30, memberInt(2), 1), line("a:3", "a", 40, memberInt(1), 1)},
			},
			monotone: "went down from 2 to 1", checked: 2,
		},
		{
			name: "a frontier withdrawn within an epoch, stamped out of file order",
			outs: map[string][]memberLine{
				"i1": {line("a:1", "a", 10, nil, 1), line("a:3", "a", 40, nil, 1), line("b:2", "b", 20, nil, 1), line("a:3", "a", 30, memberInt(2), 1)},
			},
			monotone: "was withdrawn", checked: 1,
		},
		{
			name: "a lower frontier in a newer epoch; an errored line carries none",
			outs: map[string][]memberLine{
				"i1": {line("a:1", "a", 10, nil, 1), line("b:2", "b", 20, nil, 1), line("a:3", "a", 30, memberInt(2), 1), line("a:3", "a", 40, memberInt(1), 2),
					{ID: "b:5", Partition: "b", At: 50, Epoch: 2, Error: &errText}},
			},
			checked: 2, withError: 1,
		},
		{
			name: "a message of the epoch before the current one",
			outs: map[string][]memberLine{
				"i1": {line("a:1", "a", 10, nil, 2), line("b:2", "b", 20, nil, 1)},
			},
			epochBack: 1,
		},
		{
			name: "a frontier lowered within an epoch, across a newer epoch's line",
			outs: map[string][]memberLine{
				"i1": {line("a:1", "a", 10, nil, 1), line("b:2", "b", 20, nil, 1), line("a:3", "a", 30, memberInt(2), 1),
					line("a:3", "a", 35, memberInt(3), 2), line("a:3", "a", 40, memberInt(1), 1)},
			},
			monotone: "the frontier of epoch 1 went down from 2 to 1", checked: 3, epochBack: 1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checked, withError, v := memberFrontierOracle(tc.outs, events)
			if tc.frontier == "" {
				require.Empty(t, v)
			} else {
				require.Contains(t, v, tc.frontier)
			}
			require.Equal(t, tc.checked, checked)
			require.Equal(t, tc.withError, withError)
			mv, back := memberMonotoneOracle(tc.outs)
			if tc.monotone == "" {
				require.Empty(t, mv)
			} else {
				require.Contains(t, mv, tc.monotone)
			}
			require.Equal(t, tc.epochBack, back)
		})
	}

	lineage := []struct {
		name      string
		outs      map[string][]memberLine
		violation string
	}{
		{"the parent ends before the first child", map[string][]memberLine{
			"i1": {line("p:1", "p", 10, nil, 1), line("p:2", "p", 20, nil, 1)},
			"i2": {line("p.1:3", "p.1", 30, nil, 1), line("p:2", "p", 25, nil, 1)},
		}, ""},
		{"a child before the parent's last event in another output", map[string][]memberLine{
			"i1": {line("p:1", "p", 10, nil, 1), line("p:2", "p", 40, nil, 1)},
			"i2": {line("p.2:3", "p.2", 30, nil, 1)},
		}, "p.2:3 of a child of p was emitted 10ns before the parent's last event"},
		{"no child event", map[string][]memberLine{"i1": {line("p:1", "p", 10, nil, 1)}}, "no event of [p.1 p.2] delivered"},
	}
	for _, tc := range lineage {
		t.Run(tc.name, func(t *testing.T) {
			_, _, v := memberLineageOracle(tc.outs, "p", []string{"p.1", "p.2"})
			if tc.violation == "" {
				require.Empty(t, v)
			} else {
				require.Contains(t, v, tc.violation)
			}
		})
	}
}
