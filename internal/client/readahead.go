package client

import (
	"context"
	"strconv"
	"sync"

	"github.com/distcache/distcache/internal/chunk"
)

// Read-ahead across reads. ClickHouse (and most S3 readers) reads a file as
// many ranged requests, a few hundred KiB each, several in flight and not in
// order (ClickHouse also splits a file between threads, each walking its own
// part), so no single request shows that the file is being scanned, and the
// page cache would fetch each page only when a read reaches it. readAhead
// remembers, per object version, which pages were read: a read of page i
// when page i-1 was read too is a scan moving forward, and the pages after
// i are fetched into the page cache in the background, as many as the run
// of read pages behind i is long (up to the window), the way the kernel
// grows its read-ahead.
type readAhead struct {
	mu       sync.Mutex
	versions map[string]*scan
	// inflight counts the fills in flight for read-ahead, at most the
	// window; a read that finds no room does not read ahead (never queues
	// behind them).
	inflight int
}

// scan is what readAhead knows of one version.
type scan struct {
	read     map[int64]bool // pages read
	launched map[int64]bool // pages read ahead
}

// Bounds of readAhead's memory: past them the tables are cleared (scans
// only rebuild their windows).
const (
	maxScans     = 4096
	maxScanPages = 16384
)

func newReadAhead() *readAhead {
	return &readAhead{versions: map[string]*scan{}}
}

func versionKey(bucket, key, etag string) string {
	return strconv.Itoa(len(bucket)) + ":" + bucket + strconv.Itoa(len(key)) + ":" + key + etag
}

// next records a read of pages [first, last] (of lastPage+1) and returns
// the pages to fetch ahead of it, at most window, marked as launched. Only
// earlier reads are evidence of a scan: one read covering several pages
// reads ahead nothing past its range by itself.
func (ra *readAhead) next(vk string, first, last, lastPage, window int64) []int64 {
	ra.mu.Lock()
	defer ra.mu.Unlock()
	sc := ra.versions[vk]
	if sc == nil {
		if len(ra.versions) >= maxScans {
			clear(ra.versions)
		}
		sc = &scan{read: map[int64]bool{}, launched: map[int64]bool{}}
		ra.versions[vk] = sc
	}
	if len(sc.read) >= maxScanPages {
		clear(sc.read)
		clear(sc.launched)
	}
	run := int64(0)
	for run < window && first-run-1 >= 0 && sc.read[first-run-1] {
		run++
	}
	for i := first; i <= last; i++ {
		sc.read[i] = true
	}
	var out []int64
	for i := last + 1; i <= min(last+run, lastPage); i++ {
		if !sc.launched[i] && !sc.read[i] {
			sc.launched[i] = true
			out = append(out, i)
		}
	}
	return out
}

// acquire takes room for one more read-ahead fill, if fewer than window
// are in flight.
func (ra *readAhead) acquire(window int64) bool {
	ra.mu.Lock()
	defer ra.mu.Unlock()
	if int64(ra.inflight) >= window {
		return false
	}
	ra.inflight++
	return true
}

func (ra *readAhead) release() {
	ra.mu.Lock()
	defer ra.mu.Unlock()
	ra.inflight--
}

// stopped says page idx was not read ahead after all (no room for its
// fill), so a later read may launch it.
func (ra *readAhead) stopped(vk string, idx int64) {
	ra.mu.Lock()
	defer ra.mu.Unlock()
	if sc := ra.versions[vk]; sc != nil {
		delete(sc.launched, idx)
	}
}

// noAheadKey marks a context whose reads are parts of one larger read
// that was noted already (WithoutReadAhead).
type noAheadKey struct{}

// WithoutReadAhead returns a context whose reads do not count for
// read-ahead: for the parts of one read the caller notes itself with
// NoteRead (the gateway reads a GetObject's range in pieces, and the pieces
// of one range are not a scan).
func WithoutReadAhead(ctx context.Context) context.Context {
	return context.WithValue(ctx, noAheadKey{}, true)
}

// NoteRead tells the read-ahead that a read of [off, off+n) of version m
// starts (with a page cache; see WithoutReadAhead).
func (c *Client) NoteRead(ctx context.Context, bucket, key string, m Meta, off, n int64) {
	cs := c.chunkSize.Load()
	if c.pages == nil || m.NoCache || cs <= 0 || n <= 0 || off < 0 || off >= m.Size {
		return
	}
	first, last := chunk.Span(off, min(n, m.Size-off), c.pageSize(cs))
	c.readAheadAfter(context.WithoutCancel(ctx), bucket, key, m, cs, first, last)
}

// aheadWindow is the most pages (chunks without a page cache) read ahead
// of one scan or Object, and in flight for read-ahead at once: Parallelism
// chunks' worth.
func (c *Client) aheadWindow(cs int64) int64 {
	return int64(c.cfg.Parallelism) * (cs / c.pageSize(cs))
}

// readAheadAfter notes a read of pages [first, last] of version m and
// fetches the pages its scan's window covers into the page cache in the
// background.
func (c *Client) readAheadAfter(ctx context.Context, bucket, key string, m Meta, cs, first, last int64) {
	if c.pages == nil || m.NoCache || c.ahead == nil || ctx.Value(noAheadKey{}) != nil {
		return
	}
	ps, window := c.pageSize(cs), c.aheadWindow(cs)
	vk := versionKey(bucket, key, m.ETag)
	ahead := c.ahead.next(vk, first, last, chunk.Count(m.Size, ps)-1, window)
	for n, i := range ahead {
		pk := pageKey(bucket, key, m.ETag, ps, i)
		if c.pages.has(pk) || c.filling(pk) {
			continue
		}
		if !c.ahead.acquire(window) {
			for _, j := range ahead[n:] { // enough in flight; a later read goes on
				c.ahead.stopped(vk, j)
			}
			return
		}
		go func() {
			defer c.ahead.release()
			c.fillInBackground(context.WithoutCancel(ctx), pk, fillAhead, bucket, key, m, cs, i)
		}()
	}
}
