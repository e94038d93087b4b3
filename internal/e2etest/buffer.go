package e2etest

import (
	"bytes"
	"strings"
	"sync"
)

// SyncBuffer is a goroutine-safe log buffer: a process's or a logger's
// output, read by the test while it is written.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Len is the number of bytes written so far: an offset for Since.
func (s *SyncBuffer) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Len()
}

// Since returns what was written after offset (an earlier Len).
func (s *SyncBuffer) Since(offset int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.b.Bytes()
	return string(b[min(offset, len(b)):])
}

// Count is the number of non-overlapping occurrences of substr.
func (s *SyncBuffer) Count(substr string) int {
	return strings.Count(s.String(), substr)
}

// Tail returns the last n lines.
func (s *SyncBuffer) Tail(n int) string { return Tail(s.String(), n) }

// Tail returns the last n lines of s.
func Tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
