package node_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/distcache/distcache/internal/metrics"
	"github.com/distcache/distcache/internal/node"
	"github.com/distcache/distcache/internal/nodeapi"
	"github.com/distcache/distcache/internal/pki"
	"github.com/distcache/distcache/internal/s3backend"
	"github.com/distcache/distcache/internal/store"
	"github.com/distcache/distcache/internal/tenancy"
	"github.com/distcache/distcache/internal/testutil/miniotest"
	"github.com/distcache/distcache/internal/testutil/nodecluster"
	"github.com/distcache/distcache/internal/testutil/s3proxy"
)

const testChunk = 256 << 10

// fakeClock lets tests move past the metadata TTL without sleeping.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

type options struct {
	diskBytes, ramBytes int64
	metaTTL             time.Duration
	immutable           bool
	tenantsYAML         string
	s3Attempts          int
	s3Timeout           time.Duration
	noNode              bool // cluster tests start their own nodes
}

// harness runs one cache node over real mTLS against a real MinIO, with a
// counting proxy in between, as `cachenode serve` wires it.
type harness struct {
	t            testing.TB
	socketWrites atomic.Int64 // writes to the node's sockets, all connections
	opts         options
	minio        *miniotest.Server
	proxy        *s3proxy.Proxy
	direct       *s3.Client
	ca           *pki.CA
	dir          string
	dataDir      string
	clock        *fakeClock
	tenants      *tenancy.Watcher
	backend      *s3backend.Backend
	reg          *prometheus.Registry
	metrics      *metrics.Node
	store        *store.Store
	server       *http.Server
	handler      http.Handler
	addr         string
	clients      map[string]*http.Client
	serverCA     string
}

func defaultTenants(minio *miniotest.Server) string {
	return `tenants:
  - name: team-a
    buckets: [bucket-a, shared]
  - name: team-b
    buckets: [bucket-b, shared]
`
}

func newHarness(t testing.TB, opts options) *harness {
	t.Helper()
	if opts.diskBytes == 0 {
		opts.diskBytes = 256 << 20
	}
	if opts.metaTTL == 0 {
		opts.metaTTL = time.Minute
	}
	if opts.s3Attempts == 0 {
		opts.s3Attempts = 3
	}
	if opts.s3Timeout == 0 {
		opts.s3Timeout = 10 * time.Second
	}
	h := &harness{t: t, opts: opts, dir: t.TempDir(), clock: &fakeClock{now: time.Now()}, clients: map[string]*http.Client{}}
	h.dataDir = filepath.Join(h.dir, "data")
	h.minio = miniotest.Start(t)
	for _, b := range []string{"bucket-a", "bucket-b", "shared"} {
		h.minio.CreateBucket(t, b)
	}
	h.direct = h.minio.Client(t)
	h.proxy = s3proxy.New(t, h.minio.Endpoint)

	var err error
	h.ca, err = pki.NewCA("distcache test CA", time.Hour)
	must(t, err)
	h.serverCA = filepath.Join(h.dir, "ca.crt")
	must(t, os.WriteFile(h.serverCA, h.ca.CertPEM, 0o600))
	leaf, err := h.ca.IssueServer("cache-0", []string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")}, time.Hour)
	must(t, err)
	must(t, pki.WriteFiles(h.dir, "server", leaf))

	tenantsYAML := opts.tenantsYAML
	if tenantsYAML == "" {
		tenantsYAML = defaultTenants(h.minio)
	}
	tenantsPath := filepath.Join(h.dir, "tenants.yaml")
	must(t, os.WriteFile(tenantsPath, []byte(tenantsYAML), 0o600))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	h.tenants, err = tenancy.Watch(ctx, tenantsPath, slog.New(slog.DiscardHandler))
	must(t, err)

	h.reg = prometheus.NewRegistry()
	h.metrics = metrics.NewNode(h.reg)
	h.backend, err = s3backend.New(s3backend.Config{
		Endpoint: h.proxy.URL(), Region: h.minio.Region, UsePathStyle: true,
		Default:       s3backend.Credentials{AccessKeyID: h.minio.AccessKey, SecretAccessKey: h.minio.SecretKey},
		MaxConcurrent: 16, MaxAttempts: opts.s3Attempts, MaxBackoff: 100 * time.Millisecond,
		RequestTimeout: opts.s3Timeout, PartSize: 5 << 20, Observer: h.metrics,
	})
	must(t, err)
	if !opts.noNode {
		h.startNode()
		t.Cleanup(h.stopNode)
	}
	return h
}

// startNode opens the store on the data dir and serves on a new port.
func (h *harness) startNode() {
	t := h.t
	var err error
	h.store, err = store.Open(store.Options{
		Dir: h.dataDir, DiskBytes: h.opts.diskBytes, RAMBytes: h.opts.ramBytes,
		Logger: slog.New(slog.DiscardHandler), MaintenanceInterval: 100 * time.Millisecond,
		TenantQuota: func(name string) int64 {
			if tn, ok := h.tenants.Current().Tenant(name); ok {
				return tn.QuotaBytes
			}
			return 0
		},
	})
	must(t, err)
	srv, err := node.New(node.Config{
		ChunkSize: testChunk, MetaTTL: h.opts.metaTTL, Immutable: h.opts.immutable, Now: h.clock.Now,
	}, h.store, h.backend, h.tenants, h.metrics, slog.New(slog.DiscardHandler))
	must(t, err)
	tlsConfig, err := pki.ServerTLSConfig(filepath.Join(h.dir, "server.crt"), filepath.Join(h.dir, "server.key"), h.serverCA)
	must(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	h.addr = ln.Addr().String()
	h.handler = srv.Handler()
	h.server = &http.Server{
		Handler: h.handler, TLSConfig: tlsConfig,
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
		ErrorLog:     log.New(io.Discard, "", 0), // refused handshakes are expected in tests
	}
	srv.ServeReads(h.server) // as `cachenode serve` does
	counted := &writeCountingListener{Listener: ln, writes: &h.socketWrites}
	go func() { _ = h.server.Serve(tls.NewListener(node.BatchingListener(counted), tlsConfig)) }()
}

// writeCountingListener counts the writes to its connections' sockets.
type writeCountingListener struct {
	net.Listener
	writes *atomic.Int64
}

func (l *writeCountingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &writeCountingConn{Conn: c, writes: l.writes}, nil
}

type writeCountingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c *writeCountingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

func (h *harness) stopNode() {
	if h.server != nil {
		_ = h.server.Close()
		h.server = nil
	}
	if h.store != nil {
		_ = h.store.Close()
		h.store = nil
	}
	for _, c := range h.clients {
		c.CloseIdleConnections()
	}
}

// restartNode is a process restart: same data dir, new store and listener.
func (h *harness) restartNode() {
	h.stopNode()
	h.startNode()
}

// client returns an HTTP client holding a certificate for the identity.
func (h *harness) client(id pki.Identity) *http.Client {
	key := string(id.Kind) + "/" + id.Name
	if c, ok := h.clients[key]; ok {
		return c
	}
	leaf, err := h.ca.IssueClient(id, time.Hour)
	must(h.t, err)
	name := string(id.Kind) + "-" + id.Name
	must(h.t, pki.WriteFiles(h.dir, name, leaf))
	cfg, err := pki.ClientTLSConfig(filepath.Join(h.dir, name+".crt"), filepath.Join(h.dir, name+".key"), h.serverCA)
	must(h.t, err)
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: false, MaxIdleConnsPerHost: 128}}
	h.clients[key] = c
	return c
}

