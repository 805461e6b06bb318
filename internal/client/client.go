// Package client is the Go client of a distcache cache, used by Go programs
// and by the S3 gateway.
//
// A Client fetches the ring from any cache node (GET /v1/ring) and keeps it
// fresh, so it can send every chunk request straight to the chunk's owner:
// the node that holds it, so no node has to relay it. Reads are pinned to one
// object version (the ETag of the Meta that Stat returned), cut into the
// cache's fixed-size chunks and fetched in parallel; a member that fails is
// skipped for a few seconds and its chunks are read from the next
// candidates, then from any member, so a read fails only when no member can
// answer. Whole chunks can be kept in a bounded RAM "userspace page cache",
// keyed by the version, so repeated reads do not cross the network and a
// chunk of another version is never served.
//
// Routing is an optimisation: any node answers any request (it relays it to
// the owner), so a stale ring costs an extra hop, never a wrong answer.
//
// A client of one zone (Config.Zone) routes by that zone's ring only: a
// ring document that names another zone is refused, at start and at every
// refresh. When no member of its zone can be reached, it goes on to the
// other zones' members (Config.Fallback) before a request fails; the bytes
// that crosses zones are counted (distcache_cross_zone_bytes_total), since
// they are billed.
//
// Errors wrap the sentinels ErrNotFound, ErrAccessDenied, ErrChanged,
// ErrUnavailable and ErrInvalidRange (see Error).
package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/distcache/distcache/internal/dnsfallback"
	"github.com/distcache/distcache/internal/failover"
	"github.com/distcache/distcache/internal/pki"
	"github.com/distcache/distcache/internal/ring"
	"github.com/distcache/distcache/internal/slab"
)

// Defaults of Config.
const (
	DefaultParallelism = 8
	DefaultCandidates  = 3
	DefaultRingRefresh = 10 * time.Second
	DefaultTimeout     = 30 * time.Second
	// downFor is how long a member that failed is tried only after all the
	// others.
	downFor = 5 * time.Second
	// minRefreshGap spaces out refreshes that failures trigger, so that a
	// dead member does not cause one ring fetch per request.
	minRefreshGap = 250 * time.Millisecond
)

// Node API headers the client reads or sends.
const (
	headerTenant    = "X-Distcache-Tenant"
	headerChunkSize = "X-Distcache-Chunk-Size"
	headerRingEpoch = "X-Distcache-Ring-Epoch"
	headerSize      = "X-Distcache-Object-Size"
	headerType      = "X-Distcache-Content-Type"
)

// Config configures a Client.
type Config struct {
	// Seeds are https://host:port of any cache nodes (host:port works
	// too). The ring is fetched from the first that answers GET /v1/ring.
	Seeds []string
	// TLS carries the client certificate: a tenant certificate, or a peer
	// certificate with Tenant set (a gateway acting for a tenant). The
	// client negotiates HTTP/1.1 only.
	TLS *tls.Config
	// CurrentTLS, when set, gives the TLS configuration of each new
	// connection (pki.ClientTLS.Config), so a CA bundle or certificate
	// replaced on disk is followed without a restart; TLS still names the
	// client's identity.
	CurrentTLS func() *tls.Config
	// Tenant is sent as X-Distcache-Tenant when the certificate is a
	// peer's; leave it empty with a tenant certificate.
	Tenant string
	// ChunkSize must equal the nodes' chunk size; 0 learns it from the
	// X-Distcache-Chunk-Size header of the first answer. An answer with a
	// different chunk size is an error.
	ChunkSize int64
	// Parallelism is the number of chunk requests in flight per read, and
	// the read-ahead of an Object, in chunks (default 8).
	Parallelism int
	// PageCacheBytes bounds the RAM page cache; 0 disables it.
	PageCacheBytes int64
	// PrefaultPageCache faults in the page cache's memory (PageCacheBytes
	// and a quarter more, for pages still read after their eviction) as
	// soon as the page size is known, so that no fill waits for fresh
	// memory: in New when ChunkSize is set or the ring's answer gives it
	// (New returns after), else in the background after the first answer
	// that gives it. The process then holds that memory from the start.
	PrefaultPageCache bool
	// PageBytes is the page cache's unit: reads fetch, keep and read ahead
	// pages of this many bytes, a divisor of the chunk size (0: whole
	// chunks). Smaller pages cost more requests on a scan but less for
	// readers that ask for a range to the end of a file and stop within a
	// MiB, as ClickHouse does for every column it reads. Pages of at least
	// the chunk size are whole chunks; a smaller size that does not divide
	// a configured ChunkSize is refused, and one that does not divide the
	// chunk size learnt from the nodes means whole chunks.
	PageBytes int64
	// Candidates is the number of members tried per chunk, owner first,
	// when nodes answer that S3 failed (default 3). Members that cannot be
	// reached are always skipped, down to the last member.
	Candidates int
	// RingRefresh is the longest time between ring fetches (default 10s).
	// The ring is also fetched when a member is unreachable or an answer
	// carries a newer X-Distcache-Ring-Epoch.
	RingRefresh time.Duration
	// Timeout bounds one request to one member (default 30s).
	Timeout time.Duration
	// Logger defaults to discarding.
	Logger *slog.Logger
	// Registerer, when set, gets the client's metrics (page cache hits and
	// misses, node requests by result, failovers, ring epoch and
	// refreshes); Close unregisters them.
	Registerer prometheus.Registerer
	// WrapTransport, when set, wraps the HTTP transport the client builds
	// (instrumentation, tests).
	WrapTransport func(http.RoundTripper) http.RoundTripper
	// Zone, when set, is the zone the client reads in; Seeds are that
	// zone's nodes. A ring whose document names another zone (or none) is
	// refused wherever it comes from, at start and at every refresh: it is
	// logged, counted (distcache_client_node_requests_total{op="ring",
	// result="wrong_zone"}) and never routed by. Empty: any ring.
	Zone string
	// Fallback are the cache's other zones, in the order they are tried
	// when no member of Zone (nor any seed) can be reached: a request then
	// goes to the next zone's members, owner first by that zone's ring
	// (learnt from its seeds, and refused too if it names another zone),
	// then to its seeds, before it fails. Bytes that cross zones are
	// counted (distcache_cross_zone_bytes_total{peer_zone,direction}; the
	// client's own zone is the zone target label of its pod, as for the
	// nodes). Needs Zone.
	Fallback []ZoneSeeds
	// Now is the clock kept metadata's freshness (what remains of the
	// nodes' --meta-ttl) is measured by; tests give the nodes' clock.
	// Default time.Now. Leases are always measured in real time.
	Now func() time.Time
}

