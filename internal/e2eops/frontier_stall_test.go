package e2eops

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/store"
)

// outLine is one output line: the frontier metadata partition_frontier
// attached to one event.
type outLine struct {
	Partition string  `json:"partition"`
	Position  string  `json:"position"`
	Frontier  *string `json:"frontier"`
	Epoch     string  `json:"epoch"`
	Vector    string  `json:"vector"`
	HeldBy    string  `json:"held_by"`
	Reason    *string `json:"reason"`
}

func (l outLine) heldBy() []string {
	if l.HeldBy == "" {
		return nil
	}
	return strings.Split(l.HeldBy, ",")
}

// readOutput parses the complete lines of the output file (a line being
// written when the process stopped is ignored).
func readOutput(t *testing.T, path string) []outLine {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	s := string(b)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	} else {
		return nil
	}
	var out []outLine
	for n, raw := range strings.Split(s, "\n") {
		var l outLine
		require.NoError(t, json.Unmarshal([]byte(raw), &l), "output line %d: %q", n+1, raw)
		out = append(out, l)
	}
	return out
}

const (
	stallEvents  = 200
	stallPage    = 20
	stallStalled = "p1"
	stallIdle    = "p2"
)

// TestFrontierHeldByStalledPartitionThenAdvances runs the
// binary against dynalite with the simulated provider: p0 reads its events,
// p1 is stalled (empty pages without evidence for its first 40 fetches, then
// it recovers) and p2 is idle (no events; its empty pages are final through
// an advancing heartbeat). The pipeline attaches the partition_frontier
// metadata to every event and writes it to a file. The output must show
// the frontier withheld and held by the stalled p1 first, then a proven
// frontier advancing once p1 recovers; never decreasing within an epoch;
// never above any partition's final durable watermark.
func TestFrontierHeldByStalledPartitionThenAdvances(t *testing.T) {
	for _, source := range []string{"feed", "store"} {
		t.Run("source="+source, func(t *testing.T) {
			e := newEnv(t)
			scope := "frontier-stall-" + source
			outPath := filepath.Join(e.dir, "out.jsonl")
			cfg := fmt.Sprintf(`
http: { enabled: false }
logger: { level: info }
input:
  paginated_partitions:
    scope: %[1]s
    partitions: [ p0, p1, p2 ]
    poll_interval: 50ms
    frontier_publish_interval: 100ms
    exit_when_complete: false
    max_pages_in_flight: 1
    checkpoint: %[2]s
    simulated:
      events_per_partition: %[5]d
      page_size: %[6]d
      latency: 20ms
      stall: [ %[7]s ]
      stall_fetches: 40
      idle: [ %[8]s ]
pipeline:
  threads: 1
  processors:
    - partition_frontier:
        scope: %[1]s
        source: %[3]s
        refresh_interval: 20ms
        checkpoint: %[2]s
    - mapping: |
        root.partition = @tidemark_partition
        root.position = @tidemark_position
        root.frontier = @tidemark_frontier
        root.epoch = @tidemark_frontier_epoch
        root.vector = @tidemark_frontier_vector
        root.held_by = @tidemark_frontier_held_by
        root.reason = @tidemark_frontier_reason
output:
  file: { path: %[4]q, codec: lines }
`, scope, e.checkpointYAML(), source, outPath, stallEvents, stallPage, stallStalled, stallIdle)
			p := e.run("frontier-stall", cfg)

			// Every event of p0 and of the recovered p1 reaches the output.
			waitFor(t, p, "every event of p0 and p1 in the output", func() (bool, string) {
				lines := readOutput(t, outPath)
				seen := map[string]int{}
				for _, l := range lines {
					if pos, _ := strconv.Atoi(l.Position); pos == stallEvents {
						seen[l.Partition]++
					}
				}
				return seen["p0"] > 0 && seen["p1"] > 0, fmt.Sprintf("%d lines, last events seen: %v", len(lines), seen)
			})
			// Let the last pages be promoted and the frontier published.
			waitFor(t, p, "p0 and p1 durable through their last event", func() (bool, string) {
				a, b := durable(t, e.st, scope, "p0"), durable(t, e.st, scope, "p1")
				return a.Int == stallEvents && b.Int == stallEvents, fmt.Sprintf("p0 %s p1 %s", a, b)
			})
			p.Stop(stopGrace)

			lines := readOutput(t, outPath)
			require.NotEmpty(t, lines)
			final := map[string]int64{}
			for _, part := range []string{"p0", "p1", "p2"} {
				w := durable(t, e.st, scope, part)
				require.Equal(t, coord.KindInteger, w.Kind, "partition %s has a final durable watermark", part)
				final[part] = w.Int
			}
			t.Logf("%d output lines; final durable watermarks %v", len(lines), final)
			assert.Equal(t, int64(stallEvents), final["p0"])
			assert.Equal(t, int64(stallEvents), final["p1"])
			assert.Greater(t, final["p2"], int64(0), "the idle partition advanced through its final empty pages")

			// 1. Held by the stalled partition first: every event before p1's
			// first one carries no scalar, and p1 holds the frontier back.
			firstP1 := -1
			for i, l := range lines {
				if l.Partition == stallStalled {
					firstP1 = i
					break
				}
			}
			require.Greater(t, firstP1, 0, "p0's events come out while p1 is stalled")
			for i, l := range lines[:firstP1] {
				require.Nil(t, l.Frontier, "line %d (%s/%s): no scalar while p1 is stalled: %+v", i+1, l.Partition, l.Position, l)
				require.Contains(t, l.heldBy(), stallStalled, "line %d: the stalled partition holds the frontier back: %+v", i+1, l)
				require.NotNil(t, l.Reason, "line %d: a withheld scalar says why", i+1)
				require.Contains(t, *l.Reason, stallStalled, "line %d", i+1)
				var v map[string]*int64
				require.NoError(t, json.Unmarshal([]byte(l.Vector), &v))
				require.Contains(t, v, stallStalled)
				require.Nil(t, v[stallStalled], "line %d: p1 has no complete-through watermark while stalled", i+1)
			}

			// 2. Then the frontier advances.
			var proven []int64
			for _, l := range lines[firstP1:] {
				if l.Frontier != nil {
					proven = append(proven, mustInt(t, *l.Frontier))
				}
			}
			require.NotEmpty(t, proven, "a proven frontier appears after p1 recovered")
			var distinct []int64
			for _, f := range proven {
				if len(distinct) == 0 || distinct[len(distinct)-1] != f {
					distinct = append(distinct, f)
				}
			}
			t.Logf("%d events before p1's first one (frontier withheld, held by p1); then frontiers %v", firstP1, distinct)
			assert.Greater(t, proven[len(proven)-1], proven[0], "the frontier advances after the recovery")

			// 3. Never decreasing within an epoch, never withdrawn once
			// proven; 4. never above a partition's final watermark; always
			// the minimum of the vector it came with.
			last := map[string]int64{}
			for i, l := range lines {
				require.NotEmpty(t, l.Epoch, "line %d", i+1)
				var v map[string]*int64
				require.NoError(t, json.Unmarshal([]byte(l.Vector), &v), "line %d", i+1)
				require.Len(t, v, 3, "line %d: the vector names every partition of the epoch", i+1)
				for part, w := range v {
					if w != nil {
						require.LessOrEqual(t, *w, final[part], "line %d: %s's watermark %d leads its final durable watermark %d", i+1, part, *w, final[part])
					}
				}
				prev, had := last[l.Epoch]
				if l.Frontier == nil {
					require.False(t, had, "line %d: the frontier %d of epoch %s was withdrawn", i+1, prev, l.Epoch)
					continue
				}
				f := mustInt(t, *l.Frontier)
				require.GreaterOrEqual(t, f, prev, "line %d: the frontier went back from %d to %d in epoch %s", i+1, prev, f, l.Epoch)
				last[l.Epoch] = f
				lo := int64(-1)
				for part, w := range v {
					require.NotNil(t, w, "line %d: a scalar while %s has no watermark", i+1, part)
					if lo < 0 || *w < lo {
						lo = *w
					}
					require.LessOrEqual(t, f, final[part], "line %d: frontier %d exceeds %s's final watermark %d", i+1, f, part, final[part])
				}
				require.Equal(t, lo, f, "line %d: the frontier is the minimum of its vector %s", i+1, l.Vector)
				for _, h := range l.heldBy() {
					require.Equal(t, f, *v[h], "line %d: %s holds the frontier, so it is at the minimum", i+1, h)
				}
			}

			// The published frontier (store record, read by the status
			// command) obeys the same bound.
			s := e.status(scope)
			if s.Published != nil {
				pub := mustInt(t, strings.Fields(*s.Published)[0])
				for part, w := range final {
					assert.LessOrEqual(t, pub, w, "the published frontier exceeds %s's final watermark", part)
				}
			}
		})
	}
}

func durable(t *testing.T, st store.Store, scope, part string) coord.Watermark {
	t.Helper()
	cp, err := st.LoadCheckpoint(context.Background(), store.Key{Scope: scope, Partition: part})
	if err != nil {
		return coord.Watermark{}
	}
	return cp.Watermark
}

func mustInt(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	require.NoError(t, err, "not an integer: %q", s)
	return n
}
