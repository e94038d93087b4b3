package clustersim

import (
	"fmt"
	"strconv"
	"strings"
)

// OpKind names one kind of schedule operation. The zero value is invalid.
type OpKind uint8

const (
	// OpStep steps worker W's lane N (modulo its lanes), choosing among the
	// lane's ready inputs with M: "step w1 4 9".
	OpStep OpKind = 1 + iota
	// OpAck acknowledges in-flight delivery N (modulo their number): a
	// durable terminal outcome at the sink. "ack 7".
	OpAck
	// OpNack fails in-flight delivery N: "nack 7".
	OpNack
	// OpAppend appends N events to partition P at the provider: "append b 3".
	OpAppend
	// OpTick moves partition P's finality clock by N without events (sparse
	// positions only): "tick b 2".
	OpTick
	// OpExpire expires every cursor partition P has issued: "expire b".
	OpExpire
	// OpStall makes partition P answer its next N fetches with empty pages
	// without evidence: "stall b 3".
	OpStall
	// OpSeal seals partition P: no more events; its last pages say so.
	OpSeal
	// OpCrash crashes worker W: every lane loses its memory; batches in
	// flight may still reach the sink but their acks are lost.
	OpCrash
	// OpPublish steps frontier publisher W.
	OpPublish
	// OpPubCrash crashes frontier publisher W.
	OpPubCrash
	// OpAppear makes partition P exist at the provider (discoverable).
	OpAppear
	// OpAdd adds partition P to the membership with proof Proof (replay,
	// covered or none), or re-offers proof for an unproven member.
	OpAdd
	// OpRemove removes partition P from the membership with proof Proof
	// (seal or none).
	OpRemove
	// OpUnpark clears partition P's parked reason (an operator's repair).
	OpUnpark
	// OpRestart moves partition P to the provider's stable boundary (an
	// operator's `tidemark restart`: one conditional promotion).
	OpRestart
	// OpPause freezes worker W (lease mode: a GC pause or a partition from
	// the store); its lanes are not stepped and its clock stops: "pause w1".
	OpPause
	// OpResume lets a paused worker W continue from its in-memory state,
	// possibly as a zombie whose leases were stolen: "resume w1".
	OpResume
	// OpSplit splits partition P at the provider: P is sealed at its
	// current end and two children (P1, P2) appear whose parent is P:
	// "split b".
	OpSplit
	// OpDiscover steps the discoverer: it reads the provider's partition
	// list and the store and decides the membership change
	// (membership.Read, membership.Decide), or writes the change it decided
	// at its previous step (SwapMembership): "discover".
	OpDiscover
	// OpRecreate deletes partition P's source and creates it again under
	// the same name: a new incarnation whose positions start over, while
	// cursors of the old one still answer (from the new log):
	// "recreate b".
	OpRecreate
)

// lastOp is the last OpKind.
const lastOp = OpRecreate

var opNames = [...]string{"", "step", "ack", "nack", "append", "tick", "expire", "stall", "seal", "crash", "publish", "pubcrash", "appear", "add", "remove", "unpark", "restart", "pause", "resume", "split", "discover", "recreate"}

func (k OpKind) String() string {
	if k >= OpStep && k <= lastOp {
		return opNames[k]
	}
	return fmt.Sprintf("op(%d)", uint8(k))
}

// Op is one schedule operation. Ops are printable and parsable text
// (String, ParseOp); whether an op finds something to do depends on the
// state it meets, so any op list can be replayed.
type Op struct {
	Kind  OpKind
	W     int    // worker or publisher
	P     string // partition
	N, M  int
	Proof string
}

func (o Op) String() string {
	switch o.Kind {
	case OpStep:
		return fmt.Sprintf("step w%d %d %d", o.W, o.N, o.M)
	case OpAck, OpNack:
		return fmt.Sprintf("%s %d", o.Kind, o.N)
	case OpAppend, OpTick, OpStall:
		return fmt.Sprintf("%s %s %d", o.Kind, o.P, o.N)
	case OpExpire, OpSeal, OpAppear, OpUnpark, OpRestart, OpSplit, OpRecreate:
		return fmt.Sprintf("%s %s", o.Kind, o.P)
	case OpCrash, OpPause, OpResume:
		return fmt.Sprintf("%s w%d", o.Kind, o.W)
	case OpPublish, OpPubCrash:
		return fmt.Sprintf("%s f%d", o.Kind, o.W)
	case OpAdd, OpRemove:
		return fmt.Sprintf("%s %s %s", o.Kind, o.P, o.Proof)
	}
	return o.Kind.String()
}

// ParseOp reads what Op.String writes.
func ParseOp(s string) (Op, error) {
	f := strings.Fields(s)
	if len(f) == 0 {
		return Op{}, fmt.Errorf("sim: empty op")
	}
	var o Op
	for k := OpStep; k <= lastOp; k++ {
		if opNames[k] == f[0] {
			o.Kind = k
		}
	}
	bad := func() (Op, error) { return Op{}, fmt.Errorf("sim: cannot parse op %q", s) }
	num := func(x string) (int, bool) {
		n, err := strconv.Atoi(x)
		return n, err == nil
	}
	actor := func(x, prefix string) (int, bool) {
		if !strings.HasPrefix(x, prefix) {
			return 0, false
		}
		return num(x[len(prefix):])
	}
	var ok1, ok2, ok3 bool
	switch o.Kind {
	case OpStep:
		if len(f) != 4 {
			return bad()
		}
		o.W, ok1 = actor(f[1], "w")
		o.N, ok2 = num(f[2])
		o.M, ok3 = num(f[3])
	case OpAck, OpNack:
		if len(f) != 2 {
			return bad()
		}
		o.N, ok1 = num(f[1])
		ok2, ok3 = true, true
	case OpAppend, OpTick, OpStall:
		if len(f) != 3 {
			return bad()
		}
		o.P, ok1 = f[1], true
		o.N, ok2 = num(f[2])
		ok3 = true
	case OpDiscover:
		if len(f) != 1 {
			return bad()
		}
		ok1, ok2, ok3 = true, true, true
	case OpExpire, OpSeal, OpAppear, OpUnpark, OpRestart, OpSplit, OpRecreate:
		if len(f) != 2 {
			return bad()
		}
		o.P, ok1, ok2, ok3 = f[1], true, true, true
	case OpCrash, OpPause, OpResume:
		if len(f) != 2 {
			return bad()
		}
		o.W, ok1 = actor(f[1], "w")
		ok2, ok3 = true, true
	case OpPublish, OpPubCrash:
		if len(f) != 2 {
			return bad()
		}
		o.W, ok1 = actor(f[1], "f")
		ok2, ok3 = true, true
	case OpAdd, OpRemove:
		if len(f) != 3 {
			return bad()
		}
		o.P, o.Proof, ok1, ok2, ok3 = f[1], f[2], true, true, true
	default:
		return bad()
	}
	if !ok1 || !ok2 || !ok3 {
		return bad()
	}
	return o, nil
}
