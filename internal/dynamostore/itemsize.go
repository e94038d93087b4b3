package dynamostore

// noteItem records the size of an item the store puts (ItemSize), for
// LargestItemWritten.
func (s *DynamoStore) noteItem(it item) {
	n := int64(ItemSize(it))
	for {
		cur := s.largest.Load()
		if n <= cur || s.largest.CompareAndSwap(cur, n) {
			return
		}
	}
}

// LargestItemWritten is the size (ItemSize, DynamoDB's rule) of the
// largest membership, partition-index or frontier item this store wrote:
// the contract suite checks it stays well under DynamoDB's 400 KB item
// limit at 100,000 partitions.
func (s *DynamoStore) LargestItemWritten() int { return int(s.largest.Load()) }
