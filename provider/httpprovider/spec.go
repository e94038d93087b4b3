package httpprovider

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/redpanda-data/benthos/v4/public/bloblang"
	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/tidemark/tidemark/internal/awscreds/awscredsfield"
	"github.com/tidemark/tidemark/internal/coord"
	// tidemark_parse_link_header, for the mappings of a source that pages
	// through Link headers.
	_ "github.com/tidemark/tidemark/internal/linkheader"
	"github.com/tidemark/tidemark/internal/sdkcoord"
	"github.com/tidemark/tidemark/provider"
)

// Field names of the http provider object.
const (
	hpFieldURL              = "url"
	hpFieldVerb             = "verb"
	hpFieldHeaders          = "headers"
	hpFieldBody             = "body"
	hpFieldTimeout          = "timeout"
	hpFieldTLS              = "tls"
	hpFieldProxyURL         = "proxy_url"
	hpFieldOAuth2           = "oauth2"
	hpFieldOAuth2Enabled    = "enabled"
	hpFieldOAuth2Key        = "client_key"
	hpFieldOAuth2Secret     = "client_secret"
	hpFieldOAuth2TokenURL   = "token_url"
	hpFieldOAuth2Scopes     = "scopes"
	hpFieldOAuth2Params     = "endpoint_params"
	hpFieldSigV4            = "aws_sigv4"
	hpFieldSigV4Enabled     = "enabled"
	hpFieldSigV4Service     = "service"
	hpFieldSigV4Region      = "region"
	hpFieldRateLimit        = "rate_limit"
	hpFieldPartitionRate    = "partition_rate_limit"
	hpFieldMaxRetries       = "max_retries"
	hpFieldBackoff          = "backoff"
	hpFieldBackoffInitial   = "initial_interval"
	hpFieldBackoffMax       = "max_interval"
	hpFieldBackoffElapsed   = "max_elapsed_time"
	hpFieldMaxResponseBytes = "max_response_bytes"
	hpFieldTransientBody    = "transient_body_contains"
	hpFieldFormat           = "format"

	hpFieldEvents          = "events"
	hpFieldEventID         = "event_id"
	hpFieldEventPosition   = "event_position"
	hpFieldEventPayload    = "event_payload"
	hpFieldEventSemantic   = "event_semantic"
	hpFieldSuccessor       = "successor"
	hpFieldHasMore         = "has_more"
	hpFieldCompleteThrough = "complete_through"
	hpFieldMarker          = "marker"
	hpFieldSealed          = "sealed"

	hpFieldContract            = "contract"
	hpFieldEmptyPage           = "empty_page"
	hpFieldTokensMayRotate     = "tokens_may_rotate"
	hpFieldPositions           = "positions"
	hpFieldExclusiveBoundary   = "exclusive_boundary"
	hpFieldWatermarkCovers     = "watermark_covers_positions"
	hpFieldEventsWithdrawn     = "events_may_be_withdrawn"
	hpFieldMissingSuccessor    = "missing_successor"
	hpFieldSnapshotMarker      = "snapshot_marker"
	hpFieldCoordinate          = "coordinate"
	hpFieldPositionType        = "position_type"
	hpFieldFirstPosition       = "first_position"
	hpFieldExpiredStatusCodes  = "expired_status_codes"
	hpFieldExpiredBodyContains = "expired_body_contains"
	hpFieldRecovery            = "recovery"
	hpFieldRestartCursor       = "restart_cursor"
	hpFieldFinality            = "finality"
	hpFieldFinalityLag         = "finality_lag"
	hpFieldPagination          = "pagination"
	hpFieldOffsetOverlap       = "offset_overlap"
	hpFieldOffsetUnproven      = "offset_unproven"
	hpFieldRereadWindow        = "reread_window"
	hpFieldRereadInterval      = "reread_interval"

	hpFieldPartitionsURL     = "partitions_url"
	hpFieldPartitionsMapping = "partitions_mapping"
	hpFieldPartitionsVerb    = "partitions_verb"
	hpFieldPartitionsBody    = "partitions_body"
	hpFieldPartitionsNext    = "partitions_successor"
	hpFieldPartitionsHeaders = "partitions_headers"
)

// Values of the contract's positions field.
const (
	positionsUnordered = "unordered"
	positionsOrdered   = "ordered"
	positionsDense     = "dense"

	formatJSON = "json"
	formatXML  = "xml"
)

// Defaults shared by the spec and New.
const (
	defaultVerb             = "GET"
	defaultTimeout          = "30s"
	defaultMaxRetries       = 5
	defaultBackoffInitial   = "500ms"
	defaultBackoffMax       = "10s"
	defaultMaxResponseBytes = 64 << 20

	defaultEventsMapping   = `root = this`
	defaultEventIDMapping  = `root = this.id.string()`
	defaultPositionMapping = `root = this.position`
	defaultPayloadMapping  = `root = this`
	defaultPartitionsMap   = `root = this`
)

