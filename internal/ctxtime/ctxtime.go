// Package ctxtime holds waits that a context cuts short, for the retry
// loops of the data path and the benchmarks alike.
package ctxtime

import (
	"context"
	"time"
)

// Sleep waits d or until ctx ends, whichever comes first: nil after d,
// ctx's error when it ended first. A d of zero or less returns nil at once.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Every calls fn every d (the first call d from now) until ctx ends; a
// call that takes longer than d delays the next, it never overlaps it.
func Every(ctx context.Context, d time.Duration, fn func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}
