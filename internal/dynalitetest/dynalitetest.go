// Package dynalitetest gives tests a local DynamoDB (dynalite, started by
// scripts/with-dynalite) and a fresh table per test.
//
// Usage:
//
//	func TestSomething(t *testing.T) {
//		tb := dynalitetest.NewTable(t) // skips, or fails in CI, without dynalite
//		s, err := dynamostore.NewDynamoStore(t.Context(), dynamostore.DynamoConfig{
//			Table: tb.Name, Endpoint: tb.Endpoint, Create: true,
//		})
//		...
//	}
//
// Run such tests with `./scripts/with-dynalite go test ./...`. Without
// TIDEMARK_DYNAMODB_ENDPOINT they are skipped, except when CI or
// TIDEMARK_REQUIRE_DYNALITE is set: then they fail, so a CI run whose
// dynalite did not start cannot pass silently. Under -short they are
// skipped (even with an endpoint) unless CI or TIDEMARK_REQUIRE_DYNALITE
// is set.
package dynalitetest

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// EnvEndpoint names the environment variable holding the endpoint of the
// local DynamoDB (set by scripts/with-dynalite).
const EnvEndpoint = "TIDEMARK_DYNAMODB_ENDPOINT"

// Required reports whether a missing dynalite fails the tests instead of
// skipping them (and -short does not skip them): when CI or
// TIDEMARK_REQUIRE_DYNALITE is set.
func Required() bool {
	return os.Getenv("CI") != "" || os.Getenv("TIDEMARK_REQUIRE_DYNALITE") != ""
}

// Endpoint returns the local DynamoDB endpoint. Without one it skips the
// test, or fails it when Required. Under -short it skips the test unless
// Required.
func Endpoint(t testing.TB) string {
	t.Helper()
	if testing.Short() && !Required() {
		t.Skip("-short: this test needs dynalite (set TIDEMARK_REQUIRE_DYNALITE to run it anyway)")
		return ""
	}
	if e := os.Getenv(EnvEndpoint); e != "" {
		return e
	}
	msg := EnvEndpoint + " is not set: run this test with dynalite, e.g. `./scripts/with-dynalite go test ./cache/`"
	if Required() {
		t.Fatal(msg + " (CI / TIDEMARK_REQUIRE_DYNALITE is set, so a missing dynalite is a failure)")
	}
	t.Skip(msg)
	return ""
}

// Table is a table name reserved for one test on the local DynamoDB.
type Table struct {
	Endpoint string
	Name     string
}

var seq atomic.Int64

var unsafeChars = regexp.MustCompile(`[^a-zA-Z0-9_.-]+`)

// NewTable reserves a fresh table name for t (the table is not created:
// pass Create to the store or call dynamostore.EnsureTable) and deletes the
// table when t ends.
func NewTable(t testing.TB) Table {
	t.Helper()
	endpoint := Endpoint(t)
	base := unsafeChars.ReplaceAllString(t.Name(), "_")
	if len(base) > 180 {
		base = base[len(base)-180:]
	}
	tb := Table{Endpoint: endpoint, Name: fmt.Sprintf("tm-%d-%d-%s", os.Getpid(), seq.Add(1), base)}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := Client(ctx, endpoint)
		if err != nil {
			t.Logf("dynalitetest: cannot delete table %s: %v", tb.Name, err)
			return
		}
		// The table may not exist (the test never created it).
		_, _ = c.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(tb.Name)})
	})
	return tb
}

// Client returns a plain DynamoDB client for the local endpoint (static
// dummy credentials when none are in the environment).
func Client(ctx context.Context, endpoint string) (*dynamodb.Client, error) {
	opts := []func(*config.LoadOptions) error{config.WithRegion(regionOr("us-east-1"))}
	if os.Getenv("AWS_ACCESS_KEY_ID") == "" {
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("local", "local", "")))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, err
	}
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(endpoint) }), nil
}

func regionOr(def string) string {
	if r := os.Getenv("AWS_REGION"); r != "" {
		return r
	}
	return def
}
