// Package runstatus carries a component's verdict on the run to the
// binary's exit code. Benthos ends a run whose inputs closed with exit code
// 0 whatever made them close; the paginated_partitions input records here
// why its end is a failure (exit_when_complete with parked partitions), and
// cmd/connect exits non-zero with those reasons once Benthos returns.
package runstatus

import (
	"slices"
	"sync"
)

var (
	mu       sync.Mutex
	failures []string
)

// Fail records why the run failed (shown by the binary on exit).
func Fail(reason string) {
	mu.Lock()
	defer mu.Unlock()
	failures = append(failures, reason)
}

// Failures returns the recorded reasons, in order (none: the run did not
// fail).
func Failures() []string {
	mu.Lock()
	defer mu.Unlock()
	return slices.Clone(failures)
}

// ExitCode is the code the binary exits with when the run failed this way.
const ExitCode = 3
