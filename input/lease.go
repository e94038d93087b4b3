package input

// Scale-out: with a `leases` object, the partitions of the scope are
// shared between instances by internal/leasing (its Manager drives the
// pure lease.Machine and runs this input's worker of each partition it
// holds, under a leasing.Holder the worker's chain machine is given).

import (
	"context"
	"strconv"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/tidemark/tidemark/internal/leasing"
)

// LeaseConfig configures scale-out (the `leases` object); see
// leasing.Config.
type LeaseConfig = leasing.Config

// DefaultLeaseConfig returns the defaults of the `leases` fields.
func DefaultLeaseConfig() LeaseConfig { return leasing.DefaultConfig() }

// Metadata keys of the fencing token, set on every message when leases are
// on (with MetaGeneration): an idempotent sink that keeps, per partition,
// the highest lease counter it accepted can refuse writes from a zombie.
const (
	MetaLeaseOwner   = "tidemark_lease_owner"
	MetaLeaseCounter = "tidemark_lease_counter"
)

// newLeaseManager returns the manager that shares in's partitions under
// cfg: it runs a partition's worker (newPartition, under the lease) when
// the instance machine it drives starts it, and hands the input the
// machine's other actions (performIO).
func newLeaseManager(in *paginatedInput, cfg LeaseConfig, res *service.Resources) *leasing.Manager {
	return leasing.New(leasing.Host{
		Scope:       in.cfg.Scope,
		StartCursor: in.cfg.StartCursor,
		Store:       in.store,
		Membership:  in.startMembership,
		Epoch:       in.epoch,
		Launch: func(ctx context.Context, part string, h *leasing.Holder, done func()) {
			p := newPartition(in, part)
			p.lease = h
			p.launch(ctx, done)
		},
		Instance: in.instanceConfig(),
		Perform:  in.performIO,
	}, cfg, res)
}

// leaseMeta sets the fencing token of the worker that emitted m.
func leaseMeta(p *partition, m *service.Message) {
	if p.lease == nil {
		return
	}
	l, _ := p.lease.Current()
	m.MetaSetMut(MetaLeaseOwner, l.Owner)
	m.MetaSetMut(MetaLeaseCounter, strconv.FormatUint(l.Counter, 10))
}
