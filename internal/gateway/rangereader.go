package gateway

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/distcache/distcache/internal/client"
)

// rangeReader streams [off, end) of one object version, fetching it in
// pieces aligned to multiples of piece (the cache's chunk size, so that a
// piece is one chunk request), in order. It never fetches past end: a
// small range read is one chunk request, however far the object goes on.
//
// Read-ahead is adaptive, like the kernel's page cache read-ahead. A
// whole object of at most depth pieces (most objects) is fetched whole at
// once. Any other range starts with no piece fetched ahead of the one being
// sent: a reader that asks for a range may stop long before its end
// (ClickHouse asks for the bytes from the first granule it needs to the
// last, or to the end of the column file, and often reads a few hundred
// KiB), and the client's socket buffers take several MiB before it has read
// any, so what GetObject has written says little about what the client
// read. Once rampBytes are sent, each piece the client consumes doubles
// the window of pieces in flight ahead, up to depth: a sequential read
// still reaches depth pieces in flight, and one that stops early costs
// the pieces its socket took, not depth+1. Memory is bounded by depth+1
// pieces, and all readers together by the gateway's read buffers
// (readBuffers): the first window is taken whole, waiting if need be;
// read-ahead past it only takes what is free.
type rangeReader struct {
	ctx    context.Context
	cancel context.CancelFunc
	readAt func(ctx context.Context, p []byte, off int64) (int, error)
	// view, when set, is tried first: the piece as a slice of the cache's
	// RAM page (no buffer, no copy), lent until released; ok false means
	// read it with readAt.
	view func(ctx context.Context, off, n int64) (v client.PageView, ok bool, err error)
	// cached, when set, is tried before view, in line: a piece in the
	// cache's RAM needs no goroutine (on a hit, most pieces).
	cached func(off, n int64) (client.PageView, bool)
	pool   *sync.Pool // of *[]byte with capacity piece
	budget *readBuffers
	credit int64 // bytes taken from budget for pieces not started yet
	piece  int64
	depth  int // the most pieces in flight
	// window is the pieces fetched ahead of the one being sent: 0 until
	// rampBytes are sent, then 1, doubling per piece consumed, up to depth.
	window int
	sent   int64 // bytes of consumed pieces
	ramp   int64 // sent before reading ahead: rampBytes

	next, end int64 // next offset to fetch, end of the range
	queue     []*pieceFetch
	cur       *pieceFetch // being read by the caller
	pos       int         // within cur.data
}

// rampBytes is what a range reader sends before it fetches pieces ahead
// of the client: more than a client's socket buffers usually take before
// it reads (Linux grows a loopback connection's to several MiB), so that
// reading ahead starts when the client is reading, not when its buffers
// are filling.
const rampBytes = 8 << 20

type pieceFetch struct {
	done chan struct{}
	data []byte          // the piece, once done: *buf, or view.Data
	buf  *[]byte         // from the pool; nil for a view
	view client.PageView // a page of the cache, lent
	held int64           // bytes of the read buffers it holds
	err  error
}

func newRangeReader(ctx context.Context, readAt func(context.Context, []byte, int64) (int, error), pool *sync.Pool,
	budget *readBuffers, piece int64, depth int, off, n, size int64) *rangeReader {
	ctx, cancel := context.WithCancel(ctx)
	depth = max(depth, 1)
	// A whole object of at most depth pieces is fetched whole before the
	// status goes out, so an object overwritten meanwhile is retried,
	// never cut off; anything else starts adaptive.
	window := 0
	if off == 0 && n == size && n > 0 && (n-1)/piece+1 <= int64(depth) {
		window = depth
	}
	return &rangeReader{ctx: ctx, cancel: cancel, readAt: readAt, pool: pool, budget: budget, piece: piece, depth: depth,
		window: window, ramp: rampBytes, next: off, end: off + n}
}

// pieceEnd is where the piece starting at lo ends: the next multiple of
// piece, or the end of the range.
func (r *rangeReader) pieceEnd(lo int64) int64 { return min((lo/r.piece+1)*r.piece, r.end) }

// windowBytes is the size of the next window pieces from r.next.
func (r *rangeReader) windowBytes() int64 {
	var n int64
	for i, lo := 0, r.next; i < max(r.window, 1) && lo < r.end; i++ {
		hi := r.pieceEnd(lo)
		n, lo = n+hi-lo, hi
	}
	return n
}

