package hitpath

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/distcache/distcache/internal/client"
	"github.com/distcache/distcache/internal/gobuild"
	"github.com/distcache/distcache/internal/minioproc"
	"github.com/distcache/distcache/internal/s3backend"
	"github.com/distcache/distcache/tools/benchmark/benchcache"
	"github.com/distcache/distcache/tools/benchmark/benchkit"
)

const (
	benchBucket, benchKey = "bench", "object.bin"
	benchTenant           = "bench"
)

// world is everything the cells read from: MinIO holding one object, two
// caches of one node over mTLS (alone in a ring of one, so the ring-aware
// client works as in production): one started --immutable, one in the
// default TTL mode; gateways in front of them (the TTL cache with the RAM
// page cache off and on, the immutable one with it on), nginx caching
// MinIO (TLS with client certificates, and plain HTTP), and a raw TLS
// server. Every server except MinIO and nginx runs in this process.
type world struct {
	cfg     config
	dir     string
	payload []byte // the object's bytes: every read is checked against them

	caFile   string
	serverTL *tls.Config // the node's (and the raw server's) TLS
	tenantTL *tls.Config // the tenant's client certificate

	minio     *minioproc.Server
	minioS3   *s3.Client        // aws-sdk-go-v2 to MinIO, signed with its keys
	cache     *benchcache.Cache // --immutable: the node columns, the immutable gateway
	ttlCache  *benchcache.Cache // the default TTL mode: the other gateways
	nodeReg   *prometheus.Registry
	nodeAddr  string
	meta      client.Meta // the version the Go client reads (one Stat, as a user would)
	goClient  *client.Client
	nodeHTTP  *http.Client
	gateways  [3]*benchcache.Gateway // TTL mode: page cache off, on (the default); --immutable: on
	nginx     *nginxProc
	nginxHTTP *http.Client // mTLS
	nginxS3   *s3.Client   // aws-sdk-go-v2, plain HTTP
	rawLn     net.Listener
	rawAddr   string
	closers   benchkit.Closers // close stops everything, last started first
}

func (w *world) onClose(f func()) { w.closers.Add(f) }

func (w *world) close() { w.closers.Close() }

