package chain_test

// Golden, data-driven tests of the machine (github.com/cockroachdb/datadriven;
// `go test ./internal/chain -rewrite` regenerates the expected output).
// Each file in testdata/ is one scenario, one command per stanza:
//
//	config <contract and options>     a new machine over a new in-memory store
//	                                  (fetch retries 2, fetch back-off 100ms unless
//	                                  retries=N, backoff=D);
//	                                  leased=O: the machine holds a lease
//	                                  claimed for owner O after the input lines;
//	                                  input lines: "checkpoint k=v ...", "witness k=v ...",
//	                                  "membership partitions=a,b" (epoch 1, proven)
//	start | crash                     Start (crash: a new machine over the same store)
//	fetched [attempt=ID]              answer the fetch in flight; input: the response
//	fetch-error kind=K [detail=D]     fail it
//	ack [batch=N] | nack batch=N      outcomes of emitted batches (ack: all in flight)
//	tick [+D]                         advance the clock to the last Wait (or by D)
//	fail op=M mode=throttle|lose      the next store call M fails (lose: it happens)
//	                                  (config wgroup=N: witnesses written in groups of up to N;
//	                                  compact: compact event witnesses)
//	pause op=ACTION | resume          hold the next call of that action / perform it
//	writer promote|park|unpark ...    another writer changes the checkpoint
//	writer pass to=C from=N mark=M   another worker starts a re-read pass (N, M]
//	writer takeover owner=O           another instance claims the lease over
//	lease-lost reason=R               the driver's lease manager lost it: LeaseLost
//	store                             print the stored checkpoint and witnesses
//
// Responses: tokens "POS" (id ePOS), "ID@POS", "ID@POS:PAYLOAD", "succ=C",
// "ct=N", "marker=M", "sealed", "more", "more-known". The output of a
// command is every action the machine returned (their String), with the
// answers the harness fed it automatically ("<- ...").

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/chain"
	"github.com/tidemark/tidemark/internal/chain/chainstore"
	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/store/memstore"
	"github.com/tidemark/tidemark/provider"
)

func TestMachine(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		h := &harness{t: t}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			h.t = t
			return h.run(d)
		})
	})
}

var (
	epoch = time.Unix(0, 0).UTC()
	key   = store.Key{Scope: "s", Partition: "p"}
	ctx   = context.Background()
)

type harness struct {
	t       *testing.T
	cfg     chain.Config
	mem     *memstore.Store
	st      *faulty
	m       *chain.Machine
	now     time.Time
	wake    time.Time
	attempt int
	fetch   *chain.Fetch
	flight  []uint64 // emitted batches without an outcome
	restart []byte   // RestartCursor's answer
	// incarnation is what CheckIncarnation answers (config
	// incarnation=V; recreate V changes it).
	incarnation string
	pauseOn     string // the action (by its String's first word) to hold
	held        chain.Action
	b           strings.Builder
	// states are the machine's states seen after each step, consecutive
	// repeats dropped.
	states []chain.State
	// lease is the lease the machine holds (config leased=OWNER).
	lease store.Lease
}

