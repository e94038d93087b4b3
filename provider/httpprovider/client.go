package httpprovider

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/redpanda-data/benthos/v4/public/service"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/tidemark/tidemark/internal/awscreds"
	"github.com/tidemark/tidemark/internal/awscreds/awscredsfield"
	"github.com/tidemark/tidemark/internal/redact"
)

// Client is how the provider reaches the source: TLS, a proxy and request
// authentication. The zero Client is plain HTTP(S) with the system's roots.
type Client struct {
	// TLS, when not nil, is the TLS configuration (a private CA, a client
	// certificate for mutual TLS). Verification stays on unless the
	// configuration itself skips it.
	TLS *tls.Config
	// ProxyURL, when not empty, sends every request through this HTTP(S)
	// proxy; empty uses the environment's (HTTP_PROXY, HTTPS_PROXY,
	// NO_PROXY).
	ProxyURL string
	// Sign, when not nil, authenticates each request in place (Benthos's
	// basic_auth, oauth (v1) and jwt signers).
	Sign func(*http.Request) error
	// OAuth2, when Enabled, adds a bearer token obtained with the OAuth 2.0
	// client-credentials grant (cached until it expires).
	OAuth2 OAuth2
	// SigV4, when Enabled, signs each request with AWS Signature Version 4
	// using the AWS SDK's default credential chain.
	SigV4 SigV4
	// Secrets are further credential values Sign sends (basic_auth's
	// password, oauth's secrets and access token), registered with the
	// provider's redaction layer (Provider.Redactor) from the start.
	Secrets []string
}

// OAuth2 configures the client-credentials grant.
type OAuth2 struct {
	Enabled        bool
	ClientKey      string
	ClientSecret   string
	TokenURL       string
	Scopes         []string
	EndpointParams map[string]string
}

// SigV4 configures AWS Signature Version 4.
type SigV4 struct {
	Enabled bool
	// Service is the signing name of the AWS service (for example
	// "execute-api", "kinesis", "s3"). Required when Enabled.
	Service string
	// Region is the signing region; empty: the SDK's default chain.
	Region string
	// Credentials: the `credentials` object (zero: the SDK's default
	// chain).
	Credentials awscreds.Config
}

func (c Client) validate() error {
	if c.ProxyURL != "" {
		u, err := url.Parse(c.ProxyURL)
		if err != nil {
			return fmt.Errorf("proxy_url is not a URL: %v", urlParseReason(err))
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("proxy_url %q is not an http(s) URL", u.Redacted())
		}
	}
	if c.OAuth2.Enabled {
		if c.OAuth2.TokenURL == "" || c.OAuth2.ClientKey == "" {
			return errors.New("oauth2 needs token_url and client_key")
		}
		if _, err := url.Parse(c.OAuth2.TokenURL); err != nil {
			return fmt.Errorf("oauth2.token_url is not a URL: %v", urlParseReason(err))
		}
	}
	if c.SigV4.Enabled && c.SigV4.Service == "" {
		return errors.New("aws_sigv4 needs service (the AWS signing name, e.g. execute-api)")
	}
	return nil
}

