// Package embed assembles the servers of distcache, as etcd's server/embed
// does etcd's: a cache node from one NodeConfig (StartNode) and a gateway
// from one GatewayConfig (StartGateway). `cachenode serve` and `cachenode
// gateway` map their flags onto these configurations and call nothing
// else; the integration harness (internal/testutil/nodecluster), the e2e
// suites and the benchmarks call the same constructors, so a test runs
// the wiring production runs, and a new component is wired once.
//
// A node is: the tenants configuration (a file, a Secret through the API
// server, or a watcher shared by the nodes of one process), the store, the
// S3 backend, the ring (a file and a ConfigMap, or a holder the caller
// feeds), the other members and other zones' rings, the node.Server, its
// mTLS listener with read connections (node.Server.ServeReads) on a
// node.BatchingListener, and the plain metrics port. A gateway is: the
// cache client, the read geometry, the gateway and its upstream, behind a
// listener that answers 503 until a cache node was reached.
//
// Listeners may be passed in (tests listen on 127.0.0.1:0), and the clock,
// the metrics registry and the logger are injectable. The constructors
// return once serving; Err reports a server that stopped, Shutdown drains
// and Close stops at once.
package embed

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"

	"github.com/distcache/distcache/internal/dnsfallback"
	"github.com/distcache/distcache/internal/kubewatch"
	"github.com/distcache/distcache/internal/metrics"
	"github.com/distcache/distcache/internal/node"
	"github.com/distcache/distcache/internal/pki"
	"github.com/distcache/distcache/internal/ring"
	"github.com/distcache/distcache/internal/s3backend"
	"github.com/distcache/distcache/internal/store"
	"github.com/distcache/distcache/internal/tenancy"
	"github.com/distcache/distcache/internal/writeback"
)

// NodeConfig is everything a cache node is made of. The zero value of a
// field is its default; fields documented "instead of" another let a
// process that runs several nodes (tests, benchmarks) share or feed a
// component the flags would have each node build for itself.
type NodeConfig struct {
	// Listen is the address of the mTLS node API; Listener, when set, is
	// served instead (StartNode owns it from then on).
	Listen   string
	Listener net.Listener
	// TLSCert and TLSKey are the serving certificate, ClientCA the bundle
	// client certificates (and other nodes' server certificates) chain
	// to; all three are followed on disk.
	TLSCert, TLSKey, ClientCA string
	// MetricsListen is the address of the plain port for /metrics,
	// /healthz and /readyz; empty: none.
	MetricsListen string

	// DataDir is the disk tier's directory, bounded by DiskBytes; RAMBytes
	// is the RAM tier (0: none). MaintenanceInterval is the store's (0:
	// its default).
	DataDir             string
	DiskBytes, RAMBytes int64
	MaintenanceInterval time.Duration

	// The node's own settings (node.Config).
	ChunkSize       int64
	MetaTTL         time.Duration
	Immutable       bool
	MetaLease       time.Duration
	RingSettle      time.Duration
	WriteCacheBytes int64
	// WriteBackFraction is the share of DiskBytes the objects of WriteBack
	// and Transient policies may pin (never evicted; writes past it get
	// SlowDown); 0: DefaultWriteBackFraction, negative: none (such
	// policies are refused).
	WriteBackFraction float64
	// WriteBackUploads is how many held versions a node sends to S3 at
	// once (0: writeback.DefaultWorkers).
	WriteBackUploads int
	// WriteBackYield and WriteBackMaxYield are writeback.Persister's
	// Yield and MaxYield (0: their defaults; a negative Yield: never wait).
	WriteBackYield, WriteBackMaxYield time.Duration
	// WriteBackPutIfAbsent says S3 honours If-None-Match: * on PUT
	// (writeback.Backend.PutIfAbsent): small held versions of new keys go
	// up without a HEAD first. `cachenode serve` sets it for AWS S3's
	// endpoints unless told otherwise (--writeback-put-if-absent).
	WriteBackPutIfAbsent bool

	// TenantsFile is the tenants configuration, watched; TenantsSecret,
	// when set, is followed through the API server and wins over it.
	// Tenants, instead of TenantsFile, is a watcher the caller runs (shared
	// by the nodes of one process); StartNode does not close it.
	TenantsFile   string
	TenantsSecret kubewatch.Ref
	Tenants       *tenancy.Watcher

	// S3 is the backend's configuration (its Observer defaults to the
	// node's metrics). Backend, instead, is one the caller built (shared).
	S3      s3backend.Config
	Backend *s3backend.Backend

	// RingFile is the ring document, watched; RingConfigMap, when set, is
	// followed through the API server and wins over it once delivered.
	// Ring, instead of RingFile, is a holder the caller stores rings in.
	// With neither the node runs alone.
	RingFile      string
	RingConfigMap kubewatch.Ref
	Ring          *ring.Holder
	// Self is the node's member name in the ring; Candidates the members
	// tried before S3 (0: node's default).
	Self       string
	Candidates int
	// PeerCert and PeerKey are the identity for calls to other members
	// (default TLSCert, TLSKey); PeerTimeout bounds one (0: node's default).
	PeerCert, PeerKey string
	PeerTimeout       time.Duration

	// CrossZone is what a miss does across zones. With node.CrossZoneOnMiss
	// the other zones' rings come from ZoneRingFiles and, with
	// RingConfigMap, from the keys of that ConfigMap for Zones; ZoneRings,
	// instead, is a set of rings the caller stores them in.
	CrossZone     node.CrossZone
	Zones         []string
	ZoneRingFiles []ZoneRingFile
	ZoneRings     *node.ZoneRings

	// WrapHandler, when set, wraps the node API's handler (a benchmark
	// timing requests).
	WrapHandler func(http.Handler) http.Handler
	// Registry gets the node's metrics (default a new one); Logger its
	// logs (default none); Now is its clock (default time.Now).
	Registry *prometheus.Registry
	Logger   *slog.Logger
	Now      func() time.Time
}

