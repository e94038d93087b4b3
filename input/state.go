package input

import (
	"fmt"
	"strings"
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
	why := ""
	switch call, until := p.m.Awaiting(); {
	case call != nil:
		why = " (awaiting " + strings.TrimPrefix(fmt.Sprintf("%T", call), "chain.") + ")"
	case !until.IsZero():
		why = " (backing off until " + until.UTC().Format("15:04:05.000") + ")"
	}
	p.log.Debugf("Partition %s: state %s → %s%s", p.key.Partition, was, s, why)
}
