package httpprovider

import (
	"github.com/redpanda-data/benthos/v4/public/service"
)

// Field names of the request sequence of a traversal.
const (
	hpFieldBootstrap       = "bootstrap"
	hpFieldBootstrapCursor = "cursor"
	hpFieldPin             = "pin"
	hpFieldValidate        = "validate"
	hpFieldValidateValid   = "valid"
)

// callFields are the request fields of a bootstrap or validation request;
// meta says what their interpolations see.
func callFields(what, meta string, urlExample, bodyExample string, headersExample map[string]any) []*service.ConfigField {
	return []*service.ConfigField{
		service.NewInterpolatedStringField(hpFieldURL).
			Description("URL of the " + what + ". Interpolated with metadata " + meta + ".").
			Example(urlExample),
		service.NewStringField(hpFieldVerb).
			Description("HTTP method of the " + what + ".").
			Default(defaultVerb).
			Example("POST"),
		service.NewInterpolatedStringMapField(hpFieldHeaders).
			Description("Headers of the " + what + ", interpolated like its `url`. Only these are sent (the page request's `headers` are not); the authentication (`oauth2`, `aws_sigv4`, `basic_auth`, ...) signs it as it signs the page request. Header values never appear in logs or errors.").
			Default(map[string]any{}).
			Example(headersExample),
		service.NewInterpolatedStringField(hpFieldBody).
			Description("Body of the " + what + ", interpolated like its `url`. No body is sent when it is not set.").
			Optional().
			Example(bodyExample),
	}
}

const (
	bootstrapMeta = "`partition`, `reason` (`start`: the traversal starts at the empty cursor; `resume`: a restart after unprovable divergence or a refused promotion; `expired`: a restart after an expired cursor or one the `validate` request declared invalid), `applied` (the durable applied position the traversal resumes after: the greatest position of an event with a durable outcome; empty at `start` and when nothing was applied), `applied_id` (the id of the event at `applied`, as `event_id` mapped it; empty when unknown), `watermark` (the durable complete-through watermark, empty when none), `scope`, `attempt` and `cursor` (empty)"
	validateMeta  = "`partition`, `cursor` (the source's token of the stored cursor), the values `pin` pinned for its traversal (each under its own name), `watermark`, `scope` and `attempt`"
)

