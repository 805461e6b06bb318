package embed

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/distcache/distcache/internal/client"
	"github.com/distcache/distcache/internal/gateway"
	"github.com/distcache/distcache/internal/getserver"
	"github.com/distcache/distcache/internal/metrics"
	"github.com/distcache/distcache/internal/pki"
	"github.com/distcache/distcache/internal/sigv4"
)

// GatewayConfig is everything a gateway is made of; the zero value of a
// field is its default.
type GatewayConfig struct {
	// Listen is the address of the S3 API; Listener, when set, is served
	// instead (StartGateway owns it from then on). ListenTLSCert and
	// ListenTLSKey serve it over TLS (plain server TLS: S3 clients present
	// no certificate); without them it is plain HTTP.
	Listen                      string
	Listener                    net.Listener
	ListenTLSCert, ListenTLSKey string
	// MetricsListen is the address of the plain port for /metrics,
	// /healthz and /readyz; empty: none.
	MetricsListen string
	// ClientUnsentBytes bounds the bytes of a response the kernel queues
	// unsent on an S3 client's connection (gateway.LimitUnsent; 0: the
	// kernel's default).
	ClientUnsentBytes int64
	// NetHTTPReads serves GET and HEAD with net/http's server, as every
	// other request, instead of getserver's (plain HTTP only; with TLS
	// net/http serves all): for comparison, and a way back.
	NetHTTPReads bool

	// Nodes are the cache node URLs the ring is learnt from: with Zone,
	// nodes of that zone; Fallback are the other zones' seeds.
	Nodes    []string
	Zone     string
	Fallback []client.ZoneSeeds
	// TLSCert and TLSKey are the certificate for the cache nodes (the
	// tenant's, or a peer certificate with Tenant), CA the bundle their
	// server certificates chain to; all three are followed on disk.
	TLSCert, TLSKey, CA string
	// Tenant is the tenant acted for with a peer certificate; empty: the
	// tenant TLSCert names.
	Tenant string

	// AccessKey and SecretKey are what S3 clients sign with (not S3
	// credentials); Region the region they must sign for (empty: any);
	// Domains the gateway's host names.
	AccessKey, SecretKey string
	Region               string
	Domains              []string

	// The cache client: the chunk size (0: learnt from the nodes), the RAM
	// page cache and its pages (0: none; whole chunks), prefaulting it,
	// chunks' worth read ahead (0: client.DefaultParallelism) and the
	// timeout of one request to a node (0: the client's default).
	ChunkSize, PageCacheBytes, PageBytes int64
	Prefault                             bool
	Parallelism                          int
	Timeout                              time.Duration
	// ReadBufferBytes bounds all GetObjects' fetched pieces (0: a quarter
	// of the page cache, at least gateway.DefaultReadBufferBytes).
	ReadBufferBytes int64
	// PassthroughTimeout is the longest wait for S3's answer to a
	// passed-through operation (0: 5 minutes); ClientWriteTimeout the
	// longest a GetObject waits for its client to take a piece (0: the
	// gateway's default; negative: never).
	PassthroughTimeout, ClientWriteTimeout time.Duration

	// Registry gets the gateway's and the client's metrics (default a new
	// one); Logger their logs (default none); Now is the client's clock
	// (default time.Now).
	Registry *prometheus.Registry
	Logger   *slog.Logger
	Now      func() time.Time
}

// DefaultPassthroughTimeout is GatewayConfig.PassthroughTimeout's default.
const DefaultPassthroughTimeout = 5 * time.Minute

// ReadGeometry is what GetObject reads in: pieces of the cache client's
// page (a chunk without a page cache, or when pages are whole chunks), and
// the most pieces fetched ahead of the client, Parallelism chunks' worth.
// chunk and page are the client's (Client.ReadUnits): the chunk size it
// was given or learnt from the nodes; 0 when the nodes did not say, and
// then the configuration's (or the default chunk size) stand.
func (c GatewayConfig) ReadGeometry(chunk, page int64) (piece int64, ahead int) {
	if chunk <= 0 {
		chunk, page = c.ChunkSize, c.PageBytes
		if chunk <= 0 {
			chunk = gateway.DefaultReadPieceBytes
		}
	}
	return gateway.ReadGeometry(chunk, page, c.PageCacheBytes > 0, c.parallelism())
}