// ZoneSeeds names another zone of the cache and seed nodes of it
// (https://host:port), for Config.Fallback.
type ZoneSeeds struct {
	Zone  string
	Seeds []string
}

// Client talks to the cache nodes of one zone. It is safe for concurrent
// use; Close it when done.
type Client struct {
	cfg       Config
	tenant    string // the tenant chunk placement is computed for
	seeds     []string
	transport *http.Transport
	// inline makes GET and HEAD requests in the caller's goroutine and
	// passes the others to transport.
	inline *inlineTransport
	http   *http.Client
	// rt is the transport (wrapped, with WrapTransport) that http uses.
	// Reads call it directly: the node API never redirects, so
	// http.Client's redirect bookkeeping (a copy of every request's
	// headers, a closure, a deadline check) is pure cost on the hot path.
	rt      http.RoundTripper
	log     *slog.Logger
	metrics *clientMetrics

	ring      ring.Holder
	chunkSize atomic.Int64
	pages     *pageCache // nil when disabled
	ahead     *readAhead // nil without a page cache
	fillMu    sync.Mutex
	fills     map[string]*pageFill // pages being fetched into the page cache
	pool      *slab.Pool           // buffers of pages (fillMu)
	pageWarn  sync.Once            // PageBytes does not divide the chunk size
	metas     metaCache            // Stat answers kept on leases (metacache.go)
	// watcherID names this client in metadata lease polls; pollsCtx ends
	// them (Close).
	watcherID   string
	pollsCtx    context.Context
	pollsCancel context.CancelFunc

	// down holds the nodes that failed a moment ago, by address: tried
	// last, or skipped while another zone is left (request.go).
	down failover.Set

	// fallback are the other zones (Config.Fallback), tried in order;
	// fallbackAddrs maps their members' and seeds' addresses to their zone.
	fallback      []*fallbackZone
	fallbackAddrs atomic.Pointer[map[string]*fallbackZone]
	fallbackNow   chan struct{}

	refreshNow chan struct{}
	stop       context.CancelFunc
	loops      sync.WaitGroup // the ring refresh loops
	closeOnce  sync.Once
}

