package clustersim

import (
	"fmt"
	"strings"
)

// Shrink looks for a shorter op list that fails the same check as f under
// cfg (same seed, variant and options): it deletes chunks of ops, halving
// the chunk size down to single ops, and keeps every deletion after which
// the run still fails that check (a greedy delta debugging). It stops after
// budget replays and returns the shortest failing list found, with its
// failure.
//
// Deleting ops shifts the provider's per-partition streams, so the shrunk
// schedule fails the same check, not necessarily at the same event; replay
// it with Config.Ops (TestSim -replay) under the same seed.
func Shrink(cfg Config, f *Failure, budget int) ([]Op, *Failure) {
	ops, best := f.Ops, f
	cfg.OnStep = nil
	try := func(cand []Op) *Failure {
		c := cfg
		c.Ops = cand
		r := Run(c)
		if r.Failure != nil && r.Failure.Check == f.Check {
			return r.Failure
		}
		return nil
	}
	for chunk := len(ops) / 2; chunk >= 1 && budget > 0; chunk /= 2 {
		for i := 0; i+chunk <= len(ops) && budget > 0; {
			cand := make([]Op, 0, len(ops)-chunk)
			cand = append(append(cand, ops[:i]...), ops[i+chunk:]...)
			budget--
			if g := try(cand); g != nil {
				// The run stops at the failure: keep only what it executed.
				ops, best = g.Ops, g
				continue
			}
			i += chunk
		}
	}
	return ops, best
}

// FormatOps renders an op list one per line, the form ParseOps reads.
func FormatOps(ops []Op) string {
	var b strings.Builder
	for _, o := range ops {
		b.WriteString(o.String())
		b.WriteString("\n")
	}
	return b.String()
}

// ParseOps reads one op per line; blank lines and lines starting with #
// are skipped.
func ParseOps(s string) ([]Op, error) {
	var ops []Op
	for i, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		o, err := ParseOp(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		ops = append(ops, o)
	}
	return ops, nil
}
