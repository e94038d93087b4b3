// Package scale is tidemark's scale benchmark (docs/scale.md, `make
// bench-scale`): several bin/connect processes share N simulated partitions
// through leases on a local DynamoDB (dynalite), behind a Proxy that counts
// the requests, items and capacity units of every operation.
//
// Usage (bench/cmd/benchscale does this):
//
//  1. o := DefaultOptions(); set o.Endpoint (dynalite), o.Bin, o.Sizes.
//  2. results := Run(ctx, o): for each size, a fresh table; the instances
//     start together; the phases (cold start, idle window, one more
//     instance, kill -9 of one) each end at their state or their timeout,
//     so a run that never balances reports "not balanced after X s".
//  3. rep := &Report{Results: results, Prices: o.Prices, ...};
//     rep.BuildModel() fits the per-request model (idle figure =
//     a·partitions + b·instances) on the sizes steady in their idle window
//     and predicts the others; rep.Markdown() renders the tables and the
//     monthly on-demand estimate (MonthlyUSD, at assumed Prices).
//
// The harness stops every process it started (SIGTERM, then SIGKILL of the
// process group) and binds only 127.0.0.1.
package scale