// Node is a running cache node.
type Node struct {
	cfg     NodeConfig
	ctx     context.Context // ends the watches (Close)
	cancel  context.CancelFunc
	log     *slog.Logger
	reg     *prometheus.Registry
	metrics *metrics.Node
	kube    *rest.Config

	tenants *tenancy.Watcher
	journal *writeback.Journal
	uploads *writeback.Uploads
	store   *store.Store
	backend *s3backend.Backend
	ring    *ring.Holder
	zones   *node.ZoneRings
	srv     *node.Server
	handler http.Handler
	api     *http.Server
	ops     *http.Server
	addr    string

	errc     chan error
	draining atomic.Bool
	closers  []func() // run in reverse by Close
	once     sync.Once
}

// StartNode assembles a node from cfg and serves it. ctx bounds the
// watches (ring, tenants, zones); Close ends them too.
func StartNode(ctx context.Context, cfg NodeConfig) (_ *Node, err error) {
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.PeerCert == "" {
		cfg.PeerCert, cfg.PeerKey = cfg.TLSCert, cfg.TLSKey
	}
	n := &Node{cfg: cfg, log: cfg.Logger, reg: cfg.Registry, errc: make(chan error, 2)}
	n.ctx, n.cancel = context.WithCancel(ctx)
	defer func() {
		if err != nil {
			if n.cfg.Listener != nil { // not served yet
				_ = n.cfg.Listener.Close()
			}
			n.Close()
		}
	}()
	n.metrics = metrics.NewNode(n.reg)
	for _, step := range []func() error{n.openTenants, n.openJournal, n.openStore, n.openBackend, n.joinRing, n.newServer, n.serve} {
		if err := step(); err != nil {
			return nil, err
		}
	}
	n.log.Info("cache node serving", "listen", n.addr, "metrics", cfg.MetricsListen, "dataDir", cfg.DataDir,
		"diskBytes", cfg.DiskBytes, "ramBytes", cfg.RAMBytes, "chunkSize", cfg.ChunkSize)
	return n, nil
}

func (n *Node) onClose(f func()) { n.closers = append(n.closers, f) }

// kubeConfig is the in-cluster API server configuration, made once when a
// Secret or a ConfigMap is followed.
func (n *Node) kubeConfig() (*rest.Config, error) {
	if n.kube == nil {
		var err error
		if n.kube, err = kubewatch.RESTConfig(); err != nil {
			return nil, err
		}
	}
	return n.kube, nil
}

