package getserver

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"net/textproto"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"
)

// headBytes is the most a request's head may take here; a longer one is
// handed over (net/http allows 1 MiB). S3 requests' heads are 1-2 KiB.
const headBytes = 16 << 10

// conn is one client connection served here.
type conn struct {
	s      *Server
	rwc    net.Conn
	remote string
	cr     connReader
	br     *bufio.Reader // of cr
	bw     *bufio.Writer // of rwc
	head   bytes.Reader  // the head being parsed
	hr     *bufio.Reader // of head
	ctx    context.Context
	idle   atomic.Bool // waiting for a request with nothing read of it

	// The watch of the connection for a request whose Done was asked for:
	// a goroutine reading one byte from rwc (into cr.b).
	aborting  atomic.Bool
	watchDone chan struct{}
}

// connReader reads rwc, after the byte a watch read of it, if any.
type connReader struct {
	rwc net.Conn
	b   [1]byte
	has bool
}

func (r *connReader) Read(p []byte) (int, error) {
	if r.has && len(p) > 0 {
		p[0], r.has = r.b[0], false
		return 1, nil
	}
	return r.rwc.Read(p)
}

func newConn(s *Server, rwc net.Conn) *conn {
	c := &conn{s: s, rwc: rwc, remote: rwc.RemoteAddr().String()}
	c.cr.rwc = rwc
	c.br = bufio.NewReaderSize(&c.cr, headBytes)
	c.bw = bufio.NewWriterSize(rwc, 4<<10) // net/http's size: answers are cut into writes as they were
	c.hr = bufio.NewReaderSize(&c.head, 4<<10)
	c.ctx = context.WithValue(context.WithValue(context.Background(),
		http.ServerContextKey, s.Fallback), http.LocalAddrContextKey, rwc.LocalAddr())
	return c
}

// errHandOff: the next request is neither served here nor lent.
var errHandOff = errors.New("getserver: for net/http")

func (c *conn) serve() {
	handed := false
	defer func() {
		c.s.track(c, false)
		if !handed {
			_ = c.rwc.Close()
		}
	}()
	for {
		req, lend, err := c.readRequest()
		if errors.Is(err, errHandOff) {
			handed = c.handOff()
			return
		}
		if err != nil {
			return // closed, timed out, or shut down while idle
		}
		if lend > 0 {
			if !c.lend(lend) || c.s.shutdown.Load() {
				return
			}
			continue
		}
		if !c.serveRequest(req) {
			return
		}
	}
}

// handOff gives the connection to Fallback with what was read of it.
func (c *conn) handOff() bool {
	pending, _ := c.br.Peek(c.br.Buffered())
	pending = append([]byte(nil), pending...)
	if c.cr.has {
		pending = append(pending, c.cr.b[0])
	}
	_ = c.rwc.SetReadDeadline(time.Time{})
	c.s.track(c, false)
	return c.s.handoff.hand(&replayConn{Conn: c.rwc, pending: pending})
}

// readRequest reads the next request's head and returns the request when
// it is a read to serve here (parsed by parseRead, or else by
// http.ReadRequest and checked); lend, the request's length, when it is one
// to lend to net/http (nothing consumed); errHandOff (nothing consumed)
// when net/http is to have the connection.
func (c *conn) readRequest() (req *http.Request, lend int64, err error) {
	head, err := c.readHead()
	if err != nil {
		return nil, 0, err
	}
	if req, ok := parseRead(head); ok {
		_, _ = c.br.Discard(len(head))
		req.RemoteAddr = c.remote
		return req, 0, nil
	}
	c.head.Reset(head)
	c.hr.Reset(&c.head)
	req, err = http.ReadRequest(c.hr)
	if err != nil || !acceptable(req, head) {
		return nil, 0, errHandOff // net/http answers it (a 400 for a bad head)
	}
	if !servable(req) {
		if !lendable(req) {
			return nil, 0, errHandOff
		}
		return nil, int64(len(head)) + req.ContentLength, nil
	}
	_, _ = c.br.Discard(len(head))
	req.RemoteAddr = c.remote
	return req, 0, nil
}

// readHead waits for a whole request head and returns it, unconsumed.
func (c *conn) readHead() ([]byte, error) {
	if c.br.Buffered() == 0 {
		c.idle.Store(true)
		if c.s.shutdown.Load() {
			return nil, http.ErrServerClosed
		}
		if err := c.setReadDeadline(c.s.idleTimeout()); err != nil {
			return nil, err
		}
		if _, err := c.br.Peek(1); err != nil {
			return nil, err
		}
		c.idle.Store(false)
	}
	headDeadline := false
	for {
		buf, _ := c.br.Peek(c.br.Buffered())
		if i := bytes.Index(buf, []byte("\r\n\r\n")); i >= 0 {
			return buf[:i+4], nil
		}
		if bytes.Contains(buf, []byte("\n\n")) || bytes.Contains(buf, []byte("\n\r\n")) {
			return nil, errHandOff // lines ended by a bare LF: net/http reads those
		}
		if len(buf) == c.br.Size() {
			return nil, errHandOff // too long for here: net/http's limits apply
		}
		if !headDeadline { // a head that came in pieces: bound the rest
			headDeadline = true
			if err := c.setReadDeadline(c.s.Fallback.ReadHeaderTimeout); err != nil {
				return nil, err
			}
		}
		if _, err := c.br.Peek(len(buf) + 1); err != nil {
			return nil, err
		}
	}
}

