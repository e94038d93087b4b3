// Package awscreds loads the AWS configuration of a component from its
// `credentials` object, whose fields are those of Redpanda Connect's AWS
// components: a shared config profile, static keys (id, secret, token),
// the EC2 instance's role, and a role to assume (with an external id) on
// top of any of them; the SDK's default chain when none is set. The
// DynamoDB store and the http provider's Signature V4 use it. It imports no
// Benthos package (awscredsfield holds the config field).
package awscreds

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/ec2rolecreds"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/sts"
)

// Config is a `credentials` object. The zero value is the SDK's default
// chain (environment, shared config and credentials files, SSO, container
// and instance roles).
type Config struct {
	// Profile names a profile of the shared config and credentials files
	// (AWS_CONFIG_FILE, AWS_SHARED_CREDENTIALS_FILE, or ~/.aws).
	Profile string
	// ID, Secret and Token are static credentials (Token only for
	// temporary ones). ID and Secret go together.
	ID, Secret, Token string
	// FromEC2Role takes the credentials of the EC2 instance's role (the
	// instance metadata service).
	FromEC2Role bool
	// Role is the ARN of a role to assume with the credentials above
	// (STS AssumeRole), with RoleExternalID when the role's trust policy
	// requires one.
	Role, RoleExternalID string
}

// IsZero reports whether c is the default chain.
func (c Config) IsZero() bool { return c == Config{} }

// Validate reports a contradictory object.
func (c Config) Validate() error {
	switch {
	case (c.ID == "") != (c.Secret == ""):
		return errors.New("credentials: id and secret go together")
	case c.Token != "" && c.ID == "":
		return errors.New("credentials: token needs id and secret")
	case c.ID != "" && c.Profile != "":
		return errors.New("credentials: set either profile or id and secret, not both")
	case c.FromEC2Role && (c.ID != "" || c.Profile != ""):
		return errors.New("credentials: from_ec2_role takes the instance's credentials: set no profile, id or secret with it")
	case c.RoleExternalID != "" && c.Role == "":
		return errors.New("credentials: role_external_id needs role")
	}
	return nil
}

// Secrets are the values of c a log line must never show.
func (c Config) Secrets() []string {
	var out []string
	for _, s := range []string{c.Secret, c.Token, c.RoleExternalID} {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// Load returns the AWS configuration for c, in region (empty: the SDK's
// region chain, or the profile's region). opts are applied after c's (an
// HTTP client, a retryer). Credentials are retrieved on first use, not
// here: Load makes no network call.
func Load(ctx context.Context, c Config, region string, opts ...func(*config.LoadOptions) error) (aws.Config, error) {
	if err := c.Validate(); err != nil {
		return aws.Config{}, err
	}
	var lo []func(*config.LoadOptions) error
	if region != "" {
		lo = append(lo, config.WithRegion(region))
	}
	if c.Profile != "" {
		lo = append(lo, config.WithSharedConfigProfile(c.Profile))
	}
	if c.ID != "" {
		lo = append(lo, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(c.ID, c.Secret, c.Token)))
	}
	if c.FromEC2Role {
		lo = append(lo, config.WithCredentialsProvider(ec2rolecreds.New()))
	}
	cfg, err := config.LoadDefaultConfig(ctx, append(lo, opts...)...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("credentials: loading the AWS configuration: %w", err)
	}
	if c.Role != "" {
		client := sts.NewFromConfig(cfg)
		cfg.Credentials = aws.NewCredentialsCache(stscreds.NewAssumeRoleProvider(client, c.Role, func(o *stscreds.AssumeRoleOptions) {
			o.RoleSessionName = "tidemark"
			if c.RoleExternalID != "" {
				o.ExternalID = aws.String(c.RoleExternalID)
			}
		}))
	}
	return cfg, nil
}
