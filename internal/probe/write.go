package probe

import (
	"bytes"
	"fmt"
	"io"
	"strings"
)

// Summary describes what was fetched for one partition, in one line.
func Summary(o Observation) string {
	var b strings.Builder
	fmt.Fprintf(&b, "walk 1: %s (at most %d), %s, ended at %s", plural(len(o.First.Pages), "page", "pages"), o.Limit, plural(events(o.First), "event", "events"), o.First.End)
	if len(o.Second.Pages) > 0 || o.Second.End != 0 {
		fmt.Fprintf(&b, "; walk 2: %s", plural(len(o.Second.Pages), "page", "pages"))
	}
	if len(o.Retries) > 0 {
		fmt.Fprintf(&b, "; %s fetched again", plural(len(o.Retries), "cursor", "cursors"))
	}
	if n := len(o.First.Pages); n > 0 {
		fmt.Fprintf(&b, "\n  last page of walk 1 (page %d): %s", n, carries(o.First.Pages[n-1]))
	}
	if o.First.End == EndError && o.First.Err != nil {
		fmt.Fprintf(&b, "\n  walk 1 failed: %v", o.First.Err)
	}
	if o.Second.End == EndError && o.Second.Err != nil {
		fmt.Fprintf(&b, "\n  walk 2 failed: %v", o.Second.Err)
	}
	for _, r := range o.Retries {
		if r.Err != nil {
			fmt.Fprintf(&b, "\n  fetching walk 1 page %d again failed: %v", r.Of+1, r.Err)
		}
	}
	return b.String()
}

// carries says what a page carries besides its events.
func carries(p Page) string {
	r := p.Response
	parts := []string{plural(len(r.Events), "event", "events")}
	switch {
	case len(r.Successor) == 0:
		parts = append(parts, "no successor")
	case bytes.Equal(r.Successor, p.Cursor):
		parts = append(parts, "successor = its own cursor")
	default:
		parts = append(parts, "successor "+hash(r.Successor))
	}
	if r.HasMoreKnown {
		parts = append(parts, fmt.Sprintf("has_more %t", r.HasMore))
	}
	if !r.CompleteThrough.IsZero() {
		parts = append(parts, "complete_through "+r.CompleteThrough.String())
	}
	if len(r.Marker) > 0 {
		parts = append(parts, "marker "+hash(r.Marker))
	}
	if r.Sealed {
		parts = append(parts, "sealed")
	}
	return strings.Join(parts, ", ")
}

func events(w Walk) int {
	n := 0
	for _, p := range w.Pages {
		n += len(p.Response.Events)
	}
	return n
}

// Write prints one partition's findings: a heading with the summary, then
// per finding its verdict, field and declared value, and the evidence on
// the next line.
func Write(w io.Writer, o Observation, fs []Finding) error {
	var b strings.Builder
	fmt.Fprintf(&b, "partition %s: %s\n", o.Partition, Summary(o))
	counts := map[Verdict]int{}
	for _, f := range fs {
		counts[f.Verdict]++
		fmt.Fprintf(&b, "  %-13s %s: %s\n  %13s   %s\n", f.Verdict, f.Field, f.Declared, "", f.Evidence)
	}
	fmt.Fprintf(&b, "partition %s: %d contradicted, %d supported, %d cannot tell\n", o.Partition, counts[Contradicted], counts[Supported], counts[CannotTell])
	_, err := io.WriteString(w, b.String())
	return err
}
