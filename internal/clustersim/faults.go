package clustersim

import (
	"context"
	"errors"
	"fmt"

	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/store"
	"math/rand/v2"
)

// The store stack every actor of a run talks to, outermost first:
//
//	faults        throttling and lost responses, seeded (Faults)
//	unconditional only under Variant UnconditionalWrite
//	tap           tells the oracle about every write that took effect
//	memstore.Store the real in-memory store; the oracle reads it directly

var (
	// errThrottled: the call was refused before it reached the store; it
	// had no effect.
	errThrottled = errors.New("sim: store throttled (injected)")
	// errLost: the write took effect but its response was lost; the caller
	// sees a transport error and must resolve the outcome by reading.
	errLost = errors.New("sim: store response lost (injected)")
)

// Fault is one store fault Faults injects.
type Fault uint8

const (
	// Throttle refuses the call before it reaches the store.
	Throttle Fault = 1 + iota
	// Lose performs the write and loses its response.
	Lose
)

func (f Fault) String() string {
	switch f {
	case Throttle:
		return "throttle"
	case Lose:
		return "lose"
	}
	return fmt.Sprintf("fault(%d)", uint8(f))
}

// Faults wraps a store.Store and injects faults from its own PCG:
// throttling on every call (the call has no effect and returns an error) and
// lost responses on writes (the write happens, the caller sees an error).
type Faults struct {
	// The embedded store passes through any method added to store.Store
	// later; every method known here is wrapped below.
	store.Store
	inner    store.Store
	seed     uint64
	rng      *rand.Rand
	throttle float64
	lost     float64
	// on reports every injected fault (method, fault) to the run.
	on func(method string, f Fault)
}

var _ store.Store = (*Faults)(nil)

// NewFaults returns a fault injector over inner seeded with seed.
func NewFaults(inner store.Store, seed uint64, throttle, lost float64) *Faults {
	return &Faults{Store: inner, inner: inner, seed: seed, rng: rand.New(rand.NewPCG(seed, 0xfa17)), throttle: throttle, lost: lost}
}

// String names the injector with its seed and rates, so a trace says which
// faults were possible.
func (f *Faults) String() string {
	return fmt.Sprintf("faults(seed=%d throttle=%.2f lost=%.2f)", f.seed, f.throttle, f.lost)
}

// decide returns the fault for one call of method, if any.
func (f *Faults) decide(method string, write bool) Fault {
	// Draw both numbers on every call so the stream does not depend on the
	// rates.
	a, b := f.rng.Float64(), f.rng.Float64()
	switch {
	case a < f.throttle:
		return Throttle
	case write && b < f.lost:
		return Lose
	}
	return 0
}

func (f *Faults) read(method string) error {
	if f.decide(method, false) == Throttle {
		f.report(method, Throttle)
		return fmt.Errorf("%s: %w", method, errThrottled)
	}
	return nil
}

func (f *Faults) report(method string, x Fault) {
	if f.on != nil {
		f.on(method, x)
	}
}

// write runs do under a fault decision.
func write[T any](f *Faults, method string, do func() (T, error)) (T, error) {
	var zero T
	switch x := f.decide(method, true); x {
	case Throttle:
		f.report(method, x)
		return zero, fmt.Errorf("%s: %w", method, errThrottled)
	case Lose:
		f.report(method, x)
		_, _ = do()
		return zero, fmt.Errorf("%s: %w", method, errLost)
	}
	return do()
}

func (f *Faults) LoadCheckpoint(ctx context.Context, k store.Key) (store.Checkpoint, error) {
	if err := f.read("LoadCheckpoint"); err != nil {
		return store.Checkpoint{}, err
	}
	return f.inner.LoadCheckpoint(ctx, k)
}

func (f *Faults) CreateCheckpoint(ctx context.Context, c store.Checkpoint) (store.Checkpoint, error) {
	return write(f, "CreateCheckpoint", func() (store.Checkpoint, error) { return f.inner.CreateCheckpoint(ctx, c) })
}

func (f *Faults) Promote(ctx context.Context, p store.Promotion) (store.Checkpoint, error) {
	return write(f, "Promote", func() (store.Checkpoint, error) { return f.inner.Promote(ctx, p) })
}

func (f *Faults) SetParked(ctx context.Context, k store.Key, cursor []byte, generation uint64, lease store.Lease, reason string) (store.Checkpoint, error) {
	return write(f, "SetParked", func() (store.Checkpoint, error) {
		return f.inner.SetParked(ctx, k, cursor, generation, lease, reason)
	})
}

func (f *Faults) ListCheckpoints(ctx context.Context, scope string) ([]store.Checkpoint, error) {
	if err := f.read("ListCheckpoints"); err != nil {
		return nil, err
	}
	return f.inner.ListCheckpoints(ctx, scope)
}

func (f *Faults) PutWitness(ctx context.Context, w reconcile.Witness) error {
	_, err := write(f, "PutWitness", func() (struct{}, error) { return struct{}{}, f.inner.PutWitness(ctx, w) })
	return err
}

// PutWitnesses is one write of the whole group (a fault throttles it,
// nothing stored, or loses its answer, all stored).
func (f *Faults) PutWitnesses(ctx context.Context, ws []reconcile.Witness) error {
	_, err := write(f, "PutWitnesses", func() (struct{}, error) { return struct{}{}, store.PutWitnesses(ctx, f.inner, ws) })
	return err
}

