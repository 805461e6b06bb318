package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/rest"

	"github.com/distcache/distcache/internal/kubewatch"
	"github.com/distcache/distcache/internal/metalease"
	"github.com/distcache/distcache/internal/metrics"
	"github.com/distcache/distcache/internal/node"
	"github.com/distcache/distcache/internal/pki"
	"github.com/distcache/distcache/internal/ring"
	"github.com/distcache/distcache/internal/s3backend"
	"github.com/distcache/distcache/internal/store"
	"github.com/distcache/distcache/internal/tenancy"
)

// serveFlags are the settings of `cachenode serve`. Every flag can also be
// given as an environment variable (DISTCACHE_ + upper-case name with
// underscores), which is how the operator configures pods.
type serveFlags struct {
	listen, metricsListen          string
	tlsCert, tlsKey, clientCA      string
	dataDir                        string
	diskBytes, ramBytes, chunkSize byteSize
	writeCacheBytes                byteSize
	metaTTL                        time.Duration
	immutable                      bool
	metaLease                      time.Duration
	tenantsFile, tenantsSecret     string
	s3Endpoint, s3Region           string
	s3PathStyle                    bool
	s3MaxConcurrent, s3MaxAttempts int
	s3Timeout                      time.Duration
	logLevel                       string
	shutdownGrace                  time.Duration
	ringFile, ringConfigMap        string
	nodeName                       string
	peerCert, peerKey              string
	candidates                     int
	crossZone                      string
	zones, zoneRingFiles           string

	// Parsed from ringConfigMap and tenantsSecret; zero when not set.
	ringRef, tenantsRef kubewatch.Ref
	// Parsed from crossZone and zoneRingFiles (zone -> path, and the
	// zones in flag order).
	crossZoneMode node.CrossZone
	zoneFiles     map[string]string
	zoneFileOrder []string
}

