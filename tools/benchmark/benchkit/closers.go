package benchkit

import "github.com/distcache/distcache/internal/closers"

// Closers are the cleanups of what a part started (servers, processes,
// clients), run last first by Close, so each stops before what it uses.
// The zero value is ready; it is safe for concurrent use.
type Closers = closers.List