func (h *harness) run(d *datadriven.TestData) string {
	h.b.Reset()
	switch d.Cmd {
	case "config":
		h.config(d)
	case "start":
		h.feed(chain.Start{})
	case "crash":
		cfg := h.cfg
		cfg.Lease = h.lease
		h.m = chain.New(cfg)
		h.fetch, h.flight, h.held = nil, nil, nil
		h.feed(chain.Start{})
	case "fetched":
		if h.fetch == nil {
			d.Fatalf(h.t, "no fetch in flight")
		}
		h.attempt++
		id := fmt.Sprintf("a%d", h.attempt)
		if d.HasArg("attempt") {
			d.ScanArgs(h.t, "attempt", &id)
		}
		f := h.fetch
		h.fetch = nil
		h.feed(chain.Fetched{Fetch: f.ID, Attempt: id, Response: h.response(d, d.Input)})
	case "fetch-error":
		if h.fetch == nil {
			d.Fatalf(h.t, "no fetch in flight")
		}
		var kind, detail string
		d.ScanArgs(h.t, "kind", &kind)
		if d.HasArg("detail") {
			d.ScanArgs(h.t, "detail", &detail)
		}
		f := map[string]chain.FetchFailure{"transient": chain.FetchTransient, "expired": chain.FetchExpired, "malformed": chain.FetchMalformed, "permanent": chain.FetchPermanent}[kind]
		id := h.fetch.ID
		h.fetch = nil
		h.feed(chain.Fetched{Fetch: id, Err: fmt.Errorf("injected %s failure", kind), Failure: f, Detail: detail})
	case "ack", "nack":
		if d.HasArg("batch") {
			var n uint64
			d.ScanArgs(h.t, "batch", &n)
			h.flight = slices.DeleteFunc(h.flight, func(b uint64) bool { return b == n })
			if d.Cmd == "ack" {
				h.feed(chain.Acked{Batch: n})
			} else {
				h.feed(chain.Nacked{Batch: n, Err: errors.New("injected delivery failure")})
			}
			break
		}
		var acks []chain.Ack
		for _, b := range h.flight {
			acks = append(acks, chain.Ack{Batch: b})
		}
		h.flight = nil
		h.feed(chain.Delivered{Acks: acks})
	case "tick":
		switch {
		case len(d.CmdArgs) > 0:
			dur, err := time.ParseDuration(d.CmdArgs[0].Key)
			if err != nil {
				d.Fatalf(h.t, "%v", err)
			}
			h.now = h.now.Add(dur)
		case h.wake.After(h.now):
			h.now = h.wake
		}
		h.feed(chain.Tick{Now: h.now})
	case "fail":
		var op, mode string
		d.ScanArgs(h.t, "op", &op)
		d.ScanArgs(h.t, "mode", &mode)
		h.st.arm(op, mode)
		return "ok"
	case "pause":
		d.ScanArgs(h.t, "op", &h.pauseOn)
		return "ok"
	case "resume":
		a := h.held
		h.held, h.pauseOn = nil, ""
		if a == nil {
			d.Fatalf(h.t, "nothing held")
		}
		h.perform(a)
		fmt.Fprintf(&h.b, "state: %s\n", h.m.State())
	case "recreate":
		// The source is deleted and created again: its incarnation check
		// answers another value.
		h.incarnation = d.CmdArgs[0].Key
		return "ok"
	case "writer":
		return h.writer(d)
	case "lease-lost":
		var reason string
		d.ScanArgs(h.t, "reason", &reason)
		h.feed(chain.LeaseLost{Reason: reason})
		fmt.Fprintf(&h.b, "lost: %s\n", h.m.LostLease())
	case "store":
		return h.dump()
	case "tracked":
		pages, batches := h.m.Tracked()
		return fmt.Sprintf("pages %d, batches awaiting an outcome %d\n", pages, batches)
	default:
		d.Fatalf(h.t, "unknown command %s", d.Cmd)
	}
	return h.b.String()
}

// feed steps the machine with in and performs what it asks, answering its
// store calls from the store until it waits for the test.
func (h *harness) feed(in chain.Input) {
	h.handle(h.m.Step(in))
	fmt.Fprintf(&h.b, "state: %s\n", h.m.State())
}

func (h *harness) handle(acts []chain.Action) {
	if s := h.m.State(); len(h.states) == 0 || h.states[len(h.states)-1] != s {
		h.states = append(h.states, s)
	}
	for _, a := range acts {
		fmt.Fprintln(&h.b, a)
		switch a := a.(type) {
		case chain.Fetch:
			h.fetch = &a
		case chain.Emit:
			h.flight = append(h.flight, a.Batch)
		case chain.Wait:
			h.wake = a.Until
		case chain.Log, chain.Count, chain.Observe, chain.EndChain, chain.Completed, chain.LeaseGone:
		default:
			if h.pauseOn != "" && strings.HasPrefix(a.String(), h.pauseOn+" ") {
				h.held = a
				fmt.Fprintln(&h.b, "(held)")
				return
			}
			h.perform(a)
		}
	}
}

func (h *harness) perform(a chain.Action) {
	var in chain.Input
	if r, ok := a.(chain.RestartCursor); ok {
		_ = r
		in = chain.RestartCursorFound{Cursor: h.restart}
	} else if _, ok := a.(chain.CheckIncarnation); ok {
		in = chain.IncarnationFound{Value: h.incarnation}
	} else {
		var ok bool
		if in, ok = chainstore.Do(ctx, h.st, a); !ok {
			h.t.Fatalf("unexpected action %s", a)
		}
	}
	fmt.Fprintf(&h.b, "<- %s\n", in)
	h.handle(h.m.Step(in))
}

