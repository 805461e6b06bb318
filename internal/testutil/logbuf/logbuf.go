// Package logbuf is a log sink that tests read while goroutines (a
// watcher's logger, a child process's output) still write to it.
package logbuf

import (
	"strings"
	"sync"
)

// Buffer is a goroutine-safe strings.Builder; the zero value is ready.
type Buffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String is everything written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
