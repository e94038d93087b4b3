//go:build unix

package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/tidemark/tidemark/internal/chain"
	"github.com/tidemark/tidemark/internal/dynalitetest"
	"github.com/tidemark/tidemark/internal/dynamostore"
	"github.com/tidemark/tidemark/internal/e2etest"
	"github.com/tidemark/tidemark/internal/store"
)

// s3Interposer stands between the example and s3rver. For bucket "photos"
// it hands s3rver, in the first request that carries a continuation token,
// a token s3rver issued for the listing of another bucket (re-signed with
// s3rver's credentials, as a client would send it): s3rver answers it as S3
// answers a token it did not issue for that listing. For bucket "logs" it
// answers every request after the first with S3's answer to expired
// temporary credentials, 400 ExpiredToken. It counts the requests that
// restart a listing after a key (start-after) per bucket.
type s3Interposer struct {
	upstream string
	token    string // a continuation token of another listing

	// beforeSwap, when set, runs before the swapped request goes on: it
	// waits until photos' first page is durably applied, so that the
	// refusal meets a durable applied key (else the restart rightly
	// starts from the beginning, with no start-after to see).
	beforeSwap func()

	mu         sync.Mutex
	swapped    bool
	logsPages  int
	expiredTok int
	startAfter map[string]int
}

var s3BucketOf = regexp.MustCompile(`^/([^/?]+)`)

