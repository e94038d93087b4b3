package dynamostore

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/store"
)

// fault is what faultyHTTP does to one request.
type fault int

const (
	// dropResponse sends the request (the server applies it) and then
	// reports a connection reset: the lost-response case.
	dropResponse fault = 1 + iota
	// throttle answers ProvisionedThroughputExceededException without
	// sending the request.
	throttle
	// serverError answers HTTP 500 without sending the request.
	serverError
	// hang never answers: the request is not sent, the call waits until
	// its context ends.
	hang
	// applyThenHang sends the request (the server applies it) and then
	// withholds the answer until the call's context ends: a write applied
	// whose answer came too late.
	applyThenHang
)

// faultyHTTP injects scripted faults into the requests of chosen
// operations; other requests pass through to the SDK's own HTTP client.
type faultyHTTP struct {
	next dynamodb.HTTPClient
	mu   sync.Mutex
	plan map[string][]fault // operation -> faults for its next requests
	seen map[string]int
}

func (f *faultyHTTP) script(op string, faults ...fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.plan[op] = append(f.plan[op], faults...)
}

// resetSent zeroes the request counts (after a test's setup).
func (f *faultyHTTP) resetSent() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.seen)
}

func (f *faultyHTTP) sent(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seen[op]
}

func (f *faultyHTTP) Do(req *http.Request) (*http.Response, error) {
	op := strings.TrimPrefix(req.Header.Get("X-Amz-Target"), "DynamoDB_20120810.")
	f.mu.Lock()
	f.seen[op]++
	var next fault
	if q := f.plan[op]; len(q) > 0 {
		next, f.plan[op] = q[0], q[1:]
	}
	f.mu.Unlock()
	switch next {
	case dropResponse:
		resp, err := f.next.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
		return nil, &url.Error{Op: "Post", URL: req.URL.String(), Err: &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}}
	case throttle:
		return jsonError(req, 400, "ProvisionedThroughputExceededException"), nil
	case serverError:
		return jsonError(req, 500, "InternalServerError"), nil
	case hang:
		<-req.Context().Done()
		return nil, req.Context().Err()
	case applyThenHang:
		resp, err := f.next.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
		<-req.Context().Done()
		return nil, req.Context().Err()
	}
	return f.next.Do(req)
}

func jsonError(req *http.Request, status int, code string) *http.Response {
	body := `{"__type":"com.amazonaws.dynamodb.v20120810#` + code + `","message":"injected by the test"}`
	return &http.Response{
		StatusCode:    status,
		Status:        http.StatusText(status),
		Header:        http.Header{"Content-Type": {"application/x-amz-json-1.0"}, "X-Amzn-Requestid": {"test"}},
		Body:          io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}

// newFaultyStore returns a store whose requests pass through a faultyHTTP,
// with fast back-off so retry tests stay quick.
func newFaultyStore(t *testing.T, maxRetries int, opts ...func(*DynamoConfig)) (*DynamoStore, *faultyHTTP) {
	t.Helper()
	f := &faultyHTTP{plan: map[string][]fault{}, seen: map[string]int{}}
	s := newTestStore(t, append([]func(*DynamoConfig){func(c *DynamoConfig) {
		c.MaxRetries = maxRetries
		c.MaxBackoff = 5 * time.Millisecond
		c.ClientOptions = append(c.ClientOptions, func(o *dynamodb.Options) {
			f.next = o.HTTPClient
			o.HTTPClient = f
		})
	}}, opts...)...)
	return s, f
}

func createAt(t testing.TB, s store.Store, k store.Key, cursor string) store.Checkpoint {
	t.Helper()
	cp, err := s.CreateCheckpoint(t.Context(), store.Checkpoint{Key: k, Cursor: []byte(cursor), Generation: 1})
	require.NoError(t, err)
	return cp
}

var faultKey = store.Key{Scope: "orders", Partition: "p0"}

// Without retries, a promotion whose response is lost returns an error
// although it was applied; ResolvePromotion finds it by reading.
func TestLostResponseResolvedByReading(t *testing.T) {
	s, f := newFaultyStore(t, -1)
	cp := createAt(t, s, faultKey, "C41")
	f.resetSent()
	p := store.Promotion{Key: faultKey, FromCursor: cp.Cursor, FromGeneration: 1, To: []byte("N8"), WitnessID: "attempt-2"}
	f.script("UpdateItem", dropResponse)
	_, err := s.Promote(t.Context(), p)
	require.Error(t, err)
	require.NotErrorIs(t, err, store.ErrFenced)
	require.Contains(t, err.Error(), "resolve by reading")

	got, applied, err := store.ResolvePromotion(t.Context(), s, p)
	require.NoError(t, err)
	require.True(t, applied, "the write happened; only its response was lost")
	require.Equal(t, uint64(2), got.Generation)
	require.Equal(t, 1, f.sent("UpdateItem"), "resolving must not write again")
}

// With retries, the SDK resends the lost promotion; its condition now fails
// on the promotion's own first attempt, which Promote recognises by the
// witness id: success, one generation, no second write applied.
func TestLostResponseRetriedBySDK(t *testing.T) {
	s, f := newFaultyStore(t, 3)
	cp := createAt(t, s, faultKey, "C41")
	f.resetSent()
	p := store.Promotion{Key: faultKey, FromCursor: cp.Cursor, FromGeneration: 1, To: []byte("N8"), WitnessID: "attempt-2"}
	f.script("UpdateItem", dropResponse)
	got, err := s.Promote(t.Context(), p)
	require.NoError(t, err)
	require.Equal(t, uint64(2), got.Generation)
	require.Equal(t, "attempt-2", got.PromotedWitness)
	require.Equal(t, 2, f.sent("UpdateItem"))
	stored, err := s.LoadCheckpoint(t.Context(), faultKey)
	require.NoError(t, err)
	require.Equal(t, got, stored)
}

// Throttling and 5xx are retried with bounded back-off; past MaxRetries the
// error is returned and nothing was written.
func TestThrottlingRetriedAndBounded(t *testing.T) {
	s, f := newFaultyStore(t, 3)
	cp := createAt(t, s, faultKey, "C0")
	f.resetSent()
	f.script("UpdateItem", throttle, serverError, throttle)
	next, err := s.Promote(t.Context(), store.Promotion{Key: faultKey, FromCursor: cp.Cursor, FromGeneration: 1, To: []byte("C1"), WitnessID: "w1"})
	require.NoError(t, err)
	require.Equal(t, uint64(2), next.Generation)
	require.Equal(t, 4, f.sent("UpdateItem"), "3 faults, then the write")

	f.script("UpdateItem", throttle, throttle, throttle, throttle, throttle)
	_, err = s.Promote(t.Context(), store.Promotion{Key: faultKey, FromCursor: next.Cursor, FromGeneration: 2, To: []byte("C2"), WitnessID: "w2"})
	require.Error(t, err)
	require.Contains(t, err.Error(), "ProvisionedThroughputExceeded")
	require.Equal(t, 4+4, f.sent("UpdateItem"), "MaxRetries 3 = 4 attempts")
	stored, err := s.LoadCheckpoint(t.Context(), faultKey)
	require.NoError(t, err)
	require.Equal(t, next, stored)
}

// A failed condition is never retried by the SDK: one UpdateItem, then the
// consistent read of the winner.
func TestConditionFailureNotRetried(t *testing.T) {
	rc := NewRequestCounter()
	s := newTestStore(t, func(c *DynamoConfig) { c.ClientOptions = append(c.ClientOptions, rc.Option()) })
	cp := createAt(t, s, faultKey, "C0")
	rc.Reset()
	_, err := s.Promote(t.Context(), store.Promotion{Key: faultKey, FromCursor: []byte("stale"), FromGeneration: 1, To: []byte("C1"), WitnessID: "w1"})
	var fe *store.FenceError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, cp, *fe.Winner)
	require.Equal(t, map[string]int64{"UpdateItem": 1, "GetItem": 1}, rc.Snapshot())
}

