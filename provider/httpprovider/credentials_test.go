package httpprovider

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/provider"
)

// isolateAWS points the SDK's default chain at nothing: no environment
// keys, no shared files, no instance metadata.
func isolateAWS(t *testing.T) {
	t.Helper()
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

// A page request signed with the credentials object's credentials is
// accepted by a verifier that holds the same secret: static id, secret
// and session token; a profile of a shared credentials file (a temporary
// file); a profile whose region is the signing region. The secret and the
// token never appear in the provider's errors.
func TestSigV4SignsWithTheCredentialsObject(t *testing.T) {
	for _, tc := range []struct {
		name  string
		creds string // the credentials object
		files map[string]string
		want  aws.Credentials
		// region of the aws_sigv4 block ("" : the profile's)
		region string
	}{
		{
			name:   "static",
			creds:  "id: AKIDSTATIC\n      secret: static-secret\n      token: static-session-token",
			want:   aws.Credentials{AccessKeyID: "AKIDSTATIC", SecretAccessKey: "static-secret", SessionToken: "static-session-token"},
			region: "eu-west-1",
		},
		{
			name:  "profile from a shared credentials file",
			creds: "profile: analytics",
			files: map[string]string{
				"AWS_SHARED_CREDENTIALS_FILE": "[default]\naws_access_key_id = AKIDDEFAULT\naws_secret_access_key = default-secret\n\n[analytics]\naws_access_key_id = AKIDPROFILE\naws_secret_access_key = profile-secret\n",
			},
			want:   aws.Credentials{AccessKeyID: "AKIDPROFILE", SecretAccessKey: "profile-secret"},
			region: "eu-west-1",
		},
		{
			name:  "profile from a shared config file, with its region",
			creds: "profile: audit",
			files: map[string]string{
				"AWS_CONFIG_FILE": "[profile audit]\nregion = ap-southeast-2\naws_access_key_id = AKIDCONFIG\naws_secret_access_key = config-secret\n",
			},
			want: aws.Credentials{AccessKeyID: "AKIDCONFIG", SecretAccessKey: "config-secret"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			isolateAWS(t)
			for env, content := range tc.files {
				path := filepath.Join(t.TempDir(), "aws-"+env)
				require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
				t.Setenv(env, path)
			}
			region := tc.region
			if region == "" {
				region = "ap-southeast-2"
			}
			v := &sigv4Verifier{creds: tc.want, service: "kinesis", region: region}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				if err := v.verify(r, body); err != nil {
					w.WriteHeader(http.StatusForbidden)
					fmt.Fprintf(w, `{"message":%q}`, err.Error())
					return
				}
				if tok := tc.want.SessionToken; tok != "" && r.Header.Get("X-Amz-Security-Token") != tok {
					w.WriteHeader(http.StatusForbidden)
					fmt.Fprint(w, `{"message":"missing session token"}`)
					return
				}
				fmt.Fprint(w, `{"Records":[{"SequenceNumber":"1","Data":"eA=="}],"NextShardIterator":"it-1"}`)
			}))
			defer srv.Close()
			regionLine := ""
			if tc.region != "" {
				regionLine = "\n    region: " + tc.region
			}
			p := parseProvider(t, fmt.Sprintf(`
http:
  url: '%s/'
  verb: POST
  headers:
    Content-Type: application/x-amz-json-1.1
    X-Amz-Target: Kinesis_20131202.GetRecords
  body: '${! {"ShardIterator": @cursor}.format_json(no_indent: true) }'
  aws_sigv4:
    enabled: true
    service: kinesis%s
    credentials:
      %s
  events: root = this.Records
  event_id: root = this.SequenceNumber
  event_position: root = this.SequenceNumber.number()
  successor: root = this.NextShardIterator
  max_retries: 0
`, srv.URL, regionLine, tc.creds), nil, nil)
			page := fetch(t, p, "shardId-000000000000", "it-0")
			require.Len(t, page.Events, 1)
			v.mu.Lock()
			assert.Len(t, v.verified, 1, "the request was signed with the object's credentials")
			v.mu.Unlock()
		})
	}

	// The verifier refuses another secret: a profile with the wrong one.
	t.Run("another secret is refused", func(t *testing.T) {
		isolateAWS(t)
		path := filepath.Join(t.TempDir(), "credentials")
		require.NoError(t, os.WriteFile(path, []byte("[analytics]\naws_access_key_id = AKIDPROFILE\naws_secret_access_key = wrong-secret\n"), 0o600))
		t.Setenv("AWS_SHARED_CREDENTIALS_FILE", path)
		v := &sigv4Verifier{creds: aws.Credentials{AccessKeyID: "AKIDPROFILE", SecretAccessKey: "profile-secret"}, service: "kinesis", region: "eu-west-1"}
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			if err := v.verify(r, body); err != nil {
				http.Error(w, "refused", http.StatusForbidden)
				return
			}
			fmt.Fprint(w, `{"Records":[]}`)
		}))
		defer srv.Close()
		p := parseProvider(t, "http:\n  url: '"+srv.URL+"/'\n  aws_sigv4:\n    enabled: true\n    service: kinesis\n    region: eu-west-1\n    credentials:\n      profile: analytics\n  events: root = this.Records\n  event_id: root = this.SequenceNumber\n  event_position: root = this.SequenceNumber.number()\n  successor: root = deleted()\n  max_retries: 0\n", nil, nil)
		_, err := p.Fetch(t.Context(), provider.Request{Scope: "test", Partition: "shardId-000000000000"})
		var se *StatusError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, http.StatusForbidden, se.Status)
	})
}

// A contradictory credentials object is refused when the config is read.
func TestCredentialsObjectContradictionsRefused(t *testing.T) {
	for creds, want := range map[string]string{
		"id: AKID":  "id and secret go together",
		"secret: s": "id and secret go together",
		"profile: p\n      id: a\n      secret: s": "either profile or id and secret",
		"role_external_id: x":                      "role_external_id needs role",
		"from_ec2_role: true\n      profile: p":    "from_ec2_role",
	} {
		_, err := tryParseProvider("http:\n  url: 'http://127.0.0.1:1/'\n  aws_sigv4:\n    enabled: true\n    service: kinesis\n    credentials:\n      "+creds+"\n  events: root = this\n  event_id: root = this.id\n  event_position: root = this.id\n  successor: root = deleted()\n", nil, nil)
		assert.ErrorContains(t, err, want, creds)
	}
}
