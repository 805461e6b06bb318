package client

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distcache/distcache/internal/dnsfallback"
	"github.com/distcache/distcache/internal/nodeapi"
	"github.com/distcache/distcache/internal/pki"
)

// inlineTransport makes the client's bodiless GET and HEAD requests (chunk
// reads, Stat, the ring) over kept-alive HTTP/1.1 TLS connections in the
// calling goroutine: the request is written and the answer parsed
// (http.ReadResponse) by the caller, where http.Transport hands every
// request to a write goroutine and every answer back from a read goroutine
// of the connection. Those hand-offs were a large part of the CPU and
// latency of a 64 KiB read. Requests with a body (PUT, DELETE, POST) go to
// next, the http.Transport.
//
// As http.Transport does, a request that fails on a kept-alive connection
// before any byte of an answer came back is retried on another connection
// (the node may have closed it while it was idle); GET and HEAD are
// idempotent. The request's context bounds dialing, writing and reading
// the answer and its body.
type inlineTransport struct {
	tls         *tls.Config
	readTLS     *tls.Config        // offers nodeapi.ProtoRead first
	current     func() *tls.Config // Config.CurrentTLS; nil: tls and readTLS
	dialer      *dnsfallback.Dialer
	handshake   time.Duration
	maxIdle     int // per address
	idleTimeout time.Duration
	next        *http.Transport

	mu     sync.Mutex
	idle   map[string][]*inlineConn // by host:port, most recently used last
	closed bool
}

// inlineConn is one connection to a node.
type inlineConn struct {
	conn   *tls.Conn
	state  *tls.ConnectionState
	br     *bufio.Reader
	wbuf   []byte
	hdr    http.Header // the header of the answer being read (getChunk)
	idleAt time.Time
}

func newInlineTransport(next *http.Transport, current func() *tls.Config) *inlineTransport {
	return &inlineTransport{
		tls:         next.TLSClientConfig,
		readTLS:     withProtos(next.TLSClientConfig, readProtos...),
		current:     current,
		dialer:      newNodeDialer(),
		handshake:   next.TLSHandshakeTimeout,
		maxIdle:     next.MaxIdleConnsPerHost,
		idleTimeout: next.IdleConnTimeout,
		next:        next,
		idle:        map[string][]*inlineConn{},
	}
}

// readProtos are the ALPN protocols of a connection for chunk reads.
var readProtos = []string{nodeapi.ProtoRead, "http/1.1"}

// errNothingRead marks a failure before any byte of an answer arrived.
type errNothingRead struct{ err error }

func (e *errNothingRead) Error() string { return e.err.Error() }
func (e *errNothingRead) Unwrap() error { return e.err }

func (t *inlineTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet && req.Method != http.MethodHead || req.URL.Scheme != "https" ||
		req.Body != nil && req.Body != http.NoBody || req.Close {
		return t.next.RoundTrip(req)
	}
	addr := withPort(req.URL.Host)
	read := isChunkRead(req)
	var resp *http.Response
	err := t.withConn(req.Context(), addr, read, func(pc *inlineConn) (err error) {
		resp, err = t.exchange(req.Context(), poolKey(addr, read), pc, req)
		return err
	})
	return resp, err
}

// withConn runs do on a connection to addr of the kind for chunk reads
// (read) or of the other kind. A connection do fails on is closed; as
// http.Transport does, a kept-alive one that failed before any byte of an
// answer came back is replaced and do tried again (the node may have
// closed it while it was idle; GET and HEAD are idempotent).
func (t *inlineTransport) withConn(ctx context.Context, addr string, read bool, do func(pc *inlineConn) error) error {
	for {
		pc, reused, err := t.conn(ctx, addr, read)
		if err != nil {
			return err
		}
		err = do(pc)
		if err == nil {
			return nil
		}
		_ = pc.conn.Close()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var nothing *errNothingRead
		if reused && errors.As(err, &nothing) {
			continue // closed by the node while idle: try the next one
		}
		return err
	}
}