func parseServeFlags(args []string) (f *serveFlags, err error) {
	f = &serveFlags{diskBytes: 10 << 30, ramBytes: 1 << 30, chunkSize: 4 << 20, writeCacheBytes: 64 << 20}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.StringVar(&f.listen, "listen", ":8443", "address of the mTLS chunk API")
	fs.StringVar(&f.metricsListen, "metrics-listen", ":9090", "address of the plain HTTP port for /metrics, /healthz and /readyz")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "server certificate (PEM); reloaded when the file changes")
	fs.StringVar(&f.tlsKey, "tls-key", "", "server private key (PEM)")
	fs.StringVar(&f.clientCA, "client-ca", "", "CA bundle that client certificates (and, for calls to other nodes, their server certificates) must chain to; reloaded when the file changes")
	fs.StringVar(&f.dataDir, "data-dir", "/var/lib/distcache", "directory of the disk tier (local NVMe)")
	fs.Var(&f.diskBytes, "disk-bytes", "hard bound on disk usage of data-dir, e.g. 800Gi")
	fs.Var(&f.ramBytes, "ram-bytes", "size of the RAM tier, e.g. 8Gi (0 disables it)")
	fs.Var(&f.chunkSize, "chunk-size", "chunk size; the same on every node of a cache, e.g. 4Mi")
	fs.Var(&f.writeCacheBytes, "write-cache-bytes", "how much of one write-through upload is kept to be cached")
	fs.DurationVar(&f.metaTTL, "meta-ttl", 30*time.Second, "how long object metadata is trusted before revalidation")
	fs.BoolVar(&f.immutable, "immutable", false, "never revalidate metadata (object keys are never overwritten, as with ClickHouse)")
	fs.DurationVar(&f.metaLease, "meta-lease", metalease.DefaultLease,
		"how long a gateway may use the object metadata it keeps between two polls for changes; the longest a dead gateway delays a write")
	fs.StringVar(&f.tenantsFile, "tenants-file", "", "tenants configuration (YAML); hot-reloaded (with --tenants-secret: the start value)")
	fs.StringVar(&f.tenantsSecret, "tenants-secret", "", "namespace/name[:key] of a Secret holding the tenants configuration (key default tenants.yaml), watched through the API server; wins over --tenants-file")
	fs.StringVar(&f.s3Endpoint, "s3-endpoint", "", "S3 endpoint URL (empty: AWS)")
	fs.StringVar(&f.s3Region, "s3-region", "us-east-1", "S3 region")
	fs.BoolVar(&f.s3PathStyle, "s3-path-style", false, "use path-style S3 addressing (MinIO)")
	fs.IntVar(&f.s3MaxConcurrent, "s3-max-concurrent", 64, "cap on in-flight S3 requests")
	fs.IntVar(&f.s3MaxAttempts, "s3-max-attempts", 4, "attempts per S3 request (retries back off with jitter)")
	fs.DurationVar(&f.s3Timeout, "s3-timeout", 30*time.Second, "timeout of one S3 request")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&f.ringFile, "ring-file", "", "ring document (JSON, docs/ring.md); watched (with --ring-configmap: the start value). Empty: run alone")
	fs.StringVar(&f.ringConfigMap, "ring-configmap", "", "namespace/name[:key] of a ConfigMap holding the ring document (key default ring.json), watched through the API server; needs --ring-file, wins over it")
	fs.StringVar(&f.nodeName, "node-name", os.Getenv("POD_NAME"), "this node's member name in the ring (default $POD_NAME)")
	fs.StringVar(&f.peerCert, "peer-cert", "", "certificate with this node's peer identity for calls to other nodes (default --tls-cert)")
	fs.StringVar(&f.peerKey, "peer-key", "", "key of --peer-cert (default --tls-key)")
	fs.IntVar(&f.candidates, "candidates", 3, "members tried, owner first, before a node reads S3 itself")
	fs.StringVar(&f.crossZone, "cross-zone", string(node.CrossZoneNever), "what a miss does across zones: Never (read S3), or OnMiss (first ask the chunk's owner in each other zone for it from its store only; needs those zones' rings: --zones, --zone-ring-files)")
	fs.StringVar(&f.zones, "zones", "", "comma-separated zones of the cache (the node's own may be listed): with --cross-zone=OnMiss, the ring of each other zone is followed through the API server in the --ring-configmap ConfigMap, key <zone>.json")
	fs.StringVar(&f.zoneRingFiles, "zone-ring-files", "", "comma-separated zone=path of other zones' ring documents, watched (with --ring-configmap: the start values) for --cross-zone=OnMiss")
	fs.DurationVar(&f.shutdownGrace, "shutdown-grace", 20*time.Second, "time to finish in-flight requests on SIGTERM")
	if err := parseFlags(fs, args, func() map[string]string {
		return map[string]string{"tls-cert": f.tlsCert, "tls-key": f.tlsKey, "client-ca": f.clientCA, "tenants-file": f.tenantsFile}
	}); err != nil {
		return nil, err
	}
	if f.ringFile != "" && f.nodeName == "" {
		return nil, errors.New("--ring-file needs --node-name (or $POD_NAME)")
	}
	if f.ringConfigMap != "" && f.ringFile == "" {
		return nil, errors.New("--ring-configmap needs --ring-file (the ring a node starts with, so that it starts while the API server cannot be reached)")
	}
	for _, ref := range []struct {
		flag, value, key string
		into             *kubewatch.Ref
	}{
		{"ring-configmap", f.ringConfigMap, "ring.json", &f.ringRef},
		{"tenants-secret", f.tenantsSecret, "tenants.yaml", &f.tenantsRef},
	} {
		if ref.value == "" {
			continue
		}
		if *ref.into, err = kubewatch.ParseRef(ref.value, ref.key); err != nil {
			return nil, fmt.Errorf("--%s: %w", ref.flag, err)
		}
	}
	if f.crossZoneMode, err = node.ParseCrossZone(f.crossZone); err != nil {
		return nil, fmt.Errorf("--cross-zone: %w", err)
	}
	if f.crossZoneMode == node.CrossZoneOnMiss {
		if f.ringFile == "" {
			return nil, errors.New("--cross-zone=OnMiss needs --ring-file (the node's own zone's ring)")
		}
		if f.zoneFiles, f.zoneFileOrder, err = parseZoneRingFiles(f.zoneRingFiles); err != nil {
			return nil, err
		}
	}
	if f.peerCert == "" {
		f.peerCert, f.peerKey = f.tlsCert, f.tlsKey
	}
	if f.chunkSize < 64<<10 || f.chunkSize > 64<<20 {
		return nil, fmt.Errorf("--chunk-size %s is outside 64Ki..64Mi", f.chunkSize)
	}
	if f.diskBytes < 4*f.chunkSize || f.diskBytes < store.MinDiskBytes {
		return nil, fmt.Errorf("--disk-bytes %s must hold at least four chunks and %s", f.diskBytes, byteSize(store.MinDiskBytes))
	}
	return f, nil
}

