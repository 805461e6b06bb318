// Package closers holds the cleanups of what a harness or a benchmark
// started (servers, processes, clients), run last first, so each stops
// before what it uses.
package closers

import "sync"

// List is a list of cleanups. The zero value is ready; it is safe for
// concurrent use.
type List struct {
	mu sync.Mutex
	fs []func()
}

// Add registers f to run at Close.
func (l *List) Add(f func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fs = append(l.fs, f)
}

// Close runs the cleanups added so far, the last added first; each runs
// once, however often Close is called.
func (l *List) Close() {
	l.mu.Lock()
	fs := l.fs
	l.fs = nil
	l.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}
