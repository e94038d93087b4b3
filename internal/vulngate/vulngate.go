// Package vulngate reads govulncheck's JSON output (-format json) and
// decides whether `make test` passes: every vulnerability the code calls
// must be explained in an allow list (scripts/vulncheck.allow), one line
// per OSV id with its reason; anything else fails.
package vulngate

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Finding is a vulnerability the scanned code calls.
type Finding struct {
	ID, Module, Version, Fixed, Package, Function string
}

func (f Finding) String() string {
	fixed := f.Fixed
	if fixed == "" {
		fixed = "no fixed version"
	}
	return fmt.Sprintf("%s in %s@%s (fixed in %s), called: %s.%s", f.ID, f.Module, f.Version, fixed, f.Package, f.Function)
}

type message struct {
	Finding *struct {
		OSV          string `json:"osv"`
		FixedVersion string `json:"fixed_version"`
		Trace        []struct {
			Module   string `json:"module"`
			Version  string `json:"version"`
			Package  string `json:"package"`
			Function string `json:"function"`
		} `json:"trace"`
	} `json:"finding"`
}

// Called returns the called vulnerabilities in govulncheck's JSON stream,
// one per id (the first trace), sorted by id. Findings at module or
// package level (imported, never called) are not returned.
func Called(r io.Reader) ([]Finding, error) {
	dec := json.NewDecoder(bufio.NewReader(r))
	byID := map[string]Finding{}
	for {
		var m message
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("vulngate: reading govulncheck's output: %w", err)
		}
		f := m.Finding
		if f == nil || len(f.Trace) == 0 || f.Trace[0].Function == "" {
			continue
		}
		if _, ok := byID[f.OSV]; ok {
			continue
		}
		t := f.Trace[0]
		byID[f.OSV] = Finding{ID: f.OSV, Module: t.Module, Version: t.Version, Fixed: f.FixedVersion, Package: t.Package, Function: t.Function}
	}
	out := make([]Finding, 0, len(byID))
	for _, f := range byID {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// ParseAllow reads an allow list: `ID reason...` per line; blank lines
// and lines starting with # are skipped. A line without a reason is an
// error: an entry must say why.
func ParseAllow(r io.Reader) (map[string]string, error) {
	out := map[string]string{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		id, reason, _ := strings.Cut(line, " ")
		if strings.TrimSpace(reason) == "" {
			return nil, fmt.Errorf("vulngate: allow list line %d: %s has no reason", n, id)
		}
		out[id] = strings.TrimSpace(reason)
	}
	return out, sc.Err()
}

// Gate splits findings into the explained and the unexplained, and lists
// the allow list's ids that no finding has (stale entries).
func Gate(findings []Finding, allow map[string]string) (explained, unexplained []Finding, stale []string) {
	seen := map[string]bool{}
	for _, f := range findings {
		seen[f.ID] = true
		if _, ok := allow[f.ID]; ok {
			explained = append(explained, f)
		} else {
			unexplained = append(unexplained, f)
		}
	}
	for id := range allow {
		if !seen[id] {
			stale = append(stale, id)
		}
	}
	sort.Strings(stale)
	return explained, unexplained, stale
}