// openTenants watches the tenants file (or takes the caller's watcher)
// and follows the tenants Secret.
func (n *Node) openTenants() error {
	n.tenants = n.cfg.Tenants
	if n.tenants == nil {
		var err error
		if n.tenants, err = tenancy.Watch(n.ctx, n.cfg.TenantsFile, n.log); err != nil {
			return fmt.Errorf("loading tenants: %w", err)
		}
		n.onClose(func() { _ = n.tenants.Close() })
	}
	metrics.RegisterTenantReloads(n.reg, n.tenants.Reloads)
	if n.cfg.TenantsSecret.Name == "" {
		return nil
	}
	kube, err := n.kubeConfig()
	if err != nil {
		return err
	}
	return watchTenantsSecret(n.ctx, kube, n.cfg.TenantsSecret, n.tenants, n.cfg.TenantsFile, n.reg, n.log)
}

// DefaultWriteBackFraction is NodeConfig.WriteBackFraction's default.
const DefaultWriteBackFraction = 0.3

// heldDir is the journal's directory in DataDir.
const heldDir = "writeback"

// openJournal opens the write-back journal in DataDir, bounded by
// WriteBackFraction of DiskBytes, and what a previous process held.
func (n *Node) openJournal() error {
	f := n.cfg.WriteBackFraction
	if f == 0 {
		f = DefaultWriteBackFraction
	}
	if f < 0 {
		return nil
	}
	var err error
	if n.journal, err = writeback.Open(filepath.Join(n.cfg.DataDir, heldDir), int64(f*float64(n.cfg.DiskBytes))); err != nil {
		return fmt.Errorf("opening the write-back journal: %w", err)
	}
	if n.uploads, err = writeback.OpenUploads(filepath.Join(n.cfg.DataDir, heldDir, "uploads")); err != nil {
		return fmt.Errorf("opening the write-back uploads: %w", err)
	}
	if s := n.journal.Stats(); s.Objects > 0 {
		n.log.Info("write-back journal: resuming what was held", "objects", s.Objects, "dirty", s.Dirty, "bytes", s.Bytes)
	}
	return nil
}

// openStore opens the store, with each tenant's quota from the tenants
// configuration in force, around the journal's pinned bytes.
func (n *Node) openStore() error {
	var pinned func() int64
	if n.journal != nil {
		pinned = n.journal.Used
	}
	st, err := store.Open(store.Options{
		Pinned: pinned, PinnedDir: heldDir,
		Dir: n.cfg.DataDir, DiskBytes: n.cfg.DiskBytes, RAMBytes: n.cfg.RAMBytes, Logger: n.log,
		MaintenanceInterval: n.cfg.MaintenanceInterval,
		TenantQuota: func(name string) int64 {
			if t, ok := n.tenants.Current().Tenant(name); ok {
				return t.QuotaBytes
			}
			return 0
		},
	})
	if err != nil {
		return fmt.Errorf("opening store in %s: %w", n.cfg.DataDir, err)
	}
	n.store = st
	n.onClose(func() { _ = st.Close() })
	metrics.RegisterStore(n.reg, st.Stats)
	return nil
}

func (n *Node) openBackend() error {
	if n.backend = n.cfg.Backend; n.backend != nil {
		return nil
	}
	s3cfg := n.cfg.S3
	if s3cfg.Observer == nil {
		s3cfg.Observer = n.metrics
	}
	var err error
	if n.backend, err = s3backend.New(s3cfg); err != nil {
		return fmt.Errorf("S3 backend: %w", err)
	}
	return nil
}

