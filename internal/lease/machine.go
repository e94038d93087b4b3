package lease

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tidemark/tidemark/internal/store"
)

// The heartbeat lease lifecycle (docs/design.md#leases-and-fencing).
//
// Machine is the pure lease lifecycle of one instance incarnation: it
// decides from what the caller read (heartbeats, checkpoint leases) and the
// results of the caller's writes, at readings of the caller's monotonic
// clock, which writes to do and which partition workers to start or stop.
// It performs no I/O and is not safe for concurrent use (the caller wraps
// it in a mutex and never holds it across I/O, so a renewal never waits
// behind a balance round).
//
// Usage, by the caller:
//  1. Every renew interval, on its own timer: hb, held, ok := Heartbeat();
//     write store.RenewHeartbeat(hb, held); report Renewed(start, got, err).
//     When Renewed or Stale returns a reason, stop every worker: this
//     incarnation is gone (Gone), start a new one with a new owner.
//  2. Every renew interval, on the balance timer: read ListHeartbeats and
//     pass it to Observe; perform its TakeOvers (TookOver each result).
//  3. When Observe (or a takeover) says ReadLeases, read ListCheckpoints
//     (after the heartbeat read); then Decide, with rebalance set on
//     balance ticks; stop the workers of Lost; release Release (stop the
//     worker, then store.ReleaseLease, then Released); claim Claims with
//     bounded concurrency, reporting each with Claimed (start the worker
//     when it returns true); delete DeleteHeartbeats.
//
// Cost: while every instance is live and at its share, Observe asks for no
// checkpoint read: idle upkeep is one heartbeat write and one heartbeat
// Query per instance per renew interval, whatever the number of
// partitions.
type Machine struct {
	cfg Config

	hb        store.Heartbeat // own heartbeat as last written (Counter 0: not yet)
	firstAt   time.Time       // start of the first successful renewal
	renewedAt time.Time       // start of the last successful renewal
	gone      string          // why this incarnation lost its heartbeat ("" while live)

	held     map[string]store.Lease // partitions held (workers running)
	claiming map[string]bool        // claims in flight
	releases map[string]bool        // releases in flight

	others   map[string]HeartbeatView // other owners' heartbeats, by owner
	observed time.Time                // clock reading of the last Observe
	taken    map[string]bool          // owners whose heartbeat is taken over
	unknown  map[string]time.Time     // lease owners with no heartbeat: first seen
	readOnce bool                     // the checkpoint leases were read once
	recheck  bool                     // a claim or release had an unknown outcome or failed: read again
}

// Config configures a Machine.
type Config struct {
	// Self is this incarnation's owner "<instance_id>#<incarnation>".
	Self string
	// Period is the lease period; RenewInterval the renewal interval
	// (< Period/2).
	Period, RenewInterval time.Duration
	// MaxOwned caps the partitions held (0: no cap).
	MaxOwned int
	// MaxMoves caps the partitions an instance above its share releases
	// per balance round (0: never releases to rebalance).
	MaxMoves int
}

// HeartbeatView is another owner's heartbeat as this instance saw it.
type HeartbeatView struct {
	store.Heartbeat
	// Since is the reading of this instance's clock when it first saw
	// Counter (taken after the read returned).
	Since time.Time
}

// NewMachine returns the machine of a new incarnation holding nothing.
func NewMachine(cfg Config) *Machine {
	return &Machine{
		cfg:      cfg,
		held:     map[string]store.Lease{},
		claiming: map[string]bool{},
		releases: map[string]bool{},
		others:   map[string]HeartbeatView{},
		taken:    map[string]bool{},
		unknown:  map[string]time.Time{},
	}
}

// Self is this incarnation's owner.
func (m *Machine) Self() string { return m.cfg.Self }

// Gone returns why this incarnation lost its heartbeat ("" while live).
func (m *Machine) Gone() string { return m.gone }

// Held returns the partitions held, sorted.
func (m *Machine) Held() []string { return sortedKeys(m.held) }

// Lease returns the held lease of part.
func (m *Machine) Lease(part string) (store.Lease, bool) {
	l, ok := m.held[part]
	return l, ok
}

// Owned is the number of partitions held (the owned gauge).
func (m *Machine) Owned() int { return len(m.held) }

