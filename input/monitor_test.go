package input

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/e2etest"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/provider/simulated"
)

// regressingPages serves a partition's dense events 1..n in pages of 10
// after the cursor, each page complete through its last position, except
// that every page after the first certifies 5: a watermark below the one
// its predecessor certified.
func regressingPages(n int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		part := strings.TrimPrefix(r.URL.Path, "/events/")
		after, err := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
		if err != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		evs := []flakyEvent{}
		for pos := after + 1; pos <= n && len(evs) < 10; pos++ {
			evs = append(evs, flakyEvent{ID: simulated.EventID(part, pos), Pos: pos, V: "v"})
		}
		top := after
		if len(evs) > 0 {
			top = evs[len(evs)-1].Pos
		}
		through := top
		if after > 0 {
			through = 5
		}
		w.Header().Set("Content-Type", "application/json")
		b, _ := json.Marshal(map[string]any{"events": evs, "next": strconv.FormatInt(top, 10), "through": through})
		_, _ = w.Write(b)
	})
}

// TestStreamContractViolationWithdrawsTheFrontierAndParks: a source whose
// certified watermark goes backwards (10, then 5) breaks the claim the
// partition published. The input counts it in
// tidemark_contract_violations{watermark_regressed}, logs it once at warn
// with the partition and the evidence (no raw cursor), withdraws the
// scope's scalar frontier (a new, unproven membership epoch naming the
// partition and the kind), delivers the page that showed it and promotes
// it with the counts, then parks the partition (recovery: park). No event
// is skipped on the way. The first regression is also evidence of a
// recreated source (positions never go back under ordered positions, and
// the source declares no incarnation to check): the partition is reset to
// its start in a new, unproven epoch, once per process; the same evidence
// again is the contract violation, not another reset.
func TestStreamContractViolationWithdrawsTheFrontierAndParks(t *testing.T) {
	const n = 20
	srv := httptest.NewServer(regressingPages(n))
	t.Cleanup(srv.Close)
	forEachBackend(t, func(t *testing.T, b backend) {
		h := newHarness(t, b, []string{"p0"}, n)
		yaml := fmt.Sprintf(`paginated_partitions:
  scope: %s
  partitions: [ p0 ]
  poll_interval: 5ms
  park_check_interval: 20ms
  store_backoff: 10ms
  checkpoint:
%s
  http:
    url: '%s/events/${! @partition }?after=${! if @cursor == "" { "0" } else { @cursor } }'
    events: root = this.events
    event_position: root = this.pos
    successor: root = this.next
    complete_through: root = this.through
    contract:
      empty_page: final_through_watermark
      positions: ordered
      watermark_covers_positions: true
      finality: source
      recovery: park
`, h.scope, indent(h.ckYAML, "    "), srv.URL)
		r := h.start(h.buildYAML(yaml, nil, nil, ""))
		ctx := context.Background()
		key := store.Key{Scope: h.scope, Partition: "p0"}
		var cp store.Checkpoint
		e2etest.WaitFor(t, e2etest.Patience, "p0 parked on the contract violation", func() (bool, string) {
			var err error
			cp, err = h.st.LoadCheckpoint(ctx, key)
			if err != nil {
				return false, err.Error()
			}
			return cp.Parked != "", fmt.Sprintf("generation %d, watermark %s", cp.Generation, cp.Watermark)
		})
		require.False(t, r.finished())

		// The generation of the page that showed it depends on where the
		// one reset fell (the pages read ahead before it); the page was
		// promoted before the park, so the checkpoint is one above it.
		mg := regexp.MustCompile(`^contract violation at generation (\d+) cursor sha256:`).FindStringSubmatch(cp.Parked)
		require.NotNil(t, mg, cp.Parked)
		shownAt, err := strconv.ParseUint(mg[1], 10, 64)
		require.NoError(t, err)
		assert.Contains(t, cp.Parked, "certifies complete through 5, below the durable complete-through watermark 10")
		assert.Equal(t, map[string]uint64{"watermark_regressed": 1}, cp.Violations, "the count rode on the promotion of the page that showed it")
		assert.Equal(t, shownAt+1, cp.Generation, "the page that showed it was promoted before the park")
		assert.Equal(t, "10", cp.Watermark.String(), "the durable watermark never goes down")
		h.mu.Lock()
		for pos := int64(1); pos <= n; pos++ {
			assert.Positive(t, h.delivered[simulated.EventID("p0", pos)], "event %d delivered", pos)
		}
		h.mu.Unlock()

		m, err := h.st.LoadMembership(ctx, h.scope)
		require.NoError(t, err)
		assert.False(t, m.Proven, "the scalar frontier is withdrawn")
		assert.Equal(t, []string{"p0"}, m.Unproven)
		assert.Contains(t, m.Reason, "p0: incarnation changed from none recorded", "the first regression reset the partition into a new, unproven epoch; the violation finds the scalar already withheld")

		assert.Equal(t, int64(1), h.metrics.get("tidemark_incarnation_changes"), "evidence no incarnation check confirmed resets a partition once per process")

		assert.Equal(t, int64(1), h.metrics.get("tidemark_contract_violations{watermark_regressed}"))
		logs := h.logs.String()
		assert.Equal(t, 1, countWarn(logs, "Partition p0: contract violation watermark_regressed: partition p0:"), "logged once, at warn")
		assert.NotContains(t, logs, "after=10", "cursors appear only as hashes")
	})
}
