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
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/distcache/distcache/internal/client"
	"github.com/distcache/distcache/internal/gateway"
	"github.com/distcache/distcache/internal/metrics"
	"github.com/distcache/distcache/internal/minioproc"
	"github.com/distcache/distcache/internal/node"
	"github.com/distcache/distcache/internal/pki"
	"github.com/distcache/distcache/internal/ring"
	"github.com/distcache/distcache/internal/s3backend"
	"github.com/distcache/distcache/internal/sigv4"
	"github.com/distcache/distcache/internal/store"
	"github.com/distcache/distcache/internal/tenancy"
)

const (
	benchBucket, benchKey = "bench", "object.bin"
	benchTenant           = "bench"
	selfName              = "cache-0"
	// The gateway's SigV4 credentials (what an S3 client signs with; not
	// S3's).
	gatewayAccessKey, gatewaySecretKey = "bench-access", "bench-secret-key-0123456789"
)

// world is everything the cells read from: MinIO holding one object, one
// cache node over mTLS (alone in a ring of one, so the ring-aware client
// works as in production), two gateways in front of it (RAM page cache
// off and on), nginx caching MinIO, and a raw TLS server. Every server
// except MinIO and nginx runs in this process.
type world struct {
	cfg     config
	dir     string
	payload []byte // the object's bytes: every read is checked against them

	caFile   string
	serverTL *tls.Config // the node's (and the raw server's) TLS
	tenantTL *tls.Config // the tenant's client certificate

	minio      *minioproc.Server
	store      *store.Store
	nodeReg    *prometheus.Registry
	nodeSrv    *http.Server
	nodeAddr   string
	meta       client.Meta // the version the Go client reads (one Stat, as a user would)
	goClient   *client.Client
	nodeHTTP   *http.Client
	gateways   [2]*gatewayWorld // page cache off, on
	minioHTTP  *http.Client
	nginx      *nginxProc
	nginxHTTP  *http.Client
	rawLn      net.Listener
	rawAddr    string
	cancelCtx  context.CancelFunc
	closeFuncs []func()
}

// gatewayWorld is one in-process gateway and the aws-sdk-go-v2 client of
// its S3 API.
type gatewayWorld struct {
	client *client.Client
	reg    *prometheus.Registry
	srv    *http.Server
	s3     *s3.Client
}

func (w *world) onClose(f func()) { w.closeFuncs = append(w.closeFuncs, f) }

func (w *world) close() {
	for i := len(w.closeFuncs) - 1; i >= 0; i-- {
		w.closeFuncs[i]()
	}
	w.closeFuncs = nil
}

