package httpprovider

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/e2etest"
	"github.com/tidemark/tidemark/internal/redact"
	"github.com/tidemark/tidemark/internal/redact/redacttest"
	"github.com/tidemark/tidemark/provider"
)

// traceLogger returns a Benthos logger writing every level, TRACE
// included, to a buffer.
func traceLogger() (*service.Logger, *e2etest.SyncBuffer) {
	buf := &e2etest.SyncBuffer{}
	h := slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.Level(-8)})
	return service.NewLoggerFromSlog(slog.New(h)), buf
}

// echoEncoders are the forms an echoing server quotes the request in.
var echoEncoders = map[string]func(string) string{
	"raw":       func(s string) string { return s },
	"query":     url.QueryEscape,
	"path":      url.PathEscape,
	"base64":    func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) },
	"base64url": func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) },
	"json":      func(s string) string { b, _ := json.Marshal(s); return string(b[1 : len(b)-1]) },
}

// echo writes the request back: the credentials first (so that they fall
// within the 256 bytes an error quotes), then the query values, the path,
// the other headers and the body, each in the encoding enc.
func echo(w io.Writer, r *http.Request, enc func(string) string) {
	body, _ := io.ReadAll(r.Body)
	fmt.Fprintf(w, "auth=%s ", enc(r.Header.Get("Authorization")))
	if u, p, ok := r.BasicAuth(); ok {
		fmt.Fprintf(w, "user=%s pass=%s ", enc(u), enc(p))
	}
	if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		fmt.Fprintf(w, "bearer=%s ", enc(tok))
	}
	q := r.URL.Query()
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "q.%s=%s ", k, enc(q.Get(k)))
	}
	fmt.Fprintf(w, "path=%s body=%s ", enc(r.URL.RequestURI()), enc(string(body)))
	for k, vs := range r.Header {
		fmt.Fprintf(w, "%s=%s ", k, enc(strings.Join(vs, ",")))
	}
}

// The secrets and the cursor of the redaction tests.
const (
	redCursor      = "cur/sor+=?&secret-cursor-1"
	redBasicPass   = "b4sic-pa55word"
	redHeaderToken = "hdr-t0ken-1234567"
	redClientSec   = "cl1ent-s3cret/+=x"
	redAccessToken = "acc3ss-t0ken-xyz987"
)

// A server that echoes the request (headers, query, path, body) in every
// encoding, in 401, 403, 500 and malformed 200 answers, never gets a
// credential or the cursor into the provider's errors or its logs at any
// level: basic auth, a bearer token in headers, OAuth2 (the access token,
// and the client secret the token endpoint echoes in its own 401).
func TestErrorsAndLogsNeverShowEchoedCredentialsOrCursors(t *testing.T) {
	var status atomic.Int64
	var encName atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(int(status.Load()))
		if status.Load() == 200 {
			fmt.Fprint(w, "{not json ")
		}
		echo(w, r, echoEncoders[encName.Load().(string)])
	}))
	defer srv.Close()
	var tokenFails atomic.Bool
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tokenFails.Load() {
			w.WriteHeader(http.StatusUnauthorized)
			echo(w, r, echoEncoders[encName.Load().(string)])
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access_token":%q,"token_type":"bearer","expires_in":3600}`, redAccessToken)
	}))
	defer tokens.Close()

	base := func(extra string) string {
		return fmt.Sprintf(`
http:
  url: '%s/p?cursor=${! @cursor.escape_url_query() }&partition=${! @partition }'
  max_retries: 1
  backoff: { initial_interval: 1ms, max_interval: 2ms }
  events: root = this.items
  successor: root = this.next
  contract:
    empty_page: no_evidence
    recovery: park
%s`, srv.URL, extra)
	}
	auths := map[string]string{
		"basic_auth": "  basic_auth:\n    enabled: true\n    username: reader\n    password: " + redBasicPass + "\n",
		"headers":    "  headers:\n    Authorization: Bearer " + redHeaderToken + "\n",
		"oauth2": fmt.Sprintf("  oauth2:\n    enabled: true\n    client_key: cid\n    client_secret: %q\n    token_url: %s/token\n",
			redClientSec, tokens.URL),
	}
	secrets := map[string]string{
		"cursor": redCursor, "basic password": redBasicPass, "header token": redHeaderToken,
		"client secret": redClientSec, "access token": redAccessToken,
		"basic credentials": base64.StdEncoding.EncodeToString([]byte("reader:" + redBasicPass)),
		"token basic":       base64.StdEncoding.EncodeToString([]byte("cid:" + url.QueryEscape(redClientSec))),
	}
	for authName, authConf := range auths {
		for _, code := range []int{401, 403, 500, 200} {
			for enc := range echoEncoders {
				t.Run(fmt.Sprintf("%s/%d/%s", authName, code, enc), func(t *testing.T) {
					status.Store(int64(code))
					encName.Store(enc)
					log, buf := traceLogger()
					p := parseProvider(t, base(authConf), nil, log)
					_, err := p.Fetch(context.Background(), provider.Request{Scope: "s", Partition: "p1", Cursor: []byte(redCursor)})
					require.Error(t, err)
					text := err.Error() + "\n" + buf.String()
					assert.Empty(t, redacttest.Leaks(text, secrets), text)
					if code != 200 {
						assert.Contains(t, err.Error(), redact.Mask, "the echo was quoted, redacted")
					}
				})
			}
		}
	}
	t.Run("oauth2 token endpoint echoes its request", func(t *testing.T) {
		tokenFails.Store(true)
		defer tokenFails.Store(false)
		for enc := range echoEncoders {
			encName.Store(enc)
			log, buf := traceLogger()
			p := parseProvider(t, base(auths["oauth2"]), nil, log)
			_, err := p.Fetch(context.Background(), provider.Request{Scope: "s", Partition: "p1", Cursor: []byte(redCursor)})
			require.Error(t, err)
			text := err.Error() + "\n" + buf.String()
			assert.Empty(t, redacttest.Leaks(text, secrets), text)
			assert.Contains(t, err.Error(), "HTTP 401", enc)
		}
	})
}

