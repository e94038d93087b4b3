package store

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"

	"github.com/tidemark/tidemark/internal/coord"
)

// The published frontier is stored as one root record and S shard records
// of its epoch (docs/design.md#publishing):
//
//   - a shard holds the vector entries of the partitions that hash into it
//     (ShardOf) and a version that grows with every write of the shard;
//   - the root holds the epoch, the version (the compare-and-swap of
//     PublishFrontier), the scalar, the held-by partitions (at most
//     MaxPublishedHeldBy), the reason and each shard's version.
//
// PublishFrontier writes the shards whose entries changed first, each as
// the entry-wise maximum of what is stored and what it writes (a shard
// never lowers an entry, whoever wrote it), then the root by compare-and-
// swap on its version. Readers read the root every interval and only the
// shards whose version changed (FrontierCache): O(1) reads when nothing
// changes, whatever the number of partitions.

// MaxShardNames is the number of partitions per frontier shard on average:
// an epoch of P partitions has ShardCount(P) shards.
const MaxShardNames = 1000

// MaxPublishedHeldBy bounds the held-by list the root record keeps (the
// partitions without a watermark may be all of them).
const MaxPublishedHeldBy = 100

// MaxShardedRecordBytes bounds the membership and frontier records a store
// accepts: they are stored in shards, so the item limit applies per shard
// (100,000 partitions with 36-character names are about 7 MB).
const MaxShardedRecordBytes = 64 << 20

// ShardCount is the number of frontier shards of an epoch of n partitions.
func ShardCount(n int) int { return max(1, (n+MaxShardNames-1)/MaxShardNames) }

// ShardOf is the shard of partition among n shards (FNV-1a of the name).
func ShardOf(partition string, n int) int {
	if n <= 1 {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(partition))
	return int(h.Sum32() % uint32(n))
}

// SplitVector splits v into the n shards ShardOf names (every shard is
// present, possibly empty).
func SplitVector(v map[string]coord.Watermark, n int) []map[string]coord.Watermark {
	out := make([]map[string]coord.Watermark, n)
	for i := range out {
		out[i] = map[string]coord.Watermark{}
	}
	for p, w := range v {
		out[ShardOf(p, n)][p] = NormalizeWatermark(w)
	}
	return out
}

// FrontierShard is one shard of a published frontier.
type FrontierShard struct {
	Scope   string
	Epoch   uint64
	Index   int
	Version uint64
	Vector  map[string]coord.Watermark
}

// FrontierHead is the root record of a published frontier: the Frontier
// without its Vector (nil), and the version of each shard. A record
// written before shards (one item) comes back whole: Vector set, Shards
// nil.
type FrontierHead struct {
	Frontier
	Shards []uint64
}

// ShardedFrontier is implemented by stores that keep the published
// frontier in shards: the reads that make publication follow change.
type ShardedFrontier interface {
	// LoadFrontierHead reads the root record only (one read), or
	// ErrNotFound.
	LoadFrontierHead(ctx context.Context, scope string) (FrontierHead, error)
	// LoadFrontierShards reads the listed shards of epoch (absent shards
	// come back empty at version 0).
	LoadFrontierShards(ctx context.Context, scope string, epoch uint64, shards []int) ([]FrontierShard, error)
}

// MergeShard returns the entry-wise maximum of stored and next (the shard
// a write leaves: no entry is lowered or withdrawn, whoever wrote it) and
// whether it differs from stored. An entry of another coordinate kind than
// the stored one is refused (the stored one is kept) and reported.
func MergeShard(stored, next map[string]coord.Watermark) (map[string]coord.Watermark, bool, string) {
	out := make(map[string]coord.Watermark, max(len(stored), len(next)))
	for p, w := range stored {
		out[p] = NormalizeWatermark(w)
	}
	changed, why := false, ""
	for _, p := range slices.Sorted(maps.Keys(next)) {
		w := NormalizeWatermark(next[p])
		s, ok := out[p]
		switch {
		case !ok:
			out[p], changed = w, true
		case w.IsZero() || SameWatermark(s, w):
		case s.IsZero():
			out[p], changed = w, true
		case s.Kind != w.Kind:
			if why == "" {
				why = fmt.Sprintf("partition %s: watermark %s (%s) is not comparable with the published %s (%s)", p, w, w.Kind, s, s.Kind)
			}
		case s.Less(w):
			out[p], changed = w, true
		}
	}
	return out, changed, why
}

