package witness

import (
	"fmt"
	"strconv"
	"time"

	"github.com/tidemark/tidemark/internal/coord"
)

// Finality is where the finality of a response's CompleteThrough comes
// from: why nothing can later appear at or below it in the frontier's
// coordinate. A watermark computed from the page's own events (its last
// position or key) or from the request's time has none of these bases; see
// docs/design.md#what-may-justify-a-complete-through. The zero value means
// FinalityNone.
type Finality uint8

const (
	// FinalityNone: the response's CompleteThrough is recorded in its
	// witness but never becomes the partition's durable watermark, never
	// advances the frontier and is never coverage evidence.
	FinalityNone Finality = 1 + iota
	// FinalitySource: the source certifies the watermark with finality (a
	// provider watermark or coverage marker, a snapshot's own revision). The
	// only basis that may also serve as coverage evidence (a shifted page,
	// a withdrawn event, an empty page under EmptyFinalThroughWatermark).
	FinalitySource
	// FinalityAppendOnlyWriter: the user asserts that positions are only
	// ever created above every existing one (one writer with time-ordered
	// keys, a log). The watermark advances the frontier, named as that
	// assertion, but never covers a gap.
	FinalityAppendOnlyWriter
	// FinalityLag: the source documents a bound on late arrival; the
	// durable watermark is CompleteThrough minus Contract.FinalityLag. It
	// advances the frontier, named with its lag, but never covers a gap.
	FinalityLag
)

var finalityNames = [...]string{"", "none", "source", "append_only_writer", "lag"}

func (f Finality) String() string {
	if f >= FinalityNone && f <= FinalityLag {
		return finalityNames[f]
	}
	if f == 0 {
		return "none"
	}
	return fmt.Sprintf("finality(%d)", uint8(f))
}

// ParseFinality reads a Finality from its String form.
func ParseFinality(s string) (Finality, error) {
	for f := FinalityNone; f <= FinalityLag; f++ {
		if finalityNames[f] == s {
			return f, nil
		}
	}
	return 0, fmt.Errorf("%w: finality %q is not one of none, source, append_only_writer, lag", ErrInvalid, s)
}

// finality is c's finality, FinalityNone when unset.
func (c Contract) finality() Finality {
	if c.Finality == 0 {
		return FinalityNone
	}
	return c.Finality
}

// certifies reports whether c's complete-through watermarks are certified
// by the source, and so may serve as coverage evidence.
func (c Contract) certifies() bool { return c.finality() == FinalitySource }

// validateFinality reports a finality the core cannot use: an unknown one,
// a lag that is not positive or declared without FinalityLag, and coverage
// fields that need source finality (WatermarkCoversPositions,
// EmptyFinalThroughWatermark) declared without it.
func (c Contract) validateFinality() error {
	f := c.finality()
	switch {
	case f > FinalityLag:
		return fmt.Errorf("%w: contract %s", ErrInvalid, f)
	case f == FinalityLag && c.FinalityLag <= 0:
		return fmt.Errorf("%w: finality lag needs a positive lag (a zero lag is the source's own claim: declare finality source)", ErrInvalid)
	case f != FinalityLag && c.FinalityLag != 0:
		return fmt.Errorf("%w: a finality lag is declared with finality %s, not lag", ErrInvalid, f)
	case c.WatermarkCoversPositions && f != FinalitySource:
		return fmt.Errorf("%w: watermark covers positions needs finality source, not %s: only a watermark the source certifies can prove that no event of a page's range was skipped", ErrInvalid, f)
	case c.EmptyPage == EmptyFinalThroughWatermark && f != FinalitySource:
		return fmt.Errorf("%w: empty page final through watermark needs finality source, not %s: only a watermark the source certifies makes an empty page evidence", ErrInvalid, f)
	}
	return nil
}

// Basis names the finality of a watermark of kind k written under c, as
// status and the frontier's reason show it: "source", "append_only_writer
// assertion", "lag 5m0s" (a duration for timestamps, units otherwise), or
// "" under FinalityNone.
func (c Contract) Basis(k coord.Kind) string {
	switch c.finality() {
	case FinalitySource:
		return "source"
	case FinalityAppendOnlyWriter:
		return "append_only_writer assertion"
	case FinalityLag:
		if k == coord.KindTimestamp {
			return "lag " + time.Duration(c.FinalityLag).String()
		}
		return "lag " + strconv.FormatInt(c.FinalityLag, 10)
	}
	return ""
}

// Final is what a response's CompleteThrough may become under a contract's
// finality.
type Final struct {
	// Watermark is what a promotion may write as the partition's durable
	// watermark (zero: nothing).
	Watermark coord.Watermark
	// Basis names the finality it rests on (Contract.Basis); "" when
	// Watermark is zero.
	Basis string
	// Reason says why the complete-through is not final ("" when it is,
	// or when there is none).
	Reason string
}

// Final turns a response's CompleteThrough ct into the watermark a
// promotion may write: ct itself under FinalitySource and
// FinalityAppendOnlyWriter, ct minus the lag under FinalityLag (nothing when
// the watermark's kind has no arithmetic or the lag falls below its range),
// and nothing under FinalityNone: the complete-through stays in the witness
// only.
func (c Contract) Final(ct coord.Watermark) Final {
	if ct.IsZero() {
		return Final{}
	}
	switch f := c.finality(); f {
	case FinalitySource, FinalityAppendOnlyWriter:
		return Final{Watermark: ct, Basis: c.Basis(ct.Kind)}
	case FinalityLag:
		if w, ok := ct.Minus(c.FinalityLag); ok {
			return Final{Watermark: w, Basis: c.Basis(ct.Kind)}
		}
		return Final{Reason: fmt.Sprintf("complete-through %s less the finality %s is not a %s watermark: nothing is final", ct, c.Basis(ct.Kind), ct.Kind)}
	default:
		return Final{Reason: fmt.Sprintf("complete-through %s is recorded but not final: the contract declares no finality (finality %s)", ct, f)}
	}
}
