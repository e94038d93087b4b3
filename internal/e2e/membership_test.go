//go:build unix

package e2e

// Live membership end to end: three `connect run` processes on loopback
// share, through leases in one dynalite table, the partitions of the
// internal/fakeapi Shards stream, which they discover (discover: true,
// discovery_interval 1s, lineage parents_first). While they run:
//
//  1. a partition is added: it is claimed, read from the start, and joins
//     the membership through a proven epoch;
//  2. an operator runs `connect tidemark advance-epoch`: every process's
//     output carries the new epoch (tidemark_epoch and the frontier's
//     epoch) afterwards;
//  3. the process holding the most partitions is killed with SIGKILL: the
//     survivors take its partitions over;
//  4. a partition with a backlog splits; its pages are held until its
//     children have joined the membership and an operator's second
//     advance-epoch (its cutover above the parent's seal) has been
//     adopted, then answered slowly: the children keep their lineage
//     through that epoch and are not read before their parent is read to
//     its end, and the parent leaves the membership, proven, though the
//     source still lists it.
//
// Throughout, a sampler reads the membership and the published frontier
// records every 100ms: epochs never go back, an epoch's partitions never
// change, and within an epoch neither the published scalar nor any vector
// entry decreases. At the end, the oracles over the union of the three
// outputs (one JSON line per message, stamped with now() by the pipeline,
// the same machine clock for every process): every event the source ever
// held is delivered (duplicates allowed); the parent's last line is
// earlier than the children's first; every epoch holding a child records
// its parent; and no message carries a frontier F
// (in epoch E, at time t) while some event at a position <= F of a member
// of E (a key of the attached vector) had not yet been delivered before t.
//
// Run: ./scripts/with-dynalite go test -count=1 ./internal/e2e/ -run Membership -v
//
// Every identifier here starts with member/Member: other tests share the
// package.

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/dynalitetest"
	"github.com/tidemark/tidemark/internal/dynamostore"
	"github.com/tidemark/tidemark/internal/e2etest"
	"github.com/tidemark/tidemark/internal/fakeapi"
	"github.com/tidemark/tidemark/internal/ops"
	"github.com/tidemark/tidemark/internal/store"
)

const (
	memberScope = "e2e-membership"
	// memberSlowPage is how long each page of the splitting partition
	// takes to answer, so that its backlog is still being read when its
	// children are discovered.
	memberSlowPage = 250 * time.Millisecond
)

// memberConfig is the pipeline of one process: %[1]s the instance id, %[2]s
// the fake's URL, %[3]s the table, %[4]s the DynamoDB endpoint, %[5]s the
// output file.
const memberConfig = `
http:
  enabled: false
logger:
  level: info
  format: logfmt
  add_timestamp: true
shutdown_timeout: 10s
input:
  paginated_partitions:
    scope: ` + memberScope + `
    discover: true
    discovery_interval: 1s
    lineage: parents_first
    max_pages_in_flight: 2
    poll_interval: 200ms
    store_backoff: 200ms
    frontier_publish_interval: 300ms
    checkpoint:
      backend: dynamodb
      dynamodb:
        table: %[3]s
        endpoint: %[4]s
        region: us-east-1
    leases:
      instance_id: %[1]s
      lease_period: 2s
      renew_interval: 500ms
      balance_interval: 1s
    http:
      url: '%[2]s/partitions/${! @partition }?after=${! if @cursor == "" { "0" } else { @cursor } }&limit=5'
      partitions_url: '%[2]s/partitions'
      # Roots as plain names, a split's children as objects naming their
      # parents: both forms of an entry.
      partitions_mapping: |
        root = this.partitions.map_each(p -> if p.parents.or([]).length() > 0 { {"name": p.name, "parents": p.parents} } else { p.name })
      events: root = this.events
      event_id: root = this.id
      event_position: root = this.pos
      event_payload: root = this
      successor: root = this.next | deleted()
      has_more: root = this.has_more
      complete_through: root = this.complete_through
      sealed: root = this.sealed
      contract:
        empty_page: final_through_watermark
        finality: source
        positions: ordered
        coordinate: integer
        watermark_covers_positions: true
        missing_successor: end_of_traversal
pipeline:
  threads: 1
  processors:
    - partition_frontier:
        scope: ` + memberScope + `
        refresh_interval: 300ms
        checkpoint:
          backend: dynamodb
          dynamodb:
            table: %[3]s
            endpoint: %[4]s
            region: us-east-1
    - mapping: |
        root.instance = "%[1]s"
        root.partition = @tidemark_partition
        root.id = @tidemark_event_id
        root.pos = @tidemark_position.int64()
        root.epoch = @tidemark_epoch.int64()
        root.frontier = @tidemark_frontier.int64().catch(null)
        root.frontier_epoch = @tidemark_frontier_epoch.int64().catch(0)
        root.frontier_vector = @tidemark_frontier_vector.parse_json().map_each(kv -> kv.value.int64().catch(null)).catch(null)
        root.error = error()
        root.at = now().ts_unix_nano()
output:
  file:
    path: %[5]s
    codec: lines
`