// send writes the request w on pc and waits for the first byte of the
// answer. From then until stop, a cancelled or expired context fails the
// connection's I/O (the connection is then closed, never reused). A
// failure here is an errNothingRead, and stop has been called.
func send(ctx context.Context, pc *inlineConn, w []byte) (stop func() bool, err error) {
	pc.wbuf = w
	stop = context.AfterFunc(ctx, func() { _ = pc.conn.SetDeadline(time.Unix(1, 0)) })
	if _, err := pc.conn.Write(w); err != nil {
		stop()
		return nil, &errNothingRead{err}
	}
	if _, err := pc.br.Peek(1); err != nil {
		stop()
		return nil, &errNothingRead{err}
	}
	return stop, nil
}

// exchange writes req on pc and reads the answer's status and headers; the
// body is read by the caller, and pc goes back to the pool when it is done.
func (t *inlineTransport) exchange(ctx context.Context, key string, pc *inlineConn, req *http.Request) (*http.Response, error) {
	w, err := appendRequest(pc.wbuf[:0], req)
	if err != nil {
		return nil, err
	}
	stop, err := send(ctx, pc, w)
	if err != nil {
		return nil, err
	}
	var resp *http.Response
	if pc.state.NegotiatedProtocol == nodeapi.ProtoRead {
		resp, err = readChunkResponse(pc.br, req) // the node's read loop answers
	} else {
		resp, err = http.ReadResponse(pc.br, req)
	}
	if err != nil {
		stop()
		return nil, err
	}
	resp.TLS = pc.state
	b := &inlineBody{t: t, key: key, pc: pc, ctx: ctx, stop: stop, body: resp.Body, left: resp.ContentLength,
		reuse: !resp.Close}
	if resp.Body == http.NoBody {
		b.finish(true)
		return resp, nil
	}
	resp.Body = b
	return resp, nil
}

// chunkReply is a chunk read's answer from getChunk: status and header
// (the connection's own map: valid until done), the body still to be read
// from the connection.
type chunkReply struct {
	t      *inlineTransport
	ctx    context.Context
	key    string
	pc     *inlineConn
	stop   func() bool
	code   int
	header http.Header
	length int64 // -1: the body runs to the end of the connection
	close  bool
}

// chunkGet is a chunk read as getChunk sends it: GET path?chunk=N&etag=E,
// with the tenant header when not empty and a Range of [first, last] when
// first >= 0.
type chunkGet struct {
	host, path, etag, tenant string
	index, first, last       int64
}

// getChunk makes a chunk read on a read connection to addr (host:port) in
// the calling goroutine, as RoundTrip would, but without an http.Request or
// an http.Response: the request is written from its parts and the answer's
// header is parsed into the connection's map. ok is false, with nothing
// sent, when the connection did not negotiate nodeapi.ProtoRead (use
// RoundTrip then). The caller reads the body from the reply and calls done.
func (t *inlineTransport) getChunk(ctx context.Context, addr string, g chunkGet) (r chunkReply, ok bool, err error) {
	key := poolKey(addr, true)
	ok = true
	err = t.withConn(ctx, addr, true, func(pc *inlineConn) (err error) {
		if pc.state.NegotiatedProtocol != nodeapi.ProtoRead {
			t.put(key, pc)
			ok = false
			return nil
		}
		r, err = t.sendChunkGet(ctx, key, pc, g)
		return err
	})
	return r, ok, err
}

func (t *inlineTransport) sendChunkGet(ctx context.Context, key string, pc *inlineConn, g chunkGet) (chunkReply, error) {
	if !validHeaderText(g.tenant) || !validHeaderText(g.host) {
		return chunkReply{}, errors.New("client: invalid header value in a chunk read")
	}
	w := append(pc.wbuf[:0], "GET "...)
	w = append(w, g.path...)
	w = append(w, "?chunk="...)
	w = strconv.AppendInt(w, g.index, 10)
	w = append(w, "&etag="...)
	w = append(w, url.QueryEscape(g.etag)...)
	w = append(w, " HTTP/1.1\r\nHost: "...)
	w = append(w, g.host...)
	w = append(w, "\r\n"...)
	if g.tenant != "" {
		w = append(w, headerTenant+": "...)
		w = append(w, g.tenant...)
		w = append(w, "\r\n"...)
	}
	if g.first >= 0 {
		w = append(w, "Range: bytes="...)
		w = strconv.AppendInt(w, g.first, 10)
		w = append(w, '-')
		w = strconv.AppendInt(w, g.last, 10)
		w = append(w, "\r\n"...)
	}
	w = append(w, "\r\n"...)
	stop, err := send(ctx, pc, w)
	if err != nil {
		return chunkReply{}, err
	}
	if pc.hdr == nil {
		pc.hdr = make(http.Header, 8)
	}
	clear(pc.hdr)
	a, err := readAnswerHeader(pc.br, pc.hdr)
	if err != nil {
		stop()
		return chunkReply{}, err
	}
	return chunkReply{t: t, ctx: ctx, key: key, pc: pc, stop: stop, code: a.code, header: pc.hdr, length: a.length, close: a.close}, nil
}