// urlParseReason is why url.Parse refused a configured URL, without the
// URL: a *url.Error quotes it whole, with any user info (a password).
func urlParseReason(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// transport is the round tripper of the provider's client.
func (c Client) transport() (*http.Transport, error) {
	t := http.DefaultTransport.(*http.Transport).Clone()
	if c.TLS != nil {
		t.TLSClientConfig = c.TLS.Clone()
	}
	if c.ProxyURL != "" {
		u, err := url.Parse(c.ProxyURL)
		if err != nil {
			return nil, err
		}
		t.Proxy = http.ProxyURL(u)
	}
	return t, nil
}

// authenticator adds the configured credentials to a request just before it
// is sent (after every header of the config is set, so a signature covers
// them).
type authenticator struct {
	sign   func(*http.Request) error
	tokens *tokenSource
	sigv4  *sigv4Signer
}

// tokenOptions bound the OAuth2 token requests: each request's timeout,
// how many attempts one Token call makes, the back-off between them, where
// failures are logged and which set the secrets go to.
type tokenOptions struct {
	timeout  time.Duration
	attempts int
	backoff  func(attempt int) time.Duration
	log      *service.Logger
	red      *redact.Set
}

func newAuthenticator(c Client, base *http.Client, o tokenOptions) (*authenticator, error) {
	a := &authenticator{sign: c.Sign}
	if c.OAuth2.Enabled {
		cc := clientcredentials.Config{ClientID: c.OAuth2.ClientKey, ClientSecret: c.OAuth2.ClientSecret, TokenURL: c.OAuth2.TokenURL, Scopes: c.OAuth2.Scopes}
		if len(c.OAuth2.EndpointParams) > 0 {
			cc.EndpointParams = url.Values{}
			for k, v := range c.OAuth2.EndpointParams {
				cc.EndpointParams.Set(k, v)
			}
		}
		// The secret in every form the token request sends it: a form
		// value, or HTTP Basic over the URL-escaped id and secret.
		o.red.Add(c.OAuth2.ClientSecret)
		o.red.AddCredential("Basic " + base64.StdEncoding.EncodeToString([]byte(url.QueryEscape(c.OAuth2.ClientKey)+":"+url.QueryEscape(c.OAuth2.ClientSecret))))
		// Token requests use the provider's own transport (its TLS and
		// proxy), without the provider's authentication, with the
		// provider's timeout, and follow no redirect.
		hc := &http.Client{Transport: base.Transport, Timeout: o.timeout, CheckRedirect: refuseTokenRedirect}
		ctx := context.WithValue(context.Background(), oauth2.HTTPClient, hc)
		host := c.OAuth2.TokenURL
		if u, err := url.Parse(c.OAuth2.TokenURL); err == nil {
			host = u.Scheme + "://" + u.Host
		}
		a.tokens = &tokenSource{src: cc.TokenSource(ctx), host: host, opts: o, turn: make(chan struct{}, 1)}
	}
	if c.SigV4.Enabled {
		o.red.Add(c.SigV4.Credentials.Secrets()...)
		a.sigv4 = &sigv4Signer{service: c.SigV4.Service, region: c.SigV4.Region, creds: c.SigV4.Credentials, signer: v4.NewSigner(), red: o.red}
	}
	return a, nil
}

// refuseTokenRedirect refuses every redirect of a token request, to the
// same host too: the request carries the client secret (in its body or its
// Authorization header), a 307 or 308 would send it again, and a token
// endpoint has no reason to move (set token_url to the final URL). The
// refusal happens before the redirected request is made: its host receives
// nothing.
func refuseTokenRedirect(req *http.Request, _ []*http.Request) error {
	return fmt.Errorf("token_url redirected to %s://%s: redirects of the token request are refused (set token_url to the final URL)", req.URL.Scheme, req.URL.Host)
}

// tokenSource obtains client-credentials tokens: cached until they expire
// (oauth2's reuse source), each request bounded by the provider's timeout,
// at most opts.attempts requests per Token call with jittered back-off,
// each failure logged at WARN naming the token URL's host (never the
// secret), errors redacted. One caller at a time requests a token; the
// others wait for it, or give up when their context ends. A Token call
// whose every attempt failed makes the endpoint rest: until the rest ends,
// every caller (every partition of the provider) gets the last failure
// without a request; each rest doubles from TokenRestMin up to
// TokenRestMax, and a token obtained ends them.
type tokenSource struct {
	src  oauth2.TokenSource
	host string
	opts tokenOptions
	turn chan struct{}
	// now is the clock of the rests (time.Now; tests set their own).
	now func() time.Time

	// Under turn: the failed Token calls in a row, when the rest ends,
	// and the failure that began it.
	failures  int
	restUntil time.Time
	lastErr   error
}

// TokenRestMin and TokenRestMax bound the rest a failing token endpoint
// is given, shared by every partition of the provider: a token endpoint
// that keeps failing (revoked credentials, an outage) receives at most
// TokenAttempts requests per rest, not a burst from every partition's
// every fetch (an account lockout risk).
const (
	TokenRestMin = time.Second
	TokenRestMax = 2 * time.Minute
)

func (t *tokenSource) Token(ctx context.Context) (*oauth2.Token, error) {
	select {
	case t.turn <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("oauth2: waiting for a token from %s: %w", t.host, ctx.Err())
	}
	defer func() { <-t.turn }()
	clock := t.now
	if clock == nil {
		clock = time.Now
	}
	if now := clock(); now.Before(t.restUntil) {
		return nil, fmt.Errorf("oauth2: the token endpoint %s is resting after %d failed token fetches in a row; the next request is made in %s (the last failure: %w)",
			t.host, t.failures, t.restUntil.Sub(now).Round(time.Millisecond), t.lastErr)
	}
	for attempt := 1; ; attempt++ {
		tok, err := t.src.Token()
		if err == nil {
			t.opts.red.Add(tok.AccessToken, tok.RefreshToken)
			t.failures, t.restUntil, t.lastErr = 0, time.Time{}, nil
			return tok, nil
		}
		err = t.describe(err)
		if attempt >= t.opts.attempts {
			t.failures++
			rest := min(TokenRestMin<<min(t.failures-1, 16), TokenRestMax)
			t.restUntil, t.lastErr = clock().Add(rest), err
			t.opts.log.Warnf("httpprovider: oauth2: token request to %s failed (attempt %d of %d, giving up for this request; no token request for %s, for any partition): %v", t.host, attempt, t.opts.attempts, rest, err)
			return nil, err
		}
		wait := t.opts.backoff(attempt - 1)
		t.opts.log.Warnf("httpprovider: oauth2: token request to %s failed (attempt %d of %d): %v; retrying in %s", t.host, attempt, t.opts.attempts, err, wait.Round(time.Millisecond))
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, fmt.Errorf("oauth2: waiting to retry the token request to %s: %w", t.host, ctx.Err())
		case <-timer.C:
		}
	}
}

