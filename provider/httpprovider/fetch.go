package httpprovider

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/provider"
)

// builtRequest is one page request, built once and sent once per attempt.
type builtRequest struct {
	partition string
	cursor    []byte
	meta      [][2]string

	method string
	url    string
	// target is "scheme://host" plus a hash of the whole URL: the only form
	// of the URL errors and logs show (its path or query may carry the
	// cursor or a key).
	host    string
	urlHash string
	header  http.Header
	body    []byte
	hasBody bool

	// red redacts the header values, the cursor and the URL's query values
	// from anything quoted in an error.
	red redactor
	// ofPartition: a page, bootstrap or validate request, limited by
	// partition_rate_limit when it is set.
	ofPartition bool
}

func (rq *builtRequest) target() string {
	return fmt.Sprintf("%s %s (url %s)", rq.method, rq.host, rq.urlHash)
}

func (rq *builtRequest) malformed(reason string, err error) error {
	// Redact first, then cut the quoted values (quoteCut).
	e := &provider.MalformedError{Partition: rq.partition, Reason: cutQuoted(rq.red.apply(reason))}
	if err != nil {
		e.Err = redactedError{msg: cutQuoted(rq.red.apply(err.Error())), err: err}
	}
	return e
}

// redactedError shows a redacted message and keeps the cause for errors.Is.
type redactedError struct {
	msg string
	err error
}

func (e redactedError) Error() string { return e.msg }
func (e redactedError) Unwrap() error { return e.err }

// callSpec is one request of the config: the page request, the partition
// list, or a request of a traversal's sequence (bootstrap, validate).
type callSpec struct {
	// field prefixes the config fields named in errors ("" for the page
	// request, "bootstrap." and "validate." for the others).
	field   string
	verb    string
	url     *service.InterpolatedString
	headers map[string]*service.InterpolatedString
	body    *service.InterpolatedString
}

// pageCall is the page request.
func (p *Provider) pageCall() callSpec {
	return callSpec{verb: p.cfg.Verb, url: p.cfg.URL, headers: p.cfg.Headers, body: p.cfg.Body}
}

// build interpolates the request. Failures are *RequestError, with the
// secrets already known (header values evaluated so far, the cursor and
// the source's token in metadata `cursor`) redacted. cursor is the cursor
// logs name by its hash.
func (p *Provider) build(partition string, cursor []byte, meta [][2]string, c callSpec) (*builtRequest, error) {
	method, urlStr, body := c.verb, c.url, c.body
	rq := &builtRequest{partition: partition, cursor: cursor, meta: meta, method: method, header: http.Header{}, red: newRedactor(p.red),
		ofPartition: c.field == "" || c.field == "bootstrap." || c.field == "validate."}
	rq.red.add(string(cursor))
	for _, kv := range meta {
		if kv[0] == metaCursor {
			rq.red.add(kv[1])
		}
	}
	msg := metaMessage(meta)
	fail := func(field string, err error) error {
		return &RequestError{Partition: partition, Field: c.field + field, Err: redactedError{msg: rq.red.apply(err.Error()), err: err}}
	}
	for name, v := range c.headers {
		s, err := v.TryString(msg)
		if err != nil {
			return nil, fail("headers."+name, err)
		}
		rq.red.addCredential(s)
		if credentialHeader(name) {
			p.red.AddCredential(s)
		}
		rq.header.Set(name, s)
	}
	u, err := urlStr.TryString(msg)
	if err != nil {
		return nil, fail("url", err)
	}
	parsed, err := url.Parse(u)
	if err != nil || (parsed.Scheme != "http" && parsed.Scheme != "https") || parsed.Host == "" {
		// url.Parse errors quote the URL: never show them.
		return nil, &RequestError{Partition: partition, Field: c.field + "url", Err: fmt.Errorf("url %s is not an absolute http(s) URL", reconcile.CursorHash([]byte(u)))}
	}
	// User info in the URL (http://user:pass@host/) becomes a Basic
	// Authorization header inside net/http, after the headers above were
	// registered: register it, and the header it becomes, process-wide.
	p.red.AddUserinfo(parsed.User)
	for _, u := range p.userinfos {
		p.red.AddUserinfo(u)
	}
	for _, vs := range parsed.Query() {
		for _, v := range vs {
			rq.red.add(v)
		}
	}
	rq.url = u
	rq.host = parsed.Scheme + "://" + parsed.Host
	rq.urlHash = reconcile.CursorHash([]byte(u))
	if body != nil {
		b, err := body.TryBytes(msg)
		if err != nil {
			return nil, fail("body", err)
		}
		rq.body, rq.hasBody = b, true
	}
	return rq, nil
}

