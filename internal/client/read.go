package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"golang.org/x/sync/errgroup"

	"github.com/distcache/distcache/internal/chunk"
	"github.com/distcache/distcache/internal/nodeapi"
)

// ReadAt reads len(p) bytes of version m of the object from offset off, as
// io.ReaderAt does: n < len(p) only with an error, io.EOF when the object
// ends first. Every chunk request pins m.ETag, so all bytes are of that
// version; if the object changed since m was read, the error wraps
// ErrChanged (Stat again).
//
// The chunks the range covers are fetched in parallel, at most Parallelism
// at a time, each from its owner with failover to the next candidates and
// then to any member. With a page cache, whole chunks are fetched, kept and
// served from RAM; a read of part of a chunk that is not in RAM gets only
// its bytes from the node and fills the page in the background. Without a
// page cache, only the bytes asked for are transferred.
func (c *Client) ReadAt(ctx context.Context, bucket, key string, m Meta, p []byte, off int64) (int, error) {
	if err := checkObjectName(opGetChunk, bucket, key); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, &Error{Op: opGetChunk, Bucket: bucket, Key: key, Kind: ErrInvalidRange, Message: "negative offset"}
	}
	if m.ETag == "" || m.Size < 0 {
		return 0, &Error{Op: opGetChunk, Bucket: bucket, Key: key, Message: "ReadAt needs the Meta of a version (from Stat)"}
	}
	if off >= m.Size {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	want := min(int64(len(p)), m.Size-off)
	if want == 0 {
		return 0, nil
	}
	cs, err := c.chunkSizeFor(ctx, bucket, key)
	if err != nil {
		return 0, err
	}
	first, last := chunk.Span(off, want, cs)
	c.readAheadAfter(ctx, bucket, key, m, cs, first, last)
	if first == last {
		err = c.readChunk(ctx, bucket, key, m, cs, first, off, p[:want])
	} else {
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(c.cfg.Parallelism)
		for idx := first; idx <= last && gctx.Err() == nil; idx++ {
			g.Go(func() error { return c.readChunk(gctx, bucket, key, m, cs, idx, off, p[:want]) })
		}
		err = g.Wait()
		if err == nil {
			err = ctx.Err() // the loop may have stopped early
		}
	}
	if err != nil {
		c.forgetChanged(bucket, key, err)
		return 0, err
	}
	if want < int64(len(p)) {
		return int(want), io.EOF
	}
	return int(want), nil
}

// chunkSizeFor is the nodes' chunk size, asking a node for it (with a
// Stat) if it is not known yet.
func (c *Client) chunkSizeFor(ctx context.Context, bucket, key string) (int64, error) {
	if cs := c.chunkSize.Load(); cs > 0 {
		return cs, nil
	}
	if _, err := c.Stat(ctx, bucket, key); err != nil {
		return 0, err
	}
	if cs := c.chunkSize.Load(); cs > 0 {
		return cs, nil
	}
	return 0, &Error{Op: opGetChunk, Bucket: bucket, Key: key, Message: "the nodes did not say their chunk size; set Config.ChunkSize"}
}

// readChunk copies chunk idx's share of the read [off, off+len(p)) into p.
func (c *Client) readChunk(ctx context.Context, bucket, key string, m Meta, cs, idx, off int64, p []byte) error {
	coff, clen, _ := chunk.Bounds(m.Size, cs, idx)
	lo, hi := max(off, coff), min(off+int64(len(p)), coff+clen)
	dst := p[lo-off : hi-off]
	within := lo - coff
	if c.pages != nil && int64(len(dst)) == clen {
		data, err := c.wholeChunk(ctx, bucket, key, m, cs, idx)
		if err != nil {
			return err
		}
		copy(dst, data[within:])
		return nil
	}
	if c.pages != nil {
		// Part of a chunk (a small ranged read, the edge of a large one).
		// From RAM when the page is there; otherwise only the bytes asked
		// for are fetched now, and the whole chunk is fetched into the page
		// cache in the background (joining a fetch already in flight), so
		// a small read never waits for a whole chunk to cross the network.
		pk := pageKey(bucket, key, m.ETag, cs, idx)
		if data, ok := c.pages.get(pk); ok {
			c.metrics.pageCache.WithLabelValues("hit").Inc()
			copy(dst, data[within:])
			return nil
		}
		c.metrics.pageCache.WithLabelValues("miss").Inc()
		if c.filling(pk) {
			// The whole chunk is on its way (read ahead, or filled behind
			// another read): wait for it rather than fetch its bytes twice.
			data, err := c.fetchPage(ctx, pk, fillRead, bucket, key, m, cs, idx)
			if err != nil {
				return err
			}
			copy(dst, data[within:])
			return nil
		}
		if ctx.Err() == nil { // not for a read its caller has given up
			go func() { _, _ = c.fetchPage(context.WithoutCancel(ctx), pk, fillBackground, bucket, key, m, cs, idx) }()
		}
	}
	// Only the bytes asked for, straight into p.
	id := c.chunkID(bucket, key, m.ETag, cs, idx)
	return c.try(ctx, opGetChunk, bucket, key, id, func(ctx context.Context, addr string) error {
		return c.getChunk(ctx, addr, bucket, key, m, idx, within, int64(len(dst)) == clen, dst)
	})
}

