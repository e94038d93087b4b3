package awscreds

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// isolate points the SDK's default chain at nothing.
func isolate(t *testing.T) {
	t.Helper()
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_STS"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

func TestLoadStaticCredentials(t *testing.T) {
	isolate(t)
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDFROMENV")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "env-secret")
	cfg, err := Load(t.Context(), Config{ID: "AKIDSTATIC", Secret: "static-secret", Token: "tok"}, "eu-west-1")
	require.NoError(t, err)
	got, err := cfg.Credentials.Retrieve(t.Context())
	require.NoError(t, err)
	assert.Equal(t, "AKIDSTATIC", got.AccessKeyID, "the object's keys, not the environment's")
	assert.Equal(t, "static-secret", got.SecretAccessKey)
	assert.Equal(t, "tok", got.SessionToken)
	assert.Equal(t, "eu-west-1", cfg.Region)

	// Without the object: the default chain (here the environment).
	cfg, err = Load(t.Context(), Config{}, "eu-west-1")
	require.NoError(t, err)
	got, err = cfg.Credentials.Retrieve(t.Context())
	require.NoError(t, err)
	assert.Equal(t, "AKIDFROMENV", got.AccessKeyID)
}

func TestLoadProfileFromATemporaryConfigFile(t *testing.T) {
	isolate(t)
	path := filepath.Join(t.TempDir(), "config")
	require.NoError(t, os.WriteFile(path, []byte("[default]\nregion = us-east-2\naws_access_key_id = AKIDDEFAULT\naws_secret_access_key = d\n\n[profile audit]\nregion = ap-southeast-2\naws_access_key_id = AKIDAUDIT\naws_secret_access_key = audit-secret\n"), 0o600))
	t.Setenv("AWS_CONFIG_FILE", path)
	cfg, err := Load(t.Context(), Config{Profile: "audit"}, "")
	require.NoError(t, err)
	got, err := cfg.Credentials.Retrieve(t.Context())
	require.NoError(t, err)
	assert.Equal(t, "AKIDAUDIT", got.AccessKeyID)
	assert.Equal(t, "audit-secret", got.SecretAccessKey)
	assert.Equal(t, "ap-southeast-2", cfg.Region, "the profile's region")

	cfg, err = Load(t.Context(), Config{Profile: "audit"}, "eu-west-1")
	require.NoError(t, err)
	assert.Equal(t, "eu-west-1", cfg.Region, "an explicit region wins")

	_, err = Load(t.Context(), Config{Profile: "missing"}, "")
	assert.Error(t, err, "a profile that is not in the file is an error, not the default chain")
}

// stsStub answers AssumeRole as STS does, recording the form it got.
type stsStub struct {
	mu    sync.Mutex
	forms []url.Values
}

func (s *stsStub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	form, _ := url.ParseQuery(string(b))
	s.mu.Lock()
	s.forms = append(s.forms, form)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "text/xml")
	fmt.Fprintf(w, `<AssumeRoleResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><AssumeRoleResult><Credentials><AccessKeyId>ASIAASSUMED</AccessKeyId><SecretAccessKey>assumed-secret</SecretAccessKey><SessionToken>assumed-token</SessionToken><Expiration>%s</Expiration></Credentials><AssumedRoleUser><Arn>arn:aws:sts::123456789012:assumed-role/reader/tidemark</Arn><AssumedRoleId>AROA:tidemark</AssumedRoleId></AssumedRoleUser></AssumeRoleResult><ResponseMetadata><RequestId>r</RequestId></ResponseMetadata></AssumeRoleResponse>`,
		time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
}

// role: the role is assumed with the object's other credentials, sending
// its ARN and external id; the assumed credentials are the ones used.
func TestLoadAssumesTheRoleWithItsExternalID(t *testing.T) {
	isolate(t)
	stub := &stsStub{}
	srv := httptest.NewServer(stub)
	defer srv.Close()
	t.Setenv("AWS_ENDPOINT_URL_STS", srv.URL)
	cfg, err := Load(t.Context(), Config{ID: "AKIDBASE", Secret: "base-secret", Role: "arn:aws:iam::123456789012:role/reader", RoleExternalID: "ext-123"}, "eu-west-1")
	require.NoError(t, err)
	got, err := cfg.Credentials.Retrieve(t.Context())
	require.NoError(t, err)
	assert.Equal(t, "ASIAASSUMED", got.AccessKeyID)
	assert.Equal(t, "assumed-token", got.SessionToken)
	stub.mu.Lock()
	defer stub.mu.Unlock()
	require.Len(t, stub.forms, 1)
	f := stub.forms[0]
	assert.Equal(t, "AssumeRole", f.Get("Action"))
	assert.Equal(t, "arn:aws:iam::123456789012:role/reader", f.Get("RoleArn"))
	assert.Equal(t, "ext-123", f.Get("ExternalId"))
	assert.Equal(t, "tidemark", f.Get("RoleSessionName"))
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		c    Config
		want string
	}{
		{Config{}, ""},
		{Config{Profile: "p", Role: "arn:r", RoleExternalID: "x"}, ""},
		{Config{ID: "a", Secret: "s", Token: "t"}, ""},
		{Config{FromEC2Role: true, Role: "arn:r"}, ""},
		{Config{ID: "a"}, "id and secret go together"},
		{Config{Token: "t"}, "token needs id and secret"},
		{Config{ID: "a", Secret: "s", Profile: "p"}, "either profile"},
		{Config{FromEC2Role: true, Profile: "p"}, "from_ec2_role"},
		{Config{RoleExternalID: "x"}, "role_external_id needs role"},
	} {
		err := tc.c.Validate()
		if tc.want == "" {
			assert.NoError(t, err, "%+v", tc.c)
		} else {
			assert.ErrorContains(t, err, tc.want, "%+v", tc.c)
		}
	}
	assert.Equal(t, []string{"s", "t", "x"}, Config{ID: "a", Secret: "s", Token: "t", Role: "r", RoleExternalID: "x"}.Secrets())
}
