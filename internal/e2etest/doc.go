// Package e2etest is the one harness of the end-to-end tests: the tests
// that run the real connect binary (internal/e2e, internal/e2eops, the
// simulator's fault test in internal/clustersim) and the in-process stream and
// lease tests (input, provider/httpprovider) share it.
//
// It offers:
//
//   - Connect: cmd/connect built once per test process (plain go build, no
//     race detector: the process under test is the product), removed by
//     Main when the tests end;
//   - SkipUnderShort: -short skips the tests that build the binary or need
//     a server, unless the environment requires them (CI,
//     TIDEMARK_REQUIRE_DYNALITE or TIDEMARK_REQUIRE_SERVERS set);
//   - Start, Run and Proc: child processes in their own process group
//     (killed whole, by pid, when the test ends; on Linux also when the test
//     binary dies), signalled, stopped gracefully or killed, their output
//     kept in a SyncBuffer and printed when the test failed;
//   - SyncBuffer: a goroutine-safe log buffer (Write, String, Count, Tail,
//     Since);
//   - WaitFor and WaitUntil: poll an observable condition (a counter, a
//     store record, a log line) until it holds, failing only after a
//     generous deadline (Patience) with the last state seen; a guard such as
//     Proc.Running fails the wait at once when a process died;
//   - Env (a child's environment, with dummy AWS credentials for the local
//     DynamoDB), FreePort, Tail, and Prometheus text parsing (Scrape,
//     ParseMetrics) for /metrics.
//
// Tests wait on conditions, never on wall-clock bounds: a duration may be
// logged, but how long something took is not asserted (the benchmarks
// measure it). The package does not import Benthos.
package e2etest