// ---------------------------------------------------------------------------
// Renewal.

// Heartbeat returns the heartbeat to renew (the one last written; Counter 0
// creates it) and the partitions held to record in it; ok is false once
// the incarnation is gone.
func (m *Machine) Heartbeat(scope string) (hb store.Heartbeat, held int, ok bool) {
	if m.gone != "" {
		return store.Heartbeat{}, 0, false
	}
	hb = m.hb
	hb.Scope, hb.Owner = scope, m.cfg.Self
	return hb, len(m.held), true
}

// Renewed reports a renewal started at start. A fence (the heartbeat was
// taken over or removed) makes the incarnation gone: the returned reason
// says to stop every worker. Another error leaves the outcome unknown: the
// next renewal repeats it (the store recognises a repeat of an applied
// renewal), and Stale decides when to give up.
func (m *Machine) Renewed(start time.Time, got store.Heartbeat, err error) (stopAll string) {
	if m.gone != "" {
		return ""
	}
	switch {
	case err == nil:
		m.hb = got
		if m.firstAt.IsZero() {
			m.firstAt = start
		}
		m.renewedAt = start
		return ""
	case errors.Is(err, store.ErrFenced) || errors.Is(err, store.ErrInvalid):
		m.gone = fmt.Sprintf("heartbeat renewal failed: %v", err)
		m.dropAll()
		return m.gone
	}
	return m.Stale(start)
}

// Fresh reports, without changing anything, whether at now this
// incarnation is live and its heartbeat's last successful renewal started
// less than a lease period ago: what it holds is still its own (the others
// take a lease over only after a lease period without a renewal).
func (m *Machine) Fresh(now time.Time) bool {
	return m.gone == "" && !m.renewedAt.IsZero() && now.Sub(m.renewedAt) < m.cfg.Period
}

// FreshUntil is the instant from which Fresh is false (zero while gone or
// before the first successful renewal).
func (m *Machine) FreshUntil() time.Time {
	if m.gone != "" || m.renewedAt.IsZero() {
		return time.Time{}
	}
	return m.renewedAt.Add(m.cfg.Period)
}

// Stale checks, at now, whether the heartbeat went unrenewed for a lease
// period since the start of its last successful renewal: the others may
// consider this instance dead from then on, so it stops every worker
// (the returned reason) and the incarnation is gone.
func (m *Machine) Stale(now time.Time) (stopAll string) {
	if m.gone != "" || m.renewedAt.IsZero() || now.Sub(m.renewedAt) < m.cfg.Period {
		return ""
	}
	m.gone = fmt.Sprintf("heartbeat not renewed for %s; the others may consider this instance dead", now.Sub(m.renewedAt).Round(time.Millisecond))
	m.dropAll()
	return m.gone
}

func (m *Machine) dropAll() {
	clear(m.held)
	clear(m.claiming)
	clear(m.releases)
}

// ---------------------------------------------------------------------------
// Observing heartbeats.

// Round is what Observe decided.
type Round struct {
	// Live counts the live instances (this one included); Share is this
	// instance's fair share, ceil(partitions/Live) capped by MaxOwned.
	Live, Share int
	// TakeOvers are the heartbeats of owners seen dead (counter unchanged
	// for a lease period on this clock): take each over, conditional on
	// the counter seen.
	TakeOvers []store.Heartbeat
	// ReadLeases says the checkpoint leases must be read before Decide:
	// partitions may be free or orphaned, or this instance is below its
	// share while others hold less than every partition.
	ReadLeases bool
	// NextExpiry is the earliest instant at which a live heartbeat expires
	// if its counter does not move (zero: none): observing again then,
	// rather than at the next tick, bounds a takeover by lease_period plus
	// one renew interval after the dead instance's last renewal.
	NextExpiry time.Time
}

func (r Round) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "live %d share %d", r.Live, r.Share)
	for _, hb := range r.TakeOvers {
		fmt.Fprintf(&b, "; take over %s", hb)
	}
	if r.ReadLeases {
		b.WriteString("; read leases")
	}
	return b.String()
}

