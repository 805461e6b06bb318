package client

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
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
)

// tlsServer is an HTTP/1.1 server behind real mTLS (the node's server
// configuration) that counts the connections it accepted.
type tlsServer struct {
	*httptest.Server
	conns     atomic.Int64
	clientTLS *tls.Config
}

func newTLSServer(t *testing.T, h http.Handler) *tlsServer {
	t.Helper()
	dir := t.TempDir()
	ca, err := pki.NewCA("transport test CA", time.Hour)
	mustT(t, err)
	server, err := ca.IssueServer("localhost", []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)}, time.Hour)
	mustT(t, err)
	tenant, err := ca.IssueClient(pki.Identity{Kind: pki.KindTenant, Name: "team-a"}, time.Hour)
	mustT(t, err)
	mustT(t, pki.WriteFiles(dir, "server", server))
	mustT(t, pki.WriteFiles(dir, "tenant", tenant))
	caFile := filepath.Join(dir, "ca.crt")
	mustT(t, os.WriteFile(caFile, ca.CertPEM, 0o600))
	serverTLS, err := pki.ServerTLSConfig(filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key"), caFile)
	mustT(t, err)
	s := &tlsServer{Server: httptest.NewUnstartedServer(h)}
	s.clientTLS, err = pki.ClientTLSConfig(filepath.Join(dir, "tenant.crt"), filepath.Join(dir, "tenant.key"), caFile)
	mustT(t, err)
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
	tr := newInlineTransport(newTransport(Config{TLS: s.clientTLS}))
	t.Cleanup(tr.close)
	return tr
}

func get(t *testing.T, tr http.RoundTripper, ctx context.Context, method, u string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	mustT(t, err)
	return tr.RoundTrip(req)
}

// readAll reads an answer's body whole, checking it is want.
func readAll(t *testing.T, resp *http.Response, want string) {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	mustT(t, err)
	mustT(t, resp.Body.Close())
	if string(b) != want {
		t.Fatalf("body %q, want %q", b, want)
	}
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
		mustT(t, err)
		if resp.StatusCode != http.StatusOK || resp.ContentLength != int64(len(body)) || resp.TLS == nil {
			t.Fatalf("status %d, length %d, TLS %v", resp.StatusCode, resp.ContentLength, resp.TLS != nil)
		}
		// As getChunk reads: exactly Content-Length bytes, never to EOF.
		buf := make([]byte, len(body))
		_, err = io.ReadFull(resp.Body, buf)
		mustT(t, err)
		mustT(t, resp.Body.Close())
		resp, err = get(t, tr, ctx, http.MethodHead, s.URL+"/a")
		mustT(t, err)
		readAll(t, resp, "")
		resp, err = get(t, tr, ctx, http.MethodGet, s.URL+"/chunked")
		mustT(t, err)
		readAll(t, resp, body[:20])
		resp, err = get(t, tr, ctx, http.MethodGet, s.URL+"/empty")
		mustT(t, err)
		readAll(t, resp, "")
	}
	if n := s.conns.Load(); n != 1 {
		t.Fatalf("%d connections for 20 sequential requests read to their end, want 1", n)
	}

	// A body closed before its end takes its connection with it.
	resp, err := get(t, tr, ctx, http.MethodGet, s.URL+"/a")
	mustT(t, err)
	_, err = io.ReadFull(resp.Body, make([]byte, 10))
	mustT(t, err)
	mustT(t, resp.Body.Close())
	resp, err = get(t, tr, ctx, http.MethodGet, s.URL+"/a")
	mustT(t, err)
	readAll(t, resp, body)
	if n := s.conns.Load(); n != 2 {
		t.Fatalf("%d connections, want 2 (one replacing the connection of the body closed early)", n)
	}

	// Headers go out as given; requests with a body go through http.Transport.
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/a", nil)
	mustT(t, err)
	req.Header.Set("X-Test", "yes")
	resp, err = tr.RoundTrip(req)
	mustT(t, err)
	if resp.Header.Get("X-Test") != "yes" {
		t.Errorf("header X-Test came back as %q", resp.Header.Get("X-Test"))
	}
	readAll(t, resp, body)
	req.Header.Set("X-Test", "a\r\nX-Injected: 1")
	if _, err := tr.RoundTrip(req); err == nil {
		t.Error("a header value with CRLF was sent")
	}
	req, err = http.NewRequestWithContext(ctx, http.MethodPut, s.URL+"/a", strings.NewReader("payload"))
	mustT(t, err)
	resp, err = tr.RoundTrip(req)
	mustT(t, err)
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
		mustT(t, err)
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
	mustT(t, err)
	_, err = io.ReadFull(resp.Body, make([]byte, 4))
	mustT(t, err)
	cancel()
	if _, err := io.ReadFull(resp.Body, make([]byte, 10)); !errors.Is(err, context.Canceled) {
		t.Fatalf("body read after cancel: %v, want context.Canceled", err)
	}
	mustT(t, resp.Body.Close())

	// The transport still works, on a new connection.
	resp, err = get(t, tr, t.Context(), http.MethodGet, s.URL+"/fast")
	mustT(t, err)
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
		mustT(t, err)
		want, err := url.Parse("https://127.0.0.1:1" + nodeapi.ObjectPath(tc.bucket, tc.key) + "?chunk=1&etag=%22e%22")
		mustT(t, err)
		if req.URL.Path != want.Path || req.URL.EscapedPath() != want.EscapedPath() || req.URL.RequestURI() != want.RequestURI() ||
			req.URL.String() != want.String() || req.Host != want.Host {
			t.Errorf("%q/%q: built %q (path %q), parsed %q (path %q)", tc.bucket, tc.key, req.URL, req.URL.Path, want, want.Path)
		}
	}
}

func mustT(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
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
		mustT(t, err)
		wantBody, err := io.ReadAll(want.Body)
		mustT(t, err)
		got, err := readChunkResponse(bufio.NewReader(strings.NewReader(raw)), req)
		mustT(t, err)
		gotBody, err := io.ReadAll(got.Body)
		mustT(t, err)
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
