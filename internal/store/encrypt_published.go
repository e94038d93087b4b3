package store

// The membership and frontier records hold no cursors: FrontierCache and
// MembershipCache read them through a wrapper's Unwrap (encrypt.go).

// shardedOf returns st, or the store it wraps (Unwrap), as a
// ShardedFrontier when it is one.
func shardedOf(st ScopeStore) (ShardedFrontier, bool) {
	for range 8 {
		if sf, ok := st.(ShardedFrontier); ok {
			return sf, true
		}
		u, ok := st.(interface{ Unwrap() Store })
		if !ok {
			return nil, false
		}
		st = u.Unwrap()
	}
	return nil, false
}

// epochReaderOf is shardedOf for MembershipEpochReader.
func epochReaderOf(st ScopeStore) (MembershipEpochReader, bool) {
	for range 8 {
		if r, ok := st.(MembershipEpochReader); ok {
			return r, true
		}
		u, ok := st.(interface{ Unwrap() Store })
		if !ok {
			return nil, false
		}
		st = u.Unwrap()
	}
	return nil, false
}