// httpResult is a response read whole.
type httpResult struct {
	status   int
	header   http.Header
	body     []byte
	tooLarge bool
}

// do sends rq, retrying transient failures, and classifies the final
// response: expired (*provider.ExpiredError), non-2xx (*StatusError),
// transport failure after the last retry (plain error), or a 2xx result.
func (p *Provider) do(ctx context.Context, rq *builtRequest) (*httpResult, error) {
	start := time.Now()
	// exhausted: no retry after attempt (max_retries, or max_elapsed_time
	// since the first request).
	exhausted := func(attempt int) bool {
		return attempt >= p.cfg.MaxRetries || (p.cfg.Backoff.MaxElapsed > 0 && time.Since(start) >= p.cfg.Backoff.MaxElapsed)
	}
	for attempt := 0; ; attempt++ {
		res, err := p.attempt(ctx, rq)
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("httpprovider: partition %s: %s: %w", rq.partition, rq.target(), ctx.Err())
			}
			if exhausted(attempt) {
				return nil, fmt.Errorf("httpprovider: partition %s: giving up after %d attempts in %s: %w", rq.partition, attempt+1, time.Since(start).Round(time.Millisecond), err)
			}
			if werr := p.pause(ctx, rq, attempt, 0, err); werr != nil {
				return nil, werr
			}
			continue
		}
		if res.status < 200 || res.status > 299 {
			p.learnBodyCursor(rq, res)
		}
		if p.expired[res.status] {
			return nil, &provider.ExpiredError{Partition: rq.partition,
				Reason: fmt.Sprintf("HTTP %d %s: %q", res.status, http.StatusText(res.status), rq.red.quote(res.body))}
		}
		if res.status < 200 || res.status > 299 {
			if s, ok := containsFold(res.body, p.cfg.ExpiredBodyContains); ok {
				return nil, &provider.ExpiredError{Partition: rq.partition,
					Reason: fmt.Sprintf("HTTP %d response body contains %q", res.status, s)}
			}
			if loc := res.header.Get("Location"); loc != "" {
				// A Location may carry the cursor or a signed token,
				// and the body of a 3xx usually quotes it.
				rq.red.add(loc)
				if u, err := url.Parse(loc); err == nil {
					for _, vs := range u.Query() {
						for _, v := range vs {
							rq.red.add(v)
						}
					}
				}
			}
			serr := &StatusError{Partition: rq.partition, Method: rq.method, Host: rq.host,
				Status: res.status, Body: rq.red.quote(res.body), Attempts: attempt + 1, Redirect: redirectTarget(rq.url, res)}
			if !retryableStatus(res.status) {
				_, serr.TransientBody = containsFold(res.body, p.cfg.TransientBodyContains)
			}
			if serr.Permanent() || exhausted(attempt) {
				return nil, serr
			}
			retryAfter := parseRetryAfter(res.header.Get("Retry-After"), time.Now())
			if retryAfter == 0 && res.status == http.StatusTooManyRequests {
				retryAfter = parseRateLimitReset(res.header, time.Now())
			}
			if werr := p.pause(ctx, rq, attempt, retryAfter, serr); werr != nil {
				return nil, werr
			}
			continue
		}
		return res, nil
	}
}

// redirectTarget is where a 3xx response's Location points, resolved
// against the request URL: its scheme and host, and the hash of the whole
// Location (never its path or query, which may carry the cursor). Empty
// for other statuses and without a Location.
func redirectTarget(requestURL string, res *httpResult) string {
	loc := res.header.Get("Location")
	if res.status < 300 || res.status > 399 || loc == "" {
		return ""
	}
	base, err := url.Parse(requestURL)
	if err != nil {
		return "a Location " + reconcile.CursorHash([]byte(loc))
	}
	u, err := base.Parse(loc)
	if err != nil || u.Host == "" {
		return "a Location " + reconcile.CursorHash([]byte(loc))
	}
	return fmt.Sprintf("%s://%s (Location %s)", u.Scheme, u.Host, reconcile.CursorHash([]byte(loc)))
}