// describe is a token request's failure, redacted, quoting at most
// maxQuotedBody bytes of the endpoint's answer.
func (t *tokenSource) describe(err error) error {
	red := redactor{t.opts.red}
	var re *oauth2.RetrieveError
	if errors.As(err, &re) && re.Response != nil {
		msg := fmt.Sprintf("oauth2: the token endpoint answered HTTP %d", re.Response.StatusCode)
		if re.ErrorCode != "" {
			msg += fmt.Sprintf(" (error %q)", red.apply(re.ErrorCode))
		}
		return redactedError{msg: fmt.Sprintf("%s: %q", msg, red.quote(re.Body)), err: err}
	}
	var uerr *url.Error
	if errors.As(err, &uerr) {
		// A *url.Error quotes the URL; name the host only.
		msg := uerr.Err.Error()
		if uerr.Timeout() {
			msg = fmt.Sprintf("timed out after %s", t.opts.timeout)
		}
		return redactedError{msg: fmt.Sprintf("oauth2: %s %s: %s", uerr.Op, t.host, red.apply(msg)), err: err}
	}
	return redactedError{msg: red.apply(err.Error()), err: err}
}

// token is the OAuth2 token to send (nil without oauth2). Its errors are
// transient (a token endpoint that did not answer or refused).
func (a *authenticator) token(ctx context.Context) (*oauth2.Token, error) {
	if a == nil || a.tokens == nil {
		return nil, nil
	}
	return a.tokens.Token(ctx)
}

// apply authenticates req, whose body is body, with tok (from token). Its
// errors are transient (the credential chain that did not answer).
func (a *authenticator) apply(ctx context.Context, req *http.Request, body []byte, tok *oauth2.Token) error {
	if a == nil {
		return nil
	}
	if a.sign != nil {
		if err := a.sign(req); err != nil {
			return fmt.Errorf("signing the request: %w", err)
		}
	}
	if tok != nil {
		tok.SetAuthHeader(req)
	}
	if a.sigv4 != nil {
		if err := a.sigv4.sign(ctx, req, body); err != nil {
			return err
		}
	}
	return nil
}

// sigv4Signer signs with the credentials object's credentials (the SDK's
// default chain when it is empty), loaded once.
type sigv4Signer struct {
	service string
	signer  *v4.Signer
	creds   awscreds.Config

	red *redact.Set // receives the credentials' secrets

	mu       sync.Mutex // guards the lazily loaded region and provider
	region   string
	provider aws.CredentialsProvider
}