// readClient is client(id) on connections that negotiate
// nodeapi.ProtoRead (the node's chunk read loop), as internal/client opens
// them for chunk reads.
func (h *harness) readClient(id pki.Identity) *http.Client {
	key := "read/" + string(id.Kind) + "/" + id.Name
	if c, ok := h.clients[key]; ok {
		return c
	}
	cfg := h.client(id).Transport.(*http.Transport).TLSClientConfig.Clone()
	cfg.NextProtos = []string{nodeapi.ProtoRead}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: false, MaxIdleConnsPerHost: 128}}
	h.clients[key] = c
	return c
}

func tenant(name string) pki.Identity { return pki.Identity{Kind: pki.KindTenant, Name: name} }

func (h *harness) url(bucket, key string, query string) string {
	u := fmt.Sprintf("https://%s/v1/objects/%s/%s", h.addr, bucket, key)
	if query != "" {
		u += "?" + query
	}
	return u
}

// response is a fully read reply.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (h *harness) do(c *http.Client, method, url string, body []byte, hdr map[string]string) response {
	h.t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	must(h.t, err)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	must(h.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	must(h.t, err)
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

func (h *harness) get(c *http.Client, bucket, key, query string, hdr map[string]string) response {
	h.t.Helper()
	return h.do(c, http.MethodGet, h.url(bucket, key, query), nil, hdr)
}

// putDirect writes an object straight to MinIO, behind the cache's back.
func (h *harness) putDirect(bucket, key string, data []byte) {
	h.t.Helper()
	_, err := h.direct.PutObject(context.Background(), &s3.PutObjectInput{
		Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(data),
	})
	must(h.t, err)
}

// getDirect reads an object (or a range) from MinIO itself.
func (h *harness) getDirect(bucket, key, rng string) []byte {
	h.t.Helper()
	in := &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)}
	if rng != "" {
		in.Range = aws.String(rng)
	}
	out, err := h.direct.GetObject(context.Background(), in)
	must(h.t, err)
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	must(h.t, err)
	return b
}

// counter sums a counter family's samples whose labels include want.
func (h *harness) counter(name string, want map[string]string) float64 {
	h.t.Helper()
	return nodecluster.Gather(h.t, h.reg, name, want)
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
