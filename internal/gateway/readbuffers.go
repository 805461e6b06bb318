package gateway

import (
	"context"

	"golang.org/x/sync/semaphore"
)

// readBuffers is the gateway-wide budget of bytes GetObjects hold in fetched
// pieces (being fetched, queued, or being sent). Without it every
// concurrent GetObject could hold ReadAhead+1 pieces: a hundred clients
// reading long ranges would take gigabytes, far past the page cache's pool.
//
// A reader that holds nothing waits for the budget; one that holds pieces
// only takes what is free (its read-ahead shrinks). Waiting while holding
// nothing cannot deadlock: whoever holds the budget is fetching or sending,
// and lets go when done or when its client goes away.
type readBuffers struct {
	sem     *semaphore.Weighted
	metrics *Metrics
}

// DefaultReadBufferBytes is the default Config.ReadBufferBytes.
const DefaultReadBufferBytes = 256 << 20

func newReadBuffers(size int64, m *Metrics) *readBuffers {
	return &readBuffers{sem: semaphore.NewWeighted(size), metrics: m}
}

// tryAcquire takes n bytes if they are free and nobody waits.
func (b *readBuffers) tryAcquire(n int64) bool {
	if !b.sem.TryAcquire(n) {
		return false
	}
	b.metrics.readBuffer.Add(float64(n))
	return true
}

// acquire takes n bytes, waiting for them (counted) if they are not free.
// n is at most the budget's size (New sizes it for a whole first window).
func (b *readBuffers) acquire(ctx context.Context, n int64) error {
	if b.tryAcquire(n) {
		return nil
	}
	b.metrics.readBufferWaits.Inc()
	if err := b.sem.Acquire(ctx, n); err != nil {
		return err
	}
	b.metrics.readBuffer.Add(float64(n))
	return nil
}

func (b *readBuffers) release(n int64) {
	if n > 0 {
		b.metrics.readBuffer.Sub(float64(n))
		b.sem.Release(n)
	}
}