// startWorld brings everything up and warms every cache.
func startWorld(ctx context.Context, env envInfo, cfg config) (_ *world, err error) {
	w := &world{cfg: cfg, dir: env.workDir}
	defer func() {
		if err != nil {
			w.close()
		}
	}()
	wctx, cancel := context.WithCancel(context.Background())
	w.onClose(cancel)

	w.payload = make([]byte, cfg.objectSize)
	_, _ = rand.Read(w.payload)

	if err := w.startPKI(); err != nil {
		return nil, err
	}
	env.logf("starting MinIO")
	if err := w.startMinIO(ctx, env.minioBin); err != nil {
		return nil, err
	}
	env.logf("starting the cache node")
	if err := w.startNode(wctx); err != nil {
		return nil, err
	}
	if w.goClient, err = client.New(ctx, client.Config{Seeds: []string{"https://" + w.nodeAddr}, TLS: w.tenantTL, ChunkSize: cfg.chunkSize}); err != nil {
		return nil, fmt.Errorf("Go client: %w", err)
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
	for i, pageCache := range []int64{0, 2 * cfg.objectSize} {
		env.logf("starting gateway %d (page cache %d bytes)", i, pageCache)
		if w.gateways[i], err = w.startGateway(ctx, pageCache); err != nil {
			return nil, err
		}
	}
	w.minioHTTP = newHTTPClient(nil)
	w.onClose(w.minioHTTP.CloseIdleConnections)
	env.logf("starting nginx")
	if w.nginx, err = startNginx(ctx, env.nginxBin, filepath.Join(w.dir, "nginx"), nginxParams{
		ServerCert: filepath.Join(w.dir, "server.crt"), ServerKey: filepath.Join(w.dir, "server.key"), CA: w.caFile,
		MinIO: hostPort(w.minio.Endpoint), Slice: cfg.chunkSize, CacheBytes: 4 * cfg.objectSize,
	}); err != nil {
		return nil, err
	}
	w.onClose(w.nginx.stop)
	w.nginxHTTP = newHTTPClient(w.tenantTL)
	w.onClose(w.nginxHTTP.CloseIdleConnections)
	if err := w.startRaw(); err != nil {
		return nil, err
	}
	env.logf("warming the node, the gateways' page cache and nginx")
	if err := w.warm(ctx); err != nil {
		return nil, err
	}
	return w, nil
}

func (w *world) startPKI() error {
	ca, err := pki.NewCA("distcache bench CA", 24*time.Hour)
	if err != nil {
		return err
	}
	server, err := ca.IssueServer("localhost", []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)}, 24*time.Hour)
	if err != nil {
		return err
	}
	tenant, err := ca.IssueClient(pki.Identity{Kind: pki.KindTenant, Name: benchTenant}, 24*time.Hour)
	if err != nil {
		return err
	}
	peer, err := ca.IssueClient(pki.Identity{Kind: pki.KindPeer, Name: selfName}, 24*time.Hour)
	if err != nil {
		return err
	}
	for name, leaf := range map[string]*pki.Leaf{"server": server, "tenant": tenant, "peer": peer} {
		if err := pki.WriteFiles(w.dir, name, leaf); err != nil {
			return err
		}
	}
	w.caFile = filepath.Join(w.dir, "ca.crt")
	if err := os.WriteFile(w.caFile, ca.CertPEM, 0o600); err != nil {
		return err
	}
	if w.serverTL, err = pki.ServerTLSConfig(filepath.Join(w.dir, "server.crt"), filepath.Join(w.dir, "server.key"), w.caFile); err != nil {
		return err
	}
	w.tenantTL, err = pki.ClientTLSConfig(filepath.Join(w.dir, "tenant.crt"), filepath.Join(w.dir, "tenant.key"), w.caFile)
	return err
}

// startMinIO runs MinIO with the object in a bucket that anonymous users
// may read: nginx proxies to it without signing (MinIO would refuse a
// request signed for another host), and the MinIO column reads it with the
// same plain HTTP client as the other columns.
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

func (w *world) startNode(ctx context.Context) error {
	logger := slog.New(slog.DiscardHandler)
	tenantsFile := filepath.Join(w.dir, "tenants.yaml")
	if err := os.WriteFile(tenantsFile, []byte("tenants:\n  - name: "+benchTenant+"\n    buckets: ["+benchBucket+"]\n"), 0o600); err != nil {
		return err
	}
	tenants, err := tenancy.Watch(ctx, tenantsFile, logger)
	if err != nil {
		return err
	}
	w.nodeReg = prometheus.NewRegistry()
	m := metrics.NewNode(w.nodeReg)
	if w.store, err = store.Open(store.Options{Dir: filepath.Join(w.dir, "store"), DiskBytes: max(4*w.cfg.objectSize, 64<<20),
		RAMBytes: 2 * w.cfg.objectSize, Logger: logger}); err != nil {
		return err
	}
	w.onClose(func() { _ = w.store.Close() })
	be, err := s3backend.New(s3backend.Config{Endpoint: w.minio.Endpoint, Region: w.minio.Region, UsePathStyle: true,
		Default: s3backend.Credentials{AccessKeyID: w.minio.AccessKey, SecretAccessKey: w.minio.SecretKey}, Observer: m})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	w.nodeAddr = ln.Addr().String()
	r, err := ring.New(ring.Spec{Epoch: 1, Zone: "bench", Hash: ring.HashParams{Algorithm: ring.AlgorithmRendezvousXXHash64},
		Members: []ring.Member{{Name: selfName, Address: w.nodeAddr, Weight: 100, State: ring.StateActive}}})
	if err != nil {
		ln.Close()
		return err
	}
	holder := &ring.Holder{}
	holder.Store(r)
	peerTLS, err := pki.ClientTLSConfig(filepath.Join(w.dir, "peer.crt"), filepath.Join(w.dir, "peer.key"), w.caFile)
	if err != nil {
		ln.Close()
		return err
	}
	srv, err := node.New(node.Config{ChunkSize: w.cfg.chunkSize, Immutable: true, Ring: holder, Self: selfName,
		Peers: &node.Peers{Client: &http.Client{Transport: &http.Transport{TLSClientConfig: peerTLS}}}}, w.store, be, tenants, m, logger)
	if err != nil {
		ln.Close()
		return err
	}
	// As `cachenode serve` does: HTTP/1.1 over the node's TLS config.
	w.nodeSrv = &http.Server{Handler: srv.Handler(), TLSConfig: w.serverTL,
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){}, ErrorLog: log.New(io.Discard, "", 0)}
	srv.ServeReads(w.nodeSrv) // as `cachenode serve` does
	go func() { _ = w.nodeSrv.Serve(tls.NewListener(node.BatchingListener(ln), w.serverTL)) }()
	w.onClose(func() { _ = w.nodeSrv.Close() })
	return nil
}