// startWorld brings everything up and warms every cache.
func startWorld(ctx context.Context, env envInfo, cfg config) (_ *world, err error) {
	w := &world{cfg: cfg, dir: env.workDir}
	defer func() {
		if err != nil {
			w.close()
		}
	}()
	w.payload = make([]byte, cfg.objectSize)
	_, _ = rand.Read(w.payload)

	env.logf("starting MinIO")
	if err := w.startMinIO(ctx, env.minioBin); err != nil {
		return nil, err
	}
	env.logf("starting the cache node")
	if w.cache, err = benchcache.Start(ctx, benchcache.Config{Dir: w.dir, Nodes: 1, Tenant: benchTenant, Buckets: []string{benchBucket},
		ChunkSize: cfg.chunkSize, RAMBytes: 2 * cfg.objectSize, DiskBytes: max(4*cfg.objectSize, 64<<20), Immutable: true,
		S3: s3backend.Config{Endpoint: w.minio.Endpoint, Region: w.minio.Region, UsePathStyle: true,
			Default: s3backend.Credentials{AccessKeyID: w.minio.AccessKey, SecretAccessKey: w.minio.SecretKey}},
	}); err != nil {
		return nil, err
	}
	w.onClose(w.cache.Close)
	w.caFile, w.serverTL, w.tenantTL = w.cache.PKI.CAFile, w.cache.PKI.ServerTLS, w.cache.PKI.TenantTLS
	nd := w.cache.Nodes()[0]
	w.nodeReg, w.nodeAddr = nd.Reg, nd.Addr
	if w.goClient, err = client.New(ctx, client.Config{Seeds: w.cache.Seeds(), TLS: w.tenantTL, ChunkSize: cfg.chunkSize}); err != nil {
		return nil, fmt.Errorf("the Go client: %w", err)
	}
	w.onClose(func() { _ = w.goClient.Close() })
	if w.meta, err = w.goClient.Stat(ctx, benchBucket, benchKey); err != nil {
		return nil, fmt.Errorf("stat through the node: %w", err)
	}
	if w.meta.Size != cfg.objectSize {
		return nil, fmt.Errorf("the node says the object has %d bytes, not %d", w.meta.Size, cfg.objectSize)
	}
	w.nodeHTTP = newHTTPClient(w.tenantTL)
	w.onClose(w.nodeHTTP.CloseIdleConnections)
	env.logf("starting the TTL-mode cache node")
	if w.ttlCache, err = benchcache.Start(ctx, benchcache.Config{Dir: filepath.Join(w.dir, "ttl"), Nodes: 1, Tenant: benchTenant,
		Buckets: []string{benchBucket}, ChunkSize: cfg.chunkSize, RAMBytes: 2 * cfg.objectSize, DiskBytes: max(4*cfg.objectSize, 64<<20),
		S3: s3backend.Config{Endpoint: w.minio.Endpoint, Region: w.minio.Region, UsePathStyle: true,
			Default: s3backend.Credentials{AccessKeyID: w.minio.AccessKey, SecretAccessKey: w.minio.SecretKey}},
	}); err != nil {
		return nil, err
	}
	w.onClose(w.ttlCache.Close)
	var cachenode string
	if !cfg.gatewayInProcess {
		env.logf("building cachenode")
		if cachenode, err = gobuild.Build(ctx, env.root, gobuild.Cachenode, ""); err != nil {
			return nil, err
		}
	}
	for i, gw := range []struct {
		cache     *benchcache.Cache
		pageCache int64
	}{{w.ttlCache, 0}, {w.ttlCache, 2 * cfg.objectSize}, {w.cache, 2 * cfg.objectSize}} {
		env.logf("starting gateway %d (page cache %d bytes)", i, gw.pageCache)
		if cfg.gatewayInProcess {
			w.gateways[i], err = gw.cache.StartGateway(ctx, gw.pageCache)
		} else {
			name := fmt.Sprintf("gateway-%d", i+1)
			var profile string
			if cfg.profileDir != "" { // a profile of the process's whole life
				profile = filepath.Join(cfg.profileDir, "b1-"+name+".cpu.pprof")
			}
			w.gateways[i], err = gw.cache.StartGatewayProcess(ctx, cachenode, name, gw.pageCache, profile)
		}
		if err != nil {
			return nil, err
		}
	}
	w.minioS3 = benchcache.NewS3Client(w.minio.Endpoint, w.minio.Region, w.minio.AccessKey, w.minio.SecretKey)
	env.logf("starting nginx")
	if w.nginx, err = startNginx(ctx, env.nginxBin, filepath.Join(w.dir, "nginx"), nginxParams{
		ServerCert: filepath.Join(w.dir, "server.crt"), ServerKey: filepath.Join(w.dir, "server.key"), CA: w.caFile,
		MinIO: hostPort(w.minio.Endpoint), Slice: cfg.chunkSize, CacheBytes: 4 * cfg.objectSize,
	}); err != nil {
		return nil, err
	}
	w.onClose(w.nginx.Stop)
	w.nginxHTTP = newHTTPClient(w.tenantTL)
	w.onClose(w.nginxHTTP.CloseIdleConnections)
	// Any keys: nginx verifies no signature (it drops it).
	w.nginxS3 = benchcache.NewS3Client("http://"+w.nginx.plainAddr, w.minio.Region, benchcache.GatewayAccessKey, benchcache.GatewaySecretKey)
	if err := w.startRaw(); err != nil {
		return nil, err
	}
	env.logf("warming the node, the gateways' page cache and nginx")
	if err := w.warm(ctx); err != nil {
		return nil, err
	}
	return w, nil
}

// startMinIO runs MinIO with the object in a bucket that anonymous users
// may read: nginx proxies to it without signing (MinIO would refuse a
// request signed for another host).
func (w *world) startMinIO(ctx context.Context, bin string) error {
	var err error
	if w.minio, err = minioproc.Start(ctx, bin, filepath.Join(w.dir, "minio")); err != nil {
		return err
	}
	w.onClose(w.minio.Stop)
	s3c := w.minio.Client()
	if err := w.minio.CreateBucket(ctx, benchBucket); err != nil {
		return err
	}
	policy, _ := json.Marshal(map[string]any{
		"Version": "2012-10-17",
		"Statement": []map[string]any{{
			"Effect": "Allow", "Principal": map[string]any{"AWS": []string{"*"}},
			"Action": []string{"s3:GetObject"}, "Resource": []string{"arn:aws:s3:::" + benchBucket + "/*"},
		}},
	})
	if _, err := s3c.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: aws.String(benchBucket), Policy: aws.String(string(policy))}); err != nil {
		return fmt.Errorf("public-read policy: %w", err)
	}
	_, err = s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(benchBucket), Key: aws.String(benchKey), Body: bytes.NewReader(w.payload)})
	return err
}