// memberProc is one `connect run` process.
type memberProc struct {
	*e2etest.Proc
	id      string
	outPath string
}

func memberStart(t *testing.T, bin, dir, fakeURL, table, endpoint, id string) *memberProc {
	t.Helper()
	p := &memberProc{id: id, outPath: filepath.Join(dir, id+".jsonl")}
	cfgPath := filepath.Join(dir, id+".yaml")
	require.NoError(t, os.WriteFile(cfgPath, fmt.Appendf(nil, memberConfig, id, fakeURL, table, endpoint, p.outPath), 0o644))
	cmd := exec.Command(bin, "run", cfgPath)
	cmd.Env = e2etest.Env()
	p.Proc = e2etest.Start(t, id, cmd)
	return p
}

// memberLine is one output line.
type memberLine struct {
	Instance      string            `json:"instance"`
	Partition     string            `json:"partition"`
	ID            string            `json:"id"`
	Pos           int64             `json:"pos"`
	Epoch         uint64            `json:"epoch"`
	Frontier      *int64            `json:"frontier"`
	FrontierEpoch uint64            `json:"frontier_epoch"`
	Vector        map[string]*int64 `json:"frontier_vector"`
	// Error is the processing error of the message (the frontier could
	// not be attached), if any.
	Error *string `json:"error"`
	At    int64   `json:"at"`
}

// lines reads the process's output: every complete line (a line the kill
// cut short has no newline and is left out). A complete line that is not
// a whole record fails t.
func (p *memberProc) lines(t *testing.T) []memberLine {
	t.Helper()
	b, err := os.ReadFile(p.outPath)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	require.NoError(t, err)
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[:i+1]
	} else {
		b = nil
	}
	var out []memberLine
	for raw := range bytes.Lines(b) {
		var l memberLine
		if err := json.Unmarshal(raw, &l); err != nil || l.ID == "" || l.Partition == "" || l.At == 0 || l.Epoch == 0 ||
			(l.Error == nil && (l.FrontierEpoch == 0 || l.Vector == nil)) {
			t.Fatalf("%s wrote a line that is not a whole record (%v): %s", p.id, err, raw)
		}
		out = append(out, l)
	}
	return out
}

// memberOutputs reads every process's lines.
func memberOutputs(t *testing.T, procs []*memberProc) map[string][]memberLine {
	t.Helper()
	out := map[string][]memberLine{}
	for _, p := range procs {
		out[p.id] = p.lines(t)
	}
	return out
}

// memberMissing returns the events of want in no output, and the
// number of events delivered.
func memberMissing(outs map[string][]memberLine, want []fakeapi.ShardEvent) []string {
	seen := map[string]bool{}
	for _, ls := range outs {
		for _, l := range ls {
			seen[l.ID] = true
		}
	}
	var out []string
	for _, e := range want {
		if !seen[e.ID] {
			out = append(out, e.ID)
		}
	}
	return out
}

// memberSample is one read of the membership and published frontier
// records.
type memberSample struct {
	at          time.Time
	membership  store.Membership
	hasMember   bool
	frontier    store.Frontier
	hasFrontier bool
}

// memberSampler reads both records every 100ms and checks, as it goes,
// that epochs never go back, that an epoch's partitions never change, and
// that within an epoch neither the published scalar nor any published
// vector entry decreases.
type memberSampler struct {
	st      store.Store
	once    sync.Once
	mu      sync.Mutex
	samples []memberSample
	errs    []string
	stop    chan struct{}
	done    chan struct{}
}

func newMemberSampler(st store.Store) *memberSampler {
	s := &memberSampler{st: st, stop: make(chan struct{}), done: make(chan struct{})}
	go s.run()
	return s
}

func (s *memberSampler) fail(format string, a ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.errs) < 20 {
		s.errs = append(s.errs, fmt.Sprintf(format, a...))
	}
}

