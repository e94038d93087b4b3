package scale

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// OpCount is what the proxy saw of one DynamoDB operation.
type OpCount struct {
	// Requests is every request of the operation that reached the server.
	Requests int64 `json:"requests"`
	// CondFailures are the answers ConditionalCheckFailedException (a
	// refused compare-and-swap); Errors every other non-200 answer.
	CondFailures int64 `json:"cond_failures"`
	Errors       int64 `json:"errors"`
	// Items is the items the operation read (GetItem, Query, Scan,
	// BatchGetItem) or wrote (PutItem, UpdateItem, DeleteItem, the requests
	// of BatchWriteItem), as far as the answers say.
	Items int64 `json:"items"`
	// ReadUnits and WriteUnits are the capacity units the server reported
	// (ConsumedCapacity; the proxy asks for it on every request). A refused
	// conditional write is not among them (see CondFailures).
	ReadUnits  float64 `json:"read_units"`
	WriteUnits float64 `json:"write_units"`
	// ReqBytes and RespBytes are the request and answer bodies.
	ReqBytes  int64 `json:"req_bytes"`
	RespBytes int64 `json:"resp_bytes"`
}

func (c OpCount) sub(o OpCount) OpCount {
	return OpCount{
		Requests: c.Requests - o.Requests, CondFailures: c.CondFailures - o.CondFailures, Errors: c.Errors - o.Errors,
		Items: c.Items - o.Items, ReadUnits: c.ReadUnits - o.ReadUnits, WriteUnits: c.WriteUnits - o.WriteUnits,
		ReqBytes: c.ReqBytes - o.ReqBytes, RespBytes: c.RespBytes - o.RespBytes,
	}
}

func (c *OpCount) add(o OpCount) {
	c.Requests += o.Requests
	c.CondFailures += o.CondFailures
	c.Errors += o.Errors
	c.Items += o.Items
	c.ReadUnits += o.ReadUnits
	c.WriteUnits += o.WriteUnits
	c.ReqBytes += o.ReqBytes
	c.RespBytes += o.RespBytes
}

// Counts are the proxy's tallies by operation name (the part of the
// X-Amz-Target header after the dot: "UpdateItem", "BatchGetItem", ...).
type Counts map[string]OpCount

// Sub returns c - o, operation by operation (the requests between two
// snapshots).
func (c Counts) Sub(o Counts) Counts {
	out := Counts{}
	for op, v := range c {
		d := v.sub(o[op])
		if d != (OpCount{}) {
			out[op] = d
		}
	}
	return out
}

// Total sums every operation.
func (c Counts) Total() OpCount {
	var t OpCount
	for _, v := range c {
		t.add(v)
	}
	return t
}

