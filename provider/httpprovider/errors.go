package httpprovider

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/tidemark/tidemark/provider"
)

var (
	// ErrPermanent is the provider port's provider.ErrPermanent: a
	// *StatusError whose Permanent() is true, and every *RequestError, wrap
	// it. Fetch and Partitions return it (wrapped); the input parks the
	// partition rather than polls it.
	ErrPermanent = provider.ErrPermanent

	// ErrNoDiscovery is returned by Partitions when partitions_url is not
	// configured.
	ErrNoDiscovery = errors.New("httpprovider: partitions_url is not configured")
)

// StatusError reports a non-2xx response that is not an expired cursor.
type StatusError struct {
	// Partition is the partition fetched ("(partitions_url)" for discovery).
	Partition string
	// Method and Host name the request; the path and query are left out
	// because they can carry the cursor or a credential.
	Method string
	Host   string
	// Status is the HTTP status code.
	Status int
	// Body is at most 256 bytes of the response body, with the configured
	// header values and the cursor redacted.
	Body string
	// Attempts is how many requests were made (retries included).
	Attempts int
	// TransientBody: the body matched transient_body_contains, so a status
	// that is otherwise permanent (a 400) is transient.
	TransientBody bool
	// Redirect, for a 3xx that was not followed (another scheme or host),
	// is where its Location points: the scheme and host, and the hash of
	// the whole Location (its path and query may carry the cursor).
	Redirect string
}

// Permanent reports whether retrying cannot help: every status except 429,
// 5xx and one whose body matched transient_body_contains (those are retried
// max_retries times first and then returned as a transient StatusError).
func (e *StatusError) Permanent() bool { return !retryableStatus(e.Status) && !e.TransientBody }

func (e *StatusError) Error() string {
	kind := "transient"
	if e.Permanent() {
		kind = "permanent"
	}
	return fmt.Sprintf("httpprovider: partition %s: %s %s: HTTP %d %s (%s, after %d attempts)%s: %q",
		e.Partition, e.Method, e.Host, e.Status, http.StatusText(e.Status), kind, e.Attempts, e.redirectText(), e.Body)
}

func (e *StatusError) redirectText() string {
	if e.Redirect == "" {
		return ""
	}
	return ", redirected to " + e.Redirect + ", which is not followed: only redirects to the same scheme and host are (the request's headers, credentials included, would go with it); set the url to the final host"
}

// brief is the error without the partition, for logs that already name it.
func (e *StatusError) brief() string {
	return fmt.Sprintf("%s %s: HTTP %d %s%s: %q", e.Method, e.Host, e.Status, http.StatusText(e.Status), e.redirectText(), e.Body)
}

// Unwrap makes errors.Is(err, ErrPermanent) hold for permanent statuses.
func (e *StatusError) Unwrap() error {
	if e.Permanent() {
		return ErrPermanent
	}
	return nil
}

// RequestError reports a request that cannot be built from the config and
// the cursor (an interpolation that fails on this cursor, a URL that does not
// parse). It is permanent for that cursor.
type RequestError struct {
	Partition string
	// Field is the config field that failed (url, headers.<name>, body,
	// restart_cursor, partitions_url).
	Field string
	// Err is the cause, with header values and the cursor redacted.
	Err error
}

func (e *RequestError) Error() string {
	return fmt.Sprintf("httpprovider: partition %s: building request: %s: %v", e.Partition, e.Field, e.Err)
}

// Unwrap makes errors.Is(err, ErrPermanent) hold.
func (e *RequestError) Unwrap() []error { return []error{ErrPermanent, e.Err} }

func retryableStatus(code int) bool {
	return code == http.StatusTooManyRequests || (code >= 500 && code <= 599)
}