func (c *conn) setReadDeadline(d time.Duration) error {
	if d <= 0 {
		return c.rwc.SetReadDeadline(time.Time{})
	}
	return c.rwc.SetReadDeadline(time.Now().Add(d))
}

// acceptable reports whether req, read from head, is an HTTP/1 request
// net/http's server would take as it is (Host, field names).
func acceptable(req *http.Request, head []byte) bool {
	if req.ProtoMajor != 1 || req.Header["Upgrade"] != nil {
		return false
	}
	hosts := hostFields(head) // http.ReadRequest takes them out of the header
	if len(hosts) > 1 || (len(hosts) == 0 && req.ProtoAtLeast(1, 1)) {
		return false
	}
	if len(hosts) == 1 && !httpguts.ValidHostHeader(hosts[0]) {
		return false
	}
	// Values need no check of their own: ReadRequest's textproto refuses
	// the bytes net/http's server refuses. It takes names net/http does not
	// (a space in one).
	for k := range req.Header {
		if !httpguts.ValidHeaderFieldName(k) {
			return false
		}
	}
	return true
}

// servable reports whether req is a read served here: a GET or HEAD
// without a body or Expect.
func servable(req *http.Request) bool {
	return (req.Method == http.MethodGet || req.Method == http.MethodHead) &&
		req.ContentLength == 0 && len(req.TransferEncoding) == 0 && req.Header["Expect"] == nil
}

// lendable reports whether req is an HTTP/1.1 request of known length,
// lent to net/http for its answer; others (chunked bodies, HTTP/1.0, CONNECT)
// take the connection with them.
func lendable(req *http.Request) bool {
	return req.ProtoMinor == 1 && len(req.TransferEncoding) == 0 && req.ContentLength >= 0 &&
		req.Method != http.MethodConnect
}

// hostFields returns the values of head's Host fields.
func hostFields(head []byte) []string {
	var hosts []string
	_, rest, _ := bytes.Cut(head, []byte("\r\n")) // past the request line
	for len(rest) > 0 {
		var line []byte
		line, rest, _ = bytes.Cut(rest, []byte("\r\n"))
		if len(line) >= 5 && bytes.EqualFold(line[:5], []byte("host:")) {
			hosts = append(hosts, textproto.TrimString(string(line[5:])))
		}
	}
	return hosts
}

// serveRequest runs the handler and ends the answer; false when the
// connection is not to be used again.
func (c *conn) serveRequest(req *http.Request) (reuse bool) {
	rc := &requestContext{Context: c.ctx, c: c}
	req = req.WithContext(rc)
	w := newResponse(c, req)
	defer func() {
		if p := recover(); p != nil {
			_ = c.bw.Flush() // what was written, as net/http sends it before closing
			if p != http.ErrAbortHandler {
				buf := make([]byte, 64<<10)
				buf = buf[:runtime.Stack(buf, false)]
				c.s.logf("http: panic serving %v: %v\n%s", c.remote, p, buf)
			}
			rc.end()
			reuse = false
		}
	}()
	c.s.handler().ServeHTTP(w, req)
	err := w.finish()
	rc.end()
	return err == nil && w.reusable() && !c.s.shutdown.Load()
}

// requestContext is a request's context: the connection's values, and a
// Done that watches the connection from the first call on (cancelled when
// the client goes away or the handler returns).
type requestContext struct {
	context.Context
	c     *conn
	mu    sync.Mutex
	done  chan struct{}
	err   error
	ended bool
}

func (x *requestContext) Done() <-chan struct{} {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.done == nil {
		x.done = make(chan struct{})
		if x.ended {
			x.err = context.Canceled
			close(x.done)
		} else {
			x.c.watch(x)
		}
	}
	return x.done
}

func (x *requestContext) Err() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.err == nil && x.ended {
		return context.Canceled
	}
	return x.err
}

// cancel closes done (under mu), once.
func (x *requestContext) cancelLocked() {
	if x.err == nil {
		x.err = context.Canceled
		close(x.done)
	}
}

// end is the end of the request: the watch is stopped and the context
// cancelled.
func (x *requestContext) end() {
	x.mu.Lock()
	x.ended = true
	watched := x.done != nil
	x.mu.Unlock()
	if !watched {
		return
	}
	x.c.stopWatch()
	x.mu.Lock()
	x.cancelLocked()
	x.mu.Unlock()
}

// watch starts reading one byte of the connection: an error means the
// client went away (or broke the connection) and cancels x; a byte is the
// start of its next request, kept for it.
func (c *conn) watch(x *requestContext) {
	c.watchDone = make(chan struct{})
	// No deadline while a handler runs (net/http sets none either): the
	// idle one would take a long answer for a client gone.
	_ = c.rwc.SetReadDeadline(time.Time{})
	go func() {
		defer close(c.watchDone)
		n, err := c.rwc.Read(c.cr.b[:])
		if n == 1 {
			c.cr.has = true
			return
		}
		if err != nil && !c.aborting.Load() {
			x.mu.Lock()
			x.cancelLocked()
			x.mu.Unlock()
		}
	}()
}

// stopWatch interrupts the watch's read and waits for it.
func (c *conn) stopWatch() {
	c.aborting.Store(true)
	_ = c.rwc.SetReadDeadline(time.Unix(1, 0))
	<-c.watchDone
	c.aborting.Store(false)
}
