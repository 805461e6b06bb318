package hitpath

import (
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
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/distcache/distcache/internal/client"
	"github.com/distcache/distcache/internal/freeport"
	"github.com/distcache/distcache/internal/gateway"
	"github.com/distcache/distcache/internal/metrics"
	"github.com/distcache/distcache/internal/node"
	"github.com/distcache/distcache/internal/pki"
	"github.com/distcache/distcache/internal/ring"
	"github.com/distcache/distcache/internal/s3backend"
	"github.com/distcache/distcache/internal/sigv4"
	"github.com/distcache/distcache/internal/store"
	"github.com/distcache/distcache/internal/tenancy"
	"github.com/distcache/distcache/tools/benchmark/benchkit"
)

// This file assembles a cache in this process, as `cachenode serve` and
// `cachenode gateway` wire one: the benchmark parts that run the cache
// in-process (B1 here, B5 in tools/benchmark/writepath) start it with
// StartCache and Cache.StartGateway rather than wiring the components
// themselves.

// CacheConfig is an in-process cache: Nodes cache nodes sharing one ring
// over mTLS, serving one tenant, reading and writing S3 through S3.
type CacheConfig struct {
	Dir       string // certificates, the tenants file and the nodes' stores
	Nodes     int    // members of the ring (at least 1)
	Tenant    string
	Buckets   []string // the tenant's
	ChunkSize int64
	RAMBytes  int64 // per node
	DiskBytes int64 // per node
	// Immutable is `cachenode serve --immutable`; false is its default,
	// metadata trusted for MetaTTL (zero: DefaultMetaTTL).
	Immutable bool
	MetaTTL   time.Duration
	// S3 is the nodes' backend: endpoint, region, path style and
	// credentials (the Observer is each node's metrics).
	S3 s3backend.Config
	// Wrap, when set, wraps every node's API handler (to time requests).
	Wrap func(node string, h http.Handler) http.Handler
}

// DefaultMetaTTL is `cachenode serve`'s default --meta-ttl.
const DefaultMetaTTL = 30 * time.Second

// Cache is a running in-process cache.
type Cache struct {
	cfg   CacheConfig
	PKI   *PKI
	Nodes []*Node
	Seeds []string // https://ADDR of every node, in ring order

	closers  []func()
	gateways int // processes started, to name them
}

// Node is one in-process cache node.
type Node struct {
	Name, Addr string
	Store      *store.Store
	Reg        *prometheus.Registry // its metrics (metrics.NewNode)
	Server     *node.Server
}

// PKI is a bench cache's certificates, as files in Dir (ca.crt,
// server.crt/.key for 127.0.0.1 and localhost, tenant.crt/.key,
// peer-NAME.crt/.key per node) and as TLS configurations.
type PKI struct {
	Dir, CAFile string
	ServerTLS   *tls.Config // every node's (mTLS: client certificates required)
	TenantTLS   *tls.Config // the tenant's client certificate
}

// NewPKI issues a CA, the server certificate, the tenant's client
// certificate and a peer certificate per node name into dir.
func NewPKI(dir, tenant string, nodes []string) (*PKI, error) {
	ca, err := pki.NewCA("distcache bench CA", 24*time.Hour)
	if err != nil {
		return nil, err
	}
	leaves := map[string]*pki.Leaf{}
	if leaves["server"], err = ca.IssueServer("localhost", []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)}, 24*time.Hour); err != nil {
		return nil, err
	}
	if leaves["tenant"], err = ca.IssueClient(pki.Identity{Kind: pki.KindTenant, Name: tenant}, 24*time.Hour); err != nil {
		return nil, err
	}
	for _, n := range nodes {
		if leaves["peer-"+n], err = ca.IssueClient(pki.Identity{Kind: pki.KindPeer, Name: n}, 24*time.Hour); err != nil {
			return nil, err
		}
	}
	for name, leaf := range leaves {
		if err := pki.WriteFiles(dir, name, leaf); err != nil {
			return nil, err
		}
	}
	p := &PKI{Dir: dir, CAFile: filepath.Join(dir, "ca.crt")}
	if err := os.WriteFile(p.CAFile, ca.CertPEM, 0o600); err != nil {
		return nil, err
	}
	if p.ServerTLS, err = pki.ServerTLSConfig(filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key"), p.CAFile); err != nil {
		return nil, err
	}
	if p.TenantTLS, err = pki.ClientTLSConfig(filepath.Join(dir, "tenant.crt"), filepath.Join(dir, "tenant.key"), p.CAFile); err != nil {
		return nil, err
	}
	return p, nil
}

