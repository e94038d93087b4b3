package store

import "hash/fnv"

// PartitionIndexKeys is the number of partition keys a store whose keys
// have a write limit each (DynamoDB: 1,000 write units a second) spreads
// its partition index over: one entry per partition under key
// PartitionIndexKey(partition). dynamostore writes and lists them, and the
// scale simulation (internal/clustersim) models the same keys
// (docs/design.md "The partition index": why 16).
const PartitionIndexKeys = 16

// PartitionIndexKey is the partition-index key, in [0,
// PartitionIndexKeys), that lists partition: FNV-1a of its name.
func PartitionIndexKey(partition string) int {
	h := fnv.New32a()
	h.Write([]byte(partition))
	return int(h.Sum32() % PartitionIndexKeys)
}
