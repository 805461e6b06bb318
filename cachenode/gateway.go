package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/yaml"

	"github.com/distcache/distcache/internal/client"
	"github.com/distcache/distcache/internal/embed"
	"github.com/distcache/distcache/internal/gateway"
)

// gatewayFlags are the settings of `cachenode gateway`. Every flag can also
// be given as an environment variable (DISTCACHE_ + upper-case name with
// underscores), like `cachenode serve`.
type gatewayFlags struct {
	listen, metricsListen           string
	listenTLSCert, listenTLSKey     string
	nodes                           string
	zone                            string
	fallbackNodes                   string
	fallback                        []client.ZoneSeeds // parsed from fallbackNodes
	tlsCert, tlsKey, ca             string
	tenant                          string
	accessKey, secretKey, credsFile string
	region                          string
	domains                         string
	chunkSize, pageCacheBytes       byteSize
	pageBytes                       givenByteSize
	readBufferBytes                 byteSize
	clientUnsentBytes               byteSize
	netHTTPReads                    bool
	prefault                        bool
	parallelism                     int
	timeout, passthroughTimeout     time.Duration
	clientWriteTimeout              time.Duration
	lifecycleFlags
}

// gatewayCredentials is the --credentials-file format (YAML or JSON), with
// the field names of the tenants file.
type gatewayCredentials struct {
	AccessKeyID     string `json:"accessKeyID"`
	SecretAccessKey string `json:"secretAccessKey"`
}

