// Package logbuf is a log sink that tests read while goroutines (a
// watcher's logger, a child process's output) still write to it, and a
// slog.Handler that shows a test each record as it is written.
package logbuf

import (
	"context"
	"log/slog"
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

// RecordHandler is a slog.Handler that hands each record to Record while
// it is being written, so a test can look at what the logger's caller has
// (or has not yet) done at that moment.
type RecordHandler struct{ Record func(slog.Record) }

func (h RecordHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h RecordHandler) Handle(_ context.Context, r slog.Record) error {
	h.Record(r)
	return nil
}

func (h RecordHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h RecordHandler) WithGroup(string) slog.Handler      { return h }
