package node

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/distcache/distcache/internal/nodeapi"
	"github.com/distcache/distcache/internal/pki"
)

// ServeReads makes hs serve the connections that negotiate
// nodeapi.ProtoRead (clients open them for chunk reads only) with a loop
// made for chunk reads: the request is parsed and answered in the
// connection's goroutine, the tenant identity is read once per connection,
// and there is no per-request context, background read or header copy, as
// net/http's server has. Every other connection, and so every other
// endpoint, stays with hs and Handler, on the same port.
//
// It adds ProtoRead to the ALPN protocols of hs.TLSConfig, which must be
// the configuration the listener uses; call it before serving. The chunk
// reads answered there are the same as Handler's: same authorization,
// status codes, headers, body and metrics. hs's ReadHeaderTimeout,
// IdleTimeout and WriteTimeout apply; hs.Close closes the connections and
// hs.Shutdown closes them once their request is answered.
func (s *Server) ServeReads(hs *http.Server) {
	if hs.TLSNextProto == nil {
		hs.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
	}
	// Chunk reads only: a path the fast route leaves goes to a mux that
	// knows nothing else.
	reads := http.NewServeMux()
	reads.HandleFunc(patternGetObject, s.handleGet)
	s.readConnHandler = s.withRingEpoch(s.routeReads(reads))
	rs := &readServer{s: s, hs: hs, conns: map[*readConn]struct{}{}}
	hs.TLSNextProto[nodeapi.ProtoRead] = rs.serve
	hs.RegisterOnShutdown(rs.shutdown)
	cfg := hs.TLSConfig
	if cfg == nil {
		return
	}
	cfg.NextProtos = withProtoRead(cfg.NextProtos)
	if inner := cfg.GetConfigForClient; inner != nil {
		cfg.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			c, err := inner(hello)
			if err != nil || c == nil || !slices.Contains(hello.SupportedProtos, nodeapi.ProtoRead) {
				return c, err
			}
			c = c.Clone()
			c.NextProtos = withProtoRead(c.NextProtos)
			return c, nil
		}
	}
}

// withProtoRead puts ProtoRead first (the server's preference decides).
func withProtoRead(protos []string) []string {
	if slices.Contains(protos, nodeapi.ProtoRead) {
		return protos
	}
	return append([]string{nodeapi.ProtoRead}, protos...)
}

// readServer tracks the read connections of one http.Server.
type readServer struct {
	s  *Server
	hs *http.Server

	mu           sync.Mutex
	conns        map[*readConn]struct{}
	shuttingDown bool
}

// readConn is one read connection; idle while it waits for a request.
type readConn struct {
	c    *tls.Conn
	mu   sync.Mutex
	idle bool
}

func (rc *readConn) setIdle(idle bool) {
	rc.mu.Lock()
	rc.idle = idle
	rc.mu.Unlock()
}

// shutdown closes the idle read connections; busy ones close after their
// request.
func (rs *readServer) shutdown() {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.shuttingDown = true
	for rc := range rs.conns {
		rc.mu.Lock()
		if rc.idle {
			_ = rc.c.Close()
		}
		rc.mu.Unlock()
	}
}

// track adds rc (false when shutting down) or removes it.
func (rs *readServer) track(rc *readConn, add bool) bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if !add {
		delete(rs.conns, rc)
		return true
	}
	if rs.shuttingDown {
		return false
	}
	rs.conns[rc] = struct{}{}
	return true
}

// serve answers the chunk reads of one connection until it closes.
func (rs *readServer) serve(_ *http.Server, c *tls.Conn, _ http.Handler) {
	rc := &readConn{c: c, idle: true}
	defer c.Close()
	if !rs.track(rc, true) {
		return
	}
	defer rs.track(rc, false)
	state := c.ConnectionState()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := &readResponse{bw: bufio.NewWriterSize(c, 4<<10), header: http.Header{}}
	id, idErr := pki.IdentityFromState(&state)
	if idErr == nil {
		ctx = pki.NewContext(ctx, id)
	}
	br := bufio.NewReaderSize(c, 4<<10)
	hdr := http.Header{} // every request's, in turn: handlers keep no request
	remote := c.RemoteAddr().String()
	batch, _ := c.NetConn().(*batchConn) // under a BatchingListener
	for {
		if !rs.readDeadline(c, br) {
			return
		}
		r, err := readRequest(ctx, br, hdr)
		if err != nil {
			return
		}
		rc.setIdle(false)
		if d := rs.hs.WriteTimeout; d > 0 {
			_ = c.SetWriteDeadline(time.Now().Add(d))
		}
		r.TLS, r.RemoteAddr = &state, remote
		w.reset(r)
		if batch != nil {
			batch.startBatch()
		}
		if idErr != nil {
			// As pki.Middleware answers on the other connections.
			http.Error(w, "forbidden: no valid distcache client identity: "+idErr.Error(), http.StatusForbidden)
			w.close = true
		} else {
			rs.s.serveRead(w, r)
		}
		err = w.finish()
		if batch != nil {
			err = errors.Join(err, batch.flush())
		}
		if err != nil || w.close || r.Close {
			return
		}
		rc.setIdle(true) // from now on a shutdown closes it
		if rs.closing() {
			return
		}
	}
}

func (rs *readServer) closing() bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.shuttingDown
}