func runServe(args []string) error {
	f, err := parseServeFlags(args)
	if err != nil {
		return err
	}
	log := newLogger(f.logLevel)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	reg := newRegistry()
	m := metrics.NewNode(reg)

	tenants, err := tenancy.Watch(ctx, f.tenantsFile, log)
	if err != nil {
		return fmt.Errorf("loading tenants: %w", err)
	}
	metrics.RegisterTenantReloads(reg, tenants.Reloads)
	var kube *rest.Config
	if f.ringConfigMap != "" || f.tenantsSecret != "" {
		if kube, err = kubewatch.RESTConfig(); err != nil {
			return err
		}
	}
	if f.tenantsSecret != "" {
		if err := watchTenantsSecret(ctx, kube, f.tenantsRef, tenants, f.tenantsFile, reg, log); err != nil {
			return err
		}
	}
	st, err := store.Open(store.Options{
		Dir: f.dataDir, DiskBytes: int64(f.diskBytes), RAMBytes: int64(f.ramBytes), Logger: log,
		TenantQuota: func(name string) int64 {
			if t, ok := tenants.Current().Tenant(name); ok {
				return t.QuotaBytes
			}
			return 0
		},
	})
	if err != nil {
		return fmt.Errorf("opening store in %s: %w", f.dataDir, err)
	}
	defer st.Close()
	metrics.RegisterStore(reg, st.Stats)

	be, err := s3backend.New(s3backend.Config{
		Endpoint: f.s3Endpoint, Region: f.s3Region, UsePathStyle: f.s3PathStyle,
		Default:       s3backend.Credentials{AccessKeyID: os.Getenv("AWS_ACCESS_KEY_ID"), SecretAccessKey: os.Getenv("AWS_SECRET_ACCESS_KEY"), SessionToken: os.Getenv("AWS_SESSION_TOKEN")},
		MaxConcurrent: f.s3MaxConcurrent, MaxAttempts: f.s3MaxAttempts, RequestTimeout: f.s3Timeout,
		Observer: m,
	})
	if err != nil {
		return fmt.Errorf("S3 backend: %w", err)
	}
	cfg := node.Config{
		ChunkSize: int64(f.chunkSize), MetaTTL: f.metaTTL, Immutable: f.immutable, MetaLease: f.metaLease,
		WriteCacheBytes: int64(f.writeCacheBytes),
	}
	if f.ringFile != "" {
		var stopRingFile func()
		if cfg.Ring, stopRingFile, err = watchRing(ctx, f.ringFile, m, log); err != nil {
			return err
		}
		if f.ringConfigMap != "" {
			if err := watchRingConfigMap(ctx, kube, f.ringRef, cfg.Ring, stopRingFile, reg, log); err != nil {
				return err
			}
		}
		// Followed on disk, like the serving certificate and client CAs:
		// a CA rotation changes the bundle under running nodes.
		peerTLS, err := pki.NewClientTLS(f.peerCert, f.peerKey, f.clientCA)
		if err != nil {
			return fmt.Errorf("peer TLS: %w", err)
		}
		cfg.Self, cfg.Candidates = f.nodeName, f.candidates
		if f.crossZoneMode == node.CrossZoneOnMiss {
			cfg.CrossZone, cfg.Zones = node.CrossZoneOnMiss, &node.ZoneRings{}
			own := cfg.Ring.Load().Zone()
			srcs, err := zoneRingSources(splitList(f.zones), f.zoneFiles, f.zoneFileOrder, f.ringRef, own)
			if err != nil {
				return err
			}
			if err := followZoneRings(ctx, kube, srcs, cfg.Zones, reg, log); err != nil {
				return err
			}
			if len(srcs) == 0 {
				log.Warn("--cross-zone=OnMiss without another zone (--zones, --zone-ring-files): misses go to S3")
			}
			log.Info("misses ask the other zones' owners before S3", "zone", own, "otherZones", len(srcs))
		}
		cfg.Peers = &node.Peers{Client: &http.Client{Transport: &http.Transport{
			MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second,
			DialTLSContext: pki.DialTLSContext(peerTLS.Config, &net.Dialer{Timeout: 2 * time.Second}, 7*time.Second),
		}}}
	}
	srv, err := node.New(cfg, st, be, tenants, m, log)
	if err != nil {
		return err
	}
	tlsConfig, err := pki.ServerTLSConfig(f.tlsCert, f.tlsKey, f.clientCA)
	if err != nil {
		return fmt.Errorf("TLS: %w", err)
	}
	metrics.RegisterCertificateExpiry(reg, func() *x509.Certificate { return pki.ServingLeaf(tlsConfig) })

	api := &http.Server{
		Addr: f.listen, Handler: srv.Handler(), TLSConfig: tlsConfig,
		ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug), // handshake failures are the client's problem
		// An empty, non-nil map turns HTTP/2 off: HTTP/1.1 moves bulk bytes faster in Go.
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
	}
	// Chunk reads on connections that negotiate the read protocol are
	// answered by the node's own loop; everything else stays on net/http.
	srv.ServeReads(api)
	// Ready while serving; not ready once shutdown starts, so endpoints drain.
	var draining atomic.Bool
	ready := func() error {
		if draining.Load() {
			return errors.New("shutting down")
		}
		return nil
	}
	ops := &http.Server{Addr: f.metricsListen, Handler: opsHandler(reg, ready), ReadHeaderTimeout: 10 * time.Second}

	errc := make(chan error, 2)
	go func() { errc <- listenTLS(api) }()
	go func() { errc <- ops.ListenAndServe() }()
	log.Info("cache node serving", "listen", f.listen, "metrics", f.metricsListen, "dataDir", f.dataDir,
		"diskBytes", f.diskBytes.String(), "ramBytes", f.ramBytes.String(), "chunkSize", f.chunkSize.String())

	return waitAndDrain(ctx, errc, log, &draining, f.shutdownGrace, api, ops)
}