// Fields returns the fields of the `http` provider object. Embed them as
// service.NewObjectField("http", httpprovider.Fields()...).Optional().
func Fields() []*service.ConfigField {
	return slices.Concat([]*service.ConfigField{
		// Request.
		service.NewInterpolatedStringField(hpFieldURL).
			Description("URL of one page. Interpolated with metadata `partition`, `cursor` (the opaque cursor, empty at the start), `watermark` (the durable complete-through watermark, empty when none), `scope` and `attempt`. Escape the cursor for its place in the URL, e.g. with `.escape_url_query()`.").
			Example(`http://127.0.0.1:5984/events/_changes?since=${! if @cursor == "" { "0" } else { @cursor.escape_url_query() } }&limit=100`).
			Example(`${! if @cursor == "" { "https://graph.example.com/v1/" + @partition + "/delta" } else { @cursor } }`),
		service.NewStringField(hpFieldVerb).
			Description("HTTP method of the page request.").
			Default(defaultVerb).
			Example("POST"),
		service.NewInterpolatedStringMapField(hpFieldHeaders).
			Description("Request headers, interpolated with the same metadata as `url`. Put secrets here through environment interpolation (`${API_TOKEN}`); header values never appear in logs or errors.").
			Default(map[string]any{}).
			Example(map[string]any{"Authorization": "Bearer ${API_TOKEN}", "Content-Type": "application/json"}),
		service.NewInterpolatedStringField(hpFieldBody).
			Description("Request body, interpolated with the same metadata as `url`. No body is sent when it is not set.").
			Optional().
			Example(`${! {"key": @partition.encode("base64"), "limit": 100}.format_json(no_indent: true) }`),
		service.NewDurationField(hpFieldTimeout).
			Description("Timeout of one request, reading the body included. A timeout is a transient failure.").
			Default(defaultTimeout).
			Example("5s"),
		service.NewTLSToggledField(hpFieldTLS).
			Description("TLS of the page (and partition list) requests: a private CA (`root_cas` or `root_cas_file`), a client certificate for mutual TLS (`client_certs`). Verification is on; `skip_cert_verify` turns it off and is for local testing only.").
			Advanced(),
		service.NewStringField(hpFieldProxyURL).
			Description("An HTTP(S) proxy for every request. Empty: the environment's (`HTTP_PROXY`, `HTTPS_PROXY`, `NO_PROXY`).").
			Default("").
			Example("http://proxy.internal:3128").
			Advanced(),
	}, service.NewHTTPRequestAuthSignerFields(), []*service.ConfigField{
		service.NewObjectField(hpFieldOAuth2,
			service.NewBoolField(hpFieldOAuth2Enabled).Description("Whether to authenticate with the OAuth 2.0 client-credentials grant.").Default(false).Example(true),
			service.NewStringField(hpFieldOAuth2Key).Description("The client id.").Default("").Example("${CLIENT_ID}"),
			service.NewStringField(hpFieldOAuth2Secret).Description("The client secret.").Default("").Secret().Example("${CLIENT_SECRET}"),
			service.NewURLField(hpFieldOAuth2TokenURL).Description("The token endpoint.").Default("").Example("https://login.example.com/oauth2/token"),
			service.NewStringListField(hpFieldOAuth2Scopes).Description("Scopes to request.").Default([]any{}).Example([]any{"audit.read"}),
			service.NewStringMapField(hpFieldOAuth2Params).Description("Further parameters of the token request (for example `audience`).").Default(map[string]any{}).Example(map[string]any{"audience": "https://api.example.com"}),
		).
			Description("OAuth 2.0 client credentials: a token is requested from `token_url` (through the same TLS and proxy), cached until it expires, and sent as `Authorization: Bearer`. Each token request times out after `timeout`; a fetch makes at most 3 token requests, with the `backoff` between them, logging a WARN line per failure that names the token URL's host (never the secret); then the page request fails as a transient error and is retried. A redirect of the token request is refused, to any host (the request carries the client secret): set `token_url` to the final URL. The client secret and every token obtained are redacted from errors, logs and park reasons (docs/design.md#redaction).").
			Advanced().
			Example(map[string]any{hpFieldOAuth2Enabled: true, hpFieldOAuth2Key: "${CLIENT_ID}", hpFieldOAuth2Secret: "${CLIENT_SECRET}", hpFieldOAuth2TokenURL: "https://login.example.com/oauth2/token", hpFieldOAuth2Scopes: []any{"audit.read"}}),
		service.NewObjectField(hpFieldSigV4,
			service.NewBoolField(hpFieldSigV4Enabled).Description("Whether to sign requests with AWS Signature Version 4.").Default(false).Example(true),
			service.NewStringField(hpFieldSigV4Service).Description("The AWS signing name of the service (`execute-api`, `kinesis`, `s3`, ...).").Default("").Example("execute-api"),
			service.NewStringField(hpFieldSigV4Region).Description("The signing region. Empty: the SDK's default chain (`AWS_REGION`, the shared config profile).").Default("").Example("eu-west-1"),
			awscredsfield.Field(),
		).
			Description("AWS Signature Version 4 signing, with the `credentials` object (Redpanda Connect's fields: a profile, static keys, the instance's role, a role to assume) or else the AWS SDK's default credential chain (environment, shared config and credentials files, web identity, container and instance roles). The payload hash covers the request body; the secret, session token and external id are redacted from errors and logs.").
			Advanced().
			Example(map[string]any{hpFieldSigV4Enabled: true, hpFieldSigV4Service: "execute-api", hpFieldSigV4Region: "eu-west-1"}).
			Example(map[string]any{hpFieldSigV4Enabled: true, hpFieldSigV4Service: "kinesis", hpFieldSigV4Region: "eu-west-1", "credentials": map[string]any{"profile": "analytics", "role": "arn:aws:iam::123456789012:role/tidemark-reader", "role_external_id": "${ROLE_EXTERNAL_ID}"}}),
	}, []*service.ConfigField{
		service.NewStringField(hpFieldRateLimit).
			Description("Name of a `rate_limit` resource to access before every request (retries included). Empty means no rate limit. With `partition_rate_limit` set, it applies only to the requests that are not a partition's own (the incarnation request, discovery).").
			Default("").
			Example("source_api_quota"),
		service.NewStringField(hpFieldPartitionRate).
			Description("An optional rate limit of each partition on its own, `count/interval` (`5/1s`), for a source whose quota is per partition (Kinesis GetRecords: five read transactions per second per shard): every partition's page, bootstrap and validate requests (retries included) start at most `count` times in every `interval`, whatever the other partitions do; they then skip the `rate_limit` resource. Its state is one window per partition read within the last interval. Empty means none.").
			Default("").
			Advanced().
			Example("5/1s"),
		service.NewIntField(hpFieldMaxRetries).
			Description("How many times a transient failure (connection error, timeout, HTTP 429 or 5xx) is retried within one fetch before it is returned as a transient error. The input then retries that fetch `fetch_retries` times more (each with up to `max_retries` requests of its own), so one page is requested at most (max_retries+1)×(fetch_retries+1) times before the partition waits a `poll_interval` and tries again; it never parks on transient failures. A 2xx answer that cannot be read (a body that is not one document of `format`, a mapping that fails, an event without id or position) is not retried here: it is returned at once, and the input fetches the page again `fetch_retries` times (one request each) before it parks the partition, so such a page gets exactly fetch_retries+1 requests.").
			Default(defaultMaxRetries).
			Advanced().
			Example(10),
		// Benthos' back-off field (Redpanda Connect's convention beside
		// max_retries, as in its AWS outputs and its retry output):
		// initial_interval and max_interval as before, and
		// max_elapsed_time, 0s by default so that a config of the previous
		// release retries exactly as it did.
		service.NewBackOffField(hpFieldBackoff, true, &backoff.ExponentialBackOff{
			InitialInterval: mustDuration(defaultBackoffInitial),
			MaxInterval:     mustDuration(defaultBackoffMax),
			MaxElapsedTime:  0,
		}).
			Description("Exponential back-off with jitter between retries of transient failures: the wait starts at `initial_interval` and doubles on every retry up to `max_interval` (a `Retry-After` header is honoured up to `max_interval`, and so is the reset time of a 429 without one in `X-Rate-Limit-Reset` or `X-RateLimit-Reset`, Unix epoch seconds, as Okta sends it). Retries of one fetch stop at `max_retries` or, when `max_elapsed_time` is not zero, once that much time has passed since its first request, whichever comes first.").
			Advanced().
			Example(map[string]any{"initial_interval": "1s", "max_interval": "1m", "max_elapsed_time": "5m"}),
		service.NewStringListField(hpFieldTransientBody).
			Description("Substrings of a non-2xx response body, matched case-insensitively, that make an otherwise permanent status (a 4xx other than 429) transient: retried with `backoff` like a 429 or 5xx (`max_retries` times, then polled again), never parking the partition. For sources that answer throttling with a 400: Kinesis's `ProvisionedThroughputExceededException`, DynamoDB's `ThrottlingException`. `expired_body_contains` is checked first.").
			Default([]any{}).
			Advanced().
			Example([]any{"ProvisionedThroughputExceededException", "LimitExceededException"}),
		service.NewIntField(hpFieldMaxResponseBytes).
			Description("Largest response body read; a larger 2xx body is a malformed response.").
			Default(defaultMaxResponseBytes).
			Advanced().
			Example(1 << 20),

		service.NewStringAnnotatedEnumField(hpFieldFormat, map[string]string{
			formatJSON: "The body is one JSON document (numbers kept exact).",
			formatXML:  "The body is one XML document, read as Benthos's XML processor does: elements are keys, repeated elements arrays, attributes keys prefixed with `-`, the text of an element with attributes `#text`; every value is a string (positions and watermarks may be numeric strings). The same conversion is the Bloblang method `tidemark_parse_xml`.",
		}).
			Description("How a 2xx body (of pages and of the partition list) is read before the mappings run against it. A body that is not exactly one document of this format is a malformed response.").
			Default(formatJSON).
			Example(formatXML),

		// Response mappings.
		service.NewBloblangField(hpFieldEvents).
			Description("Mapping from the parsed JSON body to the array of events, in source order. Metadata holds the response headers (lowercased, e.g. `@link`), the request metadata and `@status`. Any result other than an array (null included) is a malformed response; map an omitted array with `| []`.").
			Default(defaultEventsMapping).
			Example(`root = this.results`).
			Example(`root = this.kvs | []`),
		service.NewBloblangField(hpFieldEventID).
			Description("Mapping from one event to its stable identity (a string or number). A missing (null) identity is a malformed response.").
			Default(defaultEventIDMapping).
			Example(`root = this.id + "@" + this.seq.string()`),
		service.NewBloblangField(hpFieldEventPosition).
			Description("Mapping from one event to its source position, of the contract's `position_type`: a JSON number or numeric string (integer), a string of digits of any length (decimal), an RFC 3339 timestamp (timestamp) or a string (string). A missing position, or one that does not parse as that type, is a malformed response.").
			Default(defaultPositionMapping).
			Example(`root = this.seq`).
			Example(`root = this.published`),
		service.NewBloblangField(hpFieldEventPayload).
			Description("Mapping from one event to the bytes emitted downstream: a string is emitted as is, anything else as JSON.").
			Default(defaultPayloadMapping).
			Example(`root = this.doc`),
		service.NewBloblangField(hpFieldEventSemantic).
			Description("Optional projection of an event whose digest is witnessed instead of the payload's, for sources whose payloads carry fields that change on every read. Serialized like `event_payload`. A constant (`root = \"\"`) declares that payload changes do not matter to the source's contract: a payload changed under the same id is then the same event, never a receipt conflict, and every witness stores its one digest once (8 bytes an event instead of 16: a 100-event page's witness is one DynamoDB write unit instead of two).").
			Optional().
			Example(`root = this.without("fetched_at", "etag")`).
			Example(`root = ""`),
		service.NewBloblangField(hpFieldSuccessor).
			Description("Mapping from the body to the successor cursor (a string, kept opaque). `deleted()` or null means the response has no successor (what that means is `contract.missing_successor`'s; with a mapped `has_more` that is true it makes the page malformed); a source with a single page maps `root = deleted()`. Required: how a source paginates is always stated. Like every response mapping it runs against the parsed body (`this`) with the response headers as metadata, lowercased: read a header with a hyphen as `@\"x-next-token\"` or `metadata(\"x-next-token\")` (`@x-next-token` parses as a subtraction).").
			Example(`root = this.last_seq.string()`).
			Example(`root = this.next_page_token | deleted()`).
			Example(`root = @"x-next-token" | deleted()`),
		service.NewBloblangField(hpFieldHasMore).
			Description("Optional mapping to the source's own \"more pages\" flag (a boolean). It is never evidence: it never lets a page be promoted, writes no watermark and never completes a partition. `true` on a page without a successor (or on a sealed page) makes the page malformed: it is fetched again `fetch_retries` times, then the partition parks with the reason \"has_more true without a successor\"; such a page is never taken for the end of a traversal. On an empty page it says whether the partition is caught up: never with `true`; with `false` (or unmapped, when the empty page has evidence bound to it under `contract.empty_page`) the partition is caught up, which ends it under `exit_when_complete` (it is not marked complete) and its successor is polled after `poll_interval` rather than fetched at once. An empty page with `true` and a successor is followed at once when its contract promotes it (`empty_page: end_of_data`: a Kubernetes chunk with zero items and a `continue` token). On a page with events it is not read: `false` next to a successor does not end the traversal. Map it wherever the source has one, so an empty page that is not the last is never taken for the end. Like every response mapping it runs against the parsed body (`this`) with the response headers as metadata, lowercased: read a header with a hyphen as `@\"x-next-token\"` or `metadata(\"x-next-token\")` (`@x-next-token` parses as a subtraction).").
			Optional().
			Example(`root = this.more | false`).
			Example(`root = @"x-has-more" == "true"`),
		service.NewBloblangField(hpFieldCompleteThrough).
			Description("Optional mapping to the complete-through watermark the response certifies, in the contract's `coordinate`; `deleted()` or null means none. It needs `contract.finality`, which says where its finality comes from: what the source certifies (a provider watermark or coverage marker such as CouchDB's `last_seq`, a snapshot's own revision), an append-only writer you assert, or a documented lag. Never map a value computed from the page's own events (its last position or key, the greatest timestamp in it): a page only lists what it found, so an event created or made visible later below that value is missed and the frontier claims it. Never map the request's time or a `Date` header either: a source that makes changes visible with a delay has not enumerated everything up to the moment it answered. Like every response mapping it runs against the parsed body (`this`) with the response headers as metadata, lowercased: read a header with a hyphen as `@\"x-next-token\"` or `metadata(\"x-next-token\")` (`@x-next-token` parses as a subtraction). See docs/design.md#what-may-justify-a-complete-through.").
			Optional().
			Example(`root = this.last_seq`),
		service.NewBloblangField(hpFieldMarker).
			Description("Optional mapping to the source's snapshot or coverage marker (a string or number, kept opaque), e.g. an etcd revision or a Kubernetes resourceVersion.").
			Optional().
			Example(`root = this.metadata.resourceVersion`),
		service.NewBloblangField(hpFieldSealed).
			Description("Optional mapping to a boolean: true when the source says the partition has ended for good (a closed shard).").
			Optional().
			Example(`root = this.shard_closed | false`),
	}, sequenceFields(), incarnationFields(), []*service.ConfigField{
		// Contract.
		service.NewObjectField(hpFieldContract,
			service.NewStringAnnotatedEnumField(hpFieldEmptyPage, map[string]string{
				provider.EmptyNoEvidence.String():            "An empty page proves nothing (polling APIs such as Okta's System Log, Kinesis).",
				provider.EmptyEndOfData.String():             "An empty page means the partition is complete up to its successor (Slack, S3 listings without a token).",
				provider.EmptyFinalThroughWatermark.String(): "An empty page is final through its `complete_through` watermark (CouchDB `last_seq`); without one it proves nothing. Requires `finality: source`.",
				provider.EmptyFollowsSuccessor.String():      "An empty page proves nothing (no watermark, not the end of the data), but the source documents that its successor continues the traversal after the range it read, so the successor is promoted and read next (Kinesis GetRecords behind the head of a shard: \"It might take multiple calls to get to a portion of the shard that contains records\"). A `complete_through` on such a page is not written, and it never counts as caught up. A successor equal to the page's own cursor is polled again like `no_evidence`; map the successor to `deleted()` where the source says the page is the head (polled, not followed).",
			}).
				Description("What an empty response proves.").
				Default(provider.EmptyNoEvidence.String()).
				Example(provider.EmptyFinalThroughWatermark.String()),
			service.NewBoolField(hpFieldTokensMayRotate).
				Description("Whether a retry of the same cursor may return the same events with another valid successor (Kinesis iterators, Salesforce locators, Elasticsearch PIT ids).").
				Default(false).
				Example(true),
			service.NewStringAnnotatedEnumField(hpFieldPositions, map[string]string{
				positionsUnordered: "Positions carry no order (e.g. etcd mod_revision in a key range).",
				positionsOrdered:   "Positions strictly increase within a response and across a partition's pages.",
				positionsDense:     "Positions are consecutive (integer or decimal `position_type`), so the next required position is known (implies ordered).",
			}).
				Description("What event positions guarantee.").
				Default(positionsOrdered).
				Example(positionsDense),
			service.NewBoolField(hpFieldExclusiveBoundary).
				Description("Whether a retry may legitimately omit events at or below the durable applied boundary (the source resumes strictly after it).").
				Default(false).
				Example(true),
			service.NewBoolField(hpFieldSnapshotMarker).
				Description("Whether `marker` names a stable snapshot: two responses with the same marker enumerate the same stream, and a marker proves coverage of an empty response's range. A marker proves nothing about an event an earlier response to the same cursor showed: the same marker with other events is an unstable snapshot, another marker is another snapshot.").
				Default(false).
				Example(true),
			service.NewBoolField(hpFieldWatermarkCovers).
				Description("Whether event positions are in the coordinate of `complete_through` (`coordinate: integer` or `timestamp`), so that a response's watermark W proves every required event at or below W was delivered. A watermark is never evidence for a position above W. Without it a watermark proves nothing about positions: it cannot cover a gap in dense positions or a shifted page of sparse ones.").
				Default(false).
				Example(true),
			service.NewBoolField(hpFieldEventsWithdrawn).
				Description("Whether an event one response showed may legitimately be missing from a retry of the same cursor (deleted or compacted at the source). Even then the retry is accepted only when its watermark covers the missing position (`watermark_covers_positions`); without this field a missing event is always unprovable divergence.").
				Default(false).
				Example(true),
			service.NewStringAnnotatedEnumField(hpFieldMissingSuccessor, map[string]string{
				provider.MissingSuccessorPoll.String():          "The source has nothing after this page yet (a change feed's head): once all its events are acknowledged the page is held (its receipts are recorded, so its events are not emitted again) and its cursor is fetched again every `poll_interval`.",
				provider.MissingSuccessorEndsTraversal.String(): "The page is the last of a finite traversal (an object listing, a Kubernetes list, a key range): once all its events are acknowledged it is promoted with the partition marked complete in its checkpoint. A complete partition is never read again, also after a restart; `exit_when_complete` ends on it. Nothing is listed again after the traversal completes: an object, key or row created or changed afterwards, wherever it sorts, is never read under this scope, while `status` shows the partition complete. Declare it only for a traversal that is meant to be read once (an export, a snapshot); to pick up later changes, read them with a new scope or a source that re-lists (a continuous listing or re-read window, where the input offers one).",
			}).
				Description("What a response without a successor (`successor` deleted or null) means.").
				Default(provider.MissingSuccessorPoll.String()).
				Example(provider.MissingSuccessorEndsTraversal.String()),
			service.NewStringAnnotatedEnumField(hpFieldCoordinate, map[string]string{
				coord.KindInteger.String():   "`complete_through` is a signed 64-bit integer (a JSON number or numeric string).",
				coord.KindDecimal.String():   "`complete_through` is an unsigned integer of any length in decimal (a numeric string, or a JSON number), compared numerically: Kinesis and DynamoDB Streams sequence numbers (56 digits and more).",
				coord.KindTimestamp.String(): "`complete_through` is an RFC 3339 timestamp (or Unix seconds), kept as Unix nanoseconds.",
				coord.KindString.String():    "`complete_through` is a string compared byte by byte (object keys, resource names); only when the source documents that its strings sort in stream order.",
			}).
				Description("Type of the shared ordering coordinate of `complete_through`, and the default `position_type`. Watermarks of different types never compare: the frontier of a scope mixing them is published as the per-partition vector only, and the `partition_frontier` processor says why.").
				Default(coord.KindInteger.String()).
				Example(coord.KindTimestamp.String()),
			service.NewStringAnnotatedEnumField(hpFieldPositionType, map[string]string{
				coord.KindInteger.String():   "Positions are signed 64-bit integers (a JSON number or numeric string).",
				coord.KindDecimal.String():   "Positions are unsigned integers of any length in decimal, compared numerically (Kinesis sequence numbers). Map them from strings: a JSON number above 2^53 loses digits in most encoders.",
				coord.KindTimestamp.String(): "Positions are RFC 3339 timestamps (or Unix seconds), kept as Unix nanoseconds.",
				coord.KindString.String():    "Positions are strings compared byte by byte (S3 object keys, etcd keys); only when the source lists in that order. `dense` is refused.",
			}).
				Description("Type of event positions. Every event of a partition has a position of this type; a response with a position that does not parse as it is malformed. When not set: the `coordinate` for `timestamp` and `decimal`, `integer` under `integer` and `string` (set `position_type: string` for string positions). `watermark_covers_positions` needs it equal to `coordinate`.").
				Optional().
				Example(coord.KindDecimal.String()),
			service.NewStringField(hpFieldFirstPosition).
				Description("With `positions: dense`, the declared origin: the position of the first event of every incarnation of the source (`1` for a feed whose ids start at 1, again after it is recreated), of the `position_type` (integer or decimal). The first page of a traversal that has nothing applied yet (a fresh start, a new incarnation after a reset) must then begin at it: a first event above it (the source's retention dropped its oldest events, or a `limit` kept the newest N) or below it is a gap, reported with the partition, the origin and the first position seen, and handled per `recovery` like any other gap (a restart that keeps answering above the origin parks after `max_restarts`). When not set, no origin is declared and that first page is not checked: events the source dropped before the first read are skipped without a word. A `start_cursor` that begins after the origin on purpose (reading from the head) contradicts it: its first page is a gap too. Refused without `positions: dense` and for timestamp or string positions.").
				Optional().
				Example("1"),
			service.NewIntListField(hpFieldExpiredStatusCodes).
				Description("HTTP statuses that mean the cursor has expired (Kubernetes `continue` and Google sync tokens answer 410).").
				Default([]any{410}).
				Example([]any{410, 404}),
			service.NewStringListField(hpFieldExpiredBodyContains).
				Description("Substrings of a non-2xx response body that mean the cursor has expired, whatever the status. Matched case-insensitively (`syncStateNotFound` matches a body with `SyncStateNotFound`).").
				Default([]any{}).
				Example([]any{"required revision has been compacted", "syncStateNotFound"}),
			service.NewStringAnnotatedEnumField(hpFieldRecovery, map[string]string{
				provider.RecoveryPark.String():                "Stop the partition and wait for an operator.",
				provider.RecoveryRestartFromBoundary.String(): "Restart from the stable boundary `restart_cursor` gives; events after the durable boundary are replayed and deduplicated downstream.",
				provider.RecoveryFreshSnapshot.String():       "Take a fresh snapshot (the cursor `restart_cursor` gives, without a pinned snapshot) and replay the partition in it.",
			}).
				Description("What to do on unprovable divergence or an expired cursor.").
				Default(provider.RecoveryPark.String()).
				Example(provider.RecoveryFreshSnapshot.String()),
			service.NewStringAnnotatedEnumField(hpFieldFinality, map[string]string{
				provider.FinalityNone.String():             "The watermark is recorded in each response witness but never becomes the partition's durable watermark and never advances the frontier.",
				provider.FinalitySource.String():           "The source certifies it with finality: nothing can later appear at or below it in the frontier's coordinate (CouchDB 1.x `last_seq`, a snapshot's revision in the revision's coordinate). The only finality that is also coverage evidence (`watermark_covers_positions`, `events_may_be_withdrawn`, empty pages under `final_through_watermark`).",
				provider.FinalityAppendOnlyWriter.String(): "Your assertion that positions are only ever created above every existing one (one writer with time-ordered keys, a log). The watermark advances the frontier, named as this assertion in `status` and the frontier's reason, but never covers a gap. When the assertion is wrong, an event created below it is missed and the frontier claims it.",
				provider.FinalityLag.String():              "The source documents a bound on late arrival: the durable watermark is the mapped one minus `finality_lag`. It advances the frontier, named with its lag, but never covers a gap.",
			}).
				Description("Where the finality of `complete_through` comes from. Required when `complete_through` is mapped (a config that maps it without `finality` is refused at lint and at run). A page's own last position or key, and the request's time, are never a basis.").
				Optional().
				Example(provider.FinalitySource.String()),
			service.NewStringField(hpFieldFinalityLag).
				Description("With `finality: lag`, the documented bound on late arrival subtracted from every `complete_through`: a duration (`5m`) under a timestamp `coordinate`, a positive integer under an integer or decimal one. Refused under a string coordinate and with any other finality.").
				Optional().
				Example("5m"),
			service.NewInterpolatedStringField(hpFieldRestartCursor).
				Description("Cursor of the stable boundary to restart a partition from (recovery `restart_from_boundary` or `fresh_snapshot`), interpolated with metadata `partition`, `watermark` (the durable complete-through watermark, empty when none), `applied` (the durable applied position: the greatest position of an event with a durable outcome, empty when none; for sources that resume after a sequence number), `applied_id` (the id of the event at the applied position, as `event_id` mapped it, empty when unknown; for sources that resume after an event id), `cursor` (empty), `scope` (empty) and `attempt` (0). The empty string is the partition's start; with a `bootstrap` it is the bootstrap (reason `expired` after an expired or invalid cursor, `resume` otherwise) from the durable applied position. A traversal from a restart cursor pins its `pin` values anew.").
				Default("").
				Example(`${! @watermark }`),
			service.NewStringAnnotatedEnumField(hpFieldPagination, map[string]string{
				provider.PaginationToken.String():  "The successor is a token or position the source issues with the page (a continuation token, a change feed's sequence, a delta link): a delete or an insert on an earlier page cannot move it. A successor URL (or `Link` header value) that differs from its request only by a growing `offset`, `page`, `skip`, `start` or `from` parameter contradicts it: the page is refused and the partition parks (contract monitor `offset_shaped_successor`).",
				provider.PaginationKeyset.String(): "The successor is built from the page's last position (`after_id`, `id_gte`, `start-after`); positions must be ordered. A delete or an insert on an earlier page moves nothing.",
				provider.PaginationOffset.String(): "The successor counts rows to skip (`?offset=N`, `?page=N`, a `Link: rel=\"next\"` header built from them). A delete on an earlier page slides an event onto a page already read, so unless positions are `dense` the contract needs `offset_overlap` (checked) or `offset_unproven` (no completeness claimed); `connect lint` refuses anything else.",
			}).
				Description("How the source's pages follow one another. [Pagination styles](pagination.md) (docs/pagination.md) takes each style in turn (token, keyset, offset and page number, time window, changes feed, snapshot listing): what the input can prove, the contract to declare and a worked config. `offset` runs its continuity checks; under `token` the `offset_shaped_successor` monitor refuses successors shaped like offsets or page numbers, which `keyset` (a key grows too) and `offset` exempt.").
				Default(provider.PaginationToken.String()).
				Example(provider.PaginationOffset.String()),
			service.NewBoolField(hpFieldOffsetOverlap).
				Description("With `pagination: offset`: every page after the first of a traversal is requested one event early (the successor is the previous offset plus the page's length minus one), so it must begin with the previous page's last event (identity, position and payload digest). When it does not, the page shifted (an event on an earlier page was deleted or inserted) and the partition recovers as `recovery` says, restarting from `restart_cursor`, instead of skipping the event that slid onto a page already read. The repeated event is not emitted again once its page is promoted. A response to the partition's start or to a restart cursor continues nothing and is not checked.").
				Default(false).
				Example(true),
			service.NewBoolField(hpFieldOffsetUnproven).
				Description("With `pagination: offset` over positions that are not dense and without `offset_overlap`: an explicit declaration that nothing proves a page continues the previous one. The partition reads on and logs at warn level, once, that an event can be skipped unnoticed; it claims no completeness: `complete_through` cannot be mapped, `missing_successor` must be `poll`, no watermark is written, so the frontier stays vector-only.").
				Default(false).
				Example(true),
			service.NewStringField(hpFieldRereadWindow).
				Description("A re-read window behind the partition's applied boundary, for sources that can show an event below what was already read (ids or keys assigned out of visibility order: a database sequence whose transactions commit out of order, client-chosen ids, events made visible late): a duration (`5m`) for timestamp positions, a positive integer for integer ones. Each time the partition reaches its head (at most every `reread_interval`) it restarts from `restart_cursor` with `applied` set to the previous pass's boundary less the window (the partition's start for the first pass) and reads up to its head again; events a durable receipt (id hash and position, kept in the checkpoint store while they lie in the window) shows delivered are not emitted again, the others are. Needs `recovery: restart_from_boundary` with a `restart_cursor` built from `applied`, keyset or token pagination and integer or timestamp positions. With `finality: lag` the durable watermark is the boundary the previous pass started at less the window, named `reread lag <window>` wherever the frontier is shown (`finality_lag` defaults to the window and may not exceed it; `complete_through` cannot also be mapped); without a finality nothing is claimed. An event that appears further below than the window is never read: the window is the claim. A pass that emits an event lying in the lowest quarter of its range (it appeared at least three quarters of the window below what was already delivered) logs one warning naming the partition, that depth and the window: a source that shows events that late may show some beyond the window; widen it. See docs/design.md, \"Re-read windows\".").
				Optional().
				Example("5m").
				Example("1000"),
			service.NewDurationField(hpFieldRereadInterval).
				Description("With `reread_window`: the least time between the starts of two re-read passes. `0s` starts a pass each time the partition reaches its head; a longer interval reads less, and an event behind the boundary waits up to the interval (plus a pass) to be delivered.").
				Default("0s").
				Example("1m"),
		).
			Description("The source's declared pagination contract. Classification trusts only what is declared here.").
			LintRule(contractLint()).
			Example(map[string]any{
				hpFieldEmptyPage:          provider.EmptyFinalThroughWatermark.String(),
				hpFieldPositions:          positionsOrdered,
				hpFieldCoordinate:         coord.KindInteger.String(),
				hpFieldExpiredStatusCodes: []any{410},
				hpFieldRecovery:           provider.RecoveryRestartFromBoundary.String(),
				hpFieldRestartCursor:      "",
			}),

		// Discovery.
		service.NewInterpolatedStringField(hpFieldPartitionsURL).
			Description("URL that lists the partitions (with `headers` and the request authentication), interpolated with metadata `cursor`: empty for the first page of the list, then what `partitions_successor` returned. When not set the partitions must be configured on the input.").
			Optional().
			Example(`https://api.example.com/v1/shards`),
		service.NewBloblangField(hpFieldPartitionsMapping).
			Description("Mapping from the body of `partitions_url` to an array of partitions: each a name (a string or number), or an object `{\"name\": ..., \"parents\": [...]}` naming the partitions it descends from (a split's parent, a merge's parents). With `lineage: parents_first` (the input's default) a partition is read only once its parents are complete.").
			Default(defaultPartitionsMap).
			Example(`root = this.shards.map_each(s -> s.id)`).
			Example(`root = this.Shards.map_each(s -> {"name": s.ShardId, "parents": [s.ParentShardId, s.AdjacentParentShardId].filter(p -> p != null)})`),
		service.NewStringField(hpFieldPartitionsVerb).
			Description("HTTP method of the partition list request.").
			Default(defaultVerb).
			Example("POST"),
		service.NewInterpolatedStringField(hpFieldPartitionsBody).
			Description("Body of the partition list request (interpolated with metadata `cursor`), e.g. a JSON query of an API that lists with POST. No body is sent when it is not set.").
			Optional().
			Example(`${! {"StreamName": "audit", "NextToken": if @cursor == "" { null } else { @cursor }}.format_json(no_indent: true) }`),
		service.NewInterpolatedStringMapField(hpFieldPartitionsHeaders).
			Description("Headers of the partition list request, interpolated with metadata `cursor`. When set (not empty), only these are sent (the page request's `headers` are not), for APIs whose list and page requests differ in a header (Kinesis's `X-Amz-Target: Kinesis_20131202.ListShards` against `GetRecords`); when not set, `headers`. The request authentication signs it either way.").
			Optional().
			Advanced().
			Example(map[string]any{"Content-Type": "application/x-amz-json-1.1", "X-Amz-Target": "Kinesis_20131202.ListShards"}),
		service.NewBloblangField(hpFieldPartitionsNext).
			Description("Optional mapping from a body of the partition list to the cursor of its next page; `deleted()` or null means the list is complete. Each page's names are added in order (a name listed twice is a malformed list). Without it the list is one page.").
			Optional().
			Example(`root = this.NextToken | deleted()`),
	})
}

