package chain

import (
	"fmt"
	"time"
)

// State is where a partition's machine is: the states of docs/design.md
// ("The worker", "A page in the chain") that a driver can observe between
// two steps. While a call is outstanding (or its back-off runs) the state is
// the one that call was made in; otherwise it follows from the chain
// (fetching, awaiting acks, polling). State is data: a driver may print it
// and compare it, never act on it.
type State uint8

// The states, in the order a partition usually meets them.
const (
	// StateNew: not started yet.
	StateNew State = iota
	// StateLoading: reading (or creating) the checkpoint and the witnesses
	// ahead of it, marking leftovers abandoned, or backing off after a store
	// error.
	StateLoading
	// StateParked: the checkpoint carries a park reason; re-read every
	// park_check_interval until it is cleared.
	StateParked
	// StateCheckingIncarnation: asking the provider for its source's
	// incarnation (when the partition starts, before a promotion, or on the
	// interval) and backing off when it cannot answer.
	StateCheckingIncarnation
	// StateReincarnating: recording a new source incarnation (or the first
	// one) and resetting the partition to it.
	StateReincarnating
	// StateFetching: a chain runs and a fetch is in flight, no page waits
	// for its outcomes.
	StateFetching
	// StatePolling: a chain runs with nothing in flight; the next fetch
	// waits for poll_interval.
	StatePolling
	// StateAwaitingAcks: the chain holds pages whose events wait for their
	// delivery outcomes (a fetch ahead may be in flight too).
	StateAwaitingAcks
	// StateWitnessing: writing a fresh page's witness before its events
	// are emitted (or backing off after a store error).
	StateWitnessing
	// StateWithdrawing: withdrawing the scope's scalar frontier after a
	// violation that breaks a complete-through claim.
	StateWithdrawing
	// StateRecordingReceipt: recording the acknowledged prefix of the head
	// page (a partly acked head, or a nacked one before its re-fetch).
	StateRecordingReceipt
	// StateHolding: every event of the head delivered but nothing to move
	// past it: its receipts are recorded before the cursor is polled again.
	StateHolding
	// StatePromoting: the conditional write that moves the checkpoint to
	// the head's successor (and the pages coalesced with it).
	StatePromoting
	// StateResolving: reading back a promotion whose outcome is unknown.
	StateResolving
	// StateAbandoning: marking abandoned the witnesses that lost to a
	// promotion (its own or another writer's).
	StateAbandoning
	// StateRecovering: restarting from a stable boundary after divergence,
	// an expired cursor or a refused promotion (the incarnation check
	// before it, the restart back-off, RestartCursor and the restart write).
	StateRecovering
	// StateParking: writing a park reason (or backing off to write it).
	StateParking
	// StateComplete: the partition is complete; nothing more is read.
	StateComplete
	// StateCompleteWatching: the partition is complete and its provider
	// names incarnations: nothing is read, but the incarnation is checked
	// every IncarnationInterval (CheckIncarnation, in
	// StateCheckingIncarnation); a recreated source reopens the partition.
	StateCompleteWatching
	// StateStopped: the driver stopped the machine.
	StateStopped
	// StateLeaseLost: a leased machine's lease is gone (LeaseLost from
	// the driver, or another lease found stored or fencing a write:
	// LeaseGone); it asks nothing more (Machine.LostLease says why).
	StateLeaseLost
)

var stateNames = [...]string{
	StateNew:                 "new",
	StateLoading:             "loading",
	StateParked:              "parked",
	StateCheckingIncarnation: "checking-incarnation",
	StateReincarnating:       "reincarnating",
	StateFetching:            "fetching",
	StatePolling:             "polling",
	StateAwaitingAcks:        "awaiting-acks",
	StateWitnessing:          "witnessing",
	StateWithdrawing:         "withdrawing",
	StateRecordingReceipt:    "recording-receipt",
	StateHolding:             "holding",
	StatePromoting:           "promoting",
	StateResolving:           "resolving",
	StateAbandoning:          "abandoning",
	StateRecovering:          "recovering",
	StateParking:             "parking",
	StateComplete:            "complete",
	StateCompleteWatching:    "complete-watching",
	StateStopped:             "stopped",
	StateLeaseLost:           "lease-lost",
}

func (s State) String() string {
	if int(s) < len(stateNames) && stateNames[s] != "" {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// States lists every state, in order.
func States() []State {
	out := make([]State, len(stateNames))
	for i := range out {
		out[i] = State(i)
	}
	return out
}

// State returns where the machine is (see State).
func (m *Machine) State() State {
	switch m.phase {
	case phaseNew:
		return StateNew
	case phaseStopped:
		return StateStopped
	case phaseDone:
		return StateComplete
	case phaseLeaseLost:
		return StateLeaseLost
	}
	if m.phase == phaseWatching && m.await == nil && m.sleep == nil {
		return StateCompleteWatching
	}
	if m.await != nil {
		return m.await.state
	}
	if m.sleep != nil {
		return m.sleep.state
	}
	switch {
	case m.phase == phaseParked:
		return StateParked
	case m.phase == phaseLoading:
		return StateLoading
	case len(m.chain) > 0 && m.chain[0].unwitnessed:
		// The head's witness waits to be written with the pages behind
		// it (witnessgroup.go).
		return StateWitnessing
	case len(m.chain) > 0:
		return StateAwaitingAcks
	case m.fetch != nil:
		return StateFetching
	default:
		return StatePolling
	}
}

// Awaiting returns the call the machine waits for (nil: none) and the end
// of its back-off (zero: none). A driver may name them when it reports the
// state; it answers only the call it performed.
func (m *Machine) Awaiting() (call Action, backoffUntil time.Time) {
	if m.await != nil {
		call = m.await.action
	}
	if m.sleep != nil {
		backoffUntil = m.sleep.until
	}
	return call, backoffUntil
}
