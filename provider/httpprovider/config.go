package httpprovider

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/redpanda-data/benthos/v4/public/bloblang"
	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/redact"
	"github.com/tidemark/tidemark/internal/sdkcoord"
	"github.com/tidemark/tidemark/provider"
)

// Backoff is the exponential back-off between retries of transient failures.
type Backoff struct {
	// Initial is the wait before the first retry; it doubles on every retry
	// (zero: 500ms).
	Initial time.Duration
	// Max bounds every wait, a Retry-After header included (zero: 10s).
	Max time.Duration
	// MaxElapsed, when not zero, ends the retries of one fetch once that
	// much time has passed since its first request (max_retries bounds
	// them too).
	MaxElapsed time.Duration
}

// Mappings are the Bloblang mappings from a response to a provider.Response.
// See the package documentation for what they run against.
type Mappings struct {
	// Events returns the array of events (nil: `root = this`).
	Events *bloblang.Executor
	// EventID returns an event's stable id (nil: `root = this.id.string()`).
	EventID *bloblang.Executor
	// EventPosition returns an event's position (nil: `root = this.position`).
	EventPosition *bloblang.Executor
	// EventPayload returns an event's payload (nil: `root = this`).
	EventPayload *bloblang.Executor
	// EventSemantic, when not nil, returns the projection whose digest is
	// witnessed.
	EventSemantic *bloblang.Executor
	// Successor returns the successor cursor. Required.
	Successor *bloblang.Executor
	// HasMore, CompleteThrough, Marker and Sealed are optional (nil: the
	// response carries no such evidence).
	HasMore         *bloblang.Executor
	CompleteThrough *bloblang.Executor
	Marker          *bloblang.Executor
	Sealed          *bloblang.Executor

	// sources are the texts of the per-event mappings, by field name, when
	// known (FromParsed, and the defaults): they select the fast path.
	sources map[string]string
}

