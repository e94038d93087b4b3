package reconcile

import "github.com/tidemark/tidemark/provider"

// The provider contract and the values a provider returns are defined in
// the public SDK (package provider); the core names them here so that its
// code reads in its own vocabulary. They are aliases: nothing is converted.
type (
	// Contract is what the source guarantees; classification trusts
	// nothing else.
	Contract = provider.Contract
	// Response is one successful fetch of (partition, cursor).
	Response = provider.Response
	// Event is one event of a Response.
	Event = provider.Event
	// EmptyPage is what an empty response proves.
	EmptyPage = provider.EmptyPage
	// MissingSuccessor is what a response without a successor means.
	MissingSuccessor = provider.MissingSuccessor
	// Recovery is what the input may do when a partition cannot advance.
	Recovery = provider.Recovery
	// Finality is where a CompleteThrough's finality comes from.
	Finality = provider.Finality
	// Pagination is how pages follow one another.
	Pagination = provider.Pagination
	// Final is what a CompleteThrough may become under a contract.
	Final = provider.Final
	// Basis is what a durable watermark's finality rests on.
	Basis = provider.Basis
)
