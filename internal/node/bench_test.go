package node_test

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	neturl "net/url"
	"syscall"
	"testing"
	"time"

	"github.com/distcache/distcache/internal/pki"
	"github.com/distcache/distcache/internal/testutil"
)

// BenchmarkHitPath measures the node's own work on a RAM hit (routing,
// authorization, metadata, store lookup, response) without TLS or network:
// what the node adds on top of the transport.
func BenchmarkHitPath(b *testing.B) {
	h := newHarness(b, options{ramBytes: 64 << 20, immutable: true})
	data := make([]byte, 4*testChunk)
	h.putDirect("bucket-a", "hot", data)
	a := h.client(tenant("team-a"))
	h.get(a, "bucket-a", "hot", "", nil) // warm every chunk
	handler := h.handler
	// The verified chain a TLS handshake would have produced for team-a.
	leaf, err := h.ca.IssueClient(tenant("team-a"), time.Hour)
	testutil.Must(b, err)
	block, _ := pem.Decode(leaf.CertPEM)
	cert, err := x509.ParseCertificate(block.Bytes)
	testutil.Must(b, err)
	state := &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{cert, h.ca.Cert}}}
	for _, size := range []int{64 << 10, testChunk} {
		b.Run(fmt.Sprintf("range=%dKiB", size>>10), func(b *testing.B) {
			req := httptest.NewRequest(http.MethodGet, "/v1/objects/bucket-a/hot?chunk=1", nil)
			req.TLS = state
			if size < testChunk {
				req.Header.Set("Range", fmt.Sprintf("bytes=0-%d", size-1))
			}
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				handler.ServeHTTP(w, req)
				if w.Code/100 != 2 {
					b.Fatalf("status %d", w.Code)
				}
			}
		})
	}
}

// BenchmarkHitPathTLS is a 64 KiB ranged RAM hit over real mTLS and HTTP/1.1
// with net/http on both ends (8 concurrent readers), next to a bare net/http
// handler that serves the same bytes from memory behind the same TLS
// configuration: the difference is what the node's handler costs per read.
// cpu-us/op counts the client and the server (same process).
func BenchmarkHitPathTLS(b *testing.B) {
	h := newHarness(b, options{ramBytes: 64 << 20, immutable: true})
	data := make([]byte, 4*testChunk)
	_, _ = rand.Read(data)
	h.putDirect("bucket-a", "hot", data)
	a := h.client(tenant("team-a"))
	warm := h.get(a, "bucket-a", "hot", "", nil) // every chunk into RAM
	etag := warm.header.Get("ETag")

	bare := &http.Server{Handler: pki.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		off := int64(testChunk)
		hd := w.Header()
		hd.Set("ETag", etag)
		hd.Set("Content-Type", "application/octet-stream")
		hd.Set("Content-Length", "65536")
		w.WriteHeader(http.StatusPartialContent)
		_, _ = w.Write(data[off : off+64<<10])
	})), TLSConfig: h.server.TLSConfig, TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	testutil.Must(b, err)
	go func() { _ = bare.Serve(tls.NewListener(ln, h.server.TLSConfig)) }()
	b.Cleanup(func() { _ = bare.Close() })

	for _, tc := range []struct{ name, addr string }{{"node", h.addr}, {"bare", ln.Addr().String()}} {
		b.Run(tc.name, func(b *testing.B) {
			url := "https://" + tc.addr + "/v1/objects/bucket-a/hot?chunk=1&etag=" + neturl.QueryEscape(etag)
			b.SetBytes(64 << 10)
			b.ReportAllocs()
			b.SetParallelism(4) // 8 readers on 2 cores
			cpu0 := cpuTime()
			b.RunParallel(func(pb *testing.PB) {
				buf := make([]byte, 64<<10)
				for pb.Next() {
					req, _ := http.NewRequest(http.MethodGet, url, nil)
					req.Header.Set("Range", "bytes=0-65535")
					resp, err := a.Transport.RoundTrip(req)
					if err != nil {
						b.Error(err)
						return
					}
					_, err = io.ReadFull(resp.Body, buf)
					resp.Body.Close()
					if err != nil || resp.StatusCode != http.StatusPartialContent {
						b.Errorf("status %d: %v", resp.StatusCode, err)
						return
					}
				}
			})
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-us/op")
		})
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
