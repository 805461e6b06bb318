package client

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distcache/distcache/internal/nodeapi"
	"github.com/distcache/distcache/internal/pki"
	"github.com/distcache/distcache/internal/testutil"
	"github.com/distcache/distcache/internal/testutil/certfiles"
)

// tlsServer is an HTTP/1.1 server behind real mTLS (the node's server
// configuration) that counts the connections it accepted.
type tlsServer struct {
	*httptest.Server
	conns     atomic.Int64
	clientTLS *tls.Config
	dir       string // server.crt/.key, tenant.crt/.key and ca.crt, read by both ends
}

func newTLSServer(t *testing.T, h http.Handler) *tlsServer {
	t.Helper()
	dir := t.TempDir()
	certfiles.Write(t, dir, "transport test CA", map[string]pki.Identity{"tenant": {Kind: pki.KindTenant, Name: "team-a"}})
	caFile := filepath.Join(dir, "ca.crt")
	serverTLS, err := pki.ServerTLSConfig(filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key"), caFile)
	testutil.Must(t, err)
	s := &tlsServer{Server: httptest.NewUnstartedServer(h), dir: dir}
	s.clientTLS, err = pki.ClientTLSConfig(filepath.Join(dir, "tenant.crt"), filepath.Join(dir, "tenant.key"), caFile)
	testutil.Must(t, err)
	s.TLS = serverTLS
	s.Config.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.StartTLS()
	t.Cleanup(s.Close)
	return s
}

func (s *tlsServer) transport(t *testing.T) *inlineTransport {
	t.Helper()
	tr := newInlineTransport(newTransport(Config{TLS: s.clientTLS}), nil)
	t.Cleanup(tr.close)
	return tr
}

func get(t *testing.T, tr http.RoundTripper, ctx context.Context, method, u string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	testutil.Must(t, err)
	return tr.RoundTrip(req)
}

// readAll reads an answer's body whole, checking it is want.
func readAll(t *testing.T, resp *http.Response, want string) {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	testutil.Must(t, err)
	testutil.Must(t, resp.Body.Close())
	if string(b) != want {
		t.Fatalf("body %q, want %q", b, want)
	}
}

// With Config.CurrentTLS the client follows a CA rotation on disk: new
// connections, for reads (inline) and for writes (net/http), verify the node
// against the bundle and present the certificate as they are now. One built
// from a fixed configuration cannot reach the node any more.
func TestTransportFollowsCARotation(t *testing.T) {
	s := newTLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.Method)
	}))
	file := func(name string) string { return filepath.Join(s.dir, name) }
	files, err := pki.NewClientTLS(file("tenant.crt"), file("tenant.key"), file("ca.crt"))
	testutil.Must(t, err)
	following := newInlineTransport(newTransport(Config{TLS: files.Config(), CurrentTLS: files.Config}), files.Config)
	t.Cleanup(following.close)
	fixed := s.transport(t)
	ctx := t.Context()
	for _, method := range []string{http.MethodGet, http.MethodPut} {
		for _, tr := range []*inlineTransport{following, fixed} {
			resp, err := get(t, tr, ctx, method, s.URL+"/a")
			testutil.Must(t, err)
			readAll(t, resp, method)
		}
	}

	_, server := certfiles.Write(t, s.dir, "rotated transport test CA", map[string]pki.Identity{"tenant": {Kind: pki.KindTenant, Name: "team-a"}})
	// New connections from here on: the kept-alive ones were verified
	// before the rotation.
	s.CloseClientConnections()
	following.next.CloseIdleConnections()
	fixed.next.CloseIdleConnections()

	for _, method := range []string{http.MethodGet, http.MethodPut} {
		resp, err := get(t, following, ctx, method, s.URL+"/a")
		testutil.Must(t, err)
		readAll(t, resp, method)
		if resp.TLS == nil || !resp.TLS.PeerCertificates[0].Equal(mustParse(t, server.CertPEM)) {
			t.Fatalf("%s: not answered over a connection to the reissued certificate", method)
		}
		if _, err := get(t, fixed, ctx, method, s.URL+"/a"); err == nil || !strings.Contains(err.Error(), "unknown authority") {
			t.Fatalf("%s with the configuration of before the rotation: %v, want an unknown authority", method, err)
		}
	}
}

