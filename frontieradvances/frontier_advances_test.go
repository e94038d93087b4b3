package frontieradvances

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/redpanda-data/benthos/v4/public/components/pure"
	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/frontiermeta"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/store/memstore"
)

// publisher advances the published frontier record of a scope the way the
// input does: PublishFrontier with the record it last wrote as prev.
type publisher struct {
	t     *testing.T
	st    store.Store
	scope string
	prev  store.Frontier
}

func (p *publisher) publish(epoch uint64, scalar int64, vector map[string]int64, heldBy []string, reason string) {
	p.t.Helper()
	next := store.Frontier{Scope: p.scope, Epoch: epoch, Vector: map[string]coord.Watermark{}, HeldBy: heldBy, Reason: reason}
	if scalar != 0 {
		next.Scalar = coord.Integer(scalar)
	}
	for part, w := range vector {
		if w != 0 {
			next.Vector[part] = coord.Integer(w)
		} else {
			next.Vector[part] = coord.Watermark{}
		}
	}
	f, err := p.st.PublishFrontier(context.Background(), p.prev, next)
	require.NoError(p.t, err)
	p.prev = f
}

// readAdvance reads one message within d; nil when none came.
func readAdvance(t *testing.T, a *advancesInput, d time.Duration) (*Advance, *service.Message) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	msg, ack, err := a.Read(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		return nil, nil
	}
	require.NoError(t, err)
	require.NoError(t, ack(context.Background(), nil))
	b, err := msg.AsBytes()
	require.NoError(t, err)
	var adv Advance
	require.NoError(t, json.Unmarshal(b, &adv))
	return &adv, msg
}

// quiet is long enough for many polls of a 2ms poll interval.
const quiet = 80 * time.Millisecond

func requireNoAdvance(t *testing.T, a *advancesInput, why string) {
	t.Helper()
	adv, _ := readAdvance(t, a, quiet)
	require.Nil(t, adv, "no message expected: %s; got %+v", why, adv)
}

func requireAdvance(t *testing.T, a *advancesInput) (*Advance, *service.Message) {
	t.Helper()
	adv, msg := readAdvance(t, a, 5*time.Second)
	require.NotNil(t, adv, "a message was expected")
	return adv, msg
}

func ptr(s string) *string { return &s }

// frontier_advances emits one message per advance of the published frontier
// and one per new epoch (even with the scalar withheld), never one for a
// publication that does not advance the scalar, however often it polls.
func TestFrontierAdvancesOncePerAdvanceAndPerEpoch(t *testing.T) {
	st := memstore.New()
	scope := newScope(t)
	a := &advancesInput{scope: scope, every: 2 * time.Millisecond, st: st}
	require.NoError(t, a.Connect(context.Background()))
	pub := &publisher{t: t, st: st, scope: scope}

	requireNoAdvance(t, a, "nothing is published yet")

	// Epoch 1, B without evidence: the first message describes the current
	// record, scalar withheld.
	pub.publish(1, 0, map[string]int64{"A": 120, "B": 0}, []string{"B"}, "1 of 2 partitions have no complete-through watermark: B")
	adv, msg := requireAdvance(t, a)
	assert.Equal(t, Advance{Scope: scope, Epoch: 1, Vector: json.RawMessage(`{"A":120,"B":null}`), HeldBy: []string{"B"},
		Reason: "1 of 2 partitions have no complete-through watermark: B"}, *adv)
	_, has := msg.MetaGet(frontiermeta.Frontier)
	assert.False(t, has)
	e, _ := msg.MetaGet(frontiermeta.FrontierEpoch)
	assert.Equal(t, "1", e)
	requireNoAdvance(t, a, "nothing changed")

	pub.publish(1, 90, map[string]int64{"A": 120, "B": 90}, []string{"B"}, "")
	adv, msg = requireAdvance(t, a)
	assert.Equal(t, ptr("90"), adv.Frontier)
	assert.Nil(t, adv.Previous)
	assert.Equal(t, uint64(1), adv.Epoch)
	assert.JSONEq(t, `{"A":120,"B":90}`, string(adv.Vector))
	f, _ := msg.MetaGet(frontiermeta.Frontier)
	assert.Equal(t, "90", f)
	requireNoAdvance(t, a, "no new publication")

	// A moves on, the scalar does not: a publication, not an advance.
	pub.publish(1, 90, map[string]int64{"A": 150, "B": 90}, []string{"B"}, "")
	requireNoAdvance(t, a, "the vector changed but the scalar did not advance")

	pub.publish(1, 110, map[string]int64{"A": 150, "B": 110}, []string{"B"}, "")
	adv, _ = requireAdvance(t, a)
	assert.Equal(t, ptr("110"), adv.Frontier)
	assert.Equal(t, ptr("90"), adv.Previous)
	requireNoAdvance(t, a, "no new publication")

	// A new, unproven epoch is announced once, scalar withheld.
	pub.publish(2, 0, map[string]int64{"A": 150, "B": 110, "C": 0}, []string{"C"}, "membership unproven: add C")
	adv, msg = requireAdvance(t, a)
	assert.Equal(t, uint64(2), adv.Epoch)
	assert.Nil(t, adv.Frontier)
	assert.Equal(t, ptr("110"), adv.Previous)
	assert.Equal(t, "membership unproven: add C", adv.Reason)
	_, has = msg.MetaGet(frontiermeta.Frontier)
	assert.False(t, has)
	e, _ = msg.MetaGet(frontiermeta.FrontierEpoch)
	assert.Equal(t, "2", e)
	r, _ := msg.MetaGet(frontiermeta.FrontierReason)
	assert.Equal(t, "membership unproven: add C", r)

	pub.publish(2, 0, map[string]int64{"A": 160, "B": 110, "C": 0}, []string{"C"}, "membership unproven: add C")
	requireNoAdvance(t, a, "same epoch, still no scalar")

	// A proven epoch 3 with a scalar lower than epoch 1's: a new epoch is
	// announced whatever its scalar.
	pub.publish(3, 100, map[string]int64{"A": 160, "B": 110, "C": 100}, []string{"C"}, "")
	adv, _ = requireAdvance(t, a)
	assert.Equal(t, uint64(3), adv.Epoch)
	assert.Equal(t, ptr("100"), adv.Frontier)
	requireNoAdvance(t, a, "no new publication")

	pub.publish(3, 105, map[string]int64{"A": 160, "B": 110, "C": 105}, []string{"C"}, "")
	adv, _ = requireAdvance(t, a)
	assert.Equal(t, ptr("105"), adv.Frontier)
	assert.Equal(t, ptr("100"), adv.Previous)
	requireNoAdvance(t, a, "no new publication")

	// A restarted pipeline re-reads the current frontier once.
	b := &advancesInput{scope: scope, every: 2 * time.Millisecond, st: st}
	adv, _ = requireAdvance(t, b)
	assert.Equal(t, uint64(3), adv.Epoch)
	assert.Equal(t, ptr("105"), adv.Frontier)
	assert.Nil(t, adv.Previous)
	requireNoAdvance(t, b, "nothing changed since the restart")
}

