// Package bench holds tidemark's end-to-end benchmarks (the performance
// model is docs/design.md#performance-model). `make bench` (scripts/bench,
// run under scripts/with-dynalite) runs them all and writes one markdown
// table to .bench/results.md (bench/cmd/benchtable builds it from the raw
// output, .bench/raw.txt).
//
//   - BenchmarkThroughput: simulated source (20 ms per fetch, 100 events per
//     page) -> paginated_partitions -> an output acking at once, P = 1, 4,
//     16, 64, with the DynamoDB store on dynalite, the in-memory store, and
//     the in-memory store behind 5 ms / 10 ms per request; events/s against
//     the limit P*100/0.020 (one fetch in flight per partition).
//   - BenchmarkPlainRead: the physical reference, one goroutine per
//     partition fetching sequentially and discarding, no checkpoint.
//   - BenchmarkStoreCeiling: dynalite alone, the two writes of a page as fast
//     as it answers: the most pages per second it can checkpoint here.
//   - BenchmarkStoreCost: DynamoDB requests per page, by operation
//     (dynamostore.RequestCounter) and by kind (witness put, promotion, receipt,
//     ...), and the write units the server reports (ConsumedCapacity), in
//     steady state and during retries.
//   - BenchmarkPeakRSS: peak RSS of bin/connect (TIDEMARK_BENCH_BIN) over
//     1,000,000 and 4,000,000 events of 64 partitions.
//   - BenchmarkVsPlain: bin/connect running the http provider
//     (tidemark_http.yaml; memory store, and DynamoDB on dynalite) against
//     a plain Redpanda Connect pipeline reading the same pages without
//     witness or checkpoint (plain_http.yaml: read_until over generate,
//     the http processor, the next cursor in a memory cache), one local
//     page server (100 events a page, 20 ms a page, JSON), output drop,
//     P = 1, 16, 64: wall time and CPU per event, and their ratios.
//
// Frontier updates come from internal/frontier's BenchmarkTrackerUpdate.
//
// Each op is one complete run of a fixed size, so run with -benchtime 1x and
// repeat with -count; the outputs are benchstat-friendly:
//
//	./scripts/with-dynalite go test -run '^$' -bench Throughput -benchtime 1x -count 5 ./bench/ > new.txt
//	benchstat old.txt new.txt
//
// Every benchmark also reports the CPU used while it ran, in cores: its own
// (cpu-bench-cores), dynalite's (cpu-dynalite-cores) and everybody else's
// on the machine (cpu-others-cores), and load1 at its end.
package bench
