package clustersim

import (
	"fmt"
	"strings"

	"github.com/tidemark/tidemark/internal/reconcile"
)

// The model sink stands for the pipeline and output behind the input: it
// receives batches, and later acknowledges (a durable terminal outcome) or
// nacks each one, in any order. A batch emitted by a worker that has since
// crashed can still be acknowledged (the output wrote it); only the ack
// callback is lost.

// delivery is one emitted batch in flight.
type delivery struct {
	lane    *lane
	batch   uint64 // the machine's batch id
	chain   uint64 // the chain that emitted it
	part    string
	gen     uint64
	attempt string
	events  []reconcile.EventWitness
	// epoch is the membership epoch the emitting machine's messages carry
	// (chain.Machine.Epoch when it emitted the batch).
	epoch uint64
}

func (d *delivery) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s g%d %s [", d.part, d.gen, d.attempt)
	for i, e := range d.events {
		if i > 0 {
			b.WriteString(" ")
		}
		b.WriteString(e.Position.String())
	}
	b.WriteString("]")
	return b.String()
}

type sink struct {
	inflight []*delivery
}

// take removes and returns the delivery selected by n.
func (s *sink) take(n int) *delivery {
	if len(s.inflight) == 0 {
		return nil
	}
	i := n % len(s.inflight)
	d := s.inflight[i]
	s.inflight = append(s.inflight[:i], s.inflight[i+1:]...)
	return d
}
