// Package cache is the tidemark_dynamodb Benthos cache: Get, Set, Add (one
// conditional put) and Delete on items of a DynamoDB table, with optional
// expiry. It is a thin Benthos adapter over dynamostore.KV; the table's
// config fields are internal/storeconfig's, shared with the checkpoint store
// (the two may share one table: a cache entry's sort key is "cache", which no
// checkpoint, witness or scope record uses).
//
// Writes here are cache entries, not progress: Set and Delete are
// unconditional, Add is conditional on the key being missing or expired.
// Importing the package registers the component (plugin/ does).
package cache
