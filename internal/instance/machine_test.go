package instance_test

// Golden, data-driven tests of the instance machine
// (github.com/cockroachdb/datadriven; `go test ./internal/instance -rewrite`
// regenerates the expected output). Each file in testdata/ is one
// scenario, one command per stanza; the harness is the driver, the store
// answers are written in the stanzas:
//
//	config [leases] [period=D renew=D balance=D max-owned=N max-moves=N]
//	       [exit-when-complete] [grace=D] [publish=D [idle=D] [max-idle=D]]
//	       [check=D] [discover [discovery=D]] [unordered] [poll=D] [prune=N]
//	                                    a new machine (lease defaults 10s/3s/5s,
//	                                    max-moves 256)
//	start [self=O] epoch=N parts=a,b [lineage=c:a+b,d:a]
//	                                    Start at the clock's reading (lineage:
//	                                    each child's parents)
//	tick [+D]                           advance the clock by D (default: to the
//	                                    last Wake) and Tick
//	renewed [counter=N] [err=E]         answer the renewal in flight (E: fenced,
//	                                    unknown); counter defaults to the asked + 1
//	heartbeats [err=E]                  answer ReadHeartbeats; input lines:
//	                                    "OWNER counter=N held=N [taken=BY]"
//	took-over owner=O [err=E]           answer the takeover of O
//	leases [err=E]                      answer ReadLeases; input lines:
//	                                    "PART [OWNER COUNTER]"
//	claimed p=P [counter=N] [err=E]     answer the claim of P (lease Self/N)
//	released p=P [err=E]                answer the release of P
//	worker-lost p=P reason=R            P's worker found its lease gone
//	worker-stopped p=P                  P's worker returned
//	complete p=P                        P's worker found it complete
//	parked p=P [reason=R]               P's park reason ("" unparked)
//	adopt epoch=N parts=a,b [lineage=…] a membership read
//	membership-read epoch=N parts=a,b [lineage=…] [requests=N] [incarnations] [err=E]
//	                                    answer ReadMembership
//	discovered why=W epoch=N parts=a,b [lineage=…] [err=E]
//	                                    answer Discover
//	parents-read p=P [complete=a,b] [incomplete=c] [err=E]
//	                                    answer ReadParents (the parents' checkpoints)
//	pruned p=P below=N [err=E]          answer Prune
//	incarnation self=O                  answer NewIncarnation
//	promoted [p=P g=N]                  a durable checkpoint of this process
//	published [active] [fenced] [epoch=N]
//	                                    answer the Publish in flight (the round
//	                                    began when it was asked)
//	shutdown                            Shutdown
//
// Answers carry the current incarnation's owner unless owner=O says
// otherwise (an answer to a gone incarnation). The output of a command is
// every action the machine returned (their String), then the workers
// running (and the partitions waiting for their parents).

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/tidemark/tidemark/internal/instance"
	"github.com/tidemark/tidemark/internal/store"
)

func TestMachine(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		h := &harness{}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return h.run(t, d)
		})
	})
}

var origin = time.Unix(0, 0).UTC()

type harness struct {
	cfg     instance.Config
	m       *instance.Machine
	now     time.Time
	wake    time.Time
	renew   *instance.RenewHeartbeat // in flight
	renewAt time.Time
	pubAt   time.Time // when the Publish in flight was asked
	b       strings.Builder
}

