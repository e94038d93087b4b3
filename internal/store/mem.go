package store

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/witness"
)

// MemStore is the in-memory twin of the DynamoDB store (internal/dynamostore): the
// same conditions, the same errors (including *FenceError with the winner),
// the same limits and the same normalisation of what it returns (empty
// byte slices and lists come back nil, watermarks normalised, reasons
// cleaned). Everything is deep-copied in and out. One mutex makes every
// method atomic, which is what a single-item conditional write gives on
// DynamoDB. The zero MemStore is not usable; call NewMemStore.
type MemStore struct {
	mu          sync.Mutex
	checkpoints map[Key]Checkpoint
	witnesses   map[witnessRef]witness.Witness
	members     map[string]Membership
	frontiers   map[string]Frontier
	// shardVersions is the version of each shard of the published
	// frontier of a scope (published.go).
	shardVersions map[string][]uint64
	discovery     map[string]uint64
	heartbeats    map[string]map[string]Heartbeat // scope -> owner -> heartbeat (heartbeat.go)
}

type witnessRef struct {
	key        Key
	generation uint64
	attempt    string
}

var _ Store = (*MemStore)(nil)

// NewMemStore returns an empty MemStore.
func NewMemStore() *MemStore {
	return &MemStore{
		checkpoints: map[Key]Checkpoint{},
		witnesses:   map[witnessRef]witness.Witness{},
		members:     map[string]Membership{},
		frontiers:   map[string]Frontier{},
		discovery:   map[string]uint64{},

		shardVersions: map[string][]uint64{},
	}
}