func (s *s3Interposer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m := s3BucketOf.FindStringSubmatch(r.URL.Path)
	bucket := ""
	if m != nil {
		bucket = m[1]
	}
	q := r.URL.Query()
	s.mu.Lock()
	if q.Has("start-after") {
		s.startAfter[bucket]++
	}
	swap := bucket == "photos" && q.Has("continuation-token") && !s.swapped
	if swap {
		s.swapped = true
	}
	beforeSwap := s.beforeSwap
	expired := false
	if bucket == "logs" {
		s.logsPages++
		if s.logsPages > 1 {
			expired = true
			s.expiredTok++
		}
	}
	s.mu.Unlock()
	if expired {
		// The answer S3 gives to a request signed with an expired session
		// token ("ExpiredToken: The provided token has expired.", HTTP 400;
		// Amazon S3 User Guide, "Billing for Amazon S3 error responses").
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?>`+"\n"+
			`<Error><Code>ExpiredToken</Code><Message>The provided token has expired.</Message><Token-0>[token]</Token-0><RequestId>4442587FB7D0A2F9</RequestId><HostId>example</HostId></Error>`)
		return
	}
	if swap {
		if beforeSwap != nil {
			beforeSwap()
		}
		q.Set("continuation-token", s.token)
	}
	out, err := http.NewRequestWithContext(r.Context(), r.Method, s.upstream+r.URL.Path+"?"+q.Encode(), nil)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out.Host = r.Host // the host the example signed for
	hash := r.Header.Get("X-Amz-Content-Sha256")
	out.Header.Set("X-Amz-Content-Sha256", hash)
	if swap {
		// Signed again over the changed query, as the example signs.
		creds := aws.Credentials{AccessKeyID: "S3RVER", SecretAccessKey: "S3RVER"}
		if err := v4.NewSigner().SignHTTP(r.Context(), creds, out, hash, "s3", "us-east-1", time.Now()); err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
	} else {
		out.Header.Set("Authorization", r.Header.Get("Authorization"))
		out.Header.Set("X-Amz-Date", r.Header.Get("X-Amz-Date"))
	}
	resp, err := http.DefaultClient.Do(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

func (s *s3Interposer) counts() (startAfter map[string]int, expired int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sa := map[string]int{}
	for k, v := range s.startAfter {
		sa[k] = v
	}
	return sa, s.expiredTok
}

// TestExampleS3ListingRestartsOnlyOnARefusedToken runs http_s3_listing.yaml
// against s3rver through s3Interposer, with two buckets listed in pages of
// 3. Bucket "photos" meets a continuation token s3rver did not issue for
// its listing: s3rver answers 400 InvalidArgument "The continuation token
// provided is incorrect" (checked here first, as S3 answers it), which the
// example matches by its body: the listing restarts after its durable
// applied key (start-after) and every object is printed. Bucket "logs"
// meets 400 ExpiredToken (expired credentials) after its first page: that
// is no expired cursor, so the bucket parks at once as a permanent fetch
// failure naming ExpiredToken, and its listing is never restarted. (The
// previous contract, every 400 an expired cursor, restarted "logs" from
// its boundary again and again and parked it as an "expired cursor".)
func TestExampleS3ListingRestartsOnlyOnARefusedToken(t *testing.T) {
	tb := dynalitetest.NewTable(t)
	srv := startS3rver(t)
	want := map[string][]string{}
	for _, b := range []string{"photos", "logs"} {
		s3Put(t, srv.URL, b, "", "")
		for i := 1; i <= 12; i++ {
			key := fmt.Sprintf("%s/2026/img-%d.jpg", b, i)
			s3Put(t, srv.URL, b, key, "object "+key)
			want[b] = append(want[b], key)
		}
	}
	// A token s3rver issued for the listing of "logs".
	resp, err := http.Get(srv.URL + "/logs?list-type=2&max-keys=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	tm := regexp.MustCompile(`<NextContinuationToken>([^<]+)</NextContinuationToken>`).FindSubmatch(body)
	if tm == nil {
		t.Fatalf("s3rver's listing of logs has no continuation token: %s", body)
	}
	// What s3rver (like S3) answers to a token of another listing.
	resp, err = http.Get(srv.URL + "/photos?list-type=2&max-keys=3&continuation-token=" + strings.ReplaceAll(string(tm[1]), "+", "%2B"))
	if err != nil {
		t.Fatal(err)
	}
	refused, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(refused), "<Code>InvalidArgument</Code>") ||
		!strings.Contains(string(refused), "The continuation token provided is incorrect") {
		t.Fatalf("s3rver answered another listing's token with HTTP %d %s; want 400 InvalidArgument, \"The continuation token provided is incorrect\"", resp.StatusCode, refused)
	}

	ip := &s3Interposer{upstream: srv.URL, token: string(tm[1]), startAfter: map[string]int{}}
	front := httptest.NewServer(ip)
	defer front.Close()
	out := filepath.Join(t.TempDir(), "objects.jsonl")
	env := e2etest.Env(
		"S3_ENDPOINT="+front.URL, "S3_BUCKETS=photos, logs", "S3_PAGE_SIZE=3", "S3_OUTPUT="+out,
		"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=S3RVER", "AWS_SECRET_ACCESS_KEY=S3RVER",
		"TIDEMARK_TABLE="+tb.Name, "TIDEMARK_CREATE_TABLE=true", "TIDEMARK_DYNAMODB_ENDPOINT="+dynaliteShield(t, tb.Endpoint),
	)
	cmd := exec.Command(e2etest.Connect(t), "run", "--log.level", "warn", examplePath(t, "http_s3_listing_once"))
	cmd.Env = env
	p := e2etest.Start(t, "run", cmd)
	st, err := dynamostore.NewDynamoStore(context.Background(), dynamostore.DynamoConfig{Table: tb.Name, Endpoint: tb.Endpoint})
	if err != nil {
		t.Fatal(err)
	}
	// Before the run creates its table, a load fails: nothing is there yet.
	load := func(b string) store.Checkpoint {
		cp, _ := st.LoadCheckpoint(context.Background(), store.Key{Scope: "s3-listing", Partition: b})
		return cp
	}
	// The first page's promotion may wait for the page behind it
	// (promotion_linger), which is the request held here: it goes on
	// after the linger.
	ip.mu.Lock()
	ip.beforeSwap = func() {
		deadline := time.Now().Add(e2etest.Patience)
		for !load("photos").HasApplied && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	}
	ip.mu.Unlock()
	e2etest.WaitFor(t, e2etest.Patience, "photos complete and logs parked", func() (bool, string) {
		ph, lg := load("photos"), load("logs")
		sa, exp := ip.counts()
		return ph.Complete && lg.Parked != "", fmt.Sprintf("photos complete=%v parked %q; logs parked %q; start-after requests %v; %d ExpiredToken answers",
			ph.Complete, ph.Parked, lg.Parked, sa, exp)
	}, p.Running)
	p.Stop(e2etest.Patience)

	got, _ := s3Objects(t, out)
	for _, k := range want["photos"] {
		if got["photos/"+k] == 0 {
			t.Errorf("object photos/%s was never printed", k)
		}
	}
	sa, exp := ip.counts()
	if !ip.swapped || sa["photos"] == 0 {
		t.Errorf("photos: token swapped %v, %d start-after requests; want the refused token to restart the listing after its applied key", ip.swapped, sa["photos"])
	}
	lg := load("logs")
	if k := chain.ParkKindOf(lg.Parked); k != chain.ParkPermanent || !strings.Contains(lg.Parked, "ExpiredToken") {
		t.Errorf("logs parked %q (kind %v); want a permanent fetch failure naming ExpiredToken", lg.Parked, k)
	}
	if exp != 1 || sa["logs"] != 0 {
		t.Errorf("logs: %d ExpiredToken answers, %d start-after requests; want the first ExpiredToken to park it (expired credentials are no expired cursor: nothing restarts)", exp, sa["logs"])
	}
	t.Logf("photos: %d objects printed, %d restart(s) after the refused token; logs: %d ExpiredToken answers, parked %q", len(got), sa["photos"], exp, lg.Parked)
}