// Several advances between two polls are one message: the latest.
func TestFrontierAdvancesCoalescesBetweenPolls(t *testing.T) {
	st := memstore.New()
	scope := newScope(t)
	pub := &publisher{t: t, st: st, scope: scope}
	pub.publish(1, 10, map[string]int64{"A": 10}, []string{"A"}, "")
	a := &advancesInput{scope: scope, every: 200 * time.Millisecond, st: st}
	adv, _ := requireAdvance(t, a)
	assert.Equal(t, ptr("10"), adv.Frontier)
	for _, n := range []int64{11, 12, 13} {
		pub.publish(1, n, map[string]int64{"A": n}, []string{"A"}, "")
	}
	adv, _ = requireAdvance(t, a)
	assert.Equal(t, ptr("13"), adv.Frontier)
	assert.Equal(t, ptr("10"), adv.Previous)
}

func TestFrontierAdvancesSpec(t *testing.T) {
	b := service.NewStreamBuilder()
	require.NoError(t, b.AddInputYAML(`
frontier_advances:
  scope: s
  poll_interval: 1s
  checkpoint: { backend: memory }
`))
	conf, err := advancesSpec().ParseYAML(`
scope: s
checkpoint: { backend: memory }
`, nil)
	require.NoError(t, err)
	d, err := conf.FieldDuration(faFieldInterval)
	require.NoError(t, err)
	assert.Equal(t, 5*time.Second, d)

	err = service.NewStreamBuilder().AddInputYAML(`
frontier_advances:
  scope: s
  poll_interval: 0s
  checkpoint: { backend: memory }
`)
	if err == nil {
		// Not refused by the linter: the constructor must refuse it when the
		// stream is built.
		b := service.NewStreamBuilder()
		require.NoError(t, b.SetYAML(`
input:
  frontier_advances:
    scope: s
    poll_interval: 0s
    checkpoint: { backend: memory }
output:
  drop: {}
`))
		s, berr := b.Build()
		require.NoError(t, berr)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err = s.Run(ctx)
	}
	require.ErrorContains(t, err, "poll_interval positive")
}

var scopeSeq atomic.Int64

// newScope returns a scope name unique in this test process.
func newScope(t *testing.T) string {
	t.Helper()
	r := strings.NewReplacer("/", "-", " ", "-", "_", "-")
	return fmt.Sprintf("fa%d-%s", scopeSeq.Add(1), r.Replace(t.Name()))
}
