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

// next records a read of chunk idx (of last+1) and returns the chunks to
// fetch ahead of it, marked as launched.
func (ra *readAhead) next(vk string, idx, last int64) []int64 {
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
	sc.read[idx] = true
	run := int64(0)
	for run < ra.max && idx-run-1 >= 0 && sc.read[idx-run-1] {
		run++
	}
	var out []int64
	for i := idx + 1; i <= min(idx+run, last); i++ {
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

// readAheadAfter notes a read of chunk idx of version m and fetches the
// chunks its scan's window covers into the page cache in the background.
func (c *Client) readAheadAfter(ctx context.Context, bucket, key string, m Meta, cs, idx int64) {
	if c.pages == nil || c.ahead == nil {
		return
	}
	last := chunk.Count(m.Size, cs) - 1
	vk := versionKey(bucket, key, m.ETag)
	ahead := c.ahead.next(vk, idx, last)
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