// LoadCheckpoint implements Store.
func (s *MemStore) LoadCheckpoint(_ context.Context, k Key) (Checkpoint, error) {
	if err := k.Validate(); err != nil {
		return Checkpoint{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.checkpoints[k]
	if !ok {
		return Checkpoint{}, fmt.Errorf("%w: no checkpoint for %s", ErrNotFound, k)
	}
	return cloneCheckpoint(c), nil
}

// CreateCheckpoint implements Store.
func (s *MemStore) CreateCheckpoint(_ context.Context, c Checkpoint) (Checkpoint, error) {
	if err := c.Validate(); err != nil {
		return Checkpoint{}, err
	}
	if c.Generation != 1 {
		return Checkpoint{}, fmt.Errorf("%w: a first checkpoint has generation 1, not %d", ErrInvalid, c.Generation)
	}
	c = cloneCheckpoint(c)
	s.mu.Lock()
	defer s.mu.Unlock()
	if w, ok := s.checkpoints[c.Key]; ok {
		w = cloneCheckpoint(w)
		return Checkpoint{}, &FenceError{Key: c.Key, Op: "create checkpoint", Reason: "a checkpoint already exists", Winner: &w}
	}
	s.checkpoints[c.Key] = c
	return cloneCheckpoint(c), nil
}

// Promote implements Store.
func (s *MemStore) Promote(_ context.Context, p Promotion) (Checkpoint, error) {
	p.Lease = p.Lease.Fence()
	if err := p.Validate(); err != nil {
		return Checkpoint{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	stored := s.stored(p.Key)
	if reason := PromotionConflict(p, stored); reason != "" {
		if stored != nil && PromotionApplied(p, *stored) {
			return *stored, nil
		}
		return Checkpoint{}, &FenceError{Key: p.Key, Op: "promote", Reason: reason, WantGeneration: p.FromGeneration, Winner: stored}
	}
	next := p.Apply(*stored)
	s.checkpoints[p.Key] = next
	return cloneCheckpoint(next), nil
}

// SetParked implements Store.
func (s *MemStore) SetParked(_ context.Context, k Key, cursor []byte, generation uint64, lease Lease, reason string) (Checkpoint, error) {
	lease = lease.Fence()
	if err := ValidatePark(k, cursor, lease); err != nil {
		return Checkpoint{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	stored := s.stored(k)
	if why := ParkConflict(cursor, generation, lease, stored); why != "" {
		return Checkpoint{}, &FenceError{Key: k, Op: "set parked", Reason: why, WantGeneration: generation, Winner: stored}
	}
	next := *stored
	next.Parked = CleanReason(reason)
	s.checkpoints[k] = next
	return cloneCheckpoint(next), nil
}

// Unpark implements Store.
func (s *MemStore) Unpark(_ context.Context, k Key, cursor []byte, generation uint64, lease Lease, repairs []RepairEntry) (Checkpoint, error) {
	lease = lease.Fence()
	if err := ValidateUnpark(k, cursor, lease, repairs); err != nil {
		return Checkpoint{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	stored := s.stored(k)
	why := ParkConflict(cursor, generation, lease, stored)
	if why == "" && stored.Parked == "" {
		why = "the partition is not parked"
	}
	if why != "" {
		if stored != nil && UnparkApplied(cursor, generation, repairs, *stored) {
			return *stored, nil
		}
		return Checkpoint{}, &FenceError{Key: k, Op: "unpark", Reason: why, WantGeneration: generation, Winner: stored}
	}
	next := *stored
	next.Parked = ""
	next.Repairs = CloneRepairs(repairs)
	s.checkpoints[k] = next
	return cloneCheckpoint(next), nil
}

// ListCheckpoints implements Store. Checkpoints come in partition order.
func (s *MemStore) ListCheckpoints(_ context.Context, scope string) ([]Checkpoint, error) {
	if err := CheckName("scope", scope); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Checkpoint
	for k, c := range s.checkpoints {
		if k.Scope == scope {
			out = append(out, cloneCheckpoint(c))
		}
	}
	slices.SortFunc(out, func(a, b Checkpoint) int { return strings.Compare(a.Partition, b.Partition) })
	return out, nil
}

// PutWitness implements Store.
func (s *MemStore) PutWitness(_ context.Context, w witness.Witness) error {
	if err := ValidateWitness(w); err != nil {
		return err
	}
	w = cloneWitness(w)
	ref := witnessRef{key: Key{Scope: w.Scope, Partition: w.Partition}, generation: w.Generation, attempt: w.AttemptID}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.witnesses[ref]; ok {
		if SameWitness(old, w) {
			return nil
		}
		return &FenceError{Key: ref.key, Op: "put witness", Reason: fmt.Sprintf("attempt %q at generation %d is already stored with different content", w.AttemptID, w.Generation), WantGeneration: w.Generation}
	}
	s.witnesses[ref] = w
	return nil
}

// Witnesses implements Store. Witnesses come in byte-wise AttemptID order.
func (s *MemStore) Witnesses(_ context.Context, k Key, generation uint64) ([]witness.Witness, error) {
	if err := k.Validate(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []witness.Witness
	for ref, w := range s.witnesses {
		if ref.key == k && ref.generation == generation {
			out = append(out, cloneWitness(w))
		}
	}
	slices.SortFunc(out, func(a, b witness.Witness) int { return strings.Compare(a.AttemptID, b.AttemptID) })
	return out, nil
}

// RecordReceipt implements Store.
func (s *MemStore) RecordReceipt(_ context.Context, k Key, generation uint64, attempt string, ackedThrough int) error {
	if err := ValidateAttempt(k, attempt); err != nil {
		return err
	}
	if ackedThrough < 0 {
		return fmt.Errorf("%w: acked through %d", ErrInvalid, ackedThrough)
	}
	ref := witnessRef{key: k, generation: generation, attempt: attempt}
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.witnesses[ref]
	switch {
	case !ok:
		return fmt.Errorf("%w: no witness %s at generation %d of %s", ErrNotFound, attempt, generation, k)
	case ackedThrough > len(w.Events):
		return fmt.Errorf("%w: acked through %d of a witness of %d events", ErrInvalid, ackedThrough, len(w.Events))
	case ackedThrough > w.AckedThrough:
		w.AckedThrough = ackedThrough
		s.witnesses[ref] = w
	}
	return nil
}

// SetDisposition implements Store. Setting the state a witness already has
// is an idempotent no-op (a retry after a lost response).
func (s *MemStore) SetDisposition(_ context.Context, k Key, generation uint64, attempt string, d witness.Disposition) error {
	if err := ValidateDisposition(k, attempt, d); err != nil {
		return err
	}
	ref := witnessRef{key: k, generation: generation, attempt: attempt}
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.witnesses[ref]
	switch {
	case !ok:
		return fmt.Errorf("%w: no witness %s at generation %d of %s", ErrNotFound, attempt, generation, k)
	case w.Disposition == witness.Pending:
		w.Disposition = d
		s.witnesses[ref] = w
		return nil
	case w.Disposition == d:
		return nil
	}
	return DispositionFence(k, generation, attempt, w.Disposition, d)
}

// LoadMembership implements Store.
func (s *MemStore) LoadMembership(_ context.Context, scope string) (Membership, error) {
	if err := CheckName("scope", scope); err != nil {
		return Membership{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.members[scope]
	if !ok {
		return Membership{}, fmt.Errorf("%w: no membership record for scope %s", ErrNotFound, scope)
	}
	return cloneMembership(m), nil
}

// SwapMembership implements Store.
func (s *MemStore) SwapMembership(_ context.Context, prevEpoch uint64, next Membership) (Membership, error) {
	if err := ValidateSwap(prevEpoch, next); err != nil {
		return Membership{}, err
	}
	next = cloneMembership(next)
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.members[next.Scope]
	if (prevEpoch == 0 && ok) || (prevEpoch != 0 && (!ok || old.Epoch != prevEpoch)) {
		return Membership{}, MembershipFence(next.Scope, prevEpoch, ok, old.Epoch)
	}
	s.members[next.Scope] = next
	return cloneMembership(next), nil
}

// RequestDiscovery implements Store.
func (s *MemStore) RequestDiscovery(_ context.Context, scope string) (uint64, error) {
	if err := CheckName("scope", scope); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.discovery[scope]++
	return s.discovery[scope], nil
}

// DiscoveryRequests implements Store.
func (s *MemStore) DiscoveryRequests(_ context.Context, scope string) (uint64, error) {
	if err := CheckName("scope", scope); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.discovery[scope], nil
}

// LoadFrontier implements Store.
func (s *MemStore) LoadFrontier(_ context.Context, scope string) (Frontier, error) {
	if err := CheckName("scope", scope); err != nil {
		return Frontier{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.frontiers[scope]
	if !ok {
		return Frontier{}, fmt.Errorf("%w: no published frontier for scope %s", ErrNotFound, scope)
	}
	return cloneFrontier(f), nil
}

// PublishFrontier implements Store.
func (s *MemStore) PublishFrontier(_ context.Context, prev, next Frontier) (Frontier, error) {
	if err := ValidatePublish(prev, next); err != nil {
		return Frontier{}, err
	}
	next = cloneFrontier(next)
	next.Version = prev.Version + 1
	next.HeldBy = CapHeldBy(next.HeldBy)
	s.mu.Lock()
	defer s.mu.Unlock()
	var stored *Frontier
	if f, ok := s.frontiers[next.Scope]; ok {
		stored = &f
	}
	if !FrontierMatches(stored, prev) {
		return Frontier{}, FrontierFence(next.Scope, stored)
	}
	next.Vector = s.writeShardsLocked(stored, next)
	s.frontiers[next.Scope] = next
	return cloneFrontier(next), nil
}

// The clone functions also normalise, so that MemStore returns what a
// DynamoDB round trip returns.

func cloneBytes(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return slices.Clone(b)
}

func cloneStrings(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return slices.Clone(s)
}

func cloneCheckpoint(c Checkpoint) Checkpoint {
	c.Cursor = cloneBytes(c.Cursor)
	c.Watermark = NormalizeWatermark(c.Watermark)
	if !c.HasApplied {
		c.Applied, c.AppliedID = coord.Position{}, ""
	}
	c.Parked = CleanReason(c.Parked)
	if len(c.Violations) == 0 {
		c.Violations = nil
	} else {
		c.Violations = maps.Clone(c.Violations)
	}
	c.Repairs = CloneRepairs(c.Repairs)
	return c
}

func cloneWitness(w witness.Witness) witness.Witness {
	w.InputCursor = cloneBytes(w.InputCursor)
	w.Successor = cloneBytes(w.Successor)
	w.Marker = cloneBytes(w.Marker)
	if len(w.Events) == 0 {
		w.Events = nil
	} else {
		w.Events = slices.Clone(w.Events)
	}
	w.CompleteThrough = NormalizeWatermark(w.CompleteThrough)
	return w
}

func cloneMembership(m Membership) Membership {
	m.Partitions = cloneStrings(m.Partitions)
	m.Parents = cloneLineage(m.Parents)
	m.Unproven = cloneStrings(m.Unproven)
	if len(m.Incarnations) > 0 {
		m.Incarnations = maps.Clone(m.Incarnations)
	} else {
		m.Incarnations = nil
	}
	m.Cutover = NormalizeWatermark(m.Cutover)
	m.Reason = CleanReason(m.Reason)
	m.Repairs = CloneRepairs(m.Repairs)
	return m
}

// cloneLineage copies a lineage map, dropping members without parents and
// sorting each parent list (nil when no member has parents).
func cloneLineage(l map[string][]string) map[string][]string {
	var out map[string][]string
	for c, ps := range l {
		if len(ps) == 0 {
			continue
		}
		if out == nil {
			out = make(map[string][]string, len(l))
		}
		ps = slices.Clone(ps)
		slices.Sort(ps)
		out[c] = ps
	}
	return out
}

func cloneFrontier(f Frontier) Frontier {
	f.Scalar = NormalizeWatermark(f.Scalar)
	if len(f.Vector) == 0 {
		f.Vector = nil
	} else {
		v := make(map[string]coord.Watermark, len(f.Vector))
		for p, w := range f.Vector {
			v[p] = NormalizeWatermark(w)
		}
		f.Vector = v
	}
	f.HeldBy = cloneStrings(f.HeldBy)
	f.Reason = CleanReason(f.Reason)
	return f
}

// stored returns a copy of k's checkpoint, nil when there is none. The
// caller holds s.mu.
func (s *MemStore) stored(k Key) *Checkpoint {
	c, ok := s.checkpoints[k]
	if !ok {
		return nil
	}
	c = cloneCheckpoint(c)
	return &c
}