// joinRing follows the ring (file and ConfigMap, or the caller's holder)
// and the other zones' rings. Without a ring the node runs alone.
func (n *Node) joinRing() error {
	switch {
	case n.cfg.RingFile != "":
		h, stopFile, err := watchRingFile(n.ctx, n.cfg.RingFile, n.log)
		if err != nil {
			return err
		}
		n.ring = h
		if n.cfg.RingConfigMap.Name != "" {
			kube, err := n.kubeConfig()
			if err != nil {
				return err
			}
			if err := watchRingConfigMap(n.ctx, kube, n.cfg.RingConfigMap, h, stopFile, n.reg, n.log); err != nil {
				return err
			}
		}
	case n.cfg.Ring != nil:
		n.ring = n.cfg.Ring
	default:
		return nil
	}
	followRingEpoch(n.ctx, n.ring, n.metrics, n.log)
	n.zones = n.cfg.ZoneRings
	if n.zones == nil && n.cfg.CrossZone == node.CrossZoneOnMiss {
		n.zones = &node.ZoneRings{}
		var own string
		if r := n.ring.Load(); r != nil {
			own = r.Zone()
		}
		srcs, err := zoneRingSources(n.cfg.Zones, n.cfg.ZoneRingFiles, n.cfg.RingConfigMap, own)
		if err != nil {
			return err
		}
		var kube *rest.Config
		if n.cfg.RingConfigMap.Name != "" {
			if kube, err = n.kubeConfig(); err != nil {
				return err
			}
		}
		if err := followZoneRings(n.ctx, kube, srcs, n.zones, n.reg, n.log); err != nil {
			return err
		}
		if len(srcs) == 0 {
			n.log.Warn("--cross-zone=OnMiss without another zone (--zones, --zone-ring-files): misses go to S3")
		}
		n.log.Info("misses ask the other zones' owners before S3", "zone", own, "otherZones", len(srcs))
	}
	return nil
}

// newServer makes the node.Server; a member of a ring gets a client for
// the others with its peer certificate, followed on disk like the serving
// certificate (a CA rotation changes the bundle under running nodes).
func (n *Node) newServer() error {
	cfg := node.Config{
		ChunkSize: n.cfg.ChunkSize, MetaTTL: n.cfg.MetaTTL, Immutable: n.cfg.Immutable, MetaLease: n.cfg.MetaLease,
		RingSettle: n.cfg.RingSettle, WriteCacheBytes: n.cfg.WriteCacheBytes, Now: n.cfg.Now, Journal: n.journal, Uploads: n.uploads,
		PersistUploads: n.cfg.WriteBackUploads, PersistYield: n.cfg.WriteBackYield, PersistMaxYield: n.cfg.WriteBackMaxYield,
		PersistPutIfAbsent: n.cfg.WriteBackPutIfAbsent,
	}
	if n.journal != nil {
		held := metrics.NewHeld(n.reg, n.heldStats, n.journal.Stats().Limit).ReportPinned(n.pinned)
		n.journal.ObserveSyncs(func(d time.Duration) { held.JournalSync.Observe(d.Seconds()) })
		cfg.HeldMetrics = held
	}
	if n.ring != nil {
		peerTLS, err := pki.NewClientTLS(n.cfg.PeerCert, n.cfg.PeerKey, n.cfg.ClientCA)
		if err != nil {
			return fmt.Errorf("peer TLS: %w", err)
		}
		cfg.Ring, cfg.Self, cfg.Candidates = n.ring, n.cfg.Self, n.cfg.Candidates
		cfg.CrossZone, cfg.Zones = n.cfg.CrossZone, n.zones
		cfg.Peers = &node.Peers{Client: &http.Client{Transport: &http.Transport{
			MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second,
			DialTLSContext: pki.DialTLSContext(peerTLS.Config, &dnsfallback.Dialer{Net: &net.Dialer{Timeout: 2 * time.Second},
				OnStale: func(host string, err error) {
					n.log.Warn("DNS failed: dialing a peer at the addresses its name last had", "host", host, "err", err)
				}}, 7*time.Second),
		}}, Timeout: n.cfg.PeerTimeout}
	}
	var err error
	if n.srv, err = node.New(cfg, n.store, n.backend, n.tenants, n.metrics, n.log); err != nil {
		return err
	}
	if n.journal != nil {
		held := make(chan struct{})
		go func() { defer close(held); n.srv.RunHeld(n.ctx) }()
		n.onClose(func() { <-held }) // before the store closes
	}
	go n.srv.FollowRing(n.ctx)
	return nil
}

// pinned is what counts against the pinned limit, as held writes and
// parts are refused (node.keepHeldPart): the journal's bodies and the
// uploads' parts (not the journal's log segments, which Used counts).
func (n *Node) pinned() int64 { return n.journal.Pinned() + n.uploads.Used() }