// Config is the plain configuration of a Provider. FromParsed fills it from
// the spec; Go callers may build it directly. Fields documented with a zero
// default take it when left zero.
type Config struct {
	// URL of one page, interpolated with the request metadata. Required.
	URL *service.InterpolatedString
	// Verb is the HTTP method (zero: GET).
	Verb string
	// Headers are interpolated with the request metadata.
	Headers map[string]*service.InterpolatedString
	// Body, when not nil, is interpolated and sent as the request body.
	Body *service.InterpolatedString
	// Timeout bounds one request, reading the body included (zero: 30s).
	Timeout time.Duration
	// RateLimit names a rate_limit resource of Resources ("" = none).
	RateLimit string
	// PartitionRateLimit, when its Count and Interval are positive, limits
	// each partition's page, bootstrap and validate requests on its own
	// (instead of RateLimit; limits.go).
	PartitionRateLimit PartitionRateLimit
	// MaxRetries is how often a transient failure is retried within one
	// fetch. Zero means no retry (the spec's default is 5).
	MaxRetries int
	// Backoff between retries.
	Backoff Backoff
	// TransientBodyContains are substrings of a non-2xx body (matched
	// case-insensitively) that make its status transient: retried like a
	// 429 or 5xx, never parking the partition (Kinesis answers throttling,
	// ProvisionedThroughputExceededException, with HTTP 400).
	TransientBodyContains []string
	// MaxResponseBytes bounds the body read (zero: 64 MiB).
	MaxResponseBytes int64
	// Format is how a 2xx body is read: "json" (zero: json) or "xml".
	Format string

	// Mappings from a response to events and evidence.
	Mappings Mappings

	// Contract is the declared contract. EmptyPage and Recovery must be set
	// (their zero values are invalid); DensePositions implies
	// OrderedPositions. Finality must be set when Mappings.CompleteThrough
	// is (provider.FinalityNone records the watermark without a frontier);
	// FinalityLag is in the Coordinate's units (nanoseconds for timestamps).
	Contract provider.Contract
	// Coordinate is the kind of complete_through (and of positions, for
	// KindTimestamp). Required.
	Coordinate coord.Kind
	// ExpiredStatusCodes are statuses that mean "cursor expired".
	ExpiredStatusCodes []int
	// ExpiredBodyContains are substrings of a non-2xx body that mean "cursor
	// expired", matched case-insensitively.
	ExpiredBodyContains []string
	// RestartCursor, when not nil, gives the stable-boundary cursor for
	// RestartCursor (nil: the empty cursor, the partition's start).
	RestartCursor *service.InterpolatedString

	// Bootstrap, when not nil, opens every traversal: it runs before the
	// first page at the start (empty cursor) and after a restart, and
	// yields the first cursor (see sequence.go).
	Bootstrap *Bootstrap
	// Pin, when not nil, maps the first answer of a traversal (the
	// bootstrap's, else the first page's) to values carried to every later
	// page of it as request metadata.
	Pin *bloblang.Executor
	// Validate, when not nil, checks a stored cursor before the first
	// fetch from it after start-up; an invalid one is an expired cursor.
	Validate *Validation
	// Incarnation, when not nil, names each partition's source
	// incarnation (incarnation.go); ValidateInterval is how often a
	// reading partition checks it (zero: 1m).
	Incarnation      *Incarnation
	ValidateInterval time.Duration

	// PartitionsURL, when not nil, lists the partitions; PartitionsMapping
	// maps its body to names (nil: `root = this`).
	PartitionsURL     *service.InterpolatedString
	PartitionsMapping *bloblang.Executor
	// PartitionsVerb is the list request's method (zero: GET);
	// PartitionsBody, when not nil, its body.
	PartitionsVerb string
	PartitionsBody *service.InterpolatedString
	// PartitionsHeaders, when not nil, are the list request's headers
	// (only these are sent); nil: Headers, the page request's.
	PartitionsHeaders map[string]*service.InterpolatedString
	// PartitionsSuccessor, when not nil, maps a list body to the cursor of
	// the list's next page (deleted or null: the list is complete).
	PartitionsSuccessor *bloblang.Executor

	// Client is TLS, proxy and request authentication.
	Client Client

	// Resources give access to the rate limit (may be nil without one).
	Resources *service.Resources
	// Logger may be nil.
	Logger *service.Logger
}

// withDefaults returns c with zero fields that have a default set.
func (c Config) withDefaults() (Config, error) {
	if c.Verb == "" {
		c.Verb = defaultVerb
	}
	c.Verb = strings.ToUpper(c.Verb)
	if c.Timeout == 0 {
		c.Timeout, _ = time.ParseDuration(defaultTimeout)
	}
	if c.Backoff.Initial == 0 {
		c.Backoff.Initial, _ = time.ParseDuration(defaultBackoffInitial)
	}
	if c.Backoff.Max == 0 {
		c.Backoff.Max, _ = time.ParseDuration(defaultBackoffMax)
	}
	if c.PartitionsVerb == "" {
		c.PartitionsVerb = defaultVerb
	}
	if c.Bootstrap != nil {
		b := *c.Bootstrap
		b.Call = b.Call.withDefaults()
		c.Bootstrap = &b
	}
	if c.Validate != nil {
		v := *c.Validate
		v.Call = v.Call.withDefaults()
		c.Validate = &v
	}
	c.incarnationDefaults()
	if c.Format == "" {
		c.Format = formatJSON
	}
	if c.MaxResponseBytes == 0 {
		c.MaxResponseBytes = defaultMaxResponseBytes
	}
	for _, d := range []struct {
		dst     **bloblang.Executor
		mapping string
		field   string
	}{
		{&c.Mappings.Events, defaultEventsMapping, hpFieldEvents},
		{&c.Mappings.EventID, defaultEventIDMapping, hpFieldEventID},
		{&c.Mappings.EventPosition, defaultPositionMapping, hpFieldEventPosition},
		{&c.Mappings.EventPayload, defaultPayloadMapping, hpFieldEventPayload},
		{&c.PartitionsMapping, defaultPartitionsMap, ""},
	} {
		if *d.dst != nil {
			continue
		}
		if d.field != "" {
			if c.Mappings.sources == nil {
				c.Mappings.sources = map[string]string{}
			}
			c.Mappings.sources[d.field] = d.mapping
		}
		exec, err := bloblang.Parse(d.mapping)
		if err != nil {
			return c, fmt.Errorf("httpprovider: default mapping %q: %w", d.mapping, err)
		}
		*d.dst = exec
	}
	if c.Contract.DensePositions {
		c.Contract.OrderedPositions = true
	}
	if c.Contract.PositionKind == provider.KindNone {
		c.Contract.PositionKind = sdkcoord.SDKKind(defaultPositionKind(c.Coordinate))
	}
	return c, nil
}

