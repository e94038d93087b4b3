//go:build unix

package e2e

// The examples for real SaaS APIs run with the built binary against the
// fakes of internal/fakeapi, which answer as the APIs document: each
// example reads the whole seeded dataset, survives kill -9 and a restart
// with nothing missing, honours the API's rate-limit answer (retried, not
// parked) and recovers from the API's expiry answer as the example
// declares.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/dynalitetest"
	"github.com/tidemark/tidemark/internal/dynamostore"
	"github.com/tidemark/tidemark/internal/e2etest"
	"github.com/tidemark/tidemark/internal/fakeapi"
	"github.com/tidemark/tidemark/internal/store"
)

// fakeLatency slows every page, so that a kill lands while pages remain.
const fakeLatency = 40 * time.Millisecond

// readIDs reads a run's stdout file: how often each id was printed (idOf
// names the id of a line) and the number of torn lines (a kill mid-write).
func readIDs(t *testing.T, path string, idOf func(map[string]any) string) (map[string]int, int) {
	t.Helper()
	return countLines(t, path, func(line []byte) string {
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			return ""
		}
		return idOf(m)
	})
}

// runExample starts one run of an example with its stdout in a file.
func runExample(t *testing.T, name, example string, env []string, out string) *e2etest.Proc {
	t.Helper()
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	cmd := exec.Command(e2etest.Connect(t), "run", "--log.level", "warn", examplePath(t, example))
	cmd.Env = env
	cmd.Stdout = f
	return e2etest.Start(t, name, cmd)
}