// sequenceFields are the fields of the request sequence of a traversal:
// bootstrap, pin and validate.
func sequenceFields() []*service.ConfigField {
	return []*service.ConfigField{
		service.NewObjectField(hpFieldBootstrap, append(callFields("bootstrap request", bootstrapMeta,
			`${KINESIS_ENDPOINT:https://kinesis.eu-west-1.amazonaws.com}/`,
			`${! {"StreamName": "audit", "ShardId": @partition, "ShardIteratorType": if @applied == "" { "TRIM_HORIZON" } else { "AFTER_SEQUENCE_NUMBER" }, "StartingSequenceNumber": if @applied == "" { deleted() } else { @applied }}.format_json(no_indent: true) }`,
			map[string]any{"Content-Type": "application/x-amz-json-1.1", "X-Amz-Target": "Kinesis_20131202.GetShardIterator"}),
			service.NewBloblangField(hpFieldBootstrapCursor).
				Description("Mapping from the bootstrap's answer (a 2xx body, parsed as `format` says, with the response headers and `@status` as metadata besides the bootstrap's own) to the cursor the first page is fetched with: a non-empty string, seen by the page request as metadata `cursor`. Anything else is a malformed response. A non-2xx answer is classified as a page's is (`expired_status_codes`, `expired_body_contains`, retries).").
				Example(`root = this.ShardIterator`),
		)...).
			Description("An optional request that opens a traversal and yields its first cursor, for sources whose first page needs a handle from another call (Kinesis GetShardIterator before GetRecords, opening an Elasticsearch point in time). It runs before the page request when a traversal starts (the empty cursor), and when a partition restarts (`recovery: restart_from_boundary` or `fresh_snapshot`) and `restart_cursor` gives the empty string: after an expired cursor (reason `expired`) or after unprovable divergence or a refused promotion (reason `resume`), with the durable applied position the traversal resumes after. A restart records the bootstrap it needs in the checkpoint's cursor, so a crash before the bootstrap ran loses nothing; every fetch of that cursor, retries included, runs the bootstrap again (declare `tokens_may_rotate` when its answer differs per call, as shard iterators do). With a bootstrap (or `pin`) the provider's cursors are envelopes of the source's token and the pinned values; a cursor that is not one (a `start_cursor`, an operator's `restart --cursor`) is read as the source's token itself.").
			Optional().
			Advanced().
			Example(map[string]any{
				hpFieldURL:             "${KINESIS_ENDPOINT}/",
				hpFieldVerb:            "POST",
				hpFieldHeaders:         map[string]any{"Content-Type": "application/x-amz-json-1.1", "X-Amz-Target": "Kinesis_20131202.GetShardIterator"},
				hpFieldBody:            `${! {"StreamName": "audit", "ShardId": @partition, "ShardIteratorType": if @applied == "" { "TRIM_HORIZON" } else { "AFTER_SEQUENCE_NUMBER" }, "StartingSequenceNumber": if @applied == "" { deleted() } else { @applied }}.format_json(no_indent: true) }`,
				hpFieldBootstrapCursor: `root = this.ShardIterator`,
			}),
		service.NewBloblangField(hpFieldPin).
			Description("Optional mapping from the first answer of a traversal to an object of values pinned for the whole traversal (a snapshot revision, a point-in-time id, an incarnation to validate against): the bootstrap's answer when a bootstrap ran, otherwise the traversal's first page, and so on until it gives an object (`deleted()` or null: no values yet). The values (strings, numbers or booleans, kept as strings) are request metadata of every later page of the traversal, each under its own name (`@pinned_revision`), and of the page that pinned them before any of its other mappings run. They travel in the cursor the provider writes (an envelope of the source's token and the values), so the successor a promotion writes to the checkpoint carries them and a restarted process reads on at the same snapshot. A traversal from a restart cursor (`recovery: fresh_snapshot` or `restart_from_boundary`) carries no values: it pins anew. The provider's own metadata names (`partition`, `cursor`, `watermark`, `applied`, `applied_id`, `scope`, `attempt`, `status`, `reason`) cannot be pinned (a malformed response).").
			Optional().
			Advanced().
			Example(`root = {"pinned_revision": this.header.revision, "cluster_id": this.header.cluster_id}`).
			Example(`root = {"pit": this.id}`),
		service.NewObjectField(hpFieldValidate, append(callFields("validation request", validateMeta,
			`${ETCD_URL:http://127.0.0.1:2379}/v3/maintenance/status`,
			`{}`,
			map[string]any{"Content-Type": "application/json"}),
			service.NewBloblangField(hpFieldValidateValid).
				Description("Mapping from the validation's answer (a 2xx body with the response headers, `@status` and the request metadata) to a boolean: `false` declares the stored cursor invalid. Anything else is a malformed response (the partition parks).").
				Example(`root = this.header.cluster_id == @cluster_id.or(this.header.cluster_id)`),
		)...).
			Description("An optional request that checks a stored cursor before the first fetch from it after start-up (a checkpoint written by an earlier run, or by another instance before a lease hand-off), for sources whose cursors outlive an incarnation: a stream, bucket or cluster deleted and created again under the same name, whose old cursor would read the new incarnation as if it were the old one. Compare what the answer says with a value `pin` recorded when the traversal began. An invalid cursor is handled exactly as an expired one: `recovery: park` parks the partition (an unparked partition is validated again), a restart recovery moves it to its restart cursor (with a `bootstrap`: reason `expired`). A cursor the traversal started from (the empty cursor, a bootstrap, a restart cursor) and the successors of this process's own pages are not validated; a failing validation request is retried like a page request.").
			Optional().
			Advanced().
			Example(map[string]any{
				hpFieldURL:           "${ETCD_URL}/v3/maintenance/status",
				hpFieldVerb:          "POST",
				hpFieldBody:          "{}",
				hpFieldValidateValid: `root = this.header.cluster_id == @cluster_id.or(this.header.cluster_id)`,
			}),
	}
}

// callFromParsed reads a bootstrap or validation request object.
func callFromParsed(conf *service.ParsedConfig) (Call, error) {
	var c Call
	var err error
	if c.URL, err = conf.FieldInterpolatedString(hpFieldURL); err != nil {
		return c, err
	}
	if c.Verb, err = conf.FieldString(hpFieldVerb); err != nil {
		return c, err
	}
	if c.Headers, err = conf.FieldInterpolatedStringMap(hpFieldHeaders); err != nil {
		return c, err
	}
	if conf.Contains(hpFieldBody) {
		if c.Body, err = conf.FieldInterpolatedString(hpFieldBody); err != nil {
			return c, err
		}
	}
	return c, nil
}

// sequenceFromParsed reads bootstrap, pin and validate into c.
func sequenceFromParsed(conf *service.ParsedConfig, c *Config) error {
	if conf.Contains(hpFieldBootstrap) {
		bc := conf.Namespace(hpFieldBootstrap)
		call, err := callFromParsed(bc)
		if err != nil {
			return err
		}
		b := &Bootstrap{Call: call}
		if b.Cursor, err = bc.FieldBloblang(hpFieldBootstrapCursor); err != nil {
			return err
		}
		c.Bootstrap = b
	}
	if conf.Contains(hpFieldPin) {
		var err error
		if c.Pin, err = conf.FieldBloblang(hpFieldPin); err != nil {
			return err
		}
	}
	if conf.Contains(hpFieldValidate) {
		vc := conf.Namespace(hpFieldValidate)
		call, err := callFromParsed(vc)
		if err != nil {
			return err
		}
		v := &Validation{Call: call}
		if v.Valid, err = vc.FieldBloblang(hpFieldValidateValid); err != nil {
			return err
		}
		c.Validate = v
	}
	return nil
}
