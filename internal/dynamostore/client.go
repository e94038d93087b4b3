package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tidemark/tidemark/internal/awscreds"
)

// DynamoConfig configures the DynamoDB client shared by DynamoStore and the
// tidemark_dynamodb cache component.
type DynamoConfig struct {
	// Table is the table name. Required. One table holds checkpoints,
	// witnesses, membership and frontier records, and (under their own sort
	// key) cache items; see the package documentation for the key design.
	Table string
	// Region is the AWS region. Default: the SDK's default chain
	// (AWS_REGION, the shared config profile); when that names none and
	// Endpoint is set, "us-east-1" (local servers ignore it).
	Region string
	// Endpoint overrides the service endpoint, e.g. http://127.0.0.1:8000
	// for DynamoDB Local or dynalite. Default: AWS's endpoint for Region.
	Endpoint string
	// Credentials: a profile, static keys, the instance's role, a role to
	// assume (awscreds). Zero: the SDK's default chain.
	Credentials awscreds.Config
	// Create makes NewDynamoStore (and the cache component) create the
	// table when it does not exist, with on-demand (PAY_PER_REQUEST)
	// billing, and wait until it is ACTIVE. Default false: the table must
	// exist.
	Create bool
	// MaxRetries is how many times a request is retried after throttling
	// (ProvisionedThroughputExceeded, ThrottlingException,
	// RequestLimitExceeded), a 5xx answer or a transport error, with
	// exponential back-off and full jitter. A failed condition is never
	// retried. Default (0): 7, i.e. 8 attempts. Negative: no retries.
	MaxRetries int
	// MaxBackoff caps one back-off delay. Default (0): 2s.
	MaxBackoff time.Duration
	// CallTimeout is the deadline of one call: all its attempts and
	// back-offs together. A call without an answer by then fails with
	// *CallTimeoutError (an unknown outcome for a write), so a hung store
	// is reported and retried by the caller instead of stalling it.
	// Default (0): DefaultCallTimeout. Negative: no deadline.
	CallTimeout time.Duration
	// WitnessTTL, when positive, writes on every witness an expiry
	// attribute `exp` (epoch seconds: the write time plus WitnessTTL) for
	// DynamoDB's time to live, and EnsureTable enables TTL on `exp` (best
	// effort: local servers without TTL keep the items). Default 0: no
	// expiry attribute.
	WitnessTTL time.Duration
	// ClientOptions are applied last to the client's options (tests and
	// benchmarks use them for a RequestCounter or a fault-injecting HTTP
	// client). Default none.
	ClientOptions []func(*dynamodb.Options)
}

// Defaults of DynamoConfig.
const (
	// DefaultTable is the default table name: the store and the cache can
	// share one table (their items never collide).
	DefaultTable      = "tidemark"
	DefaultMaxRetries = 7
	DefaultMaxBackoff = 2 * time.Second
)

// Validate reports a config no client can be built from.
func (c DynamoConfig) Validate() error {
	if c.Table == "" {
		return errors.New("dynamostore: DynamoDB table name is required")
	}
	if n := len(c.Table); n < 3 || n > 255 {
		return fmt.Errorf("dynamostore: DynamoDB table name %q must be 3 to 255 characters", c.Table)
	}
	return nil
}