// ReadBuffers is the bound on all GetObjects' fetched pieces: the page
// cache's slack (a quarter of it), but not under the gateway's default.
func (c GatewayConfig) ReadBuffers() int64 {
	if c.ReadBufferBytes > 0 {
		return c.ReadBufferBytes
	}
	return max(gateway.DefaultReadBufferBytes, c.PageCacheBytes/4)
}

func (c GatewayConfig) parallelism() int {
	if c.Parallelism <= 0 {
		return client.DefaultParallelism
	}
	return c.Parallelism
}

// Gateway is a running gateway. Its S3 port answers 503 until a cache
// node was reached, so a gateway started before the cache (a DaemonSet on
// a new node) comes up by itself; /readyz says the same.
type Gateway struct {
	cfg    GatewayConfig
	ctx    context.Context // ends connecting (Close)
	cancel context.CancelFunc
	log    *slog.Logger
	api    *http.Server
	reads  *getserver.Server // nil: api serves every request
	ops    *http.Server
	addr   string
	tls    bool // the S3 API is served over TLS

	handler  atomic.Pointer[http.Handler]
	ready    chan struct{} // closed once the handler is in place
	failed   chan struct{} // closed when the gateway cannot start
	failErr  error
	errc     chan error
	draining atomic.Bool

	mu     sync.Mutex
	client *client.Client
	closed bool
	once   sync.Once
}

// StartGateway listens, then connects to the cache nodes in the
// background (retrying with backoff until one answers) and serves the S3
// API once connected. ctx bounds connecting; Close ends it too.
func StartGateway(ctx context.Context, cfg GatewayConfig) (_ *Gateway, err error) {
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.PassthroughTimeout == 0 {
		cfg.PassthroughTimeout = DefaultPassthroughTimeout
	}
	g := &Gateway{cfg: cfg, log: cfg.Logger, ready: make(chan struct{}), failed: make(chan struct{}), errc: make(chan error, 3)}
	g.ctx, g.cancel = context.WithCancel(ctx)
	defer func() {
		if err != nil {
			if g.cfg.Listener != nil { // not served yet
				_ = g.cfg.Listener.Close()
			}
			g.Close()
		}
	}()
	// The certificate and the CA bundle are followed on disk: the operator
	// renews the one and rotates the other under running gateways.
	nodeTLS, err := pki.NewClientTLS(cfg.TLSCert, cfg.TLSKey, cfg.CA)
	if err != nil {
		return nil, fmt.Errorf("node TLS: %w", err)
	}
	tenant, err := placementTenant(cfg.TLSCert, cfg.Tenant)
	if err != nil {
		return nil, err
	}
	metrics.RegisterCertificateExpiry(cfg.Registry, nodeTLS.Leaf)
	if err := g.serve(); err != nil {
		return nil, err
	}
	g.log.Info("gateway listening", "listen", g.addr, "tls", g.tls, "metrics", cfg.MetricsListen,
		"nodes", cfg.Nodes, "zone", cfg.Zone, "fallbackZones", len(cfg.Fallback))
	go g.connect(nodeTLS, tenant)
	return g, nil
}