// New checks cfg, fetches the ring from the seeds and starts refreshing it.
// It fails with ErrUnavailable when no seed answers.
func New(ctx context.Context, cfg Config) (*Client, error) {
	if len(cfg.Seeds) == 0 {
		return nil, errors.New("client: no seeds")
	}
	if cfg.TLS == nil {
		return nil, errors.New("client: TLS configuration with a client certificate is required")
	}
	if cfg.ChunkSize < 0 || cfg.PageCacheBytes < 0 || cfg.PageBytes < 0 || cfg.Parallelism < 0 || cfg.Candidates < 0 {
		return nil, errors.New("client: negative ChunkSize, PageCacheBytes, PageBytes, Parallelism or Candidates")
	}
	if cfg.ChunkSize > 0 && cfg.PageBytes > 0 && cfg.PageBytes < cfg.ChunkSize && cfg.ChunkSize%cfg.PageBytes != 0 {
		return nil, fmt.Errorf("client: PageBytes %d does not divide ChunkSize %d", cfg.PageBytes, cfg.ChunkSize)
	}
	if cfg.Parallelism == 0 {
		cfg.Parallelism = DefaultParallelism
	}
	if cfg.Candidates == 0 {
		cfg.Candidates = DefaultCandidates
	}
	if cfg.RingRefresh <= 0 {
		cfg.RingRefresh = DefaultRingRefresh
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	c := &Client{cfg: cfg, log: cfg.Logger, refreshNow: make(chan struct{}, 1),
		fallbackNow: make(chan struct{}, 1), fills: map[string]*pageFill{}, watcherID: newWatcherID()}
	c.down.For, c.down.OnDown = downFor, c.refreshAfterFailure
	c.pollsCtx, c.pollsCancel = context.WithCancel(context.Background())
	c.metas.now = cfg.Now
	c.chunkSize.Store(cfg.ChunkSize)
	var err error
	if c.tenant, err = certTenant(cfg.TLS, cfg.Tenant); err != nil {
		return nil, err
	}
	for _, s := range cfg.Seeds {
		addr, err := seedAddress(s)
		if err != nil {
			return nil, err
		}
		c.seeds = append(c.seeds, addr)
	}
	if c.fallback, err = newFallbackZones(cfg.Zone, cfg.Fallback); err != nil {
		return nil, err
	}
	c.indexFallback()
	c.transport = newTransport(cfg)
	c.inline = newInlineTransport(c.transport, cfg.CurrentTLS)
	var rt http.RoundTripper = c.inline
	if cfg.WrapTransport != nil {
		rt = cfg.WrapTransport(rt)
	}
	c.rt = rt
	c.http = &http.Client{Transport: rt, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse // the node API never redirects; a redirect would change the key
	}}
	if c.metrics, err = newMetrics(cfg.Registerer, c.skipped, c.poolStats); err != nil {
		return nil, fmt.Errorf("client: metrics: %w", err)
	}
	if cfg.PageCacheBytes > 0 {
		if c.pages, err = newPageCache(cfg.PageCacheBytes); err != nil {
			c.metrics.unregister()
			return nil, err
		}
		c.ahead = newReadAhead()
	}
	if err := c.initRing(ctx); err != nil {
		c.pages.close()
		c.metrics.unregister()
		c.inline.close()
		return nil, err
	}
	if cs := c.chunkSize.Load(); cs > 0 && cfg.PrefaultPageCache {
		c.pagePool(c.pageSize(cs)).Prefault()
	}
	loopCtx, stop := context.WithCancel(context.Background())
	c.stop = stop
	c.loops.Add(1)
	go c.refreshLoop(loopCtx)
	if len(c.fallback) > 0 {
		c.loops.Add(1)
		go c.fallbackLoop(loopCtx)
	}
	return c, nil
}

// Ring is the ring the client routes by.
func (c *Client) Ring() *ring.Ring { return c.ring.Load() }

// ReadUnits are the nodes' chunk size and the page reads are split into
// (the whole chunk without a page cache, or where Config.PageBytes does not
// divide it); both 0 until the chunk size is known (set in Config, or
// learnt from the nodes' first answer, which New waits for).
func (c *Client) ReadUnits() (chunkBytes, pageBytes int64) {
	cs := c.chunkSize.Load()
	if cs <= 0 {
		return 0, 0
	}
	return cs, c.pageSize(cs)
}

// Close stops the ring refresh, drops the page cache, closes idle
// connections and unregisters the metrics. Objects opened from the client
// must not be used afterwards.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.stop()
		c.loops.Wait()
		c.stopPolls()
		c.pages.close()
		c.inline.close()
		c.metrics.unregister()
	})
	return nil
}

func newTransport(cfg Config) *http.Transport {
	tr := NodeTransport(cfg.TLS, cfg.CurrentTLS)
	tr.MaxIdleConnsPerHost = max(64, 4*cfg.Parallelism)
	tr.WriteBufferSize = 64 << 10
	// ReadBufferSize stays at net/http's 4 KiB: a body read of at least the
	// buffer's size goes straight from TLS into the caller's slice, where a
	// 64 KiB buffer put every byte through an extra copy (TLS returns at
	// most one 16 KiB record per Read, so a big buffer saves no system call
	// either).
	return tr
}