// FromParsed reads the fields of the http provider object (conf is that
// object's namespace) and builds the provider with New. It only reads;
// New validates.
func FromParsed(conf *service.ParsedConfig, res *service.Resources, logger *service.Logger) (*Provider, error) {
	var c Config
	var err error
	if c.URL, err = conf.FieldInterpolatedString(hpFieldURL); err != nil {
		return nil, err
	}
	if err := checkURLScheme(conf, hpFieldURL); err != nil {
		return nil, err
	}
	if err := checkURLScheme(conf, hpFieldPartitionsURL); err != nil {
		return nil, err
	}
	if c.Verb, err = conf.FieldString(hpFieldVerb); err != nil {
		return nil, err
	}
	if c.Headers, err = conf.FieldInterpolatedStringMap(hpFieldHeaders); err != nil {
		return nil, err
	}
	if conf.Contains(hpFieldBody) {
		if c.Body, err = conf.FieldInterpolatedString(hpFieldBody); err != nil {
			return nil, err
		}
	}
	if c.Timeout, err = conf.FieldDuration(hpFieldTimeout); err != nil {
		return nil, err
	}
	if c.RateLimit, err = conf.FieldString(hpFieldRateLimit); err != nil {
		return nil, err
	}
	pr, err := conf.FieldString(hpFieldPartitionRate)
	if err != nil {
		return nil, err
	}
	if c.PartitionRateLimit, err = ParsePartitionRateLimit(pr); err != nil {
		return nil, err
	}
	if c.Client, err = clientFromParsed(conf, res); err != nil {
		return nil, err
	}
	if c.MaxRetries, err = conf.FieldInt(hpFieldMaxRetries); err != nil {
		return nil, err
	}
	if c.TransientBodyContains, err = conf.FieldStringList(hpFieldTransientBody); err != nil {
		return nil, err
	}
	if c.Backoff.Initial, err = conf.FieldDuration(hpFieldBackoff, hpFieldBackoffInitial); err != nil {
		return nil, err
	}
	if c.Backoff.Max, err = conf.FieldDuration(hpFieldBackoff, hpFieldBackoffMax); err != nil {
		return nil, err
	}
	if c.Backoff.MaxElapsed, err = conf.FieldDuration(hpFieldBackoff, hpFieldBackoffElapsed); err != nil {
		return nil, err
	}
	maxBytes, err := conf.FieldInt(hpFieldMaxResponseBytes)
	if err != nil {
		return nil, err
	}
	c.MaxResponseBytes = int64(maxBytes)
	if c.Format, err = conf.FieldString(hpFieldFormat); err != nil {
		return nil, err
	}

	m := &c.Mappings
	for _, f := range []struct {
		name     string
		dst      **bloblang.Executor
		optional bool
	}{
		{hpFieldEvents, &m.Events, false},
		{hpFieldEventID, &m.EventID, false},
		{hpFieldEventPosition, &m.EventPosition, false},
		{hpFieldEventPayload, &m.EventPayload, false},
		{hpFieldEventSemantic, &m.EventSemantic, true},
		{hpFieldSuccessor, &m.Successor, false},
		{hpFieldHasMore, &m.HasMore, true},
		{hpFieldCompleteThrough, &m.CompleteThrough, true},
		{hpFieldMarker, &m.Marker, true},
		{hpFieldSealed, &m.Sealed, true},
		{hpFieldPartitionsMapping, &c.PartitionsMapping, false},
		{hpFieldPartitionsNext, &c.PartitionsSuccessor, true},
	} {
		if f.optional && !conf.Contains(f.name) {
			continue
		}
		if *f.dst, err = conf.FieldBloblang(f.name); err != nil {
			return nil, err
		}
		switch f.name {
		case hpFieldEvents, hpFieldEventID, hpFieldEventPosition, hpFieldEventPayload, hpFieldEventSemantic:
			if src, err := conf.FieldString(f.name); err == nil {
				if m.sources == nil {
					m.sources = map[string]string{}
				}
				m.sources[f.name] = src
			}
		}
	}

	cc := conf.Namespace(hpFieldContract)
	emptyPage, err := cc.FieldString(hpFieldEmptyPage)
	if err != nil {
		return nil, err
	}
	if c.Contract.EmptyPage, err = parseEmptyPage(emptyPage); err != nil {
		return nil, err
	}
	if c.Contract.TokensMayRotate, err = cc.FieldBool(hpFieldTokensMayRotate); err != nil {
		return nil, err
	}
	positions, err := cc.FieldString(hpFieldPositions)
	if err != nil {
		return nil, err
	}
	switch positions {
	case positionsUnordered:
	case positionsOrdered:
		c.Contract.OrderedPositions = true
	case positionsDense:
		c.Contract.OrderedPositions, c.Contract.DensePositions = true, true
	default:
		return nil, fmt.Errorf("httpprovider: contract.positions: unknown value %q (want unordered, ordered or dense)", positions)
	}
	if c.Contract.ExclusiveBoundary, err = cc.FieldBool(hpFieldExclusiveBoundary); err != nil {
		return nil, err
	}
	if c.Contract.SnapshotMarker, err = cc.FieldBool(hpFieldSnapshotMarker); err != nil {
		return nil, err
	}
	if c.Contract.WatermarkCoversPositions, err = cc.FieldBool(hpFieldWatermarkCovers); err != nil {
		return nil, err
	}
	if c.Contract.EventsMayBeWithdrawn, err = cc.FieldBool(hpFieldEventsWithdrawn); err != nil {
		return nil, err
	}
	missing, err := cc.FieldString(hpFieldMissingSuccessor)
	if err != nil {
		return nil, err
	}
	if c.Contract.MissingSuccessor, err = provider.ParseMissingSuccessor(missing); err != nil {
		return nil, fmt.Errorf("httpprovider: contract.missing_successor: unknown value %q (want poll or end_of_traversal)", missing)
	}
	kind, err := cc.FieldString(hpFieldCoordinate)
	if err != nil {
		return nil, err
	}
	if c.Coordinate, err = coord.ParseKind(kind); err != nil {
		return nil, err
	}
	if cc.Contains(hpFieldPositionType) {
		pk, err := cc.FieldString(hpFieldPositionType)
		if err != nil {
			return nil, err
		}
		pkind, err := coord.ParseKind(pk)
		c.Contract.PositionKind = sdkcoord.SDKKind(pkind)
		if err != nil {
			return nil, fmt.Errorf("httpprovider: contract.position_type: %w", err)
		}
	}
	if err := firstPositionFromParsed(cc, &c); err != nil {
		return nil, err
	}
	if c.ExpiredStatusCodes, err = cc.FieldIntList(hpFieldExpiredStatusCodes); err != nil {
		return nil, err
	}
	if c.ExpiredBodyContains, err = cc.FieldStringList(hpFieldExpiredBodyContains); err != nil {
		return nil, err
	}
	recovery, err := cc.FieldString(hpFieldRecovery)
	if err != nil {
		return nil, err
	}
	if c.Contract.Recovery, err = parseRecovery(recovery); err != nil {
		return nil, err
	}
	if c.RestartCursor, err = cc.FieldInterpolatedString(hpFieldRestartCursor); err != nil {
		return nil, err
	}
	if err := finalityFromParsed(cc, &c); err != nil {
		return nil, err
	}

	pagination, err := cc.FieldString(hpFieldPagination)
	if err != nil {
		return nil, err
	}
	if c.Contract.Pagination, err = parsePagination(pagination); err != nil {
		return nil, err
	}
	if c.Contract.OffsetOverlap, err = cc.FieldBool(hpFieldOffsetOverlap); err != nil {
		return nil, err
	}
	if c.Contract.OffsetUnproven, err = cc.FieldBool(hpFieldOffsetUnproven); err != nil {
		return nil, err
	}
	if err := rereadFromParsed(cc, &c); err != nil {
		return nil, err
	}

	if err := sequenceFromParsed(conf, &c); err != nil {
		return nil, err
	}
	if err := incarnationFromParsed(conf, &c); err != nil {
		return nil, err
	}

	if conf.Contains(hpFieldPartitionsURL) {
		if c.PartitionsURL, err = conf.FieldInterpolatedString(hpFieldPartitionsURL); err != nil {
			return nil, err
		}
	}
	if c.PartitionsVerb, err = conf.FieldString(hpFieldPartitionsVerb); err != nil {
		return nil, err
	}
	if conf.Contains(hpFieldPartitionsHeaders) {
		if c.PartitionsHeaders, err = conf.FieldInterpolatedStringMap(hpFieldPartitionsHeaders); err != nil {
			return nil, err
		}
		if len(c.PartitionsHeaders) == 0 {
			c.PartitionsHeaders = nil // an optional map reads as empty when absent
		}
	}
	if conf.Contains(hpFieldPartitionsBody) {
		if c.PartitionsBody, err = conf.FieldInterpolatedString(hpFieldPartitionsBody); err != nil {
			return nil, err
		}
	}
	c.Resources = res
	c.Logger = logger
	return New(c)
}

