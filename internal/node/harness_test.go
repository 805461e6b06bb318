package node_test

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/distcache/distcache/internal/metalease"
	"github.com/distcache/distcache/internal/nodeapi"
	"github.com/distcache/distcache/internal/pki"
	"github.com/distcache/distcache/internal/store"
	"github.com/distcache/distcache/internal/testutil"
	"github.com/distcache/distcache/internal/testutil/miniotest"
	"github.com/distcache/distcache/internal/testutil/nodecluster"
	"github.com/distcache/distcache/internal/testutil/s3proxy"
)

const testChunk = 256 << 10

type options struct {
	diskBytes, ramBytes int64
	metaTTL             time.Duration
	immutable           bool
	tenantsYAML         string
	s3Attempts          int
	s3Timeout           time.Duration
	// members, when set, runs that many nodes in one ring (cluster tests);
	// 0 runs one node alone.
	members int
}

// harness is one cache node run alone over real mTLS against a real MinIO,
// with a counting proxy in between: a nodecluster of one node
// (nodecluster.Options.Alone), assembled as `cachenode serve` assembles it
// (internal/embed). Its fields name the parts the tests reach into; the
// node's own are replaced by restartNode.
type harness struct {
	t            testing.TB
	nc           *nodecluster.Cluster
	socketWrites atomic.Int64 // writes to the node's sockets, all connections
	minio        *miniotest.Server
	proxy        *s3proxy.Proxy
	ca           *pki.CA
	dir          string
	serverCA     string
	clock        *nodecluster.Clock
	clients      map[string]*http.Client

	// The node: replaced by restartNode.
	member  *nodecluster.Member
	dataDir string
	reg     *prometheus.Registry
	store   *store.Store
	server  *http.Server
	handler http.Handler
	addr    string
}

func newHarness(t testing.TB, opts options) *harness {
	t.Helper()
	h := &harness{t: t, clients: map[string]*http.Client{}}
	o := nodecluster.Options{
		ChunkSize: testChunk, Immutable: opts.immutable, MetaTTL: opts.metaTTL, MetaLease: metalease.DefaultLease,
		Tenants: opts.tenantsYAML, DiskBytes: opts.diskBytes, RAMBytes: opts.ramBytes,
		S3MaxConcurrent: 16, S3MaxAttempts: opts.s3Attempts, S3Timeout: opts.s3Timeout,
		WrapListener: func(ln net.Listener) net.Listener {
			return &writeCountingListener{Listener: ln, writes: &h.socketWrites}
		},
	}
	n := opts.members
	if n == 0 { // one node alone, without a RAM tier unless asked for
		n, o.Alone, o.RAMBytes, o.MaintenanceInterval = 1, true, cmp.Or(opts.ramBytes, -1), 100*time.Millisecond
	}
	h.nc = nodecluster.StartWith(t, n, o)
	h.minio, h.proxy, h.ca, h.dir, h.serverCA, h.clock = h.nc.MinIO, h.nc.Proxy, h.nc.CA, h.nc.Dir, h.nc.CAFile, h.nc.Clock
	h.member = h.nc.Member(0)
	h.dataDir = filepath.Join(h.dir, h.member.Name)
	h.useNode()
	t.Cleanup(h.closeClients)
	return h
}

// useNode points the harness at the member's node, after a (re)start.
func (h *harness) useNode() {
	n := h.member.Node
	h.reg, h.store, h.server, h.handler, h.addr = n.Registry(), n.Store(), n.HTTPServer(), n.Handler(), n.Addr()
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

// stopNode stops the node, store included, as a process that exits.
func (h *harness) stopNode() {
	h.nc.StopMember(h.member)
	h.closeClients()
}

// startNode starts the node again on its data dir and a new port.
func (h *harness) startNode() {
	testutil.Must(h.t, h.nc.RestartMember(h.member))
	h.useNode()
}

// restartNode is a process restart: same data dir, new store and listener.
func (h *harness) restartNode() {
	h.stopNode()
	h.startNode()
}

func (h *harness) closeClients() {
	for _, c := range h.clients {
		c.CloseIdleConnections()
	}
}

// client returns an HTTP client holding a certificate for the identity.
func (h *harness) client(id pki.Identity) *http.Client {
	key := string(id.Kind) + "/" + id.Name
	if c, ok := h.clients[key]; ok {
		return c
	}
	// The cluster's configuration, whose files are KIND-NAME.crt/.key in dir.
	cfg := h.nc.ClientTLS(id).Clone()
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
	testutil.Must(h.t, err)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	testutil.Must(h.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	testutil.Must(h.t, err)
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

func (h *harness) get(c *http.Client, bucket, key, query string, hdr map[string]string) response {
	h.t.Helper()
	return h.do(c, http.MethodGet, h.url(bucket, key, query), nil, hdr)
}

// putDirect writes an object straight to MinIO, behind the cache's back.
func (h *harness) putDirect(bucket, key string, data []byte) {
	h.t.Helper()
	h.nc.PutDirect(bucket, key, data)
}

// getDirect reads an object (or a range) from MinIO itself.
func (h *harness) getDirect(bucket, key, rng string) []byte {
	h.t.Helper()
	return h.nc.GetDirect(bucket, key, rng)
}

// counter sums a counter family's samples whose labels include want.
func (h *harness) counter(name string, want map[string]string) float64 {
	h.t.Helper()
	return nodecluster.Gather(h.t, h.reg, name, want)
}