// heldStats is the journal's content per tenant, for the metrics.
func (n *Node) heldStats() map[string]metrics.HeldStats {
	out := map[string]metrics.HeldStats{}
	for t, s := range n.journal.TenantStats() {
		out[t] = metrics.HeldStats{Objects: s.Objects, Dirty: s.Dirty, Bytes: s.Bytes, OldestDirty: s.OldestDirty}
	}
	return out
}

// serve listens: the node API over mTLS, HTTP/1.1 (an empty, non-nil
// TLSNextProto turns HTTP/2 off: HTTP/1.1 moves bulk bytes faster in Go)
// with chunk reads on read connections, and the metrics port.
func (n *Node) serve() error {
	tlsConfig, err := pki.ServerTLSConfig(n.cfg.TLSCert, n.cfg.TLSKey, n.cfg.ClientCA)
	if err != nil {
		return fmt.Errorf("TLS: %w", err)
	}
	metrics.RegisterCertificateExpiry(n.reg, func() *x509.Certificate { return pki.ServingLeaf(tlsConfig) })
	n.handler = n.srv.Handler()
	if n.cfg.WrapHandler != nil {
		n.handler = n.cfg.WrapHandler(n.handler)
	}
	n.api = &http.Server{
		Addr: n.cfg.Listen, Handler: n.handler, TLSConfig: tlsConfig,
		ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		ErrorLog:     slog.NewLogLogger(n.log.Handler(), slog.LevelDebug), // handshake failures are the client's problem
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
	}
	n.srv.ServeReads(n.api)
	ln := n.cfg.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", n.cfg.Listen); err != nil {
			return err
		}
	}
	n.cfg.Listener = nil // served from here on: closed by api.Close
	n.addr = ln.Addr().String()
	api := n.api
	go func() { n.errc <- api.Serve(tls.NewListener(node.BatchingListener(ln), tlsConfig)) }()
	n.ops, err = serveOps(n.cfg.MetricsListen, n.reg, n.ready, n.errc)
	return err
}

// ready is the node's readiness: not ready once shutdown starts, so
// endpoints drain.
func (n *Node) ready() error {
	if n.draining.Load() {
		return errors.New("shutting down")
	}
	return nil
}

// Addr is the host:port the node API listens on.
func (n *Node) Addr() string { return n.addr }

// URL is https://Addr.
func (n *Node) URL() string { return "https://" + n.addr }

// MetricsAddr is the host:port of the metrics port; empty without one.
func (n *Node) MetricsAddr() string { return opsAddr(n.ops) }

// Server is the node.Server.
func (n *Node) Server() *node.Server { return n.srv }

// HTTPServer is the node API's server (its TLSConfig is the serving one).
func (n *Node) HTTPServer() *http.Server { return n.api }

// Handler is what the node API serves, without TLS.
func (n *Node) Handler() http.Handler { return n.handler }

// Store is the node's store.
func (n *Node) Store() *store.Store { return n.store }

// Registry holds the node's metrics; Metrics are the node's own.
func (n *Node) Registry() *prometheus.Registry { return n.reg }

// Metrics are the node's metrics.
func (n *Node) Metrics() *metrics.Node { return n.metrics }

// Ring is the ring the node routes by; nil when it runs alone.
func (n *Node) Ring() *ring.Holder { return n.ring }

// ZoneRings are the other zones' rings; nil without them.
func (n *Node) ZoneRings() *node.ZoneRings { return n.zones }

// Tenants is the tenants configuration in force.
func (n *Node) Tenants() *tenancy.Watcher { return n.tenants }

// Err receives the error of a server (API or metrics port) that stopped
// (http.ErrServerClosed after Shutdown or Close).
func (n *Node) Err() <-chan error { return n.errc }

// Shutdown drains: readiness turns false, the servers finish in-flight
// requests until ctx ends, then everything is closed.
func (n *Node) Shutdown(ctx context.Context) error {
	n.draining.Store(true)
	err := shutdownAll(ctx, n.api, n.ops)
	n.Close()
	return err
}

// Close stops the node at once: its servers and every open connection,
// the watches, then the store. It is idempotent.
func (n *Node) Close() {
	n.once.Do(func() {
		n.draining.Store(true)
		closeAll(n.api, n.ops)
		n.cancel()
		for i := len(n.closers) - 1; i >= 0; i-- {
			n.closers[i]()
		}
	})
}