func (h *harness) config(d *datadriven.TestData) {
	c := provider.Contract{EmptyPage: provider.EmptyNoEvidence, OrderedPositions: true, Recovery: provider.RecoveryPark}
	cfg := chain.Config{
		Key: key, Epoch: 1, MaxPagesInFlight: 4, MaxBatchSize: 1,
		PollInterval: time.Second, ParkCheckInterval: 5 * time.Second, StoreBackoff: 2 * time.Second,
		FetchRetries: 2, FetchBackoff: 100 * time.Millisecond,
	}
	leaseOwner := ""
	for _, arg := range d.CmdArgs {
		val := ""
		if len(arg.Vals) > 0 {
			val = arg.Vals[0]
		}
		switch arg.Key {
		case "empty":
			c.EmptyPage = map[string]provider.EmptyPage{"no_evidence": provider.EmptyNoEvidence, "end_of_data": provider.EmptyEndOfData, "final_through_watermark": provider.EmptyFinalThroughWatermark, "follow_successor": provider.EmptyFollowsSuccessor}[val]
		case "positions":
			c.OrderedPositions, c.DensePositions = val != "unordered", val == "dense"
		case "covers":
			c.WatermarkCoversPositions = true
		case "origin":
			c.FirstPosition = provider.IntPosition(num(d, h.t, val))
		case "finality":
			f, err := provider.ParseFinality(val)
			if err != nil {
				h.t.Fatal(err)
			}
			c.Finality = f
		case "lag":
			n, err := strconv.ParseInt(val, 10, 64)
			if err != nil {
				h.t.Fatal(err)
			}
			c.FinalityLag = n
		case "reread":
			n, err := strconv.ParseInt(val, 10, 64)
			if err != nil {
				h.t.Fatal(err)
			}
			c.RereadWindow = n
		case "withdrawn":
			c.EventsMayBeWithdrawn = true
		case "rotate":
			c.TokensMayRotate = true
		case "exclusive":
			c.ExclusiveBoundary = true
		case "marker":
			c.SnapshotMarker = true
		case "missing":
			if val == "end_of_traversal" {
				c.MissingSuccessor = provider.MissingSuccessorEndsTraversal
			}
		case "recovery":
			c.Recovery = map[string]provider.Recovery{"park": provider.RecoveryPark, "restart_from_boundary": provider.RecoveryRestartFromBoundary, "fresh_snapshot": provider.RecoveryFreshSnapshot}[val]
			cfg.Restarter = true
		case "pagination":
			c.Pagination = map[string]provider.Pagination{"token": provider.PaginationToken, "keyset": provider.PaginationKeyset, "offset": provider.PaginationOffset}[val]
		case "overlap":
			c.OffsetOverlap = true
		case "unproven":
			c.OffsetUnproven = true
		case "restart":
			h.restart = []byte(val)
		case "incarnation":
			cfg.Incarnation, cfg.IncarnationInterval = true, 10*time.Second
			h.incarnation = val
		case "depth":
			cfg.MaxPagesInFlight, _ = strconv.Atoi(val)
		case "batch":
			cfg.MaxBatchSize, _ = strconv.Atoi(val)
		case "exit":
			cfg.ExitWhenComplete = true
		case "coalesce":
			cfg.CoalescePromotions = true
		case "minpages":
			cfg.PromoteMinPages, _ = strconv.Atoi(val)
		case "wgroup":
			cfg.WitnessGroupPages, _ = strconv.Atoi(val)
		case "compact":
			cfg.CompactWitness = true
		case "linger":
			var err error
			if cfg.PromoteLinger, err = time.ParseDuration(val); err != nil {
				d.Fatalf(h.t, "%v", err)
			}
		case "start":
			cfg.StartCursor = []byte(val)
		case "retries":
			cfg.FetchRetries, _ = strconv.Atoi(val)
		case "maxrestarts":
			cfg.MaxRestarts, _ = strconv.Atoi(val)
		case "backoff":
			var err error
			if cfg.FetchBackoff, err = time.ParseDuration(val); err != nil {
				d.Fatalf(h.t, "%v", err)
			}
		case "leased":
			leaseOwner = val
		case "maxpoll":
			var err error
			if cfg.MaxPollInterval, err = time.ParseDuration(val); err != nil {
				d.Fatalf(h.t, "%v", err)
			}
		default:
			d.Fatalf(h.t, "unknown config %s", arg.Key)
		}
	}
	cfg.Contract = c
	h.cfg = cfg
	h.lease = store.Lease{}
	h.mem = memstore.New()
	h.st = &faulty{Store: h.mem, armed: map[string]string{}}
	h.m = chain.New(cfg)
	h.now, h.wake, h.attempt, h.fetch, h.flight = epoch, time.Time{}, 0, nil, nil
	h.m.Step(chain.Tick{Now: h.now})
	if cfg.Incarnation {
		// An incarnation change is a membership change: the scope has a
		// record.
		if _, err := h.mem.SwapMembership(ctx, 0, store.Membership{Scope: key.Scope, Epoch: 1, Partitions: []string{key.Partition}, Proven: true}); err != nil {
			d.Fatalf(h.t, "%v", err)
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		kv := kvs(f[1:])
		switch f[0] {
		case "checkpoint":
			h.seedCheckpoint(d, kv)
		case "witness":
			h.seedWitness(d, kv)
		case "membership":
			// membership partitions=a,b: epoch 1, proven.
			if _, err := h.mem.SwapMembership(ctx, 0, store.Membership{Scope: key.Scope, Epoch: 1, Partitions: strings.Split(kv["partitions"], ","), Proven: true}); err != nil {
				d.Fatalf(h.t, "%v", err)
			}
		default:
			d.Fatalf(h.t, "unknown setup line %q", line)
		}
	}
	if leaseOwner != "" {
		// The worker starts once its instance claimed the lease (on the
		// checkpoint, created first when there is none).
		cp, err := h.mem.LoadCheckpoint(ctx, key)
		if errors.Is(err, store.ErrNotFound) {
			cp, err = h.mem.CreateCheckpoint(ctx, store.Checkpoint{Key: key, Cursor: cfg.StartCursor, Generation: 1, Epoch: 1})
		}
		if err == nil {
			cp, err = h.mem.ClaimLease(ctx, key, cp.Lease, leaseOwner)
		}
		if err != nil {
			d.Fatalf(h.t, "%v", err)
		}
		h.lease = cp.Lease
		h.cfg.Leased, h.cfg.Lease = true, cp.Lease
		h.m = chain.New(h.cfg)
		h.m.Step(chain.Tick{Now: h.now})
	}
	h.b.WriteString(h.dump())
}

func kvs(f []string) map[string]string {
	kv := map[string]string{}
	for _, s := range f {
		k, v, _ := strings.Cut(s, "=")
		kv[k] = v
	}
	return kv
}

func num(d *datadriven.TestData, t *testing.T, s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		d.Fatalf(t, "not a number: %q", s)
	}
	return n
}

