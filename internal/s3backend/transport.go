package s3backend

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// limitedClient is the HTTP client under every S3 client of a Backend. It
// applies the node-wide cap on in-flight S3 requests and the per-attempt
// timeout. Both act on each HTTP attempt, so a retry waits for a slot again
// and the SDK's backoff sleeps hold none.
//
// A slot is held from sending the request until the response body is closed
// (or the attempt fails): a GET still streaming its body is still in flight.
type limitedClient struct {
	http    *http.Client
	slots   chan struct{}
	timeout time.Duration
}

func (c *limitedClient) Do(req *http.Request) (*http.Response, error) {
	parent := req.Context()
	select {
	case c.slots <- struct{}{}:
	case <-parent.Done():
		return nil, context.Cause(parent)
	}

	// Until the response headers arrive the attempt has c.timeout in all;
	// after that the timer restarts on every read of the body that makes
	// progress, so a large body may take longer but a stalled one may not.
	ctx, cancel := context.WithCancelCause(parent)
	timer := time.AfterFunc(c.timeout, func() { cancel(attemptTimeoutError{c.timeout}) })
	var once sync.Once
	done := func() {
		once.Do(func() {
			timer.Stop()
			cancel(nil)
			<-c.slots
		})
	}

	resp, err := c.http.Do(req.WithContext(ctx))
	if err != nil {
		done()
		return nil, err
	}
	resp.Body = &limitedBody{rc: resp.Body, timer: timer, timeout: c.timeout, done: done}
	return resp, nil
}

type limitedBody struct {
	rc      io.ReadCloser
	timer   *time.Timer
	timeout time.Duration
	closed  atomic.Bool
	done    func()
}

func (b *limitedBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if n > 0 && !b.closed.Load() {
		b.timer.Reset(b.timeout)
	}
	return n, err
}

func (b *limitedBody) Close() error {
	b.closed.Store(true)
	err := b.rc.Close()
	b.done()
	return err
}

// attemptTimeoutError ends an attempt that took longer than RequestTimeout.
// It is a timeout in the net.Error sense, so the SDK retries it and
// classification reports ErrUnavailable.
type attemptTimeoutError struct{ d time.Duration }

func (e attemptTimeoutError) Error() string {
	return fmt.Sprintf("s3 request attempt timed out after %s", e.d)
}
func (attemptTimeoutError) Timeout() bool   { return true }
func (attemptTimeoutError) Temporary() bool { return true }