// finalityFromParsed reads contract.finality (left zero, undeclared, when
// absent) and contract.finality_lag in the coordinate's units.
func finalityFromParsed(cc *service.ParsedConfig, c *Config) error {
	if cc.Contains(hpFieldFinality) {
		s, err := cc.FieldString(hpFieldFinality)
		if err != nil {
			return err
		}
		if c.Contract.Finality, err = provider.ParseFinality(s); err != nil {
			return fmt.Errorf("httpprovider: contract.finality: %q is not one of none, source, append_only_writer, lag", s)
		}
	}
	if !cc.Contains(hpFieldFinalityLag) {
		return nil
	}
	s, err := cc.FieldString(hpFieldFinalityLag)
	if err != nil {
		return err
	}
	switch c.Coordinate {
	case coord.KindTimestamp:
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("httpprovider: contract.finality_lag: %q is not a duration (the coordinate is timestamp)", s)
		}
		c.Contract.FinalityLag = int64(d)
	case coord.KindInteger, coord.KindDecimal:
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return fmt.Errorf("httpprovider: contract.finality_lag: %q is not an integer (the coordinate is %s)", s, c.Coordinate)
		}
		c.Contract.FinalityLag = n
	default:
		return fmt.Errorf("httpprovider: contract.finality_lag: a %s coordinate has no arithmetic to subtract a lag from", c.Coordinate)
	}
	return nil
}