func (s *memberSampler) run() {
	defer close(s.done)
	var lastM *store.Membership
	var lastF *store.Frontier
	epochs := map[uint64][]string{} // membership epoch -> its partitions
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		smp := memberSample{at: time.Now()}
		m, merr := s.st.LoadMembership(ctx, memberScope)
		f, ferr := s.st.LoadFrontier(ctx, memberScope)
		cancel()
		if merr == nil {
			smp.membership, smp.hasMember = m, true
			if lastM != nil && m.Epoch < lastM.Epoch {
				s.fail("the membership went back from epoch %d to %d", lastM.Epoch, m.Epoch)
			}
			if ps, ok := epochs[m.Epoch]; ok && !slices.Equal(ps, m.Partitions) {
				s.fail("membership epoch %d changed its partitions from %v to %v: every change is a new epoch", m.Epoch, ps, m.Partitions)
			}
			epochs[m.Epoch] = slices.Clone(m.Partitions)
			lastM = &m
		}
		if ferr == nil {
			smp.frontier, smp.hasFrontier = f, true
			if lastF != nil {
				switch {
				case f.Epoch < lastF.Epoch:
					s.fail("the published frontier went back from epoch %d to %d", lastF.Epoch, f.Epoch)
				case f.Epoch == lastF.Epoch:
					if !lastF.Scalar.IsZero() && (f.Scalar.IsZero() || f.Scalar.Less(lastF.Scalar)) {
						s.fail("epoch %d: the published scalar went from %s to %q", f.Epoch, lastF.Scalar, f.Scalar)
					}
					for p, w := range lastF.Vector {
						if w.IsZero() {
							continue
						}
						if now := f.Vector[p]; now.IsZero() || now.Less(w) {
							s.fail("epoch %d: the published vector entry of %s went from %s to %q", f.Epoch, p, w, now)
						}
					}
				}
			}
			lastF = &f
		}
		s.mu.Lock()
		s.samples = append(s.samples, smp)
		s.mu.Unlock()
		select {
		case <-s.stop:
			return
		case <-tick.C:
		}
	}
}

// close stops the sampler and returns what it found wrong.
func (s *memberSampler) close() []string {
	s.once.Do(func() { close(s.stop) })
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.errs)
}

func (s *memberSampler) all() []memberSample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.samples)
}

func (s *memberSampler) latest() memberSample {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.samples) == 0 {
		return memberSample{}
	}
	return s.samples[len(s.samples)-1]
}

func (smp memberSample) describe() string {
	if !smp.hasMember {
		return "no membership record"
	}
	m := smp.membership
	s := fmt.Sprintf("membership epoch %d %v proven=%t unproven=%v parents=%v", m.Epoch, m.Partitions, m.Proven, m.Unproven, m.Parents)
	if m.Reason != "" {
		s += " (" + m.Reason + ")"
	}
	if smp.hasFrontier {
		s += fmt.Sprintf("; published frontier epoch %d scalar %q vector %v", smp.frontier.Epoch, smp.frontier.Scalar, smp.frontier.Vector)
		if smp.frontier.Reason != "" {
			s += " (" + smp.frontier.Reason + ")"
		}
	}
	return s
}

// memberOwners returns, from the checkpoints, the instance id holding
// each partition's lease ("" = none).
func memberOwners(ctx context.Context, st store.Store) (map[string]string, error) {
	cps, err := st.ListCheckpoints(ctx, memberScope)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, cp := range cps {
		id, _, _ := strings.Cut(cp.Lease.Owner, "#")
		out[cp.Partition] = id
	}
	return out, nil
}

// memberAdvance is the operator's advance-epoch at the cutover status
// vouches for (memberCutover). The published frontier of the previous
// epoch may move above that cutover between the read and the write (the
// members not behind keep publishing); advance-epoch then refuses it, and
// the operator reads status again and retries, as a person would.
func memberAdvance(t *testing.T, storeFlags []string, alive ...func() error) string {
	t.Helper()
	var out string
	e2etest.WaitFor(t, e2etest.Patience, "advance-epoch to accept a cutover at or above the published frontier", func() (bool, string) {
		args := append([]string{"tidemark", "advance-epoch", "--yes", "--cutover", memberCutover(t, storeFlags, alive...)}, storeFlags...)
		cmd := exec.Command(e2etest.Connect(t), args...)
		cmd.Env = e2etest.Env()
		res := e2etest.Run(t, e2etest.Patience, cmd)
		switch {
		case res.Code == 0:
			out = res.Stdout
			return true, ""
		case strings.Contains(res.Output, "below the published frontier"), strings.Contains(res.Output, "the state changed since it was read"):
			return false, strings.TrimSpace(res.Stderr)
		}
		t.Fatalf("connect %s: exit code %d\n%s", strings.Join(args, " "), res.Code, e2etest.Tail(res.Output, 40))
		return false, ""
	}, alive...)
	return out
}