func mustParse(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(certPEM)
	if block == nil {
		t.Fatal("no PEM certificate")
	}
	c, err := x509.ParseCertificate(block.Bytes)
	testutil.Must(t, err)
	return c
}

func TestInlineTransportKeepsConnectionsAlive(t *testing.T) {
	body := strings.Repeat("x", 100<<10)
	s := newTLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
			http.Error(w, "no client certificate", http.StatusForbidden)
			return
		}
		switch r.URL.Path {
		case "/chunked": // no Content-Length: the body ends with the last chunk
			_, _ = io.WriteString(w, body[:10])
			w.(http.Flusher).Flush()
			_, _ = io.WriteString(w, body[10:20])
		case "/empty":
			w.WriteHeader(http.StatusNoContent)
		default:
			w.Header().Set("X-Test", r.Header.Get("X-Test"))
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			_, _ = io.WriteString(w, body)
		}
	}))
	tr := s.transport(t)
	ctx := t.Context()
	for i := 0; i < 5; i++ {
		resp, err := get(t, tr, ctx, http.MethodGet, s.URL+"/a")
		testutil.Must(t, err)
		if resp.StatusCode != http.StatusOK || resp.ContentLength != int64(len(body)) || resp.TLS == nil {
			t.Fatalf("status %d, length %d, TLS %v", resp.StatusCode, resp.ContentLength, resp.TLS != nil)
		}
		// As getChunk reads: exactly Content-Length bytes, never to EOF.
		buf := make([]byte, len(body))
		_, err = io.ReadFull(resp.Body, buf)
		testutil.Must(t, err)
		testutil.Must(t, resp.Body.Close())
		resp, err = get(t, tr, ctx, http.MethodHead, s.URL+"/a")
		testutil.Must(t, err)
		readAll(t, resp, "")
		resp, err = get(t, tr, ctx, http.MethodGet, s.URL+"/chunked")
		testutil.Must(t, err)
		readAll(t, resp, body[:20])
		resp, err = get(t, tr, ctx, http.MethodGet, s.URL+"/empty")
		testutil.Must(t, err)
		readAll(t, resp, "")
	}
	if n := s.conns.Load(); n != 1 {
		t.Fatalf("%d connections for 20 sequential requests read to their end, want 1", n)
	}

	// A body closed before its end takes its connection with it.
	resp, err := get(t, tr, ctx, http.MethodGet, s.URL+"/a")
	testutil.Must(t, err)
	_, err = io.ReadFull(resp.Body, make([]byte, 10))
	testutil.Must(t, err)
	testutil.Must(t, resp.Body.Close())
	resp, err = get(t, tr, ctx, http.MethodGet, s.URL+"/a")
	testutil.Must(t, err)
	readAll(t, resp, body)
	if n := s.conns.Load(); n != 2 {
		t.Fatalf("%d connections, want 2 (one replacing the connection of the body closed early)", n)
	}

	// Headers go out as given; requests with a body go through http.Transport.
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/a", nil)
	testutil.Must(t, err)
	req.Header.Set("X-Test", "yes")
	resp, err = tr.RoundTrip(req)
	testutil.Must(t, err)
	if resp.Header.Get("X-Test") != "yes" {
		t.Errorf("header X-Test came back as %q", resp.Header.Get("X-Test"))
	}
	readAll(t, resp, body)
	req.Header.Set("X-Test", "a\r\nX-Injected: 1")
	if _, err := tr.RoundTrip(req); err == nil {
		t.Error("a header value with CRLF was sent")
	}
	req, err = http.NewRequestWithContext(ctx, http.MethodPut, s.URL+"/a", strings.NewReader("payload"))
	testutil.Must(t, err)
	resp, err = tr.RoundTrip(req)
	testutil.Must(t, err)
	readAll(t, resp, body)
}

