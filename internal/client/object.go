package client

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/distcache/distcache/internal/chunk"
)

// Object is one version of an object, opened for reading: an io.ReaderAt
// and an io.ReadSeeker. Sequential Reads fetch ahead: while one chunk is
// read, the next Parallelism-1 chunks' worth are already being fetched
// (whole chunks, or pages through the page cache when there is one), so a
// sequential scan runs at the speed of Parallelism parallel requests. Read
// and Seek must not be called concurrently (ReadAt may be, from any
// goroutine). Close the Object to cancel the read-ahead.
type Object struct {
	c           *Client
	ctx         context.Context // bounds every read; canceled by Close
	cancel      context.CancelFunc
	bucket, key string
	meta        Meta
	chunkSize   int64
	unit        int64 // what a Read fetches: a chunk, or a page (pageSize)
	window      int64 // units fetched ahead of a sequential Read

	mu    sync.Mutex
	pos   int64
	seq   bool // no Seek moved the position since the last Read
	ahead map[int64]*fetch
}

// fetch is one unit being read ahead.
type fetch struct {
	done   chan struct{}
	pg     *page // held until the fetch is dropped
	err    error
	cancel context.CancelFunc
}

// Open stats the object and returns a reader of the version it found. ctx
// bounds the Object's reads as well: canceling it fails them.
func (c *Client) Open(ctx context.Context, bucket, key string) (*Object, error) {
	m, err := c.Stat(ctx, bucket, key)
	if err != nil {
		return nil, err
	}
	return c.OpenVersion(ctx, bucket, key, m)
}

// OpenVersion is Open for a version already known (from Stat): every read
// is pinned to m.ETag and fails with ErrChanged once it is gone.
func (c *Client) OpenVersion(ctx context.Context, bucket, key string, m Meta) (*Object, error) {
	if err := checkObjectName(opGetChunk, bucket, key); err != nil {
		return nil, err
	}
	cs, err := c.chunkSizeFor(ctx, bucket, key)
	if err != nil {
		return nil, err
	}
	octx, cancel := context.WithCancel(ctx)
	return &Object{c: c, ctx: octx, cancel: cancel, bucket: bucket, key: key, meta: m, chunkSize: cs,
		unit: c.pageSize(cs), window: c.aheadWindow(cs), seq: true, ahead: map[int64]*fetch{}}, nil
}

// Meta is the version the Object reads.
func (o *Object) Meta() Meta { return o.meta }

// Size is the object's size in bytes.
func (o *Object) Size() int64 { return o.meta.Size }

// ReadAt reads the version at off (Client.ReadAt). It is safe for
// concurrent use and does not move the Read position.
func (o *Object) ReadAt(p []byte, off int64) (int, error) {
	return o.c.ReadAt(o.ctx, o.bucket, o.key, o.meta, p, off)
}

// Read reads from the current position, at most to the end of the chunk
// (with a page cache, the page) it is in.
func (o *Object) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	o.mu.Lock()
	if o.ahead == nil {
		o.mu.Unlock()
		return 0, errors.New("client: read of a closed Object")
	}
	pos := o.pos
	if pos >= o.meta.Size {
		o.mu.Unlock()
		return 0, io.EOF
	}
	idx := pos / o.unit
	window := int64(1)
	if o.seq {
		window = o.window
	}
	o.forgetOutside(idx, idx+o.window)
	last := chunk.Count(o.meta.Size, o.unit) - 1
	for i := idx; i < idx+window && i <= last; i++ {
		if o.ahead[i] == nil {
			o.launch(i)
		}
	}
	f := o.ahead[idx]
	o.mu.Unlock()

	select {
	case <-f.done:
	case <-o.ctx.Done():
		return 0, o.ctx.Err()
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ahead[idx] != f {
		// Closed meanwhile: f's page is being released.
		return 0, errors.New("client: read of a closed Object")
	}
	if f.err != nil {
		delete(o.ahead, idx) // the next Read tries again
		return 0, f.err
	}
	n := copy(p, f.pg.data[pos-idx*o.unit:])
	o.pos = pos + int64(n)
	o.seq = true
	if o.pos >= min((idx+1)*o.unit, o.meta.Size) {
		delete(o.ahead, idx) // consumed
		f.pg.release()
	}
	return n, nil
}

// launch starts reading unit idx ahead. o.mu is held.
func (o *Object) launch(idx int64) {
	ctx, cancel := context.WithCancel(o.ctx)
	f := &fetch{done: make(chan struct{}), cancel: cancel}
	o.ahead[idx] = f
	go func() {
		defer close(f.done)
		defer cancel()
		f.pg, f.err = o.c.wholePage(ctx, o.bucket, o.key, o.meta, o.chunkSize, idx)
	}()
}

// forgetOutside cancels and drops fetches of units outside [lo, hi),
// releasing their pages once they are done. o.mu is held.
func (o *Object) forgetOutside(lo, hi int64) {
	for i, f := range o.ahead {
		if i < lo || i >= hi {
			f.cancel()
			delete(o.ahead, i)
			go func() {
				<-f.done
				if f.pg != nil {
					f.pg.release()
				}
			}()
		}
	}
}

// Seek sets the position of the next Read (io.Seeker). Seeking past the
// end is allowed; Read then returns io.EOF.
func (o *Object) Seek(offset int64, whence int) (int64, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var abs int64
	switch whence {
	case io.SeekStart:
		abs = offset
	case io.SeekCurrent:
		abs = o.pos + offset
	case io.SeekEnd:
		abs = o.meta.Size + offset
	default:
		return 0, errors.New("client: Seek: invalid whence")
	}
	if abs < 0 {
		return 0, errors.New("client: Seek: negative position")
	}
	if abs != o.pos {
		o.seq = false
	}
	o.pos = abs
	return abs, nil
}

// Close cancels the read-ahead and fails later reads.
func (o *Object) Close() error {
	o.cancel()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.forgetOutside(0, 0)
	o.ahead = nil
	return nil
}