func parseGatewayFlags(args []string) (*gatewayFlags, error) {
	f := &gatewayFlags{pageCacheBytes: 256 << 20, clientUnsentBytes: gateway.DefaultClientUnsentBytes,
		pageBytes: givenByteSize{byteSize: gateway.DefaultPageBytes}}
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	fs.StringVar(&f.listen, "listen", DefaultGatewayListen, "address of the S3 API (plain HTTP unless --listen-tls-cert is set)")
	fs.StringVar(&f.listenTLSCert, "listen-tls-cert", "", "serve the S3 API over TLS with this certificate (PEM)")
	fs.StringVar(&f.listenTLSKey, "listen-tls-key", "", "private key of --listen-tls-cert")
	fs.StringVar(&f.metricsListen, "metrics-listen", ":9091", "address of the plain HTTP port for /metrics, /healthz and /readyz (empty: off)")
	fs.StringVar(&f.nodes, "nodes", "", "comma-separated cache node URLs (https://host:port) to learn the ring from: with --zone, nodes of that zone")
	fs.StringVar(&f.zone, "zone", "", "the zone the gateway reads in: it routes by that zone's ring only and refuses a ring of another zone (empty: any ring)")
	fs.StringVar(&f.fallbackNodes, "fallback-nodes", "", "the cache's other zones, as comma-separated zone=https://host:port (a zone may appear several times): read through when no node of --zone can be reached, before failing; needs --zone")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "client certificate for the cache nodes (PEM): the tenant's, or a peer certificate with --tenant")
	fs.StringVar(&f.tlsKey, "tls-key", "", "private key of --tls-cert")
	fs.StringVar(&f.ca, "ca", "", "CA bundle the cache nodes' server certificates chain to; --tls-cert, --tls-key and this are re-read for each new connection when they change")
	fs.StringVar(&f.tenant, "tenant", "", "tenant to act for (required with a peer certificate)")
	fs.StringVar(&f.accessKey, "access-key", "", "access key ID S3 clients sign with (not an S3 credential)")
	fs.StringVar(&f.secretKey, "secret-key", "", "secret access key S3 clients sign with (prefer --credentials-file or DISTCACHE_SECRET_KEY)")
	fs.StringVar(&f.credsFile, "credentials-file", "", "YAML or JSON file with accessKeyID and secretAccessKey (instead of the two flags)")
	fs.StringVar(&f.region, "region", "", "region clients must sign for (empty: any)")
	fs.StringVar(&f.domains, "domain", "localhost", "comma-separated host names of the gateway; requests to sub-domains (virtual-hosted style) are refused")
	fs.Var(&f.chunkSize, "chunk-size", "the cache's chunk size (0: learn it from the nodes)")
	fs.Var(&f.pageCacheBytes, "page-cache-bytes", "RAM page cache, e.g. 1Gi (0 disables it)")
	fs.BoolVar(&f.prefault, "page-cache-prefault", true, "fault the page cache's memory in at start (--page-cache-bytes and a quarter more), before the gateway is ready, so that filling it never waits for fresh memory")
	fs.Var(&f.pageBytes, "page-bytes", "unit of the page cache and of GetObject's reads, a divisor of the chunk size (the default applies where it divides it; 0 or at least the chunk size: whole chunks)")
	fs.IntVar(&f.parallelism, "parallelism", client.DefaultParallelism, "chunks' worth of pages fetched ahead, within a GetObject's range and across reads of one object")
	fs.Var(&f.readBufferBytes, "read-buffer-bytes", "most bytes all GetObjects hold at once in fetched chunks (0: 256Mi or a quarter of --page-cache-bytes, whichever is more; at least --parallelism chunks); past it GetObjects wait and read ahead less")
	fs.BoolVar(&f.netHTTPReads, "net-http-reads", false, "serve GET and HEAD with Go's net/http server like every other request, instead of the gateway's own read server (which wakes the process once per request instead of three times); plain HTTP only")
	fs.Var(&f.clientUnsentBytes, "client-unsent-bytes", "most bytes of a response the kernel queues unsent on an S3 client's connection (TCP_NOTSENT_LOWAT, Linux); a client that stops reading a range then costs about this and its receive window, not the several MiB of a grown send buffer (0: the kernel's default)")
	fs.DurationVar(&f.timeout, "timeout", client.DefaultTimeout, "timeout of one chunk or metadata request to one node")
	fs.DurationVar(&f.passthroughTimeout, "passthrough-timeout", 5*time.Minute, "longest wait for S3's answer to a passed-through operation")
	fs.DurationVar(&f.clientWriteTimeout, "client-write-timeout", gateway.DefaultClientWriteTimeout, "longest a GetObject waits for its client to take one chunk of the body; a client stalled longer is dropped (it holds read buffers meanwhile); 0: never")
	f.lifecycleFlags.register(fs)
	if err := parseFlags(fs, args, func() map[string]string {
		return map[string]string{"nodes": f.nodes, "tls-cert": f.tlsCert, "tls-key": f.tlsKey, "ca": f.ca}
	}); err != nil {
		return nil, err
	}
	if f.clientUnsentBytes > 1<<30 {
		return nil, errors.New("--client-unsent-bytes: at most 1Gi")
	}
	if (f.listenTLSCert == "") != (f.listenTLSKey == "") {
		return nil, errors.New("--listen-tls-cert and --listen-tls-key go together")
	}
	if f.credsFile != "" {
		if f.accessKey != "" || f.secretKey != "" {
			return nil, errors.New("give --credentials-file or --access-key/--secret-key, not both")
		}
		data, err := os.ReadFile(f.credsFile)
		if err != nil {
			return nil, err
		}
		var c gatewayCredentials
		if err := yaml.UnmarshalStrict(data, &c); err != nil {
			return nil, fmt.Errorf("%s: %w", f.credsFile, err)
		}
		f.accessKey, f.secretKey = c.AccessKeyID, c.SecretAccessKey
	}
	if f.accessKey == "" || f.secretKey == "" {
		return nil, errors.New("an access key and a secret key are required (--access-key/--secret-key or --credentials-file)")
	}
	if f.parallelism < 1 {
		return nil, errors.New("--parallelism must be at least 1")
	}
	var err error
	if f.fallback, err = parseFallbackNodes(f.fallbackNodes, f.zone); err != nil {
		return nil, err
	}
	if p := f.pageBytes.byteSize; f.chunkSize > 0 && p > 0 && p < f.chunkSize && f.chunkSize%p != 0 {
		if f.pageBytes.given {
			return nil, fmt.Errorf("--page-bytes %s does not divide --chunk-size %s", p, f.chunkSize)
		}
		f.pageBytes.byteSize = 0 // the default does not fit this chunk size: whole chunks
	}
	return f, nil
}