// rereadFromParsed reads contract.reread_window in the positions' units
// and contract.reread_interval; under finality lag without finality_lag,
// the lag is the window.
func rereadFromParsed(cc *service.ParsedConfig, c *Config) error {
	if !cc.Contains(hpFieldRereadWindow) {
		return nil
	}
	s, err := cc.FieldString(hpFieldRereadWindow)
	if err != nil {
		return err
	}
	switch k := sdkcoord.Kind(c.Contract.EffectivePositionKind()); k {
	case coord.KindTimestamp:
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil || d <= 0 {
			return fmt.Errorf("httpprovider: contract.reread_window: %q is not a positive duration (the positions are timestamps)", s)
		}
		c.Contract.RereadWindow = int64(d)
	case coord.KindInteger:
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil || n <= 0 {
			return fmt.Errorf("httpprovider: contract.reread_window: %q is not a positive integer (the positions are integers)", s)
		}
		c.Contract.RereadWindow = n
	default:
		return fmt.Errorf("httpprovider: contract.reread_window: %s positions have no arithmetic to subtract a window from", k)
	}
	if c.Contract.RereadInterval, err = cc.FieldDuration(hpFieldRereadInterval); err != nil {
		return err
	}
	if c.Contract.Finality == provider.FinalityLag && !cc.Contains(hpFieldFinalityLag) {
		c.Contract.FinalityLag = c.Contract.RereadWindow
	}
	return nil
}

