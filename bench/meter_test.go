package bench

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/tidemark/tidemark/internal/dynamostore"
)

// meter measures what a DynamoDB client sends: dynamostore.RequestCounter counts
// HTTP attempts by operation (after the SDK's retry middleware, so retries
// count); on top of it the meter
//   - labels each attempt with the kind of item it touches (promotion,
//     witness put, receipt, ...), read from the request's key;
//   - asks the server for ConsumedCapacity (ReturnConsumedCapacity TOTAL)
//     and sums the capacity units it reports by kind;
//   - sizes every PutItem with dynamostore.ItemSize (DynamoDB's 1 KB rounding), the
//     fallback when a server reports no capacity.
type meter struct {
	rc *dynamostore.RequestCounter

	mu         sync.Mutex
	attempts   map[string]int64         // kind -> HTTP attempts
	units      map[string]float64       // kind -> capacity units the server reported
	sizedUnits map[string]float64       // kind -> write units from the item size (PutItem only)
	noCapacity map[string]int64         // kind -> successful calls without ConsumedCapacity
	calls      map[string]int64         // kind -> calls (retries included in one call)
	latency    map[string]time.Duration // kind -> summed call latency
	itemBytes  map[string]int64         // kind -> summed PutItem item sizes
	pages      int64                    // pages moved by successful promotions
}

func newMeter() *meter {
	return &meter{
		rc:       dynamostore.NewRequestCounter(),
		attempts: map[string]int64{}, units: map[string]float64{},
		sizedUnits: map[string]float64{}, noCapacity: map[string]int64{},
		calls: map[string]int64{}, latency: map[string]time.Duration{}, itemBytes: map[string]int64{},
	}
}

// options are the client options that install the counter and the meter.
func (m *meter) options() []func(*dynamodb.Options) {
	return []func(*dynamodb.Options){m.rc.Option(), func(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, m.register) }}
}

type kindKey struct{}

func (m *meter) register(stack *middleware.Stack) error {
	op := stack.ID()
	err := stack.Initialize.Add(middleware.InitializeMiddlewareFunc("tidemark.bench.capacity",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			kind := classify(op, in.Parameters)
			in.Parameters = withCapacity(in.Parameters)
			if put, ok := in.Parameters.(*dynamodb.PutItemInput); ok {
				m.mu.Lock()
				n := dynamostore.ItemSize(put.Item)
				m.sizedUnits[kind] += float64((n + 1023) / 1024)
				m.itemBytes[kind] += int64(n)
				m.mu.Unlock()
			}
			ctx = middleware.WithStackValue(ctx, kindKey{}, kind)
			t0 := time.Now()
			out, md, err := next.HandleInitialize(ctx, in)
			d := time.Since(t0)
			m.mu.Lock()
			m.calls[kind]++
			m.latency[kind] += d
			m.mu.Unlock()
			if err == nil {
				cu, ok := consumed(out.Result)
				pages := promotedPages(in.Parameters)
				m.mu.Lock()
				m.pages += pages
				if ok {
					m.units[kind] += cu
				} else {
					m.noCapacity[kind]++
				}
				m.mu.Unlock()
			}
			return out, md, err
		}), middleware.Before)
	if err != nil {
		return err
	}
	return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("tidemark.bench.attempts",
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			kind, _ := middleware.GetStackValue(ctx, kindKey{}).(string)
			if kind == "" {
				kind = op
			}
			m.mu.Lock()
			m.attempts[kind]++
			m.mu.Unlock()
			return next.HandleFinalize(ctx, in)
		}), middleware.After)
}

// Request kinds. Steady-state kinds first.
const (
	kPromotion     = "promotion"     // UpdateItem on a checkpoint (promote, park)
	kWitnessPut    = "witness-put"   // PutItem of a witness
	kReceipt       = "receipt"       // UpdateItem of a witness's ack count
	kDisposition   = "disposition"   // UpdateItem of a witness's disposition
	kWitnessQuery  = "witness-query" // Query of the witnesses of one generation
	kCheckpointGet = "checkpoint-get"
	kWitnessGet    = "witness-get"
	kCheckpointPut = "checkpoint-put" // CreateCheckpoint
	kRecord        = "record"         // membership, frontier, partition index
	kList          = "list"           // BatchGetItem of checkpoints
	kTable         = "table"          // DescribeTable, CreateTable
)