// A Kubernetes 410 Gone quotes a fresh continue token in its body; the
// expired error quoting the body shows neither it nor the stale cursor.
func TestExpiredBodyQuotesNoContinueToken(t *testing.T) {
	const fresh = "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MTIzNDV9"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusGone)
		fmt.Fprintf(w, `{"kind":"Status","status":"Failure","message":"The provided continue parameter is too old (%s); use %s","reason":"Expired","code":410,"metadata":{"continue":%q}}`,
			r.URL.Query().Get("continue"), fresh, fresh)
	}))
	defer srv.Close()
	p := parseProvider(t, fmt.Sprintf(`
http:
  url: '%s/api/v1/pods?limit=2&continue=${! @cursor.escape_url_query() }'
  expired_status_codes: [ 410 ]
  events: root = this.items
  successor: root = this.metadata.continue
  contract:
    empty_page: no_evidence
    recovery: park
`, srv.URL), nil, nil)
	_, err := p.Fetch(context.Background(), provider.Request{Scope: "s", Partition: "pods", Cursor: []byte("stale-continue-token-abc")})
	var exp *provider.ExpiredError
	require.ErrorAs(t, err, &exp)
	assert.Empty(t, redacttest.Leaks(err.Error(), map[string]string{"fresh": fresh, "stale": "stale-continue-token-abc"}), err.Error())
	assert.Contains(t, exp.Reason, "HTTP 410")
}

// A token endpoint that accepts and never answers: each token request
// times out after the provider's timeout, each failure is logged at WARN
// naming the token URL's host, the fetch fails (transiently, so it is
// retried), and once the endpoint answers the next fetch succeeds.
func TestOAuth2TokenEndpointThatHangsTimesOutLogsAndRecovers(t *testing.T) {
	var hang atomic.Bool
	hang.Store(true)
	var hung atomic.Int64
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body) // the server notices a closed connection only after the body
		if hang.Load() {
			hung.Add(1)
			<-r.Context().Done() // until the client gives up
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access_token":%q,"token_type":"bearer","expires_in":3600}`, redAccessToken)
	}))
	defer tokens.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+redAccessToken {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		fmt.Fprint(w, onePage)
	}))
	defer srv.Close()
	log, buf := traceLogger()
	p := parseProvider(t, pageConfig(srv.URL, fmt.Sprintf(`  timeout: 300ms
  max_retries: 0
  backoff: { initial_interval: 1ms, max_interval: 2ms }
  oauth2:
    enabled: true
    client_key: cid
    client_secret: %q
    token_url: %s/oauth/token
`, redClientSec, tokens.URL)), nil, log)
	clock := &fakeClock{at: time.Unix(1_800_000_000, 0)}
	p.auth.tokens.now = clock.now

	_, err := p.Fetch(context.Background(), provider.Request{Scope: "s", Partition: "p", Cursor: nil})
	require.Error(t, err)
	assert.NotErrorIs(t, err, provider.ErrPermanent, "a token endpoint that does not answer is a transient failure")
	assert.Contains(t, err.Error(), "timed out after 300ms")
	logs := buf.String()
	host := strings.TrimPrefix(tokens.URL, "http://")
	assert.Equal(t, TokenAttempts, strings.Count(logs, "token request to http://"+host+" failed"), logs)
	assert.Contains(t, logs, "level=WARN")
	assert.Empty(t, redacttest.Leaks(err.Error()+logs, map[string]string{"client secret": redClientSec}))
	assert.GreaterOrEqual(t, hung.Load(), int64(TokenAttempts))

	hang.Store(false)
	// The endpoint rests (TokenRestMin after one failed fetch): a fetch now
	// makes no token request, whichever partition asks.
	requests := hung.Load()
	_, err = p.Fetch(context.Background(), provider.Request{Scope: "s", Partition: "other", Cursor: nil})
	require.ErrorContains(t, err, "is resting after 1 failed token fetches in a row")
	assert.Equal(t, requests, hung.Load())
	clock.advance(TokenRestMin)
	assert.Equal(t, []string{"a"}, ids(fetch(t, p, "p", "")))
}