// firstPositionFromParsed reads contract.first_position, when set, as a
// position of the contract's position_type (its default when not set).
func firstPositionFromParsed(cc *service.ParsedConfig, c *Config) error {
	if !cc.Contains(hpFieldFirstPosition) {
		return nil
	}
	s, err := cc.FieldString(hpFieldFirstPosition)
	if err != nil {
		return err
	}
	k := sdkcoord.Kind(c.Contract.PositionKind)
	if k == coord.KindNone {
		k = defaultPositionKind(c.Coordinate)
	}
	if !coord.HasSuccessorArithmetic(k) {
		return fmt.Errorf("httpprovider: contract.first_position needs dense integer or decimal positions, not %s positions", k)
	}
	first, err := coord.ParsePosition(k, strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("httpprovider: contract.first_position: %q is not a %s position: %w", s, k, err)
	}
	c.Contract.FirstPosition = sdkcoord.SDKPosition(first)
	return nil
}

func parseEmptyPage(s string) (provider.EmptyPage, error) {
	if e, err := provider.ParseEmptyPage(s); err == nil {
		return e, nil
	}
	return 0, fmt.Errorf("httpprovider: contract.empty_page: unknown value %q (want no_evidence, end_of_data, final_through_watermark or follow_successor)", s)
}

func parsePagination(s string) (provider.Pagination, error) {
	if p, err := provider.ParsePagination(s); err == nil {
		return p, nil
	}
	return 0, fmt.Errorf("httpprovider: contract.pagination: unknown value %q (want token, keyset or offset)", s)
}

