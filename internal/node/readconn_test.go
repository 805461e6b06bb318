package node_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/distcache/distcache/internal/client"
	"github.com/distcache/distcache/internal/nodeapi"
	"github.com/distcache/distcache/internal/pki"
	"github.com/distcache/distcache/internal/testutil"
)

// TestReadConnectionsAnswerAsHandler sends the same chunk reads on plain
// HTTP/1.1 connections (net/http's server and Handler) and on
// nodeapi.ProtoRead connections (the read loop): status, headers, body and
// metrics must be the same.
func TestReadConnectionsAnswerAsHandler(t *testing.T) {
	h := newHarness(t, options{ramBytes: 16 << 20})
	data := testutil.RandomBytes(rand.New(rand.NewPCG(7, 7)), 2*testChunk+100)
	h.putDirect("bucket-a", "dir/obj", data)
	h.putDirect("bucket-a", "sp ace+plus", data[:100])
	plain, fast := h.client(tenant("team-a")), h.readClient(tenant("team-a"))
	etag := h.get(plain, "bucket-a", "dir/obj", "chunk=0", nil).header.Get("ETag")
	tests := []struct {
		name, bucket, key, query, rng string
	}{
		{"whole chunk", "bucket-a", "dir/obj", "chunk=1", ""},
		{"pinned range", "bucket-a", "dir/obj", "chunk=0&etag=" + etag, "bytes=100-65635"},
		{"last chunk", "bucket-a", "dir/obj", "chunk=2", "bytes=50-"},
		{"suffix", "bucket-a", "dir/obj", "chunk=2", "bytes=-10"},
		{"range past the end", "bucket-a", "dir/obj", "chunk=2", "bytes=100-"},
		{"bad range", "bucket-a", "dir/obj", "chunk=0", "bytes=5-2"},
		{"chunk past the end", "bucket-a", "dir/obj", "chunk=9", ""},
		{"bad chunk", "bucket-a", "dir/obj", "chunk=x", ""},
		{"other version", "bucket-a", "dir/obj", `chunk=0&etag="nope"`, ""},
		{"missing object", "bucket-a", "missing", "chunk=0", ""},
		{"escaped key", "bucket-a", "sp%20ace%2Bplus", "chunk=0", "bytes=1-3"},
		{"path the mux cleans", "bucket-a", "dir/../obj", "chunk=0", ""},
		{"bucket of another tenant", "bucket-b", "dir/obj", "chunk=0", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var hdr map[string]string
			if tc.rng != "" {
				hdr = map[string]string{"Range": tc.rng}
			}
			h.get(plain, tc.bucket, tc.key, tc.query, hdr) // a miss fills the chunk: compare hits
			want := h.get(plain, tc.bucket, tc.key, tc.query, hdr)
			before := h.counter("distcache_requests_total", map[string]string{"op": "get_chunk"})
			req, err := http.NewRequest(http.MethodGet, h.url(tc.bucket, tc.key, tc.query), nil)
			testutil.Must(t, err)
			if tc.rng != "" {
				req.Header.Set("Range", tc.rng)
			}
			resp, err := fast.Do(req)
			testutil.Must(t, err)
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			testutil.Must(t, err)
			if resp.TLS == nil || resp.TLS.NegotiatedProtocol != nodeapi.ProtoRead {
				t.Fatalf("negotiated %q, want %q", resp.TLS.NegotiatedProtocol, nodeapi.ProtoRead)
			}
			if resp.StatusCode != want.status || !bytes.Equal(body, want.body) {
				t.Fatalf("read connection: %d %q; net/http: %d %q", resp.StatusCode, cut(body), want.status, cut(want.body))
			}
			for k := range want.header {
				if k == "Date" || k == "X-Content-Type-Options" {
					continue
				}
				if got, w := resp.Header.Values(k), want.header.Values(k); strings.Join(got, ",") != strings.Join(w, ",") {
					t.Errorf("header %s: %q, want %q", k, got, w)
				}
			}
			// The node counts a request once its answer is written, which
			// may be just after the client has read it all (the plain
			// requests' counts may land late too, so at least one more).
			deadline := time.Now().Add(30 * time.Second)
			for {
				after := h.counter("distcache_requests_total", map[string]string{"op": "get_chunk"})
				if after >= before+1 {
					break
				}
				if time.Now().After(deadline) {
					t.Errorf("get_chunk requests counted %v -> %v, want one more", before, after)
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
	if n := h.counter("distcache_chunk_reads_total", map[string]string{"tenant": "team-a", "result": "hit_ram"}); n == 0 {
		t.Error("no RAM hits counted")
	}
}

func cut(b []byte) []byte { return b[:min(len(b), 120)] }

// TestReadConnectionsRefuseOtherRequests: a read connection carries chunk
// reads only; anything else is a 400 that ends the connection.
func TestReadConnectionsRefuseOtherRequests(t *testing.T) {
	h := newHarness(t, options{})
	h.putDirect("bucket-a", "k", []byte("0123456789"))
	fast := h.readClient(tenant("team-a"))
	for _, tc := range []struct{ method, url string }{
		{http.MethodGet, h.url("bucket-a", "k", "")},
		{http.MethodHead, h.url("bucket-a", "k", "chunk=0")},
		{http.MethodGet, "https://" + h.addr + "/v1/ring"},
		{http.MethodPut, h.url("bucket-a", "k", "chunk=0")},
	} {
		req, err := http.NewRequest(tc.method, tc.url, strings.NewReader(""))
		testutil.Must(t, err)
		resp, err := fast.Do(req)
		testutil.Must(t, err)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !resp.Close {
			t.Errorf("%s %s: status %d, close %v; want 400 and the connection closed", tc.method, tc.url, resp.StatusCode, resp.Close)
		}
	}
}

// TestShutdownClosesIdleReadConnections: net/http's Shutdown cannot close
// connections it handed over; ServeReads closes them when they are idle.
func TestShutdownClosesIdleReadConnections(t *testing.T) {
	h := newHarness(t, options{})
	h.putDirect("bucket-a", "k", []byte("0123456789"))
	fast := h.readClient(tenant("team-a"))
	if resp := h.get(fast, "bucket-a", "k", "chunk=0", nil); resp.status != http.StatusOK {
		t.Fatalf("status %d", resp.status)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := h.server.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown with an idle read connection: %v", err)
	}
	_, err := fast.Get(h.url("bucket-a", "k", "chunk=0"))
	if err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a read after shutdown: %v; want a connection error", err)
	}
}

// TestClientReadsOverReadConnections: internal/client against a node that
// serves read connections: byte-exact ranges, and the errors a read can
// meet (a missing object, a changed version) still map to the client's
// sentinels.
func TestClientReadsOverReadConnections(t *testing.T) {
	h := newHarness(t, options{ramBytes: 16 << 20})
	data := testutil.RandomBytes(rand.New(rand.NewPCG(3, 3)), 3*testChunk+7)
	h.putDirect("bucket-a", "obj", data)
	h.putDirect("bucket-a", "with space+plus%pct?q#h", data[:10])
	h.client(tenant("team-a")) // writes team-a's certificate files
	cfg, err := pki.ClientTLSConfig(filepath.Join(h.dir, "tenant-team-a.crt"), filepath.Join(h.dir, "tenant-team-a.key"), h.serverCA)
	testutil.Must(t, err)
	c, err := client.New(t.Context(), client.Config{Seeds: []string{"https://" + h.addr}, TLS: cfg, ChunkSize: testChunk})
	testutil.Must(t, err)
	defer c.Close()
	m, err := c.Stat(t.Context(), "bucket-a", "obj")
	testutil.Must(t, err)
	r := rand.New(rand.NewPCG(4, 4))
	for i := 0; i < 50; i++ {
		off := r.IntN(len(data))
		n := min(1+r.IntN(2*testChunk), len(data)-off)
		buf := make([]byte, n)
		if _, err := c.ReadAt(t.Context(), "bucket-a", "obj", m, buf, int64(off)); err != nil {
			t.Fatalf("ReadAt(%d, %d): %v", off, n, err)
		}
		if !bytes.Equal(buf, data[off:off+n]) {
			t.Fatalf("ReadAt(%d, %d): wrong bytes", off, n)
		}
	}
	stale := m
	stale.ETag = `"not-the-etag"`
	if _, err := c.ReadAt(t.Context(), "bucket-a", "obj", stale, make([]byte, 10), 0); !errors.Is(err, client.ErrChanged) {
		t.Errorf("read of another version: %v, want ErrChanged", err)
	}
	missing := m
	if _, err := c.ReadAt(t.Context(), "bucket-a", "missing", missing, make([]byte, 10), 0); !errors.Is(err, client.ErrNotFound) && !errors.Is(err, client.ErrChanged) {
		t.Errorf("read of a missing object: %v, want ErrNotFound or ErrChanged", err)
	}
	odd, err := c.Stat(t.Context(), "bucket-a", "with space+plus%pct?q#h")
	testutil.Must(t, err)
	buf10 := make([]byte, 10)
	if _, err := c.ReadAt(t.Context(), "bucket-a", "with space+plus%pct?q#h", odd, buf10, 0); err != nil || !bytes.Equal(buf10, data[:10]) {
		t.Fatalf("read of a key that needs escaping: %v", err)
	}
	// The reads after the errors still work (connections closed by an
	// error were replaced).
	buf := make([]byte, 100)
	if _, err := c.ReadAt(t.Context(), "bucket-a", "obj", m, buf, 5); err != nil || !bytes.Equal(buf, data[5:105]) {
		t.Fatalf("read after the errors: %v", err)
	}
}

// TestReadAnswerIsOneSocketWrite: under a BatchingListener (as cachenode
// serve listens), a 64 KiB range answer, five TLS records, leaves the node
// in one write; an answer longer than a batch arrives whole, in several.
func TestReadAnswerIsOneSocketWrite(t *testing.T) {
	h := newHarness(t, options{ramBytes: 16 << 20})
	data := testutil.RandomBytes(rand.New(rand.NewPCG(9, 9)), testChunk)
	h.putDirect("bucket-a", "obj", data)
	fast := h.readClient(tenant("team-a"))
	rng := map[string]string{"Range": "bytes=65536-131071"}
	h.get(fast, "bucket-a", "obj", "chunk=0", rng) // fills the chunk and opens the connection
	for i := 0; i < 3; i++ {
		before := h.socketWrites.Load()
		resp := h.get(fast, "bucket-a", "obj", "chunk=0", rng)
		if resp.status != http.StatusPartialContent || !bytes.Equal(resp.body, data[65536:131072]) {
			t.Fatalf("range read: status %d, %d bytes", resp.status, len(resp.body))
		}
		if n := h.socketWrites.Load() - before; n != 1 {
			t.Fatalf("a 64 KiB answer took %d socket writes, want 1", n)
		}
	}
	before := h.socketWrites.Load()
	resp := h.get(fast, "bucket-a", "obj", "chunk=0", nil)
	if resp.status != http.StatusOK || !bytes.Equal(resp.body, data) {
		t.Fatalf("whole chunk: status %d, %d bytes", resp.status, len(resp.body))
	}
	if n := h.socketWrites.Load() - before; n < 2 || n > 4 {
		t.Fatalf("a %d KiB answer took %d socket writes, want 2-4 (batches of at most 128 KiB)", testChunk>>10, n)
	}
}