// memberConnect runs a `connect tidemark` command and returns its
// stdout; a repair that lost its compare-and-swap to a running input is
// run again (it re-reads the state), a few times.
func memberConnect(t *testing.T, args ...string) string {
	t.Helper()
	for try := 0; ; try++ {
		cmd := exec.Command(e2etest.Connect(t), args...)
		cmd.Env = e2etest.Env()
		res := e2etest.Run(t, e2etest.Patience, cmd)
		if res.Code == 0 {
			return res.Stdout
		}
		if try < 5 && strings.Contains(res.Output, "the state changed since it was read") {
			t.Logf("connect %s lost to a concurrent write, again: %s", strings.Join(args, " "), strings.TrimSpace(res.Stderr))
			continue
		}
		t.Fatalf("connect %s: exit code %d\n%s", strings.Join(args, " "), res.Code, e2etest.Tail(res.Output, 40))
	}
}

// memberCutover is the cutover an operator can vouch for from `connect
// tidemark status --json`: the combined frontier, or, while it is withheld,
// the lowest complete-through watermark of the members that have one (no
// member is behind it). advance-epoch refuses a cutover below the
// published frontier (consumers were already told it is complete), so an
// operator waits until the lowest member (a partition that joined behind
// it) has caught up with the published frontier.
func memberCutover(t *testing.T, storeFlags []string, alive ...func() error) string {
	t.Helper()
	var cutover string
	e2etest.WaitFor(t, e2etest.Patience, "a cutover at or above the published frontier that every member proves", func() (bool, string) {
		out := memberConnect(t, append([]string{"tidemark", "status", "--json"}, storeFlags...)...)
		var s ops.Status
		require.NoError(t, json.Unmarshal([]byte(out), &s), "status --json: %s", out)
		if s.Frontier != nil {
			cutover = *s.Frontier
		} else {
			lowest := int64(-1)
			for _, w := range s.Vector {
				if n, err := strconv.ParseInt(w, 10, 64); err == nil && (lowest < 0 || n < lowest) {
					lowest = n
				}
			}
			if lowest < 0 {
				return false, "status --json shows no member watermark: " + out
			}
			cutover = strconv.FormatInt(lowest, 10)
		}
		if s.Published == nil {
			return true, ""
		}
		c, err1 := strconv.ParseInt(cutover, 10, 64)
		p, err2 := strconv.ParseInt(*s.Published, 10, 64)
		if err1 != nil || err2 != nil {
			return true, "" // not integers: advance-epoch judges the kinds
		}
		return c >= p, fmt.Sprintf("cutover %d, published frontier %d", c, p)
	}, alive...)
	return cutover
}