// Ops lists the operations, most requests first (then by name).
func (c Counts) Ops() []string {
	ops := slices.Collect(maps.Keys(c))
	slices.SortFunc(ops, func(a, b string) int {
		if c[a].Requests != c[b].Requests {
			if c[a].Requests > c[b].Requests {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	return ops
}

// readOps are the operations whose capacity is read capacity; every other
// operation that reports capacity reports write capacity.
var readOps = map[string]bool{"GetItem": true, "BatchGetItem": true, "Query": true, "Scan": true, "TransactGetItems": true}

// capacityOps are the operations that accept ReturnConsumedCapacity.
var capacityOps = map[string]bool{
	"GetItem": true, "BatchGetItem": true, "Query": true, "Scan": true, "TransactGetItems": true,
	"PutItem": true, "UpdateItem": true, "DeleteItem": true, "BatchWriteItem": true, "TransactWriteItems": true,
}

// IsRead reports whether op reads (its units are read units).
func IsRead(op string) bool { return readOps[op] }

// Proxy is an HTTP reverse proxy in front of a DynamoDB endpoint that
// counts requests, items and capacity units per operation. It adds
// "ReturnConsumedCapacity":"TOTAL" to the requests that accept it and have
// none (the server then reports the units; the client ignores the extra
// field), and passes every answer through unchanged (its CRC32 header stays
// valid).
type Proxy struct {
	target string // scheme://host:port, no trailing slash
	client *http.Client

	mu     sync.Mutex
	counts Counts
}

// NewProxy returns a proxy forwarding to target (e.g.
// "http://127.0.0.1:8000").
func NewProxy(target string) *Proxy {
	tr := &http.Transport{
		Proxy:               nil,
		DisableCompression:  true,
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
	}
	return &Proxy{target: strings.TrimRight(target, "/"), client: &http.Client{Transport: tr}, counts: Counts{}}
}

// Snapshot returns a copy of the tallies so far.
func (p *Proxy) Snapshot() Counts {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.counts)
}

// Operation is the DynamoDB operation of an X-Amz-Target header
// ("DynamoDB_20120810.UpdateItem" -> "UpdateItem"); "" when there is none.
func Operation(target string) string {
	if i := strings.LastIndexByte(target, '.'); i >= 0 {
		return target[i+1:]
	}
	return target
}

// withCapacity adds "ReturnConsumedCapacity":"TOTAL" to a JSON object body
// that has no ReturnConsumedCapacity; any other body is returned as is.
func withCapacity(body []byte) []byte {
	t := bytes.TrimLeft(body, " \t\r\n")
	if len(t) == 0 || t[0] != '{' || bytes.Contains(body, []byte(`"ReturnConsumedCapacity"`)) {
		return body
	}
	rest := bytes.TrimLeft(t[1:], " \t\r\n")
	field := `"ReturnConsumedCapacity":"TOTAL"`
	if len(rest) > 0 && rest[0] != '}' {
		field += ","
	}
	out := make([]byte, 0, len(t)+len(field))
	out = append(out, '{')
	out = append(out, field...)
	return append(out, t[1:]...)
}

// answer is what the proxy reads of a 200 answer.
type answer struct {
	ConsumedCapacity json.RawMessage              `json:"ConsumedCapacity"`
	Count            *int64                       `json:"Count"`
	Item             json.RawMessage              `json:"Item"`
	Responses        map[string][]json.RawMessage `json:"Responses"`
}

type capacity struct {
	CapacityUnits float64 `json:"CapacityUnits"`
}

// units sums the capacity units of a ConsumedCapacity value (one object,
// or a list of them for the batch operations).
func units(raw json.RawMessage) float64 {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return 0
	}
	if raw[0] == '[' {
		var cs []capacity
		if json.Unmarshal(raw, &cs) != nil {
			return 0
		}
		var u float64
		for _, c := range cs {
			u += c.CapacityUnits
		}
		return u
	}
	var c capacity
	if json.Unmarshal(raw, &c) != nil {
		return 0
	}
	return c.CapacityUnits
}

// batchWrites counts the put and delete requests of a BatchWriteItem body.
func batchWrites(body []byte) int64 {
	var req struct {
		RequestItems map[string][]json.RawMessage `json:"RequestItems"`
	}
	if json.Unmarshal(body, &req) != nil {
		return 0
	}
	var n int64
	for _, rs := range req.RequestItems {
		n += int64(len(rs))
	}
	return n
}

// tally reads one exchange into an OpCount.
func tally(op string, reqBody []byte, status int, respBody []byte) OpCount {
	c := OpCount{Requests: 1, ReqBytes: int64(len(reqBody)), RespBytes: int64(len(respBody))}
	if status != http.StatusOK {
		var e struct {
			Type string `json:"__type"`
		}
		_ = json.Unmarshal(respBody, &e)
		if strings.HasSuffix(e.Type, "ConditionalCheckFailedException") {
			c.CondFailures = 1
		} else {
			c.Errors = 1
		}
		return c
	}
	if !capacityOps[op] {
		return c
	}
	var a answer
	if json.Unmarshal(respBody, &a) != nil {
		return c
	}
	u := units(a.ConsumedCapacity)
	if readOps[op] {
		c.ReadUnits = u
	} else {
		c.WriteUnits = u
	}
	switch op {
	case "GetItem":
		if len(a.Item) > 0 && !bytes.Equal(a.Item, []byte("null")) {
			c.Items = 1
		}
	case "Query", "Scan":
		if a.Count != nil {
			c.Items = *a.Count
		}
	case "BatchGetItem":
		for _, items := range a.Responses {
			c.Items += int64(len(items))
		}
	case "PutItem", "UpdateItem", "DeleteItem":
		c.Items = 1
	case "BatchWriteItem":
		c.Items = batchWrites(reqBody)
	}
	return c
}

func (p *Proxy) add(op string, c OpCount) {
	p.mu.Lock()
	defer p.mu.Unlock()
	v := p.counts[op]
	v.add(c)
	p.counts[op] = v
}

// hopHeaders are not forwarded.
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade", "Content-Length"}

// ServeHTTP forwards one request and counts it.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "scale proxy: reading the request: "+err.Error(), http.StatusBadGateway)
		return
	}
	op := Operation(r.Header.Get("X-Amz-Target"))
	if capacityOps[op] {
		body = withCapacity(body)
	}
	out, err := http.NewRequestWithContext(r.Context(), r.Method, p.target+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, "scale proxy: "+err.Error(), http.StatusBadGateway)
		return
	}
	out.Header = r.Header.Clone()
	for _, h := range hopHeaders {
		out.Header.Del(h)
	}
	out.ContentLength = int64(len(body))
	resp, err := p.client.Do(out)
	if err != nil {
		http.Error(w, "scale proxy: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	respBody, err := io.ReadAll(resp.Body)
	if err != nil {
		http.Error(w, "scale proxy: reading the answer: "+err.Error(), http.StatusBadGateway)
		return
	}
	if resp.Header.Get("Content-Encoding") == "" {
		p.add(op, tally(op, body, resp.StatusCode, respBody))
	} else {
		p.add(op, OpCount{Requests: 1, ReqBytes: int64(len(body)), RespBytes: int64(len(respBody))})
	}
	for k, vs := range resp.Header {
		if slices.Contains(hopHeaders, http.CanonicalHeaderKey(k)) {
			continue
		}
		w.Header()[k] = vs
	}
	w.Header().Set("Content-Length", fmt.Sprint(len(respBody)))
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(respBody)
}

// Listen serves p on a free port of 127.0.0.1 and returns its base URL and
// a function that stops it.
func (p *Proxy) Listen() (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), func() { _ = srv.Close() }, nil
}