// PeerTLS is node's client configuration for calls to the other nodes.
func (p *PKI) PeerTLS(node string) (*tls.Config, error) {
	return pki.ClientTLSConfig(filepath.Join(p.Dir, "peer-"+node+".crt"), filepath.Join(p.Dir, "peer-"+node+".key"), p.CAFile)
}

func (c *Cache) onClose(f func()) { c.closers = append(c.closers, f) }

// Close stops the gateways and the nodes, last started first.
func (c *Cache) Close() {
	for i := len(c.closers) - 1; i >= 0; i-- {
		c.closers[i]()
	}
	c.closers = nil
}

// StartCache starts the nodes of cfg, each listening on 127.0.0.1.
func StartCache(ctx context.Context, cfg CacheConfig) (_ *Cache, err error) {
	if cfg.Nodes < 1 {
		cfg.Nodes = 1
	}
	if cfg.MetaTTL <= 0 {
		cfg.MetaTTL = DefaultMetaTTL
	}
	c := &Cache{cfg: cfg}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c.onClose(cancel)
	names := make([]string, cfg.Nodes)
	for i := range names {
		names[i] = fmt.Sprintf("cache-%d", i)
	}
	if c.PKI, err = NewPKI(cfg.Dir, cfg.Tenant, names); err != nil {
		return nil, err
	}
	logger := slog.New(slog.DiscardHandler)
	tenantsFile := filepath.Join(cfg.Dir, "tenants.yaml")
	if err := os.WriteFile(tenantsFile, fmt.Appendf(nil, "tenants:\n  - name: %s\n    buckets: [%s]\n", cfg.Tenant, strings.Join(cfg.Buckets, ", ")), 0o600); err != nil {
		return nil, err
	}
	tenants, err := tenancy.Watch(wctx, tenantsFile, logger)
	if err != nil {
		return nil, err
	}
	// Listen first: the ring names every member's address.
	lns := make([]net.Listener, cfg.Nodes)
	members := make([]ring.Member, cfg.Nodes)
	for i, n := range names {
		if lns[i], err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			return nil, err
		}
		ln := lns[i]
		c.onClose(func() { _ = ln.Close() })
		members[i] = ring.Member{Name: n, Address: ln.Addr().String(), Weight: 100, State: ring.StateActive}
		c.Seeds = append(c.Seeds, "https://"+ln.Addr().String())
	}
	r, err := ring.New(ring.Spec{Epoch: 1, Zone: "bench", Hash: ring.HashParams{Algorithm: ring.AlgorithmRendezvousXXHash64}, Members: members})
	if err != nil {
		return nil, err
	}
	holder := &ring.Holder{}
	holder.Store(r)
	for i, n := range names {
		nd, err := c.startNode(n, lns[i], holder, tenants, logger)
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", n, err)
		}
		c.Nodes = append(c.Nodes, nd)
	}
	return c, nil
}