func parseRecovery(s string) (provider.Recovery, error) {
	if r, err := provider.ParseRecovery(s); err == nil {
		return r, nil
	}
	return 0, fmt.Errorf("httpprovider: contract.recovery: unknown value %q (want park, restart_from_boundary or fresh_snapshot)", s)
}

// contractEnums are the contract's enumerated fields and their values, for
// a lint message that lists the values (Benthos's own only says "not a
// valid option").
func contractEnums() [][2]any {
	kinds := []string{coord.KindInteger.String(), coord.KindDecimal.String(), coord.KindTimestamp.String(), coord.KindString.String()}
	return [][2]any{
		{hpFieldEmptyPage, provider.Names(provider.EmptyPages())},
		{hpFieldPositions, []string{positionsUnordered, positionsOrdered, positionsDense}},
		{hpFieldMissingSuccessor, provider.Names(provider.MissingSuccessors())},
		{hpFieldCoordinate, kinds},
		{hpFieldPositionType, kinds},
		{hpFieldRecovery, provider.Names(provider.Recoveries())},
		{hpFieldFinality, provider.Names(provider.Finalities())},
		{hpFieldPagination, provider.Names(provider.Paginations())},
	}
}

// offsetLint is the lint of offset pagination over the contract object
// (provider.Contract.Validate says the same at start-up): positions that
// are not dense need the overlap check or the explicit offset_unproven,
// which claims no completeness.
const offsetLint = `  if this.pagination.or("token") == "offset" && this.positions.or("ordered") != "dense" && !this.offset_overlap.or(false) && !this.offset_unproven.or(false) { "contract.pagination: offset over positions that are not dense cannot prove that a page continues the previous one (a delete on an earlier page slides an event onto a page already read, and it is skipped silently): page by keyset (pagination: keyset), request each page one event early (offset_overlap: true), or declare offset_unproven: true and claim no completeness (see docs/pagination.md)" },
  if this.offset_unproven.or(false) && this.missing_successor.or("poll") == "end_of_traversal" { "contract.offset_unproven claims no completeness: missing_successor must be poll, not end_of_traversal" },
  if this.offset_unproven.or(false) && (this.empty_page.or("") == "final_through_watermark" || this.watermark_covers_positions.or(false)) { "contract.offset_unproven claims no completeness: no watermark can be final (empty_page: final_through_watermark, watermark_covers_positions)" },
  if this.pagination.or("token") != "offset" && (this.offset_overlap.or(false) || this.offset_unproven.or(false)) { "contract.offset_overlap and offset_unproven need pagination: offset" },
  if this.offset_overlap.or(false) && this.offset_unproven.or(false) { "contract.offset_overlap proves continuity and offset_unproven says nothing does: declare one" },
  if this.pagination.or("token") == "keyset" && this.positions.or("ordered") == "unordered" { "contract.pagination: keyset needs ordered (or dense) positions: the successor is built from the last position" },
`

