package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/distcache/distcache/internal/embed"
	"github.com/distcache/distcache/internal/kubewatch"
	"github.com/distcache/distcache/internal/metalease"
	"github.com/distcache/distcache/internal/node"
	"github.com/distcache/distcache/internal/s3backend"
	"github.com/distcache/distcache/internal/store"
	"github.com/distcache/distcache/internal/writeback"
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
	writeBackFraction              float64
	writeBackUploads               int
	writeBackYield                 time.Duration
	writeBackMaxYield              time.Duration
	writeBackPutIfAbsent           string // auto, true or false; resolved into putIfAbsent
	putIfAbsent                    bool
	metaTTL                        time.Duration
	immutable                      bool
	metaLease                      time.Duration
	ringSettle                     time.Duration
	tenantsFile, tenantsSecret     string
	s3Endpoint, s3Region           string
	s3PathStyle                    bool
	s3MaxConcurrent, s3MaxAttempts int
	s3Timeout                      time.Duration
	ringFile, ringConfigMap        string
	nodeName                       string
	peerCert, peerKey              string
	candidates                     int
	crossZone                      string
	zones, zoneRingFiles           string
	lifecycleFlags

	// Parsed from ringConfigMap and tenantsSecret; zero when not set.
	ringRef, tenantsRef kubewatch.Ref
	// Parsed from crossZone and zoneRingFiles (in flag order).
	crossZoneMode node.CrossZone
	zoneFiles     []embed.ZoneRingFile
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
	fs.Float64Var(&f.writeBackFraction, "writeback-fraction", embed.DefaultWriteBackFraction,
		"share of --disk-bytes that objects of WriteBack and Transient policies may pin until S3 has them (never evicted; writes past it get SlowDown); 0 keeps none and refuses such policies' writes")
	fs.IntVar(&f.writeBackUploads, "writeback-uploads", 0,
		fmt.Sprintf("how many objects of WriteBack policies this node sends to S3 at once, each taking one of --s3-max-concurrent's requests while it does (0: %d, or half of --s3-max-concurrent if that is less)", writeback.DefaultWorkers))
	fs.DurationVar(&f.writeBackYield, "writeback-yield", writeback.DefaultYield,
		"no upload of WriteBack objects starts while this node took a WriteBack or Transient write within this long, so bursts of writes (ClickHouse's INSERTs) do not compete with persisting the earlier ones (0: never wait)")
	fs.DurationVar(&f.writeBackMaxYield, "writeback-max-yield", writeback.DefaultMaxYield,
		"the longest persisting waits in a row for --writeback-yield while writes keep coming: how late it may start at most")
	fs.StringVar(&f.writeBackPutIfAbsent, "writeback-put-if-absent", "auto",
		"send a WriteBack version of up to 1 MiB to S3 as a PUT with If-None-Match: * without a HEAD first (one request instead of two for a new key); "+
			"only for an S3 that honours If-None-Match: * (AWS S3, MinIO since 2024): one that ignored it could let a stale copy replace a newer version. "+
			"auto: on for AWS S3's own endpoints (--s3-endpoint empty or *.amazonaws.com), off otherwise")
	fs.DurationVar(&f.metaTTL, "meta-ttl", 30*time.Second, "how long object metadata is trusted before revalidation")
	fs.BoolVar(&f.immutable, "immutable", false, "never revalidate metadata (object keys are never overwritten, as with ClickHouse)")
	fs.DurationVar(&f.metaLease, "meta-lease", metalease.DefaultLease,
		"how long a gateway may use the object metadata it keeps between two polls for changes; the longest a dead gateway delays a write")
	fs.DurationVar(&f.ringSettle, "ring-settle", node.DefaultRingSettle,
		"how long after this node notices a new ring other members may still route by the previous one: metadata it confirmed in that time is confirmed again after it "+
			"(the longest a write racing a ring change is read stale); raise it to the kubelet's sync period when the ring file is a mounted ConfigMap")
	fs.StringVar(&f.tenantsFile, "tenants-file", "", "tenants configuration (YAML); hot-reloaded (with --tenants-secret: the start value)")
	fs.StringVar(&f.tenantsSecret, "tenants-secret", "", "namespace/name[:key] of a Secret holding the tenants configuration (key default tenants.yaml), watched through the API server; wins over --tenants-file")
	fs.StringVar(&f.s3Endpoint, "s3-endpoint", "", "S3 endpoint URL (empty: AWS)")
	fs.StringVar(&f.s3Region, "s3-region", "us-east-1", "S3 region")
	fs.BoolVar(&f.s3PathStyle, "s3-path-style", false, "use path-style S3 addressing (MinIO)")
	fs.IntVar(&f.s3MaxConcurrent, "s3-max-concurrent", 64, "cap on in-flight S3 requests")
	fs.IntVar(&f.s3MaxAttempts, "s3-max-attempts", 4, "attempts per S3 request (retries back off with jitter)")
	fs.DurationVar(&f.s3Timeout, "s3-timeout", 30*time.Second, "timeout of one S3 request")
	fs.StringVar(&f.ringFile, "ring-file", "", "ring document (JSON, docs/ring.md); watched (with --ring-configmap: the start value). Empty: run alone")
	fs.StringVar(&f.ringConfigMap, "ring-configmap", "", "namespace/name[:key] of a ConfigMap holding the ring document (key default ring.json), watched through the API server; needs --ring-file, wins over it")
	fs.StringVar(&f.nodeName, "node-name", os.Getenv("POD_NAME"), "this node's member name in the ring (default $POD_NAME)")
	fs.StringVar(&f.peerCert, "peer-cert", "", "certificate with this node's peer identity for calls to other nodes (default --tls-cert)")
	fs.StringVar(&f.peerKey, "peer-key", "", "key of --peer-cert (default --tls-key)")
	fs.IntVar(&f.candidates, "candidates", 3, "members tried, owner first, before a node reads S3 itself")
	fs.StringVar(&f.crossZone, "cross-zone", string(node.CrossZoneNever), "what a miss does across zones: Never (read S3), or OnMiss (first ask the chunk's owner in each other zone for it from its store only; needs those zones' rings: --zones, --zone-ring-files)")
	fs.StringVar(&f.zones, "zones", "", "comma-separated zones of the cache (the node's own may be listed): with --cross-zone=OnMiss, the ring of each other zone is followed through the API server in the --ring-configmap ConfigMap, key <zone>.json")
	fs.StringVar(&f.zoneRingFiles, "zone-ring-files", "", "comma-separated zone=path of other zones' ring documents, watched (with --ring-configmap: the start values) for --cross-zone=OnMiss")
	f.lifecycleFlags.register(fs)
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
		if f.zoneFiles, err = parseZoneRingFiles(f.zoneRingFiles); err != nil {
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
	if f.writeBackFraction == 0 {
		f.writeBackFraction = -1 // none (NodeConfig's zero is the default)
	}
	if f.writeBackFraction > 0.9 {
		return nil, fmt.Errorf("--writeback-fraction %v leaves the cache too little of --disk-bytes (at most 0.9)", f.writeBackFraction)
	}
	s3Requests := cmp.Or(f.s3MaxConcurrent, s3backend.DefaultMaxConcurrent)
	if f.writeBackUploads == 0 {
		f.writeBackUploads = max(1, min(writeback.DefaultWorkers, s3Requests/2))
	}
	if f.writeBackUploads < 1 || f.writeBackUploads > s3Requests {
		return nil, fmt.Errorf("--writeback-uploads %d must be between 1 and --s3-max-concurrent (%d)", f.writeBackUploads, s3Requests)
	}
	if f.writeBackYield < 0 || f.writeBackMaxYield <= 0 {
		return nil, fmt.Errorf("--writeback-yield %v must not be negative and --writeback-max-yield %v must be positive", f.writeBackYield, f.writeBackMaxYield)
	}
	if f.writeBackYield == 0 {
		f.writeBackYield = -1 // never wait (NodeConfig's zero is the default)
	}
	switch f.writeBackPutIfAbsent {
	case "auto":
		f.putIfAbsent = awsEndpoint(f.s3Endpoint)
	case "true", "false":
		f.putIfAbsent = f.writeBackPutIfAbsent == "true"
	default:
		return nil, fmt.Errorf("--writeback-put-if-absent %q must be auto, true or false", f.writeBackPutIfAbsent)
	}
	return f, nil
}

