package scaleout

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distcache/distcache/internal/client"
)

// readers read the dataset in a loop through one client, checking every
// byte. Read number s reads object s mod len(data), so each reader keeps
// going round the whole dataset. A lap (startLap) is complete when every
// object has been read whole and byte-exact by a read that started after the
// lap began.
type readers struct {
	c    *client.Client
	data [][]byte

	seq   atomic.Int64 // reads started
	bytes atomic.Int64 // bytes received, counted as they arrive
	reads atomic.Int64 // reads finished, failed or not
	// failed reads returned an error; wrong ones returned other bytes.
	failed, wrong atomic.Int64

	mu       sync.Mutex
	etags    []string // as the client saw them (chunk placement)
	firstErr error
	lapFrom  int64 // reads numbered from here on count for the lap
	lapSeen  []bool
	lapLeft  int
	lapDone  chan struct{}
	onLap    func()
}

func newReaders(c *client.Client, data [][]byte) *readers {
	return &readers{c: c, data: data, etags: make([]string, len(data)), lapFrom: math.MaxInt64}
}

// startLap begins a lap with the next read to start; onDone runs (under the
// readers' lock, once) when the lap is complete, then the channel closes.
func (r *readers) startLap(onDone func()) <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lapFrom = r.seq.Load()
	r.lapSeen = make([]bool, len(r.data))
	r.lapLeft = len(r.data)
	r.lapDone = make(chan struct{})
	r.onLap = onDone
	return r.lapDone
}

// run reads until stop is closed; a read in progress is finished.
func (r *readers) run(ctx context.Context, stop <-chan struct{}) {
	buf := make([]byte, len(r.data[0]))
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		default:
		}
		s := r.seq.Add(1) - 1
		i := int(s % int64(len(r.data)))
		err := r.read(ctx, i, buf)
		r.reads.Add(1)
		if err != nil {
			r.fail(err)
			continue
		}
		r.covered(s, i)
	}
}

// read reads object i whole into buf and compares it with the dataset.
func (r *readers) read(ctx context.Context, i int, buf []byte) error {
	obj, err := r.c.Open(ctx, bucket, objectKey(i))
	if err != nil {
		r.failed.Add(1)
		return err
	}
	defer obj.Close()
	want := r.data[i]
	if obj.Size() != int64(len(want)) {
		r.wrong.Add(1)
		return fmt.Errorf("%s: size %d, want %d", objectKey(i), obj.Size(), len(want))
	}
	buf = buf[:len(want)]
	for off := 0; off < len(buf); {
		n, err := obj.Read(buf[off:])
		off += n
		r.bytes.Add(int64(n))
		if err == io.EOF && off == len(buf) {
			break
		}
		if err != nil {
			r.failed.Add(1)
			return fmt.Errorf("%s at %d: %w", objectKey(i), off, err)
		}
	}
	if !bytes.Equal(buf, want) {
		r.wrong.Add(1)
		return fmt.Errorf("%s: bytes differ from what was uploaded", objectKey(i))
	}
	r.mu.Lock()
	r.etags[i] = obj.Meta().ETag
	r.mu.Unlock()
	return nil
}

func (r *readers) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.firstErr == nil {
		r.firstErr = err
	}
}

func (r *readers) covered(s int64, i int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s < r.lapFrom || r.lapSeen[i] {
		return
	}
	r.lapSeen[i] = true
	if r.lapLeft--; r.lapLeft == 0 {
		r.onLap()
		close(r.lapDone)
	}
}

// lap runs n readers until a lap is complete, and stops them.
func (r *readers) lap(ctx context.Context, n int, timeout time.Duration) error {
	done := r.startLap(func() {})
	stop := r.start(ctx, n)
	defer stop()
	return wait(ctx, done, timeout, "a whole lap of the dataset")
}

// start runs n readers; the function returned stops them and waits.
func (r *readers) start(ctx context.Context, n int) (stop func()) {
	ch := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.run(ctx, ch)
		}()
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			close(ch)
			wg.Wait()
		})
	}
}

func wait(ctx context.Context, done <-chan struct{}, timeout time.Duration, what string) error {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return fmt.Errorf("no %s within %s", what, timeout)
	}
}
