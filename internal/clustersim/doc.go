// Package clustersim is tidemark's deterministic simulator of a cluster of
// readers (not to be confused with provider/simulated, a fake event source
// the demo and tests read from): it drives the real
// pure core (internal/reconcile, internal/frontier), the partition machine
// (internal/chain), the membership decisions (internal/membership) and
// the frontier publisher (internal/publish) and the real in-memory store (memstore.Store,
// with store.ResolvePromotion) through seeded
// schedules of concurrent workers, crashes, store faults, provider
// misbehaviour and membership changes, and checks an oracle after every
// step. It imports only the core and the ports; nothing in it sleeps, reads
// a clock or starts a goroutine.
//
// # Determinism
//
// One seed decides everything. It feeds one PCG (math/rand/v2) for the
// setup and the ops, one PCG per partition for that partition's provider
// (so partitions do not disturb each other's streams), and one PCG for the
// store fault injector (Faults, a Stringer that names its seed). Maps are
// never iterated where order matters. Run(Config{Seed: n}) twice gives the
// same history.
//
// # Actors
//
//   - Workers stand for processes running the paginated_partitions input.
//     A worker has a lane per partition it reads; a lane drives the
//     partition's chain machine (internal/chain), the same machine the
//     input drives, performing what it asks one step at a time (see
//     worker.go): a fetch of the model provider, or one store call through
//     internal/chain/chainstore. Each lane step makes at most one store
//     call. Some partitions are read by two workers at once: stale
//     concurrent retries racing on the same checkpoint. Beside the
//     machine a lane makes the decisions the input's driver makes, through
//     the same pure helpers of internal/chain (driver.go), each in its own
//     seeded share of the schedules: in half, a transient fetch failure is
//     fetched again fetch_retries times (chain.FetchRetry, as the input's
//     fetchWithRetry; each retry a later step) before the machine sees it;
//     in half, emissions wait in the lane's outbox until a step hands them
//     to the sink (ReadBatch), and those of a chain that ended are dropped
//     (chain.EndChain.Ends, as input/partition.go); in two thirds, every
//     durable checkpoint the machine observes may make a witness deletion
//     due (chain.Pruning, witness_cleanup every 1 or 3 generations),
//     performed by PruneWitnesses through the store's faults at a later
//     step, while other lanes still read older generations (in lease mode
//     the worker's instance machine decides it: instance.Prune, one of its
//     store calls).
//   - The model provider (model.go) keeps one event log per partition with
//     dense or sparse positions and one of several declared contracts:
//     complete-through watermarks, snapshot markers, token rotation (allowed
//     or not), empty pages with or without evidence, pages that shift on
//     retry, transient errors, expiring cursors, stalls, seals, and
//     omissions where dense positions expose them (also retries whose watermark
//     lags below the omitted event), malformed answers (truncated bodies and
//     pages with a duplicate id; transient: one reader gets at most as many
//     in a row for one position as the workers retry) and, in an eighth of
//     the schedules, one partition whose answers turn persistently malformed
//     after a few fetches (it must park), and first pages of a traversal
//     cut above a declared origin (dense-origin, origin.go: the source's
//     retention dropped its oldest events; only first_position shows the
//     gap). It is honest wherever its
//     contract makes a promise, so any event lost below durable progress is
//     the consumer's fault. In a third of the schedules partition a is a
//     listing that is not a snapshot (late-listing): an appended key may
//     stay invisible until the next append, by then below positions
//     already served, and each page maps its own last key as its
//     complete-through under finality none. Such late keys are exempt from
//     the cursor, applied-boundary and completion rules (a listing cannot
//     see them), never from a watermark or a published frontier.
//   - The sink stands for the pipeline and output: it acknowledges or nacks
//     batches in any order; a crashed worker's batches may still be
//     acknowledged, only the callback is lost.
//   - Publishers (one or two; one to three with discovery) are the
//     product's publish.Publisher over the faulty store: one step runs
//     Prepare (the membership record, every checkpoint, the published
//     record, frontier.NextPublication), the publisher's next step Commit
//     (one PublishFrontier compare-and-swap), so other actors interleave.
//   - In a third of the schedules (discovery) the provider's partition
//     list changes: partitions appear, and a partition whose profile
//     completes with a watermark may split: it is sealed at its current
//     end and two children (b1, b2) appear, listed with their parent,
//     whose positions follow the provider's highest. The discoverer runs
//     membership.Read and membership.Decide on the provider's list
//     (lineage included, FreshFromStart: lanes read from the start) at one
//     step and SwapMembership at its next. A lane of a child reads nothing
//     while membership.Waiting names a parent (parents first: in lease
//     mode the worker's instance machine, given the stored lineage, starts
//     a claimed child only then, reading its parents' checkpoints as one
//     of its store calls); a complete parent leaves sealed although still
//     listed.
//   - In the other schedules an operator coordinator changes the
//     membership with frontier.PlanChange and SwapMembership (the ops add
//     and remove): partitions appear (new, or old with a backlog), are
//     added with proof (replay, coverage) or without, removed with proof of
//     sealing or without. It offers proofs discovery never does, so it is
//     kept beside the discoverer rather than folded into it.
//   - An operator unparks parked partitions and restarts them from the
//     provider's boundary (`tidemark unpark`, `tidemark restart`).
//   - Faults wraps the store: throttling (no effect, an error) and lost
//     responses (the write happens, the caller sees an error). A crash
//     makes a worker lose all memory at any step: after the witness write,
//     after any outcome, between deciding and the compare-and-swap, after
//     a compare-and-swap whose response was lost.
//
// # Ops
//
// A schedule is a list of printable, parsable ops (Op, ParseOp):
//
//	step w1 4 9      step worker 1's lane 4 (mod its lanes), input 9 (mod ready inputs)
//	ack 7            acknowledge in-flight batch 7 (mod in flight)
//	nack 7           fail it
//	append b 3       partition b gets 3 events
//	tick b 2         b's finality clock moves 2 without events (sparse)
//	expire b         every cursor b issued expires
//	stall b 3        b's next 3 fetches answer empty pages without evidence
//	seal b           b ends
//	crash w1         worker 1 loses its memory
//	publish f0       step publisher 0;  pubcrash f0: it loses its memory
//	appear e         partition e starts existing at the provider
//	add e replay     add e to the membership with proof (replay|covered|none)
//	remove b seal    remove b with proof (seal|none)
//	unpark b         clear b's parked reason;  restart b: restart a parked b
//	pause w1         (lease mode) freeze worker 1;  resume w1: it continues, maybe a zombie
//	split b          (discovery) b is sealed; children b1, b2 appear with parent b
//	discover         step the discoverer: decide from the provider's list, then write
//	recreate b       (a quarter of the schedules) b's source is deleted and created
//	                 again: a new incarnation whose positions start over; old
//	                 cursors still answer, from the new log
//
// Ops never refer to state, only to actors and partitions, so any op list
// can be replayed (Config.Ops). Each history line is the op and what it
// did; a failure prints the seed, the setup, the tail of the history and
// the command that reruns it:
//
//	go test ./internal/clustersim -run TestSim -seed=N -v            # add -history for the whole history
//
// # Oracle
//
// After every step (oracle.go), from the in-memory store (memstore) under every wrapper and
// the model's ground truth:
//
//   - no-loss (a): every event below a partition's durable cursor, at or
//     below its applied boundary and at or below its complete-through
//     watermark has a terminal outcome at the sink; every durable receipt
//     (a witness's AckedThrough, also when written with the witness) claims
//     only acknowledged events.
//   - witness-first: a batch leaves the input only with a durable witness.
//   - binding (b): each checkpoint transition is exactly one generation,
//     from the (cursor, generation) its promoted witness was fetched from,
//     to exactly that witness's successor, and every event of that witness
//     has a terminal outcome; restarts change neither watermark nor applied
//     boundary.
//   - monotone (c): durable watermarks and applied boundaries never
//     decrease; the published frontier never decreases within an epoch
//     (neither its scalar nor any vector entry), never withdraws its
//     scalar, never goes back an epoch; a published scalar never exceeds
//     the durable watermark of any partition of its epoch (children of a
//     split included), and every event at or below it in those partitions
//     (and in partitions removed with proof, sealed parents included) has
//     a terminal outcome; a published vector entry never exceeds its
//     partition's durable watermark, nor has an event at or below it
//     without a terminal outcome.
//   - lineage: no lane fetches a split's child, and no event of it leaves
//     the input, while a parent of it that is a member of the stored
//     membership is not durably complete.
//   - publication: every published vector entry is a watermark its
//     partition's checkpoint held durably (a frontier follows promotions
//     that took effect).
//   - exit (exit.go): a worker whose instance machine exits as complete
//     under exit_when_complete has every partition of the instance's
//     membership complete on its lanes and none parked.
//   - incarnation: no event of a source's incarnation leaves the input
//     under an epoch whose claims are about another incarnation of it
//     (the one its checkpoint held in that epoch): a page a recreated
//     source served under the old cursor is never emitted before the
//     incarnation check that began after it.
//   - membership (d): no scalar in an epoch whose membership change is
//     unproven; the vector names exactly the epoch's partitions.
//   - malformed: a partition parks for malformed pages only once its
//     answers are persistently malformed, with a reason naming the class,
//     the attempts, the partition and the page it parked at.
//   - liveness (Config.Liveness, -liveness): after the faults stop, every
//     partition a worker reads catches up (liveness.go); the persistently
//     malformed one ends parked for it instead. Then the scope settles:
//     the published record is what a publisher reading every checkpoint
//     of the epoch would publish, with discovery the membership is what
//     the provider's list asks for, and a schedule with a split ends in a
//     proven epoch without its split parents.
//
// Source incarnations (docs/design.md#source-incarnations): every model
// source names its incarnation (the lanes' machines check it at every
// load, before every recovery, before emitting a page, on positions that
// went back and every few polls, and reset through the product's
// chainstore.Reincarnate; a complete partition's lane keeps checking it,
// and a sealed source may be recreated: Stats.ReopenedComplete counts the
// complete checkpoints reset into a new incarnation, a coverage item of
// TestSim). The
// oracle holds each checkpoint to the log of the incarnation it records
// (checkpoint.Incarnation), each published record to the incarnation its
// partitions' checkpoints belonged to in its epoch, and a reset to clear
// the coordinates only in a newer epoch than the checkpoint's; liveness
// also requires every checkpoint read to be in its source's current
// incarnation.
//
// # Leases
//
// In a seeded quarter of the schedules (lease.go) the workers share the
// partitions through heartbeat leases: every worker runs the real instance
// machine (internal/instance, the one the input's lease manager drives) on
// its own clock (its lane steps), with a lane for every partition, and
// performs its store calls (heartbeat renewal and read, takeover,
// checkpoint read, claim, release) in its lane steps; a lane reads its
// partition only while its worker's machine runs it (StartWorker, under
// the claimed lease: chain.Config.Lease), and drops all its state at
// StopWorker. The machine states the lease on every Promote and SetParked
// it asks for. A paused worker resumes as a zombie whose writes the store
// fences (or whose load finds another lease): its machine stops
// (chain.LeaseGone), its instance is told (WorkerLost) and stops the lane,
// and its next renewal is fenced (its heartbeat was taken over): every
// lane stops and a new incarnation rejoins. CheckLease (oracle): a lane's
// promotion or park takes
// effect only while the stored lease names that lane's worker.
//
// # Heartbeat leases
//
// RunLeases (leasesim.go) is a separate discrete-event simulation of the
// product's heartbeat lease lifecycle: 3 to 5 instances, each process life
// stepping the real instance machine (internal/instance, which owns the
// incarnation's lease.Machine: renewal, observation every renew interval
// and at the next heartbeat expiry, takeovers, checkpoint reads when the
// machine asks, claims and releases, worker starts and stops, new
// incarnations) and performing its actions, at most 16 claims and
// releases in flight, answers fed back as their own events, each on
// its own monotonic clock (own origin, rate within ±0.1%), against the
// real memstore.Store's heartbeat, claim, release and lease-fenced Promote
// writes; each held partition's worker promotes at random instants,
// carrying its lease, as the chain machine states it. A store call takes effect
// after its send and answers later; faults (fault phase only): failed
// calls, lost answers and timeouts (unknown outcomes), outages, SIGSTOP
// pauses (timers and answers wait; requests already sent land), kill -9
// and restart as a new incarnation, an added instance, slow observers.
// Checks: CheckLeaseWriter (a promotion took effect only if sent by the
// incarnation the stored lease named), CheckWriteAfterGone (no promotion,
// claim or renewal sent after the incarnation was gone takes effect),
// CheckLeaseLiveness (after the faults: every partition held by a live
// incarnation whose machine agrees with the stored lease within lease
// period + renew interval + 3 balance rounds + the claims' time, then
// fair shares within ceil(P/max moves) + 3 balance rounds) and
// CheckLeaseLost (no lease lost without a fault). LeaseVariant
// RenewAfterTakeover, a driver that ignores its incarnation being gone and
// keeps its workers writing, is caught as CheckWriteAfterGone
// (TestLeaseSimCatchesRenewAfterTakeover); PromoteWithoutLease, workers
// whose promotions carry no lease, as CheckLeaseWriter; KeepLostPartition,
// an instance machine whose StopWorker of a lost partition is dropped, as
// CheckWriteAfterGone or CheckLeaseLiveness (a worker still runs under a
// lease the store no longer has). TestLeaseSimDrivesTheInstanceMachine
// pins that this package imports internal/instance. In TestSim's lease
// mode each worker's instance machine also keeps the lineage gate, decides
// the witness deletions and times the worker's own frontier publisher
// (TestLeasedChildrenWaitInTheInstanceMachine,
// TestLeasedWitnessesArePrunedByTheInstanceMachine,
// TestLeasedPublicationIsTimedByTheInstanceMachine).
//
//	go test ./internal/clustersim -run 'TestLeaseSim$' -lease-seeds=1000 -v   # many seeds (-lease-base, -lease-partitions)
//	go test ./internal/clustersim -run 'TestLeaseSim$' -lease-seed=N -lease-variant=renew-after-takeover -v
//
// # Variants
//
// Variant injects one broken behaviour (PromoteOtherSuccessor,
// MaxFrontier, BareEmptyPage, UnconditionalWrite, IgnoreLease,
// AnyWatermarkCovers, ParkOnMalformed, RetryMalformedForever, PartialView,
// ChildrenFirst, IgnoreIncarnation, EmitBeforeIncarnationCheck: a page
// emitted before the incarnation check that began after it, caught by
// the incarnation check; SelfCertifiedWatermark: finality none read as source, so
// the late listing's own last key becomes a durable watermark above a key
// that appears below it; CoalescedWatermarkDropped: a coalesced write keeps
// the stored watermark, which the metamorphic comparison catches while
// each run passes the oracle; KeepLostLease: a worker's instance machine
// whose stop of a partition with a lost lease leaves its lane reading,
// caught by CheckLease; ExitWithParked: a worker's instance machine that
// counts a parked partition as complete (instance.Config.ExitParked),
// caught by CheckExit; PublishBeforePromotion: the publishers' feed told
// of a promotion when the lane's machine asks for it, caught by
// CheckPublication; ChildrenFirst, the lineage gate skipped (the lanes'
// and, in lease mode, the instance machines': UnorderedLineage), is caught
// by CheckLineage at the child's first fetch);
// TestVariantsAreCaught fails unless each is caught
// within a few schedules by the check that guards its invariant. The
// lanes' variants are applied to the real machine (variant.go): to its
// configuration (BareEmptyPage: every empty page is the end of the data;
// AnyWatermarkCovers: a divergent response with any complete-through
// watermark is classified a shifted page; ParkOnMalformed and
// RetryMalformedForever: no retry of a malformed answer, or no bound on
// them; IgnoreIncarnation: reading on across a changed incarnation) or to the store calls it asks
// for (PromoteOtherSuccessor); ChildrenFirst skips the parents-first
// gate; the others wrap the store or break the publisher (MaxFrontier
// raises the prepared scalar to the vector's maximum; PartialView sets the
// publisher's View hook, which the product never sets, to the checkpoints
// of half the partitions, as if each instance published from its own).
// PartialView publishes nothing unsafe: the real tracker withholds the
// scalar while a member has no watermark in its view, and the publication
// rule refuses to lower an entry another publisher wrote; it is caught by
// liveness, the published frontier never catching up.
//
// # Metamorphic comparison
//
// RunMetamorphic (metamorphic.go) runs one schedule under every Shape of
// the input: promotion coalescing off and on, max_pages_in_flight 1, 2 and
// 8. The first shape generates the ops, the others replay them; each run
// has the oracle after every step and the liveness phase, then settles
// (fault-free rounds until nothing changes). The outcomes must be equal:
// the events delivered (by stable id, at least once), each partition's
// final checkpoint (the position its cursor resumes at unless complete,
// its watermark, complete flag and park reason; not its generation, which
// coalescing and the number of restarts change) and the published frontier
// (epoch, scalar, vector). Config.Metamorphic makes that outcome a
// function of the ops: the event log draws from its own PRNG, and what may
// rightly end a shape elsewhere is left out (membership changes, operator
// restarts, recreated sources, seals of partitions whose empty pages
// cannot complete them, discovery, leases, exit_when_complete, late
// listings, persistently malformed or regressing partitions, partitions
// paged by offset undeclared (offset-shaped successors), profiles that
// park on divergence, rogue rotations, pages without a successor once the
// faults stop). A difference fails with CheckMetamorphic.
//
// RunInstances runs one schedule by three instances (workers, each
// reading the partitions a stable hash of their names gives it), by one,
// and by three that share every partition through heartbeat leases (each
// running its instance machine: claims, balance, takeovers after a
// crash), and compares their outcomes the same way; the ops are the
// reference's (three instances), a step or crash of a worker the run
// lacks being one of worker w mod n. RunInstancesMembership does the same
// with membership changes: the schedule runs discovery, partitions appear
// and split at the provider (a child's lanes wait for its parents), and
// the outcome compares the final membership (partitions, proven) and the
// published frontier without their epoch numbers, which may rightly
// differ (a discoverer whose swap failed writes two changes as one). The
// operator's add and remove stay out: whether their proofs hold depends on
// how far the instances got when the op runs.
// TestMetamorphicInstancesEndAlike runs both (-instance-seeds, default
// 200) and fails when the leased runs claimed or took over nothing, or
// the membership runs wrote no epoch, split nothing or held no child.
//
// # Tests
//
//	go test ./internal/clustersim                                     # CI: 2,000 schedules, variants, end-to-end
//	go test ./internal/clustersim -run 'TestSim$' -schedules=100000 -timeout=3h -v   # long mode
//	go test ./internal/clustersim -run 'TestSim$' -seed=N -variant=max-frontier -v   # one schedule
//	go test ./internal/clustersim -run 'TestSim$' -seed=N -replay=FILE -v            # replay a shrunk op list
//	go test ./internal/clustersim -run TestMetamorphic -v                            # 200 schedules x 8 shapes
//	go test ./internal/clustersim -run TestMetamorphic -metamorphic-seeds=2000 -timeout=2h -v
//	go test ./internal/clustersim -run TestMetamorphic -seed=N -variant=coalesced-watermark-dropped -v
//	go test ./internal/clustersim -run TestMetamorphicInstancesEndAlike -instance-seeds=2000 -v
//
// Flags of TestSim: -seed, -schedules, -steps, -base (first seed),
// -variant, -liveness, -strict-records, -history (whole history of -seed),
// -replay, -shrink (replays spent shrinking a failure), -tail. Flags of
// TestMetamorphicShapesEndAlike: -metamorphic-seeds (default 200, from
// -base; -seed runs one), -metamorphic-steps (default 600), -variant.
// Under -race
// (build tag, race_test.go) or -short TestSim runs 300 schedules.
//
// The end-to-end test with the real binary, SIGKILLs of it and of
// dynalite and a faulty provider and sink is internal/e2e's
// TestEndToEndFaults (faults_test.go), with the other process-level tests.
//
// TestLivenessAbandonedWitnessTrap replays the schedule of a liveness bug
// the simulator found (a witness abandoned on a park fence could never be
// promoted again); it is fixed, the machine's golden test
// internal/chain/testdata/park_fence_keeps_witness pins the rule, and
// -liveness is on by default.
package clustersim
