// Package memstore is the in-memory twin of the DynamoDB store: the store
// port (store.Store, every role) held in maps under one mutex, for unit
// tests, the simulator and the memory checkpoint store of the demo. It
// passes the same contract suites (store/storetest) as
// internal/dynamostore.
//
// Invariants: every method is atomic (one mutex, as a single-item
// conditional write is on DynamoDB); every write evaluates the same pure
// conditions as the DynamoDB store (store/conditions.go) and loses with the
// same *store.FenceError carrying the winner; everything is deep-copied in
// and out, so no caller shares memory with the stored state.
package memstore

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/store"
)

// Store is the in-memory twin of the DynamoDB store (internal/dynamostore): the
// same conditions, the same errors (including *FenceError with the winner),
// the same limits and the same normalisation of what it returns (empty
// byte slices and lists come back nil, watermarks normalised, reasons
// cleaned). Everything is deep-copied in and out. One mutex makes every
// method atomic, which is what a single-item conditional write gives on
// DynamoDB. The zero Store is not usable; call New.
type Store struct {
	mu          sync.Mutex
	checkpoints map[store.Key]store.Checkpoint
	witnesses   map[witnessRef]reconcile.Witness
	members     map[string]store.Membership
	frontiers   map[string]store.Frontier
	// shardVersions is the version of each shard of the published
	// frontier of a scope (published.go).
	shardVersions map[string][]uint64
	discovery     map[string]uint64
	heartbeats    map[string]map[string]store.Heartbeat // scope -> owner -> heartbeat (heartbeat.go)
	// receipts holds the re-read window's receipt chunks (receipts.go).
	receipts map[witnessRef]store.ReceiptChunk
}

type witnessRef struct {
	key        store.Key
	generation uint64
	attempt    string
}

var _ store.Store = (*Store)(nil)

// New returns an empty Store.
func New() *Store {
	return &Store{
		checkpoints: map[store.Key]store.Checkpoint{},
		witnesses:   map[witnessRef]reconcile.Witness{},
		members:     map[string]store.Membership{},
		frontiers:   map[string]store.Frontier{},
		discovery:   map[string]uint64{},
		receipts:    map[witnessRef]store.ReceiptChunk{},

		shardVersions: map[string][]uint64{},
	}
}