// validate reports the first setting New cannot honour.
func (c Config) validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.Format != formatJSON && c.Format != formatXML {
		bad("format %q is not json or xml", c.Format)
	}
	if c.URL == nil {
		bad("url is required")
	}
	if !validToken(c.Verb) {
		bad("verb %q is not an HTTP method", c.Verb)
	}
	for name := range c.Headers {
		if !validToken(name) {
			bad("header name %q is not a valid HTTP header name", name)
		}
	}
	for name := range c.PartitionsHeaders {
		if !validToken(name) {
			bad("partitions_headers: header name %q is not a valid HTTP header name", name)
		}
	}
	if c.Timeout < 0 {
		bad("timeout %s is negative", c.Timeout)
	}
	if c.MaxRetries < 0 {
		bad("max_retries %d is negative", c.MaxRetries)
	}
	if c.Backoff.Initial < 0 || c.Backoff.Max < c.Backoff.Initial {
		bad("backoff: want 0 < initial_interval (%s) <= max_interval (%s)", c.Backoff.Initial, c.Backoff.Max)
	}
	if c.Backoff.MaxElapsed < 0 {
		bad("backoff: max_elapsed_time %s is negative", c.Backoff.MaxElapsed)
	}
	if c.MaxResponseBytes < 0 {
		bad("max_response_bytes %d is negative", c.MaxResponseBytes)
	}
	if c.Mappings.Successor == nil {
		bad("successor mapping is required")
	}
	switch c.Contract.EmptyPage {
	case provider.EmptyNoEvidence, provider.EmptyEndOfData, provider.EmptyFinalThroughWatermark, provider.EmptyFollowsSuccessor:
	default:
		bad("contract.empty_page %s is not set", c.Contract.EmptyPage)
	}
	switch c.Contract.Recovery {
	case provider.RecoveryPark, provider.RecoveryRestartFromBoundary, provider.RecoveryFreshSnapshot:
	default:
		bad("contract.recovery %s is not set", c.Contract.Recovery)
	}
	switch c.Coordinate {
	case coord.KindInteger, coord.KindDecimal, coord.KindTimestamp, coord.KindString:
	default:
		bad("contract.coordinate %s is not integer, decimal, timestamp or string", c.Coordinate)
	}
	if err := c.Contract.ValidPositionKind(); err != nil {
		bad("contract.position_type: %v (dense means the next required position is known)", err)
	}
	if c.Contract.WatermarkCoversPositions && sdkcoord.Kind(c.Contract.PositionKind) != c.Coordinate {
		bad("contract.watermark_covers_positions needs positions in the watermark's coordinate: position_type is %s, coordinate %s", c.Contract.PositionKind, c.Coordinate)
	}
	if c.Contract.HasFirstPosition() && !c.Contract.DensePositions {
		bad("contract.first_position needs positions: dense: only dense positions say that nothing lies between the origin and the first event")
	}
	c.validateFinality(bad)
	if c.Contract.EventsMayBeWithdrawn && !c.Contract.WatermarkCoversPositions {
		bad("contract.events_may_be_withdrawn needs watermark_covers_positions: a withdrawn event is accepted only when the retry's watermark covers its position")
	}
	if err := c.Contract.Validate(); err != nil && errs == nil {
		bad("contract.pagination: %v", err)
	}
	if c.Contract.Rereads() && c.Mappings.CompleteThrough != nil {
		bad("contract.reread_window: complete_through cannot also be mapped: under a re-read window the watermark is the pass's boundary less the window")
	}
	if c.Contract.Rereads() && c.Contract.EffectiveFinality() == provider.FinalityLag && c.Coordinate != sdkcoord.Kind(c.Contract.EffectivePositionKind()) {
		bad("contract.reread_window with finality lag needs positions in the watermark's coordinate: position_type is %s, coordinate %s", c.Contract.EffectivePositionKind(), c.Coordinate)
	}
	if c.Contract.Rereads() && c.RestartCursor == nil {
		bad("contract.reread_window needs a restart_cursor built from the applied position: each pass restarts from the window's start")
	}
	if c.Contract.OffsetUnproven && c.Mappings.CompleteThrough != nil {
		bad("contract.offset_unproven claims no completeness: complete_through cannot be mapped")
	}
	if b := c.Bootstrap; b != nil {
		b.Call.validate("bootstrap", bad)
		if b.Cursor == nil {
			bad("bootstrap.cursor mapping is required")
		}
	}
	if v := c.Validate; v != nil {
		v.Call.validate("validate", bad)
		if v.Valid == nil {
			bad("validate.valid mapping is required")
		}
	}
	c.incarnationValidate(bad)
	for _, code := range c.ExpiredStatusCodes {
		if code < 100 || code > 599 || (code >= 200 && code <= 299) {
			bad("contract.expired_status_codes: %d is not a non-2xx HTTP status", code)
		}
	}
	for _, s := range c.ExpiredBodyContains {
		if s == "" {
			bad("contract.expired_body_contains: an empty string would match every body")
		}
	}
	for _, s := range c.TransientBodyContains {
		if s == "" {
			bad("transient_body_contains: an empty string would match every body")
		}
	}
	if l := c.PartitionRateLimit; (l.Count != 0 || l.Interval != 0) && (l.Count <= 0 || l.Interval <= 0) {
		bad("partition_rate_limit: count and interval must both be positive (got %d per %s)", l.Count, l.Interval)
	}
	if c.RateLimit != "" {
		if c.Resources == nil || !c.Resources.HasRateLimit(c.RateLimit) {
			bad("rate_limit resource %q is not found", c.RateLimit)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("httpprovider: invalid config: %w", err)
	}
	return nil
}