// readBody reads the body, which must be len(dst) bytes long, into dst.
func (r *chunkReply) readBody(dst []byte) error {
	if r.length != int64(len(dst)) {
		return fmt.Errorf("client: a body of %d bytes for %d", r.length, len(dst))
	}
	if _, err := io.ReadFull(r.pc.br, dst); err != nil {
		if cerr := r.ctx.Err(); cerr != nil {
			return cerr // the context's end broke the read off
		}
		return err
	}
	return nil
}

// response makes an http.Response of an answer whose body is not read into
// a buffer (an error's), for answerError; the reader's N is what is left of
// the body, for done.
func (r *chunkReply) response() (*http.Response, *io.LimitedReader) {
	body := &io.LimitedReader{R: r.pc.br, N: r.length}
	if r.length < 0 {
		body.N = 64 << 10
	}
	return &http.Response{StatusCode: r.code, Status: strconv.Itoa(r.code) + " " + http.StatusText(r.code),
		Header: r.header.Clone(), ContentLength: r.length, Body: io.NopCloser(body)}, body
}

// done releases the connection: back to the pool when the answer was read
// to its end (complete) and the context did not end meanwhile.
func (r *chunkReply) done(complete bool) {
	if !r.stop() {
		complete = false
	}
	if complete && !r.close && r.length >= 0 {
		r.t.put(r.key, r.pc)
		return
	}
	_ = r.pc.conn.Close()
}

// appendRequest appends req's request line and headers to w.
func appendRequest(w []byte, req *http.Request) ([]byte, error) {
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	w = append(w, req.Method...)
	w = append(w, ' ')
	if u := req.URL; u.Opaque == "" && !u.ForceQuery {
		// RequestURI without building the string.
		p := u.EscapedPath()
		if p == "" {
			p = "/"
		}
		w = append(w, p...)
		if u.RawQuery != "" {
			w = append(w, '?')
			w = append(w, u.RawQuery...)
		}
	} else {
		w = append(w, u.RequestURI()...)
	}
	w = append(w, " HTTP/1.1\r\nHost: "...)
	w = append(w, host...)
	w = append(w, "\r\n"...)
	for k, vs := range req.Header {
		if !validHeaderText(k) {
			return nil, fmt.Errorf("client: invalid header name %q", k)
		}
		for _, v := range vs {
			if !validHeaderText(v) {
				return nil, fmt.Errorf("client: invalid value for header %q", k)
			}
			w = append(w, k...)
			w = append(w, ": "...)
			w = append(w, v...)
			w = append(w, "\r\n"...)
		}
	}
	return append(w, "\r\n"...), nil
}

// validHeaderText refuses what would break the request's framing.
func validHeaderText(s string) bool { return !strings.ContainsAny(s, "\r\n\x00") }

// isChunkRead reports whether req is a chunk read (GET
// /v1/objects/...?chunk=N, as getChunk builds it): those go on connections
// that offer nodeapi.ProtoRead, the others on plain HTTP/1.1 ones.
func isChunkRead(req *http.Request) bool {
	q := req.URL.RawQuery
	return req.Method == http.MethodGet && strings.HasPrefix(req.URL.Path, objectsPrefix) &&
		(strings.HasPrefix(q, "chunk=") || strings.Contains(q, "&chunk="))
}

// withPort is host[:port] with HTTPS's default port when it has none.
func withPort(host string) string {
	u := url.URL{Host: host}
	if u.Port() == "" {
		return net.JoinHostPort(u.Hostname(), "443")
	}
	return host
}