func listenTLS(s *http.Server) error {
	ln, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return err
	}
	return s.Serve(tls.NewListener(node.BatchingListener(ln), s.TLSConfig))
}

// opsHandler serves the plain port: metrics, liveness and readiness.
func opsHandler(reg *prometheus.Registry, ready func() error) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := ready(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}

func newLogger(level string) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		l = slog.LevelInfo
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: l}))
}

// watchRing loads the ring file and keeps the node's ring current with it.
// stopFile stops watching the file (the ring stays) and waits until the
// file watch has exited.
func watchRing(ctx context.Context, path string, m *metrics.Node, log *slog.Logger) (h *ring.Holder, stopFile func(), err error) {
	r, err := ring.LoadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("ring: %w", err)
	}
	h = &ring.Holder{}
	h.Store(r)
	m.RingEpoch.Set(float64(r.Epoch()))
	// Take Changed before Load (ring.Holder), so a change landing between
	// the two is not missed until the next one.
	changed := h.Changed()
	fileCtx, cancelFile := context.WithCancel(ctx)
	fileDone := make(chan struct{})
	go func() {
		defer close(fileDone)
		if err := ring.WatchFile(fileCtx, path, h, log); err != nil && fileCtx.Err() == nil {
			log.Error("ring watch stopped", "err", err)
		}
	}()
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-changed:
			}
			changed = h.Changed()
			r := h.Load()
			m.RingEpoch.Set(float64(r.Epoch()))
			log.Info("ring changed", "epoch", r.Epoch(), "members", len(r.Members()))
		}
	}()
	return h, func() { cancelFile(); <-fileDone }, nil
}