// wholeChunk returns chunk idx of version m from the page cache, or
// fetches it (one request however many callers want it at once) and caches
// it. The slice must not be modified.
func (c *Client) wholeChunk(ctx context.Context, bucket, key string, m Meta, cs, idx int64) ([]byte, error) {
	pk := pageKey(bucket, key, m.ETag, cs, idx)
	if data, ok := c.pages.get(pk); ok {
		c.metrics.pageCache.WithLabelValues("hit").Inc()
		return data, nil
	}
	if c.pages != nil {
		c.metrics.pageCache.WithLabelValues("miss").Inc()
	}
	return c.fetchPage(ctx, pk, fillRead, bucket, key, m, cs, idx)
}

// Modes of a page fill (the mode label of distcache_client_page_fills_total).
const (
	fillRead       = "read"
	fillBackground = "background"
	fillAhead      = "ahead" // read-ahead of a reader moving through the object
)

// fetchPage fetches whole chunk idx into the page cache (one request
// however many callers want it at once) and returns it; mode labels the
// fill in the metrics.
func (c *Client) fetchPage(ctx context.Context, pk, mode, bucket, key string, m Meta, cs, idx int64) ([]byte, error) {
	for {
		ch := c.flight.DoChan(pk, func() (any, error) {
			if data, ok := c.pages.get(pk); ok { // a fetch that just finished
				return data, nil
			}
			c.fills.Store(pk, struct{}{})
			defer c.fills.Delete(pk)
			_, clen, ok := chunk.Bounds(m.Size, cs, idx)
			if !ok {
				return nil, &Error{Op: opGetChunk, Bucket: bucket, Key: key, Kind: ErrInvalidRange, Message: "chunk outside the object"}
			}
			c.metrics.pageFills.WithLabelValues(mode).Inc()
			buf := make([]byte, clen)
			id := c.chunkID(bucket, key, m.ETag, cs, idx)
			err := c.try(ctx, opGetChunk, bucket, key, id, func(ctx context.Context, addr string) error {
				return c.getChunk(ctx, addr, bucket, key, m, idx, 0, true, buf)
			})
			if err != nil {
				return nil, err
			}
			c.pages.set(pk, buf)
			return buf, nil
		})
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case res := <-ch:
			if res.Err != nil && isContextErr(res.Err) && ctx.Err() == nil {
				continue // the caller whose fetch we joined gave up; we did not
			}
			if res.Err != nil {
				return nil, res.Err
			}
			return res.Val.([]byte), nil
		}
	}
}

func isContextErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// getChunk reads chunk idx of version m from one member into dst: the
// whole chunk, or len(dst) bytes from offset within of the chunk.
func (c *Client) getChunk(ctx context.Context, addr, bucket, key string, m Meta, idx, within int64, whole bool, dst []byte) error {
	if t, ok := c.rt.(*inlineTransport); ok {
		if handled, err := c.getChunkInline(ctx, t, addr, bucket, key, m, idx, within, whole, dst); handled {
			return err
		}
	}
	query := "chunk=" + strconv.FormatInt(idx, 10) + "&etag=" + url.QueryEscape(m.ETag)
	req, err := c.newRequest(ctx, http.MethodGet, addr, bucket, key, query)
	if err != nil {
		return &finalError{err}
	}
	if !whole {
		req.Header.Set("Range", "bytes="+strconv.FormatInt(within, 10)+"-"+strconv.FormatInt(within+int64(len(dst))-1, 10))
	}
	resp, err := c.rt.RoundTrip(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	c.observeAnswer(resp.Header)
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusPartialContent {
		return answerError(opGetChunk, bucket, key, addr, resp)
	}
	if err := c.checkChunkAnswer(addr, bucket, key, m, idx, within, resp.StatusCode, resp.Header, resp.ContentLength, len(dst)); err != nil {
		return err
	}
	if _, err := io.ReadFull(resp.Body, dst); err != nil {
		return fmt.Errorf("reading chunk %d: %w", idx, err)
	}
	return nil
}

// getChunkInline is getChunk on a read connection of the client's own
// transport, without an http.Request or http.Response (inlineTransport.
// getChunk): the same request, checks and errors, a dozen allocations
// fewer per read. handled is false when the node did not take a read
// connection; getChunk then makes the request the general way.
func (c *Client) getChunkInline(ctx context.Context, t *inlineTransport, addr, bucket, key string, m Meta, idx, within int64, whole bool, dst []byte) (handled bool, err error) {
	g := chunkGet{host: addr, path: nodeapi.ObjectPath(bucket, key), etag: m.ETag, tenant: c.cfg.Tenant, index: idx, first: -1}
	if !whole {
		g.first, g.last = within, within+int64(len(dst))-1
	}
	r, ok, err := t.getChunk(ctx, withPort(addr), g)
	if !ok || err != nil {
		return ok, err
	}
	c.observeAnswer(r.header)
	if r.code != http.StatusOK && r.code != http.StatusPartialContent {
		resp, body := r.response()
		e := answerError(opGetChunk, bucket, key, addr, resp)
		r.done(body.N == 0)
		return true, e
	}
	if err := c.checkChunkAnswer(addr, bucket, key, m, idx, within, r.code, r.header, r.length, len(dst)); err != nil {
		r.done(false)
		return true, err
	}
	if err := r.readBody(dst); err != nil {
		r.done(false)
		return true, fmt.Errorf("reading chunk %d: %w", idx, err)
	}
	r.done(true)
	return true, nil
}

// checkChunkAnswer checks a 200 or 206 answer to getChunk: the nodes'
// chunk size, the version, and that it carries exactly the n bytes asked
// for.
func (c *Client) checkChunkAnswer(addr, bucket, key string, m Meta, idx, within int64, code int, h http.Header, length int64, n int) error {
	if err := c.checkChunkSize(opGetChunk, addr, h); err != nil {
		return err
	}
	if etag := h.Get("ETag"); etag != "" && etag != m.ETag {
		return &Error{Op: opGetChunk, Bucket: bucket, Key: key, Node: addr, Kind: ErrChanged,
			Message: fmt.Sprintf("asked for version %s, the node sent %s", m.ETag, etag)}
	}
	exact := code == http.StatusPartialContent || within == 0
	if !exact || length != int64(n) {
		// A broken answer: another member may do better.
		return fmt.Errorf("node sent %d bytes with status %d for %d bytes at %d of chunk %d",
			length, code, n, within, idx)
	}
	return nil
}

// View returns bytes [off, off+n) of version m without a copy, as a slice
// of the page cache's page of the chunk they lie in, when that chunk is
// cached, or when they are at least half of it (the whole chunk is then
// fetched into the page cache, joining a fill already in flight, instead
// of a part of it beside the fill). The slice must not be modified (a page
// never changes once cached). Like ReadAt, it counts in the page cache
// metrics and moves the reader's read-ahead on. ok is false, with a nil
// error, when the range is not served this way: read it with ReadAt.
func (c *Client) View(ctx context.Context, bucket, key string, m Meta, off, n int64) (data []byte, ok bool, err error) {
	cs := c.chunkSize.Load()
	if c.pages == nil || cs <= 0 || n <= 0 || off < 0 || off+n > m.Size || m.ETag == "" {
		return nil, false, nil
	}
	if err := checkObjectName(opGetChunk, bucket, key); err != nil {
		return nil, false, err
	}
	idx := off / cs
	if (off+n-1)/cs != idx {
		return nil, false, nil
	}
	_, clen, _ := chunk.Bounds(m.Size, cs, idx)
	pk := pageKey(bucket, key, m.ETag, cs, idx)
	page, hit := c.pages.get(pk)
	if !hit && 2*n < clen && !c.filling(pk) {
		return nil, false, nil // a small part: ReadAt fetches only its bytes
	}
	c.readAheadAfter(ctx, bucket, key, m, cs, idx, idx)
	if hit {
		c.metrics.pageCache.WithLabelValues("hit").Inc()
	} else {
		c.metrics.pageCache.WithLabelValues("miss").Inc()
		if page, err = c.fetchPage(ctx, pk, fillRead, bucket, key, m, cs, idx); err != nil {
			c.forgetChanged(bucket, key, err)
			return nil, false, err
		}
	}
	within := off - idx*cs
	return page[within : within+n : within+n], true, nil
}

// forgetChanged drops the kept metadata of an object whose version is gone,
// so the next Stat asks a node.
func (c *Client) forgetChanged(bucket, key string, err error) {
	if errors.Is(err, ErrChanged) {
		c.metas.forget(bucket, key)
	}
}

// filling says whether the whole chunk pk is being fetched into the page
// cache right now.
func (c *Client) filling(pk string) bool {
	_, ok := c.fills.Load(pk)
	return ok
}