// ChangedShards lists the shards of next (n of them) a publication over
// prev must write: every shard when the epoch or the shard count changes,
// else those holding an entry that differs.
func ChangedShards(prev, next Frontier, n int) []int {
	if prev.IsZero() || prev.Epoch != next.Epoch || ShardCount(len(prev.Vector)) != n {
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out
	}
	seen := map[int]bool{}
	for p, w := range next.Vector {
		if o, ok := prev.Vector[p]; !ok || !SameWatermark(o, w) {
			seen[ShardOf(p, n)] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// CapHeldBy is the held-by list a root record keeps: the first
// MaxPublishedHeldBy names.
func CapHeldBy(h []string) []string {
	if len(h) > MaxPublishedHeldBy {
		return slices.Clone(h[:MaxPublishedHeldBy])
	}
	return h
}

// FrontierCache follows a scope's published frontier with as few reads as
// the store allows: with a ShardedFrontier store, Refresh reads the root
// and only the shards whose version changed since the last Refresh (one
// read when nothing changed); with any other store it reads the whole
// record. Not safe for concurrent use.
type FrontierCache struct {
	st    ScopeStore
	scope string

	// Filter, when set, drops entries read from the shards (the
	// simulator's broken variant "partial view"; the product never sets
	// it).
	Filter func(partition string) bool

	head   FrontierHead
	vec    map[string]coord.Watermark
	loaded bool
	// rereadAll: the next Refresh reads every shard (RereadShards).
	rereadAll bool
}

// NewFrontierCache returns a cache of scope's published frontier.
func NewFrontierCache(st ScopeStore, scope string) *FrontierCache {
	return &FrontierCache{st: st, scope: scope}
}

// Reset forgets what was read: the next Refresh reads every shard.
func (c *FrontierCache) Reset() { c.loaded, c.vec, c.head = false, nil, FrontierHead{} }

// RereadShards makes the next Refresh read every shard of the record,
// even when its root has not changed, if the record has at most max shards
// (0: any number). A shard written ahead of its root (its publisher lost
// the root's compare-and-swap) is read again only when the root's version
// of it moves, so a reader that loaded it earlier lags behind one that
// loaded it later: a reader that must not lag behind what another one
// showed earlier (a partition that changed hands) reads them all. Shard
// entries only go up within an epoch, so a full read sees at least what
// any earlier read of any reader saw.
func (c *FrontierCache) RereadShards(max int) {
	if c.loaded && c.head.Shards != nil && (max == 0 || len(c.head.Shards) <= max) {
		c.rereadAll = true
	}
}

// Refresh reads the record and returns it whole (Vector included), and
// whether anything changed since the last Refresh. ErrNotFound when
// none is published.
func (c *FrontierCache) Refresh(ctx context.Context) (Frontier, bool, error) {
	sf, ok := shardedOf(c.st)
	if !ok {
		f, err := c.st.LoadFrontier(ctx, c.scope)
		if err != nil {
			return Frontier{}, false, err
		}
		f.Vector = c.filter(f.Vector)
		changed := !c.loaded || f.Version != c.head.Version || f.Epoch != c.head.Epoch
		c.head, c.vec, c.loaded = FrontierHead{Frontier: f}, f.Vector, true
		return c.current(), changed, nil
	}
	for attempt := 1; ; attempt++ {
		f, changed, err := c.refreshSharded(ctx, sf)
		if !errors.Is(err, ErrShardsReplaced) || attempt == MaxShardRereads {
			return f, changed, err
		}
	}
}

// refreshSharded is one Refresh of a ShardedFrontier store:
// ErrShardsReplaced (and the cache unchanged) when the root read was
// replaced by a newer epoch's before its shards were read.
func (c *FrontierCache) refreshSharded(ctx context.Context, sf ShardedFrontier) (Frontier, bool, error) {
	h, err := sf.LoadFrontierHead(ctx, c.scope)
	if err != nil {
		return Frontier{}, false, err
	}
	if c.loaded && !c.rereadAll && h.Epoch == c.head.Epoch && h.Version == c.head.Version {
		return c.current(), false, nil
	}
	if h.Shards == nil {
		// A record of one item.
		c.head, c.vec, c.loaded = h, c.filter(h.Vector), true
		c.head.Vector = nil
		return c.current(), true, nil
	}
	var read []int
	fresh := !c.loaded || h.Epoch != c.head.Epoch || len(h.Shards) != len(c.head.Shards)
	for i, v := range h.Shards {
		if fresh || c.rereadAll || v > c.head.Shards[i] {
			read = append(read, i)
		}
	}
	vec := c.vec
	if fresh {
		vec = map[string]coord.Watermark{}
	}
	if len(read) > 0 {
		shards, err := sf.LoadFrontierShards(ctx, c.scope, h.Epoch, read)
		if err != nil {
			return Frontier{}, false, err
		}
		if err := CheckShardsOfHead(h, shards); err != nil {
			return Frontier{}, false, err
		}
		if !fresh {
			vec = maps.Clone(vec)
		}
		for _, s := range shards {
			if s.Version > h.Shards[s.Index] {
				h.Shards[s.Index] = s.Version // written ahead of the root
			}
			// Within an epoch a shard's entries only go up.
			maps.Copy(vec, c.filter(s.Vector))
		}
	}
	changed := !maps.Equal(vec, c.vec) || h.Version != c.head.Version || h.Epoch != c.head.Epoch
	c.head, c.vec, c.loaded, c.rereadAll = h, vec, true, false
	return c.current(), changed || fresh, nil
}

// ErrShardsReplaced says a root's shards were gone when read: a newer
// epoch's root replaced it in between and its publisher deleted the older
// epoch's shards. The reader reads the root again (at most
// MaxShardRereads times in all).
var ErrShardsReplaced = errors.New("store: the published frontier's shards were replaced while read")

// MaxShardRereads bounds the reads of the root a reader of a sharded
// frontier makes when its shards keep being replaced under it.
const MaxShardRereads = 4

// CheckShardsOfHead returns ErrShardsReplaced when a shard read for head h
// is older than the version h records for it. Within an epoch a shard's
// version only grows and the root records a version its writer wrote, so
// an older shard is one deleted (version 0, no entries) after a newer
// epoch's root was written.
func CheckShardsOfHead(h FrontierHead, shards []FrontierShard) error {
	for _, s := range shards {
		if s.Index >= 0 && s.Index < len(h.Shards) && s.Version < h.Shards[s.Index] {
			return fmt.Errorf("%w: shard %d of epoch %d of scope %s is at version %d, the root read names %d", ErrShardsReplaced, s.Index, h.Epoch, h.Scope, s.Version, h.Shards[s.Index])
		}
	}
	return nil
}

func (c *FrontierCache) filter(v map[string]coord.Watermark) map[string]coord.Watermark {
	if c.Filter == nil {
		return v
	}
	out := make(map[string]coord.Watermark, len(v))
	for p, w := range v {
		if c.Filter(p) {
			out[p] = w
		}
	}
	return out
}

// current is the cached record (the vector shared: callers do not modify
// it).
func (c *FrontierCache) current() Frontier {
	f := c.head.Frontier
	if len(c.vec) > 0 {
		f.Vector = c.vec
	}
	return f
}

// IsNotPublished reports whether err says no frontier is published.
func IsNotPublished(err error) bool { return errors.Is(err, ErrNotFound) }

// MembershipEpochReader is implemented by stores that can read the epoch
// of the membership record alone (one small read, whatever the number of
// partitions).
type MembershipEpochReader interface {
	MembershipEpoch(ctx context.Context, scope string) (uint64, error)
}

// MembershipCache follows a scope's membership record: with a
// MembershipEpochReader store, Load reads the epoch only and the whole
// record only when the epoch changed (a record never changes within its
// epoch: SwapMembership writes a greater one). Not safe for concurrent
// use.
type MembershipCache struct {
	st    ScopeStore
	scope string
	m     Membership
	ok    bool
}

// NewMembershipCache returns a cache of scope's membership record.
func NewMembershipCache(st ScopeStore, scope string) *MembershipCache {
	return &MembershipCache{st: st, scope: scope}
}

// Load returns the current membership record, or ErrNotFound.
func (c *MembershipCache) Load(ctx context.Context) (Membership, error) {
	if r, ok := epochReaderOf(c.st); ok && c.ok {
		e, err := r.MembershipEpoch(ctx, c.scope)
		if err != nil {
			return Membership{}, err
		}
		if e == c.m.Epoch {
			return c.m, nil
		}
	}
	m, err := c.st.LoadMembership(ctx, c.scope)
	if err != nil {
		return Membership{}, err
	}
	c.m, c.ok = m, true
	return m, nil
}

// LoadFrontierHead reads the root of scope's published frontier alone
// when st keeps shards (the vector is then nil), else the whole record.
func LoadFrontierHead(ctx context.Context, st ScopeStore, scope string) (FrontierHead, error) {
	if sf, ok := shardedOf(st); ok {
		return sf.LoadFrontierHead(ctx, scope)
	}
	f, err := st.LoadFrontier(ctx, scope)
	return FrontierHead{Frontier: f}, err
}
