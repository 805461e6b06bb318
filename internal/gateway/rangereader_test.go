package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/distcache/distcache/internal/testutil"
)

// fakeObject serves ReadAt from memory and records what was asked.
type fakeObject struct {
	data     []byte
	mu       sync.Mutex
	asked    [][2]int64 // [off, end)
	inflight atomic.Int32
	maxIn    atomic.Int32
	failAt   int64 // a read covering this offset fails (-1: never)
}

func (f *fakeObject) readAt(ctx context.Context, p []byte, off int64) (int, error) {
	n := f.inflight.Add(1)
	defer f.inflight.Add(-1)
	for {
		m := f.maxIn.Load()
		if n <= m || f.maxIn.CompareAndSwap(m, n) {
			break
		}
	}
	f.mu.Lock()
	f.asked = append(f.asked, [2]int64{off, off + int64(len(p))})
	f.mu.Unlock()
	time.Sleep(time.Millisecond) // let fetches overlap
	if f.failAt >= off && f.failAt < off+int64(len(p)) {
		return 0, errors.New("boom")
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if off >= int64(len(f.data)) {
		return 0, io.EOF
	}
	n2 := copy(p, f.data[off:])
	if n2 < len(p) {
		return n2, io.EOF
	}
	return n2, nil
}

// piecePool hands out piece-sized buffers, as the gateway's pool does.
func piecePool(piece int) *sync.Pool {
	return &sync.Pool{New: func() any { b := make([]byte, piece); return &b }}
}

func TestRangeReader(t *testing.T) {
	data := testutil.RandomBytes(rand.New(rand.NewPCG(1, 2)), 10_000)
	const piece = 1000
	pool := piecePool(piece)
	for _, tt := range []struct{ off, n int64 }{{0, 10_000}, {0, 1}, {999, 2}, {1500, 4000}, {9999, 1}, {3000, 1000}} {
		f := &fakeObject{data: data, failAt: -1}
		rr := newRangeReader(context.Background(), f.readAt, pool, plenty(), piece, 3, tt.off, tt.n, int64(len(data)))
		got, err := io.ReadAll(rr)
		rr.Close()
		if err != nil || !bytes.Equal(got, data[tt.off:tt.off+tt.n]) {
			t.Fatalf("[%d,+%d): %d bytes, %v", tt.off, tt.n, len(got), err)
		}
		var covered int64
		for _, a := range f.asked {
			if a[0] < tt.off || a[1] > tt.off+tt.n {
				t.Errorf("[%d,+%d): fetched [%d,%d), outside the range", tt.off, tt.n, a[0], a[1])
			}
			if a[0]/piece != (a[1]-1)/piece {
				t.Errorf("[%d,+%d): fetch [%d,%d) spans two pieces", tt.off, tt.n, a[0], a[1])
			}
			covered += a[1] - a[0]
		}
		if covered != tt.n {
			t.Errorf("[%d,+%d): fetched %d bytes", tt.off, tt.n, covered)
		}
		if f.maxIn.Load() > 3 {
			t.Errorf("[%d,+%d): %d fetches in flight, depth is 3", tt.off, tt.n, f.maxIn.Load())
		}
	}

	// prime waits for the first piece and reports its error.
	f := &fakeObject{data: data, failAt: 500}
	rr := newRangeReader(context.Background(), f.readAt, pool, plenty(), piece, 3, 0, 10_000, int64(len(data)))
	if err := rr.prime(); err == nil || len(f.asked) != 1 {
		t.Errorf("prime: %v after %d fetches; want the first piece's error", err, len(f.asked))
	}
	rr.Close()
	// A whole object that fits the read-ahead is primed whole: an error in
	// its last piece comes before the status, not after.
	f = &fakeObject{data: data[:3000], failAt: 2500}
	rr = newRangeReader(context.Background(), f.readAt, pool, plenty(), piece, 3, 0, 3000, 3000)
	if err := rr.prime(); err == nil || len(f.asked) != 3 {
		t.Errorf("prime of a 3-piece object: %v after %d fetches; want the third piece's error", err, len(f.asked))
	}
	rr.Close()
	// A part of an object as long is not: its reader may stop early.
	f = &fakeObject{data: data, failAt: -1}
	rr = newRangeReader(context.Background(), f.readAt, pool, plenty(), piece, 3, 0, 3000, int64(len(data)))
	if err := rr.prime(); err != nil || len(f.asked) != 1 {
		t.Errorf("prime of 3 pieces of a 10-piece object: %v after %d fetches; want the first piece only", err, len(f.asked))
	}
	rr.Close()
	f = &fakeObject{data: data, failAt: -1}
	rr = newRangeReader(context.Background(), f.readAt, pool, plenty(), piece, 3, 0, 10_000, int64(len(data)))
	if err := rr.prime(); err != nil {
		t.Fatal(err)
	}
	if got, err := io.ReadAll(rr); err != nil || !bytes.Equal(got, data) {
		t.Errorf("read after prime: %d bytes, %v", len(got), err)
	}
	rr.Close()

	f = &fakeObject{data: data, failAt: 4500}
	rr = newRangeReader(context.Background(), f.readAt, pool, plenty(), piece, 3, 0, 10_000, int64(len(data)))
	got, err := io.ReadAll(rr)
	rr.Close()
	if err == nil || len(got) != 4000 || !bytes.Equal(got, data[:4000]) {
		t.Errorf("failing piece: read %d bytes, err %v; want the 4000 before it, then the error", len(got), err)
	}
}

// countingWriter records each Write; failAfter > 0 fails the Write that
// would take the total past it.
type countingWriter struct {
	bytes.Buffer
	writes    int
	failAfter int
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.writes++
	if w.failAfter > 0 && w.Len()+len(p) > w.failAfter {
		n, _ := w.Buffer.Write(p[:w.failAfter-w.Len()])
		return n, errors.New("client went away")
	}
	return w.Buffer.Write(p)
}

// TestRangeReaderWriteTo: GetObject streams with WriteTo, one Write per
// piece straight from the piece buffer; it must deliver exactly the
// bytes Read would, continue after a partial Read, and stop at a failed
// fetch or a failed write.
func TestRangeReaderWriteTo(t *testing.T) {
	data := testutil.RandomBytes(rand.New(rand.NewPCG(3, 4)), 10_000)
	const piece = 1000
	pool := piecePool(piece)
	for _, tt := range []struct {
		off, n int64
		writes int
	}{{0, 10_000, 10}, {0, 1, 1}, {999, 2, 2}, {1500, 4000, 5}, {9999, 1, 1}, {3000, 1000, 1}} {
		f := &fakeObject{data: data, failAt: -1}
		rr := newRangeReader(context.Background(), f.readAt, pool, plenty(), piece, 3, tt.off, tt.n, int64(len(data)))
		var w countingWriter
		n, err := rr.WriteTo(&w)
		rr.Close()
		if err != nil || n != tt.n || !bytes.Equal(w.Bytes(), data[tt.off:tt.off+tt.n]) {
			t.Fatalf("[%d,+%d): wrote %d (%d bytes), %v", tt.off, tt.n, n, w.Len(), err)
		}
		if w.writes != tt.writes {
			t.Errorf("[%d,+%d): %d writes, want one per piece (%d)", tt.off, tt.n, w.writes, tt.writes)
		}
	}

	// After a partial Read, WriteTo sends the rest.
	f := &fakeObject{data: data, failAt: -1}
	rr := newRangeReader(context.Background(), f.readAt, pool, plenty(), piece, 3, 0, 10_000, int64(len(data)))
	head := make([]byte, 1500)
	if _, err := io.ReadFull(rr, head); err != nil {
		t.Fatal(err)
	}
	var w countingWriter
	if n, err := rr.WriteTo(&w); err != nil || n != 8500 || !bytes.Equal(append(head, w.Bytes()...), data) {
		t.Errorf("WriteTo after Read: %d bytes, %v", n, err)
	}
	rr.Close()

	// A failed fetch: the bytes before it, then its error.
	f = &fakeObject{data: data, failAt: 4500}
	rr = newRangeReader(context.Background(), f.readAt, pool, plenty(), piece, 3, 0, 10_000, int64(len(data)))
	w = countingWriter{}
	n, err := rr.WriteTo(&w)
	rr.Close()
	if err == nil || n != 4000 || !bytes.Equal(w.Bytes(), data[:4000]) {
		t.Errorf("failing piece: wrote %d, err %v; want the 4000 bytes before it, then the error", n, err)
	}

	// A failed write: its error, counted bytes included.
	f = &fakeObject{data: data, failAt: -1}
	rr = newRangeReader(context.Background(), f.readAt, pool, plenty(), piece, 3, 0, 10_000, int64(len(data)))
	w = countingWriter{failAfter: 2500}
	n, err = rr.WriteTo(&w)
	rr.Close()
	if err == nil || err.Error() != "client went away" || n != 2500 {
		t.Errorf("failing writer: wrote %d, err %v", n, err)
	}
}

// fetchedPieces is how many pieces rr has started to fetch since off.
func fetchedPieces(rr *rangeReader, off int64) int64 {
	if rr.next == off {
		return 0
	}
	return (rr.next-1)/rr.piece - off/rr.piece + 1
}

// TestRangeReaderOpenEndedShortRead: ClickHouse asks for most of a column
// file and reads only its start before closing. That must cost the first
// piece, not ReadAhead pieces (it cost 9 before the read-ahead was
// adaptive, 2 before it waited for rampBytes to be sent).
func TestRangeReaderOpenEndedShortRead(t *testing.T) {
	const piece, pieces, depth = 256 << 10, 32, 8
	data := make([]byte, piece*pieces)
	pool := piecePool(piece)
	for _, off := range []int64{0, 300_000} {
		n := int64(len(data)) - off
		// As GetObject streams: prime, then WriteTo a client that goes
		// away after 100 KiB.
		f := &fakeObject{data: data, failAt: -1}
		rr := newRangeReader(context.Background(), f.readAt, pool, plenty(), piece, depth, off, n, int64(len(data)))
		if err := rr.prime(); err != nil {
			t.Fatal(err)
		}
		w := countingWriter{failAfter: 100 << 10}
		if _, err := rr.WriteTo(&w); err == nil {
			t.Fatal("WriteTo to a client that went away succeeded")
		}
		if got := fetchedPieces(rr, off); got != 1 {
			t.Errorf("off %d: client read 100 KiB and left; %d pieces fetched, want 1", off, got)
		}
		rr.Close()

		// With Read, the same.
		f = &fakeObject{data: data, failAt: -1}
		rr = newRangeReader(context.Background(), f.readAt, pool, plenty(), piece, depth, off, n, int64(len(data)))
		if err := rr.prime(); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 100<<10)
		if _, err := io.ReadFull(rr, buf); err != nil || !bytes.Equal(buf, data[off:off+int64(len(buf))]) {
			t.Fatalf("off %d: read: %v", off, err)
		}
		if got := fetchedPieces(rr, off); got != 1 {
			t.Errorf("off %d: client read 100 KiB; %d pieces fetched, want 1", off, got)
		}
		rr.Close()
	}

	// A client whose buffers take 1 MiB (four pieces) before it stops
	// costs those and the fifth being written: nothing is fetched ahead
	// before rampBytes are sent.
	f := &fakeObject{data: data, failAt: -1}
	rr := newRangeReader(context.Background(), f.readAt, pool, plenty(), piece, depth, 0, int64(len(data)), int64(len(data)))
	if err := rr.prime(); err != nil {
		t.Fatal(err)
	}
	w := countingWriter{failAfter: 1 << 20}
	if _, err := rr.WriteTo(&w); err == nil {
		t.Fatal("WriteTo to a client that went away succeeded")
	}
	if got := fetchedPieces(rr, 0); got != 5 {
		t.Errorf("client took 4 pieces and left; %d pieces fetched, want 5", got)
	}
	rr.Close()
}

