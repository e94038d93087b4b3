// Package frontieradvances is the frontier_advances input: one message each
// time the published frontier record of a scope advances or its membership
// epoch changes.
//
// Invariant: within an epoch the messages' frontier never goes down (the
// published record only moves forward, and a publication that does not
// advance the scalar emits nothing); a new epoch is always announced, even
// with its scalar withheld.
package frontieradvances

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/tidemark/tidemark/internal/frontier"
	"github.com/tidemark/tidemark/internal/frontiermeta"
	"github.com/tidemark/tidemark/internal/frontierrec"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/storeconfig"
)

const (
	faFieldScope      = "scope"
	faFieldInterval   = "poll_interval"
	faFieldCheckpoint = "checkpoint"
)

func advancesSpec() *service.ConfigSpec {
	return service.NewConfigSpec().
		Beta().
		Categories("Utility").
		Summary("Emits one message each time the published frontier of a paginated_partitions scope advances (or its membership epoch changes), so a pipeline can trigger \"complete through X\" jobs.").
		Description(`
The message is JSON: `+"`{\"scope\", \"epoch\", \"frontier\", \"previous\", \"vector\", \"held_by\", \"reason\"}`"+`, with metadata `+"`tidemark_frontier`"+` (absent when withheld) and `+"`tidemark_frontier_epoch`"+`. The published frontier only moves forward within an epoch, so a job triggered for "hour H is complete" never sees H retracted; a new epoch is announced even when its scalar is withheld.

The first message after start describes the current published frontier, so a restarted pipeline re-evaluates its triggers (jobs should be idempotent).`).
		Fields(
			service.NewStringField(faFieldScope).
				Description("The scope of the paginated_partitions input.").
				Example("okta-system-log"),
			service.NewDurationField(faFieldInterval).
				Description("How often the published frontier record is read.").
				Default("5s").Example("1m"),
			service.NewObjectField(faFieldCheckpoint, storeconfig.CheckpointFields()...).
				Description("The checkpoint store of the input."),
		).
		Example("Trigger hourly jobs", "Emit a message when the frontier passes the end of an hour.", `
input:
  frontier_advances:
    scope: audit
    checkpoint:
      backend: dynamodb
      dynamodb: { table: tidemark }
pipeline:
  processors:
    - mapping: 'root.complete_through = this.frontier'
output:
  stdout: {}
`)
}

func init() {
	err := service.RegisterInput("frontier_advances", advancesSpec(), func(conf *service.ParsedConfig, mgr *service.Resources) (service.Input, error) {
		scope, err := conf.FieldString(faFieldScope)
		if err != nil {
			return nil, err
		}
		every, err := conf.FieldDuration(faFieldInterval)
		if err != nil {
			return nil, err
		}
		st, closeSt, err := storeconfig.StoreFromParsed(context.Background(), conf.Namespace(faFieldCheckpoint), mgr)
		if err != nil {
			return nil, err
		}
		if scope == "" || every <= 0 {
			return nil, errors.New("frontier_advances: scope must be set and poll_interval positive")
		}
		return service.AutoRetryNacks(&advancesInput{scope: scope, every: every, st: st, closeSt: closeSt, log: mgr.Logger()}), nil
	})
	if err != nil {
		panic(err)
	}
}

type advancesInput struct {
	scope   string
	every   time.Duration
	st      store.ScopeStore
	closeSt func(context.Context) error
	log     *service.Logger
	last    frontier.Snapshot
	started bool
	cache   *store.FrontierCache
}

// Connect readies the checkpoint store (creates the table with `create:
// true`); Benthos retries it with back-off while the store is down.
func (a *advancesInput) Connect(ctx context.Context) error {
	return storeconfig.Prepare(ctx, a.st, a.log)
}

// Advance is the JSON body of a frontier_advances message.
type Advance struct {
	Scope    string          `json:"scope"`
	Epoch    uint64          `json:"epoch"`
	Frontier *string         `json:"frontier"`
	Previous *string         `json:"previous"`
	Vector   json.RawMessage `json:"vector"`
	HeldBy   []string        `json:"held_by"`
	Reason   string          `json:"reason,omitempty"`
}

func (a *advancesInput) Read(ctx context.Context) (*service.Message, service.AckFunc, error) {
	for {
		if a.started {
			t := time.NewTimer(a.every)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, nil, ctx.Err()
			case <-t.C:
			}
		}
		a.started = true
		if a.cache == nil {
			// The root every poll, only the shards that changed.
			a.cache = store.NewFrontierCache(a.st, a.scope)
		}
		f, _, err := a.cache.Refresh(ctx)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		cur := frontierrec.Snapshot(f)
		if a.last.Epoch != 0 && cur.Epoch == a.last.Epoch && !frontier.ScalarAdvanced(a.last, cur) {
			continue
		}
		if cur.Epoch < a.last.Epoch {
			continue
		}
		adv := Advance{Scope: a.scope, Epoch: cur.Epoch, Vector: json.RawMessage(frontier.VectorJSON(cur.Vector)), HeldBy: cur.HeldBy, Reason: cur.Reason}
		if cur.Proven {
			v := cur.Scalar.String()
			adv.Frontier = &v
		}
		if a.last.Proven {
			v := a.last.Scalar.String()
			adv.Previous = &v
		}
		b, _ := json.Marshal(adv)
		msg := service.NewMessage(b)
		frontiermeta.Set(msg, cur)
		msg.MetaSetMut(frontiermeta.FrontierEpoch, strconv.FormatUint(cur.Epoch, 10))
		a.last = cur
		return msg, func(context.Context, error) error { return nil }, nil
	}
}

func (a *advancesInput) Close(ctx context.Context) error {
	if a.closeSt != nil {
		return a.closeSt(ctx)
	}
	return nil
}
