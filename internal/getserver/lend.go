package getserver

import (
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// A request that is not a read but whose end is known (a PUT or POST with
// a Content-Length, a GET with a body or Expect) is lent to net/http: a
// server of the Server's own, with Fallback's settings and handler, serves
// the connection for that one request and gives it back. So a connection
// that carried a write serves its next reads here again. net/http reads
// the request's bytes and no more. Once it is done with the request and
// would serve another (it reports the connection idle, http.StateIdle),
// its read of the next request is told the connection ended (io.EOF), and
// the Close that follows hands the connection back. A connection net/http
// closes without going idle (a Connection: close, a body it would not
// read, a panic) is closed. Idle is the sign, not a read past the
// request: net/http's background read of a drained body comes after the
// handler too, and on a connection it then closes.

// newLender is the server lent connections are served by.
func newLender(fallback *http.Server) *http.Server {
	h := fallback.Handler
	if h == nil {
		h = http.DefaultServeMux
	}
	return &http.Server{
		Handler: h,
		ConnState: func(c net.Conn, state http.ConnState) {
			if l, ok := c.(*lentConn); ok && state == http.StateIdle {
				l.goIdle()
			}
		},
		ReadTimeout: fallback.ReadTimeout, ReadHeaderTimeout: fallback.ReadHeaderTimeout,
		WriteTimeout: fallback.WriteTimeout, IdleTimeout: fallback.IdleTimeout,
		MaxHeaderBytes: fallback.MaxHeaderBytes, ErrorLog: fallback.ErrorLog,
	}
}

// lentConn is a connection lent for one request of left bytes.
type lentConn struct {
	c    *conn
	left int64

	mu      sync.Mutex
	cond    *sync.Cond
	aborted bool // a read deadline in the past was set: net/http stops its watch
	idle    bool // net/http is done with the request and would serve another
	done    chan bool
	once    sync.Once
}

func newLentConn(c *conn, n int64) *lentConn {
	l := &lentConn{c: c, left: n, done: make(chan bool, 1)}
	l.cond = sync.NewCond(&l.mu)
	return l
}

// Read reads the request's bytes. Past them it is either net/http's watch
// of the connection (its background read, started during the handler or
// when it drains the body after it), which waits until net/http stops it
// with a deadline in the past, or, once the connection is idle, net/http's
// wait for the next request: that request is not net/http's to read
// (io.EOF).
func (l *lentConn) Read(p []byte) (int, error) {
	if l.left > 0 {
		if int64(len(p)) > l.left {
			p = p[:l.left]
		}
		n, err := l.c.br.Read(p)
		l.left -= int64(n)
		return n, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for !l.aborted && !l.idle {
		l.cond.Wait()
	}
	if l.aborted {
		l.aborted = false
		return 0, os.ErrDeadlineExceeded
	}
	return 0, io.EOF
}

// goIdle records that net/http would serve another request.
func (l *lentConn) goIdle() {
	l.mu.Lock()
	l.idle = true
	l.cond.Broadcast()
	l.mu.Unlock()
}

func (l *lentConn) SetReadDeadline(t time.Time) error {
	if !t.IsZero() && t.Before(time.Now()) {
		l.mu.Lock()
		l.aborted = true
		l.cond.Broadcast()
		l.mu.Unlock()
		return nil
	}
	return l.c.rwc.SetReadDeadline(t)
}

func (l *lentConn) SetDeadline(t time.Time) error {
	_ = l.SetWriteDeadline(t)
	return l.SetReadDeadline(t)
}

func (l *lentConn) Write(p []byte) (int, error)        { return l.c.rwc.Write(p) }
func (l *lentConn) SetWriteDeadline(t time.Time) error { return l.c.rwc.SetWriteDeadline(t) }
func (l *lentConn) LocalAddr() net.Addr                { return l.c.rwc.LocalAddr() }
func (l *lentConn) RemoteAddr() net.Addr               { return l.c.rwc.RemoteAddr() }

// CloseWrite half-closes the connection: it is not given back.
func (l *lentConn) CloseWrite() error {
	if cw, ok := l.c.rwc.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// Close gives the connection back: reusable if net/http went idle on it
// (it would have served another request).
func (l *lentConn) Close() error {
	l.once.Do(func() {
		l.mu.Lock()
		idle := l.idle
		l.mu.Unlock()
		l.done <- idle
	})
	return nil
}

// lend has the lender serve the next n bytes of c (one request) and
// reports whether c may serve on.
func (c *conn) lend(n int64) bool {
	l := newLentConn(c, n)
	if !c.s.lends.hand(l) {
		return false
	}
	return <-l.done
}