// fakeClock is a clock a test moves by hand.
type fakeClock struct {
	mu sync.Mutex
	at time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.at }
func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at = c.at.Add(d)
}

// A token endpoint that keeps failing is given a rest shared by every
// partition of the provider, doubling from TokenRestMin up to
// TokenRestMax: many partitions' fetches make TokenAttempts requests per
// rest, not a burst each (an account lockout risk), and a token obtained
// ends the rests.
func TestOAuth2FailingTokenEndpointRestsForEveryPartition(t *testing.T) {
	var fail atomic.Bool
	fail.Store(true)
	var requests atomic.Int64
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if fail.Load() {
			http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access_token":%q,"token_type":"bearer","expires_in":3600}`, redAccessToken)
	}))
	defer tokens.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, onePage) }))
	defer srv.Close()
	p := parseProvider(t, pageConfig(srv.URL, fmt.Sprintf(`  max_retries: 0
  backoff: { initial_interval: 1ms, max_interval: 2ms }
  oauth2:
    enabled: true
    client_key: cid
    client_secret: %q
    token_url: %s/oauth/token
`, redClientSec, tokens.URL)), nil, nil)
	clock := &fakeClock{at: time.Unix(1_800_000_000, 0)}
	p.auth.tokens.now = clock.now
	fetchAll := func() {
		var wg sync.WaitGroup
		for i := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = p.Fetch(context.Background(), provider.Request{Scope: "s", Partition: fmt.Sprintf("p%d", i)})
			}()
		}
		wg.Wait()
	}
	// One failed Token call is TokenAttempts attempts; the oauth2 library
	// may make two requests an attempt (a 401 under auto-detected auth
	// style is tried again with the credentials in the form).
	perFetch := int64(0)
	rest := TokenRestMin
	for round := 1; round <= 4; round++ {
		before := requests.Load()
		fetchAll() // 16 partitions at once: one Token call fails, the rest see it resting
		fetchAll()
		n := requests.Load() - before
		if round == 1 {
			perFetch = n
			require.True(t, n >= TokenAttempts && n <= 2*TokenAttempts, "one failed token fetch made %d requests", n)
		}
		assert.Equal(t, perFetch, n, "round %d: one failed token fetch's requests, for 32 fetches of 16 partitions", round)
		clock.advance(rest - time.Millisecond)
		fetchAll()
		assert.Equal(t, perFetch, requests.Load()-before, "round %d: still resting just before the rest ends", round)
		clock.advance(time.Millisecond)
		rest = min(2*rest, TokenRestMax)
	}
	fail.Store(false)
	assert.Equal(t, []string{"a"}, ids(fetch(t, p, "p", "")))
	fail.Store(true)
	// Tokens are cached: no request; and the rests start again from the
	// minimum the next time the endpoint fails.
	assert.Equal(t, []string{"a"}, ids(fetch(t, p, "p", "")))
}

