package client

import (
	"context"

	"github.com/distcache/distcache/internal/chunk"
	"github.com/distcache/distcache/internal/slab"
)

// Modes of a page fill (the mode label of distcache_client_page_fills_total).
const (
	fillRead       = "read"
	fillBackground = "background"
	fillAhead      = "ahead" // read-ahead of a reader moving through the object
)

// pageFill is one page being fetched into the page cache, and the callers
// waiting for it. When it ends, each waiter is given its own hold of the
// page, so the page cannot be evicted and reused between the fill's end
// and a waiter's reading of it.
type pageFill struct {
	done    chan struct{}
	waiters int  // c.fillMu
	ended   bool // c.fillMu: pg and err are set, waiters hold pg
	pg      *page
	err     error
}

// fetchPage fetches page idx (pageSize) into the page cache (one request
// however many callers want it at once) and returns it, held for the
// caller, who must release it; mode labels the fill in the metrics.
// Without a page cache it returns the chunk, uncached.
func (c *Client) fetchPage(ctx context.Context, pk, mode, bucket, key string, m Meta, cs, idx int64) (*page, error) {
	for {
		c.fillMu.Lock()
		f := c.fills[pk]
		if f == nil {
			if pg, ok := c.pages.get(pk); ok { // a fill that just ended
				c.fillMu.Unlock()
				return pg, nil
			}
			f = &pageFill{done: make(chan struct{})}
			c.fills[pk] = f
			go c.runFill(ctx, f, pk, mode, bucket, key, m, cs, idx)
		}
		f.waiters++
		c.fillMu.Unlock()

		select {
		case <-f.done:
		case <-ctx.Done():
			c.fillMu.Lock()
			if f.ended && f.pg != nil {
				f.pg.release() // given to us as it ended
			} else if !f.ended {
				f.waiters--
			}
			c.fillMu.Unlock()
			return nil, ctx.Err()
		}
		if f.err != nil && isContextErr(f.err) && ctx.Err() == nil {
			continue // the caller whose fill we joined gave up; we did not
		}
		return f.pg, f.err
	}
}

// runFill fetches the page of f with the context of the caller that
// started it, caches it and hands it to f's waiters.
func (c *Client) runFill(ctx context.Context, f *pageFill, pk, mode, bucket, key string, m Meta, cs, idx int64) {
	pg, err := c.fill(ctx, pk, mode, bucket, key, m, cs, idx)
	c.fillMu.Lock()
	delete(c.fills, pk)
	f.ended, f.pg, f.err = true, pg, err
	if pg != nil {
		pg.refs.Add(int32(f.waiters)) // our own hold keeps it alive meanwhile
	}
	c.fillMu.Unlock()
	close(f.done)
	if pg != nil {
		pg.release()
	}
}

// fill reads page idx from the nodes into a new page, held once, and
// caches it.
func (c *Client) fill(ctx context.Context, pk, mode, bucket, key string, m Meta, cs, idx int64) (*page, error) {
	ps := c.pageSize(cs)
	poff, plen, ok := chunk.Bounds(m.Size, ps, idx)
	if !ok {
		return nil, &Error{Op: opGetChunk, Bucket: bucket, Key: key, Kind: ErrInvalidRange, Message: "page outside the object"}
	}
	c.metrics.pageFills.WithLabelValues(mode).Inc()
	pg := newPage(pk, plen, c.pagePool(ps))
	if err := c.readRange(ctx, bucket, key, m, cs, poff, pg.data); err != nil {
		pg.release() // nothing writes into it any more: readRange has returned
		return nil, err
	}
	c.pages.add(pg)
	return pg, nil
}

// fillInBackground fills a page nobody waits for.
func (c *Client) fillInBackground(ctx context.Context, pk, mode, bucket, key string, m Meta, cs, idx int64) {
	if pg, err := c.fetchPage(ctx, pk, mode, bucket, key, m, cs, idx); err == nil {
		pg.release()
	}
}

// filling says whether the whole page pk is being fetched into the page
// cache right now.
func (c *Client) filling(pk string) bool {
	c.fillMu.Lock()
	defer c.fillMu.Unlock()
	return c.fills[pk] != nil
}

// pagePool is where pages of ps bytes come from: buffers faulted in ahead
// and reused after eviction, as many as the page cache holds and a quarter
// more for pages still read after their eviction and fills in flight (past
// that, fresh memory). Nil without a page cache.
func (c *Client) pagePool(ps int64) *slab.Pool {
	if c.pages == nil {
		return nil
	}
	c.fillMu.Lock()
	defer c.fillMu.Unlock()
	if c.pool == nil { // ps never changes: the chunk size is learnt once
		c.pool = slab.New(int(ps), c.cfg.PageCacheBytes+c.cfg.PageCacheBytes/4)
	}
	return c.pool
}

// poolStats is what the page pool holds and how often it had nothing free
// (metrics).
func (c *Client) poolStats() (bytes, refused float64) {
	c.fillMu.Lock()
	defer c.fillMu.Unlock()
	_, r := c.pool.Stats()
	return float64(c.pool.Bytes()), float64(r)
}