// Observe records a read of every heartbeat of the scope, at now (a reading
// taken after the read returned), for the partitions parts.
func (m *Machine) Observe(now time.Time, hbs []store.Heartbeat, parts []string) Round {
	m.observed = now
	next := make(map[string]HeartbeatView, len(hbs))
	for _, hb := range hbs {
		if hb.Owner == m.cfg.Self {
			continue
		}
		v, ok := m.others[hb.Owner]
		if !ok || v.Counter != hb.Counter || v.TakenBy != hb.TakenBy {
			v = HeartbeatView{Heartbeat: hb, Since: now}
		}
		v.Heartbeat = hb
		next[hb.Owner] = v
		if hb.Taken() {
			m.taken[hb.Owner] = true
		}
	}
	m.others = next
	var r Round
	r.Live = 1
	sum := len(m.held)
	for _, o := range sortedKeys(m.others) {
		v := m.others[o]
		switch {
		case v.Taken():
			r.ReadLeases = true // its partitions are orphans, or its record is to delete
		case now.Sub(v.Since) >= m.cfg.Period:
			r.TakeOvers = append(r.TakeOvers, v.Heartbeat)
			sum += v.Held
		default:
			r.Live++
			sum += v.Held
			if exp := v.Since.Add(m.cfg.Period); r.NextExpiry.IsZero() || exp.Before(r.NextExpiry) {
				r.NextExpiry = exp
			}
		}
	}
	r.Share = m.target(m.cfg.Self, len(parts), m.liveOwners(now))
	mine := m.mine(nil) + len(m.claiming)
	switch {
	case !m.readOnce, m.recheck, len(r.TakeOvers) > 0, len(m.unknown) > 0:
		r.ReadLeases = true
	case sum < len(parts) && mine < r.Share:
		r.ReadLeases = true
	}
	if len(m.held) > 0 {
		member := make(map[string]bool, len(parts))
		for _, p := range parts {
			member[p] = true
		}
		for p := range m.held {
			if !member[p] {
				r.ReadLeases = true // the membership changed
				break
			}
		}
	}
	return r
}

// liveOwners lists the live owners at now (this one included), sorted.
func (m *Machine) liveOwners(now time.Time) []string {
	out := []string{m.cfg.Self}
	for o, v := range m.others {
		if !v.Taken() && now.Sub(v.Since) < m.cfg.Period {
			out = append(out, o)
		}
	}
	slices.Sort(out)
	return out
}

// target is owner's fair share of parts among live (sorted): floor(parts/
// live), plus one for the first parts%live owners in name order, so the
// shares add up to every partition and instances that agree on the live
// set agree on every share; capped by MaxOwned.
func (m *Machine) target(owner string, parts int, live []string) int {
	n := len(live)
	t := parts / n
	if i, _ := slices.BinarySearch(live, owner); i < parts%n {
		t++
	}
	if m.cfg.MaxOwned > 0 {
		t = min(t, m.cfg.MaxOwned)
	}
	return t
}

// TookOver reports a takeover of seen: on success (or a fence showing it
// already taken) the owner's partitions are orphans, claimable at once.
func (m *Machine) TookOver(seen store.Heartbeat, err error) {
	if err == nil {
		m.taken[seen.Owner] = true
		v := m.others[seen.Owner]
		v.TakenBy = m.cfg.Self
		m.others[seen.Owner] = v
	}
}

// ---------------------------------------------------------------------------
// Deciding.

// Decision is what Decide decided.
type Decision struct {
	Round
	// Lost lists held partitions whose stored lease is no longer the held
	// one: stop their workers now.
	Lost []string
	// Release lists held partitions to hand off (stop the worker, then
	// ReleaseLease): above the share while another live instance is below
	// it (at most MaxMoves a balance round), above MaxOwned, or no longer
	// in the membership.
	Release []string
	// Claims are the claims to perform (bounded concurrency), in
	// rendezvous order.
	Claims []Claim
	// DeleteHeartbeats are taken-over heartbeats whose owner holds no
	// partition any more.
	DeleteHeartbeats []store.Heartbeat
}

func (p Decision) String() string {
	var b strings.Builder
	b.WriteString(p.Round.String())
	if len(p.Lost) > 0 {
		fmt.Fprintf(&b, "; lost %v", p.Lost)
	}
	if len(p.Release) > 0 {
		fmt.Fprintf(&b, "; release %v", p.Release)
	}
	for _, c := range p.Claims {
		fmt.Fprintf(&b, "; %s", c)
	}
	for _, hb := range p.DeleteHeartbeats {
		fmt.Fprintf(&b, "; delete heartbeat %s", hb)
	}
	return b.String()
}