// serve listens on the S3 port (503 until connected) and the metrics port.
func (g *Gateway) serve() error {
	notReady := gateway.Unavailable("the distcache gateway has not reached a cache node yet")
	g.api = &http.Server{
		Addr: g.cfg.Listen,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if h := g.handler.Load(); h != nil {
				(*h).ServeHTTP(w, r)
				return
			}
			notReady.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute,
		ErrorLog: slog.NewLogLogger(g.log.Handler(), slog.LevelDebug),
	}
	if g.cfg.ListenTLSCert != "" {
		cfg, err := pki.ServingTLSConfig(g.cfg.ListenTLSCert, g.cfg.ListenTLSKey)
		if err != nil {
			return fmt.Errorf("--listen-tls-cert: %w", err)
		}
		g.api.TLSConfig = cfg
	}
	ln := g.cfg.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", g.cfg.Listen); err != nil {
			return err
		}
	}
	g.cfg.Listener = nil // served from here on: closed by api.Close
	g.addr = ln.Addr().String()
	ln = gateway.LimitUnsent(ln, int(g.cfg.ClientUnsentBytes))
	// Decided before serving: net/http's HTTP/2 setup gives a plain
	// server a TLSConfig of its own.
	api := g.api
	if g.tls = api.TLSConfig != nil; g.tls {
		ln = tls.NewListener(ln, api.TLSConfig)
	}
	if g.tls || g.cfg.NetHTTPReads {
		go func() { g.errc <- api.Serve(ln) }()
	} else {
		g.reads = &getserver.Server{Fallback: api}
		go func() { g.errc <- g.reads.Serve(ln) }()
	}
	var err error
	g.ops, err = serveOps(g.cfg.MetricsListen, g.cfg.Registry, g.readiness, g.errc)
	return err
}

// connect makes the cache client, then the gateway in front of it, and
// puts it in place.
func (g *Gateway) connect(nodeTLS *pki.ClientTLS, tenant string) {
	cfg := g.cfg
	c, err := connect(g.ctx, g.log, client.Config{
		Seeds: cfg.Nodes, TLS: nodeTLS.Config(), CurrentTLS: nodeTLS.Config, Tenant: cfg.Tenant, ChunkSize: cfg.ChunkSize,
		Parallelism: cfg.Parallelism, PageCacheBytes: cfg.PageCacheBytes, PageBytes: cfg.PageBytes,
		PrefaultPageCache: cfg.Prefault, Timeout: cfg.Timeout,
		Zone: cfg.Zone, Fallback: cfg.Fallback,
		Logger: g.log, Registerer: cfg.Registry, Now: cfg.Now,
	})
	if err != nil {
		if g.ctx.Err() == nil {
			g.fail(err)
		}
		return
	}
	if !g.keepClient(c) {
		return
	}
	piece, ahead := cfg.ReadGeometry(c.ReadUnits())
	gw, err := gateway.New(gateway.Config{
		Verifier: &sigv4.Verifier{
			Store:  sigv4.NewStaticStore(sigv4.Credentials{AccessKeyID: cfg.AccessKey, SecretAccessKey: cfg.SecretKey}),
			Region: cfg.Region, Service: "s3",
		},
		Cache: c, Metrics: gateway.NewMetrics(cfg.Registry), Logger: g.log, Domains: cfg.Domains,
		ReadPieceBytes: piece, ReadAhead: ahead, ReadBufferBytes: cfg.ReadBuffers(), ClientWriteTimeout: cfg.ClientWriteTimeout,
		Upstream: &gateway.Upstream{
			Client: gateway.NewUpstreamClient(nodeTLS.Config(), nodeTLS.Config, cfg.PassthroughTimeout),
			Nodes:  gateway.RingNodes(c, cfg.Nodes), Owners: gateway.RingOwners(c, tenant), Tenant: cfg.Tenant,
			Fallback: c.FallbackNodes, CrossZone: c.CountCrossZone,
		},
	})
	if err != nil {
		g.fail(err)
		return
	}
	var h http.Handler = gw
	g.handler.Store(&h)
	close(g.ready)
	g.log.Info("gateway ready", "zone", c.Ring().Zone(), "ringEpoch", c.Ring().Epoch(), "members", len(c.Ring().Members()),
		"readPieceBytes", piece, "readAhead", ahead)
}

// keepClient makes c the gateway's client, or closes it when the gateway
// was closed meanwhile.
func (g *Gateway) keepClient(c *client.Client) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		_ = c.Close()
		return false
	}
	g.client = c
	return true
}

// fail reports that the gateway cannot start: to Err and WaitReady.
func (g *Gateway) fail(err error) {
	g.failErr = err
	close(g.failed)
	g.errc <- err
}