// A promotion that gets no answer within the call timeout fails with
// *CallTimeoutError, an unknown outcome (not a fence): whether the store
// never applied it or applied it with its answer lost, ResolvePromotion
// decides by reading, and never writes again.
func TestTimedOutPromotionIsUnknownOutcome(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fault   fault
		applied bool
	}{
		{"never applied", hang, false},
		{"applied, answer too late", applyThenHang, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, f := newFaultyStore(t, 0, func(c *DynamoConfig) { c.CallTimeout = 300 * time.Millisecond })
			cp := createAt(t, s, faultKey, "C41")
			f.resetSent()
			p := store.Promotion{Key: faultKey, FromCursor: cp.Cursor, FromGeneration: 1, To: []byte("N8"), WitnessID: "attempt-2"}
			f.script("UpdateItem", tc.fault)
			_, err := s.Promote(t.Context(), p)
			var te *CallTimeoutError
			require.ErrorAs(t, err, &te)
			require.Equal(t, "UpdateItem", te.Operation)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			require.NotErrorIs(t, err, store.ErrFenced)
			require.Contains(t, err.Error(), "resolve by reading")

			got, applied, err := store.ResolvePromotion(t.Context(), s, p)
			require.NoError(t, err)
			require.Equal(t, tc.applied, applied)
			require.Equal(t, 1, f.sent("UpdateItem"), "resolving must not write again")
			if tc.applied {
				require.Equal(t, uint64(2), got.Generation)
			} else {
				require.Equal(t, cp, got)
			}
		})
	}
}

// Every call is bounded, reads included: a hung GetItem fails after the
// call timeout, and the next call goes through.
func TestHungReadFailsAfterCallTimeout(t *testing.T) {
	s, f := newFaultyStore(t, 3, func(c *DynamoConfig) { c.CallTimeout = 300 * time.Millisecond })
	cp := createAt(t, s, faultKey, "C0")
	f.script("GetItem", hang)
	_, err := s.LoadCheckpoint(t.Context(), faultKey)
	var te *CallTimeoutError
	require.ErrorAs(t, err, &te)
	require.Equal(t, "GetItem", te.Operation)
	got, err := s.LoadCheckpoint(t.Context(), faultKey)
	require.NoError(t, err)
	require.Equal(t, cp, got)
}