// nodeConfig maps the flags onto the node's configuration. The S3
// credentials come from the AWS_* environment variables.
func (f *serveFlags) nodeConfig(reg *prometheus.Registry, log *slog.Logger) embed.NodeConfig {
	return embed.NodeConfig{
		Listen: f.listen, TLSCert: f.tlsCert, TLSKey: f.tlsKey, ClientCA: f.clientCA, MetricsListen: f.metricsListen,
		DataDir: f.dataDir, DiskBytes: int64(f.diskBytes), RAMBytes: int64(f.ramBytes),
		ChunkSize: int64(f.chunkSize), MetaTTL: f.metaTTL, Immutable: f.immutable, MetaLease: f.metaLease, RingSettle: f.ringSettle,
		WriteCacheBytes: int64(f.writeCacheBytes), WriteBackFraction: f.writeBackFraction,
		WriteBackUploads: f.writeBackUploads, WriteBackYield: f.writeBackYield, WriteBackMaxYield: f.writeBackMaxYield,
		WriteBackPutIfAbsent: f.putIfAbsent,
		TenantsFile:          f.tenantsFile, TenantsSecret: f.tenantsRef,
		S3: s3backend.Config{
			Endpoint: f.s3Endpoint, Region: f.s3Region, UsePathStyle: f.s3PathStyle,
			Default:       s3backend.Credentials{AccessKeyID: os.Getenv("AWS_ACCESS_KEY_ID"), SecretAccessKey: os.Getenv("AWS_SECRET_ACCESS_KEY"), SessionToken: os.Getenv("AWS_SESSION_TOKEN")},
			MaxConcurrent: f.s3MaxConcurrent, MaxAttempts: f.s3MaxAttempts, RequestTimeout: f.s3Timeout,
		},
		RingFile: f.ringFile, RingConfigMap: f.ringRef, Self: f.nodeName, Candidates: f.candidates,
		PeerCert: f.peerCert, PeerKey: f.peerKey,
		CrossZone: f.crossZoneMode, Zones: splitList(f.zones), ZoneRingFiles: f.zoneFiles,
		Registry: reg, Logger: log,
	}
}

func (f *serveFlags) start(ctx context.Context, reg *prometheus.Registry, log *slog.Logger) (server, error) {
	return embed.StartNode(ctx, f.nodeConfig(reg, log))
}

// awsEndpoint reports whether endpoint is AWS S3's own: the SDK's default
// (empty) or a host under amazonaws.com (amazonaws.com.cn in China).
func awsEndpoint(endpoint string) bool {
	if endpoint == "" {
		return true
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return false
	}
	host := strings.ToLower(u.Hostname())
	return strings.HasSuffix(host, ".amazonaws.com") || strings.HasSuffix(host, ".amazonaws.com.cn")
}