// newHTTPClient is the plain net/http client of the bare node and nginx
// (mTLS) columns: HTTP/1.1, keep-alive, net/http's default buffers (as
// internal/client), with the tenant's certificate when tlsConfig is set.
func newHTTPClient(tlsConfig *tls.Config) *http.Client {
	t := &http.Transport{
		MaxIdleConns: 256, MaxIdleConnsPerHost: 256, DisableCompression: true,
		TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{},
	}
	if tlsConfig != nil {
		t.TLSClientConfig = tlsConfig.Clone()
		t.TLSClientConfig.NextProtos = []string{"http/1.1"}
	}
	return &http.Client{Transport: t}
}

// startRaw runs the ceiling: a bare TLS 1.3 server (the node's TLS config,
// client certificates required) that answers a 16-byte request (offset,
// length) with those bytes of the object, from memory. No HTTP at all.
func (w *world) startRaw() error {
	ln, err := tls.Listen("tcp", "127.0.0.1:0", w.serverTL)
	if err != nil {
		return err
	}
	w.rawLn, w.rawAddr = ln, ln.Addr().String()
	w.onClose(func() { _ = ln.Close() })
	src := w.payload
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				var hdr [16]byte
				for {
					if _, err := io.ReadFull(c, hdr[:]); err != nil {
						return
					}
					off, n := binary.BigEndian.Uint64(hdr[:8]), binary.BigEndian.Uint64(hdr[8:])
					if off+n > uint64(len(src)) {
						return
					}
					if _, err := c.Write(src[off : off+n]); err != nil {
						return
					}
				}
			}()
		}
	}()
	return nil
}

// warm reads every chunk through each cache once, then checks the second
// pass hits: the nodes' RAM tier, the gateways' page caches (and that the
// TTL gateway keeps the metadata) and nginx's proxy_cache on both
// listeners.
func (w *world) warm(ctx context.Context) error {
	buf := make([]byte, w.cfg.chunkSize)
	chunks := w.cfg.objectSize / w.cfg.chunkSize
	// The node first, alone: a gateway with a page cache reads ahead, and
	// its read-ahead of a chunk the node has not cached yet would race
	// the node's own warming read of it (two misses for one chunk).
	for i := int64(0); i < chunks; i++ {
		if _, err := w.readNodeHTTP(ctx, i*w.cfg.chunkSize, buf); err != nil {
			return fmt.Errorf("warming node chunk %d: %w", i, err)
		}
	}
	for pass := 0; pass < 2; pass++ {
		for i := int64(0); i < chunks; i++ {
			off := i * w.cfg.chunkSize
			if _, err := w.readNodeHTTP(ctx, off, buf); err != nil {
				return fmt.Errorf("warming node chunk %d: %w", i, err)
			}
			for g, gw := range w.gateways {
				if err := w.readS3(ctx, gw.S3, off, buf); err != nil {
					return fmt.Errorf("warming gateway %d, chunk %d: %w", g, i, err)
				}
			}
			hit, err := w.readNginx(ctx, off, buf)
			if err != nil {
				return fmt.Errorf("warming nginx, slice %d: %w", i, err)
			}
			hitS3, err := w.readNginxS3(ctx, off, buf)
			if err != nil {
				return fmt.Errorf("warming nginx over plain HTTP, slice %d: %w", i, err)
			}
			if pass == 1 && (!hit || !hitS3) {
				return fmt.Errorf("nginx did not serve slice %d from its cache on the second pass (mTLS %v, plain %v)", i, hit, hitS3)
			}
		}
	}
	for _, gw := range w.gateways[1:] {
		hits, err := gw.Counter(ctx, "distcache_client_page_cache_requests_total", "result", "hit")
		if err != nil {
			return err
		}
		if hits < float64(chunks) {
			return fmt.Errorf("a gateway's page cache answered %v of %d reads of the second pass", hits, chunks)
		}
	}
	for _, gw := range w.gateways[1:] {
		kept, err := gw.Counter(ctx, "distcache_client_metadata_cache_requests_total", "result", "hit")
		if err != nil {
			return err
		}
		if kept == 0 {
			return fmt.Errorf("a gateway kept no metadata on a lease: every read asks its node")
		}
	}
	if misses := benchkit.Counter(w.nodeReg, "distcache_chunk_reads_total", "result", "miss"); misses != float64(chunks) {
		return fmt.Errorf("the node missed %v times warming %d chunks (want one miss per chunk)", misses, chunks)
	}
	return nil
}

func hostPort(endpoint string) string {
	_, hp, _ := cutScheme(endpoint)
	return hp
}

func cutScheme(u string) (scheme, rest string, ok bool) {
	for i := 0; i+2 < len(u); i++ {
		if u[i:i+3] == "://" {
			return u[:i], u[i+3:], true
		}
	}
	return "", u, false
}

var errShort = errors.New("short read")