// fill starts fetches until window are in flight or the range is covered,
// as far as the read buffers allow. A reader holding no piece waits for
// its next one; one holding some goes on with those.
func (r *rangeReader) fill() error {
	for (len(r.queue) < r.window || len(r.queue) == 0 && r.cur == nil) && r.next < r.end {
		lo := r.next
		hi := r.pieceEnd(lo)
		switch {
		case r.credit >= hi-lo:
			r.credit -= hi - lo
		case r.budget.tryAcquire(hi - lo):
		case len(r.queue) > 0 || r.cur != nil:
			return nil // a later fill tries again
		default:
			if err := r.budget.acquire(r.ctx, hi-lo); err != nil {
				return err
			}
		}
		r.next = hi
		f := &pieceFetch{done: make(chan struct{}), held: hi - lo}
		r.queue = append(r.queue, f)
		if r.cached != nil {
			if v, ok := r.cached(lo, hi-lo); ok {
				f.data, f.view = v.Data, v
				close(f.done)
				continue
			}
		}
		go func() {
			defer close(f.done)
			if r.view != nil {
				v, ok, err := r.view(r.ctx, lo, hi-lo)
				if ok || err != nil {
					f.data, f.view, f.err = v.Data, v, err
					return
				}
			}
			buf := r.pool.Get().(*[]byte)
			*buf = (*buf)[:hi-lo]
			n, err := r.readAt(r.ctx, *buf, lo)
			if n == len(*buf) && errors.Is(err, io.EOF) {
				err = nil
			}
			if err == nil && n < len(*buf) {
				err = io.ErrUnexpectedEOF
			}
			f.data, f.buf, f.err = *buf, buf, err
		}()
	}
	return nil
}

// prime starts the first fetches (the whole range when it fits the
// read-ahead, else the first piece) and waits for them, returning the
// first error. A GetObject primes before it sends its status, so that a
// version that vanished (or an unavailable cache) there, which is all of
// most objects, is still a clean error or a retry, not a response cut off.
// The first window's read buffers are taken at once (waiting for them if
// need be), so that no reader waits while holding part of them.
func (r *rangeReader) prime() error {
	first := r.windowBytes()
	if err := r.budget.acquire(r.ctx, first); err != nil {
		return err
	}
	r.credit = first
	if err := r.fill(); err != nil {
		return err
	}
	for _, f := range r.queue {
		if err := r.await(f); err != nil {
			return err
		}
	}
	return nil
}

// await waits for f's fetch and returns its error, or the reader's
// context's if that ends first.
func (r *rangeReader) await(f *pieceFetch) error {
	select {
	case <-f.done:
	case <-r.ctx.Done():
		return r.ctx.Err()
	}
	return f.err
}

// advance makes r.cur a piece with unread bytes, waiting for its fetch; at
// the end of the range it returns io.EOF.
func (r *rangeReader) advance() error {
	for r.cur == nil || r.pos == len(r.cur.data) {
		if r.cur != nil {
			r.sent += int64(len(r.cur.data))
			r.release(r.cur) // consumed; its fetch has finished
			r.cur = nil
			if r.sent >= r.ramp {
				r.window = min(max(2*r.window, 1), r.depth)
			}
		}
		if err := r.fill(); err != nil {
			return err
		}
		if len(r.queue) == 0 {
			return io.EOF
		}
		f := r.queue[0]
		if err := r.await(f); err != nil {
			return err
		}
		r.queue = r.queue[1:]
		r.cur, r.pos = f, 0
		if err := r.fill(); err != nil {
			return err
		}
	}
	return nil
}

func (r *rangeReader) Read(p []byte) (int, error) {
	if err := r.advance(); err != nil {
		return 0, err
	}
	n := copy(p, r.cur.data[r.pos:])
	r.pos += n
	return n, nil
}

// WriteTo writes the rest of the range to w straight from the fetched
// pieces, one Write per piece: no copy into an intermediate buffer, and
// for whole chunks one large write instead of one per 64 KiB (io.Copy
// uses it).
func (r *rangeReader) WriteTo(w io.Writer) (int64, error) {
	var total int64
	for {
		if err := r.advance(); err != nil {
			if err == io.EOF {
				return total, nil
			}
			return total, err
		}
		n, err := w.Write(r.cur.data[r.pos:])
		r.pos += n
		total += int64(n)
		if err != nil {
			return total, err
		}
		if r.pos < len(r.cur.data) {
			return total, io.ErrShortWrite
		}
	}
}

// Close cancels the fetches in flight and releases their pieces once they
// are done (a fetch may still be writing into its buffer).
func (r *rangeReader) Close() error {
	r.cancel()
	r.budget.release(r.credit)
	r.credit = 0
	if r.cur != nil {
		r.release(r.cur)
		r.cur = nil
	}
	for _, f := range r.queue {
		go func() {
			<-f.done
			r.release(f)
		}()
	}
	r.queue = nil
	return nil
}

// release gives a consumed piece's buffer back to the pool, or its page
// back to the cache.
func (r *rangeReader) release(f *pieceFetch) {
	if f.buf != nil {
		r.pool.Put(f.buf)
	}
	f.view.Release()
	r.budget.release(f.held)
}