// The kinds of requests made for pages (the rest are start-up, membership
// and frontier records).
var (
	writeKinds = map[string]bool{kPromotion: true, kWitnessPut: true, kReceipt: true, kDisposition: true, kCheckpointPut: true}
	readKinds  = map[string]bool{kWitnessQuery: true, kCheckpointGet: true, kWitnessGet: true, kList: true}
)

func skOf(key map[string]types.AttributeValue) string {
	if v, ok := key["sk"].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func namesHave(names map[string]string, attr string) bool {
	return slices.Contains(slices.Collect(maps.Values(names)), attr)
}

// promotedPages is the number of generations a promotion request moves
// (":next" - ":g" of its UpdateItem), 0 for any other request.
func promotedPages(params any) int64 {
	p, ok := params.(*dynamodb.UpdateItemInput)
	if !ok || skOf(p.Key) != "checkpoint" {
		return 0
	}
	g, ok1 := p.ExpressionAttributeValues[":g"].(*types.AttributeValueMemberN)
	next, ok2 := p.ExpressionAttributeValues[":next"].(*types.AttributeValueMemberN)
	if !ok1 || !ok2 {
		return 0
	}
	a, err1 := strconv.ParseInt(g.Value, 10, 64)
	b, err2 := strconv.ParseInt(next.Value, 10, 64)
	if err1 != nil || err2 != nil || b <= a {
		return 0
	}
	return b - a
}

func classify(op string, params any) string {
	switch p := params.(type) {
	case *dynamodb.PutItemInput:
		switch sk := skOf(p.Item); {
		case sk == "checkpoint":
			return kCheckpointPut
		case strings.HasPrefix(sk, "witness#"):
			return kWitnessPut
		default:
			return kRecord
		}
	case *dynamodb.UpdateItemInput:
		switch sk := skOf(p.Key); {
		case sk == "checkpoint":
			return kPromotion
		case strings.HasPrefix(sk, "witness#") && namesHave(p.ExpressionAttributeNames, "ack"):
			return kReceipt
		case strings.HasPrefix(sk, "witness#"):
			return kDisposition
		default:
			return kRecord
		}
	case *dynamodb.GetItemInput:
		switch sk := skOf(p.Key); {
		case sk == "checkpoint":
			return kCheckpointGet
		case strings.HasPrefix(sk, "witness#"):
			return kWitnessGet
		default:
			return kRecord
		}
	case *dynamodb.QueryInput:
		for _, v := range p.ExpressionAttributeValues {
			if s, ok := v.(*types.AttributeValueMemberS); ok && strings.Contains(s.Value, "##partitions") {
				return kRecord // a listing's Query of a partition-index key
			}
		}
		return kWitnessQuery
	case *dynamodb.BatchGetItemInput:
		return kList
	case *dynamodb.DescribeTableInput, *dynamodb.CreateTableInput:
		return kTable
	}
	return op
}

// withCapacity returns a copy of a request that asks for ConsumedCapacity.
func withCapacity(params any) any {
	t := types.ReturnConsumedCapacityTotal
	switch p := params.(type) {
	case *dynamodb.PutItemInput:
		c := *p
		c.ReturnConsumedCapacity = t
		return &c
	case *dynamodb.UpdateItemInput:
		c := *p
		c.ReturnConsumedCapacity = t
		return &c
	case *dynamodb.GetItemInput:
		c := *p
		c.ReturnConsumedCapacity = t
		return &c
	case *dynamodb.QueryInput:
		c := *p
		c.ReturnConsumedCapacity = t
		return &c
	case *dynamodb.DeleteItemInput:
		c := *p
		c.ReturnConsumedCapacity = t
		return &c
	case *dynamodb.BatchGetItemInput:
		c := *p
		c.ReturnConsumedCapacity = t
		return &c
	}
	return params
}

func consumed(result any) (float64, bool) {
	var cc *types.ConsumedCapacity
	switch r := result.(type) {
	case *dynamodb.PutItemOutput:
		cc = r.ConsumedCapacity
	case *dynamodb.UpdateItemOutput:
		cc = r.ConsumedCapacity
	case *dynamodb.GetItemOutput:
		cc = r.ConsumedCapacity
	case *dynamodb.QueryOutput:
		cc = r.ConsumedCapacity
	case *dynamodb.DeleteItemOutput:
		cc = r.ConsumedCapacity
	case *dynamodb.BatchGetItemOutput:
		if len(r.ConsumedCapacity) == 0 {
			return 0, false
		}
		var n float64
		for _, c := range r.ConsumedCapacity {
			n += aws.ToFloat64(c.CapacityUnits)
		}
		return n, true
	default:
		return 0, true // no capacity for this operation (DescribeTable, ...)
	}
	if cc == nil || cc.CapacityUnits == nil {
		return 0, false
	}
	return *cc.CapacityUnits, true
}

// costs is a snapshot of a meter.
type costs struct {
	at time.Time
	// pages is how many pages the successful promotions moved (a
	// coalesced promotion moves several generations).
	pages      int64
	byOp       map[string]int64 // RequestCounter: attempts by operation
	attempts   map[string]int64
	units      map[string]float64
	sizedUnits map[string]float64
	noCapacity map[string]int64
	calls      map[string]int64
	latency    map[string]time.Duration
	itemBytes  map[string]int64
}

func (m *meter) snapshot() costs {
	m.mu.Lock()
	defer m.mu.Unlock()
	return costs{
		at: time.Now(), pages: m.pages, byOp: m.rc.Snapshot(), attempts: maps.Clone(m.attempts), units: maps.Clone(m.units),
		sizedUnits: maps.Clone(m.sizedUnits), noCapacity: maps.Clone(m.noCapacity),
		calls: maps.Clone(m.calls), latency: maps.Clone(m.latency), itemBytes: maps.Clone(m.itemBytes),
	}
}

func (m *meter) reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rc.Reset()
	clear(m.attempts)
	clear(m.units)
	clear(m.sizedUnits)
	clear(m.noCapacity)
	clear(m.calls)
	clear(m.latency)
	clear(m.itemBytes)
	m.pages = 0
}