func TestMembershipLiveAcrossThreeProcesses(t *testing.T) {
	tb := dynalitetest.NewTable(t)
	ctx := t.Context()
	client, err := dynalitetest.Client(ctx, tb.Endpoint)
	require.NoError(t, err)
	require.NoError(t, dynamostore.EnsureTable(ctx, client, tb.Name))
	st := dynamostore.NewDynamoStoreWithClient(client, tb.Name)
	// One process is killed mid-request; dynalite 4.0.0 exits when a client
	// hangs up mid-request, so the processes talk to it through the shield.
	shielded := dynaliteShield(t, tb.Endpoint)
	bin := e2etest.Connect(t)
	dir := t.TempDir()
	storeFlags := []string{"--scope", memberScope, "--table", tb.Name, "--endpoint", tb.Endpoint}

	const added, splitting = "s7", "s2"
	// Six partitions: a fair share of two for each instance.
	src := fakeapi.NewShards(t, "s1", "s2", "s3", "s4", "s5", "s6")
	src.AppendOpen(15)

	sampler := newMemberSampler(st)
	defer sampler.close()
	ids := []string{"i1", "i2", "i3"}
	var procs []*memberProc
	for _, id := range ids {
		procs = append(procs, memberStart(t, bin, dir, src.URL(), tb.Name, shielded, id))
	}
	alive := func(ps []*memberProc) []func() error {
		var out []func() error
		for _, p := range ps {
			out = append(out, p.Running)
		}
		return out
	}
	delivered := func(what string, want []fakeapi.ShardEvent, live []*memberProc) {
		t.Helper()
		e2etest.WaitFor(t, e2etest.Patience, what, func() (bool, string) {
			m := memberMissing(memberOutputs(t, procs), want)
			return len(m) == 0, fmt.Sprintf("%d of %d events missing, e.g. %v; %s", len(m), len(want), m[:min(5, len(m))], sampler.latest().describe())
		}, alive(live)...)
	}
	owners := func() (map[string]string, string) {
		o, err := memberOwners(ctx, st)
		if err != nil {
			return nil, err.Error()
		}
		return o, fmt.Sprintf("owners %v", o)
	}

	// The seeded events, shared: every instance holds a partition.
	delivered("every seeded event", src.Events(), procs)
	e2etest.WaitFor(t, e2etest.Patience, "each of i1, i2, i3 to hold a partition", func() (bool, string) {
		o, state := owners()
		held := map[string]bool{}
		for _, id := range o {
			held[id] = true
		}
		return held["i1"] && held["i2"] && held["i3"], state
	}, alive(procs)...)
	stopTrickle := src.Trickle(t, 300*time.Millisecond, 1)

	// 1. A partition joins.
	require.NoError(t, src.AddPartition(added))
	_, err = src.Append(added, 12)
	require.NoError(t, err)
	e2etest.WaitFor(t, e2etest.Patience, "the added "+added+" to join the membership", func() (bool, string) {
		smp := sampler.latest()
		return smp.hasMember && slices.Contains(smp.membership.Partitions, added), smp.describe()
	}, alive(procs)...)
	e2etest.WaitFor(t, e2etest.Patience, "the added "+added+" to be claimed", func() (bool, string) {
		o, state := owners()
		return o[added] != "", state
	}, alive(procs)...)
	delivered("the added partition's events", src.Events(), procs)

	// 2. The operator's epoch change. advance-epoch refuses a cutover below
	// the published frontier or above the lowest member watermark; while
	// the source trickles, a member that joined behind may trail the
	// published frontier for as long as the machine is busy, so the
	// operator picks a quiet moment: the trickle pauses until the cutover
	// is accepted, then goes on.
	stopTrickle()
	before, err := st.LoadMembership(ctx, memberScope)
	require.NoError(t, err)
	advancedAt := time.Now()
	out := memberAdvance(t, storeFlags, alive(procs)...)
	t.Logf("advance-epoch: %s", strings.TrimSpace(out))
	stopTrickle = src.Trickle(t, 300*time.Millisecond, 1)
	adv, err := st.LoadMembership(ctx, memberScope)
	require.NoError(t, err)
	require.Greater(t, adv.Epoch, before.Epoch, "advance-epoch wrote a new epoch")
	for _, p := range procs {
		e2etest.WaitFor(t, e2etest.Patience, fmt.Sprintf("%s to emit messages of epoch %d (or later) with its frontier", p.id, adv.Epoch), func() (bool, string) {
			ls := p.lines(t)
			for _, l := range slices.Backward(ls) {
				if l.At > advancedAt.UnixNano() && l.Epoch >= adv.Epoch && l.FrontierEpoch >= adv.Epoch {
					return true, ""
				}
			}
			last := "no line"
			if len(ls) > 0 {
				last = fmt.Sprintf("last line epoch %d frontier epoch %d", ls[len(ls)-1].Epoch, ls[len(ls)-1].FrontierEpoch)
			}
			return false, last + "; " + sampler.latest().describe()
		}, alive(procs)...)
	}

	// 3. kill -9 of the instance holding the most partitions.
	o, state := owners()
	require.NotNil(t, o, state)
	count := map[string]int{}
	for _, id := range o {
		count[id]++
	}
	victim := procs[0]
	for _, p := range procs {
		if count[p.id] > count[victim.id] {
			victim = p
		}
	}
	t.Logf("kill -9 of %s holding %d partitions (%s)", victim.id, count[victim.id], state)
	require.NoError(t, victim.Signal(syscall.SIGKILL))
	<-victim.Done()
	var survivors []*memberProc
	for _, p := range procs {
		if p != victim {
			survivors = append(survivors, p)
		}
	}

	// 4. The split of a partition with a backlog. Its pages are held
	// until the children have joined and an operator's epoch has been
	// adopted on top of that, then answered slowly: the children are
	// members, waiting, while their parent still has most of its events
	// to deliver.
	gate := make(chan struct{})
	var gateOnce sync.Once
	openGate := func() { gateOnce.Do(func() { close(gate) }) }
	t.Cleanup(openGate) // before the fake stops: it waits for held requests
	src.OnRequest(func(r *http.Request) {
		if r.URL.Path != "/partitions/"+splitting {
			return
		}
		select {
		case <-gate:
		case <-r.Context().Done():
			return
		}
		time.Sleep(memberSlowPage)
	})
	_, err = src.Append(splitting, 60)
	require.NoError(t, err)
	splitAt := time.Now()
	children, err := src.Split(splitting)
	require.NoError(t, err)
	e2etest.WaitFor(t, e2etest.Patience, fmt.Sprintf("%v to join while %s is a member", children, splitting), func() (bool, string) {
		smp := sampler.latest()
		m := smp.membership
		return smp.hasMember && slices.Contains(m.Partitions, splitting) &&
			slices.Contains(m.Partitions, children[0]) && slices.Contains(m.Partitions, children[1]), smp.describe()
	}, alive(survivors)...)
	// The operator's epoch while the children wait: they go on waiting.
	// Its cutover is the head, above the parent's seal (the head when it
	// split): the parent is complete, so its removal is proven all the same.
	// The children have no checkpoint yet, so the checkpoints prove no
	// cutover and advance-epoch refuses it unless the operator, who vouches
	// for it from the split's lineage, passes --force.
	advancedAt = time.Now()
	out = memberConnect(t, append([]string{"tidemark", "advance-epoch", "--yes", "--force", "--cutover", strconv.FormatInt(src.Head(), 10)}, storeFlags...)...)
	t.Logf("advance-epoch while %v wait for %s: %s", children, splitting, strings.TrimSpace(out))
	adv2, err := st.LoadMembership(ctx, memberScope)
	require.NoError(t, err)
	for _, p := range survivors {
		e2etest.WaitFor(t, e2etest.Patience, fmt.Sprintf("%s to emit messages of epoch %d (or later)", p.id, adv2.Epoch), func() (bool, string) {
			for _, l := range slices.Backward(p.lines(t)) {
				if l.At > advancedAt.UnixNano() && l.Epoch >= adv2.Epoch {
					return true, ""
				}
			}
			return false, sampler.latest().describe()
		}, alive(survivors)...)
	}
	openGate()
	e2etest.WaitFor(t, e2etest.Patience, fmt.Sprintf("a proven epoch with %v and without %s", children, splitting), func() (bool, string) {
		smp := sampler.latest()
		m := smp.membership
		return smp.hasMember && m.Proven && !slices.Contains(m.Partitions, splitting) &&
			slices.Contains(m.Partitions, children[0]) && slices.Contains(m.Partitions, children[1]), smp.describe()
	}, alive(survivors)...)
	delivered("the children's events", src.Events(), survivors)

	// The end: no more events; everything is delivered and the published
	// frontier of the current epoch reaches the head.
	stopTrickle()
	final := src.Events()
	head := src.Head()
	delivered("every event", final, survivors)
	e2etest.WaitFor(t, e2etest.Patience, fmt.Sprintf("the published frontier of the current epoch to reach the head %d", head), func() (bool, string) {
		smp := sampler.latest()
		ok := smp.hasMember && smp.hasFrontier && smp.frontier.Epoch == smp.membership.Epoch &&
			!smp.frontier.Scalar.IsZero() && smp.frontier.Scalar.Int >= head
		return ok, smp.describe()
	}, alive(survivors)...)

	status := memberConnect(t, append([]string{"tidemark", "status", "--json"}, storeFlags...)...)
	var view ops.Status
	require.NoError(t, json.Unmarshal([]byte(status), &view), "status --json: %s", status)
	for _, p := range survivors {
		require.True(t, p.Stop(e2etest.Patience), "%s stops on SIGTERM", p.id)
	}
	require.Empty(t, sampler.close(), "the membership or the published frontier went back")
	samples := sampler.all()
	outs := memberOutputs(t, procs)

	// Every event the source held is delivered.
	require.Empty(t, memberMissing(outs, final), "events in no output")

	// The added partition was read from its start and joined through a
	// proven epoch: every epoch holding it before the operator's (which
	// settles whatever it finds) is proven and names it nowhere as unproven.
	joined := 0
	for _, smp := range samples {
		m := smp.membership
		if !smp.hasMember || m.Epoch >= adv.Epoch || !slices.Contains(m.Partitions, added) {
			continue
		}
		joined++
		require.True(t, m.Proven, "epoch %d, which %s joined, is unproven: %s", m.Epoch, added, m.Reason)
		require.NotContains(t, m.Unproven, added, "epoch %d lacks proof for %s", m.Epoch, added)
	}
	require.Positive(t, joined, "no sample shows %s joined before the operator's epoch", added)
	addedEvents := 0
	for _, e := range final {
		if e.Partition == added {
			addedEvents++
		}
	}
	t.Logf("%s: %d events, all delivered; %d samples of its joined epochs before the operator's, all proven", added, addedEvents, joined)

	// The split: the parent read to its end before any child event, then
	// a proven final epoch without it.
	parentLast, childFirst, violation := memberLineageOracle(outs, splitting, children[:])
	require.Empty(t, violation)
	parentAfterSplit := 0
	for _, ls := range outs {
		for _, l := range ls {
			if l.Partition == splitting && l.At > splitAt.UnixNano() {
				parentAfterSplit++
			}
		}
	}
	// Once it left, the parent never comes back, though still listed.
	left := false
	for _, smp := range samples {
		m := smp.membership
		if !smp.hasMember || smp.at.Before(splitAt) {
			continue
		}
		in := slices.Contains(m.Partitions, splitting)
		require.False(t, left && in, "epoch %d added the complete parent %s back", m.Epoch, splitting)
		left = left || !in
	}
	t.Logf("split of %s: %d of its lines after the split; its last line %s before the first child line",
		splitting, parentAfterSplit, time.Duration(childFirst-parentLast))
	for _, smp := range samples {
		m := smp.membership
		for _, c := range children {
			if smp.hasMember && slices.Contains(m.Partitions, c) {
				require.Equal(t, []string{splitting}, m.Parents[c], "epoch %d lost the lineage of %s", m.Epoch, c)
			}
		}
	}
	last := samples[len(samples)-1].membership
	require.True(t, last.Proven, "the final epoch %d is unproven: %s", last.Epoch, last.Reason)
	require.Empty(t, last.Unproven, "the final epoch %d", last.Epoch)
	require.NotContains(t, last.Partitions, splitting)
	require.Subset(t, last.Partitions, []string{"s1", "s3", "s4", "s5", "s6", added, children[0], children[1]})
	cps, err := st.ListCheckpoints(ctx, memberScope)
	require.NoError(t, err)
	for _, cp := range cps {
		require.Empty(t, cp.Parked, "%s parked", cp.Partition)
		if cp.Partition == splitting {
			require.True(t, cp.Complete, "the sealed parent's checkpoint is complete")
		}
	}
	require.Equal(t, last.Epoch, view.Epoch, "status --json")
	require.True(t, view.Proven, "status --json")
	require.NotContains(t, view.Membership, splitting, "status --json")
	require.NotNil(t, view.Frontier, "status --json shows a proven frontier")

	// Every message's frontier was complete when it was attached: each event
	// at or below it, of a member of its epoch, was delivered earlier.
	checked, errored, violation := memberFrontierOracle(outs, final)
	for id, ls := range outs {
		for _, l := range ls {
			if l.Error != nil {
				t.Logf("%s: message %s carries a processing error: %s", id, l.ID, *l.Error)
			}
		}
	}
	require.Empty(t, violation)
	require.Positive(t, checked, "no message carried a scalar frontier")
	// Within a process (one pipeline thread), the attached frontier of an
	// epoch never goes down.
	violation, epochBack := memberMonotoneOracle(outs)
	require.Empty(t, violation)
	if epochBack > 0 {
		t.Logf("%d messages carried the epoch before one an earlier message of their process carried (built just before the change)", epochBack)
	}

	lines := 0
	for _, ls := range outs {
		lines += len(ls)
	}
	t.Logf("oracle: %d events in %d partitions (head %d) all delivered in %d lines; %d messages carried a scalar frontier, each complete when attached (%d without a frontier: a processing error); final %s",
		len(final), len(src.Partitions()), head, lines, checked, errored, samples[len(samples)-1].describe())
}

