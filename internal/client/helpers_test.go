package client_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/distcache/distcache/internal/chunk"
	"github.com/distcache/distcache/internal/client"
	"github.com/distcache/distcache/internal/testutil"
	"github.com/distcache/distcache/internal/testutil/nodecluster"
)

const cs = nodecluster.DefaultChunkSize

// newClient connects a client to the cluster with tlsCfg's certificate.
// The ring is only refreshed when something triggers it unless mod sets
// RingRefresh, so tests see exactly what they cause.
func newClient(t testing.TB, c *nodecluster.Cluster, tlsCfg *tls.Config, mod func(*client.Config)) (*client.Client, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	cfg := client.Config{Seeds: c.Seeds(), TLS: tlsCfg, Registerer: reg, Timeout: 10 * time.Second, RingRefresh: time.Hour}
	if mod != nil {
		mod(&cfg)
	}
	cl, err := client.New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("client.New: %v", err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	return cl, reg
}

// putStat puts data straight into S3 as bucket/key, behind the cache, and
// returns cl's Stat of it.
func putStat(t testing.TB, c *nodecluster.Cluster, cl *client.Client, bucket, key string, data []byte) client.Meta {
	t.Helper()
	c.PutDirect(bucket, key, data)
	m, err := cl.Stat(context.Background(), bucket, key)
	testutil.Must(t, err)
	return m
}

// readBack reads bucket/key (metadata m) whole through cl and fails the
// test with msg unless that gives want.
func readBack(t testing.TB, cl *client.Client, bucket, key string, m client.Meta, want []byte, msg string) {
	t.Helper()
	p := make([]byte, len(want))
	_, err := cl.ReadAt(context.Background(), bucket, key, m, p, 0)
	testutil.Must(t, err)
	if !bytes.Equal(p, want) {
		t.Fatal(msg)
	}
}

// chunkRequests is the number of chunk lookups all nodes made (counted
// before the answer is sent, unlike distcache_requests_total).
func chunkRequests(c *nodecluster.Cluster) float64 {
	return c.Sum("distcache_chunk_reads_total", nil)
}

// forwards is the number of chunk requests nodes forwarded to an owner.
func forwards(c *nodecluster.Cluster) float64 {
	return c.Sum("distcache_peer_requests_total", map[string]string{"kind": "forward"})
}

// chunkID names a chunk as the nodes place it.
func chunkID(tenant, bucket, key, etag string, idx int64) chunk.ID {
	return chunk.ID{Object: chunk.Object{Tenant: tenant, Bucket: bucket, Key: key}, ETag: etag, Size: cs, Index: idx}
}

// inFlight counts chunk requests in flight through the client's transport,
// from the request until its body is closed, and the most at once.
type inFlight struct {
	next http.RoundTripper
	mu   sync.Mutex
	cur  int
	max  int
	n    int
}

func (f *inFlight) wrap(rt http.RoundTripper) http.RoundTripper { f.next = rt; return f }

func (f *inFlight) RoundTrip(req *http.Request) (*http.Response, error) {
	if !strings.Contains(req.URL.RawQuery, "chunk=") {
		return f.next.RoundTrip(req)
	}
	f.mu.Lock()
	f.cur++
	f.n++
	f.max = max(f.max, f.cur)
	f.mu.Unlock()
	resp, err := f.next.RoundTrip(req)
	if err != nil {
		f.done()
		return nil, err
	}
	resp.Body = &doneBody{ReadCloser: resp.Body, done: f.done}
	return resp, nil
}

func (f *inFlight) done() { f.mu.Lock(); f.cur--; f.mu.Unlock() }

func (f *inFlight) stats() (maxInFlight, requests int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.max, f.n
}

func (f *inFlight) reset() { f.mu.Lock(); f.max, f.n = f.cur, 0; f.mu.Unlock() }

type doneBody struct {
	io.ReadCloser
	once sync.Once
	done func()
}

func (b *doneBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.done)
	return err
}
