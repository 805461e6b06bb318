package node

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// labelKey is the label values of one series (unused trailing values empty).
type labelKey [3]string

// seriesCache keeps the children of a metric vector the request path has
// resolved, so a request finds its series with one map lookup instead of
// hashing its label values again in the vector (WithLabelValues). Children
// are created on first use, as WithLabelValues does; the set is bounded by
// tenants x operations x results. Vectors are never reset or pruned, so a
// cached child stays the vector's.
type seriesCache[T any] struct {
	n    int // label values the vector takes
	with func(...string) T
	mu   sync.RWMutex
	m    map[labelKey]T
}

func newSeriesCache[T any](n int, with func(...string) T) *seriesCache[T] {
	return &seriesCache[T]{n: n, with: with, m: map[labelKey]T{}}
}

func (c *seriesCache[T]) get(k labelKey) T {
	c.mu.RLock()
	v, ok := c.m[k]
	c.mu.RUnlock()
	if ok {
		return v
	}
	return c.create(k)
}

// create resolves a child the first time (apart from get: slicing k makes
// it escape, which must not cost the lookup an allocation).
func (c *seriesCache[T]) create(k labelKey) T {
	v := c.with(k[:c.n]...)
	c.mu.Lock()
	c.m[k] = v
	c.mu.Unlock()
	return v
}

// requestSeries are the per-request metrics of the node API.
type requestSeries struct {
	requests *seriesCache[prometheus.Counter]  // tenant, op, result
	bytes    *seriesCache[prometheus.Counter]  // tenant, op, result
	duration *seriesCache[prometheus.Observer] // op, result
	chunks   *seriesCache[prometheus.Counter]  // tenant, result
}

func newRequestSeries(requests, bytes, chunks *prometheus.CounterVec, duration *prometheus.HistogramVec) requestSeries {
	return requestSeries{
		requests: newSeriesCache(3, requests.WithLabelValues),
		bytes:    newSeriesCache(3, bytes.WithLabelValues),
		duration: newSeriesCache(2, duration.WithLabelValues),
		chunks:   newSeriesCache(2, chunks.WithLabelValues),
	}
}