// sub returns c - base.
func (c costs) sub(base costs) costs {
	out := costs{at: c.at, pages: c.pages - base.pages, byOp: maps.Clone(c.byOp), attempts: maps.Clone(c.attempts), units: maps.Clone(c.units), sizedUnits: maps.Clone(c.sizedUnits), noCapacity: maps.Clone(c.noCapacity), calls: maps.Clone(c.calls), latency: maps.Clone(c.latency), itemBytes: maps.Clone(c.itemBytes)}
	for k, v := range base.byOp {
		out.byOp[k] -= v
	}
	for k, v := range base.attempts {
		out.attempts[k] -= v
	}
	for k, v := range base.units {
		out.units[k] -= v
	}
	for k, v := range base.sizedUnits {
		out.sizedUnits[k] -= v
	}
	for k, v := range base.noCapacity {
		out.noCapacity[k] -= v
	}
	for k, v := range base.calls {
		out.calls[k] -= v
	}
	for k, v := range base.latency {
		out.latency[k] -= v
	}
	for k, v := range base.itemBytes {
		out.itemBytes[k] -= v
	}
	return out
}

// writes and reads count the HTTP attempts of each class (RequestCounter).
func (c costs) writes() int64 {
	return c.byOp["PutItem"] + c.byOp["UpdateItem"] + c.byOp["DeleteItem"] + c.byOp["BatchWriteItem"]
}

func (c costs) reads() int64 {
	return c.byOp["GetItem"] + c.byOp["Query"] + c.byOp["BatchGetItem"] + c.byOp["Scan"]
}

// pageWrites and pageReads count the attempts of the kinds made for pages.
func (c costs) pageWrites() (n int64) {
	for k, v := range c.attempts {
		if writeKinds[k] {
			n += v
		}
	}
	return n
}

func (c costs) pageReads() (n int64) {
	for k, v := range c.attempts {
		if readKinds[k] {
			n += v
		}
	}
	return n
}

// writeUnits sums the capacity the server reported for the writes of
// pages (records such as membership and frontier are left out).
func (c costs) writeUnits() float64 {
	var n float64
	for k, v := range c.units {
		if writeKinds[k] {
			n += v
		}
	}
	return n
}

// meanLatency is the mean latency of one call of a kind (SDK retries
// included), in milliseconds.
func (c costs) meanLatency(kind string) float64 {
	if c.calls[kind] == 0 {
		return 0
	}
	return float64(c.latency[kind]) / float64(c.calls[kind]) / float64(time.Millisecond)
}
