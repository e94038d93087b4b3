// Package httpprovider is the `http` provider of the paginated_partitions
// input: it fetches one page of one partition of an HTTP/JSON source from one
// opaque cursor, maps the response to events and completeness evidence with
// Bloblang, and states the source's pagination contract as declared in the
// config.
//
// Usage (the caller's duties, in order):
//
//  1. Embed Fields() in the input's spec as an optional object field named
//     "http", and build the provider with FromParsed(conf.Namespace("http"),
//     res, logger) (or New(Config) from Go). FromParsed only reads fields;
//     New validates them and fails on a contract it cannot honour.
//  2. Call Fetch with at most one request in flight per partition. It
//     retries transient failures (connection errors, timeouts, 429, 5xx)
//     itself, max_retries times with exponential back-off and jitter,
//     honouring the rate_limit resource before every request.
//  3. Branch on the error classes, never on error text:
//     *provider.ExpiredError (a status in expired_status_codes or a non-2xx
//     body containing one of expired_body_contains): apply
//     Contract().Recovery, with RestartCursor giving the boundary;
//     *provider.MalformedError (unreadable 2xx response, never retried
//     here): fetch the same cursor again later, a bounded number of times,
//     then park (the input does: fetch_retries);
//     *StatusError with Permanent() true (any other non-2xx, non-retryable
//     status, e.g. 400/401/403/404) and *RequestError (the request cannot
//     be built from the config and cursor): park, retrying cannot help;
//     anything else is transient: try again later.
//  4. Log cursors only through reconcile.CursorHash. Errors returned here never carry
//     header values or raw cursors: transport errors name only the method,
//     the host and a hash of the URL, and response bodies quoted in errors
//     are cut to 256 bytes after the configured header values, the cursor
//     and the URL's query values (those of 6 bytes or more) are redacted
//     from them.
//  5. Call Close when done.
//
// Request interpolation. url, headers, body, restart_cursor and
// partitions_url are interpolated strings evaluated against an empty message
// whose metadata holds partition, cursor (the raw cursor as a string, empty at
// the start; the source's token of an envelope), watermark (the durable
// complete-through watermark in its String form, empty when none), scope and
// attempt (Request.Attempt in decimal), and the values pinned for the
// traversal; restart_cursor also sees applied and applied_id.
//
// Request sequences (sequence.go). An optional bootstrap request opens a
// traversal and yields its first cursor: at the start (the empty cursor)
// and on a restart whose restart_cursor is empty, with metadata reason
// (start, resume, expired), applied and applied_id (the durable applied
// position and the id of its event) besides partition, watermark, scope
// and attempt. An optional pin mapping over the first answer of a traversal
// yields values every later page request of it sees as metadata. With
// either, cursors are envelopes (the source's token, which page requests
// see as `cursor`, and the pinned values, or a pending bootstrap): the core
// stores and compares them opaquely, so the pinned values are as durable as
// the token; a cursor that is not an envelope is read as a bare token. An
// optional validation request checks a stored cursor before the first
// fetch from it after start-up; "invalid" is a *provider.ExpiredError.
//
// Response mappings. Every mapping runs against the response body parsed as
// JSON (numbers kept exact) with metadata: each response header under its
// lowercased name (repeated headers joined with ", "), then the request
// metadata above, then status (the HTTP status code as an integer); later
// keys win on a name clash. The per-event mappings (event_id,
// event_position, event_payload, event_semantic) run against each element of
// the array returned by events, with the same metadata. A mapping result of
// deleted() or null means "absent"; because Benthos represents a string and
// a null result alike, the string "null" also reads as absent.
//
// Positions and watermarks. Positions are of the contract's position_type
// (default: the coordinate for timestamp and decimal, integer otherwise):
// int64 from JSON numbers or numeric strings; unsigned decimals of any
// length from digit strings (or exact JSON numbers); RFC 3339 strings (or
// Unix seconds) as Unix nanoseconds; byte-ordered strings from strings
// only. complete_through is read in the coordinate the same way, so a
// position and a watermark of one kind compare (watermark_covers_positions).
// contract.first_position, under dense positions only, is read as a
// position of the position_type: the declared origin the first page of a
// traversal must begin at (provider.Contract.FirstPosition).
//
// Finality. A mapped complete_through needs contract.finality (New refuses
// it otherwise): source, append_only_writer, lag (with finality_lag, in the
// coordinate's units: a duration for timestamps) or none. The core decides
// what it becomes (provider.Contract.Final); only source makes it coverage
// evidence, so watermark_covers_positions and final_through_watermark need
// it. ObjectLint is the lint rule of the http object that says the same at
// lint time.
package httpprovider