func (h *harness) run(t *testing.T, d *datadriven.TestData) string {
	h.b.Reset()
	owner := ""
	if h.m != nil {
		owner = h.m.Self()
	}
	if d.HasArg("owner") {
		d.ScanArgs(t, "owner", &owner)
	}
	switch d.Cmd {
	case "config":
		h.config(t, d)
		return "ok"
	case "start":
		var self string
		if d.HasArg("self") {
			d.ScanArgs(t, "self", &self)
		}
		h.step(instance.Start{Now: h.now, Self: self, Membership: membership(t, d)})
	case "tick":
		switch {
		case len(d.CmdArgs) > 0 && strings.HasPrefix(d.CmdArgs[0].Key, "+"):
			dur, err := time.ParseDuration(d.CmdArgs[0].Key[1:])
			if err != nil {
				d.Fatalf(t, "tick: %v", err)
			}
			h.now = h.now.Add(dur)
		case h.wake.After(h.now):
			h.now = h.wake
		}
		h.step(instance.Tick{Now: h.now})
	case "renewed":
		if h.renew == nil {
			d.Fatalf(t, "no renewal in flight")
		}
		hb := h.renew.Heartbeat
		hb.Counter++
		hb.Held = h.renew.Held
		if d.HasArg("counter") {
			var n uint64
			d.ScanArgs(t, "counter", &n)
			hb.Counter = n
		}
		err := answerErr(t, d)
		if err != nil {
			hb = store.Heartbeat{}
		}
		start := h.renewAt
		h.renew = nil
		h.step(instance.Renewed{Owner: owner, Start: start, Heartbeat: hb, Err: err})
	case "heartbeats":
		var hbs []store.Heartbeat
		for _, line := range lines(d.Input) {
			f := strings.Fields(line)
			hb := store.Heartbeat{Scope: "s", Owner: f[0]}
			for _, kv := range f[1:] {
				k, v, _ := strings.Cut(kv, "=")
				switch k {
				case "counter":
					hb.Counter = num(t, v)
				case "held":
					hb.Held = int(num(t, v))
				case "taken":
					hb.TakenBy = v
				}
			}
			hbs = append(hbs, hb)
		}
		h.step(instance.HeartbeatsRead{Owner: owner, Now: h.now, Heartbeats: hbs, Err: answerErr(t, d)})
	case "took-over":
		var seen string
		d.ScanArgs(t, "owner", &seen)
		var n uint64
		if d.HasArg("counter") {
			d.ScanArgs(t, "counter", &n)
		}
		h.step(instance.TookOver{Owner: h.m.Self(), Seen: store.Heartbeat{Scope: "s", Owner: seen, Counter: n}, Err: answerErr(t, d)})
	case "leases":
		var cps []store.Checkpoint
		for _, line := range lines(d.Input) {
			f := strings.Fields(line)
			cp := store.Checkpoint{Key: store.Key{Scope: "s", Partition: f[0]}, Generation: 1}
			if len(f) == 3 {
				cp.Lease = store.Lease{Owner: f[1], Counter: num(t, f[2])}
			}
			cps = append(cps, cp)
		}
		h.step(instance.LeasesRead{Owner: owner, Now: h.now, Checkpoints: cps, Err: answerErr(t, d)})
	case "claimed":
		var p string
		d.ScanArgs(t, "p", &p)
		n := uint64(1)
		if d.HasArg("counter") {
			d.ScanArgs(t, "counter", &n)
		}
		l := store.Lease{Owner: owner, Counter: n}
		err := answerErr(t, d)
		if err != nil {
			l = store.Lease{}
		}
		h.step(instance.Claimed{Owner: owner, Partition: p, Lease: l, Err: err})
	case "released":
		var p string
		d.ScanArgs(t, "p", &p)
		h.step(instance.Released{Owner: owner, Partition: p, Err: answerErr(t, d)})
	case "worker-lost":
		var p, r string
		d.ScanArgs(t, "p", &p)
		d.ScanArgs(t, "reason", &r)
		h.step(instance.WorkerLost{Partition: p, Reason: r})
	case "worker-stopped":
		var p string
		d.ScanArgs(t, "p", &p)
		h.step(instance.WorkerStopped{Partition: p})
	case "complete":
		var p string
		d.ScanArgs(t, "p", &p)
		h.step(instance.Completed{Partition: p})
	case "parked":
		var p, reason string
		d.ScanArgs(t, "p", &p)
		if d.HasArg("reason") {
			d.ScanArgs(t, "reason", &reason)
		}
		h.step(instance.Parked{Partition: p, Reason: reason})
	case "adopt":
		h.step(instance.Adopt{Now: h.now, Membership: membership(t, d), Source: "test"})
	case "incarnation":
		var self string
		d.ScanArgs(t, "self", &self)
		h.step(instance.Incarnation{Now: h.now, Self: self})
	case "promoted":
		var p string
		var g uint64
		if d.HasArg("p") {
			d.ScanArgs(t, "p", &p)
			d.ScanArgs(t, "g", &g)
		}
		h.step(instance.Promoted{Now: h.now, Partition: p, Generation: g})
	case "membership-read":
		var n uint64
		if d.HasArg("requests") {
			d.ScanArgs(t, "requests", &n)
		}
		err := answerErr(t, d)
		var ms instance.Membership
		if err == nil {
			ms = membership(t, d)
		}
		h.step(instance.MembershipRead{Now: h.now, Membership: ms, Requests: n, RequestsRead: d.HasArg("requests"), Incarnations: d.HasArg("incarnations"), Err: err})
	case "discovered":
		var why string
		d.ScanArgs(t, "why", &why)
		err := answerErr(t, d)
		var ms instance.Membership
		if err == nil {
			ms = membership(t, d)
		}
		h.step(instance.Discovered{Now: h.now, Why: why, Membership: ms, Err: err})
	case "parents-read":
		var p string
		d.ScanArgs(t, "p", &p)
		var cps []store.Checkpoint
		for _, k := range []string{"complete", "incomplete"} {
			if !d.HasArg(k) {
				continue
			}
			var v string
			d.ScanArgs(t, k, &v)
			for _, name := range strings.Split(v, ",") {
				cps = append(cps, store.Checkpoint{Key: store.Key{Scope: "s", Partition: name}, Complete: k == "complete"})
			}
		}
		h.step(instance.ParentsRead{Now: h.now, Partition: p, Checkpoints: cps, Err: answerErr(t, d)})
	case "pruned":
		var p string
		var below uint64
		d.ScanArgs(t, "p", &p)
		d.ScanArgs(t, "below", &below)
		h.step(instance.Pruned{Partition: p, Below: below, Err: answerErr(t, d)})
	case "published":
		var epoch uint64
		if d.HasArg("epoch") {
			d.ScanArgs(t, "epoch", &epoch)
		}
		h.step(instance.Published{Now: h.now, Start: h.pubAt, Active: d.HasArg("active"), Fenced: d.HasArg("fenced"), Epoch: epoch})
	case "shutdown":
		h.step(instance.Shutdown{Now: h.now})
	default:
		d.Fatalf(t, "unknown command %s", d.Cmd)
	}
	fmt.Fprintf(&h.b, "running %v", h.m.Running())
	if w := h.m.Waiting(); len(w) > 0 {
		fmt.Fprintf(&h.b, " waiting %v", w)
	}
	if h.m.Exited() {
		h.b.WriteString(" (exited)")
	}
	return h.b.String()
}

