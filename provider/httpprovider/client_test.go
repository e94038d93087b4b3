package httpprovider

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/provider"
)

const onePage = `{"items":[{"id":"a","position":1}],"next":"n1"}`

func pageConfig(url, extra string) string {
	return fmt.Sprintf(`
http:
  url: '%s/p?cursor=${! @cursor }'
  events: root = this.items
  successor: root = this.next
  contract:
    empty_page: no_evidence
    recovery: park
%s`, url, extra)
}

// pemOf encodes DER certificate bytes.
func pemOf(der []byte) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// indent indents a PEM block for a YAML block scalar.
func indent(s, by string) string {
	return by + strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n"+by)
}

// A server whose certificate only a private CA vouches for is reached with
// that CA in tls.root_cas, and refused without it.
func TestClientTLSPrivateCA(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, onePage) }))
	defer srv.Close()
	ca := pemOf(srv.Certificate().Raw)

	p := parseProvider(t, pageConfig(srv.URL, "  tls:\n    enabled: true\n    root_cas: |\n"+indent(ca, "      ")+"\n"), nil, nil)
	assert.Equal(t, []string{"a"}, ids(fetch(t, p, "p", "")))

	plain := parseProvider(t, pageConfig(srv.URL, "  max_retries: 0\n"), nil, nil)
	_, err := plain.Fetch(context.Background(), provider.Request{Partition: "p"})
	require.Error(t, err, "without the CA the certificate is not trusted")
	assert.Contains(t, err.Error(), "certificate")
}

// Mutual TLS: a server that requires a client certificate signed by its CA
// is reached with tls.client_certs.
func TestClientTLSClientCertificate(t *testing.T) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test client CA"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	caCert, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	clientKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	clientTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "tidemark"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	clientDER, err := x509.CreateCertificate(rand.Reader, clientTmpl, caCert, &clientKey.PublicKey, caKey)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(clientKey)
	require.NoError(t, err)
	keyPEM := string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))

	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	var subject atomic.Value
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		subject.Store(r.TLS.PeerCertificates[0].Subject.CommonName)
		fmt.Fprint(w, onePage)
	}))
	srv.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}
	srv.StartTLS()
	defer srv.Close()
	serverCA := pemOf(srv.Certificate().Raw)

	p := parseProvider(t, pageConfig(srv.URL, "  tls:\n    enabled: true\n    root_cas: |\n"+indent(serverCA, "      ")+
		"\n    client_certs:\n      - cert: |\n"+indent(pemOf(clientDER), "          ")+"\n        key: |\n"+indent(keyPEM, "          ")+"\n"), nil, nil)
	assert.Equal(t, []string{"a"}, ids(fetch(t, p, "p", "")))
	assert.Equal(t, "tidemark", subject.Load())

	noCert := parseProvider(t, pageConfig(srv.URL, "  max_retries: 0\n  tls:\n    enabled: true\n    root_cas: |\n"+indent(serverCA, "      ")+"\n"), nil, nil)
	_, err = noCert.Fetch(context.Background(), provider.Request{Partition: "p"})
	require.Error(t, err, "without the client certificate the server refuses the handshake")
}

// basic_auth (Benthos's request signer) authenticates every request.
func TestClientBasicAuth(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, pw, ok := r.BasicAuth(); !ok || u != "reader" || pw != "s3cret" {
			http.Error(w, "who are you", http.StatusUnauthorized)
			return
		}
		fmt.Fprint(w, onePage)
	}))
	defer srv.Close()
	p := parseProvider(t, pageConfig(srv.URL, "  basic_auth:\n    enabled: true\n    username: reader\n    password: s3cret\n"), nil, nil)
	assert.Equal(t, []string{"a"}, ids(fetch(t, p, "p", "")))
}