// DecideInput is what Decide decides from.
type DecideInput struct {
	Now   time.Time
	Parts []string
	// Leases is the checkpoint read (nil when Observe did not ask for one).
	Leases []store.Checkpoint
	// Busy partitions have a worker of this instance still stopping.
	Busy map[string]bool
	// Rebalance is set on balance ticks: release above the share.
	Rebalance bool
}

// Decide decides one round after Observe (and the takeovers it asked for).
// Rules, each with its reason:
//   - Nothing is claimed before this instance has renewed its heartbeat and
//     then observed the heartbeats one renew interval later: instances
//     starting together see each other first, so each claims only its share
//     (fair start).
//   - A held partition whose read lease differs is lost (only a takeover or
//     an operator moves a held lease).
//   - Owned by Self in the store but not held (a claim whose response was
//     lost, a release that failed): claimed back whatever the share, since
//     no one else may take it while this incarnation lives.
//   - Claimable: unowned; owned by an owner whose heartbeat is taken over
//     (orphans); owned by an owner with no heartbeat for a lease period
//     (a release that failed at a graceful stop, a claim that landed after
//     its owner was taken over and removed). Claims go up to the share, in
//     rendezvous order of (Self, partition).
//   - Release (balance rounds): above the share, by at most MaxMoves and by
//     no more than the live instances below the share can take, so a
//     release is never taken back by the releaser (it stays at its share).
func (m *Machine) Decide(in DecideInput) Decision {
	var plan Decision
	plan.Round = m.round(len(in.Parts))
	if m.gone != "" {
		return plan
	}
	member := make(map[string]bool, len(in.Parts))
	for _, p := range in.Parts {
		member[p] = true
	}
	for _, p := range sortedKeys(m.held) {
		if !member[p] && !m.releases[p] {
			plan.Release = append(plan.Release, p)
		}
	}
	if in.Leases != nil {
		m.readOnce, m.recheck = true, false
		plan.Lost, plan.Claims, plan.DeleteHeartbeats = m.fromLeases(in, member)
	}
	for _, p := range plan.Lost {
		delete(m.held, p)
	}
	for _, p := range plan.Release {
		m.releases[p] = true
	}
	mine := m.mine(nil) + len(m.claiming) + len(plan.Claims)
	if in.Rebalance {
		excess := mine - plan.Share
		if m.cfg.MaxOwned > 0 {
			excess = max(excess, mine-m.cfg.MaxOwned)
		}
		room := 0
		live := m.liveOwners(m.observed)
		for _, o := range live {
			if o != m.cfg.Self {
				room += max(0, m.target(o, len(in.Parts), live)-m.others[o].Held)
			}
		}
		n := min(excess, room)
		if m.cfg.MaxMoves > 0 {
			n = min(n, m.cfg.MaxMoves)
		} else {
			n = 0
		}
		if m.cfg.MaxOwned > 0 && mine > m.cfg.MaxOwned {
			n = max(n, mine-m.cfg.MaxOwned)
		}
		if n > 0 {
			var keep []string
			for _, p := range sortedKeys(m.held) {
				if !m.releases[p] {
					keep = append(keep, p)
				}
			}
			Rendezvous(m.cfg.Self, keep)
			out := slices.Clone(keep[max(0, len(keep)-n):])
			slices.Sort(out)
			for _, p := range out {
				m.releases[p] = true
			}
			plan.Release = append(plan.Release, out...)
		}
	}
	for _, c := range plan.Claims {
		m.claiming[c.Partition] = true
	}
	return plan
}

func (m *Machine) round(parts int) Round {
	live := m.liveOwners(m.observed)
	return Round{Live: len(live), Share: m.target(m.cfg.Self, parts, live)}
}