// poolKey names the idle connections to addr of one kind.
func poolKey(addr string, read bool) string {
	if read {
		return "read " + addr
	}
	return addr
}

// conn returns an idle connection to addr (reused=true) or dials one, of
// the kind for chunk reads or of the kind for the other requests.
func (t *inlineTransport) conn(ctx context.Context, addr string, read bool) (pc *inlineConn, reused bool, err error) {
	now := time.Now()
	key := poolKey(addr, read)
	t.mu.Lock()
	for conns := t.idle[key]; len(conns) > 0; conns = t.idle[key] {
		pc = conns[len(conns)-1]
		conns[len(conns)-1] = nil
		t.idle[key] = conns[:len(conns)-1]
		if t.idleTimeout <= 0 || now.Sub(pc.idleAt) < t.idleTimeout {
			t.mu.Unlock()
			return pc, true, nil
		}
		_ = pc.conn.Close()
	}
	t.mu.Unlock()
	dctx, cancel := context.WithTimeout(ctx, t.dialer.Net.Timeout+t.handshake)
	defer cancel()
	cfg := t.tls
	if read {
		cfg = t.readTLS
	}
	if t.current != nil {
		cfg = withProtos(t.current(), cfg.NextProtos...)
	}
	tc, err := pki.DialTLS(dctx, t.dialer, "tcp", addr, cfg)
	if err != nil {
		if ctx.Err() != nil {
			return nil, false, ctx.Err()
		}
		return nil, false, err
	}
	state := tc.ConnectionState()
	return &inlineConn{conn: tc, state: &state, br: bufio.NewReaderSize(tc, 4<<10)}, false, nil
}

// put keeps pc for the next request of its pool (poolKey), or closes it.
func (t *inlineTransport) put(key string, pc *inlineConn) {
	pc.idleAt = time.Now()
	t.mu.Lock()
	if !t.closed && len(t.idle[key]) < t.maxIdle {
		t.idle[key] = append(t.idle[key], pc)
		t.mu.Unlock()
		return
	}
	t.mu.Unlock()
	_ = pc.conn.Close()
}

// CloseIdleConnections closes the idle connections of both transports.
func (t *inlineTransport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = map[string][]*inlineConn{}
	t.mu.Unlock()
	for _, conns := range idle {
		for _, pc := range conns {
			_ = pc.conn.Close()
		}
	}
	t.next.CloseIdleConnections()
}

// close closes the idle connections and every connection in use once its
// request is done.
func (t *inlineTransport) close() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	t.CloseIdleConnections()
}

// inlineBody is an answer's body; its connection goes back to the pool
// once the body has been read to its end (a Content-Length body needs no
// read past its last byte), and is closed if the body is closed before.
type inlineBody struct {
	t     *inlineTransport
	key   string // the pool pc goes back to
	pc    *inlineConn
	ctx   context.Context
	stop  func() bool
	body  io.ReadCloser
	left  int64 // -1: unknown length, read to EOF
	reuse bool
	eof   bool // the whole body was read
	done  atomic.Bool
}

func (b *inlineBody) Read(p []byte) (int, error) {
	if b.eof {
		return 0, io.EOF
	}
	if b.done.Load() {
		return 0, errors.New("client: read on a closed response body")
	}
	n, err := b.body.Read(p)
	if b.left > 0 {
		b.left -= int64(n)
	}
	switch {
	case err == io.EOF:
		b.eof = true
		b.finish(true)
	case err != nil:
		b.finish(false)
		if cerr := b.ctx.Err(); cerr != nil {
			err = cerr
		}
	}
	return n, err
}

func (b *inlineBody) Close() error {
	b.finish(b.left == 0)
	return nil
}

// finish releases the connection once: back to the pool if the answer was
// read completely and nothing (a cancelled context) touched its deadline.
func (b *inlineBody) finish(complete bool) {
	if b.done.Swap(true) {
		return
	}
	if !b.stop() { // the context ended: the deadline is (being) set
		complete = false
	}
	if complete && b.reuse {
		b.t.put(b.key, b.pc)
		return
	}
	_ = b.pc.conn.Close()
}
