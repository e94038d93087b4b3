package provider

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Basis is what a durable watermark's finality rests on: the contract's
// Finality when the watermark was written and, under FinalityLag, the lag
// (or the re-read window) subtracted from it. Contract.Basis computes it;
// checkpoints record it with their watermark; the frontier names the
// members whose watermark rests on anything but the source. The zero Basis
// is none (unknown, or FinalityNone: no durable watermark). Its text
// (String, ParseBasis) is what status, logs and the stores show and keep:
// "source", "append_only_writer assertion", "lag 5m0s" (a timestamp
// watermark's lag as a duration), "lag 5" (units of an integer or decimal
// one), "reread lag 5m0s" (a re-read window).
type Basis struct {
	// Finality is the contract's finality (zero: none).
	Finality Finality
	// Lag, under FinalityLag, is what was subtracted from the
	// complete-through: the contract's FinalityLag, or its RereadWindow
	// with Reread; positive. Nanoseconds with Timestamp, units otherwise.
	Lag       int64
	Timestamp bool
	Reread    bool
}

// IsZero reports whether b is none.
func (b Basis) IsZero() bool { return b == Basis{} }

// Certified reports whether the source itself certifies the watermark
// (FinalitySource): the one basis a frontier note leaves unsaid.
func (b Basis) Certified() bool { return b.Finality == FinalitySource }

// String is b's text ("" for none).
func (b Basis) String() string {
	switch b.Finality {
	case FinalitySource:
		return "source"
	case FinalityAppendOnlyWriter:
		return "append_only_writer assertion"
	case FinalityLag:
		lag := "lag " + strconv.FormatInt(b.Lag, 10)
		if b.Timestamp {
			lag = "lag " + time.Duration(b.Lag).String()
		}
		if b.Reread {
			return "reread " + lag
		}
		return lag
	case 0, FinalityNone:
		return ""
	}
	return b.Finality.String()
}

// Validate reports a Basis no contract gives: an unknown finality
// (FinalityNone included: it writes no durable watermark, so it is the
// zero Basis), a lag that is not positive under FinalityLag, or lag fields
// under another finality.
func (b Basis) Validate() error {
	switch {
	case b.IsZero():
		return nil
	case b.Finality == FinalitySource || b.Finality == FinalityAppendOnlyWriter:
		if b.Lag != 0 || b.Timestamp || b.Reread {
			return fmt.Errorf("%w: basis %s with a lag", ErrInvalidContract, b.Finality)
		}
		return nil
	case b.Finality == FinalityLag:
		if b.Lag <= 0 {
			return fmt.Errorf("%w: basis lag with a lag of %d", ErrInvalidContract, b.Lag)
		}
		return nil
	}
	return fmt.Errorf("%w: basis of finality %s", ErrInvalidContract, b.Finality)
}

// ParseBasis reads a Basis from its text (String); "" is none.
func ParseBasis(s string) (Basis, error) {
	switch s {
	case "":
		return Basis{}, nil
	case "source":
		return Basis{Finality: FinalitySource}, nil
	case "append_only_writer assertion":
		return Basis{Finality: FinalityAppendOnlyWriter}, nil
	}
	b := Basis{Finality: FinalityLag}
	rest, reread := strings.CutPrefix(s, "reread ")
	b.Reread = reread
	lag, ok := strings.CutPrefix(rest, "lag ")
	if !ok {
		return Basis{}, fmt.Errorf("%w: finality basis %q is not one of source, append_only_writer assertion, lag N, reread lag N", ErrInvalidContract, s)
	}
	if n, err := strconv.ParseInt(lag, 10, 64); err == nil {
		b.Lag = n
	} else if d, err := time.ParseDuration(lag); err == nil {
		b.Lag, b.Timestamp = int64(d), true
	} else {
		return Basis{}, fmt.Errorf("%w: finality basis %q: the lag %q is neither units nor a duration", ErrInvalidContract, s, lag)
	}
	if err := b.Validate(); err != nil {
		return Basis{}, err
	}
	if b.String() != s {
		return Basis{}, fmt.Errorf("%w: finality basis %q is not in its canonical form %q", ErrInvalidContract, s, b.String())
	}
	return b, nil
}
