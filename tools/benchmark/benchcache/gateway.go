package benchcache

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/distcache/distcache/internal/embed"
	"github.com/distcache/distcache/internal/freeport"
	"github.com/distcache/distcache/internal/gateway"
	"github.com/distcache/distcache/tools/benchmark/benchkit"
)

// Gateway is a gateway in front of a Cache, in this process or a
// `cachenode gateway` process of its own, and an aws-sdk-go-v2 client of
// its S3 API.
type Gateway struct {
	Reg    *prometheus.Registry // its metrics and its client's (in-process only)
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

// gatewayReadyTimeout bounds the wait for a gateway to reach its nodes: a
// loaded machine slows a run down rather than failing it.
const gatewayReadyTimeout = time.Minute

// StartGateway runs a gateway assembled by embed.StartGateway as `cachenode
// gateway` assembles one by default (the tenant's certificate, 1 MiB
// pages, the read geometry the nodes' chunk size gives, the limit on
// unsent bytes), with a RAM page cache of pageCacheBytes (0: none), on
// plain HTTP loopback, as S3 clients next to compute reach it, and waits
// until it serves.
func (c *Cache) StartGateway(ctx context.Context, pageCacheBytes int64) (*Gateway, error) {
	g := &Gateway{Reg: prometheus.NewRegistry(), AccessKey: GatewayAccessKey, SecretKey: GatewaySecretKey}
	eg, err := embed.StartGateway(context.WithoutCancel(ctx), embed.GatewayConfig{
		Listen: "127.0.0.1:0", ClientUnsentBytes: gateway.DefaultClientUnsentBytes,
		Nodes: c.Seeds(), TLSCert: c.PKI.file("tenant.crt"), TLSKey: c.PKI.file("tenant.key"), CA: c.PKI.CAFile,
		AccessKey: g.AccessKey, SecretKey: g.SecretKey, Domains: []string{"localhost"},
		ChunkSize: c.cfg.ChunkSize, PageCacheBytes: pageCacheBytes, PageBytes: gateway.DefaultPageBytes,
		Registry: g.Reg,
	})
	if err != nil {
		return nil, err
	}
	c.onClose(eg.Close)
	wctx, cancel := context.WithTimeout(ctx, gatewayReadyTimeout)
	defer cancel()
	if err := eg.WaitReady(wctx); err != nil {
		return nil, err
	}
	g.URL = eg.URL()
	g.S3 = NewS3Client(g.URL, "us-east-1", g.AccessKey, g.SecretKey)
	return g, nil
}

// StartGatewayProcess runs `cachenode gateway` (the binary bin) named
// name (its log is NAME.log in the cache's Dir) with its defaults, the
// tenant's certificate and a RAM page cache of pageCacheBytes (0: none),
// on plain HTTP loopback: a server of its own, as nginx is, not sharing
// this process's scheduler with the clients. cpuProfile, when set, is
// where the process writes a CPU profile of its whole life.
func (c *Cache) StartGatewayProcess(ctx context.Context, bin, name string, pageCacheBytes int64, cpuProfile string) (*Gateway, error) {
	addrs, err := freeport.Several(2)
	if err != nil {
		return nil, err
	}
	listen, ops := addrs[0], addrs[1]
	env := []string{"DISTCACHE_SECRET_KEY=" + GatewaySecretKey}
	if cpuProfile != "" {
		env = append(env, "DISTCACHE_CPU_PROFILE="+cpuProfile)
	}
	p, err := benchkit.StartProcess(bin, filepath.Join(c.cfg.Dir, name+".log"), name, env,
		"gateway", "--listen", listen, "--metrics-listen", ops, "--nodes", strings.Join(c.Seeds(), ","),
		"--tls-cert", c.PKI.file("tenant.crt"), "--tls-key", c.PKI.file("tenant.key"),
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