// A waiting caller gives up when its context ends, while another holds the
// token request: a stopping partition is not held by a hung endpoint.
func TestOAuth2TokenWaitEndsWithTheCallersContext(t *testing.T) {
	release := make(chan struct{})
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer tokens.Close()
	p := parseProvider(t, pageConfig("http://127.0.0.1:1", fmt.Sprintf(`  timeout: 1h
  oauth2:
    enabled: true
    client_key: cid
    client_secret: %q
    token_url: %s/token
`, redClientSec, tokens.URL)), nil, nil)
	holder, stopHolder := context.WithCancel(context.Background())
	defer stopHolder()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = p.auth.tokens.Token(holder)
	}()
	// Wait until the holder has the turn.
	require.Eventually(t, func() bool { return len(p.auth.tokens.turn) == 1 }, time.Minute, time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := p.auth.tokens.Token(ctx)
	require.ErrorIs(t, err, context.Canceled)
	close(release) // the holder's request ends (its timeout, not its context, bounds it)
	<-done
}

// A token endpoint that redirects: the redirect is refused before the
// other host is asked, so the client secret is never sent there; the same
// host's redirects are refused too (the documented choice).
func TestOAuth2TokenRedirectIsRefused(t *testing.T) {
	var elsewhere atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		fmt.Fprintf(w, `{"access_token":"stolen","token_type":"bearer"}`)
	}))
	defer other.Close()
	for name, target := range map[string]func(host string) string{
		"another host": func(string) string { return other.URL + "/token" },
		"same host":    func(host string) string { return "http://" + host + "/elsewhere" },
	} {
		t.Run(name, func(t *testing.T) {
			var sameHost atomic.Int64
			tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/elsewhere" {
					sameHost.Add(1)
				}
				http.Redirect(w, r, target(r.Host), http.StatusTemporaryRedirect)
			}))
			defer tokens.Close()
			log, buf := traceLogger()
			p := parseProvider(t, pageConfig("http://127.0.0.1:1", fmt.Sprintf(`  max_retries: 0
  backoff: { initial_interval: 1ms, max_interval: 2ms }
  oauth2:
    enabled: true
    client_key: cid
    client_secret: %q
    token_url: %s/token
`, redClientSec, tokens.URL)), nil, log)
			_, err := p.Fetch(context.Background(), provider.Request{Scope: "s", Partition: "p"})
			require.Error(t, err)
			assert.Contains(t, err.Error(), "redirects of the token request are refused")
			assert.Equal(t, int64(0), elsewhere.Load(), "the other host received nothing")
			assert.Equal(t, int64(0), sameHost.Load(), "the same host's redirect is not followed either")
			assert.Empty(t, redacttest.Leaks(err.Error()+buf.String(), map[string]string{"client secret": redClientSec}))
		})
	}
}

// The provider's Redactor holds the credentials as they become known, for
// the input's logs and park reasons.
func TestRedactorLearnsCredentialsAsTheyAreSent(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, onePage) }))
	defer srv.Close()
	p := parseProvider(t, pageConfig(srv.URL, "  basic_auth:\n    enabled: true\n    username: reader\n    password: "+redBasicPass+"\n"), nil, nil)
	fetch(t, p, "p", "")
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("reader:"+redBasicPass))
	got := p.Redactor().Apply("sent " + basic + " with " + redBasicPass)
	assert.Empty(t, redacttest.Leaks(got, map[string]string{"pass": redBasicPass, "basic": basic}), got)
	assert.False(t, errors.Is(nil, provider.ErrPermanent))
}

// A malformed answer whose value (an events mapping result, a position)
// starts with a credential or the cursor, longer than the bytes a
// malformed reason quotes of it: the cut would leave a prefix of the
// secret that no form of it matches, so the value is redacted whole
// first and cut after. Neither the secret nor any 12-byte piece of it
// remains.
func TestMalformedReasonCutsQuotedValuesAfterRedaction(t *testing.T) {
	const token = "tok3n-0123456789abcdefghijklmnopqrstuvwxyz/+="
	const cursor = "cursor-0123456789abcdefghijklmnopqrstuvwxyz/+="
	for _, tc := range []struct {
		name, kind, body string
		pad              int // bytes before the secret: the cut falls inside it
	}{
		{"events mapping returned a string", "integer", `{"events":%q}`, 20},
		{"an integer position", "integer", `{"events":[{"id":"a","pos":%q}]}`, 20},
		{"a decimal position", "decimal", `{"events":[{"id":"a","pos":%q}]}`, 60},
	} {
		for _, secret := range []string{"Bearer " + token, cursor + " and more"} {
			t.Run(tc.name+"/"+secret[:6], func(t *testing.T) {
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					fmt.Fprintf(w, tc.body, strings.Repeat("x", tc.pad)+secret)
				}))
				defer srv.Close()
				p := parseProvider(t, fmt.Sprintf(`
http:
  url: '%s/items?c=${! @cursor.escape_url_query() }'
  headers: { Authorization: 'Bearer %s' }
  events: root = this.events
  event_position: root = this.pos
  successor: root = deleted()
  contract:
    position_type: %s
`, srv.URL, token, tc.kind), nil, nil)
				_, err := p.Fetch(t.Context(), provider.Request{Partition: "p", Cursor: []byte(cursor)})
				require.ErrorIs(t, err, provider.ErrMalformed)
				msg := err.Error()
				assert.Contains(t, msg, redact.Mask)
				for _, v := range []string{token, cursor} {
					for i := 0; i+12 <= len(v); i++ {
						require.NotContains(t, msg, v[i:i+12], "a piece of a secret is quoted")
					}
				}
				assert.NotContains(t, msg, "\x00", "no quote mark is left")
			})
		}
	}
}

