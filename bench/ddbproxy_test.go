package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/dynalitetest"
)

// ddbProxy meters what a DynamoDB client in another process (bin/connect
// in BenchmarkVsPlain) sends to dynalite: it forwards every request to the
// endpoint, asks for ReturnConsumedCapacity TOTAL when the request does not
// (dynalite checks no signature; the response is passed back unchanged, its
// CRC32 with it), and counts the write requests and the write capacity
// units the server reports. It is the in-process meter's (meter_test.go)
// counterpart for a client it cannot instrument; it labels nothing by item
// kind: every write of the run counts (the start-up's and the membership's
// and frontier's records too).
type ddbProxy struct {
	URL    string
	target string
	client *http.Client

	mu          sync.Mutex
	writes      int64   // write requests answered 200
	writeUnits  float64 // capacity units those answers reported
	reads       int64
	noCapacity  int64 // successful writes without ConsumedCapacity
	failedCalls int64 // answers other than 200 (conditional check failures, throttles)
}

// writeOps are DynamoDB's write operations (X-Amz-Target's suffix).
var writeOps = map[string]bool{"PutItem": true, "UpdateItem": true, "DeleteItem": true, "BatchWriteItem": true, "TransactWriteItems": true}

var readOps = map[string]bool{"GetItem": true, "Query": true, "Scan": true, "BatchGetItem": true, "TransactGetItems": true}

// maxProxyBody bounds a request or response body the proxy holds.
const maxProxyBody = 32 << 20

func newDDBProxy(tb testing.TB, endpoint string) *ddbProxy {
	tb.Helper()
	p := &ddbProxy{target: endpoint, client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 128}}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	tb.Cleanup(func() {
		_ = srv.Close()
		p.client.CloseIdleConnections()
	})
	p.URL = "http://" + ln.Addr().String()
	return p
}

func (p *ddbProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxProxyBody))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	_, op, _ := strings.Cut(r.Header.Get("X-Amz-Target"), ".")
	if writeOps[op] {
		body = withConsumedCapacity(body)
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, r.Method, p.target+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	for k, v := range r.Header {
		if k != "Content-Length" {
			req.Header[k] = v
		}
	}
	resp, err := p.client.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, maxProxyBody))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	p.count(op, resp.StatusCode, out)
	for k, v := range resp.Header {
		if k != "Content-Length" {
			w.Header()[k] = v
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(out)
}

// withConsumedCapacity returns a request body that asks for the total
// consumed capacity (the body itself when it already asks, or is not a
// JSON object).
func withConsumedCapacity(body []byte) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return body
	}
	if _, ok := m["ReturnConsumedCapacity"]; ok {
		return body
	}
	m["ReturnConsumedCapacity"] = json.RawMessage(`"TOTAL"`)
	b, err := json.Marshal(m)
	if err != nil {
		return body
	}
	return b
}

// count records an answer: a write answered 200 counts with the capacity
// units its ConsumedCapacity reports (one object, or a list for the batch
// and transaction operations).
func (p *ddbProxy) count(op string, status int, out []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if status != http.StatusOK {
		if writeOps[op] || readOps[op] {
			p.failedCalls++
		}
		return
	}
	switch {
	case readOps[op]:
		p.reads++
	case writeOps[op]:
		p.writes++
		units, ok := consumedUnits(out)
		if !ok {
			p.noCapacity++
		}
		p.writeUnits += units
	}
}

func consumedUnits(out []byte) (float64, bool) {
	var r struct {
		ConsumedCapacity json.RawMessage
	}
	if json.Unmarshal(out, &r) != nil || len(r.ConsumedCapacity) == 0 {
		return 0, false
	}
	type cc struct{ CapacityUnits *float64 }
	var one cc
	if json.Unmarshal(r.ConsumedCapacity, &one) == nil && one.CapacityUnits != nil {
		return *one.CapacityUnits, true
	}
	var many []cc
	if json.Unmarshal(r.ConsumedCapacity, &many) != nil || len(many) == 0 {
		return 0, false
	}
	var n float64
	for _, c := range many {
		if c.CapacityUnits != nil {
			n += *c.CapacityUnits
		}
	}
	return n, true
}

// totals are the proxy's counts.
func (p *ddbProxy) totals() (writes int64, units float64, reads, noCapacity, failed int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.writes, p.writeUnits, p.reads, p.noCapacity, p.failedCalls
}

// The proxy counts a client's write requests and the write units dynalite
// reports for them (an item under 1 KB is one unit, one of 1.5 KB two),
// a read as a read, and passes answers back so that the client (which
// checks their CRC32) accepts them.
func TestDDBProxyMetersWrites(t *testing.T) {
	endpoint := dynalitetest.Endpoint(t)
	tbl := dynalitetest.NewTable(t)
	proxy := newDDBProxy(t, endpoint)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := dynalitetest.Client(ctx, proxy.URL)
	require.NoError(t, err)
	_, err = c.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(tbl.Name),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	require.NoError(t, err)
	require.NoError(t, dynamodb.NewTableExistsWaiter(c).Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(tbl.Name)}, time.Minute))
	put := func(pk string, size int) {
		_, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(tbl.Name), Item: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: pk}, "v": &types.AttributeValueMemberS{Value: strings.Repeat("x", size)},
		}})
		require.NoError(t, err)
	}
	put("small", 100)
	put("large", 1500)
	out, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(tbl.Name), Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "large"}}})
	require.NoError(t, err)
	require.Len(t, out.Item["v"].(*types.AttributeValueMemberS).Value, 1500)
	writes, units, reads, noCap, failed := proxy.totals()
	require.Equal(t, int64(2), writes)
	require.Equal(t, 3.0, units)
	require.Equal(t, int64(1), reads)
	require.Zero(t, noCap)
	require.Zero(t, failed)
}
