package client

import (
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/dgraph-io/ristretto/v2"

	"github.com/distcache/distcache/internal/slab"
)

// pageCache is the bounded RAM cache of pages, whole chunks or equal parts
// of them (ristretto, cost = bytes). Keys name the version (bucket, key,
// ETag) and the page (page size, index); the
// tenant is implicit, one client being one tenant. Each entry carries its
// full key and a lookup checks it, so a hash collision can never serve a
// chunk of another object or version.
type pageCache struct {
	c *ristretto.Cache[string, *page]
	// mu makes close safe while reads are still in flight: ristretto's
	// Close must not race with Set or Wait.
	mu     sync.RWMutex
	closed bool
}

// page is one page's bytes and who holds them: the cache, each fill's
// waiters, each reader. A page that came from a slab.Pool goes back to it
// when the last holder releases it, to be refilled with another page's
// bytes, so a reader must hold the page for as long as it reads data.
type page struct {
	key  string
	data []byte // never modified while held
	refs atomic.Int32
	pool *slab.Pool // nil: data is the garbage collector's
}

// newPage is a page of n bytes held once, by its caller: a buffer of pool
// when the page fills one (and the pool has one), else fresh memory.
func newPage(key string, n int64, pool *slab.Pool) *page {
	pg := &page{key: key}
	if n > 0 && n == int64(pool.Size()) {
		if b, ok := pool.Get(); ok {
			pg.data, pg.pool = b, pool
		}
	}
	if pg.data == nil {
		pg.data = make([]byte, n)
	}
	pg.refs.Store(1)
	return pg
}

// hold adds a holder unless the page has already been released by its
// last one (it was evicted meanwhile: its buffer may hold another page
// now).
func (pg *page) hold() bool {
	for {
		n := pg.refs.Load()
		if n <= 0 {
			return false
		}
		if pg.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// copyOut copies the page from byte within on into dst and lets go of
// the caller's hold.
func (pg *page) copyOut(dst []byte, within int64) {
	copy(dst, pg.data[within:])
	pg.release()
}

// release drops one holder; the last gives the buffer back to its pool.
func (pg *page) release() {
	if pg.refs.Add(-1) == 0 && pg.pool != nil {
		pg.pool.Put(pg.data)
	}
}

// assumedChunk sizes the admission counters before the chunk size is
// known; a larger real chunk only means more counters than needed.
const assumedChunk = 256 << 10

func newPageCache(maxBytes int64) (*pageCache, error) {
	items := max(maxBytes/assumedChunk, 64)
	c, err := ristretto.NewCache(&ristretto.Config[string, *page]{
		NumCounters:        10 * items,
		MaxCost:            maxBytes,
		BufferItems:        64,
		IgnoreInternalCost: true,
		// Evicted, rejected or replaced: the cache's hold ends.
		OnExit: func(pg *page) {
			if pg != nil {
				pg.release()
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("client: page cache: %w", err)
	}
	return &pageCache{c: c}, nil
}

// pageKey is unambiguous: every variable part is length-prefixed.
func pageKey(bucket, key, etag string, pageSize, index int64) string {
	// Built in a buffer on the stack when it fits: one allocation, the
	// string.
	var stack [256]byte
	b := stack[:0]
	for _, s := range [...]string{bucket, key, etag} {
		b = strconv.AppendInt(b, int64(len(s)), 10)
		b = append(b, ':')
		b = append(b, s...)
	}
	b = strconv.AppendInt(b, pageSize, 10)
	b = append(b, '/')
	b = strconv.AppendInt(b, index, 10)
	return string(b)
}

// get returns the page cached under key, held for the caller, who must
// release it.
func (p *pageCache) get(key string) (*page, bool) {
	pg := p.lookup(key)
	if pg == nil || !pg.hold() {
		return nil, false
	}
	return pg, true
}

// has says whether the page is cached, without holding it.
func (p *pageCache) has(key string) bool {
	return p.lookup(key) != nil
}

func (p *pageCache) lookup(key string) *page {
	if p == nil {
		return nil
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		return nil
	}
	pg, ok := p.c.Get(key)
	if !ok || pg == nil || pg.key != key {
		return nil
	}
	return pg
}

// add caches a whole page (the cache holds it from now on) and waits until
// ristretto has applied it, so the next lookup sees it (unless admission
// refused it).
func (p *pageCache) add(pg *page) {
	if p == nil || len(pg.data) == 0 {
		return
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		return
	}
	pg.refs.Add(1)
	if p.c.Set(pg.key, pg, int64(len(pg.data))) {
		p.c.Wait()
	} else {
		pg.release() // dropped before ristretto saw it: no OnExit
	}
}

func (p *pageCache) close() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed {
		p.closed = true
		p.c.Close()
	}
}