// NodeTransport is an HTTP/1.1-only transport to the node API holding
// tlsConfig's client certificate; with current set, each new connection
// takes its configuration from it instead (see Config.CurrentTLS). The
// client and the gateway's pass-through each add their own limits.
func NodeTransport(tlsConfig *tls.Config, current func() *tls.Config) *http.Transport {
	dialer := newNodeDialer()
	tr := &http.Transport{
		TLSClientConfig: withProtos(tlsConfig, "http/1.1"),
		// HTTP/1.1 only: Go's HTTP/2 is much slower for bulk bytes.
		TLSNextProto:        map[string]func(string, *tls.Conn) http.RoundTripper{},
		DialContext:         dialer.DialContext,
		TLSHandshakeTimeout: 5 * time.Second,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	if current != nil {
		tr.DialTLSContext = pki.DialTLSContext(current, dialer, dialer.Net.Timeout+tr.TLSHandshakeTimeout)
	}
	return tr
}

// newNodeDialer dials the nodes, through their names' last DNS answer
// while DNS fails (dnsfallback): NodeTransport's and the read
// connections' dialer.
func newNodeDialer() *dnsfallback.Dialer {
	return &dnsfallback.Dialer{Net: &net.Dialer{Timeout: 3 * time.Second, KeepAlive: 30 * time.Second}}
}

// withProtos is a copy of cfg offering the ALPN protocols protos.
func withProtos(cfg *tls.Config, protos ...string) *tls.Config {
	c := cfg.Clone()
	c.NextProtos = protos
	return c
}

// seedAddress turns "https://host:port" (or "host:port") into host:port.
func seedAddress(s string) (string, error) {
	if strings.Contains(s, "://") {
		u, err := url.Parse(s)
		if err != nil {
			return "", fmt.Errorf("client: seed %q: %w", s, err)
		}
		if u.Scheme != "https" {
			return "", fmt.Errorf("client: seed %q: the node API is https only", s)
		}
		s = u.Host
	}
	if _, _, err := net.SplitHostPort(s); err != nil {
		return "", fmt.Errorf("client: seed %q is not https://host:port", s)
	}
	return s, nil
}

// certTenant is the tenant chunks are placed for, given the client
// certificate: the tenant of a tenant certificate, or Tenant for a peer
// certificate. The ring hashes the
// tenant into every chunk id, so routing needs it even though the nodes
// take it from the certificate.
func certTenant(cfg *tls.Config, tenant string) (string, error) {
	id, err := certIdentity(cfg)
	if err != nil {
		return "", fmt.Errorf("client: %w", err)
	}
	switch id.Kind {
	case pki.KindTenant:
		if tenant != "" && tenant != id.Name {
			return "", fmt.Errorf("client: Tenant %q set with the certificate of tenant %q (a tenant certificate acts only for itself)", tenant, id.Name)
		}
		return id.Name, nil
	case pki.KindPeer:
		if tenant == "" {
			return "", fmt.Errorf("client: the certificate is peer %q's: set Tenant to the tenant it acts for", id.Name)
		}
		if err := pki.ValidateName(tenant); err != nil {
			return "", fmt.Errorf("client: Tenant: %w", err)
		}
		return tenant, nil
	}
	return "", fmt.Errorf("client: unsupported identity kind %q", id.Kind)
}

// certIdentity reads the distcache identity (URI SAN) of the client
// certificate that cfg presents.
func certIdentity(cfg *tls.Config) (pki.Identity, error) {
	var cert *tls.Certificate
	switch {
	case len(cfg.Certificates) > 0:
		cert = &cfg.Certificates[0]
	case cfg.GetClientCertificate != nil:
		var err error
		if cert, err = cfg.GetClientCertificate(&tls.CertificateRequestInfo{Version: tls.VersionTLS13}); err != nil {
			return pki.Identity{}, fmt.Errorf("client certificate: %w", err)
		}
	}
	if cert == nil || len(cert.Certificate) == 0 {
		return pki.Identity{}, errors.New("the TLS configuration has no client certificate")
	}
	leaf := cert.Leaf
	if leaf == nil {
		var err error
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return pki.Identity{}, fmt.Errorf("client certificate: %w", err)
		}
	}
	for _, u := range leaf.URIs {
		if strings.EqualFold(u.Scheme, pki.Scheme) && strings.EqualFold(u.Hostname(), pki.TrustDomain) {
			return pki.ParseIdentity(u)
		}
	}
	return pki.Identity{}, fmt.Errorf("the client certificate has no %s://%s/ identity", pki.Scheme, pki.TrustDomain)
}

// skipped counts the members marked down now.
func (c *Client) skipped() float64 { return float64(c.down.Count(time.Now())) }

// refreshAfterFailure refreshes the ring that the node at addr, which just
// failed, was a member of.
func (c *Client) refreshAfterFailure(addr string) {
	if c.fallbackZoneOf(addr) != nil {
		c.triggerFallbackRefresh()
		return
	}
	c.triggerRefresh()
}

// shuffled returns a copy of s in random order (spreads ring fetches).
func shuffled(s []string) []string {
	s = append([]string(nil), s...)
	rand.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
	return s
}
