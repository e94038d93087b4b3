package httpprovider

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/provider"
)

// sigv4Verifier checks AWS Signature Version 4 as a service does: it
// rebuilds the canonical request from what arrived (method, path, query,
// the signed headers, the body), signs it again with the SDK's own signer
// and the shared secret, and compares the signatures. A request that fails
// is answered 403 with the reason, as AWS answers.
type sigv4Verifier struct {
	creds           aws.Credentials
	service, region string

	mu       sync.Mutex
	verified []string // X-Amz-Target of every request whose signature held
}

var sigv4Fields = []string{"Credential=", "SignedHeaders=", "Signature="}

func (v *sigv4Verifier) verify(r *http.Request, body []byte) error {
	auth := r.Header.Get("Authorization")
	rest, ok := strings.CutPrefix(auth, "AWS4-HMAC-SHA256 ")
	if !ok {
		return fmt.Errorf("not a SigV4 Authorization header: %q", auth)
	}
	parts := map[string]string{}
	for _, f := range strings.Split(rest, ", ") {
		for _, name := range sigv4Fields {
			if v, ok := strings.CutPrefix(f, name); ok {
				parts[name] = v
			}
		}
	}
	wantScope := fmt.Sprintf("/%s/%s/aws4_request", v.region, v.service)
	if !strings.HasPrefix(parts["Credential="], v.creds.AccessKeyID+"/") || !strings.HasSuffix(parts["Credential="], wantScope) {
		return fmt.Errorf("credential %q, want %s/<date>%s", parts["Credential="], v.creds.AccessKeyID, wantScope)
	}
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	if got := r.Header.Get("X-Amz-Content-Sha256"); got != hash {
		return fmt.Errorf("payload hash header %q, the body hashes to %s", got, hash)
	}
	signed := strings.Split(parts["SignedHeaders="], ";")
	for _, h := range []string{"host", "x-amz-date", "x-amz-target", "content-type"} {
		if !slices.Contains(signed, h) {
			return fmt.Errorf("header %s is not signed (signed: %v)", h, signed)
		}
	}
	at, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return fmt.Errorf("X-Amz-Date: %v", err)
	}
	again, err := http.NewRequest(r.Method, "http://"+r.Host+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return err
	}
	for _, h := range signed {
		if h != "host" {
			again.Header[http.CanonicalHeaderKey(h)] = r.Header.Values(h)
		}
	}
	if err := v4.NewSigner().SignHTTP(context.Background(), v.creds, again, hash, v.service, v.region, at); err != nil {
		return err
	}
	want := again.Header.Get("Authorization")
	if want != auth {
		return fmt.Errorf("signature does not match:\n got %s\nwant %s", auth, want)
	}
	v.mu.Lock()
	v.verified = append(v.verified, r.Header.Get("X-Amz-Target"))
	v.mu.Unlock()
	return nil
}

// The bootstrap request and the page requests are each signed with AWS
// Signature V4 over their own headers and body: a service that verifies
// the signature (the SDK's signer, the shared secret) accepts every one,
// the first page and a later one included, and refuses a request signed
// with another secret.
func TestSigV4SignsTheBootstrapAndThePageRequests(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "the-shared-secret")
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	v := &sigv4Verifier{creds: aws.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "the-shared-secret"}, service: "kinesis", region: "eu-west-1"}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := v.verify(r, body); err != nil {
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprintf(w, `{"__type":"InvalidSignatureException","message":%q}`, err.Error())
			return
		}
		switch r.Header.Get("X-Amz-Target") {
		case "Kinesis_20131202.GetShardIterator":
			fmt.Fprint(w, `{"ShardIterator":"AAAA-iterator-0"}`)
		case "Kinesis_20131202.GetRecords":
			next := "AAAA-iterator-1"
			if strings.Contains(string(body), "iterator-1") {
				next = "AAAA-iterator-2"
			}
			fmt.Fprintf(w, `{"Records":[{"SequenceNumber":"4959033827149025660855969253836157109592157598913658889%s","Data":"eA=="}],"NextShardIterator":%q}`, next[len(next)-1:], next)
		default:
			http.Error(w, "unknown target", http.StatusBadRequest)
		}
	}))
	defer srv.Close()
	cfg := func() string {
		return fmt.Sprintf(`
http:
  url: '%[1]s/'
  verb: POST
  headers:
    Content-Type: application/x-amz-json-1.1
    X-Amz-Target: Kinesis_20131202.GetRecords
  body: '${! {"ShardIterator": @cursor, "Limit": 10}.format_json(no_indent: true) }'
  aws_sigv4:
    enabled: true
    service: kinesis
    region: eu-west-1
  bootstrap:
    url: '%[1]s/'
    verb: POST
    headers:
      Content-Type: application/x-amz-json-1.1
      X-Amz-Target: Kinesis_20131202.GetShardIterator
    body: '${! {"StreamName": "audit", "ShardId": @partition, "ShardIteratorType": "TRIM_HORIZON"}.format_json(no_indent: true) }'
    cursor: root = this.ShardIterator
  events: root = this.Records
  event_id: root = this.SequenceNumber
  event_position: root = this.SequenceNumber
  successor: root = this.NextShardIterator
  max_retries: 0
  contract:
    tokens_may_rotate: true
    position_type: decimal
    recovery: restart_from_boundary
`, srv.URL)
	}
	p := parseProvider(t, cfg(), nil, nil)
	page1 := fetch(t, p, "shardId-000000000000", "")
	page2 := fetch(t, p, "shardId-000000000000", string(page1.Successor))
	require.Len(t, page2.Events, 1)
	v.mu.Lock()
	assert.Equal(t, []string{"Kinesis_20131202.GetShardIterator", "Kinesis_20131202.GetRecords", "Kinesis_20131202.GetRecords"}, v.verified)
	v.mu.Unlock()

	// The verifier is not a rubber stamp: another secret is refused, the
	// bootstrap first.
	t.Setenv("AWS_SECRET_ACCESS_KEY", "another-secret")
	other := parseProvider(t, cfg(), nil, nil)
	_, err := other.Fetch(context.Background(), provider.Request{Scope: "test", Partition: "shardId-000000000000"})
	var se *StatusError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, http.StatusForbidden, se.Status)
	assert.Contains(t, se.Body, "signature does not match")
}
