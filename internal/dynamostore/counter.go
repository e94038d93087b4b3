package dynamostore

import (
	"context"
	"maps"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"
)

// RequestCounter counts the HTTP requests a DynamoDB client sends, by
// operation name ("UpdateItem", "GetItem", ...). It sits in the SDK's
// middleware stack after the retry middleware, so every attempt counts:
// it measures what the table really receives. Attach it with Option:
//
//	rc := dynamostore.NewRequestCounter()
//	cfg.ClientOptions = append(cfg.ClientOptions, rc.Option())
//
// It is safe for concurrent use.
type RequestCounter struct {
	mu     sync.Mutex
	counts map[string]int64
}

// NewRequestCounter returns a counter at zero.
func NewRequestCounter() *RequestCounter { return &RequestCounter{counts: map[string]int64{}} }

// Option returns the client option that installs the counter.
func (c *RequestCounter) Option() func(*dynamodb.Options) {
	return func(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, c.register) }
}

func (c *RequestCounter) register(stack *middleware.Stack) error {
	op := stack.ID()
	return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("tidemark.RequestCounter",
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			c.mu.Lock()
			c.counts[op]++
			c.mu.Unlock()
			return next.HandleFinalize(ctx, in)
		}), middleware.After)
}

// Count returns the number of requests of one operation.
func (c *RequestCounter) Count(op string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[op]
}

// Total returns the number of requests of every operation.
func (c *RequestCounter) Total() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n int64
	for _, v := range c.counts {
		n += v
	}
	return n
}

// Snapshot returns a copy of the counts by operation.
func (c *RequestCounter) Snapshot() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.counts)
}

// Reset sets every count to zero.
func (c *RequestCounter) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.counts)
}
