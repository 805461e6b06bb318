package writepath

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/distcache/distcache/internal/minioproc"
	"github.com/distcache/distcache/internal/s3backend"
	"github.com/distcache/distcache/internal/tenancy"
	"github.com/distcache/distcache/tools/benchmark/benchcache"
	"github.com/distcache/distcache/tools/benchmark/benchkit"
	"github.com/distcache/distcache/tools/benchmark/clickhouse"
)

const (
	benchBucket = "bench"
	benchTenant = "bench"
	// gatewayPageCacheBytes is `cachenode gateway`'s default
	// --page-cache-bytes.
	gatewayPageCacheBytes = 256 << 20
)

// world is MinIO behind the link, the cache writing through to it, a
// gateway in front of the cache, and the two S3 clients of the columns.
type world struct {
	cfg     config
	minio   *minioproc.Server
	link    *clickhouse.Link
	cache   *benchcache.Cache
	gateway *benchcache.Gateway
	direct  *s3.Client // S3 through the link, with MinIO's credentials
	plain   *s3.Client // MinIO without the link: checks and clean-up, never measured
	// ch runs ClickHouse (chdb) for the ClickHouse row; chAnswer is the
	// table's fingerprint every process must read.
	ch        *clickhouse.Engine
	chAnswer  string
	chVersion string // "chdb x, ClickHouse y", once a process has said
	// nodePuts times the nodes' PUT handlers (write-throughs; the
	// nodes' metrics count chunk handouts between them as puts too).
	nodePuts timer
	closers  benchkit.Closers // close stops everything, last started first
}

func (w *world) onClose(f func()) { w.closers.Add(f) }

func (w *world) close() { w.closers.Close() }

func startWorld(ctx context.Context, env benchkit.Env, cfg config) (_ *world, err error) {
	w := &world{cfg: cfg}
	defer func() {
		if err != nil {
			w.close()
		}
	}()
	env.Logf("starting MinIO and the link (%s per request)", cfg.link.Latency)
	if w.minio, err = minioproc.Start(ctx, filepath.Join(env.Bin, "minio"), filepath.Join(env.WorkDir, "minio")); err != nil {
		return nil, err
	}
	w.onClose(w.minio.Stop)
	if err := w.minio.CreateBucket(ctx, benchBucket); err != nil {
		return nil, err
	}
	w.plain = w.minio.Client()
	if w.link, err = clickhouse.StartLink(w.minio.Endpoint, cfg.link); err != nil {
		return nil, err
	}
	w.onClose(w.link.Close)
	w.direct = benchcache.NewS3Client(w.link.URL, w.minio.Region, w.minio.AccessKey, w.minio.SecretKey)

	if cfg.ch != nil {
		if w.ch, err = clickhouse.NewEngine(ctx, env.Root, filepath.Join(env.WorkDir, "chdb")); err != nil {
			return nil, err
		}
	}

	env.Logf("starting %d cache node(s) and the gateway", cfg.nodes)
	// The nodes as `cachenode serve` runs them by default (TTL mode, its
	// chunk size, write cache and S3 settings), smaller tiers.
	if w.cache, err = benchcache.Start(ctx, benchcache.Config{
		Dir: filepath.Join(env.WorkDir, "cache"), Nodes: cfg.nodes, Tenant: benchTenant, Buckets: []string{benchBucket},
		ChunkSize: cfg.chunkSize, RAMBytes: 256 << 20, DiskBytes: 2 << 30,
		S3: s3backend.Config{Endpoint: w.link.URL, Region: w.minio.Region, UsePathStyle: true,
			Default: s3backend.Credentials{AccessKeyID: w.minio.AccessKey, SecretAccessKey: w.minio.SecretKey}},
		Wrap: w.nodePuts.wrap,
		Policies: []tenancy.Policy{
			{Bucket: benchBucket, Prefix: writeBackPrefix(1), Mode: tenancy.WriteBack, Replicas: 1},
			{Bucket: benchBucket, Prefix: writeBackPrefix(2), Mode: tenancy.WriteBack, Replicas: 2},
		},
		WriteBackPutIfAbsent: cfg.putIfAbsent,
	}); err != nil {
		return nil, err
	}
	w.onClose(w.cache.Close)
	if w.gateway, err = w.cache.StartGateway(ctx, gatewayPageCacheBytes); err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	return w, nil
}

// timer sums the durations of the PUT requests of the handlers it wraps.
type timer struct {
	mu  sync.Mutex
	hop hop
}

func (t *timer) wrap(_ string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPut {
			h.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		h.ServeHTTP(w, r)
		d := time.Since(start)
		t.mu.Lock()
		t.hop.sum += d.Seconds()
		t.hop.n++
		t.mu.Unlock()
	})
}

func (t *timer) get() hop {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.hop
}