// TestRangeReaderSequentialReachesDepth: a client that keeps reading gets
// the full read-ahead: depth fetches at the same time. Fetches from the
// sixth piece on (the first two pieces are sent before reading ahead
// starts, then the window doubles per piece consumed: 1, 2, 4, 8) hold
// until depth are in flight at once; if that never happens they give up
// after a while and the test fails.
func TestRangeReaderSequentialReachesDepth(t *testing.T) {
	const piece, pieces, depth, gated = 1000, 20, 8, 5
	data := make([]byte, piece*pieces)
	for i := range data {
		data[i] = byte(i / 7)
	}
	pool := piecePool(piece)
	for _, viaWriteTo := range []bool{false, true} {
		var inflight, maxIn atomic.Int32
		full := make(chan struct{})
		var once sync.Once
		readAt := func(ctx context.Context, p []byte, off int64) (int, error) {
			n := inflight.Add(1)
			defer inflight.Add(-1)
			for {
				m := maxIn.Load()
				if n <= m || maxIn.CompareAndSwap(m, n) {
					break
				}
			}
			if n >= depth {
				once.Do(func() { close(full) })
			}
			if off/piece >= gated {
				select {
				case <-full:
				case <-ctx.Done():
					return 0, ctx.Err()
				case <-time.After(30 * time.Second): // a failure, not a pass: maxIn stays below depth
				}
			}
			return copy(p, data[off:]), nil
		}
		rr := newRangeReader(context.Background(), readAt, pool, plenty(), piece, depth, 0, int64(len(data)), int64(len(data)))
		rr.ramp = 2 * piece
		if err := rr.prime(); err != nil {
			t.Fatal(err)
		}
		var got []byte
		var err error
		if viaWriteTo {
			var w countingWriter
			_, err = rr.WriteTo(&w)
			got = w.Bytes()
		} else {
			got, err = io.ReadAll(rr)
		}
		rr.Close()
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("read %d bytes, %v", len(got), err)
		}
		if m := maxIn.Load(); m != depth {
			t.Errorf("writeTo %v: at most %d fetches in flight at once, want the read-ahead depth %d", viaWriteTo, m, depth)
		}
	}
}

