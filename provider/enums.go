package provider

import (
	"fmt"
	"strings"
)

// The values of the contract's enumerations, in declaration order, and
// their parsers: a value's String form is its name in a config (the http
// provider's contract object), and a config value becomes the typed value
// once, at the edge, with the Parse function of its enumeration.

// EmptyPages lists every EmptyPage.
func EmptyPages() []EmptyPage {
	return []EmptyPage{EmptyNoEvidence, EmptyEndOfData, EmptyFinalThroughWatermark, EmptyFollowsSuccessor}
}

// MissingSuccessors lists every MissingSuccessor.
func MissingSuccessors() []MissingSuccessor {
	return []MissingSuccessor{MissingSuccessorPoll, MissingSuccessorEndsTraversal}
}

// Recoveries lists every Recovery.
func Recoveries() []Recovery {
	return []Recovery{RecoveryPark, RecoveryRestartFromBoundary, RecoveryFreshSnapshot}
}

// Finalities lists every Finality.
func Finalities() []Finality {
	return []Finality{FinalityNone, FinalitySource, FinalityAppendOnlyWriter, FinalityLag}
}

// Paginations lists every Pagination.
func Paginations() []Pagination {
	return []Pagination{PaginationToken, PaginationKeyset, PaginationOffset}
}

// ParseEmptyPage reads an EmptyPage from its String form.
func ParseEmptyPage(s string) (EmptyPage, error) { return parseEnum("empty page", s, EmptyPages()) }

// ParseMissingSuccessor reads a MissingSuccessor from its String form.
func ParseMissingSuccessor(s string) (MissingSuccessor, error) {
	return parseEnum("missing successor", s, MissingSuccessors())
}

// ParseRecovery reads a Recovery from its String form.
func ParseRecovery(s string) (Recovery, error) { return parseEnum("recovery", s, Recoveries()) }

// ParsePagination reads a Pagination from its String form.
func ParsePagination(s string) (Pagination, error) {
	return parseEnum("pagination", s, Paginations())
}

// Names returns the String forms of values.
func Names[E fmt.Stringer](values []E) []string {
	out := make([]string, len(values))
	for i, v := range values {
		out[i] = v.String()
	}
	return out
}

func parseEnum[E interface {
	~uint8
	fmt.Stringer
}](what, s string, values []E) (E, error) {
	for _, v := range values {
		if v.String() == s {
			return v, nil
		}
	}
	return 0, fmt.Errorf("%w: %s %q is not one of %s", ErrInvalidContract, what, s, strings.Join(Names(values), ", "))
}