// missing returns the ids of want that seen lacks, sorted.
func missing(seen map[string]int, want []string) []string {
	var out []string
	for _, id := range want {
		if seen[id] == 0 {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

func merge(into map[string]int, from map[string]int) {
	for id, n := range from {
		into[id] += n
	}
}

// pollingExample is an example of a polling API and its fake.
type pollingExample struct {
	example   string
	scope     string
	partition string
	// env points the example at the fake: URL, credentials, pages of 5,
	// polls every 50 ms.
	env []string
	// control is the fake's control; add creates n events now and returns
	// their ids as the example prints them (idOf).
	control *fakeapi.Control
	add     func(n int) []string
	idOf    func(map[string]any) string
	// namesRetryTime: the API's rate-limit answer names when to come back
	// (then no request may come earlier).
	namesRetryTime bool
	// headPolls counts the requests with which the example polls the head
	// of its partition (to know it has caught up).
	headPolls func() int
	// expire injects the API's expiry answer; recovered reports, from the
	// fake's counters taken before the injection (before) and now, that
	// the example recovered as it declares, and says how.
	expire    func()
	counters  func() map[string]int
	recovered func(before, now map[string]int) (bool, string)
	// restarts counts the requests that begin a restart of the partition
	// (a fresh round, a request from a time); headGrowthRestarts says
	// whether a retry of the head page that answers more events restarts
	// it (no watermark proves the larger answer) or is accepted (its
	// watermark covers its range, or the earlier answer is an exact prefix
	// of it: the head_growth retry class).
	restarts           func() int
	headGrowthRestarts bool
	// headGrowthEither: both are right for this example, and which one
	// happens depends on where the kill fell (the example's own restarts,
	// not a divergence, may re-read the head); only delivery is checked.
	headGrowthEither bool
}

// testPollingExample runs ex against its fake: run 1 starts under the
// API's rate-limit answer, reads part of the seeded events while more are
// added, and is killed with SIGKILL; run 2 reads everything that was not
// durably done; then the API's expiry answer is injected and more events
// are added, and run 2 reads them after its recovery. Then run 2 is killed
// at the head, with the page it printed last not promoted (the shield
// delays the promotion), and more events arrive: run 3's retry of that
// cursor answers more events than the first answer; where no watermark
// proves the larger answer's range the partition restarts as the example
// declares, otherwise the larger answer is accepted. Every
// event must be printed at least once; run 1, which nothing killed before
// its end and nothing expired, prints none twice; the partition is never
// parked.
func testPollingExample(t *testing.T, ex pollingExample) {
	tb := dynalitetest.NewTable(t)
	e2etest.Connect(t) // built before the rate-limit window opens
	dir := t.TempDir()
	sh := newShield(t, tb.Endpoint)
	env := e2etest.Env(append(ex.env,
		"TIDEMARK_TABLE="+tb.Name, "TIDEMARK_CREATE_TABLE=true",
		// The processes reach dynalite through the shield: a SIGKILL
		// mid-request would crash dynalite itself (see dynaliteShield).
		"TIDEMARK_DYNAMODB_ENDPOINT="+sh.url,
	)...)
	ex.control.SetLatency(fakeLatency)
	want := ex.add(60)

	// Run 1: throttled from its first request, killed mid-run.
	ex.control.RateLimit(time.Second)
	out1 := filepath.Join(dir, "run1.jsonl")
	p1 := runExample(t, "run 1", ex.example, env, out1)
	seen := func(path string) map[string]int { ids, _ := readIDs(t, path, ex.idOf); return ids }
	e2etest.WaitFor(t, e2etest.Patience, "run 1 to print 10 events", func() (bool, string) {
		n := len(seen(out1))
		return n >= 10, fmt.Sprintf("%d printed", n)
	}, p1.Running)
	want = append(want, ex.add(10)...) // while it runs
	e2etest.WaitFor(t, e2etest.Patience, "run 1 to print 20 events", func() (bool, string) {
		n := len(seen(out1))
		return n >= 20, fmt.Sprintf("%d printed", n)
	}, p1.Running)
	if err := p1.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p1.Done()
	run1, torn := readIDs(t, out1, ex.idOf)
	if len(missing(run1, want)) == 0 {
		t.Fatalf("run 1 had printed all %d events before the kill: the test proved nothing", len(want))
	}
	if torn > 1 {
		t.Fatalf("run 1: %d torn lines; only the line the kill interrupted may be torn", torn)
	}
	for id, n := range run1 {
		if n > 1 {
			t.Errorf("run 1 printed %s %d times: a rate-limited request is retried, nothing is replayed", id, n)
		}
	}
	if th := ex.control.Throttled(); th == 0 {
		t.Fatal("the fake never answered with its rate limit: the test proved nothing")
	}
	if ex.namesRetryTime && ex.control.Early() > 0 {
		t.Errorf("%d requests came before the time the rate-limit answer named", ex.control.Early())
	}
	t.Logf("run 1: %d rate-limit answers served, %d of %d events printed before the kill", ex.control.Throttled(), len(run1), len(want))

	// Run 2 catches up.
	current := filepath.Join(dir, "run2.jsonl") // the running run's output
	p2 := runExample(t, "run 2", ex.example, env, current)
	var done map[string]int // the output of run 2, once it ended
	union := func() map[string]int {
		u := map[string]int{}
		merge(u, run1)
		merge(u, done)
		merge(u, seen(current))
		return u
	}
	caughtUp := func(p *e2etest.Proc, what string) {
		t.Helper()
		e2etest.WaitFor(t, e2etest.Patience, what, func() (bool, string) {
			m := missing(union(), want)
			return len(m) == 0, fmt.Sprintf("%d of %d events missing, e.g. %v", len(m), len(want), m[:min(5, len(m))])
		}, p.Running)
		// And it polls the head again (its cursor is at the head).
		polls := ex.headPolls()
		e2etest.WaitFor(t, e2etest.Patience, p.Name+" to poll the head", func() (bool, string) {
			return ex.headPolls() >= polls+2, fmt.Sprintf("%d head polls", ex.headPolls())
		}, p.Running)
	}
	caughtUp(p2, "run 2 to print every event after the kill")

	// The expiry answer, then more events.
	before := ex.counters()
	ex.expire()
	want = append(want, ex.add(10)...)
	caughtUp(p2, "run 2 to print the events added after the expiry")
	if ok, how := ex.recovered(before, ex.counters()); !ok {
		t.Errorf("after the expiry answer: %s", how)
	} else {
		t.Logf("after the expiry answer: %s", how)
	}

	// Killed at the head with the last page printed and not promoted.
	// From before these events arrive, promotions (and every other
	// UpdateItem) wait 3 s: run 2 prints the head page, then is killed
	// while its promotion waits. (The wait starts before the events are
	// added, not at the first request after: a poll already past the
	// fake's request hook when they arrive would serve the head page with
	// its promotion unheld, and run 3 would have no head page to retry.)
	sh.delayUpdates(3 * time.Second)
	head := ex.add(2)
	want = append(want, head...)
	e2etest.WaitFor(t, e2etest.Patience, "run 2 to print the head page", func() (bool, string) {
		m := missing(seen(current), head)
		return len(m) == 0, fmt.Sprintf("%v not printed", m)
	}, p2.Running)
	if err := p2.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p2.Done()
	sh.delayUpdates(0)
	done = seen(current)
	want = append(want, ex.add(3)...)
	restarts := ex.restarts()

	// Run 3: the retry of the head cursor answers 5 events where the first
	// answer had 2.
	current = filepath.Join(dir, "run3.jsonl")
	p3 := runExample(t, "run 3", ex.example, env, current)
	caughtUp(p3, "run 3 to print every event after the kill at the head")
	switch n := ex.restarts() - restarts; {
	case ex.headGrowthEither:
		t.Logf("run 3: %d restart requests after the head page grew (either outcome delivers every event)", n)
	case ex.headGrowthRestarts && n == 0:
		t.Errorf("run 3 did not restart the partition after the retry of the head page answered more events")
	case !ex.headGrowthRestarts && n > 0:
		t.Errorf("run 3 restarted the partition (%d restart requests) although the larger answer proves its range (a covering watermark, or head growth)", n)
	case n > 0:
		t.Logf("run 3 restarted the partition (%d restart requests) after the head page grew", n)
	default:
		t.Logf("run 3 accepted the larger answer of the head page without a restart")
	}
	p3.Stop(e2etest.Patience)

	st, err := dynamostore.NewDynamoStore(context.Background(), dynamostore.DynamoConfig{Table: tb.Name, Endpoint: tb.Endpoint})
	if err != nil {
		t.Fatal(err)
	}
	cp, err := st.LoadCheckpoint(context.Background(), store.Key{Scope: ex.scope, Partition: ex.partition})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		t.Fatal(err)
	}
	if cp.Parked != "" || cp.Generation <= 1 {
		t.Errorf("checkpoint generation %d parked %q; want progress and no park", cp.Generation, cp.Parked)
	}
	all := union()
	total := 0
	for _, n := range all {
		total += n
	}
	t.Logf("%d events, %d lines printed across the runs (%d repeated after the kill or the recovery); checkpoint generation %d",
		len(want), total, total-len(all), cp.Generation)
}

func stringField(name string) func(map[string]any) string {
	return func(m map[string]any) string {
		switch v := m[name].(type) {
		case string:
			return v
		case float64:
			return strconv.FormatInt(int64(v), 10)
		}
		return ""
	}
}

// TestExampleOktaSystemLog runs okta_system_log.yaml against the Okta fake.
// Okta's rate-limit answer names the reset second (X-Rate-Limit-Reset);
// Okta has no expiry answer: events aged past retention are just not
// returned, and the next links keep working, so the org goes on without a
// restart.
func TestExampleOktaSystemLog(t *testing.T) {
	o := fakeapi.NewOkta(t, "00okta-token")
	testPollingExample(t, pollingExample{
		example: "okta_system_log", scope: "okta-system-log", partition: o.URL(),
		env: []string{"OKTA_ORG_URL=" + o.URL(), "OKTA_API_TOKEN=00okta-token", "OKTA_PAGE_SIZE=5",
			"OKTA_POLL_INTERVAL=50ms", "OKTA_REQUESTS_PER_MINUTE=100000"},
		control: o.Control, add: o.Append, idOf: stringField("id"),
		namesRetryTime:     true,
		restarts:           func() int { return o.Served(fakeapi.OktaSince) },
		headGrowthRestarts: true,
		headPolls:          func() int { return o.Served(fakeapi.OktaAfter) },
		expire:             o.Expire,
		counters:           func() map[string]int { return map[string]int{"since": o.Served(fakeapi.OktaSince)} },
		recovered: func(before, now map[string]int) (bool, string) {
			return now["since"] == before["since"], fmt.Sprintf("%d since requests (restarts) after the events aged out", now["since"]-before["since"])
		},
	})
}

// TestExampleGraphMailDelta runs graph_mail_delta.yaml against the Graph
// fake: delta rounds with nextLinks and deltaLinks; throttling with
// Retry-After; an expired sync state (410 syncStateNotFound) recovers with
// a fresh round from scratch.
func TestExampleGraphMailDelta(t *testing.T) {
	g := fakeapi.NewGraph(t, "graph-token")
	const mailbox = "ada@example.com"
	testPollingExample(t, pollingExample{
		example: "graph_mail_delta", scope: "graph-inbox", partition: mailbox,
		env: []string{"GRAPH_URL=" + g.URL(), "GRAPH_TOKEN=graph-token", "GRAPH_MAILBOX=" + mailbox,
			"GRAPH_PAGE_SIZE=5", "GRAPH_POLL_INTERVAL=50ms"},
		control: g.Control, add: func(n int) []string { return g.Append(mailbox, n) }, idOf: stringField("id"),
		namesRetryTime: true,
		restarts:       func() int { return g.Served(fakeapi.GraphInitialRound) },
		// No watermark: Graph certifies no time for a delta round, so a
		// head page that grew is unprovable and restarts the mailbox.
		headGrowthRestarts: true,
		headPolls:          func() int { return g.Served(fakeapi.GraphDeltaRound) },
		expire:             g.Expire,
		counters: func() map[string]int {
			return map[string]int{"expired": g.ExpiredAnswers(), "initial": g.Served(fakeapi.GraphInitialRound)}
		},
		recovered: func(before, now map[string]int) (bool, string) {
			return now["expired"] > before["expired"] && now["initial"] > before["initial"],
				fmt.Sprintf("%d 410 answers, then %d fresh rounds from scratch", now["expired"]-before["expired"], now["initial"]-before["initial"])
		},
	})
}

// TestExampleGraphMailDeltaFollowsEmptyPages runs graph_mail_delta.yaml
// against the Graph fake answering every round with three pages that carry
// no message and an @odata.nextLink before the round's messages (Microsoft:
// "If Microsoft Graph returns a @odata.nextLink URL, there are more pages
// of data to retrieve in the session, even if the current response
// contains an empty result"). The example follows them: the first round's
// messages are printed and the round reaches its deltaLink; messages
// delivered later are printed from a later round, which begins with empty
// pages too. A client that polled an empty page again instead of following
// its link would get the same empty page for ever and print nothing. The
// run is neither killed nor expired, so nothing is printed twice and no
// round starts from scratch again.
func TestExampleGraphMailDeltaFollowsEmptyPages(t *testing.T) {
	tb := dynalitetest.NewTable(t)
	g := fakeapi.NewGraph(t, "graph-token")
	g.SetEmptyPages(3)
	const mailbox = "ada@example.com"
	want := g.Append(mailbox, 12)
	env := e2etest.Env("GRAPH_URL="+g.URL(), "GRAPH_TOKEN=graph-token", "GRAPH_MAILBOX="+mailbox,
		"GRAPH_PAGE_SIZE=5", "GRAPH_POLL_INTERVAL=50ms",
		"TIDEMARK_TABLE="+tb.Name, "TIDEMARK_CREATE_TABLE=true", "TIDEMARK_DYNAMODB_ENDPOINT="+dynaliteShield(t, tb.Endpoint))
	out := filepath.Join(t.TempDir(), "messages.jsonl")
	p := runExample(t, "run", "graph_mail_delta", env, out)
	seen := func() map[string]int { ids, _ := readIDs(t, out, stringField("id")); return ids }
	waitAll := func(what string, ids []string) {
		t.Helper()
		e2etest.WaitFor(t, e2etest.Patience, what, func() (bool, string) {
			m := missing(seen(), ids)
			return len(m) == 0, fmt.Sprintf("%d of %d missing; %d empty pages with a nextLink served", len(m), len(ids), g.Served(fakeapi.GraphEmptyNextPage))
		}, p.Running)
	}
	waitAll("the first round's messages, after its empty pages", want)
	e2etest.WaitFor(t, e2etest.Patience, "the deltaLink polled", func() (bool, string) {
		return g.Served(fakeapi.GraphDeltaRound) >= 2, fmt.Sprintf("%d delta rounds", g.Served(fakeapi.GraphDeltaRound))
	}, p.Running)
	want = append(want, g.Append(mailbox, 4)...)
	waitAll("the messages of a later round, after its empty pages", want)
	if !p.Stop(e2etest.Patience) {
		t.Log("the run did not stop gracefully")
	}
	if n := g.Served(fakeapi.GraphEmptyNextPage); n < 6 {
		t.Errorf("%d empty pages with a nextLink served; want those of two rounds at least (the test proved nothing)", n)
	}
	if n := g.Served(fakeapi.GraphInitialRound); n != 1 {
		t.Errorf("%d rounds from scratch; want 1 (no expiry, no restart)", n)
	}
	got := seen()
	for _, id := range want {
		if got[id] != 1 {
			t.Errorf("message %s printed %d times; want once", id, got[id])
		}
	}
	t.Logf("%d messages, %d lines; %d empty pages with a nextLink followed, %d delta rounds",
		len(want), sum(got), g.Served(fakeapi.GraphEmptyNextPage), g.Served(fakeapi.GraphDeltaRound))
}

// TestExampleZendeskIncrementalTickets runs zendesk_incremental_tickets.yaml
// against the Zendesk fake: the cursor-based export with after_cursor and
// end_of_stream; 429 with Retry-After; a cursor Zendesk cannot use (400
// InvalidPaginationParameter) restarts from start_time at the durable
// applied time.
func TestExampleZendeskIncrementalTickets(t *testing.T) {
	const cred = "YWdlbnRAZXhhbXBsZS5jb20vdG9rZW46c2VjcmV0"
	z := fakeapi.NewZendesk(t, "Basic "+cred)
	// Exported at once: the test does not wait out Zendesk's minute.
	z.SetHoldback(0)
	testPollingExample(t, pollingExample{
		example: "zendesk_incremental_tickets", scope: "zendesk-tickets", partition: "example",
		env: []string{"ZENDESK_URL=" + z.URL(), "ZENDESK_BASIC_AUTH=" + cred, "ZENDESK_SUBDOMAIN=example",
			"ZENDESK_PAGE_SIZE=5", "ZENDESK_POLL_INTERVAL=50ms"},
		control: z.Control,
		add: func(n int) []string {
			var out []string
			for _, id := range z.Append(n) {
				out = append(out, strconv.FormatInt(id, 10))
			}
			return out
		},
		idOf:               stringField("ticket"),
		namesRetryTime:     true,
		restarts:           func() int { return z.Served(fakeapi.ZendeskStartTime) },
		headGrowthRestarts: true,
		headPolls:          func() int { return z.Served(fakeapi.ZendeskCursor) },
		expire:             z.Expire,
		counters: func() map[string]int {
			return map[string]int{"expired": z.ExpiredAnswers(), "start": z.Served(fakeapi.ZendeskStartTime)}
		},
		recovered: func(before, now map[string]int) (bool, string) {
			return now["expired"] > before["expired"] && now["start"] > before["start"],
				fmt.Sprintf("%d InvalidPaginationParameter answers, then %d restarts from start_time", now["expired"]-before["expired"], now["start"]-before["start"])
		},
	})
}

// TestExampleStripeEvents runs stripe_events.yaml against the Stripe fake:
// the walk back from the newest event, then ending_before forward; 429
// without a retry time; the 30-day retention passing over a quiet account
// (HTTP 400, the cursor's event "is no longer available because it's aged
// out of our retention policy") restarts it from created[gte] at the
// durable applied second, where a contract matching 404 resource_missing
// parked it (a permanent 400).
func TestExampleStripeEvents(t *testing.T) {
	s := fakeapi.NewStripe(t, "sk_test_fake")
	const account = "acct_1Fake"
	testPollingExample(t, pollingExample{
		example: "stripe_events", scope: "stripe-events", partition: account,
		env: []string{"STRIPE_API_URL=" + s.URL(), "STRIPE_API_KEY=sk_test_fake", "STRIPE_ACCOUNT=" + account,
			"STRIPE_PAGE_SIZE=5", "STRIPE_POLL_INTERVAL=50ms", "STRIPE_VISIBILITY_LAG=1"},
		control: s.Control, add: func(n int) []string { return s.Append(account, n) }, idOf: stringField("id"),
		namesRetryTime:   false,
		restarts:         func() int { return s.Served(fakeapi.StripeCreatedFilter) },
		headGrowthEither: true, // its head page is mapped oldest first, so a larger answer may extend the first (head_growth); the anchor walk may also restart it
		headPolls:        func() int { return s.Served(fakeapi.StripeEndingBefore) },
		expire:           func() { s.Expire(account) },
		counters: func() map[string]int {
			return map[string]int{"expired": s.ExpiredAnswers(), "created": s.Served(fakeapi.StripeCreatedFilter)}
		},
		recovered: func(before, now map[string]int) (bool, string) {
			return now["expired"] > before["expired"] && now["created"] > before["created"],
				fmt.Sprintf("%d aged-out answers (400), then %d requests with created[gte]", now["expired"]-before["expired"], now["created"]-before["created"])
		},
	})
}

// TestExampleStripeEventsReadsALateVisibleEvent runs stripe_events.yaml
// (visibility lag 30 s) against the Stripe fake. Once the account is read
// to its head, events keep arriving, and one event becomes visible late:
// its `created` lies 10 s in the past, so it sorts before newer events
// already read. A cursor at the newest event seen (ending_before it) never
// lists it; the example's anchor stays behind the lag, so the late event is
// read, and so is every other event. The events re-read on each poll are
// recognised by their receipts: the history and the two events put before
// the late one (re-read on every poll while younger than the lag) are
// printed once; those after the late event in the list may repeat once.
func TestExampleStripeEventsReadsALateVisibleEvent(t *testing.T) {
	tb := dynalitetest.NewTable(t)
	s := fakeapi.NewStripe(t, "sk_test_fake")
	const account = "acct_1Late"
	var want []string // a history older than the lag
	for range 12 {
		want = append(want, s.AppendLate(account, 2*time.Minute))
	}
	env := e2etest.Env("STRIPE_API_URL="+s.URL(), "STRIPE_API_KEY=sk_test_fake", "STRIPE_ACCOUNT="+account,
		"STRIPE_PAGE_SIZE=5", "STRIPE_POLL_INTERVAL=50ms", "STRIPE_VISIBILITY_LAG=30",
		"TIDEMARK_TABLE="+tb.Name, "TIDEMARK_CREATE_TABLE=true", "TIDEMARK_DYNAMODB_ENDPOINT="+dynaliteShield(t, tb.Endpoint))
	out := filepath.Join(t.TempDir(), "events.jsonl")
	p := runExample(t, "run", "stripe_events", env, out)
	seen := func() map[string]int { ids, _ := readIDs(t, out, stringField("id")); return ids }
	waitAll := func(what string, ids []string) {
		t.Helper()
		e2etest.WaitFor(t, e2etest.Patience, what, func() (bool, string) {
			m := missing(seen(), ids)
			return len(m) == 0, fmt.Sprintf("%d of %d missing, e.g. %v", len(m), len(ids), m[:min(3, len(m))])
		}, p.Running)
	}
	waitAll("the account read to its head", want)
	polls := s.Served(fakeapi.StripeEndingBefore)
	e2etest.WaitFor(t, e2etest.Patience, "forward polls at the head", func() (bool, string) {
		return s.Served(fakeapi.StripeEndingBefore) >= polls+2, fmt.Sprintf("%d polls", s.Served(fakeapi.StripeEndingBefore)-polls)
	}, p.Running)
	want = append(want, s.Append(account, 2)...)
	waitAll("the newer events read", want)
	late := s.AppendLate(account, 10*time.Second)
	want = append(want, late)
	want = append(want, s.Append(account, 2)...)
	waitAll("the late event and the newer ones read", want)
	if !p.Stop(e2etest.Patience) {
		t.Log("the run did not stop gracefully")
	}
	got := seen()
	for _, id := range want[:12] {
		if got[id] != 1 {
			t.Errorf("event %s printed %d times; want once (re-read events are recognised by their receipts)", id, got[id])
		}
	}
	t.Logf("%d events, %d lines; %d forward polls", len(want), sum(got), s.Served(fakeapi.StripeEndingBefore))
}

// TestExampleKubernetesListFollowsEmptyChunks runs http_kubernetes_list.yaml
// with a label selector against the Kubernetes fake, which filters each
// chunk after cutting it at `limit` (the API reference's `limit`: "up to
// zero items in the event all requested objects are filtered out"): the
// first two chunks of 5 have zero items and a continue token. The example
// maps has_more from the token, so those chunks are followed, not taken
// for the end of the list under end_of_data and exit_when_complete: every
// labelled object is printed once and the namespace ends complete.
func TestExampleKubernetesListFollowsEmptyChunks(t *testing.T) {
	tb := dynalitetest.NewTable(t)
	k := fakeapi.NewKubernetes(t, "k8s-token")
	k.SetLatency(fakeLatency)
	k.Create("team-a", "aa", 10) // sorts first, not labelled
	want := k.CreateLabeled("team-a", "cm", 7, map[string]string{"app": "web"})
	env := e2etest.Env("KUBERNETES_URL="+k.URL(), "KUBERNETES_TOKEN=k8s-token", "KUBERNETES_NAMESPACES=team-a",
		"KUBERNETES_PAGE_SIZE=5", "KUBERNETES_LABEL_SELECTOR=app=web", "EXIT_WHEN_COMPLETE=true",
		"TIDEMARK_TABLE="+tb.Name, "TIDEMARK_CREATE_TABLE=true", "TIDEMARK_DYNAMODB_ENDPOINT="+dynaliteShield(t, tb.Endpoint))
	out := filepath.Join(t.TempDir(), "run.jsonl")
	p := runExample(t, "run", "http_kubernetes_list", env, out)
	if err := p.Wait(e2etest.Patience); err != nil {
		t.Fatalf("run: %v", err)
	}
	if k.Served(fakeapi.KubernetesEmptyChunk) == 0 {
		t.Fatal("the fake served no empty chunk with a continue token: the test proved nothing")
	}
	got, torn := readIDs(t, out, func(m map[string]any) string { s, _ := m["name"].(string); return s })
	if torn > 0 {
		t.Fatalf("%d torn lines", torn)
	}
	for _, name := range want {
		if got[name] != 1 {
			t.Errorf("%s printed %d times; want once", name, got[name])
		}
	}
	if len(got) != len(want) {
		t.Errorf("printed %d objects, want the %d labelled ones: %v", len(got), len(want), got)
	}
	st, err := dynamostore.NewDynamoStore(context.Background(), dynamostore.DynamoConfig{Table: tb.Name, Endpoint: tb.Endpoint})
	if err != nil {
		t.Fatal(err)
	}
	cp, err := st.LoadCheckpoint(context.Background(), store.Key{Scope: "kubernetes-configmaps", Partition: "team-a"})
	if err != nil {
		t.Fatal(err)
	}
	if !cp.Complete || cp.Parked != "" {
		t.Errorf("checkpoint complete=%v parked %q; want the list complete", cp.Complete, cp.Parked)
	}
	if n := k.Served(fakeapi.KubernetesEmptyChunk); n != 2 {
		t.Errorf("the fake served %d empty chunks with a continue token; want both followed (2)", n)
	}
}

// TestExampleKubernetesList runs http_kubernetes_list.yaml against the
// Kubernetes fake: two namespaces listed in chunks of 5. Run 1 starts under
// the API's rate-limit answer and is killed mid-list, while objects are
// created; run 2 meets an expired continue token (410 Expired), lists the
// namespace afresh and ends with both namespaces complete in DynamoDB; a
// third run lists nothing. Every object of the snapshot the last list read
// is printed at least once.
func TestExampleKubernetesList(t *testing.T) {
	tb := dynalitetest.NewTable(t)
	e2etest.Connect(t) // built before the rate-limit window opens
	k := fakeapi.NewKubernetes(t, "k8s-token")
	k.SetLatency(fakeLatency)
	namespaces := []string{"team-a", "team-b"}
	want := map[string][]string{}
	for _, ns := range namespaces {
		want[ns] = k.Create(ns, "cm", 30)
	}
	dir := t.TempDir()
	env := e2etest.Env("KUBERNETES_URL="+k.URL(), "KUBERNETES_TOKEN=k8s-token", "KUBERNETES_NAMESPACES="+strings.Join(namespaces, ", "),
		"KUBERNETES_PAGE_SIZE=5", "EXIT_WHEN_COMPLETE=true",
		"TIDEMARK_TABLE="+tb.Name, "TIDEMARK_CREATE_TABLE=true", "TIDEMARK_DYNAMODB_ENDPOINT="+dynaliteShield(t, tb.Endpoint))
	idOf := func(m map[string]any) string {
		ns, _ := m["namespace"].(string)
		name, _ := m["name"].(string)
		if ns == "" || name == "" {
			return ""
		}
		return ns + "/" + name
	}
	wanted := func() []string {
		var out []string
		for ns, names := range want {
			for _, n := range names {
				out = append(out, ns+"/"+n)
			}
		}
		return out
	}

	k.RateLimit(time.Second)
	out1 := filepath.Join(dir, "run1.jsonl")
	p1 := runExample(t, "run 1", "http_kubernetes_list", env, out1)
	e2etest.WaitFor(t, e2etest.Patience, "run 1 to print 10 objects", func() (bool, string) {
		ids, _ := readIDs(t, out1, idOf)
		return len(ids) >= 10, fmt.Sprintf("%d printed", len(ids))
	}, p1.Running)
	// Created during run 1: not in its snapshots, in the fresh list's.
	want["team-a"] = append(want["team-a"], k.Create("team-a", "late", 3)...)
	if err := p1.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p1.Done()
	run1, _ := readIDs(t, out1, idOf)
	if len(missing(run1, wanted())) == 0 {
		t.Fatal("run 1 had printed every object before the kill: the test proved nothing")
	}
	if k.Throttled() == 0 {
		t.Fatal("the fake never answered with its rate limit: the test proved nothing")
	}
	if k.Early() > 0 {
		t.Errorf("%d requests came before the time the rate-limit answer named", k.Early())
	}

	// Run 2 to its end (exit_when_complete): the first continue token it
	// sends has expired.
	k.ExpireNext()
	fresh := k.Served(fakeapi.KubernetesFreshList)
	out2 := filepath.Join(dir, "run2.jsonl")
	p2 := runExample(t, "run 2", "http_kubernetes_list", env, out2)
	if err := p2.Wait(e2etest.Patience); err != nil {
		t.Fatalf("run 2: %v", err)
	}
	run2, torn := readIDs(t, out2, idOf)
	if torn > 0 {
		t.Fatalf("run 2, which was not killed, printed %d torn lines", torn)
	}
	all := map[string]int{}
	merge(all, run1)
	merge(all, run2)
	if m := missing(all, wanted()); len(m) > 0 {
		t.Fatalf("%d objects never printed, e.g. %v", len(m), m[:min(10, len(m))])
	}
	if k.ExpiredAnswers() == 0 || k.Served(fakeapi.KubernetesFreshList) <= fresh {
		t.Fatalf("%d 410 Expired answers, %d fresh lists in run 2: want the expired continue token recovered by a fresh list",
			k.ExpiredAnswers(), k.Served(fakeapi.KubernetesFreshList)-fresh)
	}
	st, err := dynamostore.NewDynamoStore(context.Background(), dynamostore.DynamoConfig{Table: tb.Name, Endpoint: tb.Endpoint})
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range namespaces {
		cp, err := st.LoadCheckpoint(context.Background(), store.Key{Scope: "kubernetes-configmaps", Partition: ns})
		if err != nil {
			t.Fatal(err)
		}
		if !cp.Complete || cp.Parked != "" {
			t.Errorf("%s: checkpoint complete=%v parked %q; want the list complete", ns, cp.Complete, cp.Parked)
		}
	}
	t.Logf("run 1 printed %d objects before the kill (%d rate-limit answers); run 2 %d lines after %d 410 answers and %d fresh lists",
		len(run1), k.Throttled(), len(run2), k.ExpiredAnswers(), k.Served(fakeapi.KubernetesFreshList)-fresh)

	// A third run lists nothing: both namespaces are durably complete.
	requests := k.Requests()
	out3 := filepath.Join(dir, "run3.jsonl")
	p3 := runExample(t, "run 3", "http_kubernetes_list", env, out3)
	if err := p3.Wait(e2etest.Patience); err != nil {
		t.Fatalf("run 3: %v", err)
	}
	if run3, torn := readIDs(t, out3, idOf); len(run3) > 0 || torn > 0 || k.Requests() != requests {
		t.Fatalf("a run after both lists completed printed %d objects and made %d requests", len(run3), k.Requests()-requests)
	}
}
