// Package simulated is an embedded, deterministic event source for the demo,
// tests and benchmarks of the paginated_partitions input. It needs no outside
// service.
//
// Partition p holds events at dense positions 1..N (N = events_per_partition,
// 0 = unbounded) with ids "<p>-<position>" and a small JSON payload. A cursor
// names the next position to read and, when tokens rotate, a nonce: cursors
// are opaque to the input. Every non-empty page certifies the partition
// complete through its last position (integer coordinate); at the end of the
// data an empty page certifies it complete through N, so the contract is
// dense positions, final_through_watermark empty pages.
//
// Faults are injected deterministically from (seed, partition, position,
// attempt), so a run is reproducible from its seed:
//   - rotate_tokens: every fetch returns a fresh successor (Kinesis-style);
//   - shift_rate: a retry of a cursor returns a page grown by one event
//     (501,502 -> 501,502,503, as in docs/design.md#retry-example);
//   - empty_rate: a transient empty page with no evidence (never promotable);
//   - transient_error_rate, malformed_rate, expire_rate: failures;
//     malformed answers are transient: at most malformed_streak of them in
//     a row for one position (keep it at most the input's fetch_retries
//     and none parks);
//   - malformed: partitions whose every answer is malformed (a persistent
//     fault: they park once the input's retries are spent);
//   - stall: partitions that answer only empty, evidence-free pages;
//   - idle: partitions with no events whose empty pages are final through a
//     heartbeat coordinate that advances one page_size per fetch.
package simulated

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tidemark/tidemark/provider"
)

// Config configures the simulated source.
type Config struct {
	// Partitions lists the partition names.
	Partitions []string
	// EventsPerPartition bounds each partition (0 = unbounded).
	EventsPerPartition int64
	// PageSize is the number of events per page (default 100).
	PageSize int
	// Latency is slept on every fetch.
	Latency time.Duration
	// Seed drives every injected fault.
	Seed uint64
	// RotateTokens makes every fetch return a fresh successor.
	RotateTokens bool
	// ShiftRate is the probability that a retry returns a page grown by one
	// event.
	ShiftRate float64
	// EmptyRate is the probability of a transient empty page without
	// evidence.
	EmptyRate float64
	// TransientErrorRate, MalformedRate and ExpireRate are the probabilities
	// of each failure on a fetch.
	TransientErrorRate float64
	MalformedRate      float64
	ExpireRate         float64
	// MalformedStreak bounds the malformed answers MalformedRate gives one
	// position in a row (0: unbounded): the answer after them can be read.
	MalformedStreak int
	// Malformed lists partitions whose every answer is malformed.
	Malformed []string
	// Stall lists partitions that only ever answer empty, evidence-free
	// pages (until StallFetches fetches, 0 = forever).
	Stall        []string
	StallFetches int
	// Idle lists partitions without events whose empty pages are final
	// through a heartbeat coordinate.
	Idle []string
}

// Provider is the simulated source. It is safe for concurrent use.
type Provider struct {
	cfg       Config
	stall     map[string]bool
	idle      map[string]bool
	malformed map[string]bool
	mu        sync.Mutex
	fetches   map[string]int64 // per partition
	seen      map[string]int   // per (partition, cursor position): fetch count
	streak    map[string]int   // per (partition, cursor position): malformed answers in a row
	nonce     uint64
}

var _ provider.Provider = (*Provider)(nil)
var _ provider.Lister = (*Provider)(nil)
var _ provider.Restarter = (*Provider)(nil)

