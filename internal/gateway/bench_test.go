package gateway

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/distcache/distcache/internal/client"
	"github.com/distcache/distcache/internal/getserver"
	"github.com/distcache/distcache/internal/sigv4"
	"github.com/distcache/distcache/internal/testutil"
)

// The gateway's 64 KiB hit path (B1's range cell) without the cache client
// or the S3 client: GetObject of a 64 KiB range, SigV4-verified, of an
// object whose metadata and pages a memCache holds (as the client's
// metadata leases and page cache do on a hit). BenchmarkGetObjectHitHandler
// calls ServeHTTP directly: the gateway's own work and allocations.
// BenchmarkGetObjectHitServer serves it from net/http's server over
// loopback to a client that writes pre-signed requests and skips the
// answers' bodies: the gateway process's share of a hit.

const (
	benchAccessKey = "AKIDBENCH"
	benchSecret    = "bench-secret-key"
	benchRegion    = "us-east-1"
	benchPage      = 1 << 20
	benchObject    = 16 << 20
	benchRange     = 64 << 10
	benchRequests  = 64 // distinct signed requests (random offsets)
)

// memCache holds one object's metadata and bytes, and lends them as the
// page cache does (CachedView within a page).
type memCache struct {
	bucket, key string
	meta        client.Meta
	data        []byte
}

func (c *memCache) Stat(_ context.Context, bucket, key string) (client.Meta, error) {
	if bucket != c.bucket || key != c.key {
		return client.Meta{}, client.ErrNotFound
	}
	return c.meta, nil
}

func (c *memCache) ReadAt(_ context.Context, _, _ string, _ client.Meta, p []byte, off int64) (int, error) {
	return copy(p, c.data[off:]), nil
}

func (c *memCache) Put(context.Context, string, string, io.Reader, int64, string) (client.Meta, error) {
	return client.Meta{}, errors.New("memCache: read only")
}

func (c *memCache) View(_ context.Context, _, _ string, _ client.Meta, off, n int64) (client.PageView, bool, error) {
	v, ok := c.lend(off, n)
	return v, ok, nil
}

func (c *memCache) CachedView(_ context.Context, _, _ string, _ client.Meta, off, n int64) (client.PageView, bool) {
	return c.lend(off, n)
}

func (c *memCache) lend(off, n int64) (client.PageView, bool) {
	if off/benchPage != (off+n-1)/benchPage {
		return client.PageView{}, false
	}
	return client.PageView{Data: c.data[off : off+n : off+n]}, true
}

func (c *memCache) NoteRead(context.Context, string, string, client.Meta, int64, int64) {}

// benchGateway is a gateway in front of a memCache holding
// bench/object, and the time its requests are signed at.
func benchGateway(b testing.TB) (*Gateway, time.Time) {
	b.Helper()
	now := time.Now().UTC().Truncate(time.Second)
	data := testutil.RandomBytes(rand.New(rand.NewPCG(1, 2)), benchObject)
	cache := &memCache{bucket: "bench", key: "data/part-00042/column.bin", data: data, meta: client.Meta{
		Size: benchObject, ETag: `"0123456789abcdef0123456789abcdef"`, ContentType: "application/octet-stream",
		LastModified: now.Add(-time.Hour)}}
	piece, ahead := ReadGeometry(4<<20, benchPage, true, 8)
	g, err := New(Config{
		Verifier: &sigv4.Verifier{Store: sigv4.NewStaticStore(sigv4.Credentials{AccessKeyID: benchAccessKey, SecretAccessKey: benchSecret}),
			Region: benchRegion, Now: func() time.Time { return now }},
		Cache: cache, Upstream: &Upstream{Nodes: func() []string { return nil }},
		ReadPieceBytes: piece, ReadAhead: ahead,
	})
	if err != nil {
		b.Fatal(err)
	}
	return g, now
}

