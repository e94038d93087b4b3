package input

import (
	"context"
	"sync"
)

// MaxPagesInFlightCeiling is the hard ceiling of max_pages_in_flight: a
// larger value is lowered to it (with a warning), so that the pages one
// partition holds stay bounded in count whatever the config says.
const MaxPagesInFlightCeiling = 1024

// DefaultMaxBytesInFlight is the default max_bytes_in_flight: 64 MiB.
const DefaultMaxBytesInFlight = 64 << 20

// byteBudget caps the bytes the pages in flight of one input hold
// (max_bytes_in_flight): a partition does not start fetching a page ahead
// while the input's pages hold the budget or more. A partition that holds
// no page never waits, so every partition makes progress: the pages of an
// input hold at most max + (number of partitions) * (largest page), and
// the largest page is bounded by the provider (the http provider's
// max_response_bytes).
type byteBudget struct {
	max  int64
	mu   sync.Mutex
	used int64
	peak int64
	held map[string]int64
	// wake is closed (and replaced) whenever bytes are released.
	wake chan struct{}
}

func newByteBudget(max int64) *byteBudget {
	return &byteBudget{max: max, held: map[string]int64{}, wake: make(chan struct{})}
}

// set records that partition part's pages hold n bytes now.
func (b *byteBudget) set(part string, n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	old := b.held[part]
	if n == old {
		return
	}
	if n == 0 {
		delete(b.held, part)
	} else {
		b.held[part] = n
	}
	b.used += n - old
	b.peak = max(b.peak, b.used)
	if n < old {
		close(b.wake)
		b.wake = make(chan struct{})
	}
}

// wait blocks a fetch of partition part while the input's pages hold the
// budget or more and part holds some of them; it returns ctx's error when
// ctx ends first.
func (b *byteBudget) wait(ctx context.Context, part string) error {
	for {
		b.mu.Lock()
		if b.max <= 0 || b.held[part] == 0 || b.used < b.max {
			b.mu.Unlock()
			return nil
		}
		w := b.wake
		b.mu.Unlock()
		select {
		case <-w:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// usage returns the bytes held now and the most ever held.
func (b *byteBudget) usage() (used, peak int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, b.peak
}
