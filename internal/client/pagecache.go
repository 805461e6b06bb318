package client

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/dgraph-io/ristretto/v2"
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

type page struct {
	key  string
	data []byte // never modified once cached
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
	})
	if err != nil {
		return nil, fmt.Errorf("client: page cache: %w", err)
	}
	return &pageCache{c: c}, nil
}

// pageKey is unambiguous: every variable part is length-prefixed.
func pageKey(bucket, key, etag string, pageSize, index int64) string {
	var b strings.Builder
	b.Grow(len(bucket) + len(key) + len(etag) + 48)
	for _, s := range []string{bucket, key, etag} {
		b.WriteString(strconv.Itoa(len(s)))
		b.WriteByte(':')
		b.WriteString(s)
	}
	b.WriteString(strconv.FormatInt(pageSize, 10))
	b.WriteByte('/')
	b.WriteString(strconv.FormatInt(index, 10))
	return b.String()
}

func (p *pageCache) get(key string) ([]byte, bool) {
	if p == nil {
		return nil, false
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		return nil, false
	}
	pg, ok := p.c.Get(key)
	if !ok || pg == nil || pg.key != key {
		return nil, false
	}
	return pg.data, true
}

// set caches a whole page and waits until ristretto has applied it, so
// the next lookup sees it (unless admission refused it).
func (p *pageCache) set(key string, data []byte) {
	if p == nil || len(data) == 0 {
		return
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if !p.closed && p.c.Set(key, &page{key: key, data: data}, int64(len(data))) {
		p.c.Wait()
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