// seedCheckpoint stores a checkpoint: created at generation 1 and promoted
// up to gen (witness ids "seed"), with the given cursor, watermark, applied
// boundary, promoted witness, completion and park reason.
func (h *harness) seedCheckpoint(d *datadriven.TestData, kv map[string]string) {
	gen := uint64(1)
	if g, ok := kv["gen"]; ok {
		gen = uint64(num(d, h.t, g))
	}
	cur := []byte(kv["cursor"])
	cp := store.Checkpoint{Key: key, Generation: 1, Epoch: 1}
	if gen == 1 {
		cp.Cursor = cur
	}
	if a, ok := kv["applied"]; ok && gen == 1 {
		cp.Applied, cp.HasApplied = coord.IntPosition(num(d, h.t, a)), true
	}
	if w, ok := kv["wm"]; ok && gen == 1 {
		cp.Watermark = coord.Integer(num(d, h.t, w))
	}
	got, err := h.mem.CreateCheckpoint(ctx, cp)
	if err != nil {
		d.Fatalf(h.t, "%v", err)
	}
	for got.Generation < gen {
		p := store.Promotion{Key: key, FromCursor: got.Cursor, FromGeneration: got.Generation, To: []byte(fmt.Sprintf("seed%d", got.Generation+1)), WitnessID: "seed", Epoch: 1}
		if got.Generation+1 == gen {
			p.To, p.WitnessID = cur, kv["wid"]
			if p.WitnessID == "" {
				p.WitnessID = "seed"
			}
			if a, ok := kv["applied"]; ok {
				p.Applied, p.HasApplied = coord.IntPosition(num(d, h.t, a)), true
			}
			if w, ok := kv["wm"]; ok {
				p.Watermark = coord.Integer(num(d, h.t, w))
			}
			_, p.Complete = kv["complete"]
		}
		if got, err = h.mem.Promote(ctx, p); err != nil {
			d.Fatalf(h.t, "%v", err)
		}
	}
	if r, ok := kv["parked"]; ok {
		if _, err := h.mem.SetParked(ctx, key, got.Cursor, got.Generation, store.Lease{}, r); err != nil {
			d.Fatalf(h.t, "%v", err)
		}
	}
}