// memberFrontierOracle checks every line carrying a scalar frontier F
// (epoch E, written at t): every event of events at a position <= F of a
// member of E (a key of the line's vector) was first delivered, in any
// output, before t. It returns how many lines it checked, how many carry
// a processing error instead of a frontier, and the first violation ("":
// none).
func memberFrontierOracle(outs map[string][]memberLine, events []fakeapi.ShardEvent) (checked, errored int, violation string) {
	firstAt := map[string]int64{}
	for _, ls := range outs {
		for _, l := range ls {
			if a, ok := firstAt[l.ID]; !ok || l.At < a {
				firstAt[l.ID] = l.At
			}
		}
	}
	byPos := slices.SortedFunc(slices.Values(events), func(a, b fakeapi.ShardEvent) int { return cmp.Compare(a.Pos, b.Pos) })
	for _, id := range slices.Sorted(maps.Keys(outs)) {
		for _, l := range outs[id] {
			if l.Error != nil {
				errored++
				continue
			}
			if l.Frontier == nil {
				continue
			}
			checked++
			for _, e := range byPos {
				if e.Pos > *l.Frontier {
					break
				}
				if _, member := l.Vector[e.Partition]; !member {
					continue
				}
				if a, ok := firstAt[e.ID]; !ok || a >= l.At {
					return checked, errored, fmt.Sprintf("%s: the message of %s at %d carries frontier %d (epoch %d, vector %s), but event %s at position %d of member %s was first delivered at %d (0: never)",
						id, l.ID, l.At, *l.Frontier, l.FrontierEpoch, memberVector(l.Vector), e.ID, e.Pos, e.Partition, a)
				}
			}
		}
	}
	return checked, errored, ""
}

