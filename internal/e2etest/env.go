package e2etest

import (
	"os"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/servertest"
)

// dummyAWS are the credentials and region a child uses for the local
// DynamoDB when the environment has none (scripts/with-dynalite sets them).
var dummyAWS = []string{"AWS_ACCESS_KEY_ID=local", "AWS_SECRET_ACCESS_KEY=local", "AWS_REGION=us-east-1"}

// Env is the environment of a child process: the test's own, the dummy AWS
// credentials and region where unset, then extra (later entries win).
func Env(extra ...string) []string {
	env := os.Environ()
	for _, kv := range dummyAWS {
		if k, _, _ := strings.Cut(kv, "="); os.Getenv(k) == "" {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// SetDummyAWS sets the dummy AWS credentials and region in the test
// process's own environment where unset, for tests whose in-process
// clients and children both talk to the local DynamoDB. Call it from
// TestMain.
func SetDummyAWS() {
	for _, kv := range dummyAWS {
		k, v, _ := strings.Cut(kv, "=")
		if os.Getenv(k) == "" {
			_ = os.Setenv(k, v)
		}
	}
}

// FreePort returns a TCP port that was free on 127.0.0.1 a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	return servertest.FreePorts(t, 1)[0]
}
