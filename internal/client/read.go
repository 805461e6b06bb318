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
// The chunks (with a page cache, the pages) the range covers are fetched
// in parallel, at most Parallelism at a time, each from its chunk's owner
// with failover to the next candidates and then to any member. With a page
// cache, whole pages are fetched, kept and served from RAM; a read of part
// of a chunk-sized page that is not in RAM gets only its bytes from the
// node and fills the page in the background (pages smaller than chunks
// are fetched whole). Without a page cache, only the bytes asked for are
// transferred.
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
	unit := c.pageSize(cs)
	first, last := chunk.Span(off, want, unit)
	c.readAheadAfter(ctx, bucket, key, m, cs, first, last)
	if first == last {
		err = c.readPart(ctx, bucket, key, m, cs, first, off, p[:want])
	} else {
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(c.cfg.Parallelism)
		for idx := first; idx <= last && gctx.Err() == nil; idx++ {
			g.Go(func() error { return c.readPart(gctx, bucket, key, m, cs, idx, off, p[:want]) })
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

// pageSize is the unit reads are split into and the page cache keeps, for
// chunk size cs: Config.PageBytes when there is a page cache and it
// divides cs (so that a page lies in one chunk and is one range request),
// else the whole chunk.
func (c *Client) pageSize(cs int64) int64 {
	ps := c.cfg.PageBytes
	if c.pages == nil || ps <= 0 || ps >= cs {
		return cs
	}
	if cs%ps != 0 {
		c.pageWarn.Do(func() {
			c.log.Warn("PageBytes does not divide the nodes' chunk size; the page cache keeps whole chunks",
				"pageBytes", ps, "chunkSize", cs)
		})
		return cs
	}
	return ps
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

// readPart copies part idx's share of the read [off, off+len(p)) into p;
// parts are pages with a page cache, else chunks (pageSize).
func (c *Client) readPart(ctx context.Context, bucket, key string, m Meta, cs, idx, off int64, p []byte) error {
	unit := c.pageSize(cs)
	poff, plen, _ := chunk.Bounds(m.Size, unit, idx)
	lo, hi := max(off, poff), min(off+int64(len(p)), poff+plen)
	dst := p[lo-off : hi-off]
	within := lo - poff
	pages := c.pages != nil && !m.NoCache
	if pages && (int64(len(dst)) == plen || unit < cs) {
		// The whole page: asked for, or a page smaller than a chunk
		// (PageBytes), which is fetched whole for any part of it: the
		// page size is what a read is meant to cost, and one request for
		// the page costs less than one for the part and another for the
		// page behind it.
		pg, err := c.wholePage(ctx, bucket, key, m, cs, idx)
		if err != nil {
			return err
		}
		pg.copyOut(dst, within)
		return nil
	}
	if pages {
		// Part of a page (a small ranged read, the edge of a large one).
		// From RAM when the page is there; otherwise only the bytes asked
		// for are fetched now, and the whole page is fetched into the page
		// cache in the background (joining a fetch already in flight), so
		// a small read never waits for a whole page to cross the network.
		pk := pageKey(bucket, key, m.ETag, unit, idx)
		if pg, ok := c.pages.get(pk); ok {
			c.metrics.pageHit.Inc()
			pg.copyOut(dst, within)
			return nil
		}
		c.metrics.pageMiss.Inc()
		if c.filling(pk) {
			// The whole page is on its way (read ahead, or filled behind
			// another read): wait for it rather than fetch its bytes twice.
			pg, err := c.fetchPage(ctx, pk, fillRead, bucket, key, m, cs, idx)
			if err != nil {
				return err
			}
			pg.copyOut(dst, within)
			return nil
		}
		if ctx.Err() == nil { // not for a read its caller has given up
			go c.fillInBackground(context.WithoutCancel(ctx), pk, fillBackground, bucket, key, m, cs, idx)
		}
	}
	// Only the bytes asked for, straight into p.
	return c.readRange(ctx, bucket, key, m, cs, lo, dst)
}

// readRange reads bytes [off, off+len(dst)) of version m, which lie in one
// chunk, from that chunk's owner (or the next candidates) into dst.
func (c *Client) readRange(ctx context.Context, bucket, key string, m Meta, cs, off int64, dst []byte) error {
	idx := off / cs
	coff, clen, _ := chunk.Bounds(m.Size, cs, idx)
	within := off - coff
	whole := within == 0 && int64(len(dst)) == clen
	id := c.chunkID(bucket, key, m.ETag, cs, idx)
	received := func() int64 { return int64(len(dst)) }
	return c.try(ctx, opGetChunk, bucket, key, id, received, func(ctx context.Context, addr string) error {
		return c.getChunk(ctx, addr, bucket, key, m, idx, within, whole, dst)
	})
}

// wholePage returns page idx of version m (pageSize) from the page cache,
// or fetches it (one request however many callers want it at once) and
// caches it. The page is held for the caller, who must release it, and
// must not be modified.
func (c *Client) wholePage(ctx context.Context, bucket, key string, m Meta, cs, idx int64) (*page, error) {
	pk := pageKey(bucket, key, m.ETag, c.pageSize(cs), idx)
	if pg, ok := c.pages.get(pk); ok {
		c.metrics.pageHit.Inc()
		return pg, nil
	}
	if c.pages != nil {
		c.metrics.pageMiss.Inc()
	}
	return c.fetchPage(ctx, pk, fillRead, bucket, key, m, cs, idx)
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
	if err := c.checkAnswer(opGetChunk, bucket, key, addr, resp, http.StatusOK, http.StatusPartialContent); err != nil {
		return err
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
	c.observeAnswer(addr, r.header)
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

// PageView is bytes of a page in the page cache, lent without a copy: the
// page is not reused for other bytes before Release. Data must not be
// modified.
type PageView struct {
	Data []byte
	pg   *page
}

// Release ends the loan; Data must not be read afterwards.
func (v PageView) Release() {
	if v.pg != nil {
		v.pg.release()
	}
}

// View lends bytes [off, off+n) of version m without a copy, as a slice of
// the page cache's page they lie in, when that page is cached, or when
// they are at least half of it or pages are smaller than chunks (the whole
// page is then fetched into the page cache, joining a fill already in
// flight, instead of a part of it beside the fill). Like ReadAt, it counts
// in the page cache metrics and moves the reader's read-ahead on. ok is
// false, with a nil error, when the range is not served this way (it
// spans pages, or is a small part of a chunk-sized page not in RAM): read
// it with ReadAt. Release the view when done with it.
func (c *Client) View(ctx context.Context, bucket, key string, m Meta, off, n int64) (v PageView, ok bool, err error) {
	return c.view(ctx, bucket, key, m, off, n, true)
}

// CachedView is View of a page in RAM only: it never fetches nor waits, so
// a caller may try it in line before starting a fetch; ok is false, with
// nothing counted, when View would have to fetch.
func (c *Client) CachedView(ctx context.Context, bucket, key string, m Meta, off, n int64) (PageView, bool) {
	v, ok, _ := c.view(ctx, bucket, key, m, off, n, false)
	return v, ok
}

func (c *Client) view(ctx context.Context, bucket, key string, m Meta, off, n int64, fetch bool) (v PageView, ok bool, err error) {
	cs := c.chunkSize.Load()
	if c.pages == nil || m.NoCache || cs <= 0 || n <= 0 || off < 0 || off+n > m.Size || m.ETag == "" {
		return PageView{}, false, nil
	}
	if err := checkObjectName(opGetChunk, bucket, key); err != nil {
		return PageView{}, false, err
	}
	ps := c.pageSize(cs)
	idx := off / ps
	if (off+n-1)/ps != idx {
		return PageView{}, false, nil
	}
	_, plen, _ := chunk.Bounds(m.Size, ps, idx)
	pk := pageKey(bucket, key, m.ETag, ps, idx)
	pg, hit := c.pages.get(pk)
	if !hit && !fetch {
		return PageView{}, false, nil
	}
	if !hit && 2*n < plen && ps == cs && !c.filling(pk) {
		return PageView{}, false, nil // a small part of a chunk: ReadAt fetches only its bytes
	}
	c.readAheadAfter(ctx, bucket, key, m, cs, idx, idx)
	if hit {
		c.metrics.pageHit.Inc()
	} else {
		c.metrics.pageMiss.Inc()
		if pg, err = c.fetchPage(ctx, pk, fillRead, bucket, key, m, cs, idx); err != nil {
			c.forgetChanged(bucket, key, err)
			return PageView{}, false, err
		}
	}
	within := off - idx*ps
	return PageView{Data: pg.data[within : within+n : within+n], pg: pg}, true, nil
}

// forgetChanged drops the kept metadata of an object whose version is gone,
// so the next Stat asks a node.
func (c *Client) forgetChanged(bucket, key string, err error) {
	if errors.Is(err, ErrChanged) {
		c.metas.forget(bucket, key)
	}
}