// memberMonotoneOracle checks, for each output in the order its lines were
// stamped, that within an epoch the attached scalar frontier is never
// withdrawn nor lowered. A message stamped with the epoch before the one
// an earlier message carried (it was built just before the input adopted
// the change) gets that epoch's frontier: epochs are compared only with
// themselves. Lines with a processing error carry no frontier and are
// skipped. It returns the first violation ("": none) and how often a
// line's epoch was below one stamped before it.
func memberMonotoneOracle(outs map[string][]memberLine) (violation string, epochBack int) {
	for _, id := range slices.Sorted(maps.Keys(outs)) {
		ls := slices.DeleteFunc(slices.Clone(outs[id]), func(l memberLine) bool { return l.Error != nil })
		slices.SortStableFunc(ls, func(a, b memberLine) int { return cmp.Compare(a.At, b.At) })
		last := map[uint64]memberLine{} // frontier epoch -> its latest line
		var top uint64
		for _, cur := range ls {
			if cur.FrontierEpoch < top {
				epochBack++
			}
			top = max(top, cur.FrontierEpoch)
			prev, seen := last[cur.FrontierEpoch]
			last[cur.FrontierEpoch] = cur
			switch {
			case !seen || prev.Frontier == nil:
			case cur.Frontier == nil:
				return fmt.Sprintf("%s: the frontier %d of epoch %d was withdrawn at %s", id, *prev.Frontier, cur.FrontierEpoch, cur.ID), epochBack
			case *cur.Frontier < *prev.Frontier:
				return fmt.Sprintf("%s: the frontier of epoch %d went down from %d to %d at %s", id, cur.FrontierEpoch, *prev.Frontier, *cur.Frontier, cur.ID), epochBack
			}
		}
	}
	return "", epochBack
}