// pause logs a transient failure and waits before retry attempt+1.
func (p *Provider) pause(ctx context.Context, rq *builtRequest, attempt int, retryAfter time.Duration, cause error) error {
	wait := p.backoff(attempt, retryAfter)
	text := cause.Error()
	var se *StatusError
	if errors.As(cause, &se) {
		text = se.brief()
	}
	p.log.Warnf("httpprovider: partition %s: cursor %s: %s; retry %d of %d in %s",
		rq.partition, reconcile.CursorHash(rq.cursor), rq.red.apply(text), attempt+1, p.cfg.MaxRetries, wait.Round(time.Millisecond))
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("httpprovider: partition %s: waiting to retry %s: %w", rq.partition, rq.target(), ctx.Err())
	case <-t.C:
		return nil
	}
}

// backoff is the wait before retry attempt+1: Initial doubled per attempt,
// capped at Max, with "equal jitter" (half fixed, half random), and at least
// the server's Retry-After, itself capped at Max.
func (p *Provider) backoff(attempt int, retryAfter time.Duration) time.Duration {
	d := p.cfg.Backoff.Initial
	for i := 0; i < attempt && d < p.cfg.Backoff.Max; i++ {
		d *= 2
	}
	d = min(d, p.cfg.Backoff.Max)
	half := d / 2
	d = half + rand.N(half+1)
	return max(d, min(retryAfter, p.cfg.Backoff.Max))
}

// parseRetryAfter reads delay-seconds or an HTTP date (0 when absent or
// unreadable).
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// parseRateLimitReset reads the reset time of a 429 that has no
// Retry-After: X-Rate-Limit-Reset (Okta) or X-RateLimit-Reset, in Unix epoch
// seconds (0 when absent, unreadable, not an epoch time, or past).
func parseRateLimitReset(h http.Header, now time.Time) time.Duration {
	for _, name := range []string{"X-Rate-Limit-Reset", "X-RateLimit-Reset"} {
		n, err := strconv.ParseInt(strings.TrimSpace(h.Get(name)), 10, 64)
		// Smaller values are not epoch seconds (some APIs send a delay
		// there); they are ignored rather than guessed at.
		if err != nil || n < 1_000_000_000 {
			continue
		}
		if t := time.Unix(n, 0); t.After(now) {
			return t.Sub(now)
		}
	}
	return 0
}

// attempt makes one request, after the rate limit allows it. Its error is
// a transport failure (connection, timeout, body read), already redacted.
func (p *Provider) attempt(ctx context.Context, rq *builtRequest) (*httpResult, error) {
	if p.limiter != nil && rq.ofPartition {
		if err := p.limiter.wait(ctx, rq.partition); err != nil {
			return nil, err
		}
	} else if err := p.waitRateLimit(ctx); err != nil {
		return nil, err
	}
	// The OAuth2 token is obtained before the request's own timeout starts:
	// its requests have their own timeout and retries.
	tok, err := p.auth.token(ctx)
	if err != nil {
		return nil, redactedError{msg: fmt.Sprintf("%s: authenticating: %s", rq.target(), rq.red.apply(err.Error())), err: err}
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	var body io.Reader
	if rq.hasBody {
		body = bytes.NewReader(rq.body)
	}
	req, err := http.NewRequestWithContext(ctx, rq.method, rq.url, body)
	if err != nil {
		return nil, fmt.Errorf("%s: cannot build the request", rq.target())
	}
	req.Header = rq.header.Clone()
	if err := p.auth.apply(ctx, req, rq.body, tok); err != nil {
		return nil, redactedError{msg: fmt.Sprintf("%s: authenticating: %s", rq.target(), rq.red.apply(err.Error())), err: err}
	}
	p.learnCredentials(rq, req.Header)
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, p.transportError(ctx, rq, "", err)
	}
	defer resp.Body.Close()
	limit := p.cfg.MaxResponseBytes
	b, err := readBody(resp.Body, resp.ContentLength, limit+1)
	if err != nil {
		return nil, p.transportError(ctx, rq, fmt.Sprintf("reading the body of HTTP %d: ", resp.StatusCode), err)
	}
	res := &httpResult{status: resp.StatusCode, header: resp.Header, body: b}
	if int64(len(b)) > limit {
		res.body, res.tooLarge = b[:limit], true
	}
	return res, nil
}

