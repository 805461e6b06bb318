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
// page cache would fetch each chunk only when a read reaches it. readAhead
// remembers, per object version, which chunks were read: a read of chunk i
// when chunk i-1 was read too is a scan moving forward, and the chunks after
// i are fetched into the page cache in the background, as many as the run
// of read chunks behind i is long (up to the window), the way the kernel
// grows its read-ahead.
type readAhead struct {
	mu       sync.Mutex
	versions map[string]*scan
	// slots bounds the fills in flight for read-ahead; a read that finds
	// them all taken does not read ahead (never queues behind them).
	slots chan struct{}
	max   int64 // the largest window, in chunks
}

// scan is what readAhead knows of one version.
type scan struct {
	read     map[int64]bool // chunks read
	launched map[int64]bool // chunks read ahead
}

// Bounds of readAhead's memory: past them the tables are cleared (scans
// only rebuild their windows).
const (
	maxScans      = 4096
	maxScanChunks = 4096
)

func newReadAhead(maxWindow int) *readAhead {
	return &readAhead{versions: map[string]*scan{}, slots: make(chan struct{}, maxWindow), max: int64(maxWindow)}
}

func versionKey(bucket, key, etag string) string {
	return strconv.Itoa(len(bucket)) + ":" + bucket + strconv.Itoa(len(key)) + ":" + key + etag
}

// next records a read of chunks [first, last] (of lastChunk+1) and returns
// the chunks to fetch ahead of it, marked as launched. Only earlier reads
// are evidence of a scan: one read covering several chunks reads ahead
// nothing past its range by itself.
func (ra *readAhead) next(vk string, first, last, lastChunk int64) []int64 {
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
	if len(sc.read) >= maxScanChunks {
		clear(sc.read)
		clear(sc.launched)
	}
	run := int64(0)
	for run < ra.max && first-run-1 >= 0 && sc.read[first-run-1] {
		run++
	}
	for i := first; i <= last; i++ {
		sc.read[i] = true
	}
	var out []int64
	for i := last + 1; i <= min(last+run, lastChunk); i++ {
		if !sc.launched[i] && !sc.read[i] {
			sc.launched[i] = true
			out = append(out, i)
		}
	}
	return out
}

// stopped says chunk idx was not read ahead after all (no fill slot was
// free), so a later read may launch it.
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
	if cs <= 0 || n <= 0 || off < 0 || off >= m.Size {
		return
	}
	first, last := chunk.Span(off, min(n, m.Size-off), cs)
	c.readAheadAfter(context.WithoutCancel(ctx), bucket, key, m, cs, first, last)
}

// readAheadAfter notes a read of chunks [first, last] of version m and
// fetches the chunks its scan's window covers into the page cache in the
// background.
func (c *Client) readAheadAfter(ctx context.Context, bucket, key string, m Meta, cs, first, last int64) {
	if c.pages == nil || c.ahead == nil || ctx.Value(noAheadKey{}) != nil {
		return
	}
	vk := versionKey(bucket, key, m.ETag)
	ahead := c.ahead.next(vk, first, last, chunk.Count(m.Size, cs)-1)
	for n, i := range ahead {
		pk := pageKey(bucket, key, m.ETag, cs, i)
		if _, ok := c.pages.get(pk); ok || c.filling(pk) {
			continue
		}
		select {
		case c.ahead.slots <- struct{}{}:
		default:
			for _, j := range ahead[n:] { // enough in flight; a later read goes on
				c.ahead.stopped(vk, j)
			}
			return
		}
		go func() {
			defer func() { <-c.ahead.slots }()
			_, _ = c.fetchPage(context.WithoutCancel(ctx), pk, fillAhead, bucket, key, m, cs, i)
		}()
	}
}
