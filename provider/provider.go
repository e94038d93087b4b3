// Package provider is the public SDK of tidemark's event sources: the port
// between the paginated_partitions input and a source (fetch one page of one
// partition from one opaque cursor), the values a provider returns
// (types.go) and the redaction of its secrets (secrets.go). The registry
// that puts a provider's config object into the input is package
// provider/registry, the SDK's one package that imports Benthos.
// docs/providers.md is the guide; providertest is the contract suite every
// provider runs against its fake.
//
// Contract for implementations (plugin authors):
//   - Fetch is called with at most one request in flight per partition, but
//     concurrently across partitions.
//   - Cursors are opaque: return the successor exactly as the source issued
//     it. Never parse, order or combine cursors.
//   - Return the events of one response, in source order, with their stable
//     ids and positions, and every piece of completeness evidence the source
//     gives (CompleteThrough, Marker, Sealed). Never invent evidence: a
//     missing watermark is the zero Watermark.
//   - Classify failures: *ExpiredError for a cursor the source no longer
//     honours, *MalformedError for a response that cannot be read, an error
//     that wraps ErrPermanent for a request that retrying cannot fix (the
//     input parks the partition with the error as its reason); anything else
//     is treated as transient and retried with back-off.
//   - Secrets: a provider whose requests carry credentials implements
//     Secrets (secrets.go) and adds them to the input's Redactor, so that
//     no error, log line or park reason shows them.
//   - Contract declares what the source guarantees; classification trusts
//     nothing else. docs/design.md#provider-contract says what each field
//     promises and what the input does with it.
package provider

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Request is one page fetch.
type Request struct {
	Scope     string
	Partition string
	// Cursor is the opaque input cursor; empty means the partition's start.
	Cursor []byte
	// Watermark is the partition's durable complete-through watermark (zero
	// when none), for sources that resume by watermark.
	Watermark Watermark
	// Attempt counts fetches of this (partition, cursor, generation): 0 for
	// the first, greater for retries.
	Attempt int
}

// Provider fetches pages.
type Provider interface {
	// Fetch returns one response for (partition, cursor).
	Fetch(ctx context.Context, req Request) (Response, error)
	// Contract is the source's declared pagination contract.
	Contract() Contract
	// Close releases resources.
	Close(ctx context.Context) error
}

// Partition is a partition a Lister found, with the partitions it
// descends from (a split's parent, a merge's parents; usually none).
type Partition struct {
	Name    string
	Parents []string
}

// Lister is implemented by providers that can discover their partitions.
type Lister interface {
	Partitions(ctx context.Context) ([]Partition, error)
}

// Restarter is implemented by providers that can give a stable boundary to
// restart a partition from (Contract.Recovery = restart_from_boundary or
// fresh_snapshot). The returned cursor is fetched with the partition's
// current durable state (watermark and applied boundary are kept); events
// replayed from it are delivered again and deduplicated downstream. The
// input classifies them like any response of the new generation: receipts
// of older generations are not consulted (docs/design.md#known-gaps).
type Restarter interface {
	RestartCursor(ctx context.Context, from Boundary) ([]byte, error)
}

// Incarnations is implemented by providers whose partitions may declare a
// source incarnation (docs/design.md#source-incarnations): a value that
// changes when the source is deleted and created again under the same name,
// whose positions then start over.
type Incarnations interface {
	// IncarnationCheck reports whether the partitions declare an
	// incarnation, and how often a reading partition checks it.
	IncarnationCheck() (declared bool, every time.Duration)
	// Incarnation returns the partition's current incarnation (never
	// empty). Errors are classified as Fetch's; the input retries and does
	// not read the partition until it is known.
	Incarnation(ctx context.Context, scope, partition string) (string, error)
}

// Boundary is the durable state of a partition a restart starts from.
type Boundary struct {
	Partition string
	// Watermark is the durable complete-through watermark (zero: none).
	Watermark Watermark
	// Applied, when HasApplied, is the durable applied boundary: the
	// greatest position of an event with a durable terminal outcome (for
	// sources that resume after a sequence number).
	Applied    Position
	HasApplied bool
	// AppliedID is the stable id of the event at Applied, as the page
	// that applied it gave it (for sources that resume after an event id);
	// empty when unknown.
	AppliedID string
	// Expired reports that the restart follows an expired cursor (the
	// source no longer honours the durable one); otherwise it follows
	// unprovable divergence or a refused promotion.
	Expired bool
}

var (
	// ErrExpired is the sentinel of *ExpiredError.
	ErrExpired = errors.New("provider: cursor expired")
	// ErrMalformed is the sentinel of *MalformedError.
	ErrMalformed = errors.New("provider: malformed response")
	// ErrPermanent marks a failure that retrying the same request cannot
	// fix (a rejected credential, a request that cannot be built from this
	// cursor). Providers wrap it; the input parks the partition.
	ErrPermanent = errors.New("provider: permanent failure")
)

// ExpiredError reports a cursor the source no longer honours (HTTP 410,
// "required revision has been compacted", syncStateNotFound).
type ExpiredError struct {
	Partition string
	Reason    string
}

func (e *ExpiredError) Error() string {
	return fmt.Sprintf("provider: partition %s: cursor expired: %s", e.Partition, e.Reason)
}

// Unwrap makes errors.Is(err, ErrExpired) hold.
func (e *ExpiredError) Unwrap() error { return ErrExpired }

// MalformedError reports a response that could not be mapped to events.
type MalformedError struct {
	Partition string
	Reason    string
	Err       error
}

func (e *MalformedError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("provider: partition %s: malformed response: %s: %v", e.Partition, e.Reason, e.Err)
	}
	return fmt.Sprintf("provider: partition %s: malformed response: %s", e.Partition, e.Reason)
}

// Unwrap makes errors.Is(err, ErrMalformed) hold.
func (e *MalformedError) Unwrap() error { return ErrMalformed }