// readiness is the gateway's: ready once it reached a cache node, not
// ready once shutdown starts.
func (g *Gateway) readiness() error {
	switch {
	case g.draining.Load():
		return errors.New("shutting down")
	case g.handler.Load() == nil:
		return errors.New("no cache node reached yet")
	}
	return nil
}

// Addr is the host:port the S3 API listens on.
func (g *Gateway) Addr() string { return g.addr }

// URL is the S3 endpoint: http://Addr, or https:// with ListenTLSCert.
func (g *Gateway) URL() string {
	if g.tls {
		return "https://" + g.addr
	}
	return "http://" + g.addr
}

// MetricsAddr is the host:port of the metrics port; empty without one.
func (g *Gateway) MetricsAddr() string { return opsAddr(g.ops) }

// Ready is closed once the gateway serves the S3 API.
func (g *Gateway) Ready() <-chan struct{} { return g.ready }

// WaitReady waits until the gateway serves the S3 API, it failed to
// start, or ctx ends.
func (g *Gateway) WaitReady(ctx context.Context) error {
	select {
	case <-g.ready:
		return nil
	case <-g.failed:
		return g.failErr
	case <-ctx.Done():
		return fmt.Errorf("gateway not ready: %w", ctx.Err())
	}
}

// Client is the gateway's cache client; nil until it connected.
func (g *Gateway) Client() *client.Client {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.client
}

// Registry holds the gateway's and its client's metrics.
func (g *Gateway) Registry() *prometheus.Registry { return g.cfg.Registry }

// Err receives the error of a server that stopped (http.ErrServerClosed
// after Shutdown or Close) or why the gateway could not start.
func (g *Gateway) Err() <-chan error { return g.errc }

// Shutdown drains: readiness turns false, the servers finish in-flight
// requests until ctx ends, then everything is closed.
func (g *Gateway) Shutdown(ctx context.Context) error {
	g.draining.Store(true)
	var err error
	if g.reads != nil {
		err = g.reads.Shutdown(ctx)
	}
	if err2 := shutdownAll(ctx, g.api, g.ops); err == nil {
		err = err2
	}
	g.Close()
	return err
}

// Close stops the gateway at once: its servers and every open connection,
// connecting, and the cache client. It is idempotent.
func (g *Gateway) Close() {
	g.once.Do(func() {
		g.draining.Store(true)
		g.cancel()
		if g.reads != nil {
			_ = g.reads.Close()
		}
		closeAll(g.api, g.ops)
		g.mu.Lock()
		g.closed = true
		c := g.client
		g.mu.Unlock()
		if c != nil {
			_ = c.Close()
		}
	})
}

// placementTenant is the tenant the gateway acts for: flagTenant, or the
// tenant named by the client certificate.
func placementTenant(certFile, flagTenant string) (string, error) {
	if flagTenant != "" {
		return flagTenant, nil
	}
	data, err := os.ReadFile(certFile)
	if err != nil {
		return "", err
	}
	for block, rest := pem.Decode(data); block != nil; block, rest = pem.Decode(rest) {
		if block.Type != "CERTIFICATE" {
			continue
		}
		leaf, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return "", fmt.Errorf("%s: %w", certFile, err)
		}
		for _, u := range leaf.URIs {
			if id, err := pki.ParseIdentity(u); err == nil && id.Kind == pki.KindTenant {
				return id.Name, nil
			}
		}
		break // the leaf comes first
	}
	return "", fmt.Errorf("%s is not a tenant certificate: give --tenant to act for one with a peer certificate", certFile)
}

// connect creates the client, retrying with backoff until a cache node
// answers or ctx ends.
func connect(ctx context.Context, log *slog.Logger, cfg client.Config) (*client.Client, error) {
	backoff := 500 * time.Millisecond
	for {
		c, err := client.New(ctx, cfg)
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, client.ErrUnavailable) {
			return nil, fmt.Errorf("cache client: %w", err)
		}
		log.Warn("no cache node reachable yet; retrying", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}