// fromLeases applies a checkpoint read.
func (m *Machine) fromLeases(in DecideInput, member map[string]bool) (lost []string, claims []Claim, del []store.Heartbeat) {
	owners := map[string]bool{}
	seen := map[string]bool{}
	var free []Claim
	for _, cp := range in.Leases {
		p, l := cp.Partition, cp.Lease
		if !member[p] {
			continue
		}
		seen[p] = true
		if l.Owner != "" {
			owners[l.Owner] = true
		}
		if h, ok := m.held[p]; ok {
			if h != l && !m.releases[p] {
				lost = append(lost, p)
			}
			continue
		}
		if m.claiming[p] || m.releases[p] || in.Busy[p] {
			continue
		}
		switch {
		case l.Owner == m.cfg.Self:
			// Ours in the store, not held: a claim whose response was
			// lost, or a release that failed. Claim it back whatever the
			// share (nobody else may take it while this incarnation
			// lives); a balance round releases the excess again.
			claims = append(claims, Claim{Partition: p, Expect: l, Kind: ClaimFree})
		case l.Owner == "":
			free = append(free, Claim{Partition: p, Expect: l, Kind: ClaimFree})
		case m.taken[l.Owner]:
			free = append(free, Claim{Partition: p, Expect: l, Kind: ClaimExpired})
		case m.orphan(l.Owner, in.Now):
			free = append(free, Claim{Partition: p, Expect: l, Kind: ClaimExpired})
		}
	}
	for p := range m.held {
		if member[p] && !seen[p] && !m.releases[p] {
			lost = append(lost, p) // the checkpoint is gone
		}
	}
	slices.Sort(lost)
	// Unknown owners: remember when first seen; forget those that appeared.
	for o := range m.unknown {
		if _, hb := m.others[o]; hb || !owners[o] {
			delete(m.unknown, o)
		}
	}
	for _, o := range sortedKeys(m.others) {
		v := m.others[o]
		if v.Taken() && !owners[o] {
			del = append(del, v.Heartbeat)
		}
	}
	for o := range m.taken {
		if _, ok := m.others[o]; !ok && !owners[o] {
			delete(m.taken, o)
		}
	}
	if m.firstAt.IsZero() || m.observed.Sub(m.firstAt) < m.cfg.RenewInterval {
		return lost, claims, del // fair start: see the others first
	}
	share := m.round(len(in.Parts)).Share
	mine := m.mine(lost) + len(m.claiming) + len(claims)
	slices.SortFunc(free, func(a, b Claim) int { return cmpRendezvous(m.cfg.Self, a.Partition, b.Partition) })
	for _, c := range free {
		if mine >= share {
			break
		}
		claims = append(claims, c)
		mine++
	}
	return lost, claims, del
}

// mine counts the held partitions that are not being released nor in
// lost.
func (m *Machine) mine(lost []string) int {
	n := 0
	for p := range m.held {
		if !m.releases[p] {
			n++
		}
	}
	for _, p := range lost {
		if _, ok := m.held[p]; ok && !m.releases[p] {
			n--
		}
	}
	return n
}

// orphan reports whether owner, named by a lease, has had no heartbeat for
// a lease period (tracked from the first read that showed the lease).
func (m *Machine) orphan(owner string, now time.Time) bool {
	if _, ok := m.others[owner]; ok {
		return false
	}
	since, ok := m.unknown[owner]
	if !ok {
		m.unknown[owner] = now
		return false
	}
	return now.Sub(since) >= m.cfg.Period
}

// Claimed reports the result of a claim of part; start says to start the
// partition's worker under got. A claim with an unknown outcome (not a
// fence) makes the next observation read the leases again.
func (m *Machine) Claimed(part string, got store.Lease, err error) (start bool) {
	if !m.claiming[part] {
		return false // the incarnation was dropped meanwhile
	}
	delete(m.claiming, part)
	if err != nil && !errors.Is(err, store.ErrFenced) {
		m.recheck = true
	}
	if err != nil || m.gone != "" {
		return false
	}
	m.held[part] = got
	return true
}

// Released reports that part's release finished. After a failed release
// the lease may still name this incarnation: the next observation reads the
// leases again and claims it back (then releases it again if above share).
func (m *Machine) Released(part string, err error) {
	delete(m.releases, part)
	delete(m.held, part)
	if err != nil {
		m.recheck = true
	}
}

// Lose drops a held partition whose worker found its lease gone (a fenced
// write).
func (m *Machine) Lose(part string) { delete(m.held, part) }