// New validates cfg and returns a Provider.
func New(cfg Config) (*Provider, error) {
	if len(cfg.Partitions) == 0 {
		return nil, errors.New("simulated: at least one partition is required")
	}
	if cfg.PageSize == 0 {
		cfg.PageSize = 100
	}
	if cfg.PageSize < 0 || cfg.EventsPerPartition < 0 {
		return nil, errors.New("simulated: page_size and events_per_partition must not be negative")
	}
	for _, r := range []float64{cfg.ShiftRate, cfg.EmptyRate, cfg.TransientErrorRate, cfg.MalformedRate, cfg.ExpireRate} {
		if r < 0 || r > 1 {
			return nil, fmt.Errorf("simulated: fault rates must be within [0, 1], got %v", r)
		}
	}
	if cfg.MalformedStreak < 0 {
		return nil, fmt.Errorf("simulated: malformed_streak must not be negative, got %d", cfg.MalformedStreak)
	}
	p := &Provider{cfg: cfg, stall: map[string]bool{}, idle: map[string]bool{}, malformed: map[string]bool{}, fetches: map[string]int64{}, seen: map[string]int{}, streak: map[string]int{}}
	known := map[string]bool{}
	for _, n := range cfg.Partitions {
		known[n] = true
	}
	for _, n := range cfg.Stall {
		if !known[n] {
			return nil, fmt.Errorf("simulated: stalled partition %q is not in partitions", n)
		}
		p.stall[n] = true
	}
	for _, n := range cfg.Idle {
		if !known[n] {
			return nil, fmt.Errorf("simulated: idle partition %q is not in partitions", n)
		}
		p.idle[n] = true
	}
	for _, n := range cfg.Malformed {
		if !known[n] {
			return nil, fmt.Errorf("simulated: malformed partition %q is not in partitions", n)
		}
		p.malformed[n] = true
	}
	return p, nil
}

// Contract is dense, ordered positions; empty pages are final through
// their watermark; tokens rotate when configured; expired cursors restart
// from the durable boundary.
func (p *Provider) Contract() provider.Contract {
	return provider.Contract{
		EmptyPage:        provider.EmptyFinalThroughWatermark,
		TokensMayRotate:  p.cfg.RotateTokens,
		OrderedPositions: true,
		DensePositions:   true,
		// Its watermarks are event positions.
		WatermarkCoversPositions: true,
		Recovery:                 provider.RecoveryRestartFromBoundary,
		// The simulated source certifies its watermarks: it appends above
		// every event it holds and says how far it has written.
		Finality: provider.FinalitySource,
	}
}

// Partitions lists the configured partitions.
func (p *Provider) Partitions(context.Context) ([]provider.Partition, error) {
	out := make([]provider.Partition, len(p.cfg.Partitions))
	for i, n := range p.cfg.Partitions {
		out[i] = provider.Partition{Name: n}
	}
	return out, nil
}

// Close does nothing.
func (p *Provider) Close(context.Context) error { return nil }

// EventID is the id of the event at position pos of partition part.
func EventID(part string, pos int64) string { return part + "-" + strconv.FormatInt(pos, 10) }

// Payload is the payload of the event at position pos of partition part.
func Payload(part string, pos int64) []byte {
	b, _ := json.Marshal(struct {
		Partition string `json:"partition"`
		Position  int64  `json:"position"`
		ID        string `json:"id"`
	}{part, pos, EventID(part, pos)})
	return b
}

// cursor format: "sim1:<next position>:<nonce>"; the nonce makes rotated
// tokens differ.
func encodeCursor(next int64, nonce uint64) []byte {
	return []byte("sim1:" + strconv.FormatInt(next, 10) + ":" + strconv.FormatUint(nonce, 36))
}

func decodeCursor(c []byte) (int64, error) {
	if len(c) == 0 {
		return 1, nil
	}
	parts := strings.Split(string(c), ":")
	if len(parts) != 3 || parts[0] != "sim1" {
		return 0, fmt.Errorf("not a simulated cursor")
	}
	n, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("bad position in cursor")
	}
	return n, nil
}

// chance returns a deterministic number in [0, 1) for the named fault.
func (p *Provider) chance(fault, part string, pos int64, attempt int) float64 {
	h := fnv.New64a()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], p.cfg.Seed)
	h.Write(b[:])
	h.Write([]byte(fault))
	h.Write([]byte{0})
	h.Write([]byte(part))
	binary.LittleEndian.PutUint64(b[:], uint64(pos))
	h.Write(b[:])
	binary.LittleEndian.PutUint64(b[:], uint64(attempt))
	h.Write(b[:])
	return float64(h.Sum64()>>11) / float64(1<<53)
}

// malformedBodies are the reasons of injected malformed answers, by visit.
var malformedBodies = []string{
	"injected truncated JSON body",
	"injected HTML page with status 200",
	"injected body without an events array",
}

// ErrTransient is returned for injected transient failures.
var ErrTransient = errors.New("simulated: injected transient failure")