func (s *sigv4Signer) sign(ctx context.Context, req *http.Request, body []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.provider == nil {
		cfg, err := awscreds.Load(ctx, s.creds, s.region)
		if err != nil {
			return fmt.Errorf("aws_sigv4: %w", err)
		}
		if s.region == "" {
			s.region = cfg.Region
		}
		if s.region == "" {
			return errors.New("aws_sigv4: no region: set aws_sigv4.region or AWS_REGION")
		}
		s.provider = aws.NewCredentialsCache(cfg.Credentials)
	}
	creds, err := s.provider.Retrieve(ctx)
	if err != nil {
		return fmt.Errorf("aws_sigv4: retrieving credentials: %w", err)
	}
	s.red.Add(creds.SecretAccessKey, creds.SessionToken)
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	req.Header.Set("X-Amz-Content-Sha256", hash)
	if err := s.signer.SignHTTP(ctx, creds, req, hash, s.service, s.region, time.Now()); err != nil {
		return fmt.Errorf("aws_sigv4: signing: %w", err)
	}
	return nil
}

// clientFromParsed reads the TLS, proxy and authentication fields.
func clientFromParsed(conf *service.ParsedConfig, res *service.Resources) (Client, error) {
	var c Client
	tlsConf, enabled, err := conf.FieldTLSToggled(hpFieldTLS)
	if err != nil {
		return c, err
	}
	if enabled {
		c.TLS = tlsConf
	}
	if c.ProxyURL, err = conf.FieldString(hpFieldProxyURL); err != nil {
		return c, err
	}
	sign, err := conf.HTTPRequestAuthSignerFromParsed()
	if err != nil {
		return c, err
	}
	var fsys fs.FS
	if res != nil {
		fsys = res.FS()
	}
	c.Sign = func(r *http.Request) error { return sign(fsys, r) }
	if c.Secrets, err = signerSecrets(conf); err != nil {
		return c, err
	}
	o := conf.Namespace(hpFieldOAuth2)
	if c.OAuth2.Enabled, err = o.FieldBool(hpFieldOAuth2Enabled); err != nil {
		return c, err
	}
	if c.OAuth2.ClientKey, err = o.FieldString(hpFieldOAuth2Key); err != nil {
		return c, err
	}
	if c.OAuth2.ClientSecret, err = o.FieldString(hpFieldOAuth2Secret); err != nil {
		return c, err
	}
	if c.OAuth2.TokenURL, err = o.FieldString(hpFieldOAuth2TokenURL); err != nil {
		return c, err
	}
	if c.OAuth2.Scopes, err = o.FieldStringList(hpFieldOAuth2Scopes); err != nil {
		return c, err
	}
	if c.OAuth2.EndpointParams, err = o.FieldStringMap(hpFieldOAuth2Params); err != nil {
		return c, err
	}
	a := conf.Namespace(hpFieldSigV4)
	if c.SigV4.Enabled, err = a.FieldBool(hpFieldSigV4Enabled); err != nil {
		return c, err
	}
	if c.SigV4.Service, err = a.FieldString(hpFieldSigV4Service); err != nil {
		return c, err
	}
	if c.SigV4.Region, err = a.FieldString(hpFieldSigV4Region); err != nil {
		return c, err
	}
	if c.SigV4.Credentials, err = awscredsfield.FromParsed(a); err != nil {
		return c, fmt.Errorf("%s: %w", hpFieldSigV4, err)
	}
	return c, nil
}

// signerSecrets are the configured values of Benthos's request signers that
// are secrets: basic_auth's password, oauth's consumer secret, access token
// and its secret (jwt's private key is never sent; its tokens are learnt as
// they are sent).
func signerSecrets(conf *service.ParsedConfig) ([]string, error) {
	var out []string
	for _, path := range [][]string{
		{"basic_auth", "password"},
		{"oauth", "consumer_secret"},
		{"oauth", "access_token"},
		{"oauth", "access_token_secret"},
	} {
		if !conf.Contains(path...) {
			continue
		}
		v, err := conf.FieldString(path...)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}