// finalityChoices is what an error about an undeclared finality offers.
const finalityChoices = "declare contract.finality: source (the source certifies it with finality: a provider watermark or coverage marker, nothing can later appear at or below it), " +
	"append_only_writer (your assertion that positions are only ever created above every existing one: one writer with time-ordered keys, a log) " +
	"or lag (with contract.finality_lag, a documented bound on late arrival); or finality: none to record it in the witness without ever advancing the frontier"

// validateFinality reports a finality the input cannot honour: a mapped
// complete_through without a declared finality, coverage fields without
// source finality, and a lag that does not fit the coordinate.
func (c Config) validateFinality(bad func(string, ...any)) {
	f := c.Contract.Finality
	switch {
	case f > provider.FinalityLag:
		bad("contract.finality %s is not none, source, append_only_writer or lag", f)
		return
	case f == 0 && c.Mappings.CompleteThrough != nil:
		bad("complete_through is mapped but contract.finality is not declared: a page's own last position or key, or the request's time, certifies nothing; %s", finalityChoices)
	}
	if f != provider.FinalitySource {
		if c.Contract.WatermarkCoversPositions {
			bad("contract.watermark_covers_positions needs finality: source, not %s: only a watermark the source certifies proves that no event of a page's range was skipped (an asserted or lagged watermark advances the frontier but never covers a gap)", f)
		}
		if c.Contract.EmptyPage == provider.EmptyFinalThroughWatermark {
			bad("contract.empty_page final_through_watermark needs finality: source, not %s: only a watermark the source certifies makes an empty page evidence", f)
		}
	}
	switch {
	case f == provider.FinalityLag && c.Coordinate == coord.KindString:
		bad("contract.finality lag needs an integer, decimal or timestamp coordinate, not string: a string has no arithmetic to subtract a lag from")
	case f == provider.FinalityLag && c.Contract.FinalityLag <= 0:
		bad("contract.finality lag needs a positive contract.finality_lag (a duration for a timestamp coordinate, an integer otherwise)")
	case f != provider.FinalityLag && c.Contract.FinalityLag != 0:
		bad("contract.finality_lag is set but contract.finality is %s, not lag", f)
	}
}

