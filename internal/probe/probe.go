package probe

import (
	"fmt"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/provider"
)

// Verdict is what the observations say about one declared field. The zero
// value is invalid.
type Verdict uint8

const (
	// Supported: the answers agree with the declared value (or the value
	// claims nothing they could disagree with).
	Supported Verdict = 1 + iota
	// Contradicted: an answer disagrees with the declared value; Evidence
	// says which.
	Contradicted
	// CannotTell: nothing the probe saw bears on the declared value.
	CannotTell
)

func (v Verdict) String() string {
	switch v {
	case Supported:
		return "supported"
	case Contradicted:
		return "contradicted"
	case CannotTell:
		return "cannot tell"
	}
	return fmt.Sprintf("verdict(%d)", uint8(v))
}

// Declared is the contract a config declares, and which optional evidence
// and requests it configures.
type Declared struct {
	Contract provider.Contract
	// Coordinate is the kind of complete_through.
	Coordinate coord.Kind
	// CompleteThrough, Marker and HasMore: the mapping is configured.
	CompleteThrough bool
	Marker          bool
	HasMore         bool
	// Validate: a validate request is configured.
	Validate bool
	// Incarnation: an incarnation request is configured;
	// IncarnationCreate: with a create request (which the probe never
	// runs: it writes).
	Incarnation       bool
	IncarnationCreate bool
}

// Page is one fetched page.
type Page struct {
	// Cursor is the input cursor the page was fetched with.
	Cursor []byte
	// Response is the provider's answer (in the core's coordinates:
	// reconcile.FromProvider).
	Response reconcile.Response
	// Token is the source's own token inside Response.Successor (the same
	// bytes for configs without a request sequence).
	Token []byte
}

// End is why a walk stopped.
type End uint8

const (
	// EndLimit: the page limit was reached.
	EndLimit End = 1 + iota
	// EndNoSuccessor: a page had no successor.
	EndNoSuccessor
	// EndHead: an empty page whose successor is its own cursor (the head of
	// a feed), or a page whose successor is its own cursor.
	EndHead
	// EndSealed: the provider said the partition ended.
	EndSealed
	// EndError: a fetch failed (Walk.Err).
	EndError
)

func (e End) String() string {
	switch e {
	case EndLimit:
		return "the page limit"
	case EndNoSuccessor:
		return "a page without successor"
	case EndHead:
		return "the head (a page whose successor is its own cursor)"
	case EndSealed:
		return "a sealed page"
	case EndError:
		return "a failed fetch"
	}
	return fmt.Sprintf("end(%d)", uint8(e))
}

// Walk is a traversal from the start cursor, following each page's
// successor.
type Walk struct {
	Pages []Page
	End   End
	// Err is the failure that ended the walk (End == EndError).
	Err error
}

// Retry is a cursor of the first walk fetched a second time.
type Retry struct {
	// Of is the index of the page in the first walk.
	Of   int
	Page Page
	// Err is the fetch failure, when the second fetch failed.
	Err error
}

// Validation is the outcome of the validate request.
type Validation struct {
	// Ran: the request was made, for Cursor (a cursor the first walk was
	// handed).
	Ran    bool
	Cursor []byte
	// Err is nil when the request declared the cursor valid.
	Err error
}

// Restart is a restart of the partition probed: the provider's restart
// cursor for the boundary after the first walk's first page (as the input
// asks for it after divergence), and the page fetched from it.
type Restart struct {
	// After is the index of the first walk's page the boundary follows.
	After int
	// Applied is the boundary's applied position (the greatest position of
	// the pages up to After) and Watermark its complete_through (zero when
	// none).
	Applied   coord.Position
	Watermark coord.Watermark
	// Cursor is the restart cursor (empty: the partition's start).
	Cursor []byte
	Page   Page
	// Err is the failure of the restart cursor or of its fetch.
	Err error
}

// IncarnationRead is one run of the incarnation request (the read only,
// never its create request).
type IncarnationRead struct {
	// Ran: the request was made.
	Ran bool
	// Found: it named an incarnation, whose reconcile.IncarnationHash is
	// Hash (the value itself never leaves the provider's caller).
	Found bool
	Hash  string
	// Err is the failure of the request.
	Err error
}

// Observation is everything the probe fetched for one partition.
type Observation struct {
	Partition string
	// Limit is the page limit of a walk.
	Limit   int
	First   Walk
	Second  Walk
	Retries []Retry
	// Validation is the validate request's outcome (Ran false when none is
	// configured or there was no cursor to validate).
	Validation Validation
	// Restart is the restart probed (nil when none was: the recovery is
	// park, or the first walk had fewer than two pages).
	Restart *Restart
	// Incarnation is the incarnation request run before walk 1 and
	// IncarnationAfter the same request run after everything else (Ran
	// false when none is configured).
	Incarnation, IncarnationAfter IncarnationRead
}

// Finding is the verdict on one declared field for one partition.
type Finding struct {
	Partition string
	// Field is the contract field (or mapping, or request) judged.
	Field string
	// Declared is the declared value as the config spells it.
	Declared string
	Verdict  Verdict
	// Evidence says what was seen: the answers that contradict, or why the
	// probe cannot tell.
	Evidence string
}

// AnyContradicted reports whether any finding is a contradiction.
func AnyContradicted(fs []Finding) bool {
	for _, f := range fs {
		if f.Verdict == Contradicted {
			return true
		}
	}
	return false
}

// Evaluate runs every check of Checks over one partition's observation.
func Evaluate(d Declared, o Observation) []Finding {
	fx := Derive(d, o)
	out := make([]Finding, 0, len(Checks))
	for _, c := range Checks {
		if c.Applies != nil && !c.Applies(d) {
			continue
		}
		v, ev := c.Judge(d, fx)
		out = append(out, Finding{Partition: o.Partition, Field: c.Field, Declared: c.Declared(d), Verdict: v, Evidence: ev})
	}
	return out
}