// seedWitness stores a witness: id, gen, cursor, and a response in the
// response syntax (events, succ=, ct=, ...), acked=N.
func (h *harness) seedWitness(d *datadriven.TestData, kv map[string]string) {
	var toks []string
	for k, v := range kv {
		switch k {
		case "id", "gen", "cursor", "acked", "events":
		default:
			if v == "" {
				toks = append(toks, k)
			} else {
				toks = append(toks, k+"="+v)
			}
		}
	}
	if e := kv["events"]; e != "" {
		toks = append(toks, strings.Split(e, ",")...)
	}
	slices.Sort(toks)
	w, err := reconcile.Build(reconcile.BuildInput{
		Scope: key.Scope, Partition: key.Partition, Generation: uint64(num(d, h.t, kv["gen"])), InputCursor: []byte(kv["cursor"]),
		AttemptID: kv["id"], Response: h.response(d, strings.Join(toks, " ")), Contract: h.cfg.Contract,
	})
	if err != nil {
		d.Fatalf(h.t, "%v", err)
	}
	if a, ok := kv["acked"]; ok {
		w.AckedThrough = int(num(d, h.t, a))
	}
	if err := h.mem.PutWitness(ctx, w); err != nil {
		d.Fatalf(h.t, "%v", err)
	}
}

// response parses the response syntax.
func (h *harness) response(d *datadriven.TestData, s string) reconcile.Response {
	var r reconcile.Response
	for _, tok := range strings.Fields(s) {
		k, v, isKV := strings.Cut(tok, "=")
		switch {
		case isKV && k == "succ":
			r.Successor = []byte(v)
		case isKV && k == "ct":
			r.CompleteThrough = coord.Integer(num(d, h.t, v))
		case isKV && k == "marker":
			r.Marker = []byte(v)
		case tok == "sealed":
			r.Sealed = true
		case tok == "more":
			r.HasMore, r.HasMoreKnown = true, true
		case tok == "more-known":
			r.HasMoreKnown = true
		default:
			id, pos, hasID := strings.Cut(tok, "@")
			if !hasID {
				id, pos = "e"+tok, tok
			}
			pos, payload, hasPayload := strings.Cut(pos, ":")
			if !hasPayload {
				payload = "payload of " + id
			}
			r.Events = append(r.Events, reconcile.Event{ID: id, Position: coord.IntPosition(num(d, h.t, pos)), Payload: []byte(payload)})
		}
	}
	return r
}

func (h *harness) writer(d *datadriven.TestData) string {
	cp, err := h.mem.LoadCheckpoint(ctx, key)
	if err != nil {
		d.Fatalf(h.t, "%v", err)
	}
	kv := kvs(strings.Fields(d.CmdArgs[0].Key + " " + strings.Join(argStrings(d.CmdArgs[1:]), " ")))
	switch d.CmdArgs[0].Key {
	case "promote":
		cp, err = h.mem.Promote(ctx, store.Promotion{Key: key, FromCursor: cp.Cursor, FromGeneration: cp.Generation, To: []byte(kv["to"]), WitnessID: kv["wid"], Epoch: 1})
	case "park":
		cp, err = h.mem.SetParked(ctx, key, cp.Cursor, cp.Generation, store.Lease{}, kv["reason"])
	case "unpark":
		cp, err = h.mem.SetParked(ctx, key, cp.Cursor, cp.Generation, cp.Lease, "")
	case "takeover":
		cp, err = h.mem.ClaimLease(ctx, key, cp.Lease, kv["owner"])
	case "pass":
		// Another worker of the partition starts a re-read pass: a restart
		// promotion to "to" that records the pass (from, mark].
		from, err1 := strconv.ParseInt(kv["from"], 10, 64)
		mark, err2 := strconv.ParseInt(kv["mark"], 10, 64)
		if err1 != nil || err2 != nil {
			d.Fatalf(h.t, "writer pass: from and mark are integers")
		}
		rs := store.RereadState{From: coord.IntPosition(from), HasFrom: true, Mark: coord.IntPosition(mark)}
		cp, err = h.mem.Promote(ctx, store.Promotion{Key: key, FromCursor: cp.Cursor, FromGeneration: cp.Generation, To: []byte(kv["to"]), WitnessID: chain.RereadWitnessID, Epoch: 1, Incarnation: cp.Incarnation, Reread: &rs})
	default:
		d.Fatalf(h.t, "unknown writer command")
	}
	if err != nil {
		return "error: " + err.Error()
	}
	return chain.DescribeCheckpoint(cp)
}