func (c *Cache) startNode(name string, ln net.Listener, holder *ring.Holder, tenants *tenancy.Watcher, logger *slog.Logger) (*Node, error) {
	nd := &Node{Name: name, Addr: ln.Addr().String(), Reg: prometheus.NewRegistry()}
	m := metrics.NewNode(nd.Reg)
	var err error
	if nd.Store, err = store.Open(store.Options{Dir: filepath.Join(c.cfg.Dir, "store-"+name), DiskBytes: c.cfg.DiskBytes,
		RAMBytes: c.cfg.RAMBytes, Logger: logger}); err != nil {
		return nil, err
	}
	c.onClose(func() { _ = nd.Store.Close() })
	s3cfg := c.cfg.S3
	s3cfg.Observer = m
	be, err := s3backend.New(s3cfg)
	if err != nil {
		return nil, err
	}
	peerTLS, err := c.PKI.PeerTLS(name)
	if err != nil {
		return nil, err
	}
	if nd.Server, err = node.New(node.Config{ChunkSize: c.cfg.ChunkSize, Immutable: c.cfg.Immutable, MetaTTL: c.cfg.MetaTTL,
		Ring: holder, Self: name,
		Peers: &node.Peers{Client: &http.Client{Transport: &http.Transport{TLSClientConfig: peerTLS, MaxIdleConnsPerHost: 64}}}},
		nd.Store, be, tenants, m, logger); err != nil {
		return nil, err
	}
	// As `cachenode serve` does: HTTP/1.1 over the node's TLS config, and
	// chunk reads on read connections.
	h := nd.Server.Handler()
	if c.cfg.Wrap != nil {
		h = c.cfg.Wrap(name, h)
	}
	// Each node its own TLS config: ServeReads adds its protocol to it
	// while the nodes started before serve with theirs.
	tlsCfg := c.PKI.ServerTLS.Clone()
	srv := &http.Server{Handler: h, TLSConfig: tlsCfg,
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){}, ErrorLog: log.New(io.Discard, "", 0)}
	nd.Server.ServeReads(srv)
	go func() { _ = srv.Serve(tls.NewListener(node.BatchingListener(ln), tlsCfg)) }()
	c.onClose(func() { _ = srv.Close() })
	return nd, nil
}

// Gateway is a gateway in front of a Cache, in this process or a
// `cachenode gateway` process of its own, and an aws-sdk-go-v2 client of
// its S3 API.
type Gateway struct {
	Client *client.Client       // its cache client (in-process only)
	Reg    *prometheus.Registry // its metrics (in-process only)
	Proc   *benchkit.Process    // the process (nil in-process)
	URL    string               // http://127.0.0.1:PORT
	S3     *s3.Client
	scrape string // the process's /metrics

	// AccessKey and SecretKey are what S3 clients sign with (not S3's).
	AccessKey, SecretKey string
}

// Credentials S3 clients of the bench gateways sign with.
const (
	GatewayAccessKey = "bench-access"
	GatewaySecretKey = "bench-secret-key-0123456789"
)

// StartGateway runs a gateway as `cachenode gateway` wires one by default
// (the tenant's certificate, 1 MiB pages, its read geometry, the limit on
// unsent bytes), with a RAM page cache of pageCacheBytes (0: none), on
// plain HTTP loopback, as S3 clients next to compute reach it.
func (c *Cache) StartGateway(ctx context.Context, pageCacheBytes int64) (*Gateway, error) {
	g := &Gateway{Reg: prometheus.NewRegistry(), AccessKey: GatewayAccessKey, SecretKey: GatewaySecretKey}
	var err error
	if g.Client, err = client.New(ctx, client.Config{Seeds: c.Seeds, TLS: c.PKI.TenantTLS, ChunkSize: c.cfg.ChunkSize,
		PageCacheBytes: pageCacheBytes, PageBytes: gateway.DefaultPageBytes, Registerer: g.Reg}); err != nil {
		return nil, err
	}
	c.onClose(func() { _ = g.Client.Close() })
	piece, ahead := gateway.ReadGeometry(c.cfg.ChunkSize, gateway.DefaultPageBytes, pageCacheBytes > 0, client.DefaultParallelism)
	gw, err := gateway.New(gateway.Config{
		Verifier: &sigv4.Verifier{Store: sigv4.NewStaticStore(sigv4.Credentials{AccessKeyID: g.AccessKey, SecretAccessKey: g.SecretKey}),
			Service: "s3"},
		Cache: g.Client, Domains: []string{"localhost"}, ReadPieceBytes: piece, ReadAhead: ahead,
		Metrics: gateway.NewMetrics(g.Reg),
		Upstream: &gateway.Upstream{Client: gateway.NewUpstreamClient(c.PKI.TenantTLS, nil, time.Minute),
			Nodes: gateway.RingNodes(g.Client, c.Seeds), Owners: gateway.RingOwners(g.Client, c.cfg.Tenant)},
	})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: gw, ErrorLog: log.New(io.Discard, "", 0)}
	go func() { _ = srv.Serve(gateway.LimitUnsent(ln, gateway.DefaultClientUnsentBytes)) }()
	c.onClose(func() { _ = srv.Close() })
	g.URL = "http://" + ln.Addr().String()
	g.S3 = NewS3Client(g.URL, "us-east-1", g.AccessKey, g.SecretKey)
	return g, nil
}