// startGateway runs a gateway as `cachenode gateway` wires one (the
// tenant's certificate, its default pages and read geometry, the limit on
// unsent bytes) on plain HTTP loopback, as S3 clients next to compute
// reach it.
func (w *world) startGateway(ctx context.Context, pageCacheBytes int64) (*gatewayWorld, error) {
	g := &gatewayWorld{reg: prometheus.NewRegistry()}
	var err error
	seeds := []string{"https://" + w.nodeAddr}
	if g.client, err = client.New(ctx, client.Config{Seeds: seeds, TLS: w.tenantTL, ChunkSize: w.cfg.chunkSize,
		PageCacheBytes: pageCacheBytes, PageBytes: gateway.DefaultPageBytes, Registerer: g.reg}); err != nil {
		return nil, err
	}
	w.onClose(func() { _ = g.client.Close() })
	piece, ahead := gateway.ReadGeometry(w.cfg.chunkSize, gateway.DefaultPageBytes, pageCacheBytes > 0, client.DefaultParallelism)
	gw, err := gateway.New(gateway.Config{
		Verifier: &sigv4.Verifier{Store: sigv4.NewStaticStore(sigv4.Credentials{AccessKeyID: gatewayAccessKey, SecretAccessKey: gatewaySecretKey}),
			Service: "s3"},
		Cache: g.client, Domains: []string{"localhost"}, ReadPieceBytes: piece, ReadAhead: ahead,
		Upstream: &gateway.Upstream{Client: gateway.NewUpstreamClient(w.tenantTL, nil, time.Minute),
			Nodes: gateway.RingNodes(g.client, seeds), Owners: gateway.RingOwners(g.client, benchTenant)},
	})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	g.srv = &http.Server{Handler: gw, ErrorLog: log.New(io.Discard, "", 0)}
	go func() { _ = g.srv.Serve(gateway.LimitUnsent(ln, gateway.DefaultClientUnsentBytes)) }()
	w.onClose(func() { _ = g.srv.Close() })
	g.s3 = s3.New(s3.Options{
		Region: "us-east-1", BaseEndpoint: aws.String("http://" + ln.Addr().String()), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(gatewayAccessKey, gatewaySecretKey, ""),
		// The SDK's default transport keeps 10 idle connections per host:
		// with 32 clients the rest would reconnect on every request.
		HTTPClient: awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
			t.MaxIdleConns, t.MaxIdleConnsPerHost = 256, 256
		}),
	})
	return g, nil
}

// newHTTPClient is the plain net/http client of the node, nginx and MinIO
// columns: HTTP/1.1, keep-alive, net/http's default buffers (as
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
// pass hits: the node's RAM tier, the page cache of the second gateway and
// nginx's proxy_cache.
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
			if err := w.readGateway(ctx, w.gateways[1], off, buf); err != nil {
				return fmt.Errorf("warming the gateway's page cache, chunk %d: %w", i, err)
			}
			hit, err := w.readNginx(ctx, off, buf)
			if err != nil {
				return fmt.Errorf("warming nginx, slice %d: %w", i, err)
			}
			if pass == 1 && !hit {
				return fmt.Errorf("nginx did not serve slice %d from its cache on the second pass", i)
			}
		}
	}
	if hits := counter(w.gateways[1].reg, "distcache_client_page_cache_requests_total", "result", "hit"); hits < float64(chunks) {
		return fmt.Errorf("the gateway's page cache answered %v of %d reads of the second pass", hits, chunks)
	}
	if misses := counter(w.nodeReg, "distcache_chunk_reads_total", "result", "miss"); misses != float64(chunks) {
		return fmt.Errorf("the node missed %v times warming %d chunks (want one miss per chunk)", misses, chunks)
	}
	return nil
}

// counter sums the samples of a counter family whose label has value.
func counter(g prometheus.Gatherer, name, label, value string) float64 {
	mfs, err := g.Gather()
	if err != nil {
		return -1
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
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