// OAuth 2.0 client credentials: one token request, the token cached and
// sent as a bearer token on every page request.
func TestClientOAuth2ClientCredentials(t *testing.T) {
	var tokenRequests atomic.Int64
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tokenRequests.Add(1)
		_ = r.ParseForm()
		id, secret, _ := r.BasicAuth()
		if r.Form.Get("grant_type") != "client_credentials" || id != "cid" || secret != "csecret" || r.Form.Get("scope") != "audit.read" || r.Form.Get("audience") != "api" {
			http.Error(w, fmt.Sprintf("bad token request %v %s", r.Form, id), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"access_token":"tok-1","token_type":"bearer","expires_in":3600}`)
	}))
	defer tokens.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok-1" {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		fmt.Fprint(w, onePage)
	}))
	defer srv.Close()
	p := parseProvider(t, pageConfig(srv.URL, fmt.Sprintf(`  oauth2:
    enabled: true
    client_key: cid
    client_secret: csecret
    token_url: %s/token
    scopes: [ audit.read ]
    endpoint_params: { audience: api }
`, tokens.URL)), nil, nil)
	for range 3 {
		assert.Equal(t, []string{"a"}, ids(fetch(t, p, "p", "")))
	}
	assert.Equal(t, int64(1), tokenRequests.Load(), "the token is cached")
}

// AWS Signature V4 with the SDK's default credential chain (here the
// environment): the request carries a SigV4 Authorization header for the
// configured service and region, and the payload hash.
func TestClientAWSSigV4(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	var auth, date, hash atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth.Store(r.Header.Get("Authorization"))
		date.Store(r.Header.Get("X-Amz-Date"))
		hash.Store(r.Header.Get("X-Amz-Content-Sha256"))
		fmt.Fprint(w, onePage)
	}))
	defer srv.Close()
	p := parseProvider(t, pageConfig(srv.URL, "  aws_sigv4:\n    enabled: true\n    service: execute-api\n    region: eu-west-1\n"), nil, nil)
	assert.Equal(t, []string{"a"}, ids(fetch(t, p, "p", "")))
	a := auth.Load().(string)
	assert.True(t, strings.HasPrefix(a, "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/"), a)
	assert.Contains(t, a, "/eu-west-1/execute-api/aws4_request")
	assert.Contains(t, a, "Signature=")
	assert.NotEmpty(t, date.Load())
	assert.Equal(t, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", hash.Load(), "the hash of the empty body")

	_, err := tryParseProvider(pageConfig(srv.URL, "  aws_sigv4:\n    enabled: true\n"), nil, nil)
	require.Error(t, err, "a service is required")
}

// proxy_url sends the requests through the given proxy.
func TestClientProxyURL(t *testing.T) {
	var seen atomic.Value
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Store(r.URL.String()) // absolute-form request target
		fmt.Fprint(w, onePage)
	}))
	defer proxy.Close()
	// The target is never reached directly: nothing listens there.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	target := "http://" + l.Addr().String()
	require.NoError(t, l.Close())
	p := parseProvider(t, pageConfig(target, "  proxy_url: "+proxy.URL+"\n"), nil, nil)
	assert.Equal(t, []string{"a"}, ids(fetch(t, p, "p", "")))
	assert.Equal(t, target+"/p?cursor=", seen.Load())

	_, err = tryParseProvider(pageConfig(target, "  proxy_url: 'not a url'\n"), nil, nil)
	require.Error(t, err)
}

// A proxy_url or oauth2.token_url refused by the config never quotes its
// user info: url.Parse's own error quotes the whole URL, password included.
func TestRefusedConfiguredURLHidesItsUserInfo(t *testing.T) {
	const pass = "s3cret-pr0xy-pass"
	tests := []struct{ name, extra, want string }{
		{"proxy_url not http(s)", "  proxy_url: 'socks5://user:" + pass + "@127.0.0.1:1080'\n", "is not an http(s) URL"},
		{"proxy_url with a bad port", "  proxy_url: 'http://user:" + pass + "@127.0.0.1:80x'\n", "proxy_url is not a URL"},
		{"proxy_url with a bad escape", "  proxy_url: 'http://user:" + pass + "%zz@127.0.0.1:3128'\n", "proxy_url is not a URL"},
		{"token_url with a bad port", "  oauth2: { enabled: true, client_key: k, client_secret: s, token_url: 'http://user:" + pass + "@127.0.0.1:80x/token' }\n", "oauth2.token_url is not a URL"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tryParseProvider(pageConfig("http://127.0.0.1:9", tc.extra), nil, nil)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), pass)
		})
	}
}

// format: xml reads an S3-style listing: the mappings run against the XML
// converted as Benthos's XML processor does; a single repeated element is
// an object, not an array, which the events mapping normalises.
func TestFetchXMLListing(t *testing.T) {
	pages := map[string]string{
		"": `<?xml version="1.0"?><ListBucketResult><IsTruncated>true</IsTruncated><NextContinuationToken>t2</NextContinuationToken>
<Contents><Key>a.txt</Key><Seq>1</Seq></Contents><Contents><Key>b.txt</Key><Seq>2</Seq></Contents></ListBucketResult>`,
		"t2":  `<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>c.txt</Key><Seq>3</Seq></Contents></ListBucketResult>`,
		"bad": `<ListBucketResult><Contents><Key>d.txt</Key>`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/xml")
		fmt.Fprint(w, pages[r.URL.Query().Get("token")])
	}))
	defer srv.Close()
	p := parseProvider(t, fmt.Sprintf(`
http:
  url: '%s/bucket?list-type=2&token=${! @cursor }'
  format: xml
  events: 'root = this.ListBucketResult.Contents.(c -> if c.type() == "array" { c } else { [c] })'
  event_id: root = this.Key
  event_position: root = this.Seq
  successor: root = this.ListBucketResult.NextContinuationToken | deleted()
  has_more: root = this.ListBucketResult.IsTruncated == "true"
  contract:
    empty_page: no_evidence
    positions: dense
    missing_successor: end_of_traversal
    recovery: park
`, srv.URL), nil, nil)
	first := fetch(t, p, "b", "")
	assert.Equal(t, []string{"a.txt", "b.txt"}, ids(first))
	assert.Equal(t, provider.IntPosition(2), first.Events[1].Position)
	assert.Equal(t, []byte("t2"), first.Successor)
	assert.True(t, first.HasMore)
	last := fetch(t, p, "b", "t2")
	assert.Equal(t, []string{"c.txt"}, ids(last))
	assert.Empty(t, last.Successor)
	assert.False(t, last.HasMore)

	_, err := p.Fetch(context.Background(), provider.Request{Partition: "b", Cursor: []byte("bad")})
	require.ErrorIs(t, err, provider.ErrMalformed)
	assert.Contains(t, err.Error(), "not one XML document")
}

// Discovery through a paginated POST list (a stream API's ListShards): each
// page's names are added in order, the next page's cursor goes into the
// body, and a list that repeats a cursor is malformed rather than looped.
func TestPartitionsPaginatedPOST(t *testing.T) {
	var loop atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var q struct{ NextToken *string }
		if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&q) != nil {
			http.Error(w, "want a POST with a JSON body", http.StatusBadRequest)
			return
		}
		switch {
		case q.NextToken == nil:
			fmt.Fprint(w, `{"Shards":[{"ShardId":"s-0"},{"ShardId":"s-1"}],"NextToken":"t1"}`)
		case *q.NextToken == "t1" && loop.Load():
			fmt.Fprint(w, `{"Shards":[{"ShardId":"s-2"}],"NextToken":"t1"}`)
		case *q.NextToken == "t1":
			fmt.Fprint(w, `{"Shards":[{"ShardId":"s-2"}]}`)
		default:
			http.Error(w, "unknown token", http.StatusBadRequest)
		}
	}))
	defer srv.Close()
	p := parseProvider(t, `
http:
  url: `+srv.URL+`/records
  successor: root = deleted()
  partitions_url: `+srv.URL+`/shards
  partitions_verb: POST
  partitions_body: '${! {"StreamName": "audit", "NextToken": if @cursor == "" { null } else { @cursor }}.format_json(no_indent: true) }'
  partitions_mapping: root = this.Shards.map_each(s -> s.ShardId)
  partitions_successor: root = this.NextToken | deleted()
`, nil, nil)
	got, err := p.Partitions(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []provider.Partition{{Name: "s-0"}, {Name: "s-1"}, {Name: "s-2"}}, got)

	loop.Store(true)
	_, err = p.Partitions(context.Background())
	require.ErrorIs(t, err, provider.ErrMalformed)
	assert.Contains(t, err.Error(), "a second time")
}
