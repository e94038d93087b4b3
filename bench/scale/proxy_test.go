package scale

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeDynamo answers like DynamoDB (ConsumedCapacity only when asked) and
// remembers the bodies it received.
type fakeDynamo struct {
	mu     sync.Mutex
	bodies []string
}

func (f *fakeDynamo) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.bodies = append(f.bodies, string(body))
	f.mu.Unlock()
	var req map[string]any
	_ = json.Unmarshal(body, &req)
	asked := req["ReturnConsumedCapacity"] == "TOTAL"
	w.Header().Set("X-Amz-Crc32", "12345")
	switch Operation(r.Header.Get("X-Amz-Target")) {
	case "UpdateItem":
		if req["ConditionExpression"] == "fail" {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"__type":"com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException","message":"The conditional request failed"}`))
			return
		}
		if asked {
			_, _ = w.Write([]byte(`{"ConsumedCapacity":{"CapacityUnits":2,"TableName":"t"}}`))
			return
		}
		_, _ = w.Write([]byte(`{}`))
	case "BatchGetItem":
		out := `{"Responses":{"t":[{"pk":{"S":"a"}},{"pk":{"S":"b"}},{"pk":{"S":"c"}}]}`
		if asked {
			out += `,"ConsumedCapacity":[{"CapacityUnits":3,"TableName":"t"}]`
		}
		_, _ = w.Write([]byte(out + `}`))
	case "Query":
		_, _ = w.Write([]byte(`{"Count":4,"Items":[{},{},{},{}],"ConsumedCapacity":{"CapacityUnits":0.5}}`))
	case "GetItem":
		_, _ = w.Write([]byte(`{"Item":{"pk":{"S":"a"}},"ConsumedCapacity":{"CapacityUnits":1}}`))
	case "BatchWriteItem":
		_, _ = w.Write([]byte(`{"UnprocessedItems":{},"ConsumedCapacity":[{"CapacityUnits":2}]}`))
	case "DescribeTable":
		_, _ = w.Write([]byte(`{"Table":{}}`))
	default:
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"__type":"com.amazon.coral.service#UnknownOperationException"}`))
	}
}

func post(t *testing.T, url, op, body string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/", bytes.NewBufferString(body))
	require.NoError(t, err)
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810."+op)
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b), resp.Header
}

func TestProxyCountsRequestsItemsAndUnitsByOperation(t *testing.T) {
	fake := &fakeDynamo{}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	p := NewProxy(srv.URL)
	url, stop, err := p.Listen()
	require.NoError(t, err)
	defer stop()

	for range 3 {
		code, _, _ := post(t, url, "UpdateItem", `{"TableName":"t"}`)
		require.Equal(t, http.StatusOK, code)
	}
	code, body, _ := post(t, url, "UpdateItem", `{"TableName":"t","ConditionExpression":"fail"}`)
	require.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, body, "ConditionalCheckFailedException", "an error answer is passed through")
	post(t, url, "BatchGetItem", `{"RequestItems":{}}`)
	post(t, url, "Query", `{"TableName":"t"}`)
	post(t, url, "GetItem", `{"TableName":"t"}`)
	post(t, url, "BatchWriteItem", `{"RequestItems":{"t":[{"PutRequest":{}},{"DeleteRequest":{}}]}}`)
	post(t, url, "DescribeTable", `{"TableName":"t"}`)
	post(t, url, "Nonsense", `{}`)

	c := p.Snapshot()
	assert.Equal(t, OpCount{Requests: 4, CondFailures: 1, Items: 3, WriteUnits: 6}, zeroBytes(c["UpdateItem"]))
	assert.Equal(t, OpCount{Requests: 1, Items: 3, ReadUnits: 3}, zeroBytes(c["BatchGetItem"]))
	assert.Equal(t, OpCount{Requests: 1, Items: 4, ReadUnits: 0.5}, zeroBytes(c["Query"]))
	assert.Equal(t, OpCount{Requests: 1, Items: 1, ReadUnits: 1}, zeroBytes(c["GetItem"]))
	assert.Equal(t, OpCount{Requests: 1, Items: 2, WriteUnits: 2}, zeroBytes(c["BatchWriteItem"]))
	assert.Equal(t, OpCount{Requests: 1}, zeroBytes(c["DescribeTable"]))
	assert.Equal(t, OpCount{Requests: 1, Errors: 1}, zeroBytes(c["Nonsense"]))
	assert.Equal(t, int64(10), c.Total().Requests)
	assert.Equal(t, []string{"UpdateItem", "BatchGetItem", "BatchWriteItem", "DescribeTable", "GetItem", "Nonsense", "Query"}, c.Ops())
	assert.Positive(t, c["UpdateItem"].ReqBytes)
	assert.Positive(t, c["UpdateItem"].RespBytes)
}