// learnCredentials registers the header values the authentication added or
// changed (basic auth, OAuth (v1), JWT, OAuth2 bearer tokens, SigV4
// signatures and session tokens) before the request is sent, so that a
// server echoing the request cannot put them into an error or a log line.
// Values that last (a Basic or Bearer credential, an AWS session token) go
// to the provider's set, shared with the input; the rest (a signature made
// for this request only) to the request's.
func (p *Provider) learnCredentials(rq *builtRequest, sent http.Header) {
	for name, vs := range sent {
		before := rq.header[name]
		for i, v := range vs {
			if i < len(before) && before[i] == v {
				continue
			}
			switch {
			case name == "Authorization" || name == "Proxy-Authorization":
				scheme, _, _ := strings.Cut(v, " ")
				if strings.EqualFold(scheme, "basic") || strings.EqualFold(scheme, "bearer") {
					p.red.AddCredential(v)
				}
				rq.red.addCredential(v)
			case name == "X-Amz-Security-Token":
				p.red.Add(v)
			default:
				rq.red.add(v)
			}
		}
	}
}

// credentialHeader reports whether a configured header is a credential
// whose value the provider's set (shared with the input, and lasting
// beyond the request) keeps: Authorization, Cookie, and names that say key,
// token, secret, password, session, signature or auth. Other headers'
// values are redacted from the request's own errors only.
func credentialHeader(name string) bool {
	n := strings.ToLower(name)
	for _, w := range []string{"auth", "cookie", "key", "token", "secret", "password", "session", "signature"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// learnBodyCursor registers the cursor an error body carries, so that
// quoting the body does not show it: a Kubernetes 410 Gone quotes a fresh
// continue token in metadata.continue, where the successor mapping finds
// it. Best effort: a body the mapping cannot read registers nothing.
func (p *Provider) learnBodyCursor(rq *builtRequest, res *httpResult) {
	if p.cfg.Mappings.Successor == nil || len(res.body) == 0 {
		return
	}
	v, present, err := runMapping(service.NewMessage(res.body), p.cfg.Mappings.Successor)
	if err != nil || !present {
		return
	}
	if c, ok := opaque(v); ok {
		rq.red.add(string(c))
	}
}

// transportError describes a failed round trip without the URL (a
// *url.Error quotes it whole) and with the secrets redacted.
func (p *Provider) transportError(ctx context.Context, rq *builtRequest, what string, err error) error {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err
	}
	msg := err.Error()
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
		msg = fmt.Sprintf("timed out after %s", p.cfg.Timeout)
	}
	return redactedError{msg: fmt.Sprintf("%s: %s%s", rq.target(), what, rq.red.apply(msg)), err: err}
}

// waitRateLimit blocks until the rate_limit resource allows a request.
func (p *Provider) waitRateLimit(ctx context.Context) error {
	if p.cfg.RateLimit == "" {
		return nil
	}
	for {
		var wait time.Duration
		var accessErr error
		err := p.cfg.Resources.AccessRateLimit(ctx, p.cfg.RateLimit, func(rl service.RateLimit) {
			wait, accessErr = rl.Access(ctx)
		})
		if err == nil {
			err = accessErr
		}
		if err != nil {
			return fmt.Errorf("rate limit %q: %w", p.cfg.RateLimit, err)
		}
		if wait <= 0 {
			return nil
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("rate limit %q: %w", p.cfg.RateLimit, ctx.Err())
		case <-t.C:
		}
	}
}

// containsFold returns the first of subs that body contains, compared
// case-insensitively (ASCII and Unicode simple folding, as
// strings.EqualFold): vendors spell the same error code in more than one
// case (Microsoft Graph's SyncStateNotFound and syncStateNotFound).
func containsFold(body []byte, subs []string) (string, bool) {
	if len(subs) == 0 {
		return "", false
	}
	lower := bytes.ToLower(body)
	for _, s := range subs {
		if bytes.Contains(lower, []byte(strings.ToLower(s))) {
			return s, true
		}
	}
	return "", false
}
