package input

import (
	"fmt"
	"strings"
	"sync"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/tidemark/tidemark/internal/chain"
)

// noteState logs, at debug level, a change of the partition machine's
// state (chain.State) since the last note, with what the machine now waits
// for: the kind of call it made, or the end of its back-off. Only the
// action's kind is named (never its cursor).
func (p *partition) noteState() {
	if p.m == nil {
		return
	}
	s := p.m.State()
	if s == p.state {
		return
	}
	was := p.state
	p.state = s
	if p.in != nil {
		p.in.metrics.states.move(was, s)
	}
	// The line is formatted only when debug is logged: a quiet poll
	// changes state several times.
	p.log.Debugf("Partition %s: state %s → %s%s", p.key.Partition, was, s, awaitingNote{p.m})
}

// awaitingNote is what a partition's machine awaits, for noteState's
// debug line: " (awaiting <call>)", " (backing off until <time>)" or
// nothing; a pointer-shaped Stringer, so that passing it formats nothing
// and allocates nothing unless the line is logged.
type awaitingNote struct{ m *chain.Machine }

func (a awaitingNote) String() string {
	switch call, until := a.m.Awaiting(); {
	case call != nil:
		return " (awaiting " + strings.TrimPrefix(fmt.Sprintf("%T", call), "chain.") + ")"
	case !until.IsZero():
		return " (backing off until " + until.UTC().Format("15:04:05.000") + ")"
	}
	return ""
}

// forgetState takes a partition whose worker ends out of the state gauge
// (also when it ends without stepping Stop).
func (p *partition) forgetState() {
	if p.state != chain.StateStopped && p.in != nil {
		p.in.metrics.states.move(p.state, chain.StateStopped)
	}
	p.state = chain.StateStopped
}

// stateCounts is the gauge tidemark_partitions_in_state{state}: how many of
// this input's running partitions are in each chain.State. A partition
// counts from its first step to its Stop (a stopped partition, lease lost
// or input closed, counts nowhere). Counts by state, not one series per
// partition: the label set stays bounded at any number of partitions.
type stateCounts struct {
	mu    sync.Mutex
	n     map[chain.State]int64
	gauge *service.MetricGauge
}

// move counts one partition out of was and into now.
func (c *stateCounts) move(was, now chain.State) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[chain.State]int64{}
	}
	c.add(was, -1)
	c.add(now, +1)
}

// add counts d partitions into s (New, Stopped and LeaseLost are not
// counted).
// Requires c.mu.
func (c *stateCounts) add(s chain.State, d int64) {
	if s == chain.StateNew || s == chain.StateStopped || s == chain.StateLeaseLost {
		return
	}
	c.n[s] += d
	if c.gauge != nil {
		c.gauge.Set(c.n[s], s.String())
	}
}