func (f *Faults) Witnesses(ctx context.Context, k store.Key, generation uint64) ([]reconcile.Witness, error) {
	if err := f.read("Witnesses"); err != nil {
		return nil, err
	}
	return f.inner.Witnesses(ctx, k, generation)
}

func (f *Faults) WitnessesFrom(ctx context.Context, k store.Key, fromGeneration uint64) ([]reconcile.Witness, error) {
	if err := f.read("WitnessesFrom"); err != nil {
		return nil, err
	}
	return f.inner.WitnessesFrom(ctx, k, fromGeneration)
}

func (f *Faults) ClaimLease(ctx context.Context, k store.Key, expect store.Lease, owner string) (store.Checkpoint, error) {
	return write(f, "ClaimLease", func() (store.Checkpoint, error) { return f.inner.ClaimLease(ctx, k, expect, owner) })
}

func (f *Faults) ReleaseLease(ctx context.Context, k store.Key, held store.Lease) (store.Checkpoint, error) {
	return write(f, "ReleaseLease", func() (store.Checkpoint, error) { return f.inner.ReleaseLease(ctx, k, held) })
}

func (f *Faults) RecordReceipt(ctx context.Context, k store.Key, generation uint64, attempt string, ackedThrough int) error {
	_, err := write(f, "RecordReceipt", func() (struct{}, error) {
		return struct{}{}, f.inner.RecordReceipt(ctx, k, generation, attempt, ackedThrough)
	})
	return err
}

func (f *Faults) SetDisposition(ctx context.Context, k store.Key, generation uint64, attempt string, d reconcile.Disposition) error {
	_, err := write(f, "SetDisposition", func() (struct{}, error) {
		return struct{}{}, f.inner.SetDisposition(ctx, k, generation, attempt, d)
	})
	return err
}

func (f *Faults) LoadMembership(ctx context.Context, scope string) (store.Membership, error) {
	if err := f.read("LoadMembership"); err != nil {
		return store.Membership{}, err
	}
	return f.inner.LoadMembership(ctx, scope)
}

func (f *Faults) SwapMembership(ctx context.Context, prevEpoch uint64, next store.Membership) (store.Membership, error) {
	return write(f, "SwapMembership", func() (store.Membership, error) { return f.inner.SwapMembership(ctx, prevEpoch, next) })
}

func (f *Faults) LoadFrontier(ctx context.Context, scope string) (store.Frontier, error) {
	if err := f.read("LoadFrontier"); err != nil {
		return store.Frontier{}, err
	}
	return f.inner.LoadFrontier(ctx, scope)
}

func (f *Faults) PublishFrontier(ctx context.Context, prev, next store.Frontier) (store.Frontier, error) {
	return write(f, "PublishFrontier", func() (store.Frontier, error) { return f.inner.PublishFrontier(ctx, prev, next) })
}

// unconditional is Variant UnconditionalWrite: a store whose Promote
// ignores the writer's FromCursor and FromGeneration and overwrites
// whatever checkpoint is stored (it reads the stored cursor and generation
// and writes over them). Every other method, and the store's own
// watermark and parking conditions, are the real ones.
type unconditional struct {
	store.Store
}

func (u unconditional) Promote(ctx context.Context, p store.Promotion) (store.Checkpoint, error) {
	if cp, err := u.Store.LoadCheckpoint(ctx, p.Key); err == nil {
		p.FromCursor, p.FromGeneration = cp.Cursor, cp.Generation
	}
	return u.Store.Promote(ctx, p)
}

// tap passes every call to the in-memory store (memstore) and tells the oracle about the
// witness writes that took effect.
type tap struct {
	store.Store
	o *oracle
}

func (t tap) PutWitness(ctx context.Context, w reconcile.Witness) error {
	err := t.Store.PutWitness(ctx, w)
	if err == nil {
		t.o.witnessStored(w)
	}
	return err
}

func (t tap) PutWitnesses(ctx context.Context, ws []reconcile.Witness) error {
	err := store.PutWitnesses(ctx, t.Store, ws)
	if err == nil {
		for _, w := range ws {
			t.o.witnessStored(w)
		}
	}
	return err
}

func (t tap) RecordReceipt(ctx context.Context, k store.Key, generation uint64, attempt string, ackedThrough int) error {
	err := t.Store.RecordReceipt(ctx, k, generation, attempt, ackedThrough)
	if err == nil {
		t.o.receiptStored(k, generation, attempt, ackedThrough)
	}
	return err
}

// SwapMembership tells the oracle of every epoch written: one step may
// write several (incarnation changes of several partitions) and publish a
// frontier of one of them in between (a worker's instance machine times
// its publisher), while the oracle's check after the step sees only the
// last.
func (t tap) SwapMembership(ctx context.Context, prevEpoch uint64, next store.Membership) (store.Membership, error) {
	m, err := t.Store.SwapMembership(ctx, prevEpoch, next)
	if err == nil {
		t.o.membership()
	}
	return m, err
}

func (t tap) SetDisposition(ctx context.Context, k store.Key, generation uint64, attempt string, d reconcile.Disposition) error {
	err := t.Store.SetDisposition(ctx, k, generation, attempt, d)
	if err == nil {
		t.o.dispositionStored(k, generation, attempt, d)
	}
	return err
}

// PruneWitnesses is a write: throttled, or done with its response lost.
func (f *Faults) PruneWitnesses(ctx context.Context, k store.Key, below uint64) (int, error) {
	return write(f, "PruneWitnesses", func() (int, error) { return f.inner.PruneWitnesses(ctx, k, below) })
}
