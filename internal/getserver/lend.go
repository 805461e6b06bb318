package getserver

import (
	"context"
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
// the request's bytes and no more; where it reads on, it is told the
// connection ended (io.EOF), and it closes the connection; that Close
// hands it back. A connection net/http closes for reasons of its own (a
// Connection: close, a body it would not read, a panic) is closed.

// lentKey is the context key of a lent connection in the lender's requests.
type lentKey struct{}

// newLender is the server lent connections are served by.
func newLender(fallback *http.Server) *http.Server {
	h := fallback.Handler
	if h == nil {
		h = http.DefaultServeMux
	}
	return &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if l, ok := r.Context().Value(lentKey{}).(*lentConn); ok {
				defer l.handlerDone()
			}
			h.ServeHTTP(w, r)
		}),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, lentKey{}, c)
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
	running bool // the handler has not returned
	aborted bool // a read deadline in the past was set: net/http stops its watch
	next    bool // a deadline was set after the handler: net/http waits for a next request
	ended   bool // net/http read past the request
	done    chan bool
	once    sync.Once
}

func newLentConn(c *conn, n int64) *lentConn {
	l := &lentConn{c: c, left: n, running: true, done: make(chan bool, 1)}
	l.cond = sync.NewCond(&l.mu)
	return l
}

// Read reads the request's bytes. Past them it is either net/http's watch
// of the connection (started before or during the handler, perhaps
// reading only after it), which waits until net/http stops it with a
// deadline in the past, or net/http's wait for the next request, which
// comes after a deadline for it was set once the handler had returned:
// that next request is not net/http's to read (io.EOF).
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
	if l.next {
		l.ended = true
		return 0, io.EOF
	}
	for !l.aborted {
		l.cond.Wait()
	}
	l.aborted = false
	return 0, os.ErrDeadlineExceeded
}

func (l *lentConn) handlerDone() {
	l.mu.Lock()
	l.running = false
	l.mu.Unlock()
}

func (l *lentConn) SetReadDeadline(t time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !t.IsZero() && t.Before(time.Now()) {
		l.aborted = true
		l.cond.Broadcast()
		return nil
	}
	if !l.running {
		l.next = true
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

// Close gives the connection back: reusable if net/http read past the
// request (it would have served another).
func (l *lentConn) Close() error {
	l.once.Do(func() {
		l.mu.Lock()
		ended := l.ended
		l.mu.Unlock()
		l.done <- ended
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
