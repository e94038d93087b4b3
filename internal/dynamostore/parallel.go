package dynamostore

import (
	"context"
	"errors"
	"sync"

	"github.com/tidemark/tidemark/internal/store"
)

// readInParallel calls read for each of n items, at most
// store.ListReadsInFlight at a time, and returns their results in item
// order. The first failure cancels the reads still running and sends no
// more; the error returned is the first in item order that is not the
// cancellation a failed read caused, or the context's error when the
// caller's deadline stopped the loop before every read was sent.
func readInParallel[T any](ctx context.Context, n int, read func(context.Context, int) (T, error)) ([]T, error) {
	results := make([]T, n)
	errs := make([]error, n)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sem := make(chan struct{}, store.ListReadsInFlight)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		if ctx.Err() != nil {
			<-sem
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			results[i], errs[i] = read(ctx, i)
			if errs[i] != nil {
				cancel() // the others stop: the read has failed
			}
		})
	}
	wg.Wait()
	var first error
	for _, err := range errs {
		if err != nil && (first == nil || errors.Is(first, context.Canceled)) {
			first = err
		}
	}
	if first == nil {
		first = ctx.Err()
	}
	if first != nil {
		return nil, first
	}
	return results, nil
}