func TestInlineTransportRetriesConnectionsTheServerClosed(t *testing.T) {
	s := newTLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	tr := s.transport(t)
	// Three kept-alive connections, then the server closes them all (as a
	// node does with idle connections, or when it restarts).
	var resps []*http.Response
	for i := 0; i < 3; i++ {
		resp, err := get(t, tr, t.Context(), http.MethodGet, s.URL)
		testutil.Must(t, err)
		resps = append(resps, resp)
	}
	for _, resp := range resps {
		readAll(t, resp, "ok")
	}
	s.CloseClientConnections()
	resp, err := get(t, tr, t.Context(), http.MethodGet, s.URL)
	if err != nil {
		t.Fatalf("a request after the server closed the idle connections failed: %v", err)
	}
	readAll(t, resp, "ok")
	if n := s.conns.Load(); n != 4 {
		t.Errorf("%d connections, want 4", n)
	}
}

func TestInlineTransportCancel(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	s := newTLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/fast" {
			_, _ = io.WriteString(w, "ok")
			return
		}
		if r.URL.Path == "/body" {
			w.Header().Set("Content-Length", "1000")
			_, _ = io.WriteString(w, "part")
			w.(http.Flusher).Flush()
		}
		select { // hang, as a stuck node would
		case <-release:
		case <-r.Context().Done():
		}
	}))
	tr := s.transport(t)

	// Cancelled while waiting for the answer.
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if _, err := get(t, tr, ctx, http.MethodGet, s.URL+"/hang"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want context.DeadlineExceeded", err)
	}

	// Cancelled while reading the body.
	ctx, cancel = context.WithCancel(t.Context())
	resp, err := get(t, tr, ctx, http.MethodGet, s.URL+"/body")
	testutil.Must(t, err)
	_, err = io.ReadFull(resp.Body, make([]byte, 4))
	testutil.Must(t, err)
	cancel()
	if _, err := io.ReadFull(resp.Body, make([]byte, 10)); !errors.Is(err, context.Canceled) {
		t.Fatalf("body read after cancel: %v, want context.Canceled", err)
	}
	testutil.Must(t, resp.Body.Close())

	// The transport still works, on a new connection.
	resp, err = get(t, tr, t.Context(), http.MethodGet, s.URL+"/fast")
	testutil.Must(t, err)
	readAll(t, resp, "ok")
	if n := s.conns.Load(); n != 3 {
		t.Errorf("%d connections, want 3 (the cancelled ones are not reused)", n)
	}
}

func TestNewRequestURLIsWhatParsingGives(t *testing.T) {
	c := &Client{}
	for _, tc := range []struct{ bucket, key string }{
		{"b", "k"}, {"b", "a/b/c.bin"}, {"b", "a//b"}, {"b", "/lead"}, {"b", "trail/"}, {"b", "./x/../y/."},
		{"b", "sp ace+plus%pct"}, {"b", "q?h#s;c,"}, {"b", "ütf/ø"}, {"b.c-d", "key~_"}, {"b", "%2F"},
	} {
		req, err := c.newRequest(t.Context(), http.MethodGet, "127.0.0.1:1", tc.bucket, tc.key, "chunk=1&etag=%22e%22")
		testutil.Must(t, err)
		want, err := url.Parse("https://127.0.0.1:1" + nodeapi.ObjectPath(tc.bucket, tc.key) + "?chunk=1&etag=%22e%22")
		testutil.Must(t, err)
		if req.URL.Path != want.Path || req.URL.EscapedPath() != want.EscapedPath() || req.URL.RequestURI() != want.RequestURI() ||
			req.URL.String() != want.String() || req.Host != want.Host {
			t.Errorf("%q/%q: built %q (path %q), parsed %q (path %q)", tc.bucket, tc.key, req.URL, req.URL.Path, want, want.Path)
		}
	}
}

