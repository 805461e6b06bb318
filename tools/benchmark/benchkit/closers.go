package benchkit

import "sync"

// Closers are the cleanups of what a part started (servers, processes,
// clients), run last first by Close, so each stops before what it uses.
// The zero value is ready; it is safe for concurrent use.
type Closers struct {
	mu sync.Mutex
	fs []func()
}

// Add registers f to run at Close.
func (c *Closers) Add(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fs = append(c.fs, f)
}

// Close runs the cleanups added so far, the last added first; each runs
// once, however often Close is called.
func (c *Closers) Close() {
	c.mu.Lock()
	fs := c.fs
	c.fs = nil
	c.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}
