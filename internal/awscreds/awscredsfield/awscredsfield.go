// Package awscredsfield is the Benthos config field of an AWS
// `credentials` object (awscreds.Config), with Redpanda Connect's field
// names.
package awscredsfield

import (
	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/tidemark/tidemark/internal/awscreds"
)

// Name is the field's name.
const Name = "credentials"

const (
	fProfile     = "profile"
	fID          = "id"
	fSecret      = "secret"
	fToken       = "token"
	fFromEC2Role = "from_ec2_role"
	fRole        = "role"
	fExternalID  = "role_external_id"
)

// Field is the `credentials` object: every member empty by default (unset);
// none set is the SDK's default chain.
func Field() *service.ConfigField {
	return service.NewObjectField(Name,
		service.NewStringField(fProfile).Description("A profile of the shared config and credentials files (`AWS_CONFIG_FILE`, `AWS_SHARED_CREDENTIALS_FILE`, or `~/.aws`).").Default("").Example("analytics"),
		service.NewStringField(fID).Description("The ID of static credentials (with `secret`).").Default("").Example("AKIAIOSFODNN7EXAMPLE"),
		service.NewStringField(fSecret).Description("The secret of static credentials.").Default("").Secret().Example("${AWS_SECRET}"),
		service.NewStringField(fToken).Description("The session token of temporary static credentials.").Default("").Secret().Example("${AWS_SESSION_TOKEN}"),
		service.NewBoolField(fFromEC2Role).Description("Use the credentials of the EC2 instance's role (instance metadata).").Default(false).Example(true),
		service.NewStringField(fRole).Description("The ARN of a role to assume (STS AssumeRole) with the credentials above.").Default("").Example("arn:aws:iam::123456789012:role/tidemark-reader"),
		service.NewStringField(fExternalID).Description("The external id the role's trust policy requires, when it requires one.").Default("").Secret().Example("${ROLE_EXTERNAL_ID}"),
	).Description("AWS credentials, with the field names of Redpanda Connect's AWS components (an empty field is unset). None set: the SDK's default chain (environment, shared config and credentials files, SSO, container and instance roles).").
		Advanced().
		Example(map[string]any{fProfile: "analytics"}).
		Example(map[string]any{fRole: "arn:aws:iam::123456789012:role/tidemark-reader", fExternalID: "${ROLE_EXTERNAL_ID}"})
}

// FromParsed reads the field from conf (a namespace holding it): the zero
// Config when absent.
func FromParsed(conf *service.ParsedConfig) (awscreds.Config, error) {
	var c awscreds.Config
	if !conf.Contains(Name) {
		return c, nil
	}
	n := conf.Namespace(Name)
	for f, dst := range map[string]*string{fProfile: &c.Profile, fID: &c.ID, fSecret: &c.Secret, fToken: &c.Token, fRole: &c.Role, fExternalID: &c.RoleExternalID} {
		if !n.Contains(f) {
			continue
		}
		v, err := n.FieldString(f)
		if err != nil {
			return c, err
		}
		*dst = v
	}
	if n.Contains(fFromEC2Role) {
		v, err := n.FieldBool(fFromEC2Role)
		if err != nil {
			return c, err
		}
		c.FromEC2Role = v
	}
	return c, c.Validate()
}