// NewDynamoClient builds the DynamoDB client cfg describes, with its
// credentials (the SDK's default chain when none are set) and the SDK's HTTP client (which honours AWS_CA_BUNDLE),
// and the bounded retry policy of MaxRetries and MaxBackoff.
func NewDynamoClient(ctx context.Context, cfg DynamoConfig) (*dynamodb.Client, error) {
	awsCfg, err := awscreds.Load(ctx, cfg.Credentials, cfg.Region)
	if err != nil {
		return nil, fmt.Errorf("dynamostore: %w", err)
	}
	if awsCfg.Region == "" {
		if cfg.Endpoint == "" {
			return nil, errors.New("dynamostore: no AWS region: set region (or AWS_REGION)")
		}
		awsCfg.Region = "us-east-1"
	}
	attempts := cfg.MaxRetries + 1
	switch {
	case cfg.MaxRetries == 0:
		attempts = DefaultMaxRetries + 1
	case cfg.MaxRetries < 0:
		attempts = 1
	}
	maxBackoff := cfg.MaxBackoff
	if maxBackoff <= 0 {
		maxBackoff = DefaultMaxBackoff
	}
	base := func(o *dynamodb.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
			so.MaxAttempts = attempts
			so.MaxBackoff = maxBackoff
			// Retries are bounded by MaxAttempts; the SDK's client-wide retry
			// quota would otherwise turn sustained throttling into immediate
			// failures.
			so.RateLimiter = ratelimit.None
		})
	}
	callTimeout := cfg.CallTimeout
	if callTimeout == 0 {
		callTimeout = DefaultCallTimeout
	}
	if callTimeout > 0 {
		inner := base
		base = func(o *dynamodb.Options) {
			inner(o)
			o.APIOptions = append(o.APIOptions, withCallTimeout(callTimeout))
		}
	}
	return dynamodb.NewFromConfig(awsCfg, append([]func(*dynamodb.Options){base}, cfg.ClientOptions...)...), nil
}

// EnsureTable creates table with the key schema tidemark uses (string
// partition key pk, string sort key sk) and on-demand billing when it does
// not exist, and waits until it is ACTIVE. An existing table with another
// key schema is an error.
func EnsureTable(ctx context.Context, client *dynamodb.Client, table string) error {
	out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	var notFound *types.ResourceNotFoundException
	switch {
	case errors.As(err, &notFound):
		_, err = client.CreateTable(ctx, &dynamodb.CreateTableInput{
			TableName: aws.String(table),
			AttributeDefinitions: []types.AttributeDefinition{
				{AttributeName: aws.String(attrPK), AttributeType: types.ScalarAttributeTypeS},
				{AttributeName: aws.String(attrSK), AttributeType: types.ScalarAttributeTypeS},
			},
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(attrPK), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String(attrSK), KeyType: types.KeyTypeRange},
			},
			BillingMode: types.BillingModePayPerRequest,
		})
		var inUse *types.ResourceInUseException
		if err != nil && !errors.As(err, &inUse) {
			return fmt.Errorf("dynamostore: creating table %s: %w", table, err)
		}
	case err != nil:
		return fmt.Errorf("dynamostore: describing table %s: %w", table, err)
	default:
		if err := checkKeySchema(table, out.Table); err != nil {
			return err
		}
		if out.Table.TableStatus == types.TableStatusActive {
			return nil
		}
	}
	w := dynamodb.NewTableExistsWaiter(client, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay = 100 * time.Millisecond
		o.MaxDelay = 2 * time.Second
	})
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}, 5*time.Minute); err != nil {
		return fmt.Errorf("dynamostore: waiting for table %s to become ACTIVE: %w", table, err)
	}
	return nil
}

// EnableWitnessTTL turns on DynamoDB's time to live on the witnesses'
// expiry attribute `exp`. It returns the error of UpdateTimeToLive, nil
// when TTL is on (or was already).
func EnableWitnessTTL(ctx context.Context, client *dynamodb.Client, table string) error {
	_, err := client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName: aws.String(table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{
			AttributeName: aws.String(attrExpires),
			Enabled:       aws.Bool(true),
		},
	})
	if err != nil && strings.Contains(err.Error(), "already enabled") {
		return nil
	}
	return err
}

func checkKeySchema(table string, d *types.TableDescription) error {
	want := map[string]types.KeyType{attrPK: types.KeyTypeHash, attrSK: types.KeyTypeRange}
	ok := d != nil && len(d.KeySchema) == len(want)
	if ok {
		for _, k := range d.KeySchema {
			if k.AttributeName == nil || want[*k.AttributeName] != k.KeyType {
				ok = false
			}
		}
	}
	if !ok {
		return fmt.Errorf("dynamostore: table %s exists with another key schema: tidemark needs a string partition key %q and a string sort key %q", table, attrPK, attrSK)
	}
	return nil
}
