package redact

import (
	"strings"
	"testing"
)

// The cost a request pays when nothing fails: a child set and its values
// (the cursor, three header values); no replacer is built.
func BenchmarkRequestSet(b *testing.B) {
	parent := New(256)
	parent.Add("client-secret-value", "access-token-value")
	b.ReportAllocs()
	for b.Loop() {
		s := parent.Child(0)
		s.Add("cursor-eyJvZmZzZXQiOjEwMDB9", "Bearer access-token-value", "application/json", "tidemark/1.0")
	}
}

// The cost of redacting one quoted error body (256 bytes) with a request's
// values and the provider's credentials, replacers built once.
func BenchmarkApply256(b *testing.B) {
	parent := New(256)
	parent.Add("client-secret-value", "access-token-value")
	s := parent.Child(0)
	s.Add("cursor-eyJvZmZzZXQiOjEwMDB9", "Bearer access-token-value")
	text := strings.Repeat("x", 200) + " cursor-eyJvZmZzZXQiOjEwMDB9 access-token-value"
	b.ReportAllocs()
	for b.Loop() {
		_ = s.Apply(text)
	}
}

// The cost of a partition's first redaction after new cursors: the
// replacer is rebuilt over 64 cursors.
func BenchmarkRebuild64(b *testing.B) {
	parent := New(256)
	parent.Add("client-secret-value", "access-token-value")
	s := parent.Child(64)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		s.Add("cursor-" + strings.Repeat("a", 20) + string(rune('a'+i%26)) + string(rune('a'+(i/26)%26)))
		_ = s.Apply("a log line with nothing secret in it")
	}
}