// memberLineageOracle checks that every line of parent, in every output,
// was stamped before the first line of any of children. It returns the
// parent's last and the children's first stamp and the violation ("":
// none; no child line at all is one).
func memberLineageOracle(outs map[string][]memberLine, parent string, children []string) (parentLast, childFirst int64, violation string) {
	var childID string
	for _, ls := range outs {
		for _, l := range ls {
			switch {
			case l.Partition == parent:
				parentLast = max(parentLast, l.At)
			case slices.Contains(children, l.Partition):
				if childFirst == 0 || l.At < childFirst {
					childFirst, childID = l.At, l.ID
				}
			}
		}
	}
	switch {
	case childFirst == 0:
		return parentLast, childFirst, fmt.Sprintf("no event of %v delivered", children)
	case parentLast >= childFirst:
		return parentLast, childFirst, fmt.Sprintf("%s of a child of %s was emitted %s before the parent's last event", childID, parent, time.Duration(parentLast-childFirst))
	}
	return parentLast, childFirst, ""
}

// memberVector renders an attached vector for a failure message.
func memberVector(v map[string]*int64) string {
	var parts []string
	for _, p := range slices.Sorted(maps.Keys(v)) {
		w := "null"
		if v[p] != nil {
			w = strconv.FormatInt(*v[p], 10)
		}
		parts = append(parts, p+"="+w)
	}
	return strings.Join(parts, " ")
}