// TestReadChunkResponseIsWhatReadResponseGives parses answers as the
// node's read loop writes them with both parsers.
func TestReadChunkResponseIsWhatReadResponseGives(t *testing.T) {
	for _, raw := range []string{
		"HTTP/1.1 206 Partial Content\r\nContent-Length: 5\r\nContent-Range: bytes 0-4/10\r\nContent-Type: application/octet-stream\r\nEtag: \"e\"\r\nX-Distcache-Cache: hit_ram\r\nX-Distcache-Chunk-Size: 4194304\r\nX-Distcache-Ring-Epoch: 3\r\n\r\nhello",
		"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nEtag: \"e\"\r\nX-Odd-Name: a\r\nx-odd-name: b\r\n\r\n",
		"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nX-Distcache-Error: NoSuchKey\r\nContent-Length: 17\r\n\r\n{\"code\":\"NoSuch\"}",
		"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\nto the end",
		"HTTP/1.1 416 Requested Range Not Satisfiable\nContent-Length: 2\n\nno",
	} {
		req := httptest.NewRequest(http.MethodGet, "https://node/v1/objects/b/k?chunk=0", nil)
		want, err := http.ReadResponse(bufio.NewReader(strings.NewReader(raw)), req)
		testutil.Must(t, err)
		wantBody, err := io.ReadAll(want.Body)
		testutil.Must(t, err)
		got, err := readChunkResponse(bufio.NewReader(strings.NewReader(raw)), req)
		testutil.Must(t, err)
		gotBody, err := io.ReadAll(got.Body)
		testutil.Must(t, err)
		if got.StatusCode != want.StatusCode || got.Status != want.Status || got.ContentLength != want.ContentLength ||
			got.Close != want.Close || !reflect.DeepEqual(got.Header, want.Header) || string(gotBody) != string(wantBody) {
			t.Errorf("%q:\ngot  %d %q len %d close %v %v %q\nwant %d %q len %d close %v %v %q", raw,
				got.StatusCode, got.Status, got.ContentLength, got.Close, got.Header, gotBody,
				want.StatusCode, want.Status, want.ContentLength, want.Close, want.Header, wantBody)
		}
	}
	for _, raw := range []string{
		"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx",
		"HTTP/1.1 2x0 OK\r\nContent-Length: 1\r\n\r\nx",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nx",
		"HTTP/1.1 200 OK\r\n\r\nno length, no close",
		"HTTP/1.1 200 OK\r\nno colon\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n",
	} {
		req := httptest.NewRequest(http.MethodGet, "https://node/v1/objects/b/k?chunk=0", nil)
		if _, err := readChunkResponse(bufio.NewReader(strings.NewReader(raw)), req); err == nil {
			t.Errorf("%q parsed without error", raw)
		}
	}
}

// readServer is a TLS server that negotiates nodeapi.ProtoRead only and
// answers each request with answer(request), as a node's read loop does,
// counting connections and keeping the requests it read.
type readServer struct {
	addr  string
	conns atomic.Int64
	mu    sync.Mutex
	reqs  []*http.Request
}

func newReadServer(t *testing.T, s *tlsServer, answer func(w *bufio.Writer, r *http.Request) bool) *readServer {
	t.Helper()
	cfg := s.TLS.Clone()
	cfg.NextProtos = []string{nodeapi.ProtoRead}
	if inner := cfg.GetConfigForClient; inner != nil { // the node's configuration re-reads its files
		cfg.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			c, err := inner(hello)
			if err != nil || c == nil {
				return c, err
			}
			c = c.Clone()
			c.NextProtos = []string{nodeapi.ProtoRead}
			return c, nil
		}
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	testutil.Must(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	rs := &readServer{addr: ln.Addr().String()}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			rs.conns.Add(1)
			go func() {
				defer c.Close()
				br, bw := bufio.NewReader(c), bufio.NewWriter(c)
				for {
					r, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					rs.mu.Lock()
					rs.reqs = append(rs.reqs, r)
					rs.mu.Unlock()
					if !answer(bw, r) || bw.Flush() != nil {
						return
					}
				}
			}()
		}
	}()
	return rs
}

