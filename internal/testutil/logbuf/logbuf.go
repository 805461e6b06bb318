// Package logbuf is a log sink that tests read while goroutines (a
// watcher's logger, a child process's output) still write to it, a
// slog.Handler that shows a test each record as it is written, and a
// logger that keeps each line with the state of its caller at that moment.
package logbuf

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
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

// StateLines is a logger's record of what its caller had (or had not yet)
// done at each line: every record kept as "message: state", the state
// being what State returns while the record is written. A watcher that
// counts an update only after logging it, for one, shows the count before
// the update in the update's own line.
type StateLines struct {
	// State describes the state at the moment; ok false leaves the record
	// out (a line written before the test has anything to look at).
	State func() (state string, ok bool)

	mu    sync.Mutex
	lines []string
}

// Logger is a logger whose records s keeps.
func (s *StateLines) Logger() *slog.Logger {
	return slog.New(RecordHandler{Record: func(r slog.Record) {
		state, ok := s.State()
		if !ok {
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		s.lines = append(s.lines, r.Message+": "+state)
	}})
}

// Expect fails t unless the lines kept so far are want, in order.
func (s *StateLines) Expect(t testing.TB, want ...string) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.Equal(s.lines, want) {
		t.Errorf("logged, with the state while each line was written:\n%s\nwant:\n%s",
			strings.Join(s.lines, "\n"), strings.Join(want, "\n"))
	}
}
