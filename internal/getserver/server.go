// Package getserver is an HTTP/1.1 server for reads: it serves GET and HEAD
// requests without a body on connections of its own. A request of known
// length that is not one (a PUT or POST with a Content-Length, a body,
// Expect) is lent to net/http with the connection, which comes back for the
// next request (lend.go); at any other (a chunked body, Upgrade, HTTP/2, a
// head it cannot parse or check) the connection goes to a net/http.Server
// for good, with the bytes read of it.
//
// Why: net/http's server watches every connection while a handler runs (a
// goroutine started per request, woken and waited for at its end), so each
// request wakes the process three times where one read from RAM needs one.
// On a 2-core machine that was most of the cost of a 64 KiB hit from the
// gateway's page cache (docs/gateway.md, "Where the time goes"). Here the
// connection is watched only when a handler asks for its request's
// Context().Done(), as reads that wait on the network do (the context is
// then cancelled when the client goes away, and when the handler returns).
//
// Handlers get the http.Request that http.ReadRequest parses, checked as
// net/http's server checks it, and a ResponseWriter that frames answers as
// net/http does: Content-Length, chunking, Date, Content-Type sniffing,
// keep-alive and Connection: close, bodies suppressed for HEAD, 204 and 304.
package getserver

import (
	"context"
	"errors"
	"log"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Server serves reads itself and the rest through Fallback, whose
// settings it keeps too: ReadHeaderTimeout bounds reading a head once it
// has begun, IdleTimeout (or ReadTimeout) the wait for a next request,
// ErrorLog takes handlers' panics.
type Server struct {
	Fallback *http.Server
	// Handler answers the requests served here (nil: Fallback.Handler,
	// which answers those lent or handed over).
	Handler http.Handler

	mu       sync.Mutex
	ln       net.Listener
	handoff  *handoffListener
	lends    *handoffListener // to lender: connections lent for one request
	lender   *http.Server
	conns    map[*conn]struct{}
	shutdown atomic.Bool
}

// Serve accepts connections on ln until Shutdown or Close, and runs
// Fallback on the connections handed over. It returns
// http.ErrServerClosed after those, else the listener's error.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.shutdown.Load() {
		s.mu.Unlock()
		_ = ln.Close()
		return http.ErrServerClosed
	}
	s.ln = ln
	s.handoff = &handoffListener{addr: ln.Addr(), conns: make(chan net.Conn), closed: make(chan struct{})}
	s.lends = &handoffListener{addr: ln.Addr(), conns: make(chan net.Conn), closed: make(chan struct{})}
	s.lender = newLender(s.Fallback)
	s.conns = make(map[*conn]struct{})
	handoff, lends, lender := s.handoff, s.lends, s.lender
	s.mu.Unlock()
	go func() { _ = s.Fallback.Serve(handoff) }()
	go func() { _ = lender.Serve(lends) }()

	var backoff time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if s.shutdown.Load() {
				return http.ErrServerClosed
			}
			// As net/http does: a temporary failure (out of file
			// descriptors) is waited out, not the end of the server.
			if ne, ok := err.(interface{ Temporary() bool }); ok && ne.Temporary() {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		cc := newConn(s, c)
		if !s.track(cc, true) {
			_ = c.Close()
			continue
		}
		go cc.serve()
	}
}

// track adds (or removes) a connection; false once shut down.
func (s *Server) track(c *conn, add bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !add {
		delete(s.conns, c)
		return true
	}
	if s.shutdown.Load() {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

// Shutdown stops accepting, closes idle connections, and waits until the
// others have answered their request (with Connection: close) or ctx ends.
// Fallback is not shut down: its owner does that.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stop()
	if l := s.lenderServer(); l != nil {
		go func() { _ = l.Shutdown(ctx) }() // its answers say Connection: close from now on
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if s.closeIdle() == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// Close stops accepting and closes every connection it serves at once.
func (s *Server) Close() error {
	s.stop()
	if l := s.lenderServer(); l != nil {
		_ = l.Close()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		_ = c.rwc.Close()
	}
	return nil
}

func (s *Server) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.shutdown.Store(true)
	if s.ln != nil {
		_ = s.ln.Close()
		s.handoff.Close()
		s.lends.Close()
	}
}

func (s *Server) lenderServer() *http.Server {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lender
}

// closeIdle closes the connections waiting for a request and returns how
// many connections are left.
func (s *Server) closeIdle() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		if c.idle.Load() {
			_ = c.rwc.Close()
		}
	}
	return len(s.conns)
}

func (s *Server) logf(format string, args ...any) {
	if l := s.Fallback.ErrorLog; l != nil {
		l.Printf(format, args...)
		return
	}
	log.Printf(format, args...)
}

// handler is what serves reads here.
func (s *Server) handler() http.Handler {
	if s.Handler != nil {
		return s.Handler
	}
	return s.Fallback.Handler
}

// idleTimeout is net/http's: IdleTimeout, else ReadTimeout.
func (s *Server) idleTimeout() time.Duration {
	if d := s.Fallback.IdleTimeout; d != 0 {
		return d
	}
	return s.Fallback.ReadTimeout
}

// handoffListener is what Fallback serves (the connections handed over)
// and what the lender serves (those lent).
type handoffListener struct {
	addr   net.Addr
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func (l *handoffListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *handoffListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *handoffListener) Addr() net.Addr { return l.addr }

// hand gives c to Fallback; false (c not taken) once the listener is closed.
func (l *handoffListener) hand(c net.Conn) bool {
	select {
	case l.conns <- c:
		return true
	case <-l.closed:
		return false
	}
}

// replayConn is a connection handed over: it reads first what was read of
// it before.
type replayConn struct {
	net.Conn
	pending []byte
}

func (c *replayConn) Read(p []byte) (int, error) {
	if len(c.pending) > 0 {
		n := copy(p, c.pending)
		c.pending = c.pending[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// CloseWrite is the connection's (net/http half-closes connections it gives
// up on).
func (c *replayConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}