// signedGET is a GetObject of [off, off+benchRange) as aws-sdk-go-v2 sends
// it (its headers, its query), signed at t.
func signedGET(b testing.TB, host string, off int64, t time.Time) *http.Request {
	b.Helper()
	r, err := http.NewRequest(http.MethodGet, "http://"+host+"/bench/data/part-00042/column.bin?x-id=GetObject", nil)
	if err != nil {
		b.Fatal(err)
	}
	r.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", off, off+benchRange-1))
	r.Header.Set("Accept-Encoding", "identity")
	r.Header.Set("Amz-Sdk-Invocation-Id", "0a6fc3a2-c572-4bf6-adcf-d85b61fc21b4")
	r.Header.Set("Amz-Sdk-Request", "attempt=1; max=3")
	r.Header.Set("User-Agent", "aws-sdk-go-v2/1.47.6 os/linux lang/go#1.26 api/s3#1.114.7")
	r.Header.Set("X-Amz-Content-Sha256", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
	creds := aws.Credentials{AccessKeyID: benchAccessKey, SecretAccessKey: benchSecret}
	signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	if err := signer.SignHTTP(context.Background(), creds, r, r.Header.Get("X-Amz-Content-Sha256"), "s3", benchRegion, t); err != nil {
		b.Fatal(err)
	}
	return r
}

func benchOffsets() []int64 {
	rnd := rand.New(rand.NewPCG(3, 4))
	offs := make([]int64, benchRequests)
	for i := range offs {
		offs[i] = rnd.Int64N(benchObject/benchRange) * benchRange
	}
	return offs
}

// discardWriter is a ResponseWriter that counts the body and drops it.
type discardWriter struct {
	h      http.Header
	status int
	n      int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) WriteHeader(status int)      { w.status = status }
func (w *discardWriter) Write(p []byte) (int, error) { w.n += len(p); return len(p), nil }

// SetWriteDeadline is there as in net/http's ResponseWriter.
func (w *discardWriter) SetWriteDeadline(time.Time) error { return nil }

func BenchmarkGetObjectHitHandler(b *testing.B) {
	g, t := benchGateway(b)
	var reqs []*http.Request
	for _, off := range benchOffsets() {
		r := signedGET(b, "127.0.0.1:9000", off, t)
		r.RequestURI = r.URL.RequestURI()
		reqs = append(reqs, r)
	}
	w := &discardWriter{h: http.Header{}}
	b.SetBytes(benchRange)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		r := reqs[i%len(reqs)]
		i++
		clear(w.h)
		w.status, w.n = 0, 0
		g.ServeHTTP(w, r)
		if w.status != http.StatusPartialContent || w.n != benchRange {
			b.Fatalf("status %d, %d bytes", w.status, w.n)
		}
	}
}

// BenchmarkGetObjectHitServer: the hits through net/http's server.
func BenchmarkGetObjectHitServer(b *testing.B) {
	benchHitsOverTCP(b, func(g *Gateway, ln net.Listener) (closer func() error) {
		srv := &http.Server{Handler: g, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute}
		go func() { _ = srv.Serve(ln) }()
		return srv.Close
	})
}

// BenchmarkGetObjectHitReadServer: the hits through the read server that
// serves them in `cachenode gateway` (internal/embed).
func BenchmarkGetObjectHitReadServer(b *testing.B) {
	benchHitsOverTCP(b, func(g *Gateway, ln net.Listener) (closer func() error) {
		srv := &getserver.Server{Fallback: &http.Server{Handler: g, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute}}
		go func() { _ = srv.Serve(ln) }()
		return srv.Close
	})
}

// benchHitsOverTCP measures GetObject hits from a client on loopback
// writing pre-signed requests one at a time, to a server that serve starts
// on a LimitUnsent listener.
func benchHitsOverTCP(b *testing.B, serve func(g *Gateway, ln net.Listener) (closer func() error)) {
	g, t := benchGateway(b)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	closer := serve(g, LimitUnsent(ln, DefaultClientUnsentBytes))
	b.Cleanup(func() { _ = closer() })
	var wire [][]byte
	for _, off := range benchOffsets() {
		var buf bytes.Buffer
		if err := signedGET(b, ln.Addr().String(), off, t).Write(&buf); err != nil {
			b.Fatal(err)
		}
		wire = append(wire, buf.Bytes())
	}
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReaderSize(conn, 64<<10)
	b.SetBytes(benchRange)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := conn.Write(wire[i%len(wire)]); err != nil {
			b.Fatal(err)
		}
		i++
		if err := skipResponse(br); err != nil {
			b.Fatal(err)
		}
	}
}

// skipResponse reads a 206 answer and discards its body.
func skipResponse(br *bufio.Reader) error {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return err
	}
	if !bytes.HasPrefix(line, []byte("HTTP/1.1 206 ")) {
		return fmt.Errorf("answer %q", line)
	}
	length := -1
	for {
		line, err = br.ReadSlice('\n')
		if err != nil {
			return err
		}
		if len(line) <= 2 {
			break
		}
		if v, ok := bytes.CutPrefix(line, []byte("Content-Length: ")); ok {
			if length, err = strconv.Atoi(string(bytes.TrimSpace(v))); err != nil {
				return err
			}
		}
	}
	if length != benchRange {
		return fmt.Errorf("Content-Length %d", length)
	}
	_, err = br.Discard(length)
	return err
}
