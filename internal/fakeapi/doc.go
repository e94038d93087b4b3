// Package fakeapi holds local fakes of the real paginated APIs that the
// examples under config/examples read: the Okta System Log, a Microsoft
// Graph mail delta query, the Zendesk cursor-based incremental ticket
// export, the Stripe events list and a Kubernetes list. Each fake follows
// the pagination, the cursor expiry and the rate-limit answers its API
// documents (each file's doc comment says exactly which documented
// behaviour it follows and what it leaves out), so that an example's `http`
// provider mapping and contract are exercised against pages shaped like
// the real ones. The package does not import Benthos.
//
// Usage:
//
//  1. Start a fake with its constructor (NewOkta, NewGraph, NewZendesk,
//     NewStripe, NewKubernetes) and the credential it must demand. It
//     listens on 127.0.0.1 on a free port (httptest) and is stopped by
//     t.Cleanup.
//  2. Seed it with events (Append, before or while the pipeline runs) and
//     point the example at URL() through its environment variables.
//  3. Script the answers the test needs through the embedded Control:
//     SetLatency (a slow link, so a kill lands mid-run), RateLimit (the
//     API's own rate-limit answer for a window), and the fake's expiry
//     injection (Expire or ExpireNext, whose semantics follow the API).
//  4. Assert with the counters: Throttled and Early (how many rate-limit
//     answers were served, and how many went to requests that came back
//     before the time the previous answer named), ExpiredAnswers, and
//     Served(kind) for API-specific requests (a fresh list, a restart from
//     a time).
//
// All methods are safe for concurrent use. Timestamps come from the host
// clock (the fakes run in the test process, next to the process under
// test).
//
// Shards is the fakes' one API of their own: a sharded event stream with
// one global integer position sequence whose partitions are added and
// split while it is read (GET /partitions lists them with their parents),
// for the end-to-end test of live membership. Its doc comment says what it
// models.
//
// Offset is a REST collection paged by page number, by offset or by keyset
// (`Link: rel="next"`), with sparse row ids and Delete and Insert between
// requests, for the end-to-end tests of the configurations of
// docs/pagination.md.
package fakeapi