func zeroBytes(c OpCount) OpCount {
	c.ReqBytes, c.RespBytes = 0, 0
	return c
}

func TestProxyAsksForCapacityOnlyWhereAccepted(t *testing.T) {
	fake := &fakeDynamo{}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	p := NewProxy(srv.URL)
	url, stop, err := p.Listen()
	require.NoError(t, err)
	defer stop()

	post(t, url, "UpdateItem", `{"TableName":"t"}`)
	post(t, url, "UpdateItem", `{"TableName":"t","ReturnConsumedCapacity":"INDEXES"}`)
	post(t, url, "DescribeTable", `{"TableName":"t"}`)
	require.Len(t, fake.bodies, 3)
	assert.JSONEq(t, `{"ReturnConsumedCapacity":"TOTAL","TableName":"t"}`, fake.bodies[0])
	assert.JSONEq(t, `{"TableName":"t","ReturnConsumedCapacity":"INDEXES"}`, fake.bodies[1], "a client's own choice is kept")
	assert.JSONEq(t, `{"TableName":"t"}`, fake.bodies[2])
}

func TestProxyPassesAnswersThroughUnchanged(t *testing.T) {
	fake := &fakeDynamo{}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	p := NewProxy(srv.URL)
	url, stop, err := p.Listen()
	require.NoError(t, err)
	defer stop()

	code, body, h := post(t, url, "BatchGetItem", `{"RequestItems":{}}`)
	assert.Equal(t, http.StatusOK, code)
	assert.JSONEq(t, `{"Responses":{"t":[{"pk":{"S":"a"}},{"pk":{"S":"b"}},{"pk":{"S":"c"}}]},"ConsumedCapacity":[{"CapacityUnits":3,"TableName":"t"}]}`, body)
	assert.Equal(t, "12345", h.Get("X-Amz-Crc32"), "the checksum header the SDK verifies is kept")
}

func TestWithCapacity(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"object", `{"TableName":"t"}`, `{"ReturnConsumedCapacity":"TOTAL","TableName":"t"}`},
		{"empty object", `{}`, `{"ReturnConsumedCapacity":"TOTAL"}`},
		{"empty object with spaces", ` { } `, `{"ReturnConsumedCapacity":"TOTAL" } `},
		{"already set", `{"ReturnConsumedCapacity":"NONE"}`, `{"ReturnConsumedCapacity":"NONE"}`},
		{"not an object", `[1]`, `[1]`},
		{"empty body", ``, ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, string(withCapacity([]byte(tt.in))))
		})
	}
}

func TestCountsSubAndOperation(t *testing.T) {
	a := Counts{"UpdateItem": {Requests: 10, WriteUnits: 10}, "Query": {Requests: 2, Items: 8}}
	b := Counts{"UpdateItem": {Requests: 4, WriteUnits: 4}, "Query": {Requests: 2, Items: 8}}
	assert.Equal(t, Counts{"UpdateItem": {Requests: 6, WriteUnits: 6}}, a.Sub(b), "an operation without change is left out")
	assert.Equal(t, "UpdateItem", Operation("DynamoDB_20120810.UpdateItem"))
	assert.Equal(t, "", Operation(""))
	assert.True(t, IsRead("BatchGetItem"))
	assert.False(t, IsRead("UpdateItem"))
}