// LoadCheckpoint implements Store.
func (s *Store) LoadCheckpoint(_ context.Context, k store.Key) (store.Checkpoint, error) {
	if err := k.Validate(); err != nil {
		return store.Checkpoint{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.checkpoints[k]
	if !ok {
		return store.Checkpoint{}, fmt.Errorf("%w: no checkpoint for %s", store.ErrNotFound, k)
	}
	return cloneCheckpoint(c), nil
}

// CreateCheckpoint implements Store.
func (s *Store) CreateCheckpoint(_ context.Context, c store.Checkpoint) (store.Checkpoint, error) {
	if err := c.Validate(); err != nil {
		return store.Checkpoint{}, err
	}
	if c.Generation != 1 {
		return store.Checkpoint{}, fmt.Errorf("%w: a first checkpoint has generation 1, not %d", store.ErrInvalid, c.Generation)
	}
	c = cloneCheckpoint(c)
	s.mu.Lock()
	defer s.mu.Unlock()
	if w, ok := s.checkpoints[c.Key]; ok {
		w = cloneCheckpoint(w)
		return store.Checkpoint{}, &store.FenceError{Key: c.Key, Op: "create checkpoint", Reason: "a checkpoint already exists", Winner: &w}
	}
	s.checkpoints[c.Key] = c
	return cloneCheckpoint(c), nil
}

// Promote implements Store.
func (s *Store) Promote(_ context.Context, p store.Promotion) (store.Checkpoint, error) {
	p.Lease = p.Lease.Fence()
	if err := p.Validate(); err != nil {
		return store.Checkpoint{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	stored := s.stored(p.Key)
	if reason := store.PromotionConflict(p, stored); reason != "" {
		if stored != nil && store.PromotionApplied(p, *stored) {
			return *stored, nil
		}
		return store.Checkpoint{}, &store.FenceError{Key: p.Key, Op: "promote", Reason: reason, WantGeneration: p.FromGeneration, Winner: stored}
	}
	next := p.Apply(*stored)
	s.checkpoints[p.Key] = next
	return cloneCheckpoint(next), nil
}

// SetParked implements Store.
func (s *Store) SetParked(_ context.Context, k store.Key, cursor []byte, generation uint64, lease store.Lease, reason string) (store.Checkpoint, error) {
	return s.setFencedText(k, cursor, generation, lease, "set parked", func(c *store.Checkpoint) { c.Parked = store.CleanReason(reason) })
}

// NoteFailure implements Store.
func (s *Store) NoteFailure(_ context.Context, k store.Key, cursor []byte, generation uint64, lease store.Lease, note string) (store.Checkpoint, error) {
	return s.setFencedText(k, cursor, generation, lease, "note failure", func(c *store.Checkpoint) { c.Failing = store.CleanReason(note) })
}

// setFencedText is SetParked's and NoteFailure's one write: under the
// park condition (the checkpoint still at cursor and generation, the lease
// fence held), set one text attribute of the checkpoint and nothing else.
func (s *Store) setFencedText(k store.Key, cursor []byte, generation uint64, lease store.Lease, op string, set func(*store.Checkpoint)) (store.Checkpoint, error) {
	lease = lease.Fence()
	if err := store.ValidatePark(k, cursor, lease); err != nil {
		return store.Checkpoint{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	stored := s.stored(k)
	if why := store.ParkConflict(cursor, generation, lease, stored); why != "" {
		return store.Checkpoint{}, &store.FenceError{Key: k, Op: op, Reason: why, WantGeneration: generation, Winner: stored}
	}
	next := *stored
	set(&next)
	s.checkpoints[k] = next
	return cloneCheckpoint(next), nil
}

// Unpark implements Store.
func (s *Store) Unpark(_ context.Context, k store.Key, cursor []byte, generation uint64, lease store.Lease, repairs []store.RepairEntry) (store.Checkpoint, error) {
	lease = lease.Fence()
	if err := store.ValidateUnpark(k, cursor, lease, repairs); err != nil {
		return store.Checkpoint{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	stored := s.stored(k)
	why := store.ParkConflict(cursor, generation, lease, stored)
	if why == "" && stored.Parked == "" {
		why = "the partition is not parked"
	}
	if why != "" {
		if stored != nil && store.UnparkApplied(cursor, generation, repairs, *stored) {
			return *stored, nil
		}
		return store.Checkpoint{}, &store.FenceError{Key: k, Op: "unpark", Reason: why, WantGeneration: generation, Winner: stored}
	}
	next := *stored
	next.Parked = ""
	next.Repairs = store.CloneRepairs(repairs)
	s.checkpoints[k] = next
	return cloneCheckpoint(next), nil
}

// ListCheckpoints implements Store. Checkpoints come in partition order.
func (s *Store) ListCheckpoints(_ context.Context, scope string) ([]store.Checkpoint, error) {
	if err := store.CheckName("scope", scope); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []store.Checkpoint
	for k, c := range s.checkpoints {
		if k.Scope == scope {
			out = append(out, cloneCheckpoint(c))
		}
	}
	slices.SortFunc(out, func(a, b store.Checkpoint) int { return strings.Compare(a.Partition, b.Partition) })
	return out, nil
}

// PutWitness implements Store.
func (s *Store) PutWitness(_ context.Context, w reconcile.Witness) error {
	if err := store.ValidateWitness(w); err != nil {
		return err
	}
	w = cloneWitness(w)
	ref := witnessRef{key: store.Key{Scope: w.Scope, Partition: w.Partition}, generation: w.Generation, attempt: w.AttemptID}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.witnesses[ref]; ok {
		if store.SameWitness(old, w) {
			return nil
		}
		return &store.FenceError{Key: ref.key, Op: "put witness", Reason: fmt.Sprintf("attempt %q at generation %d is already stored with different content", w.AttemptID, w.Generation), WantGeneration: w.Generation}
	}
	s.witnesses[ref] = w
	return nil
}

// PutWitnesses implements store.WitnessGrouper: every witness of the
// group is stored under one lock, or none (a witness stored with other
// content fences the whole group).
func (s *Store) PutWitnesses(_ context.Context, ws []reconcile.Witness) error {
	if err := store.ValidateWitnessGroup(ws); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range ws {
		ref := witnessRef{key: store.Key{Scope: w.Scope, Partition: w.Partition}, generation: w.Generation, attempt: w.AttemptID}
		if old, ok := s.witnesses[ref]; ok && !store.SameWitness(old, w) {
			return &store.FenceError{Key: ref.key, Op: "put witnesses", Reason: fmt.Sprintf("attempt %q at generation %d is already stored with different content", w.AttemptID, w.Generation), WantGeneration: w.Generation}
		}
	}
	for _, w := range ws {
		ref := witnessRef{key: store.Key{Scope: w.Scope, Partition: w.Partition}, generation: w.Generation, attempt: w.AttemptID}
		if _, ok := s.witnesses[ref]; !ok {
			s.witnesses[ref] = cloneWitness(w)
		}
	}
	return nil
}

// Witnesses implements Store. Witnesses come in byte-wise AttemptID order.
func (s *Store) Witnesses(_ context.Context, k store.Key, generation uint64) ([]reconcile.Witness, error) {
	return s.witnessesOf(k, func(g uint64) bool { return g == generation })
}

// RecordReceipt implements Store.
func (s *Store) RecordReceipt(_ context.Context, k store.Key, generation uint64, attempt string, ackedThrough int) error {
	if err := store.ValidateAttempt(k, attempt); err != nil {
		return err
	}
	if ackedThrough < 0 {
		return fmt.Errorf("%w: acked through %d", store.ErrInvalid, ackedThrough)
	}
	ref := witnessRef{key: k, generation: generation, attempt: attempt}
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.witnesses[ref]
	switch {
	case !ok:
		return fmt.Errorf("%w: no witness %s at generation %d of %s", store.ErrNotFound, attempt, generation, k)
	case ackedThrough > len(w.Events):
		return fmt.Errorf("%w: acked through %d of a witness of %d events", store.ErrInvalid, ackedThrough, len(w.Events))
	case ackedThrough > w.AckedThrough:
		w.AckedThrough = ackedThrough
		s.witnesses[ref] = w
	}
	return nil
}

// SetDisposition implements Store. Setting the state a witness already has
// is an idempotent no-op (a retry after a lost response).
func (s *Store) SetDisposition(_ context.Context, k store.Key, generation uint64, attempt string, d reconcile.Disposition) error {
	if err := store.ValidateDisposition(k, attempt, d); err != nil {
		return err
	}
	ref := witnessRef{key: k, generation: generation, attempt: attempt}
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.witnesses[ref]
	switch {
	case !ok:
		return fmt.Errorf("%w: no witness %s at generation %d of %s", store.ErrNotFound, attempt, generation, k)
	case w.Disposition == reconcile.Pending:
		w.Disposition = d
		s.witnesses[ref] = w
		return nil
	case w.Disposition == d:
		return nil
	}
	return store.DispositionFence(k, generation, attempt, w.Disposition, d)
}

// LoadMembership implements Store.
func (s *Store) LoadMembership(_ context.Context, scope string) (store.Membership, error) {
	if err := store.CheckName("scope", scope); err != nil {
		return store.Membership{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.members[scope]
	if !ok {
		return store.Membership{}, fmt.Errorf("%w: no membership record for scope %s", store.ErrNotFound, scope)
	}
	return cloneMembership(m), nil
}

// SwapMembership implements Store.
func (s *Store) SwapMembership(_ context.Context, prevEpoch uint64, next store.Membership) (store.Membership, error) {
	if err := store.ValidateSwap(prevEpoch, next); err != nil {
		return store.Membership{}, err
	}
	next = cloneMembership(next)
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.members[next.Scope]
	if (prevEpoch == 0 && ok) || (prevEpoch != 0 && (!ok || old.Epoch != prevEpoch)) {
		return store.Membership{}, store.MembershipFence(next.Scope, prevEpoch, ok, old.Epoch)
	}
	s.members[next.Scope] = next
	return cloneMembership(next), nil
}

// RequestDiscovery implements Store.
func (s *Store) RequestDiscovery(_ context.Context, scope string) (uint64, error) {
	if err := store.CheckName("scope", scope); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.discovery[scope]++
	return s.discovery[scope], nil
}

// DiscoveryRequests implements Store.
func (s *Store) DiscoveryRequests(_ context.Context, scope string) (uint64, error) {
	if err := store.CheckName("scope", scope); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.discovery[scope], nil
}

// LoadFrontier implements Store.
func (s *Store) LoadFrontier(_ context.Context, scope string) (store.Frontier, error) {
	if err := store.CheckName("scope", scope); err != nil {
		return store.Frontier{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.frontiers[scope]
	if !ok {
		return store.Frontier{}, fmt.Errorf("%w: no published frontier for scope %s", store.ErrNotFound, scope)
	}
	return cloneFrontier(f), nil
}

// PublishFrontier implements Store.
func (s *Store) PublishFrontier(_ context.Context, prev, next store.Frontier) (store.Frontier, error) {
	if err := store.ValidatePublish(prev, next); err != nil {
		return store.Frontier{}, err
	}
	next = cloneFrontier(next)
	next.Version = prev.Version + 1
	next.HeldBy = store.CapHeldBy(next.HeldBy)
	s.mu.Lock()
	defer s.mu.Unlock()
	var stored *store.Frontier
	if f, ok := s.frontiers[next.Scope]; ok {
		stored = &f
	}
	if !store.FrontierMatches(stored, prev) {
		return store.Frontier{}, store.FrontierFence(next.Scope, stored)
	}
	next.Vector = s.writeShardsLocked(stored, next)
	s.frontiers[next.Scope] = next
	return cloneFrontier(next), nil
}

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

func cloneCheckpoint(c store.Checkpoint) store.Checkpoint {
	c.Cursor = cloneBytes(c.Cursor)
	c.Watermark = store.NormalizeWatermark(c.Watermark)
	if !c.HasApplied {
		c.Applied, c.AppliedID = coord.Position{}, ""
	}
	c.Parked = store.CleanReason(c.Parked)
	if len(c.Violations) == 0 {
		c.Violations = nil
	} else {
		c.Violations = maps.Clone(c.Violations)
	}
	c.Repairs = store.CloneRepairs(c.Repairs)
	return c
}

func cloneWitness(w reconcile.Witness) reconcile.Witness {
	w.InputCursor = cloneBytes(w.InputCursor)
	w.Successor = cloneBytes(w.Successor)
	w.Marker = cloneBytes(w.Marker)
	if len(w.Events) == 0 {
		w.Events = nil
	} else {
		w.Events = slices.Clone(w.Events)
	}
	w.CompleteThrough = store.NormalizeWatermark(w.CompleteThrough)
	return w
}

func cloneMembership(m store.Membership) store.Membership {
	m.Partitions = cloneStrings(m.Partitions)
	m.Parents = cloneLineage(m.Parents)
	m.Unproven = cloneStrings(m.Unproven)
	if len(m.Incarnations) > 0 {
		m.Incarnations = maps.Clone(m.Incarnations)
	} else {
		m.Incarnations = nil
	}
	m.Cutover = store.NormalizeWatermark(m.Cutover)
	m.Reason = store.CleanReason(m.Reason)
	m.Repairs = store.CloneRepairs(m.Repairs)
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

func cloneFrontier(f store.Frontier) store.Frontier {
	f.Scalar = store.NormalizeWatermark(f.Scalar)
	if len(f.Vector) == 0 {
		f.Vector = nil
	} else {
		v := make(map[string]coord.Watermark, len(f.Vector))
		for p, w := range f.Vector {
			v[p] = store.NormalizeWatermark(w)
		}
		f.Vector = v
	}
	f.HeldBy = cloneStrings(f.HeldBy)
	f.Reason = store.CleanReason(f.Reason)
	return f
}

// stored returns a copy of k's checkpoint, nil when there is none. The
// caller holds s.mu.
func (s *Store) stored(k store.Key) *store.Checkpoint {
	c, ok := s.checkpoints[k]
	if !ok {
		return nil
	}
	c = cloneCheckpoint(c)
	return &c
}