// readDeadline bounds the wait for the next request (IdleTimeout, or
// ReadTimeout) and then its header (ReadHeaderTimeout), as net/http does.
func (rs *readServer) readDeadline(c *tls.Conn, br *bufio.Reader) bool {
	idle := rs.hs.IdleTimeout
	if idle == 0 {
		idle = rs.hs.ReadTimeout
	}
	if br.Buffered() == 0 {
		var deadline time.Time
		if idle > 0 {
			deadline = time.Now().Add(idle)
		}
		_ = c.SetReadDeadline(deadline)
		if _, err := br.Peek(1); err != nil {
			return false
		}
	}
	header := rs.hs.ReadHeaderTimeout
	if header == 0 {
		header = rs.hs.ReadTimeout
	}
	var deadline time.Time
	if header > 0 {
		deadline = time.Now().Add(header)
	}
	_ = c.SetReadDeadline(deadline)
	return true
}

// serveRead answers one request of a read connection: a chunk read as
// Handler answers it, anything else 400 (and the connection closes).
func (s *Server) serveRead(w *readResponse, r *http.Request) {
	defer func() {
		if v := recover(); v != nil {
			w.close = true
			if v != http.ErrAbortHandler {
				s.log.Error("panic serving a chunk read", "panic", v)
			}
		}
	}()
	if r.Method != http.MethodGet || r.ContentLength != 0 || !parseReadQuery(r.URL.RawQuery).hasChunk {
		w.close = true
		writeError(w, newError(http.StatusBadRequest, CodeBadRequest,
			"a "+nodeapi.ProtoRead+" connection carries chunk reads only (GET /v1/objects/{bucket}/{key}?chunk=N)"))
		return
	}
	s.readConnHandler.ServeHTTP(w, r) // routed as Handler routes reads
}

// readResponse is the http.ResponseWriter of a read connection: the status
// line and headers go into the connection's write buffer, the body after
// them. A response without Content-Length (an error's JSON) is held until
// the handler is done and sent with its length, as net/http does for small
// bodies; past maxHeldBody it is delimited by closing the connection.
type readResponse struct {
	bw      *bufio.Writer
	header  http.Header
	req     *http.Request
	status  int
	written int64
	length  int64 // Content-Length, -1 if none
	close   bool
	held    bool   // status and headers wait for the end of the body
	body    []byte // the body while held
	buf     []byte
}

// maxHeldBody is the largest body without Content-Length that is held to
// compute it.
const maxHeldBody = 64 << 10

func (w *readResponse) reset(r *http.Request) {
	clear(w.header)
	w.req, w.status, w.written, w.length, w.close, w.held, w.body = r, 0, 0, -1, false, false, w.body[:0]
}

func (w *readResponse) Header() http.Header { return w.header }

func (w *readResponse) WriteHeader(status int) {
	if w.status != 0 || status < 200 { // no 1xx answers here
		return
	}
	w.status = status
	if v := w.header[hkContentLength]; len(v) == 1 {
		if n, err := strconv.ParseInt(v[0], 10, 64); err == nil && n >= 0 {
			w.length = n
		}
	}
	if w.length < 0 {
		w.held = true
		return
	}
	w.writeHeader()
}

func (w *readResponse) writeHeader() {
	b := append(w.buf[:0], "HTTP/1.1 "...)
	status := w.status
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, ' ')
	b = append(b, http.StatusText(status)...)
	b = append(b, "\r\n"...)
	for k, vs := range w.header {
		for _, v := range vs {
			b = append(b, k...)
			b = append(b, ": "...)
			b = appendHeaderValue(b, v)
			b = append(b, "\r\n"...)
		}
	}
	if w.close {
		b = append(b, "Connection: close\r\n"...)
	}
	b = append(b, "\r\n"...)
	w.buf = b
	_, _ = w.bw.Write(b)
}

// appendHeaderValue appends v with any CR or LF replaced by a space, as
// net/http writes header values.
func appendHeaderValue(b []byte, v string) []byte {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c == '\r' || c == '\n' {
			c = ' '
		}
		b = append(b, c)
	}
	return b
}

var errBodyTooLong = errors.New("node: response body longer than its Content-Length")

func (w *readResponse) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.held {
		if len(w.body)+len(p) <= maxHeldBody {
			w.body = append(w.body, p...)
			return len(p), nil
		}
		// Too long to hold: delimited by the end of the connection.
		w.held, w.close = false, true
		w.writeHeader()
		if _, err := w.bw.Write(w.body); err != nil {
			return 0, err
		}
	}
	if w.length >= 0 && w.written+int64(len(p)) > w.length {
		w.close = true
		return 0, errBodyTooLong
	}
	n, err := w.bw.Write(p)
	w.written += int64(n)
	if err != nil {
		w.close = true
	}
	return n, err
}

// finish sends what is buffered; a body shorter than its Content-Length
// closes the connection (the client sees it cut short).
func (w *readResponse) finish() error {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.held {
		w.held, w.length = false, int64(len(w.body))
		w.header[hkContentLength] = []string{strconv.Itoa(len(w.body))}
		w.writeHeader()
		if _, err := w.bw.Write(w.body); err != nil {
			return err
		}
		w.written = w.length
	}
	if w.length >= 0 && w.written != w.length {
		w.close = true
	}
	return w.bw.Flush()
}