// DefaultGatewayListen is the default --listen of `cachenode gateway`. Its
// port is not 9000, which ClickHouse, the cache's first client, listens
// on for its native protocol on the same host.
const DefaultGatewayListen = "127.0.0.1:8099"

// parseFallbackNodes parses --fallback-nodes (zone=URL,...) into zones in
// the order they first appear, each with its seeds in order.
func parseFallbackNodes(s, zone string) ([]client.ZoneSeeds, error) {
	var out []client.ZoneSeeds
	at := map[string]int{}
	for _, item := range splitList(s) {
		z, u, ok := strings.Cut(item, "=")
		z, u = strings.TrimSpace(z), strings.TrimSpace(u)
		switch {
		case !ok || z == "" || u == "":
			return nil, fmt.Errorf("--fallback-nodes: %q is not zone=https://host:port", item)
		case zone == "":
			return nil, errors.New("--fallback-nodes needs --zone (the zone whose nodes --nodes names)")
		case z == zone:
			return nil, fmt.Errorf("--fallback-nodes: %q names the gateway's own zone (--zone %s); its nodes go in --nodes", item, zone)
		}
		i, seen := at[z]
		if !seen {
			i = len(out)
			at[z] = i
			out = append(out, client.ZoneSeeds{Zone: z})
		}
		out[i].Seeds = append(out[i].Seeds, u)
	}
	return out, nil
}

// clientWriteTimeoutOrNone is --client-write-timeout as gateway.Config
// takes it (0 there means the default, negative none).
func (f *gatewayFlags) clientWriteTimeoutOrNone() time.Duration {
	if f.clientWriteTimeout <= 0 {
		return -1
	}
	return f.clientWriteTimeout
}

func splitList(s string) []string {
	var out []string
	for v := range strings.SplitSeq(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// gatewayConfig maps the flags onto the gateway's configuration.
func (f *gatewayFlags) gatewayConfig(reg *prometheus.Registry, log *slog.Logger) embed.GatewayConfig {
	return embed.GatewayConfig{
		Listen: f.listen, ListenTLSCert: f.listenTLSCert, ListenTLSKey: f.listenTLSKey, MetricsListen: f.metricsListen,
		ClientUnsentBytes: int64(f.clientUnsentBytes),
		NetHTTPReads:      f.netHTTPReads,
		Nodes:             splitList(f.nodes), Zone: f.zone, Fallback: f.fallback,
		TLSCert: f.tlsCert, TLSKey: f.tlsKey, CA: f.ca, Tenant: f.tenant,
		AccessKey: f.accessKey, SecretKey: f.secretKey, Region: f.region, Domains: splitList(f.domains),
		ChunkSize: int64(f.chunkSize), PageCacheBytes: int64(f.pageCacheBytes), PageBytes: int64(f.pageBytes.byteSize),
		Prefault: f.prefault, Parallelism: f.parallelism, Timeout: f.timeout, ReadBufferBytes: int64(f.readBufferBytes),
		PassthroughTimeout: f.passthroughTimeout, ClientWriteTimeout: f.clientWriteTimeoutOrNone(),
		Registry: reg, Logger: log,
	}
}

func (f *gatewayFlags) start(ctx context.Context, reg *prometheus.Registry, log *slog.Logger) (server, error) {
	return embed.StartGateway(ctx, f.gatewayConfig(reg, log))
}