// TestInlineChunkReads: getChunk writes the request RoundTrip would, keeps
// its connection through good and error answers read to their end, drops
// it when the context ends mid-body, and leaves nodes that do not offer
// read connections to RoundTrip.
func TestInlineChunkReads(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	plain := newTLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	body := strings.Repeat("y", 1000)
	rs := newReadServer(t, plain, func(w *bufio.Writer, r *http.Request) bool {
		switch r.URL.Path {
		case "/v1/objects/b/ok":
			_, _ = io.WriteString(w, "HTTP/1.1 206 Partial Content\r\nEtag: \"e\"\r\nContent-Length: 1000\r\n\r\n"+body)
		case "/v1/objects/b/missing":
			msg := `{"code":"NoSuchKey","message":"no such key"}`
			_, _ = io.WriteString(w, "HTTP/1.1 404 Not Found\r\nX-Distcache-Error: NoSuchKey\r\nContent-Length: "+strconv.Itoa(len(msg))+"\r\n\r\n"+msg)
		case "/v1/objects/b/hang":
			_, _ = io.WriteString(w, "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\npart")
			_ = w.Flush()
			<-release
			return false
		}
		return true
	})
	tr := plain.transport(t)
	ctx := t.Context()
	g := chunkGet{host: rs.addr, path: "/v1/objects/b/ok", etag: `"e"`, tenant: "team-a", index: 3, first: 1000, last: 1999}
	read := func(g chunkGet) (chunkReply, error) {
		t.Helper()
		r, ok, err := tr.getChunk(ctx, rs.addr, g)
		if !ok {
			t.Fatal("getChunk did not take a read connection")
		}
		return r, err
	}
	for i := 0; i < 3; i++ {
		r, err := read(g)
		testutil.Must(t, err)
		buf := make([]byte, 1000)
		if r.code != http.StatusPartialContent || r.header.Get("ETag") != `"e"` || r.readBody(buf) != nil || string(buf) != body {
			t.Fatalf("answer %d %v", r.code, r.header)
		}
		r.done(true)
		missing := g
		missing.path = "/v1/objects/b/missing"
		r, err = read(missing)
		testutil.Must(t, err)
		resp, left := r.response()
		if e := answerError(opGetChunk, "b", "missing", rs.addr, resp); e.Kind != ErrNotFound || e.Code != "NoSuchKey" || e.Message != "no such key" {
			t.Fatalf("error answer: %+v", e)
		}
		r.done(left.N == 0)
	}
	if n := rs.conns.Load(); n != 1 {
		t.Fatalf("%d connections for 6 answers read to their end, want 1", n)
	}
	// What went out is what RoundTrip sends for the same chunk read.
	rs.mu.Lock()
	got := rs.reqs[0]
	rs.mu.Unlock()
	if got.URL.RawQuery != "chunk=3&etag=%22e%22" || got.Header.Get("Range") != "bytes=1000-1999" ||
		got.Header.Get("X-Distcache-Tenant") != "team-a" || got.Host != rs.addr {
		t.Fatalf("request %s %v host %s", got.URL, got.Header, got.Host)
	}

	// The context ends while the body is read: the read fails with the
	// context's error and the connection is not reused.
	hang := g
	hang.path, hang.first = "/v1/objects/b/hang", -1
	cctx, cancel := context.WithCancel(ctx)
	r, ok, err := tr.getChunk(cctx, rs.addr, hang)
	if !ok || err != nil {
		t.Fatalf("hang: %v %v", ok, err)
	}
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	if err := r.readBody(make([]byte, 1000)); !errors.Is(err, context.Canceled) {
		t.Fatalf("body read after cancel: %v, want context.Canceled", err)
	}
	r.done(false)
	r, err = read(g)
	testutil.Must(t, err)
	testutil.Must(t, r.readBody(make([]byte, 1000)))
	r.done(true)
	if n := rs.conns.Load(); n != 2 {
		t.Fatalf("%d connections, want 2 (the hang took the first one)", n)
	}

	// A server without read connections: nothing is sent, RoundTrip's turn.
	u, _ := url.Parse(plain.URL)
	if _, ok, err := tr.getChunk(ctx, u.Host, g); ok || err != nil {
		t.Fatalf("getChunk on a plain HTTP/1.1 server: ok %v, err %v", ok, err)
	}
	resp, err := get(t, tr, ctx, http.MethodGet, plain.URL)
	testutil.Must(t, err)
	readAll(t, resp, "ok")
}