// contractLint is contractEnumLint and offsetLint.
func contractLint() string {
	s := contractEnumLint()
	return strings.Replace(s, "].filter(", offsetLint+"].filter(", 1)
}

// contractEnumLint is a Bloblang lint rule over the contract object: for
// each enumerated field set to an unknown value, one message naming the
// field, the value and the allowed values.
func contractEnumLint() string {
	var b strings.Builder
	b.WriteString("root = [\n")
	for _, e := range contractEnums() {
		field, values := e[0].(string), e[1].([]string)
		quoted := make([]string, len(values))
		for i, v := range values {
			quoted[i] = strconv.Quote(v)
		}
		fmt.Fprintf(&b, "  if this.%s.type() == \"string\" && ![%s].contains(this.%s) { \"contract.%s: %%q is not one of %s\".format(this.%s) },\n",
			field, strings.Join(quoted, ", "), field, field, strings.Join(values, ", "), field)
	}
	// Coverage needs a watermark the source certifies.
	b.WriteString(`  if this.watermark_covers_positions == true && this.finality.or("none") != "source" { "contract.watermark_covers_positions needs finality: source, not %s: only a watermark the source certifies proves that no event of a page's range was skipped".format(this.finality.or("none")) },` + "\n")
	b.WriteString(`  if this.empty_page == "final_through_watermark" && this.finality.or("none") != "source" { "contract.empty_page final_through_watermark needs finality: source, not %s: only a watermark the source certifies makes an empty page evidence".format(this.finality.or("none")) },` + "\n")
	b.WriteString(`  if this.finality == "lag" && this.finality_lag.or("") == "" && this.reread_window.or("") == "" { "contract.finality lag needs contract.finality_lag (a duration for a timestamp coordinate, an integer otherwise)" },` + "\n")
	b.WriteString(`  if this.finality_lag != null && this.finality != "lag" { "contract.finality_lag is set but contract.finality is %s, not lag".format(this.finality.or("none")) },` + "\n")
	b.WriteString(`  if this.finality_lag != null && this.coordinate == "string" { "contract.finality_lag: a string coordinate has no arithmetic to subtract a lag from" },` + "\n")
	// A re-read window restarts from a position, and claims a lag or nothing.
	b.WriteString(`  if this.reread_window != null && !["restart_from_boundary", "fresh_snapshot"].contains(this.recovery.or("park")) { "contract.reread_window: a re-read window needs recovery restart_from_boundary (with a restart_cursor built from the applied position): each pass restarts from the window's start" },` + "\n")
	b.WriteString(`  if this.reread_window != null && this.pagination.or("token") == "offset" { "contract.reread_window: a re-read window needs keyset or token pagination: a pass restarts from a position, which an offset cannot name" },` + "\n")
	b.WriteString(`  if this.reread_window != null && !["none", "lag"].contains(this.finality.or("none")) { "contract.reread_window: a re-read window claims its watermark as a lag (finality lag) or claims none (finality none), not %s".format(this.finality) },` + "\n")
	// A declared origin is checked only over dense positions.
	b.WriteString(`  if this.first_position != null && this.positions.or("ordered") != "dense" { "contract.first_position needs positions: dense: only dense positions say that nothing lies between the origin and the first event" },` + "\n")
	b.WriteString("].filter(m -> m != null)")
	return b.String()
}

// ObjectLint is the Bloblang lint rule of the http object (this is the
// object): complete_through mapped without a declared contract.finality,
// and, best effort, a complete_through that reads the field the
// event_position mapping reads from the page's last event (or its
// maximum) under finality: source, where it would certify the page by
// itself. Benthos lint rules are errors; under other finalities such a
// mapping is the declared assertion or lag, so it is not flagged. Also:
// offset_unproven claims no completeness, so complete_through cannot be
// mapped.
func ObjectLint() string {
	return `let fin = this.contract.finality.or("")
let pos = this.event_position.or("").re_find_object("""this\.(?P<f>[A-Za-z_][A-Za-z0-9_]*)\s*$""").f.or("")
let ct = this.complete_through.or("")
root = [
  if this.complete_through != null && $fin == "" { "complete_through is mapped but contract.finality is not declared: ` + finalityChoices + `" },
  if $fin == "source" && $pos != "" && $ct.re_match("""(index\(\s*-1\s*\)|last\(\))\s*\.\s*""" + $pos + """\b|\b""" + $pos + """\b[^|]*\.max\(\)""") { "complete_through reads ` + "`%s`" + ` of the page's own last event, as event_position does: a page's own last position certifies nothing (an event created or made visible later below it is missed), so it is not finality: source; map a watermark the source certifies, or declare finality: append_only_writer if positions are only ever created above every existing one".format($pos) },
  if this.contract.offset_unproven.or(false) && this.complete_through != null { "contract.offset_unproven claims no completeness: complete_through cannot be mapped" },
].filter(m -> m != null)`
}

// checkURLScheme rejects a URL template (field fld, when set) that does not
// start with http:// or https:// (a template that starts with an
// interpolation is checked when it is evaluated): without a scheme every
// fetch would fail, and the partition park, at its first page.
func checkURLScheme(conf *service.ParsedConfig, fld string) error {
	if !conf.Contains(fld) {
		return nil
	}
	raw, err := conf.FieldString(fld)
	if err != nil {
		return err
	}
	lower := strings.ToLower(strings.TrimSpace(raw))
	if strings.HasPrefix(lower, "${!") || strings.HasPrefix(lower, "http://") || strings.HasPrefix(lower, "https://") {
		return nil
	}
	// The template is not quoted: it may hold a credential.
	return fmt.Errorf("%s: the URL template does not start with http:// or https://", fld)
}

// mustDuration parses a constant duration of this file.
func mustDuration(s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		panic(err)
	}
	return d
}
