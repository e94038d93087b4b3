package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/smithy-go/middleware"
)

// DefaultCallTimeout is the default DynamoConfig.CallTimeout.
const DefaultCallTimeout = 5 * time.Second

// CallTimeoutError is the error of a DynamoDB call that got no answer
// within DynamoConfig.CallTimeout (all of its attempts together). It
// unwraps to context.DeadlineExceeded. For a write, the outcome is unknown:
// the request may have been applied with its answer lost or late, so the
// caller resolves it by reading (store.ResolvePromotion, a Load), never by
// writing again blindly.
type CallTimeoutError struct {
	// Operation is the DynamoDB operation (GetItem, UpdateItem, ...).
	Operation string
	// Timeout is the deadline the call had.
	Timeout time.Duration
}

func (e *CallTimeoutError) Error() string {
	return fmt.Sprintf("DynamoDB %s got no answer within %s (call_timeout; the store is slow or unreachable: retried)", e.Operation, e.Timeout)
}

// Unwrap makes errors.Is(err, context.DeadlineExceeded) hold.
func (e *CallTimeoutError) Unwrap() error { return context.DeadlineExceeded }

// withCallTimeout adds to a client's stack a deadline of d on every call
// (all its attempts and back-offs together), so a store that accepts a
// connection and never answers fails the call after d instead of stalling
// its caller for ever. The caller's own cancellation is passed through
// unchanged.
func withCallTimeout(d time.Duration) func(*middleware.Stack) error {
	return func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("tidemarkCallTimeout",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				cctx, cancel := context.WithTimeout(ctx, d)
				defer cancel()
				out, md, err := next.HandleInitialize(cctx, in)
				if err != nil && ctx.Err() == nil && errors.Is(cctx.Err(), context.DeadlineExceeded) {
					err = &CallTimeoutError{Operation: middleware.GetOperationName(ctx), Timeout: d}
				}
				return out, md, err
			}), middleware.Before)
	}
}
