package httpprovider

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
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
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/redpanda-data/benthos/v4/public/service"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
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
}

func (c Client) validate() error {
	if c.ProxyURL != "" {
		u, err := url.Parse(c.ProxyURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("proxy_url %q is not an http(s) URL", c.ProxyURL)
		}
	}
	if c.OAuth2.Enabled {
		if c.OAuth2.TokenURL == "" || c.OAuth2.ClientKey == "" {
			return errors.New("oauth2 needs token_url and client_key")
		}
		if _, err := url.Parse(c.OAuth2.TokenURL); err != nil {
			return fmt.Errorf("oauth2.token_url: %v", err)
		}
	}
	if c.SigV4.Enabled && c.SigV4.Service == "" {
		return errors.New("aws_sigv4 needs service (the AWS signing name, e.g. execute-api)")
	}
	return nil
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
	tokens oauth2.TokenSource
	sigv4  *sigv4Signer
}

func newAuthenticator(c Client, base *http.Client) (*authenticator, error) {
	a := &authenticator{sign: c.Sign}
	if c.OAuth2.Enabled {
		cc := clientcredentials.Config{ClientID: c.OAuth2.ClientKey, ClientSecret: c.OAuth2.ClientSecret, TokenURL: c.OAuth2.TokenURL, Scopes: c.OAuth2.Scopes}
		if len(c.OAuth2.EndpointParams) > 0 {
			cc.EndpointParams = url.Values{}
			for k, v := range c.OAuth2.EndpointParams {
				cc.EndpointParams.Set(k, v)
			}
		}
		// Token requests use the provider's own transport (its TLS and
		// proxy), without the provider's authentication.
		ctx := context.WithValue(context.Background(), oauth2.HTTPClient, &http.Client{Transport: base.Transport, Timeout: base.Timeout})
		a.tokens = cc.TokenSource(ctx)
	}
	if c.SigV4.Enabled {
		a.sigv4 = &sigv4Signer{service: c.SigV4.Service, region: c.SigV4.Region, signer: v4.NewSigner()}
	}
	return a, nil
}

// apply authenticates req, whose body is body. Its errors are transient
// (a token endpoint or the credential chain that did not answer).
func (a *authenticator) apply(ctx context.Context, req *http.Request, body []byte) error {
	if a == nil {
		return nil
	}
	if a.sign != nil {
		if err := a.sign(req); err != nil {
			return fmt.Errorf("signing the request: %w", err)
		}
	}
	if a.tokens != nil {
		tok, err := a.tokens.Token()
		if err != nil {
			return fmt.Errorf("oauth2: obtaining a token: %w", err)
		}
		tok.SetAuthHeader(req)
	}
	if a.sigv4 != nil {
		if err := a.sigv4.sign(ctx, req, body); err != nil {
			return err
		}
	}
	return nil
}

// sigv4Signer signs with the SDK's default credential chain, loaded once.
type sigv4Signer struct {
	service string
	signer  *v4.Signer

	mu     sync.Mutex // guards the lazily loaded region and creds
	region string
	creds  aws.CredentialsProvider
}

func (s *sigv4Signer) sign(ctx context.Context, req *http.Request, body []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.creds == nil {
		var opts []func(*awsconfig.LoadOptions) error
		if s.region != "" {
			opts = append(opts, awsconfig.WithRegion(s.region))
		}
		cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
		if err != nil {
			return fmt.Errorf("aws_sigv4: loading the AWS configuration: %w", err)
		}
		if s.region == "" {
			s.region = cfg.Region
		}
		if s.region == "" {
			return errors.New("aws_sigv4: no region: set aws_sigv4.region or AWS_REGION")
		}
		s.creds = aws.NewCredentialsCache(cfg.Credentials)
	}
	creds, err := s.creds.Retrieve(ctx)
	if err != nil {
		return fmt.Errorf("aws_sigv4: retrieving credentials: %w", err)
	}
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
	return c, nil
}