// plenty is a read-buffer budget no test reader reaches.
func plenty() *readBuffers { return newReadBuffers(1<<40, NewMetrics(nil)) }

// Many readers share the gateway's read buffers: together they never hold
// more than its budget, readers that hold nothing wait for it, and every
// reader still gets its bytes.
func TestReadBuffersBoundAllReaders(t *testing.T) {
	data := make([]byte, 10_000)
	for i := range data {
		data[i] = byte(i * 7)
	}
	const piece, depth = 1000, 3
	pool := piecePool(piece)
	m := NewMetrics(nil)
	budget := newReadBuffers(depth*piece, m) // one reader's whole window
	f := &fakeObject{data: data, failAt: -1}
	// Bytes being fetched by every reader at once, and the most seen.
	var inflight, most atomic.Int64
	readAt := func(ctx context.Context, p []byte, off int64) (int, error) {
		n := inflight.Add(int64(len(p)))
		defer inflight.Add(-int64(len(p)))
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		return f.readAt(ctx, p, off)
	}
	ranges := []struct{ off, n int64 }{{0, 10_000}, {0, 3000}, {1500, 8000}, {9999, 1}, {0, 1}}
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for i := range 16 {
		wg.Go(func() {
			rg := ranges[i%len(ranges)]
			rr := newRangeReader(context.Background(), readAt, pool, budget, piece, depth, rg.off, rg.n, int64(len(data)))
			defer rr.Close()
			if err := rr.prime(); err != nil {
				errs <- err
				return
			}
			var w bytes.Buffer
			if _, err := rr.WriteTo(&w); err != nil || !bytes.Equal(w.Bytes(), data[rg.off:rg.off+rg.n]) {
				errs <- fmt.Errorf("reader %d [%d,+%d): %d bytes, %v", i, rg.off, rg.n, w.Len(), err)
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("readers stuck waiting for read buffers")
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := most.Load(); n > depth*piece {
		t.Errorf("%d bytes fetched at once; the budget is %d", n, depth*piece)
	}
	if most.Load() <= piece {
		t.Errorf("at most %d bytes fetched at once: readers never overlapped", most.Load())
	}
	if w := promtestutil.ToFloat64(m.readBufferWaits); w == 0 {
		t.Error("no reader waited for read buffers, 16 readers sharing 3 pieces")
	}
	if held := promtestutil.ToFloat64(m.readBuffer); held != 0 {
		t.Errorf("%v bytes of read buffers still held after every reader closed", held)
	}
}

// A reader waiting for read buffers gives up with its context, and one
// gets them as soon as the holder lets go.
func TestReadBuffersWaitEndsWithTheHolder(t *testing.T) {
	data := make([]byte, 10_000)
	const piece, depth = 1000, 3
	pool := piecePool(piece)
	budget := newReadBuffers(depth*piece, NewMetrics(nil))
	f := &fakeObject{data: data, failAt: -1}
	holder := newRangeReader(context.Background(), f.readAt, pool, budget, piece, depth, 0, 3000, 3000)
	if err := holder.prime(); err != nil { // holds all three pieces, unsent
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	waiter := newRangeReader(ctx, f.readAt, pool, budget, piece, depth, 0, 10_000, int64(len(data)))
	if err := waiter.prime(); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("prime with every read buffer held: %v, want the context's deadline", err)
	}
	waiter.Close()

	next := newRangeReader(context.Background(), f.readAt, pool, budget, piece, depth, 0, 10_000, int64(len(data)))
	primed := make(chan error, 1)
	go func() { primed <- next.prime() }()
	select {
	case err := <-primed:
		t.Fatalf("primed (%v) while another reader held every read buffer", err)
	case <-time.After(20 * time.Millisecond):
	}
	holder.Close()
	select {
	case err := <-primed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("still waiting after the holder closed")
	}
	if got, err := io.ReadAll(next); err != nil || len(got) != len(data) {
		t.Errorf("read %d bytes, %v", len(got), err)
	}
	next.Close()
}