// Fetch returns one page.
func (p *Provider) Fetch(ctx context.Context, req provider.Request) (provider.Response, error) {
	if p.cfg.Latency > 0 {
		t := time.NewTimer(p.cfg.Latency)
		select {
		case <-ctx.Done():
			t.Stop()
			return provider.Response{}, ctx.Err()
		case <-t.C:
		}
	}
	start, err := decodeCursor(req.Cursor)
	if err != nil {
		return provider.Response{}, &provider.ExpiredError{Partition: req.Partition, Reason: err.Error()}
	}
	p.mu.Lock()
	p.fetches[req.Partition]++
	fetchNo := p.fetches[req.Partition]
	seenKey := req.Partition + "\x00" + strconv.FormatInt(start, 10)
	visit := p.seen[seenKey]
	p.seen[seenKey]++
	p.nonce++
	nonce := p.nonce
	part := req.Partition
	transient := p.chance("transient", part, start, visit) < p.cfg.TransientErrorRate
	malformed := p.malformed[part]
	if !transient && !malformed && p.chance("malformed", part, start, visit) < p.cfg.MalformedRate &&
		(p.cfg.MalformedStreak == 0 || p.streak[seenKey] < p.cfg.MalformedStreak) {
		malformed = true
	}
	expired := !transient && !malformed && len(req.Cursor) > 0 && p.chance("expire", part, start, visit) < p.cfg.ExpireRate
	switch {
	case transient, expired:
		// Neither counts nor ends a run of malformed answers.
	case malformed:
		p.streak[seenKey]++
	default:
		delete(p.streak, seenKey)
	}
	p.mu.Unlock()

	switch {
	case transient:
		return provider.Response{}, fmt.Errorf("partition %s: %w", part, ErrTransient)
	case malformed:
		return provider.Response{}, &provider.MalformedError{Partition: part, Reason: malformedBodies[visit%len(malformedBodies)]}
	case expired:
		return provider.Response{}, &provider.ExpiredError{Partition: part, Reason: "injected cursor expiry"}
	}
	successorNonce := uint64(0)
	if p.cfg.RotateTokens {
		successorNonce = nonce
	}
	if p.stall[part] && (p.cfg.StallFetches == 0 || fetchNo <= int64(p.cfg.StallFetches)) {
		// No events, no evidence: a rotated successor for the same position.
		return provider.Response{Successor: encodeCursor(start, nonce), HasMore: true}, nil
	}
	if p.idle[part] {
		return provider.Response{
			Successor:       encodeCursor(start, successorNonce),
			CompleteThrough: provider.IntegerWatermark(fetchNo * int64(p.cfg.PageSize)),
		}, nil
	}
	if p.chance("empty", part, start, visit) < p.cfg.EmptyRate {
		return provider.Response{Successor: encodeCursor(start, nonce), HasMore: true}, nil
	}
	size := int64(p.cfg.PageSize)
	if visit > 0 && p.chance("shift", part, start, visit) < p.cfg.ShiftRate {
		size++
	}
	end := start + size - 1
	if n := p.cfg.EventsPerPartition; n > 0 && end > n {
		end = n
	}
	if end < start {
		// End of data: final through the last position.
		return provider.Response{
			Successor:       encodeCursor(start, successorNonce),
			CompleteThrough: provider.IntegerWatermark(start - 1),
		}, nil
	}
	events := make([]provider.Event, 0, end-start+1)
	for pos := start; pos <= end; pos++ {
		events = append(events, provider.Event{ID: EventID(part, pos), Position: provider.IntPosition(pos), Payload: Payload(part, pos)})
	}
	return provider.Response{
		Events:          events,
		Successor:       encodeCursor(end+1, successorNonce),
		HasMore:         p.cfg.EventsPerPartition == 0 || end < p.cfg.EventsPerPartition,
		CompleteThrough: provider.IntegerWatermark(end),
	}, nil
}

// RestartCursor restarts a partition right after its durable watermark,
// the stable boundary this source supports.
func (p *Provider) RestartCursor(_ context.Context, from provider.Boundary) ([]byte, error) {
	durable := from.Watermark
	next := int64(1)
	if durable.Kind == provider.KindInteger {
		next = durable.Int + 1
	}
	return encodeCursor(next, 0), nil
}