// validToken reports whether s is an RFC 9110 token (methods, header names).
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// New validates conf and returns a provider.
func New(conf Config) (*Provider, error) {
	conf, err := conf.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := conf.validate(); err != nil {
		return nil, err
	}
	expired := make(map[int]bool, len(conf.ExpiredStatusCodes))
	for _, code := range conf.ExpiredStatusCodes {
		expired[code] = true
	}
	if err := conf.Client.validate(); err != nil {
		return nil, fmt.Errorf("httpprovider: %w", err)
	}
	transport, err := conf.Client.transport()
	if err != nil {
		return nil, fmt.Errorf("httpprovider: %w", err)
	}
	client := &http.Client{Transport: transport, CheckRedirect: sameHostRedirects}
	red := redact.New(redactCapacity)
	red.Add(conf.Client.Secrets...)
	// The user info of the proxy and token URLs: net/http sends the proxy's
	// as Proxy-Authorization, out of the request's headers. Registered now
	// and again with every request (the set keeps the values added most
	// recently); the request URLs' own as each request is built.
	var configured []*url.Userinfo
	for _, raw := range []string{conf.Client.ProxyURL, conf.Client.OAuth2.TokenURL} {
		if u, err := url.Parse(raw); err == nil && u.User != nil {
			red.AddUserinfo(u.User)
			configured = append(configured, u.User)
		}
	}
	p := &Provider{cfg: conf}
	auth, err := newAuthenticator(conf.Client, client, tokenOptions{
		timeout: conf.Timeout, attempts: TokenAttempts, backoff: func(a int) time.Duration { return p.backoff(a, 0) },
		log: conf.Logger, red: red,
	})
	if err != nil {
		return nil, fmt.Errorf("httpprovider: %w", err)
	}
	*p = Provider{
		red:       red,
		userinfos: configured,
		cfg:       conf,
		expired:   expired,
		log:       conf.Logger,
		client:    client,
		auth:      auth,
		fast:      newFastMappings(conf.Mappings.sources),
		limiter:   newPartitionLimiter(conf.PartitionRateLimit),
	}
	return p, nil
}

// TokenAttempts is how many token requests one OAuth2 token fetch makes
// (with the provider's back-off between them) before the page request
// fails as a transient error (retried in turn by max_retries).
const TokenAttempts = 3

// redactCapacity bounds the provider's redaction set (credentials learnt
// as they are sent: a JWT signer makes a new token per request).
const redactCapacity = 256

// sameHostRedirects follows at most 10 redirects, and only to the same
// scheme and host: custom headers (API keys) are forwarded on a redirect, so
// a redirect elsewhere is returned as the 3xx response (a permanent
// StatusError) instead of being followed.
func sameHostRedirects(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	first := via[0].URL
	if req.URL.Scheme != first.Scheme || req.URL.Host != first.Host {
		return http.ErrUseLastResponse
	}
	return nil
}

// defaultPositionKind is the position kind when position_type is not set:
// the coordinate's kind for timestamp and decimal coordinates, integers
// under integer and string coordinates (a string watermark over numbered
// events is common; string positions are declared explicitly).
func defaultPositionKind(coordinate coord.Kind) coord.Kind {
	switch coordinate {
	case coord.KindTimestamp, coord.KindDecimal:
		return coordinate
	}
	return coord.KindInteger
}
