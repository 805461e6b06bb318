package node_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
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
	must(b, err)
	block, _ := pem.Decode(leaf.CertPEM)
	cert, err := x509.ParseCertificate(block.Bytes)
	must(b, err)
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