// Credentials in a URL's user info (http://user:pass@host/, as a CouchDB
// URL carries them) and in proxy_url's become headers inside net/http
// (Authorization, Proxy-Authorization) after the configured headers were
// registered; a server or proxy echoing the request, in every encoding,
// never gets them into an error or a log line.
func TestURLUserInfoNeverLeaves(t *testing.T) {
	const (
		user      = "couch-admin"
		pass      = "u$er inf0+pw/=x"
		proxyUser = "proxy-user"
		proxyPass = "pr0xy p@ss=wd"
	)
	var encName atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		enc := echoEncoders[encName.Load().(string)]
		echo(w, r, enc)
		fmt.Fprintf(w, "proxy=%s", enc(r.Header.Get("Proxy-Authorization")))
		if pu, pp, ok := parseBasic(r.Header.Get("Proxy-Authorization")); ok {
			fmt.Fprintf(w, " proxy-user=%s proxy-pass=%s", enc(pu), enc(pp))
		}
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	userinfo := url.UserPassword(user, pass).String()
	proxyInfo := url.UserPassword(proxyUser, proxyPass).String()
	secrets := map[string]string{
		"password":        pass,
		"user:password":   user + ":" + pass,
		"basic":           base64.StdEncoding.EncodeToString([]byte(user + ":" + pass)),
		"userinfo":        userinfo,
		"proxy password":  proxyPass,
		"proxy basic":     base64.StdEncoding.EncodeToString([]byte(proxyUser + ":" + proxyPass)),
		"proxy user:pass": proxyUser + ":" + proxyPass,
	}
	configs := map[string]string{
		"url user info": fmt.Sprintf("  url: 'http://%s@%s/p?cursor=${! @cursor }'\n", userinfo, host),
		// The request goes to the proxy (the echoing server), which sees
		// Proxy-Authorization; the page URL's host is never dialled.
		"proxy_url user info": fmt.Sprintf("  url: 'http://127.0.0.1:9/p?cursor=${! @cursor }'\n  proxy_url: 'http://%s@%s'\n", proxyInfo, host),
	}
	for name, urls := range configs {
		for enc := range echoEncoders {
			t.Run(name+"/"+enc, func(t *testing.T) {
				encName.Store(enc)
				log, buf := traceLogger()
				p := parseProvider(t, "http:\n"+urls+`  max_retries: 1
  backoff: { initial_interval: 1ms, max_interval: 2ms }
  events: root = this.items
  successor: root = this.next
  contract: { empty_page: no_evidence, recovery: park }
`, nil, log)
				_, err := p.Fetch(context.Background(), provider.Request{Scope: "s", Partition: "p1", Cursor: []byte(redCursor)})
				require.Error(t, err)
				assert.Contains(t, err.Error(), "HTTP 401")
				text := err.Error() + "\n" + buf.String() + "\n" + p.Redactor().Apply(err.Error())
				assert.Empty(t, redacttest.Leaks(text, secrets), text)
				assert.Contains(t, err.Error(), redact.Mask, "the echo was quoted, redacted")
			})
		}
	}
}

// parseBasic decodes a Basic credential header value.
func parseBasic(h string) (user, pass string, ok bool) {
	b64, ok := strings.CutPrefix(h, "Basic ")
	if !ok {
		return "", "", false
	}
	dec, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return "", "", false
	}
	return strings.Cut(string(dec), ":")
}
