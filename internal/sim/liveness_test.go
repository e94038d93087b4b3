package sim

import (
	"os"
	"strings"
	"testing"
)

// TestLivenessAbandonedWitnessTrap pins a liveness bug found by the
// simulator (seed 2560 with -liveness, shrunk to testdata/abandoned-trap.ops,
// 12 ops). Partition a (dense positions, recovery "park") is read by two
// workers:
//
//	w0 fetches the start cursor at g1: events 1..3, witness a0000001, emitted
//	w1 fetches the same cursor: a transient empty page without evidence;
//	   Classify calls it unprovable divergence (a0000001 showed position 1
//	   inside its range) and w1 parks the partition at g1
//	w0's events are acknowledged; its Promote fails with *FenceError
//	   ("partition is parked") and input/partition.go promote() marks
//	   a0000001 ABANDONED, although the checkpoint still holds its (cursor,
//	   generation) and no other response won
//	the operator unparks; every fetch of the start cursor returns 1..3
//	   again: Classify resumes a0000001 (exact replay), DecidePromotion
//	   refuses it ("is abandoned"), recovery parks again. For ever: the
//	   partition never advances and re-emits 1..3 on every unpark.
//
// With leases the same happens when a lease changes hands between a page's
// fetch and its promotion (the fenced writer abandons its witness at the
// current generation). Regression test: the input (and the simulated
// worker) now abandon a witness only when the winner moved the checkpoint
// off its (cursor, generation), and treat an evidence-free empty retry as
// no answer rather than divergence. Since the lanes drive the chain
// machine (internal/chain) the ops no longer reach the same interleaving
// (the empty retry is no answer); the rule itself is pinned by the
// machine's golden test internal/chain/testdata/park_fence_keeps_witness.
func TestLivenessAbandonedWitnessTrap(t *testing.T) {
	b, err := os.ReadFile("testdata/abandoned-trap.ops")
	if err != nil {
		t.Fatal(err)
	}
	ops, err := ParseOps(string(b))
	if err != nil {
		t.Fatal(err)
	}
	var refused bool
	res := Run(Config{Seed: 2560, Ops: ops, Liveness: true, OnStep: func(l string) {
		refused = refused || strings.Contains(l, "is abandoned")
	}})
	if res.Failure != nil || refused {
		msg := "a resumed abandoned witness was refused"
		if res.Failure != nil {
			msg = res.Failure.Error()
		}
		t.Fatal(msg)
	}
}
