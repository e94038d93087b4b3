// Package layers holds no code: its test pins the layering of the module,
// that the pure core (the partition machine, reconciliation, leases,
// membership, the frontier, publication, coordinates, the store port and
// the provider SDK's contract) imports no Benthos and no AWS package, even
// transitively (docs/design.md#shape-of-the-code).
package layers
