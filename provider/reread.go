package provider

import (
	"fmt"
)

// Rereads reports whether c declares a re-read window.
func (c Contract) Rereads() bool { return c.RereadWindow > 0 }

// validateReread reports a re-read window the core cannot keep: a
// negative window or interval; a window over positions without
// arithmetic (decimal and string positions); offset pagination (a
// re-read by offset shifts like any offset page); a recovery that cannot
// restart from a boundary (a pass is a restart from the window's start);
// a finality other than none or lag (the window's claim is a lag, and a
// source that certifies its own watermark needs no window); and a
// finality lag greater than the window (the window must cover the
// documented bound on late arrival).
func (c Contract) validateReread() error {
	switch {
	case c.RereadWindow < 0:
		return fmt.Errorf("%w: a negative re-read window", ErrInvalidContract)
	case c.RereadInterval < 0:
		return fmt.Errorf("%w: a negative re-read interval", ErrInvalidContract)
	case c.RereadWindow == 0:
		if c.RereadInterval != 0 {
			return fmt.Errorf("%w: a re-read interval without a re-read window", ErrInvalidContract)
		}
		return nil
	}
	if k := c.EffectivePositionKind(); k != KindInteger && k != KindTimestamp {
		return fmt.Errorf("%w: a re-read window needs integer or timestamp positions (a window is subtracted from the applied position), not %s", ErrInvalidContract, k)
	}
	if c.Pagination == PaginationOffset {
		return fmt.Errorf("%w: a re-read window needs keyset or token pagination: a pass restarts from a position, which an offset cannot name", ErrInvalidContract)
	}
	if r := c.EffectiveRecovery(); r != RecoveryRestartFromBoundary && r != RecoveryFreshSnapshot {
		return fmt.Errorf("%w: a re-read window needs recovery restart_from_boundary (with a restart_cursor built from the applied position): each pass restarts from the window's start", ErrInvalidContract)
	}
	switch f := c.EffectiveFinality(); f {
	case FinalityNone:
	case FinalityLag:
		if c.FinalityLag > c.RereadWindow {
			return fmt.Errorf("%w: the finality lag %d is greater than the re-read window %d: the window must cover the source's bound on late arrival", ErrInvalidContract, c.FinalityLag, c.RereadWindow)
		}
	default:
		return fmt.Errorf("%w: a re-read window claims its watermark as a lag (finality lag) or claims none (finality none), not %s", ErrInvalidContract, f)
	}
	return nil
}