func argStrings(args []datadriven.CmdArg) []string {
	var out []string
	for _, a := range args {
		out = append(out, a.String())
	}
	return out
}

func (h *harness) dump() string {
	var b strings.Builder
	cp, err := h.mem.LoadCheckpoint(ctx, key)
	if err != nil {
		return "no checkpoint\n"
	}
	fmt.Fprintf(&b, "checkpoint %s\n", chain.DescribeCheckpoint(cp))
	ws, _ := h.mem.WitnessesFrom(ctx, key, 1)
	for _, w := range ws {
		fmt.Fprintf(&b, "witness %s\n", chain.DescribeWitness(w))
	}
	if m, err := h.mem.LoadMembership(ctx, key.Scope); err == nil {
		fmt.Fprintf(&b, "membership epoch %d %v proven=%v unproven=%v", m.Epoch, m.Partitions, m.Proven, m.Unproven)
		if m.Reason != "" {
			fmt.Fprintf(&b, ": %s", m.Reason)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// faulty fails the next call of an armed method: throttle (no effect, an
// error) or lose (the write happens, the caller sees an error).
type faulty struct {
	store.Store
	armed map[string]string
}

var errInjected = errors.New("injected store failure")

func (f *faulty) arm(op, mode string) { f.armed[op] = mode }

func (f *faulty) take(op string) string {
	m := f.armed[op]
	delete(f.armed, op)
	return m
}

func (f *faulty) LoadCheckpoint(c context.Context, k store.Key) (store.Checkpoint, error) {
	if f.take("LoadCheckpoint") != "" {
		return store.Checkpoint{}, errInjected
	}
	return f.Store.LoadCheckpoint(c, k)
}

func (f *faulty) WitnessesFrom(c context.Context, k store.Key, g uint64) ([]reconcile.Witness, error) {
	if f.take("WitnessesFrom") != "" {
		return nil, errInjected
	}
	return f.Store.WitnessesFrom(c, k, g)
}

func (f *faulty) PutWitness(c context.Context, w reconcile.Witness) error {
	switch f.take("PutWitness") {
	case "throttle":
		return errInjected
	case "lose":
		_ = f.Store.PutWitness(c, w)
		return errInjected
	}
	return f.Store.PutWitness(c, w)
}

func (f *faulty) PutWitnesses(c context.Context, ws []reconcile.Witness) error {
	switch f.take("PutWitnesses") {
	case "throttle":
		return errInjected
	case "lose":
		_ = store.PutWitnesses(c, f.Store, ws)
		return errInjected
	}
	return store.PutWitnesses(c, f.Store, ws)
}

func (f *faulty) RecordReceipt(c context.Context, k store.Key, g uint64, a string, n int) error {
	switch f.take("RecordReceipt") {
	case "throttle":
		return errInjected
	case "lose":
		_ = f.Store.RecordReceipt(c, k, g, a, n)
		return errInjected
	}
	return f.Store.RecordReceipt(c, k, g, a, n)
}

func (f *faulty) Promote(c context.Context, p store.Promotion) (store.Checkpoint, error) {
	switch f.take("Promote") {
	case "throttle":
		return store.Checkpoint{}, errInjected
	case "lose":
		_, _ = f.Store.Promote(c, p)
		return store.Checkpoint{}, errInjected
	}
	return f.Store.Promote(c, p)
}

func (f *faulty) SetParked(c context.Context, k store.Key, cur []byte, g uint64, l store.Lease, r string) (store.Checkpoint, error) {
	if f.take("SetParked") != "" {
		return store.Checkpoint{}, errInjected
	}
	return f.Store.SetParked(c, k, cur, g, l, r)
}

// TestStates runs golden scenarios and checks every state the machine
// passes through (consecutive repeats dropped), the states of the store
// calls the harness answers inline included: a park, a recovery that
// parks after max_restarts, a coalesced promotion, an unknown promotion
// outcome resolved, a hold, a complete partition watching its incarnation.
func TestStates(t *testing.T) {
	const (
		load    = chain.StateLoading
		fetch   = chain.StateFetching
		wit     = chain.StateWitnessing
		acks    = chain.StateAwaitingAcks
		receipt = chain.StateRecordingReceipt
		promote = chain.StatePromoting
		resolve = chain.StateResolving
		abandon = chain.StateAbandoning
		hold    = chain.StateHolding
		poll    = chain.StatePolling
		recov   = chain.StateRecovering
		parking = chain.StateParking
		parked  = chain.StateParked
		check   = chain.StateCheckingIncarnation
		reinc   = chain.StateReincarnating
		watch   = chain.StateCompleteWatching
	)
	var restarts []chain.State
	for range chain.MaxRestarts {
		restarts = append(restarts, load, fetch, recov)
	}
	tests := []struct {
		scenario string
		want     []chain.State
	}{
		{"park_fence_keeps_witness", []chain.State{load, fetch, wit, acks, promote, load, parked, load, fetch, acks, promote, fetch}},
		{"malformed_parks_after_budget", []chain.State{load, fetch, wit, acks, promote, poll, fetch, poll, fetch, parking, load, parked,
			load, fetch, poll, load, fetch, parking, load, parked, load, fetch, wit, acks, promote, parking, load, parked}},
		{"restart_loop_parks", append(restarts, load, fetch, parking, load, parked)},
		{"coalesce_delivered_pages", []chain.State{load, fetch, wit, acks, wit, acks, wit, acks, receipt, acks, promote, fetch}},
		{"overtaken_promotion", []chain.State{load, fetch, wit, acks, promote, resolve, load, fetch, load, fetch, wit, acks, promote, resolve, abandon, load, fetch}},
		{"held_last_page", []chain.State{load, fetch, wit, acks, promote, fetch, wit, acks, hold, poll, fetch, poll, fetch, poll}},
		// A complete partition checks its incarnation, then watches it
		// (complete-watching); a recreated source reopens it.
		{"incarnation_complete_partition", []chain.State{
			load, check, reinc, load, check, watch, check, watch, check, reinc, load, check, fetch, wit, check, acks, promote, fetch,
			load, check, reinc, load, check, watch, load, check, reinc, load, check, fetch, wit, check, acks}},
	}
	for _, tt := range tests {
		t.Run(tt.scenario, func(t *testing.T) {
			h := &harness{t: t}
			datadriven.RunTest(t, "testdata/"+tt.scenario, func(t *testing.T, d *datadriven.TestData) string {
				h.t = t
				return h.run(d)
			})
			require.Equal(t, tt.want, h.states)
		})
	}
}

func TestStateNames(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range chain.States() {
		name := s.String()
		require.NotContains(t, name, "State(", "state %d has no name", s)
		require.False(t, seen[name], "two states named %s", name)
		seen[name] = true
	}
	require.Equal(t, "State(200)", chain.State(200).String())
	m := chain.New(chain.Config{Key: key, MaxPagesInFlight: 1, PollInterval: time.Second, ParkCheckInterval: time.Second, StoreBackoff: time.Second})
	require.Equal(t, chain.StateNew, m.State())
	m.Step(chain.Start{})
	require.Equal(t, chain.StateLoading, m.State())
	call, _ := m.Awaiting()
	require.IsType(t, chain.Load{}, call)
	m.Step(chain.Stop{})
	require.Equal(t, chain.StateStopped, m.State())
}

// A machine is never built with fewer than one page in flight: the input
// refuses such a max_pages_in_flight at config, and New asserts it instead
// of running with another value than the one configured.
func TestNewAssertsPagesInFlight(t *testing.T) {
	for _, n := range []int{0, -1} {
		require.PanicsWithValue(t, fmt.Sprintf("chain.New: MaxPagesInFlight must be at least 1, got %d", n), func() {
			chain.New(chain.Config{Key: key, MaxPagesInFlight: n, PollInterval: time.Second, ParkCheckInterval: time.Second, StoreBackoff: time.Second})
		})
	}
	require.NotPanics(t, func() {
		chain.New(chain.Config{Key: key, MaxPagesInFlight: 1, PollInterval: time.Second, ParkCheckInterval: time.Second, StoreBackoff: time.Second})
	})
}