func (h *harness) config(t *testing.T, d *datadriven.TestData) {
	h.cfg = instance.Config{Scope: "s"}
	h.now, h.wake, h.renew = origin, time.Time{}, nil
	dur := func(k string, dst *time.Duration) {
		if d.HasArg(k) {
			var s string
			d.ScanArgs(t, k, &s)
			v, err := time.ParseDuration(s)
			if err != nil {
				d.Fatalf(t, "%s: %v", k, err)
			}
			*dst = v
		}
	}
	if d.HasArg("leases") {
		lc := &instance.LeaseConfig{Period: 10 * time.Second, RenewInterval: 3 * time.Second, BalanceInterval: 5 * time.Second, MaxMoves: 256}
		dur("period", &lc.Period)
		dur("renew", &lc.RenewInterval)
		dur("balance", &lc.BalanceInterval)
		if d.HasArg("max-owned") {
			d.ScanArgs(t, "max-owned", &lc.MaxOwned)
		}
		if d.HasArg("max-moves") {
			d.ScanArgs(t, "max-moves", &lc.MaxMoves)
		}
		h.cfg.Leases = lc
	}
	h.cfg.ExitWhenComplete = d.HasArg("exit-when-complete")
	dur("grace", &h.cfg.ParkedGrace)
	dur("publish", &h.cfg.PublishInterval)
	dur("idle", &h.cfg.PublishIdle)
	dur("check", &h.cfg.MembershipCheck)
	dur("discovery", &h.cfg.DiscoveryInterval)
	dur("poll", &h.cfg.ParentsPoll)
	h.cfg.Discover = d.HasArg("discover")
	h.cfg.UnorderedLineage = d.HasArg("unordered")
	if d.HasArg("prune") {
		d.ScanArgs(t, "prune", &h.cfg.PruneEvery)
	}
	dur("max-idle", &h.cfg.PublishMaxIdle)
	h.m = instance.New(h.cfg)
}

// step feeds the machine and prints its actions, remembering what the
// next answers need.
func (h *harness) step(in instance.Input) {
	acts := h.m.Step(in)
	if len(acts) == 0 {
		h.b.WriteString("(no actions)\n")
	}
	for _, a := range acts {
		switch a := a.(type) {
		case instance.RenewHeartbeat:
			h.renew, h.renewAt = &a, h.now
		case instance.Wake:
			h.wake = a.At
		case instance.Publish:
			h.pubAt = h.now
		}
		fmt.Fprintf(&h.b, "%s\n", a)
	}
}

func membership(t *testing.T, d *datadriven.TestData) instance.Membership {
	var ms instance.Membership
	d.ScanArgs(t, "epoch", &ms.Epoch)
	var parts string
	d.ScanArgs(t, "parts", &parts)
	ms.Partitions = strings.Split(parts, ",")
	if d.HasArg("lineage") {
		var l string
		d.ScanArgs(t, "lineage", &l)
		ms.Parents = map[string][]string{}
		for _, e := range strings.Split(l, ",") {
			child, ps, _ := strings.Cut(e, ":")
			ms.Parents[child] = strings.Split(ps, "+")
		}
	}
	return ms
}

func answerErr(t *testing.T, d *datadriven.TestData) error {
	if !d.HasArg("err") {
		return nil
	}
	var e string
	d.ScanArgs(t, "err", &e)
	switch e {
	case "fenced":
		return &store.FenceError{Op: "write", Reason: "condition failed"}
	case "unknown":
		return errors.New("timeout (unknown outcome)")
	}
	d.Fatalf(t, "unknown err %q", e)
	return nil
}

func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

func num(t *testing.T, s string) uint64 {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