// StartGatewayProcess runs `cachenode gateway` (the binary bin) with its
// defaults, the tenant's certificate and a RAM page cache of
// pageCacheBytes (0: none), on plain HTTP loopback: a server of its own,
// as nginx is, not sharing this process's scheduler with the clients.
func (c *Cache) StartGatewayProcess(ctx context.Context, bin string, pageCacheBytes int64) (*Gateway, error) {
	listen, err := freeport.Next()
	if err != nil {
		return nil, err
	}
	ops, err := freeport.Next()
	if err != nil {
		return nil, err
	}
	c.gateways++
	name := fmt.Sprintf("gateway-%d", c.gateways)
	env := []string{"DISTCACHE_SECRET_KEY=" + GatewaySecretKey}
	if dir := os.Getenv("BENCH_PROFILE_DIR"); dir != "" { // a profile of the process's whole life
		env = append(env, "DISTCACHE_CPU_PROFILE="+filepath.Join(dir, "b1-"+filepath.Base(c.cfg.Dir)+"-"+name+".cpu.pprof"))
	}
	p, err := benchkit.StartProcess(bin, filepath.Join(c.cfg.Dir, name+".log"), name, env,
		"gateway", "--listen", listen, "--metrics-listen", ops, "--nodes", strings.Join(c.Seeds, ","),
		"--tls-cert", filepath.Join(c.PKI.Dir, "tenant.crt"), "--tls-key", filepath.Join(c.PKI.Dir, "tenant.key"),
		"--ca", c.PKI.CAFile, "--access-key", GatewayAccessKey, "--chunk-size", fmt.Sprint(c.cfg.ChunkSize),
		"--page-cache-bytes", fmt.Sprint(pageCacheBytes), "--log-level", "warn")
	if err != nil {
		return nil, err
	}
	c.onClose(p.Stop)
	if err := p.WaitReady(ctx, "http://"+ops+"/readyz"); err != nil {
		return nil, err
	}
	g := &Gateway{Proc: p, URL: "http://" + listen, scrape: "http://" + ops + "/metrics",
		AccessKey: GatewayAccessKey, SecretKey: GatewaySecretKey}
	g.S3 = NewS3Client(g.URL, "us-east-1", g.AccessKey, g.SecretKey)
	return g, nil
}

// Counter is the gateway's counter name{label="value"} (summed over its
// other labels).
func (g *Gateway) Counter(ctx context.Context, name, label, value string) (float64, error) {
	if g.Proc == nil {
		return benchkit.Counter(g.Reg, name, label, value), nil
	}
	m, err := benchkit.Scrape(ctx, g.scrape)
	if err != nil {
		return 0, err
	}
	return m.Sum(name, label+`="`+value+`"`), nil
}

// NewS3Client is the aws-sdk-go-v2 client every bench column of an S3 API
// uses: path-style, SigV4 with static credentials, the SDK's own
// transport with idle pools of 256 connections (its default keeps 10 per
// host: with 32 clients the rest would reconnect on every request).
func NewS3Client(endpoint, region, accessKey, secretKey string) *s3.Client {
	return s3.New(s3.Options{
		Region: region, BaseEndpoint: aws.String(endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(accessKey, secretKey, ""),
		HTTPClient: awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
			t.MaxIdleConns, t.MaxIdleConnsPerHost = 256, 256
		}),
	})
}
